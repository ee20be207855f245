#include "judge/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace pitfall::stats {
namespace {

// 1 / Phi^-1(3/4) rounded as the literature (and the header's promise) rounds it; scipy's
// median_abs_deviation(scale='normal') uses the unrounded 1.482602..., 1.5e-6 apart.
constexpr double mad_to_sigma = 1.4826;

bool has_nan(const std::vector<double>& v) {
    return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

void require_rankable(const std::vector<double>& v, const char* what, const char* side) {
    if (v.empty())
        throw std::invalid_argument(std::string(what) + ": " + side + " is empty");
    if (has_nan(v))
        throw std::invalid_argument(std::string(what) + ": " + side + " holds a NaN");
}

// Infinite samples would make inf / inf ratios, NaN, which cannot be sorted.
void require_finite(const std::vector<double>& v, const char* what, const char* side) {
    require_rankable(v, what, side);
    if (!std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }))
        throw std::invalid_argument(std::string(what) + ": " + side + " holds an infinite value");
}

// The median of a vector the caller lets us reorder. Both middle values of an even count come
// from one nth_element: the lower middle is the largest of the partition below the upper one.
double median_in_place(std::vector<double>& v) {
    const std::size_t n = v.size();
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(v.begin(), mid, v.end());
    const double upper = *mid;
    if (n % 2 == 1)
        return upper;
    const double lower = *std::max_element(v.begin(), mid);
    return (lower + upper) / 2; // as numpy.median computes it, to the last bit
}

// A uniform index in [0, n) from the raw 64-bit output: reject the first 2^64 mod n values so
// that every residue is equally likely, then reduce. Written out rather than taken from
// std::uniform_int_distribution so the sequence is the same with every standard library.
std::size_t uniform_index(std::mt19937_64& rng, std::uint64_t n) {
    const std::uint64_t reject_below = (std::uint64_t{0} - n) % n; // 2^64 mod n
    for (;;) {
        const std::uint64_t x = rng();
        if (x >= reject_below)
            return static_cast<std::size_t>(x % n);
    }
}

void resample_into(const std::vector<double>& from, std::vector<double>& to, std::mt19937_64& rng) {
    const auto n = static_cast<std::uint64_t>(from.size());
    for (double& x : to)
        x = from[uniform_index(rng, n)];
}

// numpy.quantile's default ("linear", Hyndman & Fan type 7) on sorted data: position q (n - 1),
// interpolated between the order statistics either side, from whichever end is nearer as
// numpy's _lerp does.
double quantile_sorted(const std::vector<double>& sorted, double q) {
    const double h = q * static_cast<double>(sorted.size() - 1);
    const double below = std::floor(h);
    const auto i = static_cast<std::size_t>(below);
    if (i + 1 >= sorted.size())
        return sorted.back();
    const double lo = sorted[i];
    const double hi = sorted[i + 1];
    if (lo == hi) // also keeps an infinite ratio (see below) from becoming NaN
        return lo;
    const double t = h - below;
    return t < 0.5 ? lo + (hi - lo) * t : hi - (hi - lo) * (1 - t);
}

// A resampled baseline median can be 0 even when the baseline's is not: a candidate median > 0
// over it is infinitely slower (and widens the interval, as it should); 0 over 0 is no change.
double ratio_of(double numerator, double denominator) {
    if (denominator != 0)
        return numerator / denominator;
    if (numerator == 0)
        return 1;
    const double inf = std::numeric_limits<double>::infinity();
    return std::copysign(inf, numerator) * std::copysign(1.0, denominator);
}

std::string format(const char* fmt, double a) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, a);
    return buf;
}

// p-values span many decades: two significant digits, switching to exponent form where %g does.
std::string format_p(double p) {
    return format("%.2g", p);
}
std::string format_ratio(double r) {
    return format("%.3f", r) + "x";
}

void check_samples(const std::vector<double>& v, const char* side, std::size_t min_samples) {
    if (v.size() < min_samples)
        throw std::invalid_argument("judge_timing: " + std::string(side) + " has " +
                                    std::to_string(v.size()) + " samples, at least " +
                                    std::to_string(min_samples) + " are needed");
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (!std::isfinite(v[i]))
            throw std::invalid_argument("judge_timing: " + std::string(side) + " sample " +
                                        std::to_string(i) + " is not finite (" +
                                        format("%g", v[i]) + ")");
        if (v[i] < 0)
            throw std::invalid_argument("judge_timing: " + std::string(side) + " sample " +
                                        std::to_string(i) + " is negative (" + format("%g", v[i]) +
                                        ")");
    }
}

} // namespace

double median_or_nan(std::vector<double> v) {
    if (v.empty() || std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); }))
        return std::nan("");
    return median_in_place(v);
}

double median(std::vector<double> v) {
    require_rankable(v, "median", "the sample");
    return median_in_place(v);
}

double relative_noise(const std::vector<double>& v) {
    std::vector<double> work = v;
    require_rankable(work, "relative_noise", "the sample");
    const double m = median_in_place(work);
    if (m == 0)
        return 0;
    for (std::size_t i = 0; i < v.size(); ++i)
        work[i] = std::abs(v[i] - m);
    return mad_to_sigma * median_in_place(work) / std::abs(m);
}

mann_whitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
    require_rankable(a, "mann_whitney_u", "sample a");
    require_rankable(b, "mann_whitney_u", "sample b");
    const std::size_t na = a.size();
    const std::size_t nb = b.size();
    const std::size_t n = na + nb;

    // Rank the pooled sample (average ranks for ties); index < na marks a value from a.
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    auto value = [&](std::size_t k) { return k < na ? a[k] : b[k - na]; };
    std::sort(order.begin(), order.end(),
              [&](std::size_t l, std::size_t r) { return value(l) < value(r); });

    double rank_sum_a = 0;
    double tie_term = 0; // sum over tie groups of t^3 - t
    for (std::size_t i = 0; i < n;) {
        std::size_t j = i + 1;
        while (j < n && value(order[j]) == value(order[i]))
            ++j;
        // ranks i+1 .. j (1-based), all given their mean
        const double avg_rank = static_cast<double>(i + 1 + j) / 2;
        for (std::size_t k = i; k < j; ++k)
            if (order[k] < na)
                rank_sum_a += avg_rank;
        const auto t = static_cast<double>(j - i);
        tie_term += t * t * t - t;
        i = j;
    }

    const auto dna = static_cast<double>(na);
    const auto dnb = static_cast<double>(nb);
    const auto dn = static_cast<double>(n);
    mann_whitney r{};
    r.u_a = rank_sum_a - dna * (dna + 1) / 2;
    r.u_b = dna * dnb - r.u_a;

    // scipy: z = (max(U_a, U_b) - mu - 1/2) / sigma, p = 2 sf(z) clipped to 1. Here the same
    // magnitude is signed by the direction of a, and clamped at 0 where scipy's goes negative
    // (that only happens when p would exceed 1 and is clipped).
    const double mu = dna * dnb / 2;
    const double sigma = std::sqrt(dna * dnb / 12 * ((dn + 1) - tie_term / (dn * (dn - 1))));
    const double d = r.u_a - mu;
    const double excess = std::max(std::abs(d) - 0.5, 0.0);
    if (sigma > 0 && excess > 0) {
        r.z = std::copysign(excess / sigma, d);
        // 2 * (1 - Phi(|z|)) = erfc(|z| / sqrt 2): no cancellation far in the tail.
        r.p_two_sided = std::min(1.0, std::erfc(std::abs(r.z) / std::sqrt(2.0)));
    } else {
        // sigma = 0 only when every value is tied, and then d = 0: no evidence either way.
        r.z = 0;
        r.p_two_sided = 1;
    }
    return r;
}

interval bootstrap_median_ratio(const std::vector<double>& candidate,
                                const std::vector<double>& baseline, int resamples,
                                double confidence, std::uint64_t seed) {
    require_finite(candidate, "bootstrap_median_ratio", "the candidate");
    require_finite(baseline, "bootstrap_median_ratio", "the baseline");
    if (resamples < 1)
        throw std::invalid_argument("bootstrap_median_ratio: resamples must be at least 1, not " +
                                    std::to_string(resamples));
    if (!(confidence > 0 && confidence < 1))
        throw std::invalid_argument("bootstrap_median_ratio: confidence must lie in (0, 1), not " +
                                    format("%g", confidence));
    const double base_median = median(baseline);
    if (base_median == 0)
        throw std::invalid_argument("bootstrap_median_ratio: the baseline median is 0, so a ratio "
                                    "to it has no meaning");

    std::mt19937_64 rng(seed);
    std::vector<double> c(candidate.size());
    std::vector<double> b(baseline.size());
    std::vector<double> ratios(static_cast<std::size_t>(resamples));
    for (double& ratio : ratios) {
        resample_into(candidate, c, rng);
        resample_into(baseline, b, rng);
        ratio = ratio_of(median_in_place(c), median_in_place(b));
    }
    std::sort(ratios.begin(), ratios.end());
    const double tail = (1 - confidence) / 2;
    return {median(candidate) / base_median, quantile_sorted(ratios, tail),
            quantile_sorted(ratios, 1 - tail)};
}

const char* to_string(timing_verdict verdict) {
    switch (verdict) {
    case timing_verdict::same: return "SAME";
    case timing_verdict::faster: return "FASTER";
    case timing_verdict::slower_regression: return "PERF_REGRESSION";
    case timing_verdict::ambiguous: return "AMBIGUOUS";
    }
    return "AMBIGUOUS";
}

timing_judgement judge_timing(const std::vector<double>& baseline,
                              const std::vector<double>& candidate, const timing_options& options) {
    if (!(options.floor >= 0) || !std::isfinite(options.floor))
        throw std::invalid_argument("judge_timing: floor must be finite and >= 0");
    if (!(options.noise_k >= 0) || !std::isfinite(options.noise_k))
        throw std::invalid_argument("judge_timing: noise_k must be finite and >= 0");
    if (!(options.alpha > 0 && options.alpha < 1))
        throw std::invalid_argument("judge_timing: alpha must lie in (0, 1)");
    // Two per side is the least for which a spread, a rank test or a resample means anything.
    const std::size_t min_samples = std::max<std::size_t>(options.min_samples, 2);
    check_samples(baseline, "baseline", min_samples);
    check_samples(candidate, "candidate", min_samples);
    if (median(baseline) == 0)
        throw std::invalid_argument("judge_timing: baseline median is 0, so a ratio to it has no "
                                    "meaning");

    timing_judgement j{};
    // relative_noise is the spread of one sample; the verdict is about the ratio of two medians.
    // The standard error of a median falls as 1/sqrt(n) (about 1.25 sigma/sqrt(n) for normal
    // data), and relative errors of two independent medians add in quadrature, hence sqrt(2).
    // The noisier side stands for both (conservative), the smaller n for both (conservative),
    // and the 1.25 is left to noise_k. Using the per-sample noise instead would make the
    // tolerance blind to sample count: 100 samples would earn no tighter a verdict than 9.
    const auto n_min = static_cast<double>(std::min(baseline.size(), candidate.size()));
    j.noise = std::max(relative_noise(baseline), relative_noise(candidate)) * std::sqrt(2.0) /
              std::sqrt(n_min);
    j.tolerance = std::max(options.floor, options.noise_k * j.noise);
    j.ratio = bootstrap_median_ratio(candidate, baseline, options.resamples, options.confidence,
                                     options.seed);
    j.test = mann_whitney_u(candidate, baseline);
    {
        std::vector<double> scaled = baseline;
        for (double& x : scaled)
            x *= 1 + j.tolerance;
        const double z = mann_whitney_u(candidate, scaled).z;
        j.p_regression = 0.5 * std::erfc(z / std::sqrt(2.0));
    }

    const double upper = 1 + j.tolerance;
    const double lower = 1 / upper;
    const bool significant = j.test.p_two_sided < options.alpha;
    const std::string ci = "median " + format_ratio(j.ratio.point) + " (" +
                           format("%g", options.confidence * 100) + "% CI " +
                           format("%.3f", j.ratio.low) + "-" + format("%.3f", j.ratio.high) + ")";
    const std::string test = "Mann-Whitney p=" + format_p(j.test.p_two_sided);
    const std::string band = format_ratio(lower) + "-" + format_ratio(upper);

    if (j.ratio.low > upper && significant) {
        j.verdict = timing_verdict::slower_regression;
        j.reason = ci + " beyond tolerance " + format_ratio(upper) + "; " + test;
    } else if (j.ratio.high < lower && significant) {
        j.verdict = timing_verdict::faster;
        j.reason = ci + " below tolerance " + format_ratio(lower) + "; " + test;
    } else if (j.ratio.low >= lower && j.ratio.high <= upper) {
        j.verdict = timing_verdict::same;
        j.reason = ci + " within tolerance " + band + "; " + test;
    } else {
        j.verdict = timing_verdict::ambiguous;
        if (j.ratio.low > upper || j.ratio.high < lower)
            j.reason = ci + " outside tolerance " + band + " but not significant: " + test +
                       " >= alpha " + format("%g", options.alpha);
        else
            j.reason = ci + " straddles a tolerance bound (" + band + "); " + test;
    }
    return j;
}

namespace {
void check_p_values(const std::vector<double>& p) {
    for (const double x : p)
        if (!(x >= 0 && x <= 1))
            throw std::invalid_argument("p-value adjustment: every p must lie in [0, 1]");
}
std::vector<std::size_t> order_of(const std::vector<double>& p) {
    std::vector<std::size_t> order(p.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return p[a] < p[b]; });
    return order;
}
} // namespace

std::vector<double> holm_adjust(const std::vector<double>& p) {
    check_p_values(p);
    const std::size_t m = p.size();
    const std::vector<std::size_t> order = order_of(p);
    std::vector<double> adjusted(m);
    double running = 0;
    for (std::size_t rank = 0; rank < m; ++rank) {
        const std::size_t i = order[rank];
        running = std::max(running, std::min(1.0, static_cast<double>(m - rank) * p[i]));
        adjusted[i] = running;
    }
    return adjusted;
}

std::vector<double> bh_adjust(const std::vector<double>& p) {
    check_p_values(p);
    const std::size_t m = p.size();
    const std::vector<std::size_t> order = order_of(p);
    std::vector<double> adjusted(m);
    double running = 1;
    for (std::size_t rank = m; rank-- > 0;) {
        const std::size_t i = order[rank];
        running = std::min(running, static_cast<double>(m) / static_cast<double>(rank + 1) * p[i]);
        adjusted[i] = std::min(1.0, running);
    }
    return adjusted;
}

} // namespace pitfall::stats
