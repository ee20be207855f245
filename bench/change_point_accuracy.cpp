// How well the change-point detector (harness/lib/history/change_points.hpp) finds known steps
// in series as noisy as this project's own runs, and how long a long history takes.
//
// The noise is the run-to-run variation between processes that expected/host records: for each
// timed series blessed from several runs, `timings.<series>.normalised.samples` holds every run's
// samples one run after the other (as many per run as the series' raw `samples`), so each run's
// median can be recovered. Each run's median relative to the mean of its series' medians is one
// draw of "how far one process lands from the next" (scaled by sqrt(g / (g - 1)) for the g runs
// the mean was taken over); a synthetic run's value is level * (1 + a draw), drawn with
// replacement from all of them. A second table uses Gaussian noise of 3% (the unit tests').
//
// A change point found within +-2 runs of a true one is a hit (each true one matched once).
//
//   build/NAME/bench/pitfall_change_point_accuracy [--trials N] [--expected DIR] [--seed S]
#include "history/change_points.hpp"
#include "pitfall/detail/json_file.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {
using namespace pitfall::history;
using nlohmann::json;

struct noise_estimate {
    std::vector<double> deviations; // one per (series, run): median / mean of medians - 1
    std::vector<double> series_cv;  // per series: sd of its run medians / their mean
};

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The per-run medians of one timed series, where its normalised samples are whole runs.
std::vector<double> run_medians(const json& timing) {
    if (!timing.is_object() || !timing.contains("samples") || !timing.contains("normalised"))
        return {};
    const json& raw = timing["samples"];
    const json& normalised = timing["normalised"];
    if (!raw.is_array() || !normalised.is_object() || !normalised.contains("samples"))
        return {};
    const json& pooled = normalised["samples"];
    const std::size_t per_run = raw.size();
    if (!pooled.is_array() || per_run == 0 || pooled.size() % per_run != 0)
        return {};
    std::vector<double> medians;
    for (std::size_t start = 0; start < pooled.size(); start += per_run) {
        std::vector<double> run;
        for (std::size_t i = start; i < start + per_run; ++i)
            if (pooled[i].is_number() && std::isfinite(pooled[i].get<double>()))
                run.push_back(pooled[i].get<double>());
        if (run.size() != per_run)
            return {};
        medians.push_back(median_of(run));
    }
    return medians;
}

void add_series(const std::vector<double>& medians, noise_estimate& out) {
    const double g = static_cast<double>(medians.size());
    if (medians.size() < 2)
        return;
    const double mean = std::accumulate(medians.begin(), medians.end(), 0.0) / g;
    if (!(mean > 0))
        return;
    double ss = 0;
    for (double m : medians) {
        out.deviations.push_back((m / mean - 1) * std::sqrt(g / (g - 1)));
        ss += (m - mean) * (m - mean);
    }
    out.series_cv.push_back(std::sqrt(ss / (g - 1)) / mean);
}

// Every baseline (schema pitfall.expected/1) in `dir`: cases.<case>.timings.<series>. A
// baseline without cases is an error naming it (the table would be built on less than it says).
pitfall::status_or<noise_estimate> estimate_noise(const std::string& dir) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
        if (entry.path().extension() == ".json")
            files.push_back(entry.path().string());
    if (ec)
        return pitfall::status::error(pitfall::pitfall_error::bad_usage,
                                      "--expected " + dir + ": " + ec.message(),
                                      pitfall::stage::none);
    std::sort(files.begin(), files.end());
    noise_estimate out;
    for (const std::string& file : files) {
        PITFALL_ASSIGN_OR_RETURN(const json doc, pitfall::detail::read_json_file(file));
        // profile.json and the like sit beside the baselines: only baselines hold timings.
        if (!doc.is_object() || doc.value("schema", json()) != json("pitfall.expected/1"))
            continue;
        if (!doc.contains("cases") || !doc["cases"].is_object())
            return pitfall::status::error(pitfall::pitfall_error::bad_input,
                                          file + ": no \"cases\" object", pitfall::stage::none);
        for (const auto& [name, entry] : doc["cases"].items())
            if (entry.is_object() && entry.contains("timings") && entry["timings"].is_object())
                for (const auto& [series, timing] : entry["timings"].items())
                    add_series(run_medians(timing), out);
    }
    if (out.deviations.empty())
        return pitfall::status::error(pitfall::pitfall_error::bad_input,
                                      dir + ": no timed series blessed from several runs",
                                      pitfall::stage::none);
    return out;
}

// One scenario: the level of run i of n, and the true change points' positions.
struct scenario {
    std::string name;
    std::function<double(std::size_t, std::size_t)> level; // (run, true change position)
    bool has_step;
    bool two_steps;
    series_shape expected_shape;
};

struct tally {
    std::size_t trials = 0, truths = 0, found = 0, hits = 0, any = 0, shape_ok = 0;
};

using noise_draw = std::function<double(std::mt19937_64&)>;

double uniform01(std::mt19937_64& gen) {
    return static_cast<double>(gen() >> 11) * 0x1.0p-53;
}

double gaussian(std::mt19937_64& gen) {
    const double u1 = uniform01(gen) + 0x1.0p-54;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * uniform01(gen));
}

// Matches each found change point to the nearest unmatched true one within +-2 runs.
std::size_t count_hits(const std::vector<std::size_t>& truth, const change_point_analysis& a) {
    std::vector<bool> used(truth.size(), false);
    std::size_t hits = 0;
    for (const change_point& cp : a.change_points)
        for (std::size_t t = 0; t < truth.size(); ++t)
            if (!used[t] && std::llabs(static_cast<long long>(cp.run_index) -
                                       static_cast<long long>(truth[t])) <= 2) {
                used[t] = true;
                ++hits;
                break;
            }
    return hits;
}

tally run_scenario(const scenario& sc, std::size_t runs, std::size_t trials, const noise_draw& draw,
                   const change_point_options& options, std::mt19937_64& gen) {
    tally t;
    for (std::size_t trial = 0; trial < trials; ++trial) {
        // The true change anywhere from run 20 to run runs - 20 (the second one 30 runs on).
        const std::size_t span = runs - 40 - (sc.two_steps ? 30 : 0);
        const std::size_t at = 20 + static_cast<std::size_t>(gen() % span);
        std::vector<series_point> s;
        for (std::size_t i = 0; i < runs; ++i)
            s.push_back({static_cast<std::int64_t>(i), sc.level(i, at) * (1 + draw(gen))});
        const auto found = find_change_points(s, options);
        if (!found.is_ok())
            continue;
        std::vector<std::size_t> truth;
        if (sc.has_step)
            truth.push_back(at);
        if (sc.two_steps)
            truth.push_back(at + 30);
        ++t.trials;
        t.truths += truth.size();
        t.found += found.value().change_points.size();
        t.hits += count_hits(truth, found.value());
        t.any += found.value().change_points.empty() ? 0 : 1;
        t.shape_ok += found.value().shape == sc.expected_shape ? 1 : 0;
    }
    return t;
}

std::vector<scenario> scenarios(std::size_t runs) {
    const auto step = [](double size) {
        return [size](std::size_t i, std::size_t at) { return i < at ? 1.0 : 1.0 + size; };
    };
    const auto drift = [runs](double total) {
        return [runs, total](std::size_t i, std::size_t) {
            return 1.0 + total * static_cast<double>(i) / static_cast<double>(runs - 1);
        };
    };
    return {
        {"no change", [](std::size_t, std::size_t) { return 1.0; }, false, false,
         series_shape::stable},
        {"step +5%", step(0.05), true, false, series_shape::step},
        {"step -5%", step(-0.05), true, false, series_shape::step},
        {"step +10%", step(0.10), true, false, series_shape::step},
        {"step +20%", step(0.20), true, false, series_shape::step},
        {"steps +10% then -10%",
         [](std::size_t i, std::size_t at) { return i < at        ? 1.0
                                                    : i < at + 30 ? 1.1
                                                                  : 1.0; }, true,
         true, series_shape::step},
        {"drift +10% over the series", drift(0.10), false, false, series_shape::drift},
        {"drift +20% over the series", drift(0.20), false, false, series_shape::drift},
    };
}

std::string ratio(std::size_t num, std::size_t den) {
    if (den == 0)
        return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(num) / static_cast<double>(den));
    return buf;
}

struct arguments {
    std::size_t trials = 200;
    std::string expected = PITFALL_BENCH_EXPECTED_DIR;
    std::uint64_t seed = 2014;
    change_point_options options;
};

void print_table(const std::string& title, std::size_t runs, const noise_draw& draw,
                 const arguments& args, std::uint64_t seed) {
    std::printf("\n%s: %zu runs a series, %zu trials a scenario\n\n", title.c_str(), runs,
                args.trials);
    std::printf("| scenario | trials | true | found | hits | precision | recall | series with "
                "any change point | shape as expected |\n|---|---|---|---|---|---|---|---|---|\n");
    std::mt19937_64 gen(seed);
    for (const scenario& sc : scenarios(runs)) {
        const tally t = run_scenario(sc, runs, args.trials, draw, args.options, gen);
        // Precision and recall only where there is something true to find.
        const bool any_truth = t.truths > 0;
        std::printf(
            "| %s | %zu | %zu | %zu | %zu | %s | %s | %s | %s (%s) |\n", sc.name.c_str(), t.trials,
            t.truths, t.found, t.hits, any_truth ? ratio(t.hits, t.found).c_str() : "-",
            ratio(t.hits, t.truths).c_str(), ratio(t.any, t.trials).c_str(),
            ratio(t.shape_ok, t.trials).c_str(), std::string(to_string(sc.expected_shape)).c_str());
    }
}

// The time to analyse one long history: steps of +10%, -5% and +20% at a quarter, half and
// three quarters, in the empirical noise. The fastest of three.
void time_long_series(std::size_t runs, const noise_draw& draw, const arguments& args) {
    std::mt19937_64 gen(args.seed + 2);
    std::vector<series_point> s;
    for (std::size_t i = 0; i < runs; ++i) {
        const double level = i < runs / 4       ? 1.0
                             : i < runs / 2     ? 1.10
                             : i < 3 * runs / 4 ? 1.045
                                                : 1.254;
        s.push_back({static_cast<std::int64_t>(i), level * (1 + draw(gen))});
    }
    double best = HUGE_VAL;
    std::size_t found = 0;
    for (int rep = 0; rep < 3; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        const auto r = find_change_points(s, args.options);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        best = std::min(best, took.count());
        found = r.is_ok() ? r.value().change_points.size() : 0;
    }
    std::printf("\n%zu runs, 3 true steps: %zu change points found in %.3f s (fastest of 3)\n",
                runs, found, best);
}

bool parse_count(const char* text, std::uint64_t max, std::uint64_t& out) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v > max)
        return false;
    out = v;
    return true;
}

bool parse_fraction(const char* text, double& out) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v > 0 && v < 1))
        return false;
    out = v;
    return true;
}

constexpr const char* usage = "--trials N, --expected DIR, --seed S, --significance P (0 < P < 1), "
                              "--permutations N";

// Unknown flags and bad numbers: a message naming the flag, and exit 2.
bool parse_arguments(int argc, char** argv, arguments& args) {
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
        ++i;
        std::uint64_t n = 0;
        bool ok = value != nullptr;
        if (!ok) {
        } else if (flag == "--expected") {
            args.expected = value;
        } else if (flag == "--trials") {
            ok = parse_count(value, 1'000'000, n) && n > 0;
            args.trials = static_cast<std::size_t>(n);
        } else if (flag == "--seed") {
            ok = parse_count(value, UINT64_MAX, n);
            args.seed = n;
        } else if (flag == "--permutations") {
            ok = parse_count(value, 1'000'000, n) && n > 0;
            args.options.permutations = static_cast<std::size_t>(n);
        } else if (flag == "--significance") {
            ok = parse_fraction(value, args.options.significance);
        } else {
            std::fprintf(stderr, "%s: unknown flag (%s)\n", flag.c_str(), usage);
            return false;
        }
        if (!ok) {
            std::fprintf(stderr, "%s: missing or out-of-range value%s%s (%s)\n", flag.c_str(),
                         value ? ": " : "", value ? value : "", usage);
            return false;
        }
    }
    return true;
}

double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

void print_noise(const std::string& dir, const noise_estimate& noise) {
    double ss = 0;
    for (double d : noise.deviations)
        ss += d * d;
    std::printf("run-to-run noise from %s: %zu series blessed from several runs, %zu run "
                "medians; coefficient of variation between runs: median %.2f%%, 75th percentile "
                "%.2f%%, 90th %.2f%%, largest %.2f%%; pooled deviation %.2f%%\n",
                dir.c_str(), noise.series_cv.size(), noise.deviations.size(),
                100 * median_of(noise.series_cv), 100 * quantile(noise.series_cv, 0.75),
                100 * quantile(noise.series_cv, 0.90),
                100 * *std::max_element(noise.series_cv.begin(), noise.series_cv.end()),
                100 * std::sqrt(ss / static_cast<double>(noise.deviations.size())));
}

} // namespace

int measure(int argc, char** argv) {
    arguments args;
    if (!parse_arguments(argc, argv, args))
        return 2;
    const auto estimate = estimate_noise(args.expected);
    if (!estimate.is_ok()) {
        std::fprintf(stderr, "%s\n", estimate.error().message().c_str());
        return 2;
    }
    const noise_estimate& noise = estimate.value();
    print_noise(args.expected, noise);
    std::printf("detector: E-divisive means, min segment %zu, significance %.3f, %zu "
                "permutations, seed %llu\n",
                args.options.min_segment, args.options.significance, args.options.permutations,
                static_cast<unsigned long long>(args.options.seed));
    const noise_draw empirical = [&](std::mt19937_64& gen) {
        return noise.deviations[gen() % noise.deviations.size()];
    };
    const noise_draw gaussian3 = [](std::mt19937_64& gen) { return 0.03 * gaussian(gen); };
    print_table("Noise drawn from expected/host's run medians", 100, empirical, args, args.seed);
    print_table("Gaussian noise, 3%", 100, gaussian3, args, args.seed + 1);
    time_long_series(10'000, empirical, args);
    return 0;
}

int main(int argc, char** argv) try {
    return measure(argc, argv);
} catch (const std::exception& e) { // memory, or a bug: said, never an abort
    std::fprintf(stderr, "change_point_accuracy: error: %s\n", e.what());
    return 2;
}
