// Tests of the change-point detector (history/change_points.hpp) on synthetic series whose
// change points are known: a level of 1 s with 3% Gaussian noise, as on a quiet machine.
#include "history/change_points.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

namespace {
using namespace pitfall::history;

// Gaussian noise from the generator's raw output (Box-Muller): std::normal_distribution differs
// between standard libraries, and these series must be the same everywhere.
class noise {
public:
    explicit noise(std::uint64_t seed) : m_gen(seed) {}
    double next() {
        const double u1 = (static_cast<double>(m_gen() >> 11) + 0.5) * 0x1.0p-53;
        const double u2 = static_cast<double>(m_gen() >> 11) * 0x1.0p-53;
        return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    }

private:
    std::mt19937_64 m_gen;
};

// level(i) * (1 + relative_noise * N(0, 1)) for run indices 0..n-1.
template <class Level>
std::vector<series_point> make_series(std::size_t n, Level level, double relative_noise,
                                      std::uint64_t seed) {
    noise draw(seed);
    std::vector<series_point> s;
    for (std::size_t i = 0; i < n; ++i)
        s.push_back({static_cast<std::int64_t>(i), level(i) * (1 + relative_noise * draw.next())});
    return s;
}

change_point_analysis analyse(const std::vector<series_point>& s,
                              const change_point_options& options = {}) {
    auto found = find_change_points(s, options);
    EXPECT_TRUE(found.is_ok()) << found.error().message();
    return found.is_ok() ? found.value() : change_point_analysis{};
}

std::vector<series_point> step_series(std::size_t n, std::size_t at, double step,
                                      std::uint64_t seed) {
    return make_series(
        n, [&](std::size_t i) { return i < at ? 1.0 : 1.0 + step; }, 0.03, seed);
}

TEST(ChangePoints, StatisticEqualsTheQuadraticDefinition) {
    noise draw(7);
    std::vector<double> v;
    v.reserve(40);
    for (int i = 0; i < 40; ++i)
        v.push_back(i < 25 ? draw.next() : 1.5 + draw.next());
    v[3] = v[9]; // a tie: ranks must not matter
    const std::vector<double> fast = e_divisive_statistics(v, 3);
    ASSERT_EQ(fast.size(), v.size() + 1);
    for (std::size_t tau = 3; tau + 3 <= v.size(); ++tau) {
        double cross = 0, left = 0, right = 0;
        for (std::size_t i = 0; i < v.size(); ++i)
            for (std::size_t k = i + 1; k < v.size(); ++k) {
                const double d = std::fabs(v[i] - v[k]);
                (k < tau ? left : i >= tau ? right : cross) += d;
            }
        const double m = static_cast<double>(tau), r = static_cast<double>(v.size() - tau);
        const double q =
            m * r / (m + r) *
            (2 * cross / (m * r) - left / (m * (m - 1) / 2) - right / (r * (r - 1) / 2));
        EXPECT_NEAR(fast[tau], q, 1e-9 * std::max(1.0, std::fabs(q))) << "tau " << tau;
    }
    EXPECT_EQ(fast[2], 0.0); // shorter than min_segment: not a split
}

TEST(ChangePoints, NoneOnPureNoise) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
        const auto found = analyse(make_series(
            300, [](std::size_t) { return 1.0; }, 0.03, seed));
        EXPECT_TRUE(found.change_points.empty()) << "seed " << seed;
        EXPECT_EQ(found.shape, series_shape::stable) << "seed " << seed;
    }
}

TEST(ChangePoints, OneStepAtTheRightRun) {
    const auto found = analyse(step_series(120, 70, 0.10, 11));
    ASSERT_EQ(found.change_points.size(), 1u);
    const change_point& cp = found.change_points[0];
    EXPECT_NEAR(static_cast<double>(cp.run_index), 70, 1);
    EXPECT_NEAR(cp.step, 0.10, 0.02);
    EXPECT_NEAR(cp.mean_before, 1.0, 0.02);
    EXPECT_NEAR(cp.mean_after, 1.10, 0.02);
    EXPECT_GE(cp.confidence, 0.95);
    EXPECT_DOUBLE_EQ(cp.confidence, 1 - cp.p_value);
    EXPECT_EQ(found.shape, series_shape::step);
}

TEST(ChangePoints, TwoSteps) {
    const auto s = make_series(
        150, [](std::size_t i) { return i < 50    ? 1.0
                                        : i < 100 ? 1.15
                                                  : 1.05; }, 0.03, 12);
    const auto found = analyse(s);
    ASSERT_EQ(found.change_points.size(), 2u);
    EXPECT_NEAR(static_cast<double>(found.change_points[0].run_index), 50, 2);
    EXPECT_NEAR(static_cast<double>(found.change_points[1].run_index), 100, 2);
    EXPECT_GT(found.change_points[0].step, 0.10);
    EXPECT_LT(found.change_points[1].step, -0.05);
    EXPECT_EQ(found.shape, series_shape::step);
}

TEST(ChangePoints, StepsOfFiveTenAndTwentyPercentInThreePercentNoise) {
    for (const double step : {0.05, 0.10, 0.20}) {
        const auto found = analyse(step_series(100, 50, step, 21));
        ASSERT_EQ(found.change_points.size(), 1u) << "step " << step;
        EXPECT_NEAR(static_cast<double>(found.change_points[0].run_index), 50, 2) << step;
        EXPECT_NEAR(found.change_points[0].step, step, 0.25 * step) << "step " << step;
        EXPECT_EQ(found.shape, series_shape::step) << "step " << step;
    }
}

TEST(ChangePoints, DriftIsNotAStep) {
    // 20% slower over 200 runs, a little at a time.
    const auto s = make_series(
        200, [](std::size_t i) { return 1.0 + 0.001 * static_cast<double>(i); }, 0.03, 31);
    const auto found = analyse(s);
    EXPECT_EQ(found.shape, series_shape::drift) << found.change_points.size() << " change points";
    EXPECT_NEAR(found.trend_change, 0.2 / 1.1, 0.04);
    for (const change_point& cp : found.change_points)
        EXPECT_GT(cp.step, 0.0);
}

TEST(ChangePoints, TinySeriesHaveNone) {
    // A 50% step, but fewer than 2 * min_segment runs: no split is allowed.
    const auto found = analyse(step_series(9, 5, 0.5, 41));
    EXPECT_TRUE(found.change_points.empty());
    EXPECT_EQ(found.values_used, 9u);
    EXPECT_TRUE(analyse({}).change_points.empty());
    EXPECT_TRUE(analyse({{0, 1.0}}).change_points.empty());
}

TEST(ChangePoints, ConstantSeriesHasNone) {
    const auto found = analyse(make_series(
        50, [](std::size_t) { return 2.0; }, 0.0, 1));
    EXPECT_TRUE(found.change_points.empty());
    EXPECT_EQ(found.shape, series_shape::stable);
}

TEST(ChangePoints, NonFiniteValuesAreSkipped) {
    auto s = step_series(100, 60, 0.2, 51);
    s[10].value = std::numeric_limits<double>::quiet_NaN();
    s[20].value = std::numeric_limits<double>::infinity();
    s[75].value = -std::numeric_limits<double>::infinity();
    const auto found = analyse(s);
    EXPECT_EQ(found.values_used, 97u);
    EXPECT_EQ(found.values_skipped, 3u);
    ASSERT_EQ(found.change_points.size(), 1u);
    // The run index, not the position among the finite values (two fewer before it).
    EXPECT_NEAR(static_cast<double>(found.change_points[0].run_index), 60, 1);
    EXPECT_NEAR(static_cast<double>(found.change_points[0].position), 58, 1);
    EXPECT_TRUE(std::isfinite(found.change_points[0].mean_after));
}

TEST(ChangePoints, RunOrderNotInputOrder) {
    auto s = step_series(80, 40, 0.2, 62);
    std::vector<series_point> reversed(s.rbegin(), s.rend());
    const auto a = analyse(s), b = analyse(reversed);
    ASSERT_EQ(a.change_points.size(), 1u);
    ASSERT_EQ(b.change_points.size(), 1u);
    EXPECT_NEAR(static_cast<double>(a.change_points[0].run_index), 40, 1);
    EXPECT_EQ(a.change_points[0].run_index, b.change_points[0].run_index);
    EXPECT_EQ(a.change_points[0].p_value, b.change_points[0].p_value);
}

TEST(ChangePoints, SameSeedSameAnswer) {
    const auto s = make_series(
        300, [](std::size_t i) { return i < 100   ? 1.0
                                        : i < 220 ? 1.06
                                                  : 0.97; }, 0.03, 71);
    change_point_options options;
    options.seed = 99;
    const auto a = analyse(s, options), b = analyse(s, options);
    ASSERT_EQ(a.change_points.size(), b.change_points.size());
    ASSERT_FALSE(a.change_points.empty());
    for (std::size_t i = 0; i < a.change_points.size(); ++i) {
        EXPECT_EQ(a.change_points[i].run_index, b.change_points[i].run_index);
        EXPECT_EQ(a.change_points[i].p_value, b.change_points[i].p_value);
        EXPECT_EQ(a.change_points[i].statistic, b.change_points[i].statistic);
    }
}

TEST(ChangePoints, ThePermutationsFollowTheSeed) {
    // Noise, and a level so loose that its best split stands: a p-value between the extremes,
    // which only the permutations decide.
    const auto s = make_series(
        60, [](std::size_t) { return 1.0; }, 0.03, 72);
    change_point_options options;
    options.significance = 0.99;
    options.permutations = 99;
    options.seed = 5;
    const auto a = analyse(s, options), b = analyse(s, options);
    options.seed = 6;
    const auto c = analyse(s, options);
    ASSERT_FALSE(a.change_points.empty());
    ASSERT_FALSE(c.change_points.empty());
    EXPECT_GT(a.change_points[0].p_value, 0.02);
    EXPECT_EQ(a.change_points[0].p_value, b.change_points[0].p_value);
    EXPECT_NE(a.change_points[0].p_value, c.change_points[0].p_value);
}

TEST(ChangePoints, OptionsOutOfBoundsAreErrors) {
    const auto s = step_series(40, 20, 0.2, 81);
    change_point_options o;
    o.min_segment = 1;
    auto r = find_change_points(s, o);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.error().message().find("min_segment"), std::string::npos);
    o = {};
    o.significance = 1.0;
    EXPECT_FALSE(find_change_points(s, o).is_ok());
    o = {};
    o.permutations = 0;
    EXPECT_FALSE(find_change_points(s, o).is_ok());
    o = {};
    o.drift_min_change = std::numeric_limits<double>::quiet_NaN();
    EXPECT_FALSE(find_change_points(s, o).is_ok());
}

} // namespace
