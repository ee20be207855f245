// Change points in the history of one timed series: where, run after run, a series' level moved
// and stayed moved (a step), or crept (a drift). A pure function of the values: the run database
// feeds it a series and stores what it answers.
//
// The method is E-divisive means (Matteson & James 2014), the detector Apache Otava (formerly
// DataStax's hunter) and MongoDB's performance CI run on their benchmark histories, with its
// permutation test of significance, applied by bisection; docs/change-points.md says how, with
// its measured accuracy and its sources.
//
//   std::vector<pitfall::history::series_point> series = ...; // (run index, seconds)
//   PITFALL_ASSIGN_OR_RETURN(const auto found, pitfall::history::find_change_points(series));
//   for (const auto& cp : found.change_points)
//       std::printf("run %lld: %+.1f%% (confidence %.3f)\n", (long long)cp.run_index,
//                   100 * cp.step, cp.confidence);
#pragma once

#include "pitfall/status.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace pitfall::history {

/// One run's value of a series: the run's index in the history and its value (seconds).
struct series_point {
    std::int64_t run_index = 0;
    double value = 0.0;
};

/// How the detector decides. The defaults are the documented ones (docs/change-points.md).
struct change_point_options {
    /// The fewest runs on either side of a change point (and so between two of them). >= 2.
    std::size_t min_segment = 5;
    /// A candidate stands when its permutation p-value is below this. In (0, 1). 0.01 as hunter
    /// had it: a history is searched again after every run, and a false alarm costs a person.
    double significance = 0.01;
    /// Permutations per candidate; the p-value is (exceeding + 1) / (permutations + 1). >= 1.
    std::size_t permutations = 499;
    /// The permutations' generator's seed: the same series and seed give the same answer.
    std::uint64_t seed = 0x5eed'c4a9'e001ULL;
    /// The least change, relative to the series' mean, that its fitted line must make from the
    /// first run to the last for the series to be called a drift. >= 0.
    double drift_min_change = 0.05;
};

/// One change point: the level moved between `run_index`'s predecessor and `run_index`.
struct change_point {
    /// Position, among the finite values in run order, of the first run after the change.
    std::size_t position = 0;
    /// Run index of the first run after the change.
    std::int64_t run_index = 0;
    /// Of the runs since the previous change point (or the start) up to this one.
    double median_before = 0.0;
    double mean_before = 0.0;
    /// Of the runs from this change point up to the next (or the end).
    double median_after = 0.0;
    double mean_after = 0.0;
    /// median_after / median_before - 1: +0.10 is 10% slower (for times).
    double step = 0.0;
    /// The E-divisive statistic q-hat at this split of its segment.
    double statistic = 0.0;
    /// The permutation p-value, and 1 - p.
    double p_value = 1.0;
    double confidence = 0.0;
};

/// What a series did over its history, as far as it can be told.
enum class series_shape {
    stable, ///< no change point and no trend
    step,   ///< one or more change points that a straight line does not explain better
    drift,  ///< a significant straight trend of at least drift_min_change, which explains the
            ///< series at least as well as its change points do (several small same-sign ones)
};
std::string_view to_string(series_shape shape);

/// The detector's answer for one series.
struct change_point_analysis {
    /// In run order.
    std::vector<change_point> change_points;
    series_shape shape = series_shape::stable;
    /// The fitted line's change from the first run to the last, relative to the series' mean.
    double trend_change = 0.0;
    /// The slope's t statistic (ordinary least squares on the position).
    double trend_t = 0.0;
    /// Finite values analysed; NaN and infinite values skipped.
    std::size_t values_used = 0;
    std::size_t values_skipped = 0;
};

/// The change points of `series` (taken in run-index order; NaN and infinite values skipped).
/// A series shorter than 2 * min_segment has none. Errors (pitfall_error::bad_parameter) only
/// for options out of their bounds, naming the option.
status_or<change_point_analysis> find_change_points(const std::vector<series_point>& series,
                                                    const change_point_options& options = {});

/// q-hat(tau) of E-divisive means (alpha = 1) for every split tau of `values` into
/// [0, tau) and [tau, n): q-hat is 0 where either side is shorter than min_segment (or than 2).
/// O(n log n). Exposed for the tests, which check it against the O(n^2) definition.
std::vector<double> e_divisive_statistics(const std::vector<double>& values,
                                          std::size_t min_segment);

} // namespace pitfall::history
