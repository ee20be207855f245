// How `pitfall`'s help reads: the program's description and overview, and the layout of every
// command's help.
#pragma once

#include <CLI/CLI.hpp>

namespace pitfall::cli {

/// The description, the overview's footer (run folders, verdicts, where things are, the
/// environment, exit status) and the layout of `app`'s help. Before the commands are declared:
/// each inherits the layout, and the footer where it declares none of its own.
void describe_program(CLI::App& app);

} // namespace pitfall::cli
