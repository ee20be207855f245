// What a bug-report bundle gathers from the machine beside the run folder: the output of
// external commands (nvidia-smi -q, nvidia-bug-report.sh), each bounded in time (ended, its
// process group with it, at the limit) and in bytes (RLIMIT_FSIZE: what it writes past the cap
// is refused), and the NVIDIA kernel messages of this boot. Each says what it kept and why not
// more, for the bundle's index.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pitfall::runner {

/// One item of the bundle and what became of it.
struct bundle_item {
    std::string file;  ///< its path inside the bundle ("nvidia-smi-q.txt")
    std::string what;  ///< where it came from ("nvidia-smi -q")
    std::string state; ///< included, truncated, missing, failed
    std::string why;   ///< for anything but included: why
    std::uint64_t bytes = 0;
    nlohmann::json to_json() const;
};

/// `name` found on PATH, then in /usr/sbin, /sbin, /usr/bin and /bin; "" where it is not.
std::string find_program(const std::string& name);

/// Runs `argv` (argv[0] a path; never a shell) with stdout and stderr into `out_path`, ended
/// after `timeout_seconds` and refused past `cap_bytes`. included: exit 0 within both bounds;
/// truncated: cut at the cap or at the timeout (what it wrote is kept); failed: another exit
/// status or a signal (its output is kept: it says why).
bundle_item run_bounded(const std::vector<std::string>& argv, const std::string& out_path,
                        double timeout_seconds, std::uint64_t cap_bytes);

/// The lines of kernel-log text that are NVIDIA's: NVRM, nvidia (any case) or Xid; the last
/// `max_lines` of them.
std::string nvidia_kernel_lines(const std::string& log, std::size_t max_lines);

/// The NVIDIA kernel messages of this boot into `out_path`: from dmesg, else journalctl -k -b,
/// else /dev/kmsg, whichever is readable first (the item says which, or why none was).
bundle_item collect_kernel_messages(const std::string& out_path, const std::string& scratch_dir,
                                    double timeout_seconds);

} // namespace pitfall::runner
