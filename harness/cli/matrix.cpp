// `pitfall matrix`: the CUDA/cuDNN matrix of ci/matrix.json in containers, by its driver.
#include "commands.hpp"
#include "driver.hpp"

#include "model/locate.hpp"

namespace pitfall::cli {
namespace {

void declare_matrix(CLI::App& sub, command_line&) {
    // Everything after `matrix` is the driver's (it has its own --help).
    sub.prefix_command()->set_help_flag();
    sub.footer(
        R"(Arguments go to the matrix driver unchanged: `pitfall matrix --help` lists them. The driver is
$PITFALL_MATRIX_DRIVER, else the scenario index's paths.matrix_driver (tools/pitfall-matrix).

examples:
  pitfall matrix list
  pitfall matrix run --cells cuda13.0-host --scenarios version_mismatch --out /tmp/m
  pitfall matrix run --dry-run --out /tmp/m)");
}

int run_matrix(const CLI::App& sub, command_line&) {
    return exec_driver(sub, runner::locate_matrix_driver());
}

} // namespace

command matrix_command() {
    return {"matrix",
            "list|images|run [...]: the CUDA/cuDNN matrix of ci/matrix.json in\n"
            "containers: build or reuse each cell's image, build and run pitfall\n"
            "in it, merge the cells into one report",
            declare_matrix, run_matrix, false};
}

} // namespace pitfall::cli
