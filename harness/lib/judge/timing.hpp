// Timing verdicts: absolute series on the host that blessed them, normalised series on every host
// of a profile, disturbance as evidence, a control that confirms a regression, and one
// false-alarm rate per run (a multiple-testing correction over all its series).
//
//   expected timings.<series>  {"unit", "samples": [seconds...],
//                               "normalised": {"by": "host_blas", "samples": [...],
//                                              "control_median": seconds}}
//   verdict timings            "<series>": the absolute series (same host, fingerprint and build
//                              type only), "<series>/<control>": its normalised twin (any host)
#pragma once

#include "judge/baseline.hpp"
#include "model/model.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace pitfall::runner {

/// Why times blessed with one thread count say nothing of a case run with another ("" when the
/// counts agree).
std::string thread_mismatch(const nlohmann::json& provenance, std::optional<int> threads);

/// A series divided by the median of its control from the same process.
struct normalised_series {
    std::vector<double> samples;
    double control_median = 0;
    /// The median share of a sample's time its thread waited for a CPU, taken out of the series
    /// and its control before dividing; nullopt where the result does not say, for the series
    /// or for the control, and both were divided as timed.
    std::optional<double> cpu_wait_share;
};

/// The result series `series` (its "values" and "controls") normalised by `control`; nullopt
/// with `why` set when the case did not measure that control (or its median is not positive).
/// Where the result gives each sample's and each control sample's CPU wait share
/// ("cpu_wait_share", "control_cpu_wait_share"), every sample counts only the time its thread
/// had a CPU or did not want one: x * (1 - share).
std::optional<normalised_series> normalise(const nlohmann::json& series, const std::string& control,
                                           std::string& why);

/// What a series' CPU wait says of its absolute times: "" when its thread waited for a CPU
/// no more than 5% of a sample's time (the median share), else how much.
std::string cpu_wait_disturbance(const nlohmann::json& series);

/// Judges every timed series of a case's baseline entry into v.timings and, where one is
/// uncertain or slower, v.kind and v.reason (the worst series decides: PERF_REGRESSION fails,
/// AMBIGUOUS warns). Each compared series carries "p_regression", the p its run's correction
/// adjusts (correct_run_timings).
void judge_timings(const nlohmann::json& expected, const nlohmann::json& result,
                   std::optional<int> threads, const judge_context& context, verdict& v);

/// The timed series of a result as a baseline keeps them: raw samples and, where the origin
/// names the series' control, the samples normalised by it (pooled over origin.pooled_results).
/// A series with fewer than origin.min_samples samples is left out and named in `refused`.
nlohmann::ordered_json expected_timings(const nlohmann::json& result,
                                        const observation_origin& origin,
                                        std::vector<std::string>* refused = nullptr);

/// How a run's timing p-values are corrected for their number.
enum class timing_correction { holm, bh, none };
const char* to_string(timing_correction c);
std::optional<timing_correction> timing_correction_from_string(const std::string& text);

/// The run-level judgement of all timed series of a run's records together: each series with a
/// p_regression is adjusted (Holm by default) over all of them, and a PERF_REGRESSION whose
/// adjusted p is not below `level` becomes AMBIGUOUS, saying so; a case left with no failing
/// series is AMBIGUOUS too. Returns {"method", "level", "series", "demoted": [{case, series, p,
/// p_adjusted}]}; `changed` receives the records whose verdict changed (to append).
nlohmann::json correct_run_timings(std::vector<case_record*>& records, timing_correction method,
                                   double level, std::vector<case_record*>& changed);

} // namespace pitfall::runner
