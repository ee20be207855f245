// pitfall/inject.hpp: fault injection, to prove that the verdicts catch what they claim to.
//
// Inert unless PITFALL_INJECT is set. Its value is a list of `kind:case:argument`, separated by
// commas; `case` is the harness's case key (`cpu.float64_inputs.remedy`) or `*` for every case:
//
//   slowdown:<case>:1.2              every recorded series in seconds reads 1.2 x longer,
//                                    however the scenario timed it (time_samples or its own
//                                    clock around an epoch)
//   extra_device_bytes:<case>:4M     the tracked device peak reads that many bytes more
//   outcome:<case>:cudaErrorLaunchFailure   the case ends with that error instead of its own
//
// The result document lists what was injected ("injected"), so an injected run can never pass
// for a real one. It lives in the SDK, not in scenarios: every scenario gets it for nothing.
#pragma once

#include "pitfall/status.hpp"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace pitfall::inject {

inline constexpr const char* env_name = "PITFALL_INJECT";

struct plan {
    double slowdown = 1.0;
    std::uint64_t extra_device_bytes = 0;
    std::string outcome_error;        ///< empty: the case's own outcome
    std::vector<std::string> applied; ///< what was injected, in words, for the result

    bool empty() const { return applied.empty(); }
};

/// The injections of PITFALL_INJECT that name `case_key` (or `*`). A malformed value is a
/// bad_parameter error naming the variable and the item.
status_or<plan> parse(const std::string& value, const std::string& case_key);

/// The whole of PITFALL_INJECT checked before a run starts: each item well formed, of a known
/// kind, with a valid argument, aimed at `*` or at one of `case_keys` (a typo must not leave
/// a run uninjected). A bad_parameter error naming the variable and the item.
status validate(const std::string& value, const std::set<std::string>& case_keys);

/// The plan of the running case (set once by the scenario's main before the case starts).
const plan& active();
void set_active(plan p);

/// Turns the outcome a case returned into the injected one (same stage when it failed, else
/// `compute`); the library follows the error's name (cuda* -> CUDA runtime, CUBLAS_* ->
/// cuBLAS, CUDNN_* -> cuDNN, nccl* -> NCCL, anything else -> host).
status injected_outcome(const status& own, const std::string& error_name);

} // namespace pitfall::inject
