// pitfall/detail/process.hpp: running one child process the way the harness (and run_self)
// needs: its own process group, argv (never a shell), output to a file, a timeout that ends the
// whole group (TERM, then KILL), the exit status or signal plus peak RSS from wait4, and death
// with the parent. A harness case also gets resource limits and containment: a marker in its
// environment, its own cgroup where one can be made, and an end to everything it started, the
// processes that left its group (setsid) and those that outlive the harness itself included.
//
//   pitfall::process_request req;
//   req.argv = {"/bin/true"};
//   const pitfall::process_outcome out = pitfall::run_process(req);   // out.exit_code == 0
#pragma once

#include "pitfall/process.hpp"

#include "pitfall/status.hpp"

#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pitfall {

/// The variable every process of a contained case inherits: "<run token>/<case key>". What
/// carries it after the case (or after a harness that died) is ended.
inline constexpr const char* case_token_env = "PITFALL_CASE_TOKEN";

/// setrlimit in the child before exec; an unset limit is inherited.
struct resource_limits {
    std::optional<unsigned long long> address_space_bytes; ///< RLIMIT_AS
    std::optional<unsigned long long> cpu_seconds;     ///< RLIMIT_CPU: SIGXCPU, then KILL 5 s later
    std::optional<unsigned long long> file_size_bytes; ///< RLIMIT_FSIZE: a write past it, SIGXFSZ
};

struct process_request {
    std::vector<std::string> argv;              ///< argv[0] is the program's path
    std::map<std::string, std::string> env_set; ///< added to (or replacing in) our environment
    std::string output_path;                    ///< stdout and stderr go here ("" = /dev/null)
    double timeout_seconds = 60;
    double kill_grace_seconds = 2; ///< between TERM and KILL
    resource_limits limits;
    /// "": none. Else set as case_token_env in the child, and when the child has exited every
    /// process still carrying it is ended (KILL) and reaped; under contain_cases() also every
    /// other descendant (the harness is their subreaper), and the child runs in a cgroup of its
    /// own where one could be made, ended with cgroup.kill.
    std::string case_token;
};

/// How a run's cases are contained (recorded in the run's fingerprint).
struct containment {
    std::string method;    ///< "cgroup" or "subreaper"
    std::string detail;    ///< the run's cgroup, or why none could be made
    std::string run_token; ///< the first part of each case's case_token
};

/// Makes this process the keeper of its cases, once, before the first: a child subreaper (an
/// orphaned descendant comes back to us, not to init), a guardian process that ends every
/// process carrying the run's token should we die without end_containment() (SIGKILL), and a
/// cgroup v2 folder for the cases where a writable one can be made. `mode`: "auto" (a cgroup
/// where one can be made, else the subreaper alone), "cgroup" (an error where none can be made)
/// or "subreaper".
status_or<containment> contain_cases(const std::string& mode);
/// The clean end: the guardian is told goodbye and reaped, the run's cgroup removed.
void end_containment();

/// Live processes (this user's) whose environment holds case_token_env with a value starting
/// with `token_prefix`.
std::vector<int> marked_processes(const std::string& token_prefix);

/// Set by the harness's SIGINT/SIGTERM handler; a running child group is ended when it is set.
extern volatile std::sig_atomic_t interrupt_requested;
/// Installs handlers that set interrupt_requested (and remembers which signal).
void install_interrupt_handlers();
int interrupt_signal();

/// Makes descriptors 0, 1 and 2 valid, each closed one opened on /dev/null, before the program
/// opens anything: started with one closed, its first open() would take that number, and its
/// progress lines (stdout) would land in whatever file that was (a run's results.jsonl). Call
/// it first in main(). False when /dev/null itself cannot be opened (the program should stop).
bool ensure_standard_descriptors() noexcept;

/// Runs the request to completion (or timeout/interrupt). Never throws.
process_outcome run_process(const process_request& request);

/// The last `max_bytes` of a file (for stderr tails in records) as text: it starts at a
/// character boundary and each byte that is not UTF-8 reads U+FFFD.
std::string read_tail(const std::string& path, std::size_t max_bytes);

} // namespace pitfall
