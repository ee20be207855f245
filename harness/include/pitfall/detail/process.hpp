// pitfall/detail/process.hpp: running one child process the way the harness (and run_self)
// needs: its own process group, argv (never a shell), output to a file, a timeout that ends the
// whole group (TERM, then KILL), the exit status or signal plus peak RSS from wait4, and death
// with the parent.
//
//   pitfall::process_request req;
//   req.argv = {"/bin/true"};
//   const pitfall::process_outcome out = pitfall::run_process(req);   // out.exit_code == 0
#pragma once

#include "pitfall/process.hpp"

#include <csignal>
#include <map>
#include <string>
#include <vector>

namespace pitfall {

struct process_request {
    std::vector<std::string> argv;              ///< argv[0] is the program's path
    std::map<std::string, std::string> env_set; ///< added to (or replacing in) our environment
    std::string output_path;                    ///< stdout and stderr go here ("" = /dev/null)
    double timeout_seconds = 60;
    double kill_grace_seconds = 2; ///< between TERM and KILL
};

/// Set by the harness's SIGINT/SIGTERM handler; a running child group is ended when it is set.
extern volatile std::sig_atomic_t interrupt_requested;
/// Installs handlers that set interrupt_requested (and remembers which signal).
void install_interrupt_handlers();
int interrupt_signal();

/// Runs the request to completion (or timeout/interrupt). Never throws.
process_outcome run_process(const process_request& request);

/// The last `max_bytes` of a file (for stderr tails in records) as text: it starts at a
/// character boundary and each byte that is not UTF-8 reads U+FFFD.
std::string read_tail(const std::string& path, std::size_t max_bytes);

} // namespace pitfall
