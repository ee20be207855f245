// Baselines: environment profiles under expected/, the expected outcome of each case, and the
// verdict that compares an observed case with it.
//
//   expected/<profile>/profile.json      {"schema": "pitfall.profile/1", "name", "description",
//                                         "match": {"gpu_count": 0, ...}}
//   expected/<profile>/<scenario>.json   {"schema": "pitfall.expected/1", "scenario",
//                                         "cases": {"cpu.reproduce": {outcome, checks...}}}
#pragma once

#include "index.hpp"
#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pitfall::runner {

struct profile {
    std::string name;
    std::string dir;
    std::string description;
    nlohmann::json match; ///< key -> value (or array of accepted values) of the fingerprint summary
    /// scenario name -> its "cases" object, validated against the index.
    std::map<std::string, nlohmann::json> cases;
};

/// Reads every profile under `expected_dir`, validating each file against the index: an unknown
/// case, outcome status or bound is an error naming the file and field.
status_or<std::vector<profile>> load_profiles(const std::string& expected_dir,
                                             const scenario_index& index);

struct profile_choice {
    const profile* chosen = nullptr; ///< the most specific match; null: none (NO_BASELINE)
    /// Every matching profile, most specific first: a case without an entry in the chosen one is
    /// judged by the next that has one (CPU baselines in a profile that matches every host).
    std::vector<const profile*> chain;
    std::string reason;

    /// The entry for "<backend>.<variant>" of a scenario and the profile it came from.
    std::pair<const nlohmann::json*, const profile*> entry_for(const std::string& scenario,
                                                               const std::string& case_key) const;
};

/// The matching profiles, most specific (most keys) first; ties go by name and the reason says
/// so. `--profile` names the one profile to use, alone.
status_or<profile_choice> choose_profile(const std::vector<profile>& profiles,
                                         const nlohmann::json& summary,
                                         const std::string& override_name);

enum class verdict_kind {
    pass,
    fail,
    numeric_mismatch,
    mem_regression,
    crash,
    timeout,
    unsupported,
    no_baseline
};
const char* to_string(verdict_kind v);
/// FAIL, NUMERIC_MISMATCH, MEM_REGRESSION, CRASH and TIMEOUT fail a run; the rest do not.
bool is_failing(verdict_kind v);

struct verdict {
    verdict_kind kind = verdict_kind::no_baseline;
    std::string reason;
};

/// What was observed of one case, normalised: {"status": ok|error|unsupported|signal|exit|
/// load_error|timeout|not_started, ...}.
struct observation {
    nlohmann::json outcome;
    nlohmann::json result; ///< the scenario's result document, or null
};

/// Compares an observation with the case's baseline entry (null: none).
verdict judge(const observation& observed, const nlohmann::json& expected, const std::string& backend);

} // namespace pitfall::runner
