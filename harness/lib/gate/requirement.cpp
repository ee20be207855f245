#include "gate/requirement.hpp"

#include "fingerprint/fingerprint.hpp"
#include "fingerprint/host_identity.hpp"
#include "util/suggest.hpp"

#include <algorithm>
#include <set>

namespace pitfall::runner {
namespace {

/// The findings that say "no GPU here": what a node required to match a profile without a GPU
/// shows by design.
const std::set<std::string> no_gpu_findings{"no-driver", "no-device", "built-without-cuda"};

/// A profile that holds machines without a GPU: its match asks for gpu_count 0.
bool profile_without_gpu(const profile& p) {
    const auto count = p.match.find("gpu_count");
    return count != p.match.end() && count->is_number_integer() && count->get<long long>() == 0;
}

int gpu_count(const nlohmann::json& summary) {
    const auto count = summary.find("gpu_count");
    return count != summary.end() && count->is_number_integer() ? count->get<int>() : 0;
}

/// The first error the requirement does not accept; nullptr when there is none.
const finding* first_unaccepted_error(const std::string& required, const machine_view& view) {
    for (const auto& f : view.doctor.findings)
        if (f.severity == finding_severity::error && !accepted_by_requirement(required, view, f))
            return &f;
    return nullptr;
}

} // namespace

status examine_machine(const std::string& probe, const std::string& log_dir,
                       const scenario_index& index, const std::string& expected_dir,
                       bool reuse_probe, machine_view& view, double probe_seconds) {
    view.fingerprint = take_fingerprint(probe, log_dir, reuse_probe, probe_seconds);
    std::vector<std::pair<std::string, std::string>> programs;
    for (const auto& s : index.scenarios)
        programs.emplace_back(s.description.name, s.program);
    view.fingerprint["build_images"] = kept_build_images(programs);
    view.summary = fingerprint_summary(view.fingerprint);
    view.fingerprint_id = fingerprint_id(view.summary);
    view.host_id = host_id_of(view.fingerprint);
    view.doctor = diagnose(view.fingerprint);
    // Only the profiles' match is needed: no scenario's baselines are read.
    const std::set<std::string> none;
    PITFALL_ASSIGN_OR_RETURN(view.profiles, load_profiles(expected_dir, index, &none));
    PITFALL_ASSIGN_OR_RETURN(view.choice, choose_profile(view.profiles, view.summary, ""));
    return status::ok();
}

status check_requirement(const std::string& required, const std::vector<profile>& profiles,
                         const std::string& flag) {
    std::vector<std::string> known{require_gpu};
    for (const auto& p : profiles)
        if (!p.overlay)
            known.push_back(p.name);
    if (std::find(known.begin(), known.end(), required) != known.end())
        return status::ok();
    std::string list;
    for (const auto& k : known)
        list += (list.empty() ? "" : ", ") + k;
    return status::error(pitfall_error::bad_usage,
                         flag + " " + required + ": expected gpu or a profile's name (" + list +
                             ")" + did_you_mean(required, known),
                         stage::none);
}

bool accepted_by_requirement(const std::string& required, const machine_view& view,
                             const finding& f) {
    if (required == require_gpu || view.choice.chosen == nullptr)
        return false;
    return view.choice.chosen->name == required && profile_without_gpu(*view.choice.chosen) &&
           no_gpu_findings.count(f.id) != 0;
}

std::optional<std::string> unmet_requirement(const std::string& required,
                                             const machine_view& view) {
    const finding* error = first_unaccepted_error(required, view);
    const std::string doctor_says = error ? error->title + " [" + error->id + "]" : "";
    if (required != require_gpu &&
        (view.choice.chosen == nullptr || view.choice.chosen->name != required)) {
        const std::string picked =
            view.choice.chosen != nullptr ? "profile " + view.choice.chosen->name : "no profile";
        return "this machine's fingerprint picks " + picked + ", not " + required +
               (doctor_says.empty() ? "" : ": " + doctor_says);
    }
    if (error != nullptr)
        return doctor_says;
    if (required == require_gpu && gpu_count(view.summary) < 1)
        return std::string("no GPU visible to CUDA (gpu_count 0)");
    return std::nullopt;
}

} // namespace pitfall::runner
