// `pitfall list` and `pitfall run`: a run is planned (the cases, the run folder, the profile),
// executed case by case (each re-measured while its timing is uncertain), then summarised
// (summary.json, the end of the terminal output, the reports).
#include "run/runner.hpp"
#include "run/run_plan.hpp"

#include "doctor/doctor.hpp"
#include "fingerprint/fingerprint.hpp"
#include "fingerprint/host_identity.hpp"
#include "history/ingest.hpp"
#include "history/run_flaky.hpp"
#include "judge/baseline.hpp"
#include "judge/stats.hpp"
#include "model/model.hpp"
#include "pitfall/detail/inject.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/mutate.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"
#include "pitfall/memory.hpp"
#include "report/formats.hpp"
#include "run/run_folder.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace pitfall::runner {
using nlohmann::json;

std::string counts_line(const std::map<std::string, int>& counts) {
    // Verdicts in the table's order (PASS, failures, warnings, skips), anything else after.
    std::vector<std::string> names;
    for (const auto& v : verdict_table())
        if (counts.count(v.name) != 0)
            names.push_back(v.name);
    for (const auto& [name, n] : counts)
        if (!verdict_named(name))
            names.push_back(name);
    std::string line;
    for (const auto& name : names)
        line += (line.empty() ? "" : ", ") + std::to_string(counts.at(name)) + ' ' + name;
    return line;
}

std::string utc_now(const char* format) {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::ostringstream out;
    out << std::put_time(&tm, format);
    return out.str();
}

double first_time_median(const json& result) {
    if (!result.is_object())
        return std::nan("");
    const json samples = result.value("samples", json::object());
    for (const auto& [name, series] : samples.items())
        if (series.value("unit", "s") == "s" && series.contains("values") &&
            series["values"].is_array() && !series["values"].empty())
            return stats::median_or_nan(series["values"].get<std::vector<double>>());
    return std::nan("");
}

namespace run_parts {
double time_median(const json& result, const std::string& name) {
    if (!result.is_object() || !result.contains("samples") || !result["samples"].is_object() ||
        !result["samples"].contains(name))
        return std::nan("");
    const json& series = result["samples"][name];
    if (!series.is_object() || series.value("unit", "s") != "s" || !series.contains("values") ||
        !series["values"].is_array() || series["values"].empty())
        return std::nan("");
    return stats::median_or_nan(series["values"].get<std::vector<double>>());
}
} // namespace run_parts

std::vector<double> relative_slowness(const std::vector<const json*>& results,
                                      std::vector<std::string> series) {
    const double none = std::numeric_limits<double>::infinity();
    if (series.empty() && !results.empty() && results.front()->is_object()) {
        // Every series in seconds the first result timed; one another result lacks is dropped.
        const json& first = *results.front();
        const json samples =
            first.contains("samples") && first["samples"].is_object() ? first["samples"] : json();
        for (const auto& item : samples.items()) {
            const std::string& name = item.key(); // a lambda may not capture a structured binding
            const bool everywhere = std::all_of(results.begin(), results.end(), [&](const json* r) {
                return std::isfinite(run_parts::time_median(*r, name));
            });
            if (everywhere)
                series.push_back(name);
        }
    }
    std::vector<double> slowness(results.size(), series.empty() ? none : 0.0);
    for (const auto& name : series) {
        double fastest = none;
        for (const json* r : results)
            if (const double m = run_parts::time_median(*r, name); std::isfinite(m))
                fastest = std::min(fastest, m);
        for (std::size_t i = 0; i < results.size(); ++i) {
            const double m = run_parts::time_median(*results[i], name);
            slowness[i] += std::isfinite(m) && fastest > 0 ? m / fastest
                           : std::isfinite(m)              ? 1.0
                                                           : none;
        }
    }
    return slowness;
}

namespace run_parts {

int report_error(const status& s) {
    std::cerr << "pitfall: error: " << s.message() << '\n';
    return exit_bad_input;
}

void warn(const status& s) {
    if (!s.is_ok())
        std::cerr << "pitfall: warning: " << s.message() << '\n';
}

std::string now_iso8601() {
    return utc_now("%Y-%m-%dT%H:%M:%SZ");
}

case_key key_of(const case_ref& c) {
    return {c.backend, c.scenario->description.name, c.variant->name};
}

/// The most samples any timed series (unit "s") of a result holds; 0 when none.
std::size_t samples_taken(const json& result) {
    std::size_t taken = 0;
    const json series_by_name =
        result.is_object() ? result.value("samples", json::object()) : json::object();
    for (const auto& [name, series] : series_by_name.items())
        if (series.value("unit", "s") == "s" && series.contains("values") &&
            series["values"].is_array())
            taken = std::max(taken, series["values"].size());
    return taken;
}

/// The request for measuring a case again after an AMBIGUOUS or PERF_REGRESSION timing: three
/// times the samples of the first attempt (odd), so that an episode of interference a few
/// samples long moves the median less and the interval narrows, and twice the time allowed.
process_request remeasure_request(process_request req, const json& first_result) {
    const std::size_t taken = samples_taken(first_result);
    if (taken == 0)
        return req;
    // Within the bound every scenario's built-in `samples` has (odd, at most 100001).
    const std::size_t more = std::min<std::size_t>(3 * taken + (taken % 2 == 0 ? 1 : 0), 100001);
    const std::string samples = "samples=" + std::to_string(more);
    bool replaced = false;
    for (std::size_t i = 0; i + 1 < req.argv.size(); ++i)
        if (req.argv[i] == "--param" && req.argv[i + 1].rfind("samples=", 0) == 0) {
            req.argv[i + 1] = samples;
            replaced = true;
        }
    if (!replaced)
        req.argv.insert(req.argv.end(), {"--param", samples});
    req.timeout_seconds *= 2;
    return req;
}

/// Waits `seconds` in short steps; false when Ctrl-C (or TERM) came meanwhile.
bool pause_unless_interrupted(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (interrupt_requested == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return interrupt_requested == 0;
}

double seconds_left(const run_options& options, double limit) {
    if (!options.deadline)
        return limit;
    const double left =
        std::chrono::duration<double>(*options.deadline - std::chrono::steady_clock::now()).count();
    return std::max(0.5, std::min(limit, left));
}

bool past_deadline(const run_options& options) {
    return options.deadline && std::chrono::steady_clock::now() >= *options.deadline;
}

std::string format_duration(double seconds) {
    const long s = std::lround(seconds);
    std::ostringstream out;
    out << s / 60 << ':' << std::setw(2) << std::setfill('0') << s % 60;
    return out.str();
}

// The dynamic loader's own words for a library it could not find, before main ran.
std::optional<std::string> missing_library(const std::string& log) {
    // "<program>: error while loading shared libraries: libcudnn.so.9: cannot open shared object
    // file"
    static const std::string marker = "error while loading shared libraries: ";
    const auto at = log.find(marker);
    if (at == std::string::npos)
        return std::nullopt;
    const auto start = at + marker.size();
    const auto colon = log.find(": cannot open shared object file", start);
    if (colon == std::string::npos)
        return std::nullopt;
    return log.substr(start, colon - start);
}

std::string last_line(const std::string& text) {
    std::string trimmed = text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r'))
        trimmed.pop_back();
    const auto nl = trimmed.rfind('\n');
    return nl == std::string::npos ? trimmed : trimmed.substr(nl + 1);
}

observation observe(const case_ref& c, const process_outcome& p, const std::string& result_path,
                    const std::string& log_text, double timeout) {
    observation o;
    o.result = json();
    if (!p.started) {
        o.outcome = {{"status", "not_started"}, {"detail", p.start_error}};
        return o;
    }
    if (p.timed_out) {
        std::ostringstream detail;
        if (p.stopped.find("ptrace") != std::string::npos)
            detail << p.stopped << "; process group ended (KILL)";
        else
            detail << "no exit within " << timeout << " s"
                   << (p.stopped.empty() ? "" : " (" + p.stopped + ")")
                   << "; process group ended (TERM, then KILL)";
        o.outcome = {{"status", "timeout"}, {"detail", detail.str()}};
        return o;
    }
    if (p.signal) {
        o.outcome = {{"status", "signal"}, {"signal", signal_name(*p.signal)}};
        return o;
    }
    const int code = p.exit_code.value_or(-1);
    if (code == 127) {
        if (const auto lib = missing_library(log_text)) {
            o.outcome = {{"status", "load_error"},
                         {"error", "missing library " + *lib},
                         {"detail", last_line(log_text)}};
            return o;
        }
    }
    if (code != 0 && code != 77) {
        o.outcome = {{"status", "exit"}, {"exit_code", code}, {"detail", last_line(log_text)}};
        return o;
    }
    std::error_code missing;
    if (!std::filesystem::exists(std::filesystem::symlink_status(result_path, missing))) {
        o.outcome = {{"status", "bad_result"},
                     {"detail", "exit " + std::to_string(code) + " but no result file"}};
        return o;
    }
    // The case's own bytes: anything wrong with them (not a file, not JSON, not a result
    // document by reports/schema/result.schema.json, not this case's) is its CRASH, and the
    // run goes on. Nothing of an unchecked result is kept.
    auto parsed = read_result_file(result_path);
    if (!parsed.is_ok()) {
        o.outcome = {{"status", "bad_result"},
                     {"detail", "result is not a " + std::string(result_schema) +
                                    " document: " + parsed.error().message()}};
        return o;
    }
    o.result = std::move(parsed).value();
    if (o.result["scenario"] != c.scenario->description.name ||
        o.result["variant"] != c.variant->name || o.result["backend"] != c.backend) {
        o.outcome = {
            {"status", "bad_result"},
            {"detail", "result is for another case: " + detail::dump_safe(o.result["backend"]) +
                           "." + detail::dump_safe(o.result["scenario"]) + "." +
                           detail::dump_safe(o.result["variant"])}};
        o.result = json();
        return o;
    }
    o.outcome = o.result["outcome"];
    const bool says_unsupported = o.outcome.value("status", "") == "unsupported";
    if ((code == 77) != says_unsupported)
        o.outcome = {{"status", "bad_result"},
                     {"detail", "exit " + std::to_string(code) + " disagrees with outcome " +
                                    detail::dump_safe(o.outcome)}};
    return o;
}

/// The median of a finished case's series `name`; NaN when it has none.
double series_median(const case_record& record, const std::string& name) {
    const json& res = record.result;
    if (!res.is_object() || !res.contains("samples") || !res["samples"].contains(name) ||
        !res["samples"][name].contains("values"))
        return std::nan("");
    return stats::median_or_nan(res["samples"][name]["values"].get<std::vector<double>>());
}

// Ratios between variants declared in scenario.json, from the medians measured in this run.
// A ratio the chosen profiles bound ("ratios" in expected/<profile>/<scenario>.json) is judged
// (judge_ratio): PASS inside the bounds, PERF_REGRESSION outside (it fails the run), and an
// observed bound of another machine NOT_COMPARED; unbounded ones are reported only.
json compute_ratios(const scenario_index& index, const std::map<std::string, case_record>& finished,
                    const profile_choice& choice, const judge_context& judging) {
    const std::string& fingerprint_id = judging.fingerprint_id;
    json out = json::array();
    for (const auto& s : index.scenarios) {
        const std::string& scenario = s.description.name;
        for (const auto& r : s.description.ratios) {
            for (const std::string backend : {"cpu", "cuda"}) {
                std::string prefix = backend;
                prefix += '.';
                prefix += scenario;
                prefix += '.';
                const auto num = finished.find(prefix + r.numerator);
                const auto den = finished.find(prefix + r.denominator);
                if (num == finished.end() || den == finished.end())
                    continue;
                const double a = series_median(num->second, r.samples);
                const double b = series_median(den->second, r.samples);
                if (!std::isfinite(a) || !std::isfinite(b) || b <= 0)
                    continue;
                json ratio = {{"scenario", scenario},
                              {"backend", backend},
                              {"name", r.name},
                              {"numerator", r.numerator},
                              {"denominator", r.denominator},
                              {"samples", r.samples},
                              {"median_numerator", a},
                              {"median_denominator", b},
                              {"ratio", a / b}};
                const auto [bound, from] =
                    choice.ratio_bounds_for(scenario, backend + "." + r.name);
                if (bound != nullptr && judging.full_sizes) {
                    ratio["verdict"] = "NOT_COMPARED";
                    ratio["reason"] = full_sizes_reason;
                    ratio["profile"] = from->name;
                } else if (bound != nullptr) {
                    ratio.update(
                        judge_ratio(r.name, a / b, *bound, fingerprint_id, judging.host_id));
                    ratio["profile"] = from->name;
                }
                out.push_back(std::move(ratio));
            }
        }
    }
    return out;
}

std::string child_cuda_visible_devices() {
    // Under `ctest --resource-spec-file`, the GPU a test was given: pin the case to it.
    const char* gpus = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
    if (gpus == nullptr)
        return {};
    const std::string spec = gpus; // "id:0,slots:1"
    const auto id = spec.find("id:");
    if (id == std::string::npos)
        return {};
    const std::string value = spec.substr(id + 3, spec.find(',', id) - id - 3);
    return !value.empty() && std::all_of(value.begin(), value.end(), ::isdigit) ? value
                                                                                : std::string{};
}
} // namespace run_parts

using namespace run_parts;

int list_cases(const common_options& options, bool as_json) {
    auto index = load_index(options.index_path);
    if (!index.is_ok())
        return report_error(index.error());
    auto cases = select_cases(index.value(), options.filter);
    if (!cases.is_ok())
        return report_error(cases.error());
    if (as_json) {
        json out = json::array();
        for (const auto& c : cases.value()) {
            json row = {{"test", c.test_name()},
                        {"scenario", c.scenario->description.name},
                        {"backend", c.backend},
                        {"variant", c.variant->name},
                        {"kind", c.variant->kind},
                        {"labels", c.labels()},
                        {"timeout_seconds", c.scenario->description.timeout_seconds},
                        {"doc", c.variant->doc}};
            if (!c.variant->params.empty()) // a named parameter set: what it runs with
                row["params"] = c.variant->params;
            if (!c.variant->param_set.empty())
                row["param_set"] = c.variant->param_set;
            row["threads"] = c.variant->threads;
            if (!c.variant->threads_why.empty())
                row["threads_why"] = c.variant->threads_why;
            if (!c.variant->memory_per.empty()) // its tracked bytes are blessed per this
                row["memory_per"] = c.variant->memory_per;
            out.push_back(std::move(row));
        }
        std::cout << out.dump(2) << '\n';
        return exit_ok;
    }
    std::size_t width = 4;
    for (const auto& c : cases.value())
        width = std::max(width, c.test_name().size());
    std::cout << std::left << std::setw(static_cast<int>(width) + 2) << "CASE"
              << "LABELS\n";
    for (const auto& c : cases.value()) {
        std::string labels;
        for (const auto& l : c.labels())
            labels += (labels.empty() ? "" : ",") + l;
        std::cout << std::left << std::setw(static_cast<int>(width) + 2) << c.test_name() << labels
                  << '\n';
    }
    std::cout << cases.value().size() << " cases in " << index.value().scenarios.size()
              << " scenarios\n";
    return exit_ok;
}

int run_cases(const run_options& requested) {
    run_plan plan;
    if (auto planned = plan_run(requested, plan); !planned.is_ok())
        return report_error(planned);
    if (auto started = start_session(plan); !started.is_ok())
        return report_error(started);
    auto interrupted = execute(plan);
    end_containment();
    if (!interrupted.is_ok())
        return report_error(interrupted.error());
    if (!interrupted.value())
        if (auto corrected = correct_timings(plan); !corrected.is_ok())
            return report_error(corrected);
    // The cases are gone: results.jsonl checked against what pitfall wrote (and written again
    // from it where a case changed it), sealed into summary.json for every reader.
    auto sealed = plan.folder->seal();
    if (!sealed.is_ok())
        return report_error(sealed.error());
    plan.records_seal = std::move(sealed).value();
    // Before the reports: they say which cases the database calls flaky (flaky.json).
    if (!plan.options.history_db.empty() && plan.folder)
        history::write_run_flaky(plan.options.history_db, plan.folder->dir(),
                                 plan.options.flaky_release_after);
    const int code = summarise(plan, interrupted.value());
    // After summary.json: the database holds what the folder says, and never changes the code.
    if (!plan.options.history_db.empty() && plan.folder)
        history::record_finished_run(plan.options.history_db, plan.folder->dir());
    return code;
}

} // namespace pitfall::runner
