// `pitfall gate`: whether this node may take GPU work, decided in seconds before work lands on
// it. It asks the doctor (the probe's facts against docs/cuda-rules.md) and runs the gate cases
// (scenario.json variants marked "gate": true, fast and judged by their outcome) on each visible
// GPU in turn, then admits the node, drains it with a one-line reason, or says it could not
// judge. Slurm's Prolog and HealthCheckProgram and Kubernetes' init containers and
// node-problem-detector read its exit code; docs/gate.md.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace pitfall::runner {

/// The gate's exit codes (the command's help and docs/gate.md say them).
enum gate_exit : int {
    gate_admit = 0,    ///< the node may take GPU work
    gate_drain = 1,    ///< it must not: a finding or a gate case says why
    gate_usage = 2,    ///< bad usage (a flag, a requirement no profile has)
    gate_unjudged = 3, ///< the gate itself could not judge: never a drain
};

enum class slurm_mode { none, prolog, health_check };

struct gate_options {
    std::string index_path;
    std::string expected_dir;
    std::string probe_program;
    std::string require = "gpu"; ///< "gpu" or a profile's name
    std::string json_out;        ///< "": none; "-": the JSON on stdout instead of the line
    std::string node;            ///< "": $SLURMD_NODENAME, else the host name
    std::string keep_runs;       ///< "": the gate cases' run folders are removed after
    slurm_mode slurm = slurm_mode::none;
    bool resume_on_pass = false;
    /// The gate's whole budget (--deadline): the probe and the gate cases share it, and the
    /// verdict comes within it whatever hangs.
    double deadline_seconds = 30;
    /// When the work must end (run_gate sets it from deadline_seconds, keeping time for the
    /// verdict's own steps: scontrol, the JSON).
    std::optional<std::chrono::steady_clock::time_point> deadline;
};

/// The longest reason the gate gives (Slurm's Reason= takes it as it is).
inline constexpr std::size_t gate_reason_limit = 200;

/// Runs the gate: prints its one line (or the JSON), writes --json, acts on Slurm, and returns
/// the exit code (gate_exit; under --slurm-prolog an unjudged node exits 0).
int run_gate(const gate_options& options);

/// `text` as one line Slurm and a terminal take as it is: printable ASCII (anything else is
/// '?'), runs of spaces and control characters as one space, at most `limit` characters (cut
/// with "...").
std::string one_line_reason(const std::string& text, std::size_t limit = gate_reason_limit);

/// Whether `name` can be a Slurm node name given to scontrol: 1-64 of [A-Za-z0-9._-], not
/// starting with '-' (so that it is never read as an option or as a second field).
bool valid_node_name(const std::string& name);

/// What a gate case's verdict means for the node: "ok" (PASS), "failing" (any verdict that
/// says the node behaves otherwise than its baseline, an environment fault's UNSUPPORTED
/// included) or "unjudged" (no baseline, not compared, UNSUPPORTED for another reason).
std::string gate_case_standing(const std::string& verdict, const std::string& reason);

} // namespace pitfall::runner
