// pitfall/process.hpp: how a child process ended, as a scenario sees it in a child_run (see
// run_self in pitfall/scenario.hpp): its exit status or signal, whether it was ended at its
// timeout, its wall time and peak RSS.
//
//   if (child.process.signal) ctx.record_info("child", "ended by " +
//   pitfall::signal_name(*child.process.signal));
#pragma once

#include <optional>
#include <string>

namespace pitfall {

struct process_outcome {
    bool started = false; ///< false: fork/exec failed (see start_error)
    std::string start_error;
    std::optional<int> exit_code; ///< set when it exited
    std::optional<int> signal;    ///< set when a signal ended it
    bool timed_out = false;       ///< we ended it at the timeout
    bool interrupted = false;     ///< we ended it because the harness was interrupted
    double wall_seconds = 0;
    long long peak_rss_bytes = 0; ///< ru_maxrss of the child
    /// "" or how the child stopped: a ptrace stop with this process its tracer (nothing could
    /// resume it: ended at once, timed_out set) or a job-control stop (SIGSTOP) it was left in.
    std::string stopped;
};

/// "SIGSEGV" for 11; "signal N" for unknown numbers.
std::string signal_name(int sig);

} // namespace pitfall
