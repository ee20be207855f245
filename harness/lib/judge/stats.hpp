// Timing statistics for the regression verdict: robust location and spread, a rank test and a
// bootstrap interval of the median ratio, combined into one of SAME / FASTER / PERF_REGRESSION /
// AMBIGUOUS.
//
// Timings are skewed and carry outliers (a page fault, a context switch, a cold cache), so
// everything here is built on medians and ranks rather than means and standard deviations: one
// 10x outlier must not turn a run into a regression, nor hide one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pitfall::stats {

/// The middle value (the mean of the two middle values for an even count). Takes its argument by
/// value because it partially reorders it; callers keep their samples in measurement order.
/// Throws std::invalid_argument on an empty vector, or one holding a NaN (which has no place in
/// an ordering, and would make the result depend on the sort algorithm).
double median(std::vector<double> v);
/// The median as a figure to show: NaN for an empty sample or one holding a NaN, where median()
/// throws (a report or a ratio says "none" instead of stopping).
double median_or_nan(std::vector<double> v);

/// The relative noise of one side's samples: the median absolute deviation scaled by 1.4826 (so
/// that it estimates sigma for normal data, while one wild sample cannot move it), divided by the
/// median so that a 2 ms and a 2 s kernel with the same jitter in percent compare alike.
/// 0 when the median is 0 (nothing to be relative to). Throws as median() does.
double relative_noise(const std::vector<double>& v);

/// The result of a two-sided Mann-Whitney U test.
struct mann_whitney {
    /// U of sample a (scipy's `statistic`): the pairs (x in a, y in b) with x > y, ties as 1/2.
    double u_a;
    /// U of sample b: n_a * n_b - u_a.
    double u_b;
    /// Signed and continuity-corrected: > 0 when a tends to be larger; 0 when u_a is within 1/2
    /// of its mean or every value is tied. |z| is the z scipy computes internally.
    double z;
    /// In [0, 1].
    double p_two_sided;
};

/// Two-sided Mann-Whitney U with the normal approximation, tie correction and continuity
/// correction: the same numbers as scipy.stats.mannwhitneyu(a, b, alternative='two-sided',
/// method='asymptotic', use_continuity=True), so a verdict can be rechecked in Python.
/// A rank test, because it asks "does one side tend to be slower" without assuming a shape for
/// the distribution of times, and a few outliers count as ranks, not magnitudes.
/// The asymptotic method (not the exact one) so that ties, which quantised timers produce
/// routinely, are handled the same way at every sample size.
/// Where every value is tied (zero variance) z is 0 and p is 1, as scipy's p is.
/// Throws std::invalid_argument when either side is empty or holds a NaN.
mann_whitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

/// A point estimate with a confidence interval.
struct interval {
    double point;
    double low;
    double high;
};

/// Percentile bootstrap of median(candidate) / median(baseline): a confidence interval for the
/// ratio without assuming a distribution for the times. Each of the `resamples` draws resamples
/// both sides with replacement, independently (candidate first, then baseline); low / high are
/// the (1 - confidence) / 2 and 1 - (1 - confidence) / 2 quantiles of the resampled ratios,
/// interpolating linearly between order statistics as numpy.quantile does by default.
/// point = median(candidate) / median(baseline).
///
/// Deterministic for a given seed, across runs, compilers and platforms, so that a verdict in a
/// report can be reproduced: the generator is std::mt19937_64 (fully specified by the standard)
/// and indices come from its raw output by rejection sampling, never from
/// std::uniform_int_distribution, whose algorithm each standard library chooses for itself.
///
/// Throws std::invalid_argument when a side is empty or holds a non-finite value, when the
/// baseline median is 0 (the ratio has no meaning), when resamples < 1, or when confidence is
/// not in (0, 1). A resample whose baseline median is 0 yields an infinite ratio (1 when the
/// candidate's is 0 too), which widens the interval as it should.
interval bootstrap_median_ratio(const std::vector<double>& candidate,
                                const std::vector<double>& baseline, int resamples = 4000,
                                double confidence = 0.95, std::uint64_t seed = 20251123);

enum class timing_verdict { same, faster, slower_regression, ambiguous };

/// "SAME", "FASTER", "PERF_REGRESSION", "AMBIGUOUS": the names reports and baselines use.
const char* to_string(timing_verdict verdict);

struct timing_options {
    /// The smallest tolerance, in relative terms: below a few percent, changes in clock, thermal
    /// state or co-tenants of a machine move timings more than any code change we care about.
    double floor = 0.05;
    /// How many estimated standard errors of the median ratio the tolerance spans when the
    /// samples are noisier than the floor allows for.
    double noise_k = 3.0;
    /// Significance level of the Mann-Whitney test: a regression (or speed-up) must be both
    /// large (outside the tolerance) and unlikely to be chance.
    double alpha = 0.05;
    int resamples = 4000;
    double confidence = 0.95;
    std::uint64_t seed = 20251123;
    /// Below this, neither the rank test nor the bootstrap can separate a real change from noise
    /// (with 9 per side the smallest possible two-sided p is about 4e-4).
    std::size_t min_samples = 9;
};

struct timing_judgement {
    timing_verdict verdict;
    double tolerance; ///< relative: the ratio may lie in [1 / (1 + tolerance), 1 + tolerance]
    double noise;     ///< the estimated relative standard error of the median ratio
    interval ratio;   ///< median(candidate) / median(baseline) with its bootstrap interval
    /// a = candidate, b = baseline: z > 0 means the candidate tends to be slower.
    mann_whitney test;
    /// One-sided p of "the candidate is slower than the baseline by more than the tolerance":
    /// Mann-Whitney of the candidate against the baseline scaled by 1 + tolerance. What a
    /// PERF_REGRESSION claims, so the p a run's correction over all its series adjusts.
    double p_regression = 1;
    /// One sentence with the numbers, e.g. "median 1.210x (95% CI 1.170-1.250) beyond tolerance
    /// 1.080x; Mann-Whitney p=0.0002".
    std::string reason;
};

/// Compares a candidate's timing samples with a baseline's.
///
///   noise     = max(relative_noise(baseline), relative_noise(candidate))
///               * sqrt(2) / sqrt(min(n_baseline, n_candidate))
///   tolerance = max(floor, noise_k * noise)
///
/// noise is the relative standard error of the median ratio, not the spread of one sample, so
/// that more samples earn a tighter verdict (see judge_timing in stats.cpp for the derivation).
///
///   PERF_REGRESSION  ratio.low  > 1 + tolerance       and p < alpha
///   FASTER           ratio.high < 1 / (1 + tolerance) and p < alpha (reported, never failed:
///                    whether a speed-up is welcome is the caller's decision)
///   SAME             [ratio.low, ratio.high] within [1 / (1 + tolerance), 1 + tolerance]
///   AMBIGUOUS        anything else: too noisy, or too few samples, to say
///
/// When the noise term rather than the floor sets the tolerance, the 95% interval is nearly as
/// wide as the band, so unchanged but noisy timings come out AMBIGUOUS about two times in three
/// (SAME otherwise; simulated with 10-25% noise): more samples, not a wider band, is the remedy.
///
/// The lower bound is 1 / (1 + tolerance) rather than 1 - tolerance so that the band is symmetric
/// on a log scale: a 1.25x slowdown and a 1 / 1.25 = 0.8x speed-up are changes of the same size.
///
/// Throws std::invalid_argument, naming the side and the reason, when either side has fewer
/// than min_samples samples (never fewer than 2, whatever min_samples says), holds a non-finite or
/// negative sample, or (the baseline) has a median of 0; and when an option is out of range.
timing_judgement judge_timing(const std::vector<double>& baseline,
                              const std::vector<double>& candidate,
                              const timing_options& options = {});

/// Holm's step-down adjustment: adjusted p-values in the input's order, each the smallest level
/// at which Holm's procedure rejects that hypothesis; rejecting those below `level` keeps the
/// chance of any false rejection among all of them at most `level` (family-wise, whatever their
/// dependence). Throws std::invalid_argument for a p outside [0, 1] or NaN.
std::vector<double> holm_adjust(const std::vector<double>& p);

/// Benjamini-Hochberg's step-up adjustment (as R's p.adjust(method = "BH")): rejecting those
/// below `level` keeps the expected share of false rejections at most `level`; when nothing
/// changed (every hypothesis true) that is the chance of any rejection. Throws as holm_adjust.
std::vector<double> bh_adjust(const std::vector<double>& p);

} // namespace pitfall::stats
