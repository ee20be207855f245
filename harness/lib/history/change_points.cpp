#include "history/change_points.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>

namespace pitfall::history {
namespace {

// A Fenwick tree over the ranks of a segment's values: the count and the sum of the values
// inserted so far below a rank, so that sum_i |z_i - z_k| over the inserted z_i costs O(log n)
// instead of O(n). This is what makes q-hat for every split O(n log n) rather than the O(n^2)
// distance matrix of the reference implementations (10,000 runs: 10^8 distances per split).
class rank_sums {
public:
    explicit rank_sums(std::size_t n) : m_count(n + 1, 0), m_sum(n + 1, 0.0) {}

    void clear() {
        std::fill(m_count.begin(), m_count.end(), 0);
        std::fill(m_sum.begin(), m_sum.end(), 0.0);
        m_total_count = 0;
        m_total_sum = 0.0;
    }

    void add(std::size_t rank, double value) {
        for (std::size_t i = rank + 1; i < m_count.size(); i += i & (~i + 1)) {
            ++m_count[i];
            m_sum[i] += value;
        }
        ++m_total_count;
        m_total_sum += value;
    }

    // Sum of |x - value| over the inserted x; `rank` is value's rank. Ties with distinct ranks
    // land on either side and add |x - value| = 0 there, so their order does not matter.
    double distance_sum(std::size_t rank, double value) const {
        std::size_t below_count = 0;
        double below_sum = 0.0;
        for (std::size_t i = rank; i > 0; i -= i & (~i + 1)) {
            below_count += m_count[i];
            below_sum += m_sum[i];
        }
        const double above_count = static_cast<double>(m_total_count - below_count);
        return (static_cast<double>(below_count) * value - below_sum) +
               ((m_total_sum - below_sum) - above_count * value);
    }

private:
    std::vector<std::size_t> m_count;
    std::vector<double> m_sum;
    std::size_t m_total_count = 0;
    double m_total_sum = 0.0;
};

// What one segment's search needs, allocated once per segment and reused by its permutations.
struct workspace {
    explicit workspace(std::size_t n) : tree(n), left(n + 1), right(n + 1) {}
    rank_sums tree;
    std::vector<double> left;  // left[t]: sum |z_i - z_k| over i < k < t
    std::vector<double> right; // right[t]: sum |z_j - z_k| over t <= j < k
};

struct split {
    std::size_t tau = 0;
    double q = 0.0;
};

// Matteson & James (2014), eq. 4 and 5 with alpha = 1, for X = z[0, tau), Y = z[tau, n):
//   E = 2/(m r) sum|X_i - Y_j| - 1/C(m,2) sum_{i<k}|X_i - X_k| - 1/C(r,2) sum_{j<k}|Y_j - Y_k|
//   q-hat = m r / (m + r) * E
// the within-sample means over distinct pairs, as the paper has it (MongoDB's package divides by
// m^2 and r^2 instead, which favours short segments slightly). `all`, when given, gets q-hat for
// every tau (0 where the split is not allowed).
split best_split(const double* v, const std::size_t* rank, std::size_t n, std::size_t min_segment,
                 workspace& w, std::vector<double>* all = nullptr) {
    w.tree.clear();
    w.left[0] = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
        w.left[k + 1] = w.left[k] + w.tree.distance_sum(rank[k], v[k]);
        w.tree.add(rank[k], v[k]);
    }
    w.tree.clear();
    w.right[n] = 0.0;
    for (std::size_t k = n; k-- > 0;) {
        w.right[k] = w.right[k + 1] + w.tree.distance_sum(rank[k], v[k]);
        w.tree.add(rank[k], v[k]);
    }
    if (all)
        all->assign(n + 1, 0.0);
    const double total = w.left[n];
    const std::size_t shortest = std::max<std::size_t>(min_segment, 2);
    split best;
    for (std::size_t tau = shortest; tau + shortest <= n; ++tau) {
        const double m = static_cast<double>(tau);
        const double r = static_cast<double>(n - tau);
        const double cross = total - w.left[tau] - w.right[tau];
        const double e = 2.0 * cross / (m * r) - w.left[tau] / (m * (m - 1) / 2) -
                         w.right[tau] / (r * (r - 1) / 2);
        const double q = m * r / (m + r) * e;
        if (all)
            (*all)[tau] = q;
        if (best.tau == 0 || q > best.q)
            best = {tau, q};
    }
    return best;
}

// Ranks 0..n-1 of v (ties broken by position: any order gives the same distances).
std::vector<std::size_t> ranks_of(const std::vector<double>& v) {
    std::vector<std::size_t> order(v.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    std::vector<std::size_t> rank(v.size());
    for (std::size_t r = 0; r < order.size(); ++r)
        rank[order[r]] = r;
    return rank;
}

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Uniform in [0, bound) from the generator's raw output by rejection: std::mt19937_64 is fully
// specified by the standard, std::uniform_int_distribution is not (each library has its own),
// and the answer must be the same on every platform.
std::uint64_t below(std::mt19937_64& gen, std::uint64_t bound) {
    const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() -
                                std::numeric_limits<std::uint64_t>::max() % bound;
    std::uint64_t x = gen();
    while (x >= limit)
        x = gen();
    return x % bound;
}

// The permutation test of Matteson & James section 3.3, as MongoDB's and hunter's
// QHatPermutationsSignificanceTester run it: shuffle the segment, take the largest q-hat over
// its allowed splits, count the shuffles that reach the observed one; p = (count + 1) / (R + 1).
// Stops as soon as the count makes p >= significance: the candidate fails whatever the rest say,
// and a segment of noise (most of them) costs a few shuffles instead of R.
double permutation_p_value(std::vector<double> v, std::vector<std::size_t> rank, double observed,
                           std::uint64_t stream, const change_point_options& options,
                           workspace& w) {
    // Seeded per segment (by its bounds), so a segment's answer does not depend on the order
    // in which the bisection reaches it.
    std::mt19937_64 gen(splitmix64(options.seed ^ splitmix64(stream)));
    const double denominator = static_cast<double>(options.permutations) + 1;
    std::size_t reached = 0;
    for (std::size_t i = 0; i < options.permutations; ++i) {
        for (std::size_t k = v.size() - 1; k > 0; --k) {
            const std::size_t j = static_cast<std::size_t>(below(gen, k + 1));
            std::swap(v[k], v[j]);
            std::swap(rank[k], rank[j]);
        }
        if (best_split(v.data(), rank.data(), v.size(), options.min_segment, w).q >= observed)
            ++reached;
        if (static_cast<double>(reached + 1) / denominator >= options.significance)
            return static_cast<double>(reached + 1) / denominator; // already failed
    }
    return static_cast<double>(reached + 1) / denominator;
}

struct accepted {
    std::size_t position;
    double q;
    double p;
};

// Bisection: test the best split of a segment; where it stands, do the same for both halves.
// Each segment is tested on its own (hunter's recursive split); MongoDB's package instead tests
// the best candidate over all segments against shuffles of every segment, which costs R passes
// over the whole series per change point.
std::vector<accepted> bisect(const std::vector<double>& values,
                             const change_point_options& options) {
    std::vector<accepted> found;
    std::vector<std::pair<std::size_t, std::size_t>> pending{{0, values.size()}};
    while (!pending.empty()) {
        const auto [lo, hi] = pending.back();
        pending.pop_back();
        const std::size_t n = hi - lo;
        if (n < 2 * std::max<std::size_t>(options.min_segment, 2))
            continue;
        std::vector<double> segment(values.begin() + static_cast<std::ptrdiff_t>(lo),
                                    values.begin() + static_cast<std::ptrdiff_t>(hi));
        const std::vector<std::size_t> rank = ranks_of(segment);
        workspace w(n);
        const split best = best_split(segment.data(), rank.data(), n, options.min_segment, w);
        if (!(best.q > 0.0))
            continue; // a constant segment: nothing to split
        const double p = permutation_p_value(segment, rank, best.q, (lo << 32) ^ hi, options, w);
        if (p >= options.significance)
            continue;
        found.push_back({lo + best.tau, best.q, p});
        pending.emplace_back(lo + best.tau, hi);
        pending.emplace_back(lo, lo + best.tau);
    }
    std::sort(found.begin(), found.end(),
              [](const accepted& a, const accepted& b) { return a.position < b.position; });
    return found;
}

double median_of(const std::vector<double>& v, std::size_t lo, std::size_t hi) {
    std::vector<double> part(v.begin() + static_cast<std::ptrdiff_t>(lo),
                             v.begin() + static_cast<std::ptrdiff_t>(hi));
    const std::size_t mid = part.size() / 2;
    std::nth_element(part.begin(), part.begin() + static_cast<std::ptrdiff_t>(mid), part.end());
    const double upper = part[mid];
    if (part.size() % 2 == 1)
        return upper;
    return (upper +
            *std::max_element(part.begin(), part.begin() + static_cast<std::ptrdiff_t>(mid))) /
           2;
}

double mean_of(const std::vector<double>& v, std::size_t lo, std::size_t hi) {
    return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(lo),
                           v.begin() + static_cast<std::ptrdiff_t>(hi), 0.0) /
           static_cast<double>(hi - lo);
}

// Segment bounds: 0, each change point's position, n.
std::vector<std::size_t> bounds_of(const std::vector<accepted>& found, std::size_t n) {
    std::vector<std::size_t> bounds{0};
    for (const accepted& a : found)
        bounds.push_back(a.position);
    bounds.push_back(n);
    return bounds;
}

std::vector<change_point> describe(const std::vector<double>& values,
                                   const std::vector<std::int64_t>& runs,
                                   const std::vector<accepted>& found) {
    const std::vector<std::size_t> bounds = bounds_of(found, values.size());
    std::vector<change_point> out;
    for (std::size_t i = 0; i < found.size(); ++i) {
        change_point cp;
        cp.position = found[i].position;
        cp.run_index = runs[cp.position];
        cp.median_before = median_of(values, bounds[i], bounds[i + 1]);
        cp.mean_before = mean_of(values, bounds[i], bounds[i + 1]);
        cp.median_after = median_of(values, bounds[i + 1], bounds[i + 2]);
        cp.mean_after = mean_of(values, bounds[i + 1], bounds[i + 2]);
        cp.step = cp.median_before != 0.0 ? cp.median_after / cp.median_before - 1
                                          : std::numeric_limits<double>::quiet_NaN();
        cp.statistic = found[i].q;
        cp.p_value = found[i].p;
        cp.confidence = 1 - found[i].p;
        out.push_back(cp);
    }
    return out;
}

struct line_fit {
    double slope = 0.0;
    double t = 0.0;
    double rss = 0.0;
    double sad = 0.0; // sum of absolute residuals
};

// Ordinary least squares of value on position (0..n-1).
line_fit fit_line(const std::vector<double>& v) {
    const double n = static_cast<double>(v.size());
    const double x_mean = (n - 1) / 2;
    const double y_mean = mean_of(v, 0, v.size());
    double sxx = 0.0, sxy = 0.0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        sxx += (static_cast<double>(i) - x_mean) * (static_cast<double>(i) - x_mean);
        sxy += (static_cast<double>(i) - x_mean) * (v[i] - y_mean);
    }
    line_fit fit;
    fit.slope = sxx > 0 ? sxy / sxx : 0.0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const double r = v[i] - (y_mean + fit.slope * (static_cast<double>(i) - x_mean));
        fit.rss += r * r;
        fit.sad += std::fabs(r);
    }
    const double se = std::sqrt(fit.rss / std::max(n - 2, 1.0) / sxx);
    fit.t = se > 0 ? fit.slope / se : (fit.slope != 0 ? std::copysign(HUGE_VAL, fit.slope) : 0.0);
    return fit;
}

// Bayesian information criterion of a Laplace model (the scale's estimate is the mean absolute
// residual) with `parameters` free parameters: absolute rather than squared residuals, because
// run times carry outliers, and one slow run must not decide between a line and a step.
double bic(double sad, std::size_t n, double parameters) {
    const double nn = static_cast<double>(n);
    return nn * std::log(std::max(sad / nn, std::numeric_limits<double>::min())) +
           parameters * std::log(nn);
}

// A slope below this |t| is not a trend: 3 rather than 1.96, because run-to-run noise is not
// independent (load comes in episodes) and a t test on a slope then claims too much.
constexpr double trend_t_threshold = 3.0;

// Step or drift: a drift is a significant straight trend of at least drift_min_change whose
// change points, if any, all go its way, and which a line (3 parameters: level, slope, scale)
// fits at least as well as the change points' segments (k + 1 levels, k positions, scale) by
// BIC. A ramp cut into several small same-sign steps is a drift; two clean steps are steps.
void classify(const std::vector<double>& v, const std::vector<accepted>& found,
              const change_point_options& options, change_point_analysis& out) {
    if (v.size() < 3)
        return;
    const line_fit line = fit_line(v);
    const double mean = mean_of(v, 0, v.size());
    out.trend_t = line.t;
    out.trend_change =
        mean != 0 ? line.slope * static_cast<double>(v.size() - 1) / std::fabs(mean) : 0.0;
    const std::vector<std::size_t> bounds = bounds_of(found, v.size());
    double step_sad = 0.0;
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
        const double m = median_of(v, bounds[i], bounds[i + 1]);
        for (std::size_t k = bounds[i]; k < bounds[i + 1]; ++k)
            step_sad += std::fabs(v[k] - m);
    }
    const double k = static_cast<double>(found.size());
    const bool line_fits = bic(line.sad, v.size(), 3) <= bic(step_sad, v.size(), 2 * k + 2);
    const bool same_way =
        std::all_of(out.change_points.begin(), out.change_points.end(),
                    [&](const change_point& cp) { return cp.step * line.slope > 0; });
    if (std::fabs(line.t) >= trend_t_threshold &&
        std::fabs(out.trend_change) >= options.drift_min_change && line_fits && same_way)
        out.shape = series_shape::drift;
    else if (!found.empty())
        out.shape = series_shape::step;
}

status bad_option(const std::string& name, const std::string& why) {
    return status::error(pitfall_error::bad_parameter, "change point option " + name + ": " + why,
                         stage::none);
}

status check(const change_point_options& o) {
    if (o.min_segment < 2)
        return bad_option("min_segment", "must be at least 2 (a segment's spread needs 2 runs)");
    if (!(o.significance > 0.0 && o.significance < 1.0))
        return bad_option("significance", "must be in (0, 1)");
    if (o.permutations < 1 || o.permutations > 1'000'000)
        return bad_option("permutations", "must be in [1, 1000000]");
    if (!(o.drift_min_change >= 0.0 && std::isfinite(o.drift_min_change)))
        return bad_option("drift_min_change", "must be a finite number >= 0");
    return status::ok();
}

} // namespace

std::string_view to_string(series_shape shape) {
    switch (shape) {
    case series_shape::stable: return "stable";
    case series_shape::step: return "step";
    case series_shape::drift: return "drift";
    }
    return "stable";
}

std::vector<double> e_divisive_statistics(const std::vector<double>& values,
                                          std::size_t min_segment) {
    std::vector<double> all(values.size() + 1, 0.0);
    if (values.size() < 2 * std::max<std::size_t>(min_segment, 2))
        return all;
    workspace w(values.size());
    const std::vector<std::size_t> rank = ranks_of(values);
    best_split(values.data(), rank.data(), values.size(), min_segment, w, &all);
    return all;
}

status_or<change_point_analysis> find_change_points(const std::vector<series_point>& series,
                                                    const change_point_options& options) {
    PITFALL_TRY(check(options));
    std::vector<series_point> ordered = series;
    std::stable_sort(
        ordered.begin(), ordered.end(),
        [](const series_point& a, const series_point& b) { return a.run_index < b.run_index; });
    change_point_analysis out;
    std::vector<double> values;
    std::vector<std::int64_t> runs;
    for (const series_point& p : ordered) {
        if (!std::isfinite(p.value)) {
            ++out.values_skipped;
            continue;
        }
        values.push_back(p.value);
        runs.push_back(p.run_index);
    }
    out.values_used = values.size();
    const std::vector<accepted> found = bisect(values, options);
    out.change_points = describe(values, runs, found);
    classify(values, found, options, out);
    return out;
}

} // namespace pitfall::history
