// The peak resident set recorded for a case: its own, not the harness's.
//
// wait4's ru_maxrss counts the image the case was forked from (a copy of pitfall, whose resident
// set grows as a run goes on) as well as the case's own, so a small case read 8 MB early in a run
// and 12 MB late in it. The SDK writes the process's own high-water mark (VmHWM, which starts at
// exec) and its children's into the result; that is the figure recorded and judged. A case that
// left no result (a crash, a timeout, a program that is not an SDK scenario) keeps wait4's
// figure, marked as such, and is judged against no bound blessed from the other method.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace pitfall::runner {

/// How a case's peak_rss_bytes was measured.
inline constexpr const char* rss_method_case = "case";   ///< the SDK's VmHWM, children's max
inline constexpr const char* rss_method_wait4 = "wait4"; ///< ru_maxrss: counts pitfall's image

struct case_peak_rss {
    std::optional<std::int64_t> bytes;
    std::string method; ///< rss_method_case or rss_method_wait4
};

/// The case's peak from its result's "resident_memory" where it is there and believable (a whole
/// positive number of bytes, no larger than wait4's, which counts all of the case and more),
/// else wait4's (`wait4_bytes`, 0 where there is none).
case_peak_rss peak_rss_of_case(long long wait4_bytes, const nlohmann::json& result);

} // namespace pitfall::runner
