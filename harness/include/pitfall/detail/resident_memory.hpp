// pitfall/detail/resident_memory.hpp: the peak resident set a case's process reached itself.
//
// wait4's ru_maxrss cannot say that: at exec the kernel folds the high-water mark of the image
// being replaced (a forked copy of pitfall) into the process's maxrss, so a case started by a
// harness of 12 MB reads at least 12 MB, however little it used. The high-water mark of the
// address space the case exec'd (VmHWM of /proc/self/status) starts at exec, and its children's
// peak (getrusage RUSAGE_CHILDREN) is their own images forked from the case's: both are the
// case's own. The SDK reads them as it writes its result; docs/running.md says where which
// figure applies.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pitfall::detail {

/// The "VmHWM:" line of a /proc/<pid>/status text, in bytes (the kernel writes kB); nullopt
/// where there is none, or it is not a whole number of kB that fits.
std::optional<std::int64_t> vm_hwm_bytes(std::string_view status_text);

/// This process's own peak resident set since its exec, and the largest of its waited-for
/// children's; each nullopt where it cannot be read.
struct own_peak_rss {
    std::optional<std::int64_t> self_bytes;
    std::optional<std::int64_t> children_bytes;
};
own_peak_rss read_own_peak_rss();

} // namespace pitfall::detail
