// The commands of `pitfall`, each declared and run from its own file (list.cpp, run.cpp, ...)
// and named once in the list of commands.cpp, which main.cpp walks to declare them to CLI11 and
// to run the one chosen.
#pragma once

#include "command_line.hpp"

#include <CLI/CLI.hpp>

#include <vector>

namespace pitfall::cli {

/// One command: what `pitfall help` lists, the options and help text it declares on its
/// subcommand, and what it does once the command line is parsed (its exit code).
struct command {
    const char* name;
    const char* summary; ///< the overview's line (lines) for it
    void (*declare)(CLI::App& sub, command_line& cl);
    int (*run)(const CLI::App& sub, command_line& cl);
    /// false where the words after the command are not checked before it runs: the drivers
    /// take them on unread (they have their own --help), and `version` ignores them.
    bool checks_arguments = true;
};

/// Every command, in the order `pitfall help` lists them.
const std::vector<command>& commands();

} // namespace pitfall::cli
