// What the gate's steps share, private to harness/lib/gate: the GPUs it visits, running the
// gate cases on one of them, and asking Slurm to drain or resume the node.
#pragma once

#include "gate/gate.hpp"
#include "model/index.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pitfall::runner::gate_parts {

/// One GPU the gate cases run on, alone (CUDA_VISIBLE_DEVICES): NVML's index, UUID and name,
/// or CUDA's index where NVML did not answer. A node without a GPU has one entry with neither.
struct gate_gpu {
    std::optional<int> index;
    std::string uuid;
    std::string name;
    /// The value CUDA_VISIBLE_DEVICES takes for it; "" leaves the variable as it is.
    std::string visible_devices() const;
    nlohmann::json to_json() const;
};

/// The GPUs of a fingerprint (its libraries.nvml.devices, else libraries.cuda.devices); one
/// entry without index where there are none.
std::vector<gate_gpu> gpus_of(const nlohmann::json& fingerprint);

/// The gate cases run with only `gpu` visible, through `pitfall run` as a library call (a run
/// folder under `folder`, its terminal lines kept out of the gate's output), and the doctor's
/// findings over that run's own fingerprint (the GPU seen alone): an error among them that is
/// not in `accepted` (what the requirement accepts of the node) drains too. Returns the GPU's
/// entry of the gate JSON: {index, uuid, name, verdict, findings, cases, failing_cases}, and
/// `why` set to the first reason it did not admit.
nlohmann::json run_gate_cases(const gate_options& options, const gate_gpu& gpu,
                              const std::vector<std::string>& cases, const std::string& folder,
                              const std::set<std::string>& accepted, std::string& why);

/// What the gate asked of Slurm: {mode, action, command, exit_code, error}. Drains `node` with
/// `reason` when `drain`; resumes it after a pass when asked and it was drained by pitfall.
nlohmann::json act_on_slurm(const gate_options& options, const std::string& node, bool drain,
                            bool admitted, const std::string& reason);

} // namespace pitfall::runner::gate_parts
