// `pitfall gate`: admit or drain this node before GPU work lands on it.
#include "commands.hpp"

#include "gate/gate.hpp"
#include "gate/requirement.hpp"
#include "model/locate.hpp"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <set>

namespace pitfall::cli {
namespace {

/// --deadline: finite seconds in [5, 3600] (less leaves no time for the probe itself).
bool parse_deadline(const std::string& text, double& out) {
    if (text.empty() || text.size() > 32)
        return false;
    char* end = nullptr;
    const double x = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(x) || !(x >= 5 && x <= 3600))
        return false;
    out = x;
    return true;
}

void declare_gate(CLI::App& sub, command_line& cl) {
    runner::gate_options& g = cl.gate;
    sub.add_option("--require", g.require,
                   "what this node must be: gpu (default: a usable GPU) or a\n"
                   "baseline profile's name (no-gpu, hopper-cuda13, ...)")
        ->type_name("gpu|PROFILE");
    sub.add_option("--json", g.json_out,
                   "write the verdict per node and per GPU as JSON to FILE\n"
                   "(reports/schema/gate.schema.json); - prints it instead of the line")
        ->type_name("FILE");
    sub.add_option("--node", g.node,
                   "the node's name (default: $SLURMD_NODENAME, else the host name)")
        ->type_name("NAME");
    add_checked(sub, "--deadline", g.deadline_seconds, parse_deadline, "seconds in [5, 3600]",
                "the gate's whole time: the probe and every gate case share it, and\n"
                "the verdict comes within it whatever hangs (default 30; keep it below\n"
                "the time Slurm gives a prolog or health check)")
        ->type_name("S");
    sub.add_option("--keep-runs", g.keep_runs,
                   "keep the gate cases' run folders here (default: removed)")
        ->type_name("DIR");
    sub.add_flag("--slurm-prolog", cl.slurm_prolog,
                 "as slurm.conf's Prolog: drain the node itself with the reason\n"
                 "(scontrol), exit 1 so that Slurm requeues the job; a gate that\n"
                 "cannot judge exits 0 here");
    sub.add_flag("--slurm-health-check", cl.slurm_health_check,
                 "as slurm.conf's HealthCheckProgram: drain the node itself with\n"
                 "the reason (scontrol)");
    sub.add_flag("--resume-on-pass", g.resume_on_pass,
                 "with --slurm-*: a node pitfall drained (its reason starts\n"
                 "\"pitfall:\") is resumed when this gate passes");
    add_locations(sub, cl, true);
    sub.footer(
        R"(It runs the doctor's rules (`pitfall doctor`) and the gate cases (scenario.json
"gate": true: fast, judged by their outcome) on each visible GPU in turn, alone. Its first
line is "admit: ...", "drain: pitfall: REASON" or "unjudged: pitfall: REASON"; the reason is one
line of at most 200 printable characters, fit for Slurm's Reason=.

exit status:
  0    admit: the node may take GPU work
  1    drain: a doctor error, an unmet --require or a failing gate case (the reason says which)
  2    bad usage (unknown flag, --require naming no profile)
  3    the gate could not judge (no baselines, a gate case without one): never a drain;
       under --slurm-prolog this exits 0 and says why on standard error

examples:
  pitfall gate
  pitfall gate --require hopper-cuda13 --json gate.json
  pitfall gate --slurm-health-check --resume-on-pass
  pitfall gate --slurm-prolog --require no-gpu      (a node expected to have no GPU)

docs/gate.md: Slurm's slurm.conf lines, Kubernetes, Prometheus (`pitfall export`).)");
}

/// --require names gpu or a profile: checked before anything is probed or run. An index or a
/// baselines folder that cannot be read is left to the gate, which says it cannot judge.
int check_required_profile(const runner::gate_options& g) {
    auto index = runner::load_index(g.index_path);
    if (!index.is_ok())
        return exit_ok;
    const std::set<std::string> none;
    auto profiles = runner::load_profiles(g.expected_dir, index.value(), &none);
    if (!profiles.is_ok())
        return exit_ok;
    if (auto known = runner::check_requirement(g.require, profiles.value(), "--require");
        !known.is_ok())
        return usage_error(known.message(), "gate");
    return exit_ok;
}

int gate_command_checked(command_line& cl) {
    runner::gate_options& g = cl.gate;
    if (cl.slurm_prolog && cl.slurm_health_check)
        return usage_error("--slurm-prolog and --slurm-health-check exclude each other", "gate");
    g.slurm = cl.slurm_prolog         ? runner::slurm_mode::prolog
              : cl.slurm_health_check ? runner::slurm_mode::health_check
                                      : runner::slurm_mode::none;
    if (g.resume_on_pass && g.slurm == runner::slurm_mode::none)
        return usage_error("--resume-on-pass needs --slurm-prolog or --slurm-health-check", "gate");
    if (!g.node.empty() && !runner::valid_node_name(g.node))
        return usage_error("--node '" + runner::one_line_reason(g.node, 64) +
                               "': not a node name (1-64 of A-Z a-z 0-9 . _ -, not starting "
                               "with -)",
                           "gate");
    auto at = runner::locate_for_cases(cl.index_flag, cl.expected_flag);
    if (!at.is_ok())
        return input_error(at.error());
    g.index_path = at->index;
    g.expected_dir = at->expected;
    g.probe_program = at->probe;
    if (const int rc = check_required_profile(g); rc != exit_ok)
        return rc;
    return runner::run_gate(g);
}

/// As slurm.conf's Prolog (--slurm-prolog), any exit but 0 drains the node: the gate's own
/// failure before it judged (a typo in its options, an index or baselines it cannot find) lets
/// the job run, said on standard error (slurmd's log), and never drains. 1 (drain) stands.
int run_gate_command(const CLI::App&, command_line& cl) {
    const int rc = gate_command_checked(cl);
    if (cl.slurm_prolog && rc != runner::gate_admit && rc != runner::gate_drain) {
        std::cerr << "pitfall gate: could not judge (exit " << rc
                  << " above), letting the job run: as a Slurm prolog the gate never drains for "
                     "its own failure\n";
        return runner::gate_admit;
    }
    return rc;
}

} // namespace

command gate_command() {
    return {"gate",
            "admit or drain this node before GPU work lands on it: the doctor's\n"
            "errors and the gate cases on every GPU, exit 0 admit, 1 drain, 3\n"
            "could not judge (Slurm prolog and health check, Kubernetes)",
            declare_gate, run_gate_command};
}

} // namespace pitfall::cli
