// Profiles loaded from expected/ and the one chosen for a fingerprint.
#include "judge/baseline.hpp"

#include "judge/baseline_parts.hpp"
#include "judge/timing.hpp"
#include "pitfall/controls.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

namespace pitfall::runner {
using nlohmann::json;
namespace fs = std::filesystem;
using namespace baseline_parts;

namespace {

/// The folders of expected/, each a profile; none where there is no expected/ yet.
status_or<std::vector<fs::path>> profile_folders(const std::string& expected_dir) {
    std::vector<fs::path> dirs;
    std::error_code ec;
    // No folder yet is no baselines yet (a new project before its first bless, which makes
    // it): every case is NO_BASELINE. Something else at that path is bad input.
    const fs::file_status st = fs::status(expected_dir, ec);
    if (st.type() == fs::file_type::not_found)
        return dirs;
    if (ec)
        return bad_input(expected_dir, "", "cannot be read: " + ec.message());
    if (!fs::is_directory(st))
        return bad_input(expected_dir, "", "is not a folder of baselines");
    PITFALL_ASSIGN_OR_RETURN(const std::vector<fs::path> entries, list_folder(expected_dir));
    for (const auto& entry : entries)
        if (fs::is_directory(entry, ec)) // a symlink loop is neither: its profile.json is read
            dirs.push_back(entry);
        else if (ec && ec != std::errc::no_such_file_or_directory)
            return bad_input(entry.string(), "", "cannot be read: " + ec.message());
    return dirs;
}

/// The profile of folder `dir` as its profile.json describes it, without its baselines.
status_or<profile> read_profile(const fs::path& dir) {
    const std::string profile_file = (dir / "profile.json").string();
    PITFALL_ASSIGN_OR_RETURN(const json doc, read_json(profile_file));
    PITFALL_TRY(detail::validate_document("profile", doc, profile_file));
    for (const auto& [key, want] : doc["match"].items())
        PITFALL_TRY(check_range_order(profile_file, detail::pointer_append("/match", key), want));
    if (doc.value("schema", "") != "pitfall.profile/1")
        return bad_input(profile_file, "schema", "expected \"pitfall.profile/1\"");
    if (!doc.contains("match") || !doc["match"].is_object())
        return bad_input(profile_file, "match", "missing (an object of fingerprint keys)");
    for (const auto& [k, v] : doc.items())
        if (k != "schema" && k != "name" && k != "description" && k != "match" && k != "overlay")
            return bad_input(profile_file, k,
                             "unknown key (schema, name, description, match, overlay)");
    if (doc.contains("overlay") && !doc["overlay"].is_boolean())
        return bad_input(profile_file, "overlay", "expected true or false");
    profile p;
    p.name = dir.filename().string();
    if (doc.value("name", p.name) != p.name)
        return bad_input(profile_file, "name", "must equal the folder name '" + p.name + "'");
    p.dir = dir.string();
    p.description = doc.value("description", "");
    p.match = doc["match"];
    p.overlay = doc.value("overlay", false);
    if (p.overlay && p.match.empty())
        return bad_input(profile_file, "match",
                         "an overlay needs a condition (it would apply everywhere)");
    return p;
}

/// The baselines of profile `p` (its folder's <scenario>.json files) read into its cases and
/// ratios: those of `only`'s scenarios where `only` is given.
status read_baselines(const fs::path& dir, const scenario_index& index,
                      const std::set<std::string>* only, profile& p) {
    PITFALL_ASSIGN_OR_RETURN(const std::vector<fs::path> in_dir, list_folder(dir));
    std::vector<fs::path> files;
    for (const auto& entry : in_dir)
        if (entry.extension() == ".json" && entry.filename() != "profile.json")
            files.push_back(entry);
    for (const auto& file : files) {
        const std::string scenario_name = file.stem().string();
        if (only != nullptr && only->count(scenario_name) == 0)
            continue;
        const auto it = std::find_if(
            index.scenarios.begin(), index.scenarios.end(),
            [&](const scenario_entry& s) { return s.description.name == scenario_name; });
        PITFALL_ASSIGN_OR_RETURN(const json expected, read_json(file.string()));
        if (it == index.scenarios.end())
            continue; // a baseline for a scenario this build leaves out (PITFALL_SCENARIOS)
        PITFALL_TRY(detail::validate_document("expected", expected, file.string()));
        if (expected["scenario"].get<std::string>() != scenario_name)
            return bad_input(file.string(), "scenario",
                             "must equal the file name '" + scenario_name + "'");
        PITFALL_TRY(check_validated_expected_file(file.string(), expected, *it));
        p.cases[scenario_name] = expected["cases"];
        if (expected.contains("ratios"))
            p.ratios[scenario_name] = expected["ratios"];
    }
    return status::ok();
}

} // namespace

status_or<std::vector<profile>> load_profiles(const std::string& expected_dir,
                                              const scenario_index& index,
                                              const std::set<std::string>* only) {
    std::vector<profile> profiles;
    PITFALL_ASSIGN_OR_RETURN(const std::vector<fs::path> dirs, profile_folders(expected_dir));
    for (const auto& dir : dirs) {
        PITFALL_ASSIGN_OR_RETURN(profile p, read_profile(dir));
        PITFALL_TRY(read_baselines(dir, index, only, p));
        profiles.push_back(std::move(p));
    }
    return profiles;
}

status_or<profile_choice> choose_profile(const std::vector<profile>& profiles, const json& summary,
                                         const std::string& override_name) {
    profile_choice choice;
    if (!override_name.empty()) {
        for (const auto& p : profiles)
            if (p.name == override_name) {
                if (p.overlay)
                    return status::error(library::pitfall, "bad_usage",
                                         "--profile " + override_name +
                                             ": an overlay (it holds only what its condition "
                                             "changes; it is never the chosen profile): name "
                                             "the GPU's own profile",
                                         stage::init);
                choice.chosen = &p;
                choice.chain = {&p};
                choice.reason = "chosen with --profile";
                return choice;
            }
        std::string known;
        for (const auto& p : profiles)
            known += (known.empty() ? "" : ", ") + p.name;
        return status::error(
            library::pitfall, "bad_usage",
            "--profile " + override_name + ": no such profile (known: " + known + ")", stage::init);
    }
    std::vector<const profile*> regular;
    for (const auto& p : profiles) {
        bool all = true;
        for (const auto& [key, want] : p.match.items())
            all = all && summary.contains(key) && value_matches(want, summary[key]);
        if (all)
            (p.overlay ? choice.overlays : regular).push_back(&p);
    }
    // Most keys first; stable, so profiles with as many keys stay in name order.
    const auto most_keys_first = [](const profile* a, const profile* b) {
        return a->match.size() > b->match.size();
    };
    std::stable_sort(regular.begin(), regular.end(), most_keys_first);
    std::stable_sort(choice.overlays.begin(), choice.overlays.end(), most_keys_first);
    choice.chain = choice.overlays;
    choice.chain.insert(choice.chain.end(), regular.begin(), regular.end());
    if (regular.empty()) {
        choice.reason = "no profile under expected/ matches this environment";
        return choice;
    }
    choice.chosen = regular.front();
    choice.reason = "matches " + choice.chosen->match.dump();
    if (regular.size() > 1 && regular[1]->match.size() == choice.chosen->match.size())
        choice.reason += "; " + regular[1]->name + " matches as specifically (first by name wins)";
    if (!choice.overlays.empty()) {
        choice.reason += "; overlays first:";
        for (const profile* o : choice.overlays)
            choice.reason += " " + o->name;
    }
    if (regular.size() > 1) {
        choice.reason += "; then";
        for (std::size_t i = 1; i < regular.size(); ++i)
            choice.reason += " " + regular[i]->name;
    }
    return choice;
}

std::pair<const json*, const profile*>
profile_choice::entry_for(const std::string& scenario, const std::string& case_key) const {
    for (const profile* p : chain) {
        const auto it = p->cases.find(scenario);
        if (it != p->cases.end() && it->second.contains(case_key))
            return {&it->second[case_key], p};
    }
    return {nullptr, nullptr};
}

std::pair<const json*, const profile*>
profile_choice::ratio_bounds_for(const std::string& scenario, const std::string& key) const {
    for (const profile* p : chain) {
        const auto it = p->ratios.find(scenario);
        if (it != p->ratios.end() && it->second.contains(key))
            return {&it->second[key], p};
    }
    return {nullptr, nullptr};
}

} // namespace pitfall::runner
