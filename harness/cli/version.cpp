// `pitfall version` (and `pitfall --version`).
#include "commands.hpp"

#include <iostream>

namespace pitfall::cli {
namespace {

void declare_version(CLI::App&, command_line&) {}

int run_version(const CLI::App&, command_line&) {
    std::cout << "pitfall " << PITFALL_VERSION << '\n';
    return exit_ok;
}

} // namespace

// Its words are not checked: `pitfall --version` prints the version whatever follows it.
command version_command() {
    return {"version", "the version", declare_version, run_version, false};
}

} // namespace pitfall::cli
