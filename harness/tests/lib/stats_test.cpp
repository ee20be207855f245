// Tests of the timing statistics against values computed outside this code base.
//
// Reference values were produced with Python 3, scipy 1.17.1 and numpy 2.4.6 in a throwaway
// virtual environment; the exact call is named above each group. They are hard-coded here so
// the tests need no Python.
#include "judge/stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
using namespace pitfall::stats;

// Agreement to about 1e-9 relative: the formulas are the same, the order of floating-point
// operations is not.
void expect_close(double actual, double expected, const char* what) {
    EXPECT_NEAR(actual, expected, 1e-9 * std::max(1.0, std::abs(expected))) << what;
}

// The message of the std::invalid_argument that `f` throws; fails the test if it throws none.
template <class F> std::string invalid_argument_message(F f) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    ADD_FAILURE() << "no std::invalid_argument thrown";
    return "";
}

// Synthetic timings, reproducible on every platform: normal deviates by Box-Muller from the raw
// output of std::mt19937_64 (std::normal_distribution's algorithm is the library's choice).
class synthetic {
public:
    explicit synthetic(std::uint64_t seed) : rng_(seed) {}
    /// n samples of center * (1 + relative_sd * N(0, 1)).
    std::vector<double> timings(double center, double relative_sd, std::size_t n) {
        std::vector<double> v(n);
        for (double& x : v)
            x = center * (1 + relative_sd * normal());
        return v;
    }

private:
    double uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; } // (0, 1)
    double normal() {
        constexpr double two_pi = 6.283185307179586;
        const double r = std::sqrt(-2 * std::log(uniform()));
        return r * std::cos(two_pi * uniform());
    }
    std::mt19937_64 rng_;
};

// ---------------------------------------------------------------------------------------------
// median, relative_noise
// Reference: numpy.median(x) and
//   scipy.stats.median_abs_deviation(x, scale=1/1.4826) / numpy.median(x)
// (scale=1/1.4826 multiplies the MAD by exactly 1.4826, the constant stats.hpp promises;
// scale='normal' would use 1.482602218505602.)

TEST(StatsMedian, MatchesNumpy) {
    EXPECT_EQ(median({4.0, 1.0, 3.0, 9.0, 2.0}), 3.0);
    EXPECT_EQ(median({4.0, 1.0, 3.0, 9.0, 2.0, 7.5}), 3.5);
    EXPECT_EQ(median({10.1, 10.3, 9.9, 10.0, 10.2, 10.4, 9.8, 10.1, 55.0}), 10.1);
    expect_close(median({1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30, 2.01}), 1.755,
                 "even count: mean of the two middle values");
    EXPECT_EQ(median({7.25}), 7.25);
    EXPECT_EQ(median({2.0, 1.0}), 1.5);
}

TEST(StatsMedian, RejectsEmptyAndNaN) {
    EXPECT_THROW(median({}), std::invalid_argument);
    EXPECT_THROW(median({1.0, std::numeric_limits<double>::quiet_NaN(), 2.0}),
                 std::invalid_argument);
}

TEST(StatsRelativeNoise, MatchesScipyMad) {
    expect_close(relative_noise({4.0, 1.0, 3.0, 9.0, 2.0}), 0.4942, "odd");
    expect_close(relative_noise({4.0, 1.0, 3.0, 9.0, 2.0, 7.5}), 0.8472, "even");
    expect_close(relative_noise({10.1, 10.3, 9.9, 10.0, 10.2, 10.4, 9.8, 10.1, 55.0}),
                 0.029358415841584055, "one wild sample hardly counts");
    expect_close(relative_noise({1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30, 2.01}),
                 0.1943008547008546, "timings");
}

TEST(StatsRelativeNoise, ConstantAndZeroMedianGiveZero) {
    EXPECT_EQ(relative_noise(std::vector<double>(7, 3.5)), 0.0);
    // numpy.median([-1, 0, 0, 1, 2]) == 0: nothing to be relative to.
    EXPECT_EQ(relative_noise({-1.0, 0.0, 0.0, 1.0, 2.0}), 0.0);
    EXPECT_THROW(relative_noise({}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// mann_whitney_u
// Reference: scipy.stats.mannwhitneyu(a, b, alternative='two-sided', method='asymptotic',
//            use_continuity=True) -> statistic (U of a) and pvalue;
//            |z| = scipy.stats.norm.isf(pvalue / 2) (scipy does not return z).

struct mwu_case {
    const char* name;
    std::vector<double> a, b;
    double u_a, p, abs_z;
};

void expect_matches(const mwu_case& c) {
    SCOPED_TRACE(c.name);
    const mann_whitney r = mann_whitney_u(c.a, c.b);
    const double nanb = static_cast<double>(c.a.size() * c.b.size());
    expect_close(r.u_a, c.u_a, "u_a");
    expect_close(r.u_b, nanb - c.u_a, "u_b");
    expect_close(r.p_two_sided, c.p, "p");
    expect_close(std::abs(r.z), c.abs_z, "|z|");
    // The sign says which side tends to be larger.
    if (c.u_a > nanb / 2 + 0.5) {
        EXPECT_GT(r.z, 0);
    } else if (c.u_a < nanb / 2 - 0.5) {
        EXPECT_LT(r.z, 0);
    }
}

TEST(StatsMannWhitney, NoTies) {
    expect_matches({"no ties",
                    {1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30, 2.01},
                    {0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.07, 3.14, 1.31, 0.71},
                    73.0,
                    0.08897301170181328,
                    1.7008401285415227});
}

TEST(StatsMannWhitney, TiesWithinAndAcrossGroups) {
    // 20 values, 8 distinct: the tie correction changes p here.
    expect_matches({"ties",
                    {3.0, 1.0, 2.0, 2.0, 5.0, 4.0, 4.0, 6.0, 2.0, 7.0},
                    {2.0, 3.0, 3.0, 1.0, 1.0, 4.0, 2.0, 0.5, 3.0, 2.0},
                    72.0,
                    0.09719014854177467,
                    1.6586311118603232});
}

TEST(StatsMannWhitney, UnequalSizes9And11) {
    expect_matches({"9 vs 11",
                    {10.2, 11.5, 9.8, 12.1, 10.9, 11.0, 13.4, 10.0, 11.8},
                    {9.1, 10.4, 9.9, 8.7, 10.2, 9.5, 11.2, 9.0, 10.8, 8.9, 9.6},
                    84.5,
                    0.008739512182796647,
                    2.622079187987234});
    // Swapped: scipy.stats.mannwhitneyu(b, a, ...) -> statistic 14.5, same pvalue.
    expect_matches({"11 vs 9",
                    {9.1, 10.4, 9.9, 8.7, 10.2, 9.5, 11.2, 9.0, 10.8, 8.9, 9.6},
                    {10.2, 11.5, 9.8, 12.1, 10.9, 11.0, 13.4, 10.0, 11.8},
                    14.5,
                    0.008739512182796647,
                    2.622079187987234});
}

TEST(StatsMannWhitney, AllValuesTiedAcrossGroups) {
    // scipy: statistic 27.0, pvalue 1.0 (its z is -inf and p = 2 sf(-inf) is clipped to 1).
    const mann_whitney r = mann_whitney_u(std::vector<double>(6, 5.0), std::vector<double>(9, 5.0));
    EXPECT_EQ(r.u_a, 27.0);
    EXPECT_EQ(r.u_b, 27.0);
    EXPECT_EQ(r.p_two_sided, 1.0);
    EXPECT_EQ(r.z, 0.0);
}

TEST(StatsMannWhitney, FullySeparated) {
    // The smallest p two samples of 9 can give: what min_samples = 9 buys.
    expect_matches({"a below b",
                    {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0},
                    {11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0},
                    0.0,
                    0.00041229480206169127,
                    3.5320862855067836});
    expect_matches({"a above b",
                    {11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0},
                    {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0},
                    81.0,
                    0.00041229480206169127,
                    3.5320862855067836});
}

TEST(StatsMannWhitney, FarTailWithTies) {
    // a = 1..30, b = 31..55 plus 31, 31, 40, 40, 40: p far in the tail, where 1 - Phi(z) would
    // have lost every digit.
    std::vector<double> a, b;
    for (int i = 1; i <= 30; ++i)
        a.push_back(i);
    for (int i = 31; i <= 55; ++i)
        b.push_back(i);
    for (double x : {31.0, 31.0, 40.0, 40.0, 40.0})
        b.push_back(x);
    expect_matches({"30 vs 30", a, b, 0.0, 2.993461776053235e-11, 6.6468921619986014});
}

TEST(StatsMannWhitney, RejectsEmptyAndNaN) {
    EXPECT_THROW(mann_whitney_u({}, {1.0}), std::invalid_argument);
    EXPECT_THROW(mann_whitney_u({1.0}, {}), std::invalid_argument);
    EXPECT_THROW(mann_whitney_u({1.0, std::nan("")}, {1.0}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// bootstrap_median_ratio
// Data: numpy.random.default_rng(7); baseline = round(100 * exp(normal(0, 0.08, 31)), 2),
// candidate = round(110 * exp(normal(0, 0.08, 27)), 2).

const std::vector<double> boot_baseline = {
    100.01, 102.42, 97.83,  93.12, 96.43,  92.37, 100.48, 111.32, 96.14, 95.16, 104.00,
    102.90, 100.85, 92.83,  99.77, 105.72, 89.80, 96.41,  85.89,  90.20, 86.30, 98.14,
    90.36,  102.19, 101.26, 98.52, 81.76,  95.78, 99.61,  100.91, 88.48};
const std::vector<double> boot_candidate = {105.88, 101.72, 103.11, 119.74, 103.12, 109.71, 118.06,
                                            104.98, 109.02, 110.98, 110.56, 99.73,  110.67, 122.63,
                                            97.19,  117.83, 111.06, 104.50, 129.09, 116.92, 99.94,
                                            110.66, 115.19, 108.35, 116.18, 109.42, 116.03};

// numpy.median(candidate) / numpy.median(baseline)
constexpr double boot_point = 1.1301236839415312;

TEST(StatsBootstrap, MatchesIndependentReimplementation) {
    // Reference: a pure-Python std::mt19937_64 (checked against the standard's required 10000th
    // output of a default-seeded engine, 9981545732273789042), indices drawn as stats.cpp
    // documents (reject x < 2^64 mod n, then x mod n; candidate's n draws, then baseline's, per
    // resample), numpy.median of each resample, and
    // numpy.quantile(ratios, [(1 - c) / 2, 1 - (1 - c) / 2]) (default method 'linear').
    // Agreement here means the generator, the index derivation, the resampling order and the
    // quantile rule are all as documented, so a report's interval can be reproduced anywhere.
    // (g++ 12 and clang++ on x86-64 agree to the last bit; the tolerance leaves room for a
    // compiler that fuses the interpolation into an FMA.)
    struct ref {
        std::uint64_t seed;
        int resamples;
        double confidence, low, high;
    };
    for (const ref& r : {ref{20251123, 4000, 0.95, 1.0849920382165603, 1.1883591065292096},
                         ref{1, 4000, 0.95, 1.0859977949283353, 1.1860682084744103},
                         ref{20251123, 999, 0.9, 1.0899791848044493, 1.1663303909205547}}) {
        SCOPED_TRACE("seed " + std::to_string(r.seed) + ", " + std::to_string(r.resamples) +
                     " resamples");
        const interval i = bootstrap_median_ratio(boot_candidate, boot_baseline, r.resamples,
                                                  r.confidence, r.seed);
        expect_close(i.point, boot_point, "point");
        expect_close(i.low, r.low, "low");
        expect_close(i.high, r.high, "high");
    }
}

TEST(StatsBootstrap, SameSeedSameInterval) {
    const interval a = bootstrap_median_ratio(boot_candidate, boot_baseline, 4000, 0.95, 42);
    const interval b = bootstrap_median_ratio(boot_candidate, boot_baseline, 4000, 0.95, 42);
    EXPECT_EQ(a.point, b.point);
    EXPECT_EQ(a.low, b.low);
    EXPECT_EQ(a.high, b.high);
}

TEST(StatsBootstrap, DifferentSeedDifferentButClose) {
    const interval a = bootstrap_median_ratio(boot_candidate, boot_baseline, 4000, 0.95, 42);
    const interval b = bootstrap_median_ratio(boot_candidate, boot_baseline, 4000, 0.95, 43);
    EXPECT_EQ(a.point, b.point); // no resampling in the point estimate
    EXPECT_TRUE(a.low != b.low || a.high != b.high) << "the seed is not used";
    const double width = a.high - a.low;
    EXPECT_LT(std::abs(a.low - b.low), 0.15 * width);
    EXPECT_LT(std::abs(a.high - b.high), 0.15 * width);
}

TEST(StatsBootstrap, ContainsPointEstimate) {
    const interval i = bootstrap_median_ratio(boot_candidate, boot_baseline);
    EXPECT_LT(i.low, i.point);
    EXPECT_GT(i.high, i.point);
    // A 10% slowdown with 8% noise and ~30 samples: the interval excludes 1.
    EXPECT_GT(i.low, 1.0);
}

TEST(StatsBootstrap, IdenticalLargeSamplesStraddleOne) {
    const std::vector<double> v = synthetic(11).timings(50.0, 0.1, 200);
    const interval i = bootstrap_median_ratio(v, v);
    EXPECT_EQ(i.point, 1.0);
    EXPECT_LT(i.low, 1.0);
    EXPECT_GT(i.high, 1.0);
    // ~1.25 * 0.1 / sqrt(200) * sqrt(2) * 1.96 = 2.4% either side; not a degenerate interval.
    EXPECT_GT(i.high - i.low, 0.02);
    EXPECT_LT(i.high - i.low, 0.10);
}

TEST(StatsBootstrap, WidthAgreesWithNumpyPercentileBootstrap) {
    // Reference: numpy with its own generator, so only a statistical comparison is possible:
    //   g = numpy.random.default_rng(1)
    //   ci = g.integers(0, len(c), size=(20000, len(c)))
    //   bi = g.integers(0, len(b), size=(20000, len(b)))
    //   numpy.quantile(numpy.median(c[ci], axis=1) / numpy.median(b[bi], axis=1), [0.025, 0.975])
    // -> [1.08391246, 1.18835911]. 200 numpy runs of 4000 resamples (seeds 100..299) gave
    // widths within 0.90-1.05 of the 20000-resample width, bounds within 0.006 of these.
    constexpr double np_low = 1.08391246, np_high = 1.18835911, np_width = np_high - np_low;
    const interval i = bootstrap_median_ratio(boot_candidate, boot_baseline);
    EXPECT_NEAR(i.high - i.low, np_width, 0.15 * np_width);
    EXPECT_NEAR(i.low, np_low, 0.15 * np_width);
    EXPECT_NEAR(i.high, np_high, 0.15 * np_width);
}

TEST(StatsBootstrap, RejectsBadArguments) {
    const std::vector<double> ok = {1.0, 2.0, 3.0};
    EXPECT_THROW(bootstrap_median_ratio({}, ok), std::invalid_argument);
    EXPECT_THROW(bootstrap_median_ratio(ok, {}), std::invalid_argument);
    EXPECT_THROW(bootstrap_median_ratio(ok, {0.0, 0.0, 1.0}), std::invalid_argument);
    EXPECT_THROW(bootstrap_median_ratio(ok, {1.0, HUGE_VAL, 2.0}), std::invalid_argument);
    EXPECT_THROW(bootstrap_median_ratio(ok, ok, 0), std::invalid_argument);
    EXPECT_THROW(bootstrap_median_ratio(ok, ok, 100, 1.0), std::invalid_argument);
    EXPECT_THROW(bootstrap_median_ratio(ok, ok, 100, 0.0), std::invalid_argument);
}

TEST(StatsBootstrap, ResampledZeroBaselineMedianWidensNotBreaks) {
    // The baseline median is 1, but a resample drawing mostly zeros has median 0: the ratio is
    // infinite there, and the interval must stay ordered and free of NaN.
    const std::vector<double> base = {0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0};
    const std::vector<double> cand = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
    const interval i = bootstrap_median_ratio(cand, base);
    EXPECT_EQ(i.point, 1.0);
    EXPECT_FALSE(std::isnan(i.low));
    EXPECT_FALSE(std::isnan(i.high));
    EXPECT_LE(i.low, i.high);
    EXPECT_TRUE(std::isinf(i.high)); // nearly half the resamples have a zero baseline median
}

// ---------------------------------------------------------------------------------------------
// judge_timing, on synthetic samples: 15 per side unless said otherwise.

TEST(StatsJudge, VerdictNames) {
    EXPECT_STREQ(to_string(timing_verdict::same), "SAME");
    EXPECT_STREQ(to_string(timing_verdict::faster), "FASTER");
    EXPECT_STREQ(to_string(timing_verdict::slower_regression), "PERF_REGRESSION");
    EXPECT_STREQ(to_string(timing_verdict::ambiguous), "AMBIGUOUS");
}

TEST(StatsJudge, SlowdownOf20PercentWith2PercentNoiseIsRegression) {
    synthetic g(1);
    const auto baseline = g.timings(100.0, 0.02, 15);
    const auto candidate = g.timings(120.0, 0.02, 15);
    const timing_judgement j = judge_timing(baseline, candidate);
    EXPECT_EQ(j.verdict, timing_verdict::slower_regression) << j.reason;
    EXPECT_EQ(j.tolerance, 0.05) << "2% noise over 15 samples is below the floor";
    EXPECT_GT(j.ratio.low, 1.05);
    EXPECT_NEAR(j.ratio.point, 1.2, 0.03);
    EXPECT_LT(j.test.p_two_sided, 1e-4);
    EXPECT_GT(j.test.z, 0) << "candidate is the slower side";
    EXPECT_NE(j.reason.find("beyond tolerance 1.050x"), std::string::npos) << j.reason;
    EXPECT_NE(j.reason.find("95% CI"), std::string::npos) << j.reason;
    EXPECT_NE(j.reason.find("Mann-Whitney p="), std::string::npos) << j.reason;
}

TEST(StatsJudge, IdenticalDistributionsAreSame) {
    synthetic g(1);
    const auto baseline = g.timings(100.0, 0.02, 15);
    const auto candidate = g.timings(100.0, 0.02, 15);
    const timing_judgement j = judge_timing(baseline, candidate);
    EXPECT_EQ(j.verdict, timing_verdict::same) << j.reason;
    EXPECT_GE(j.ratio.low, 1 / 1.05);
    EXPECT_LE(j.ratio.high, 1.05);
    EXPECT_NE(j.reason.find("within tolerance"), std::string::npos) << j.reason;
}

TEST(StatsJudge, OneWildSampleDoesNotMakeARegression) {
    synthetic g(1);
    const auto baseline = g.timings(100.0, 0.02, 15);
    auto candidate = g.timings(100.0, 0.02, 15);
    candidate[7] = 1000.0; // a context switch, a page-fault storm
    const timing_judgement j = judge_timing(baseline, candidate);
    EXPECT_EQ(j.verdict, timing_verdict::same) << j.reason;
}

TEST(StatsJudge, SpeedupTo80PercentIsFaster) {
    synthetic g(1);
    const auto baseline = g.timings(100.0, 0.02, 15);
    const auto candidate = g.timings(80.0, 0.02, 15);
    const timing_judgement j = judge_timing(baseline, candidate);
    EXPECT_EQ(j.verdict, timing_verdict::faster) << j.reason;
    EXPECT_LT(j.ratio.high, 1 / 1.05);
    EXPECT_LT(j.test.z, 0);
    EXPECT_NE(j.reason.find("below tolerance 0.952x"), std::string::npos) << j.reason;
}

TEST(StatsJudge, HeavilyOverlappingNoisyPairIsAmbiguous) {
    // 25% noise, 12 per side, a true 1.15x change: the interval (about 0.94-1.59) reaches past
    // the tolerance (about 1.34x) but also down past 1.
    synthetic g(6);
    const auto baseline = g.timings(100.0, 0.25, 12);
    const auto candidate = g.timings(115.0, 0.25, 12);
    const timing_judgement j = judge_timing(baseline, candidate);
    EXPECT_EQ(j.verdict, timing_verdict::ambiguous) << j.reason;
    EXPECT_GT(j.tolerance, 0.05) << "this much noise must widen the tolerance past the floor";
    EXPECT_LT(j.ratio.low, 1 + j.tolerance);
    EXPECT_GT(j.ratio.high, 1 + j.tolerance);
    EXPECT_GT(j.test.p_two_sided, 0.05);
    EXPECT_NE(j.reason.find("straddles"), std::string::npos) << j.reason;
}

TEST(StatsJudge, ToleranceIsNoiseOfTheMedianRatio) {
    synthetic g(6);
    const auto baseline = g.timings(100.0, 0.25, 12);
    const auto candidate = g.timings(115.0, 0.25, 14);
    const timing_judgement j = judge_timing(baseline, candidate);
    const double expected_noise = std::max(relative_noise(baseline), relative_noise(candidate)) *
                                  std::sqrt(2.0) / std::sqrt(12.0); // the smaller side's n
    expect_close(j.noise, expected_noise, "noise");
    expect_close(j.tolerance, 3.0 * expected_noise, "tolerance = noise_k * noise");

    timing_options wide;
    wide.floor = 0.9; // a floor above the noise term wins
    EXPECT_EQ(judge_timing(baseline, candidate, wide).tolerance, 0.9);
}

TEST(StatsJudge, OutsideToleranceButNotSignificantIsAmbiguous) {
    // With 9 per side the smallest two-sided p is 4.1e-4, so alpha = 1e-6 can never be met: a
    // clear 1.2x slowdown must not be called a regression on the interval alone.
    synthetic g(1);
    const auto baseline = g.timings(100.0, 0.02, 9);
    const auto candidate = g.timings(120.0, 0.02, 9);
    timing_options strict;
    strict.alpha = 1e-6;
    const timing_judgement j = judge_timing(baseline, candidate, strict);
    EXPECT_GT(j.ratio.low, 1 + j.tolerance);
    EXPECT_EQ(j.verdict, timing_verdict::ambiguous) << j.reason;
    EXPECT_NE(j.reason.find("not significant"), std::string::npos) << j.reason;
    EXPECT_EQ(judge_timing(baseline, candidate).verdict, timing_verdict::slower_regression);
}

TEST(StatsJudge, TooFewSamplesThrowsNamingTheSide) {
    synthetic g(1);
    const auto nine = g.timings(100.0, 0.02, 9);
    const auto eight = g.timings(100.0, 0.02, 8);
    EXPECT_NO_THROW(judge_timing(nine, nine));
    std::string m = invalid_argument_message([&] { judge_timing(eight, nine); });
    EXPECT_NE(m.find("baseline has 8 samples"), std::string::npos) << m;
    m = invalid_argument_message([&] { judge_timing(nine, eight); });
    EXPECT_NE(m.find("candidate has 8 samples"), std::string::npos) << m;

    timing_options more;
    more.min_samples = 10;
    m = invalid_argument_message([&] { judge_timing(nine, nine, more); });
    EXPECT_NE(m.find("at least 10"), std::string::npos) << m;
}

TEST(StatsJudge, BadSamplesThrowNamingTheSide) {
    synthetic g(1);
    const auto good = g.timings(100.0, 0.02, 9);
    auto negative = good;
    negative[3] = -1.0;
    auto infinite = good;
    infinite[0] = HUGE_VAL;
    auto nan = good;
    nan[8] = std::nan("");

    std::string m = invalid_argument_message([&] { judge_timing(good, negative); });
    EXPECT_NE(m.find("candidate sample 3 is negative"), std::string::npos) << m;
    m = invalid_argument_message([&] { judge_timing(infinite, good); });
    EXPECT_NE(m.find("baseline sample 0 is not finite"), std::string::npos) << m;
    m = invalid_argument_message([&] { judge_timing(good, nan); });
    EXPECT_NE(m.find("candidate sample 8 is not finite"), std::string::npos) << m;
    m = invalid_argument_message([&] { judge_timing(std::vector<double>(9, 0.0), good); });
    EXPECT_NE(m.find("baseline median is 0"), std::string::npos) << m;
}

} // namespace

// The median a report shows: the same figure as median() where there is one, NaN where median()
// would throw.
TEST(StatsMedian, OrNanIsMedianWhereThereIsOneAndNanWhereNot) {
    EXPECT_EQ(pitfall::stats::median_or_nan({3.0, 1.0, 2.0, 10.0}),
              pitfall::stats::median({3.0, 1.0, 2.0, 10.0}));
    EXPECT_EQ(pitfall::stats::median_or_nan({5.0}), 5.0);
    EXPECT_TRUE(std::isnan(pitfall::stats::median_or_nan({})));
    EXPECT_TRUE(std::isnan(pitfall::stats::median_or_nan({1.0, std::nan(""), 2.0})));
}
