// What a job or a node expects of the machine it lands on, and whether this machine is it:
// `pitfall run --require` refuses to start a case on the wrong machine, and `pitfall gate`
// drains a node that is not what its work expects. Both ask once: the probe's facts, the
// doctor's findings over them and the baseline profile they pick (examine_machine).
#pragma once

#include "doctor/doctor.hpp"
#include "judge/baseline.hpp"
#include "model/index.hpp"

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace pitfall::runner {

/// `--require gpu`: a usable GPU, whatever its model and software.
inline constexpr const char* require_gpu = "gpu";

/// One look at this machine: the fingerprint (probe facts plus host), its summary and id, the
/// doctor's findings over it, the profiles and the one the fingerprint picks.
struct machine_view {
    nlohmann::json fingerprint;
    nlohmann::json summary;
    std::string fingerprint_id;
    std::string host_id;
    diagnosis doctor;
    std::vector<profile> profiles; ///< read for their match only (no scenario's baselines)
    profile_choice choice;         ///< points into profiles: never copy a machine_view
    // NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its json fields
    machine_view() = default;
    machine_view(const machine_view&) = delete;
    machine_view& operator=(const machine_view&) = delete;
};

/// Takes the fingerprint (the probe's log goes to `log_dir`; a kept probe answer is used when
/// `reuse_probe`), diagnoses it and chooses the profile from `expected_dir`'s profiles. An
/// error only for an unreadable index or baselines folder. `probe_seconds` bounds the probe.
status examine_machine(const std::string& probe, const std::string& log_dir,
                       const scenario_index& index, const std::string& expected_dir,
                       bool reuse_probe, machine_view& view, double probe_seconds = 30);

/// "gpu" or the name of a profile that can be chosen (not an overlay): otherwise an error that
/// names `flag` and the accepted values.
status check_requirement(const std::string& required, const std::vector<profile>& profiles,
                         const std::string& flag);

/// Whether an error finding is what `required` expects of this machine, and so drains
/// nothing: a node required to match a profile without a GPU (no-gpu, driver-no-device) has no
/// driver, or no device, or a build without CUDA, by design.
bool accepted_by_requirement(const std::string& required, const machine_view& view,
                             const finding& f);

/// Why this machine is not what `required` expects, in the doctor's words; nullopt when it is.
std::optional<std::string> unmet_requirement(const std::string& required, const machine_view& view);

} // namespace pitfall::runner
