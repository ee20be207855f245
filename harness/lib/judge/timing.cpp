// Timing verdicts (timing.hpp).
#include "judge/timing.hpp"

#include "judge/stats.hpp"
#include "pitfall/controls.hpp"
#include "pitfall/detail/json_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace pitfall::runner {
using nlohmann::json;
using nlohmann::ordered_json;

std::string thread_mismatch(const json& prov, std::optional<int> threads) {
    const json& blessed = prov.contains("threads") ? prov["threads"] : json();
    if (!threads)
        return "";
    if (!blessed.is_number_integer())
        return "the baseline does not record the BLAS/OpenMP threads it ran with (this case "
               "ran with " +
               std::to_string(*threads) + "): bless it again";
    if (blessed.get<double>() != *threads)
        return "blessed with " + detail::dump_safe(blessed) +
               " BLAS/OpenMP threads, this case ran with " + std::to_string(*threads);
    return "";
}

namespace {
std::optional<std::vector<double>> numbers(const json& array) {
    if (!array.is_array() || array.empty())
        return std::nullopt;
    std::vector<double> out;
    out.reserve(array.size());
    for (const auto& x : array) {
        if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0)
            return std::nullopt;
        out.push_back(x.get<double>());
    }
    return out;
}

/// A series' per-sample CPU wait shares, when there is one in [0, 1] for each of `count`
/// samples; anything else is no correction.
std::optional<std::vector<double>> wait_shares(const json& array, std::size_t count) {
    auto shares = numbers(array);
    if (!shares || shares->size() != count ||
        std::any_of(shares->begin(), shares->end(), [](double x) { return x > 1; }))
        return std::nullopt;
    return shares;
}

double significant(double x, int digits) {
    char out[64];
    std::snprintf(out, sizeof out, "%.*g", digits, x);
    return std::strtod(out, nullptr);
}

std::string text(const char* format, double x) {
    char out[64];
    std::snprintf(out, sizeof out, format, x);
    return out;
}
} // namespace

std::optional<normalised_series> normalise(const json& series, const std::string& control,
                                           std::string& why) {
    const auto values = series.is_object() ? numbers(series.value("values", json())) : std::nullopt;
    if (!values) {
        why = "the series has no samples";
        return std::nullopt;
    }
    const json controls = series.value("controls", json::object());
    const auto runs = controls.is_object() && controls.contains(control)
                          ? numbers(controls[control])
                          : std::nullopt;
    if (!runs) {
        why = "the case measured no " + control + " control beside it";
        const json errors = series.value("control_errors", json::object());
        if (errors.is_object() && errors.contains(control) && errors[control].is_string())
            why += " (" + errors[control].get<std::string>() + ")";
        return std::nullopt;
    }
    normalised_series n;
    n.samples = *values;
    std::vector<double> control_runs = *runs;
    const auto shares = wait_shares(series.value("cpu_wait_share", json()), n.samples.size());
    const json control_waits = series.value("control_cpu_wait_share", json::object());
    const auto control_shares = control_waits.is_object() && control_waits.contains(control)
                                    ? wait_shares(control_waits[control], control_runs.size())
                                    : std::nullopt;
    if (shares && control_shares) {
        for (std::size_t i = 0; i < n.samples.size(); ++i)
            n.samples[i] *= 1 - (*shares)[i];
        for (std::size_t i = 0; i < control_runs.size(); ++i)
            control_runs[i] *= 1 - (*control_shares)[i];
        n.cpu_wait_share = stats::median(*shares);
    }
    n.control_median = stats::median(control_runs);
    if (!(n.control_median > 0)) {
        why = "the " + control + " control's median is 0";
        return std::nullopt;
    }
    for (double& x : n.samples)
        x /= n.control_median;
    return n;
}

std::string cpu_wait_disturbance(const json& series) {
    const json values = series.is_object() ? series.value("values", json()) : json();
    const auto shares =
        wait_shares(series.is_object() ? series.value("cpu_wait_share", json()) : json(),
                    values.is_array() ? values.size() : 0);
    if (!shares)
        return "";
    const double median = stats::median(*shares);
    if (!(median > 0.05))
        return "";
    return "its thread waited for a CPU " + text("%.0f", median * 100) +
           "% of a sample's time (a CPU quota, or other work on its core)";
}

namespace {
/// How far apart the medians of separate processes lay: largest / smallest - 1; nullopt from
/// fewer than two processes.
std::optional<double> spread_of(const std::vector<double>& medians) {
    if (medians.size() < 2)
        return std::nullopt;
    const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
    if (!(*lo > 0))
        return std::nullopt;
    return *hi / *lo - 1;
}

/// The context a series is judged in: the run's, with the floor raised to the spread its
/// blessed processes showed. A series whose processes of unchanged code lay 39% apart (a copy
/// that lands in one of two memory layouts per process) cannot tell a 20% slowdown from its own
/// spread, and must not call one.
judge_context with_process_spread(const judge_context& context, const json& blessed,
                                  std::string& note) {
    judge_context c = context;
    const json spread = blessed.is_object() ? blessed.value("process_spread", json()) : json();
    if (spread.is_number() && spread.get<double>() > c.timing.floor) {
        c.timing.floor = spread.get<double>();
        note = "; tolerance at least the " + text("%.3g", spread.get<double>() * 100) +
               "% its blessed processes lay apart";
    }
    return c;
}

json not_compared(const std::string& why) {
    return {{"verdict", "NOT_COMPARED"}, {"reason", why}};
}

/// One series against its baseline samples: the statistics of stats::judge_timing, then what a
/// disturbance recorded beside the candidate makes of them.
json compare_series(const std::vector<double>& baseline, const std::vector<double>& candidate,
                    const judge_context& context, const std::string& disturbed) {
    json out;
    try {
        const auto j = stats::judge_timing(baseline, candidate, context.timing);
        std::string tv = stats::to_string(j.verdict);
        std::string why = j.reason;
        // Straddling only the faster bound: no slowdown beyond tolerance is plausible, and
        // faster is never a failure, so there is nothing to measure again or warn about.
        if (j.verdict == stats::timing_verdict::ambiguous && j.ratio.high <= 1.0 + j.tolerance) {
            tv = "SAME";
            why.insert(0, "not slower (maybe faster): ");
        }
        out = {{"verdict", tv},
               {"reason", why},
               {"ratio", {{"point", j.ratio.point}, {"low", j.ratio.low}, {"high", j.ratio.high}}},
               {"tolerance", j.tolerance},
               {"noise", j.noise},
               {"p", j.test.p_two_sided},
               {"p_regression", j.p_regression}};
    } catch (const std::invalid_argument& e) {
        return not_compared(e.what());
    }
    if (!disturbed.empty()) {
        out["disturbed"] = disturbed;
        const std::string tv = out["verdict"].get<std::string>();
        if (tv == "PERF_REGRESSION" || tv == "AMBIGUOUS") {
            out["verdict"] = "AMBIGUOUS";
            out["reason"] = "measured while disturbed (" + disturbed +
                            "), so not judged slower: " + out["reason"].get<std::string>();
        }
    }
    return out;
}

/// A slower absolute series stands only where the control that bounds it did not slow down as
/// much: a whole host running slower is the host, not the code (the normalised twin decides).
void confirm_against_control(json& out, const json& baseline_series, const json& candidate) {
    if (out.value("verdict", "") != "PERF_REGRESSION" || !baseline_series.contains("normalised"))
        return;
    const json& n = baseline_series["normalised"];
    const std::string by = n.value("by", "");
    const double blessed = n.value("control_median", 0.0);
    std::string why;
    const auto seen = normalise(candidate, by, why);
    if (!seen || !(blessed > 0))
        return;
    const double control_ratio = seen->control_median / blessed;
    out["control_ratio"] = control_ratio;
    if (control_ratio > 1 + out.value("tolerance", 0.0)) {
        out["verdict"] = "AMBIGUOUS";
        out["reason"] = "the " + by + " control ran " + text("%.3fx", control_ratio) +
                        " as long as when blessed too, so the host, not the code, may be "
                        "slower (its normalised twin decides): " +
                        out["reason"].get<std::string>();
    }
}

/// The worst series decides the case: a regression fails, an ambiguous one warns.
void settle_case(verdict& v) {
    std::string worst_name;
    verdict_kind worst = verdict_kind::pass;
    for (const auto& [name, t] : v.timings.items()) {
        const std::string tv = t.value("verdict", "");
        if (tv == "PERF_REGRESSION" && worst != verdict_kind::perf_regression) {
            worst = verdict_kind::perf_regression;
            worst_name = name;
        } else if (tv == "AMBIGUOUS" && worst == verdict_kind::pass) {
            worst = verdict_kind::ambiguous;
            worst_name = name;
        }
    }
    if (worst != verdict_kind::pass) {
        v.kind = worst;
        v.reason = worst_name + ": " + v.timings[worst_name].value("reason", "");
    } else {
        for (const auto& [name, t] : v.timings.items())
            if (t.value("verdict", "") == "FASTER")
                v.reason += "; " + name + " faster: " + t.value("reason", "");
    }
}

std::string or_none(const std::string& s) {
    return s.empty() ? std::string("none recorded") : s;
}

/// Why none of a case's timed series is judged in this run ("" when they are).
std::string why_times_not_judged(const json& prov, std::optional<int> threads,
                                 const judge_context& context) {
    const std::string blessed_build = prov.value("build_type", "");
    if (!context.judge_times)
        return "timings are recorded, not judged, in this run (--timings record)";
    if (std::string t = thread_mismatch(prov, threads); !t.empty())
        return t;
    if (!blessed_build.empty() && !context.build_type.empty() &&
        blessed_build != context.build_type)
        return "blessed from a " + blessed_build + " build, this run's is " + context.build_type +
               ": its times say nothing of these";
    return "";
}

/// A series as this run timed it.
// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json field
struct timed_candidate {
    json series;                               ///< the result's samples.<name> (null: none)
    std::optional<std::vector<double>> values; ///< its samples, when they are valid
    std::string disturbed;                     ///< what disturbed it ("": nothing recorded)
};

timed_candidate candidate_of(const json& observed, const std::string& name) {
    timed_candidate c;
    c.series = observed.is_object() && observed.contains(name) ? observed[name] : json();
    c.values = c.series.is_object() ? numbers(c.series.value("values", json())) : std::nullopt;
    c.disturbed =
        c.series.is_object() ? controls::disturbed(c.series.value("disturbance", json())) : "";
    return c;
}

/// The verdict of a series' absolute times against its baseline entry `t` (`skip`: why none
/// is judged, "" when they are).
json judge_absolute(const std::string& name, const json& t, const timed_candidate& candidate,
                    const std::string& skip, const json& prov, const judge_context& context) {
    const std::string blessed_host = prov.value("host_id", "");
    const std::string blessed_id = prov.value("fingerprint_id", "");
    const bool same_host = !blessed_host.empty() && blessed_host == context.host_id &&
                           blessed_id == context.fingerprint_id;
    const bool twin = t.contains("normalised") && t["normalised"].is_object();
    if (!skip.empty())
        return not_compared(skip);
    if (!same_host)
        return not_compared(
            "absolute times are compared only on the host that blessed them (host " +
            or_none(blessed_host) + ", fingerprint " + or_none(blessed_id) +
            "; this run: " + or_none(context.host_id) + ", " + or_none(context.fingerprint_id) +
            ")" + (twin ? ": its normalised twin is judged" : ""));
    if (!candidate.values)
        return {{"verdict", "PERF_REGRESSION"}, {"reason", name + " was not timed"}};
    std::string note;
    // Wall time the thread spent waiting for a CPU is the host's doing: evidence against
    // calling the series slower (its normalised twin has the wait taken out).
    std::string disturbed = candidate.disturbed;
    if (const std::string waited = cpu_wait_disturbance(candidate.series); !waited.empty())
        disturbed += (disturbed.empty() ? "" : "; ") + waited;
    json absolute =
        compare_series(numbers(t.value("samples", json())).value_or(std::vector<double>{}),
                       *candidate.values, with_process_spread(context, t, note), disturbed);
    if (!note.empty() && absolute.contains("reason"))
        absolute["reason"] = absolute["reason"].get<std::string>() + note;
    confirm_against_control(absolute, t, candidate.series);
    return absolute;
}

/// The kernel type of blas_kernels()'s "<library> / <core>" ("Haswell"); "" where unknown.
std::string kernel_type_of(const std::string& kernels) {
    const auto slash = kernels.rfind(" / ");
    const std::string core = slash == std::string::npos ? "" : kernels.substr(slash + 3);
    return core == "?" ? "" : core;
}

/// The verdict of a series normalised by its control, against its baseline's twin `n`.
json judge_normalised(const std::string& name, const json& n, const timed_candidate& candidate,
                      const std::string& skip, const json& prov, const judge_context& context) {
    const std::string by = n.value("by", "");
    json judged;
    std::string why;
    const std::string blessed_blas = blas_kernels(prov.value("fingerprint", json::object()));
    if (!skip.empty()) {
        judged = not_compared(skip);
    } else if (by == "host_blas" && !blessed_blas.empty() && !context.blas.empty() &&
               blessed_blas != context.blas) {
        judged =
            not_compared("blessed with " + blessed_blas + ", this run's BLAS is " + context.blas +
                         ": another kernel type runs other code, not at another speed");
    } else if (const std::string blessed_cpu = kernel_type_of(blessed_blas),
               this_cpu = kernel_type_of(context.blas);
               by.rfind("host_", 0) == 0 && !blessed_cpu.empty() && !this_cpu.empty() &&
               blessed_cpu != this_cpu) {
        // The kernel type OpenBLAS picks names the CPU's generation, which the model string
        // does not ("AMD EPYC" for a Zen 2 and a Zen 4 alike); a host control does not carry a
        // series across generations: docs/timing.md has the measurement.
        judged = not_compared("blessed on a CPU OpenBLAS runs as " + blessed_cpu +
                              ", this one runs as " + this_cpu +
                              ": a host control does not carry a series across CPU generations");
    } else if (!candidate.values) {
        judged = {{"verdict", "PERF_REGRESSION"}, {"reason", name + " was not timed"}};
    } else if (const auto seen = normalise(candidate.series, by, why); !seen) {
        judged = {
            {"verdict", "PERF_REGRESSION"},
            {"reason", std::string(name).append(" cannot be judged normalised: ").append(why)}};
    } else {
        std::string note;
        judged = compare_series(numbers(n.value("samples", json())).value_or(std::vector<double>{}),
                                seen->samples, with_process_spread(context, n, note),
                                candidate.disturbed);
        if (!note.empty() && judged.contains("reason"))
            judged["reason"] = judged["reason"].get<std::string>() + note;
        if (seen->cpu_wait_share)
            judged["cpu_wait_taken_out"] = *seen->cpu_wait_share;
    }
    judged["normalised_by"] = by;
    return judged;
}

/// Why series `name`, `count` samples long, is not blessed ("" when it is).
std::string why_not_blessed(const std::string& name, std::size_t count,
                            const observation_origin& origin) {
    if (const auto no = origin.not_timed.find(name); no != origin.not_timed.end())
        return name + ": scenario.json names no control for it here (" + no->second + ")";
    if (count < origin.min_samples)
        return name + ": " + std::to_string(count) + " sample(s), the judge needs " +
               std::to_string(origin.min_samples);
    return "";
}

/// The samples of a result blessed together ({} when it has none).
json pooled_samples(const json* result) {
    return result != nullptr && result->is_object() ? result->value("samples", json::object())
                                                    : json::object();
}

/// The median of series `name` in each result blessed together that timed it.
std::vector<double> pooled_medians(const std::string& name, const observation_origin& origin) {
    std::vector<double> medians;
    for (const json* other : origin.pooled_results) {
        const json s = pooled_samples(other);
        if (!s.is_object() || !s.contains(name) || !s[name].is_object())
            continue;
        if (const auto v = numbers(s[name].value("values", json())); v && !v->empty())
            medians.push_back(stats::median(*v));
    }
    return medians;
}

/// A baseline's "normalised" twin of series `name`: the samples normalised by control `by`,
/// pooled over the results blessed together (`own`: the blessed record's, where none has them).
ordered_json normalised_entry(const std::string& name, const std::string& by,
                              const normalised_series& own, const observation_origin& origin) {
    std::vector<double> pooled, normalised_medians;
    for (const json* other : origin.pooled_results) {
        const json s = pooled_samples(other);
        std::string ignored;
        if (s.is_object() && s.contains(name))
            if (const auto n = normalise(s[name], by, ignored)) {
                pooled.insert(pooled.end(), n->samples.begin(), n->samples.end());
                normalised_medians.push_back(stats::median(n->samples));
            }
    }
    if (pooled.empty())
        pooled = own.samples;
    // Six significant digits: far below any tolerance, and a blessed file stays readable.
    for (double& x : pooled)
        x = significant(x, 6);
    ordered_json normalised = {
        {"by", by}, {"samples", pooled}, {"control_median", significant(own.control_median, 6)}};
    if (const auto spread = spread_of(normalised_medians))
        normalised["process_spread"] = significant(*spread, 3);
    return normalised;
}
} // namespace

void judge_timings(const json& expected, const json& result, std::optional<int> threads,
                   const judge_context& context, verdict& v) {
    if (!expected.contains("timings") || !expected["timings"].is_object() || !result.is_object())
        return;
    const json prov = expected.value("provenance", json::object());
    const std::string skip = why_times_not_judged(prov, threads, context);
    const json observed = result.value("samples", json::object());
    for (const auto& [name, t] : expected["timings"].items()) {
        const timed_candidate candidate = candidate_of(observed, name);
        v.timings[name] = judge_absolute(name, t, candidate, skip, prov, context);
        if (!t.contains("normalised") || !t["normalised"].is_object())
            continue;
        const json& n = t["normalised"];
        v.timings[std::string(name).append("/").append(n.value("by", ""))] =
            judge_normalised(name, n, candidate, skip, prov, context);
    }
    settle_case(v);
}

ordered_json expected_timings(const json& result, const observation_origin& origin,
                              std::vector<std::string>* refused) {
    ordered_json timings = ordered_json::object();
    const json samples = result.value("samples", json::object());
    if (!samples.is_object())
        return timings;
    for (const auto& [name, series] : samples.items()) {
        // Times only: a series of fractions or counts (device_idle_fraction) is the scenario's
        // finding, judged by its own bounds, not a speed.
        if (!series.is_object() || series.value("unit", "s") != "s")
            continue;
        const auto values = numbers(series.value("values", json()));
        if (!values)
            continue;
        if (const std::string why_not = why_not_blessed(name, values->size(), origin);
            !why_not.empty()) {
            if (refused != nullptr)
                refused->push_back(why_not);
            continue;
        }
        ordered_json entry = {{"unit", "s"}, {"samples", series["values"]}};
        const auto bound = origin.bound_by.find(name);
        std::string why;
        const auto own =
            bound == origin.bound_by.end() ? std::nullopt : normalise(series, bound->second, why);
        // The medians of every process blessed, absolute and normalised: how far apart
        // processes of unchanged code lie is the least tolerance the series can be judged with.
        if (const auto spread = spread_of(pooled_medians(name, origin)))
            entry["process_spread"] = significant(*spread, 3);
        if (own) {
            entry["normalised"] = normalised_entry(name, bound->second, *own, origin);
        } else if (bound != origin.bound_by.end() && refused != nullptr) {
            refused->push_back(
                std::string(name).append(": not normalised (").append(why).append(")"));
        }
        timings[name] = entry;
    }
    return timings;
}

std::string blas_kernels(const json& summary) {
    if (!summary.is_object())
        return "";
    const json library = summary.value("blas_library", json());
    const json core = summary.value("blas_core", json());
    if (!library.is_string() && !core.is_string())
        return "";
    return (library.is_string() ? library.get<std::string>() : std::string("?")) + " / " +
           (core.is_string() ? core.get<std::string>() : std::string("?"));
}

const char* to_string(timing_correction c) {
    switch (c) {
    case timing_correction::holm: return "holm";
    case timing_correction::bh: return "bh";
    case timing_correction::none: return "none";
    }
    return "holm";
}

std::optional<timing_correction> timing_correction_from_string(const std::string& text) {
    for (const auto c : {timing_correction::holm, timing_correction::bh, timing_correction::none})
        if (text == to_string(c))
            return c;
    return std::nullopt;
}

json correct_run_timings(std::vector<case_record*>& records, timing_correction method, double level,
                         std::vector<case_record*>& changed) {
    struct tested {
        case_record* record;
        std::string series;
    };
    std::vector<tested> family;
    std::vector<double> p;
    for (case_record* r : records)
        for (const auto& [name, t] : r->timings.items())
            if (t.is_object() && t.contains("p_regression") && t["p_regression"].is_number()) {
                const double x = t["p_regression"].get<double>();
                family.push_back({r, name});
                p.push_back(std::isfinite(x) ? std::clamp(x, 0.0, 1.0) : 1.0);
            }
    const std::vector<double> adjusted = method == timing_correction::holm ? stats::holm_adjust(p)
                                         : method == timing_correction::bh ? stats::bh_adjust(p)
                                                                           : p;
    json demoted = json::array();
    for (std::size_t i = 0; i < family.size(); ++i) {
        json& t = family[i].record->timings[family[i].series];
        t["p_adjusted"] = adjusted[i];
        if (t.value("verdict", "") != "PERF_REGRESSION" || adjusted[i] < level)
            continue;
        t["verdict"] = "AMBIGUOUS";
        t["reason"] = "not significant among the run's " + std::to_string(family.size()) +
                      " timed series (" + to_string(method) +
                      "-adjusted p=" + text("%.3g", adjusted[i]) + ", level " + text("%g", level) +
                      "): " + t.value("reason", "");
        demoted.push_back({{"case", family[i].record->key.str()},
                           {"series", family[i].series},
                           {"p", p[i]},
                           {"p_adjusted", adjusted[i]}});
        if (std::find(changed.begin(), changed.end(), family[i].record) == changed.end())
            changed.push_back(family[i].record);
    }
    for (case_record* r : changed) {
        verdict v{verdict_kind::pass, r->reason};
        v.timings = r->timings;
        settle_case(v);
        if (r->verdict == verdict_kind::perf_regression &&
            v.kind != verdict_kind::perf_regression) {
            r->verdict = verdict_kind::ambiguous;
            r->reason = v.reason + " (a warning, not a failure)";
        }
    }
    return {{"method", to_string(method)},
            {"level", level},
            {"series", family.size()},
            {"demoted", demoted}};
}

} // namespace pitfall::runner
