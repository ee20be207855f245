// The cases that neither pass nor fail (skips and warnings), grouped by verdict, backend and
// cause as the terminal summary groups them, for the Markdown and HTML reports: a skip count
// always comes with its cause, in text a print or a screenshot keeps.
#include "report/report_parts.hpp"

#include <algorithm>

namespace pitfall::runner::report_parts {

namespace {
/// What the group is keyed by: the observed error's name where an UNSUPPORTED case has one
/// (the same cause in many cases' own words), else the case's reason.
std::string group_key(const json& r) {
    const std::string error = str(obj(r, "observed"), "error");
    if (str(r, "verdict") == "UNSUPPORTED" && !error.empty())
        return error;
    return str(r, "reason");
}
} // namespace

std::vector<quiet_group> quiet_groups(const run_data& run) {
    std::vector<quiet_group> groups;
    for (const auto& r : run.cases) {
        const std::string verdict = str(r, "verdict");
        if (verdict == "PASS" || r.value("failing", false))
            continue;
        const std::string backend = str(r, "backend");
        const std::string key = group_key(r);
        const auto it = std::find_if(groups.begin(), groups.end(), [&](const quiet_group& g) {
            return g.verdict == verdict && g.backend == backend && g.key == key;
        });
        if (it != groups.end()) {
            it->cases.push_back(&r);
            continue;
        }
        groups.push_back({verdict, backend, key, str(r, "reason"), {&r}});
    }
    // A machine that cannot run CUDA explains its CUDA skips in one sentence, as the doctor
    // and the terminal say it.
    const diagnosis machine = machine_of(run);
    if (!machine.cuda_usable()) {
        const auto explained = machine.explained_errors();
        for (auto& g : groups)
            if (g.backend == "cuda" && g.verdict == "UNSUPPORTED" &&
                std::find(explained.begin(), explained.end(), g.key) != explained.end())
                g.cause = machine.headline() + " [" + g.key + "]";
    }
    for (auto& g : groups)
        if (g.cases.size() > 1 && g.cause == str(*g.cases.front(), "reason") && g.key != g.cause)
            g.cause = g.key + " (first: " + g.cause + ")";
    return groups;
}

} // namespace pitfall::runner::report_parts
