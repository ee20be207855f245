// The one list of commands: a new command is its own file, its declaration and its line here.
#include "commands.hpp"

namespace pitfall::cli {

command list_command();
command run_command();
command compare_command();
command bless_command();
command report_command();
command matrix_command();
command fleet_command();
command doctor_command();
command bundle_command();
command export_command();
command gate_command();
command history_command();
command resource_spec_command();
command help_command();
command version_command();

const std::vector<command>& commands() {
    // In the order `pitfall help` lists them.
    static const std::vector<command> all{
        list_command(),          // list.cpp
        run_command(),           // run.cpp
        compare_command(),       // compare.cpp
        bless_command(),         // bless.cpp
        report_command(),        // report.cpp
        matrix_command(),        // matrix.cpp
        fleet_command(),         // fleet.cpp
        doctor_command(),        // doctor.cpp
        bundle_command(),        // bundle.cpp
        export_command(),        // export.cpp
        gate_command(),          // gate.cpp
        history_command(),       // history.cpp
        resource_spec_command(), // resource_spec.cpp
        help_command(),          // help.cpp
        version_command(),       // version.cpp
    };
    return all;
}

} // namespace pitfall::cli
