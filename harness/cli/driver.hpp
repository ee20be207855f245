// `pitfall matrix` and `pitfall fleet` hand their words to a Python driver.
#pragma once

#include "pitfall/status.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace pitfall::cli {

/// Replaces this process with `python3 DRIVER WORDS...`, WORDS being what followed the command,
/// unread. The drivers (they drive podman, debootstrap and pip, or Slurm's commands) render
/// their merged reports with this very binary, so they are told its path ($PITFALL_BINARY).
/// Returns only where the driver was not found or python3 could not start: exit 2, said.
int exec_driver(const CLI::App& command, const pitfall::status_or<std::string>& driver);

} // namespace pitfall::cli
