// `pitfall fleet`: the suite on every GPU node of a cluster, by its driver.
#include "commands.hpp"
#include "driver.hpp"

#include "model/locate.hpp"

namespace pitfall::cli {
namespace {

void declare_fleet(CLI::App& sub, command_line&) {
    // Everything after `fleet` is the driver's (it has its own --help).
    sub.prefix_command()->set_help_flag();
    sub.footer(
        R"(Arguments go to the fleet driver unchanged: `pitfall fleet --help` lists them. The driver is
$PITFALL_FLEET_DRIVER, else the scenario index's paths.fleet_driver (tools/pitfall-fleet; installed:
share/pitfall/fleet/pitfall-fleet).

examples:
  pitfall fleet run --engine slurm --partition gpu --out /shared/fleet/a --scenario float64_inputs
  pitfall fleet run --engine slurm --nodelist gpu[01-04] --gres gpu:1 --dry-run
  pitfall fleet status /shared/fleet/a
  pitfall fleet manifest --engine kubernetes --nodes 8 --image registry/pitfall:1 --claim results)");
}

int run_fleet(const CLI::App& sub, command_line&) {
    return exec_driver(sub, runner::locate_fleet_driver());
}

} // namespace

command fleet_command() {
    return {"fleet",
            "run|status|collect|cancel|manifest [...]: the suite on every GPU node of\n"
            "a cluster (one Slurm array job, one task per node), and which node\n"
            "differs; a Kubernetes Indexed Job manifest for the same",
            declare_fleet, run_fleet, false};
}

} // namespace pitfall::cli
