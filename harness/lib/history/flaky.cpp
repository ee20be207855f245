// Flaky cases: verdicts grouped by case, build and fingerprint, oldest run first.
#include "history/flaky.hpp"

#include "pitfall/detail/text.hpp"

#include <ostream>
#include <sstream>
#include <tuple>

namespace pitfall::history {
using nlohmann::json;

namespace {

/// One case's runs in one (build, fingerprint) group, read oldest first.
struct case_runs {
    std::vector<std::string> at, folder, verdict;
};

flaky_case summarise(const std::string& key, const std::string& build,
                     const std::string& fingerprint, const case_runs& runs,
                     std::size_t release_after) {
    flaky_case c;
    c.case_key = key;
    c.build = build;
    c.fingerprint_id = fingerprint;
    c.runs = runs.verdict.size();
    for (std::size_t i = 0; i < c.runs; ++i) {
        ++c.verdicts[runs.verdict[i]];
        if (i > 0 && runs.verdict[i] != runs.verdict[i - 1])
            c.flips.push_back({runs.at[i], runs.folder[i], runs.verdict[i - 1], runs.verdict[i]});
        c.trailing_passes = runs.verdict[i] == "PASS" ? c.trailing_passes + 1 : 0;
    }
    c.released = c.trailing_passes >= release_after;
    return c;
}

} // namespace

status_or<std::vector<flaky_case>> flaky_cases(const history_db& db, std::size_t release_after) {
    // The build's identity is its revision where the build recorded one; otherwise its facts
    // (compilers, build type), which at least tell two different builds apart.
    statement query(db, "SELECT c.case_key, COALESCE(r.git_revision, r.build, ''), "
                        "r.fingerprint_id, r.at, r.folder, c.verdict FROM cases c "
                        "JOIN runs r ON r.id = c.run_id ORDER BY c.case_key, c.run_at, r.id");
    PITFALL_TRY(query.prepared("reading the verdicts"));
    using group_key = std::tuple<std::string, std::string, std::string>;
    std::map<group_key, case_runs> groups;
    for (;;) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, query.step("reading the verdicts"));
        if (!row)
            break;
        case_runs& runs = groups[{query.text(0), query.text(1), query.text(2)}];
        runs.at.push_back(query.text(3));
        runs.folder.push_back(query.text(4));
        runs.verdict.push_back(query.text(5));
    }
    std::vector<flaky_case> found;
    for (const auto& [key, runs] : groups) {
        flaky_case c =
            summarise(std::get<0>(key), std::get<1>(key), std::get<2>(key), runs, release_after);
        if (c.verdicts.size() > 1)
            found.push_back(std::move(c));
    }
    return found;
}

namespace {

std::string counts(const std::map<std::string, std::size_t>& m) {
    std::string out;
    for (const auto& [name, n] : m)
        out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    return out;
}

} // namespace

std::string flaky_table(const std::vector<flaky_case>& found, std::size_t release_after) {
    std::ostringstream out;
    if (found.empty())
        out << "no flaky case: every case kept one verdict across the runs of each build and "
               "fingerprint\n";
    for (const auto& c : found) {
        out << c.case_key << ": " << c.runs << " runs, " << counts(c.verdicts) << "; "
            << (c.released ? "released" : "not released") << " (" << c.trailing_passes << " of "
            << release_after << " passing runs in a row)\n"
            << "  build " << c.build << "\n  fingerprint " << c.fingerprint_id << '\n';
        for (const auto& f : c.flips)
            out << "  " << f.at << "  " << f.from << " -> " << f.to << "  " << f.folder << '\n';
    }
    // Text from the database (folders, verdicts edited by hand): never a control sequence.
    return detail::visible_controls(out.str());
}

json flaky_json(const std::vector<flaky_case>& found, std::size_t release_after) {
    json cases = json::array();
    for (const auto& c : found) {
        json flips = json::array();
        for (const auto& f : c.flips)
            flips.push_back({{"at", f.at}, {"folder", f.folder}, {"from", f.from}, {"to", f.to}});
        cases.push_back({{"case", c.case_key},
                         {"build", c.build},
                         {"fingerprint_id", c.fingerprint_id},
                         {"runs", c.runs},
                         {"verdicts", c.verdicts},
                         {"flips", std::move(flips)},
                         {"trailing_passes", c.trailing_passes},
                         {"released", c.released}});
    }
    return {{"schema", "pitfall.history-flaky/1"},
            {"release_after", release_after},
            {"cases", std::move(cases)}};
}

status write_flaky(const history_db& db, std::size_t release_after, bool as_json,
                   std::ostream& out) {
    if (release_after == 0)
        return status::error(pitfall_error::bad_input, "--release-after 0: expected 1 or more",
                             stage::none);
    PITFALL_ASSIGN_OR_RETURN(const auto found, flaky_cases(db, release_after));
    if (as_json)
        out << flaky_json(found, release_after).dump(2, ' ', false, json::error_handler_t::replace)
            << '\n';
    else
        out << flaky_table(found, release_after);
    return status::ok();
}

} // namespace pitfall::history
