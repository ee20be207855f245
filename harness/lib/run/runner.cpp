// `pitfall list` and `pitfall run`: a run is planned (the cases, the run folder, the profile),
// executed case by case (each re-measured while its timing is uncertain), then summarised
// (summary.json, the end of the terminal output, the reports).
#include "run/runner.hpp"

#include "doctor/doctor.hpp"
#include "fingerprint/fingerprint.hpp"
#include "fingerprint/host_identity.hpp"
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

namespace {
/// The median of `result`'s series `name` in seconds; NaN when it has none.
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
} // namespace

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
                return std::isfinite(time_median(*r, name));
            });
            if (everywhere)
                series.push_back(name);
        }
    }
    std::vector<double> slowness(results.size(), series.empty() ? none : 0.0);
    for (const auto& name : series) {
        double fastest = none;
        for (const json* r : results)
            if (const double m = time_median(*r, name); std::isfinite(m))
                fastest = std::min(fastest, m);
        for (std::size_t i = 0; i < results.size(); ++i) {
            const double m = time_median(*results[i], name);
            slowness[i] += std::isfinite(m) && fastest > 0 ? m / fastest
                           : std::isfinite(m)              ? 1.0
                                                           : none;
        }
    }
    return slowness;
}

namespace {

/// The variables through which BLAS and OpenMP libraries take their thread count.
constexpr const char* case_thread_variables[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                 "MKL_NUM_THREADS", "BLIS_NUM_THREADS"};

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
        detail << "no exit within " << timeout << " s; process group ended (TERM, then KILL)";
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

// ---- plan ----------------------------------------------------------------------------------

/// Everything a run needs, made before its first case: what to run, where, judged how. Built
/// in place and never moved: the cases point into the index, the choice into the profiles.
struct run_plan {
    run_options options; ///< with a resumed run's own samples and timeout scale
    scenario_index index;
    std::vector<profile> profiles;
    std::vector<case_ref> cases;
    std::optional<run_folder> folder;
    bool resuming = false;
    std::map<std::string, case_record> finished; ///< key -> record; resumed: the earlier ones
    profile_choice choice;
    run_header header;
    judge_context judging;
    diagnosis machine;           ///< `pitfall doctor`'s findings over this session's fingerprint
    std::string visible_devices; ///< CUDA_VISIBLE_DEVICES for the cases ("": leave it)
    std::string run_token;       ///< the first part of each case's PITFALL_CASE_TOKEN
    std::string case_lock;       ///< the machine-wide case lock's file ("": none to hold)
    /// The run's timed series judged together (correct_run_timings), for summary.json.
    json timing_family;
};

/// A resumed run completes the run as it was asked for: its selection, samples, timeout
/// scale and how it judges times (the floor, judge or record, the run's correction and level:
/// the correction at the end spans the earlier cases too) come from its own header, not from
/// this command line (the profiles are chosen again from this environment's fingerprint).
/// Returns its selection.
status_or<std::set<std::string>> plan_resume(run_plan& plan) {
    const auto& f = plan.options.common.filter;
    const run_options defaults;
    if (!f.scenarios.empty() || !f.backends.empty() || !f.variants.empty() || !f.labels.empty() ||
        plan.options.samples || plan.options.timeout_scale != defaults.timeout_scale ||
        plan.options.full || plan.options.timing_floor != defaults.timing_floor ||
        plan.options.judge_times != defaults.judge_times ||
        plan.options.correction != defaults.correction ||
        plan.options.timing_level != defaults.timing_level)
        return bad_run_input("--resume completes a run as it was started: drop --scenario, "
                             "--backend, --variant, --label, --samples, --timeout-scale, "
                             "--full, --timing-floor, --timings, --timing-correction and "
                             "--timing-level");
    auto folder = run_folder::resume(plan.options.resume_dir);
    if (!folder.is_ok())
        return bad_run_input("--resume " + folder.error().message());
    plan.folder.emplace(std::move(folder).value());
    PITFALL_ASSIGN_OR_RETURN(const run_log log, plan.folder->read());
    std::set<std::string> selection;
    for (const auto& key : log.header.selection)
        selection.insert(key.str());
    plan.options.samples = log.header.options.samples;
    plan.options.timeout_scale = log.header.options.timeout_scale;
    plan.options.full = log.header.options.full;
    plan.options.timing_floor = log.header.options.timing_floor;
    plan.options.judge_times = log.header.options.judge_times;
    plan.options.timing_level = log.header.options.timing_level;
    // The header's reader admits only the three names.
    plan.options.correction =
        timing_correction_from_string(log.header.options.correction).value_or(defaults.correction);
    for (const auto& c : log.cases)
        plan.finished.emplace(c.key.str(), c);
    plan.resuming = true;
    return selection;
}

/// The cases to run: the filter's, or a resumed run's own selection.
status plan_cases(run_plan& plan, const std::optional<std::set<std::string>>& resumed) {
    PITFALL_ASSIGN_OR_RETURN(std::vector<case_ref> cases,
                             select_cases(plan.index, plan.options.common.filter));
    if (resumed) {
        std::vector<case_ref> kept;
        std::copy_if(cases.begin(), cases.end(), std::back_inserter(kept),
                     [&](const case_ref& c) { return resumed->count(c.key()) != 0; });
        if (kept.size() != resumed->size())
            return bad_run_input("--resume " + plan.options.resume_dir +
                                 ": some of its cases are not in this build's index (" +
                                 plan.index.path + ")");
        cases = std::move(kept);
    }
    if (cases.empty())
        return bad_run_input("the filters select no case (see `pitfall list`)");
    plan.cases = std::move(cases);
    return status::ok();
}

/// Where a new run goes: --out, else <runs folder>/<UTC timestamp>.
std::string new_run_dir(const run_options& options) {
    if (!options.out_dir.empty())
        return options.out_dir;
    const std::string runs = options.runs_dir.empty() ? "reports/runs" : options.runs_dir;
    return runs + "/" + utc_now("%Y%m%d-%H%M%S");
}

/// Every case can start and its result and log can be made, before the first case runs: a
/// program not built, a file name past NAME_MAX, a path past PATH_MAX, or a cases/ or logs/
/// pitfall cannot create files in is the run's bad input (exit 2, naming the path), never a
/// case's CRASH with its output spilled.
status check_cases_can_start(const run_plan& plan) {
    const run_folder& folder = *plan.folder;
    for (const std::string& dir : {folder.dir() + "/cases", folder.logs_dir()}) {
        std::string probe = dir + "/.write-check.XXXXXX";
        const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
        if (fd < 0)
            return bad_run_input(dir + ": cannot create a file there (" + std::strerror(errno) +
                                 "): each case writes its result and its log there");
        ::close(fd);
        ::unlink(probe.c_str());
    }
    // Room for the ".tmp.XXXXXX" a result is first written as.
    constexpr std::size_t temporary_suffix = 16;
    for (const auto& c : plan.cases) {
        // A scenario the index names but the build has not made yet (a new folder, CMake run,
        // nothing built): one message that says so, not a CRASH "cannot execute" per case.
        if (::access(c.scenario->program.c_str(), X_OK) != 0)
            return bad_run_input(c.scenario->program + ": the program of scenario '" +
                                 c.scenario->description.name + "' is not built (" +
                                 std::strerror(errno) +
                                 "): build it first, `cmake --build --preset <preset>` for the "
                                 "build this index belongs to");
        const case_key key = key_of(c);
        for (const std::string& path : {folder.case_result_path(key), folder.case_log_path(key)}) {
            const std::size_t name = path.size() - path.rfind('/') - 1;
            if (name + temporary_suffix > NAME_MAX || path.size() + temporary_suffix >= PATH_MAX)
                return bad_run_input(
                    path + ": too long for a case's file (names up to " +
                    std::to_string(NAME_MAX - temporary_suffix) + " bytes, paths up to " +
                    std::to_string(PATH_MAX - temporary_suffix - 1) + "): choose a shorter --out");
            struct stat st {};
            if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
                return bad_run_input(path + ": there, and not a regular file: a case's result "
                                            "or log goes there (remove it)");
        }
    }
    return status::ok();
}

/// The PITFALL_* variables `pitfall run` passes on to every case, checked before the first
/// one starts: a bad value would otherwise fail every case alike, as CRASH, and the run.
status check_environment(const scenario_index& index) {
    if (auto limit = device_memory_limit_from_env(); !limit.is_ok())
        return bad_run_input(limit.error().message());
    if (const char* mode = std::getenv("PITFALL_CONTAINMENT");
        mode != nullptr && *mode != '\0' && std::string(mode) != "auto" &&
        std::string(mode) != "cgroup" && std::string(mode) != "subreaper")
        return bad_run_input(std::string("PITFALL_CONTAINMENT='") + mode +
                             "': expected auto, cgroup or subreaper");
    const char* injecting = std::getenv(inject::env_name);
    const char* mutating = std::getenv(mutate::env_name);
    const bool injects = injecting != nullptr && *injecting != '\0';
    const bool mutates = mutating != nullptr && *mutating != '\0';
    if (!injects && !mutates)
        return status::ok();
    std::set<std::string> keys; // helper variants too: run_self passes the variable on
    for (const auto& s : index.scenarios)
        for (const auto& v : s.description.variants)
            for (const auto& b : s.description.backends_of(v))
                keys.insert(b + "." + s.description.name + "." + v.name);
    if (injects)
        if (auto checked = inject::validate(injecting, keys); !checked.is_ok())
            return bad_run_input(checked.message());
    if (mutates)
        if (auto checked = mutate::validate(mutating, keys); !checked.is_ok())
            return bad_run_input(checked.message());
    return status::ok();
}

status plan_run(const run_options& requested, run_plan& plan) {
    plan.options = requested;
    PITFALL_ASSIGN_OR_RETURN(plan.index, load_index(requested.common.index_path));
    PITFALL_TRY(check_environment(plan.index));
    std::optional<std::set<std::string>> resumed;
    if (!requested.resume_dir.empty()) {
        PITFALL_ASSIGN_OR_RETURN(resumed, plan_resume(plan));
    }
    PITFALL_TRY(plan_cases(plan, resumed));
    PITFALL_ASSIGN_OR_RETURN(plan.profiles,
                             load_profiles(plan.options.common.expected_dir, plan.index));
    if (!plan.resuming) {
        PITFALL_ASSIGN_OR_RETURN(
            run_folder folder, run_folder::create(new_run_dir(plan.options), plan.options.replace));
        plan.folder.emplace(std::move(folder));
    }
    PITFALL_TRY(check_cases_can_start(plan));
    plan.visible_devices = child_cuda_visible_devices();
    return status::ok();
}

/// Fingerprints the environment, chooses the profiles, appends the header and says so.
status start_session(run_plan& plan) {
    run_folder& folder = *plan.folder;
    run_header& h = plan.header;
    h.fingerprint =
        take_fingerprint(plan.options.probe_program, folder.logs_dir(), !plan.options.fresh_probe);
    // The build's SASS and PTX beside the machine's facts: the doctor's rules judge them
    // against the devices, here and in every report rendered from this record.
    std::vector<std::pair<std::string, std::string>> programs;
    for (const auto& s : plan.index.scenarios)
        programs.emplace_back(s.description.name, s.program);
    h.fingerprint["build_images"] = build_images(programs);
    // How each case's threads are set (the counts themselves are per case, in its record).
    json variables = json::array();
    for (const char* name : case_thread_variables)
        variables.push_back(name);
    h.fingerprint["case_threads"] = {{"default", 1}, {"variables", variables}};
    h.fingerprint_summary = fingerprint_summary(h.fingerprint);
    h.fingerprint_id = fingerprint_id(h.fingerprint_summary);
    PITFALL_ASSIGN_OR_RETURN(plan.choice, choose_profile(plan.profiles, h.fingerprint_summary,
                                                         plan.options.profile_override));
    h.resumed = plan.resuming;
    h.at = now_iso8601();
    h.pitfall_version = PITFALL_VERSION;
    h.argv.clear();
    for (const auto& arg : plan.options.argv) // bytes from the shell: recorded as text
        h.argv.push_back(detail::valid_utf8(arg));
    h.index = detail::valid_utf8(plan.index.path);
    h.build = plan.index.build;
    if (plan.choice.chosen != nullptr)
        h.profile = plan.choice.chosen->name;
    h.profile_reason = plan.choice.reason;
    for (const auto& c : plan.cases)
        h.selection.push_back(key_of(c));
    h.options = {plan.options.samples,
                 plan.options.timeout_scale,
                 plan.options.timing_floor,
                 plan.options.remeasure_pause,
                 plan.options.jobs,
                 plan.options.timed_in_parallel,
                 plan.options.full,
                 plan.options.judge_times,
                 to_string(plan.options.correction),
                 plan.options.timing_level};
    // Every process a case starts is ended with it, even past a SIGKILL of this one. How is
    // recorded beside the fingerprint (not in its summary: profiles do not match on it).
    const char* mode = std::getenv("PITFALL_CONTAINMENT");
    PITFALL_ASSIGN_OR_RETURN(const containment held,
                             contain_cases(mode == nullptr || *mode == '\0' ? "auto" : mode));
    plan.run_token = held.run_token;
    std::string no_lock;
    const std::string shared = shared_folder(no_lock);
    plan.case_lock = shared.empty() ? "" : shared + "/cases.lock";
    h.fingerprint["case_lock"] = shared.empty() ? json{{"none", no_lock}} : json(plan.case_lock);
    h.fingerprint["containment"] = {
        {"method", held.method}, {"detail", held.detail}, {"token", held.run_token}};
    plan.judging.fingerprint_id = h.fingerprint_id;
    plan.judging.host_id = host_id_of(h.fingerprint);
    plan.judging.build_type = plan.index.build.value("build_type", "");
    plan.judging.judge_times = plan.options.judge_times;
    plan.judging.blas = blas_kernels(h.fingerprint_summary);
    plan.judging.full_sizes = plan.options.full;
    plan.machine = diagnose(h.fingerprint);
    plan.judging.environment_fault = plan.machine.headline();
    plan.judging.environment_errors = plan.machine.environment_errors();
    plan.judging.explained_errors = plan.machine.explained_errors();
    if (const auto gpus = h.fingerprint_summary.find("gpu_count");
        gpus != h.fingerprint_summary.end() && gpus->is_number_integer())
        plan.judging.gpu_count = gpus->get<int>();
    plan.judging.timing.floor = plan.options.timing_floor;
    PITFALL_TRY(folder.append(h));
    // A copy for people and tools; the header line above is the record, so a copy that
    // cannot be written costs nothing.
    warn(write_file_atomically(folder.fingerprint_path(),
                               h.fingerprint.dump(2, ' ', false, json::error_handler_t::replace) +
                                   "\n"));

    // The machine first: what `pitfall doctor` would say decides how to read every line after.
    std::cout << "machine: "
              << (plan.machine.cuda_usable()
                      ? "CUDA work can run here"
                      : "not ready for CUDA work: " + plan.machine.headline())
              << " (`pitfall doctor` for the evidence and the fix)\n";
    std::cout << "pitfall: " << plan.cases.size() << " cases -> " << folder.dir() << '\n'
              << "profile: " << h.profile.value_or("(none)") << " (" << h.profile_reason << ")\n";
    if (plan.resuming)
        std::cout << "resuming: " << plan.finished.size() << " cases already finished\n";
    if (const char* injecting = std::getenv(inject::env_name);
        injecting != nullptr && *injecting != '\0')
        std::cout << "warning: " << inject::env_name << "=" << injecting
                  << " is set: the cases it names report injected faults, not real ones\n";
    if (const char* mutating = std::getenv(mutate::env_name);
        mutating != nullptr && *mutating != '\0')
        std::cout << "warning: " << mutate::env_name << "=" << mutating
                  << " is set: the cases it names report mutated records, not their own\n";
    return status::ok();
}

// ---- execute -------------------------------------------------------------------------------

/// The terminal's view of a run: each case once, on one line, with a counter and an ETA
/// ("[ 7/78] cpu.dtype_casting.remedy_loss_scaling   PASS   0.4 s   ETA 0:31"). One case at a
/// time, its name shows while it runs; with --jobs, each line is written whole as its case
/// ends (lines of cases running side by side would interleave).
class progress {
public:
    progress(const std::vector<case_ref>& cases, const std::map<std::string, case_record>& done,
             int jobs)
        : m_total(cases.size()), m_jobs(jobs) {
        for (const auto& c : cases) {
            m_width = std::max(m_width, c.key().size() + 2);
            m_left += done.count(c.key()) == 0 ? 1 : 0;
        }
    }

    void begin(std::size_t index, const case_key& key) {
        if (m_jobs == 1)
            std::cout << head(index, key) << std::flush;
    }
    /// A case whose timing came out uncertain: it is measured again at the end of the run.
    void deferred(std::size_t index, const case_key& key, verdict_kind v, double took) {
        std::ostringstream line;
        line << (m_jobs == 1 ? "" : head(index, key)) << std::left << std::setw(16)
             << (std::string(to_string(v)) + "?") << std::right << std::fixed
             << std::setprecision(1) << std::setw(6) << took
             << " s   measured again at the end of the run\n";
        std::cout << line.str() << std::flush;
        m_spent += took;
    }
    void interrupted(std::size_t index, const case_key& key) {
        std::cout << (m_jobs == 1 ? "" : head(index, key)) << " INTERRUPTED\n" << std::flush;
    }
    void not_recorded(std::size_t index, const case_key& key) {
        std::cout << (m_jobs == 1 ? "" : head(index, key)) << " NOT RECORDED\n" << std::flush;
    }
    /// `took`: the case's time in this session, a second measurement's included (the ETA's).
    void end(std::size_t index, const case_record& record, double took) {
        m_spent += took;
        ++m_ran;
        --m_left;
        std::ostringstream line;
        line << (m_jobs == 1 ? "" : head(index, record.key)) << std::left << std::setw(16)
             << to_string(record.verdict) << std::right << std::fixed << std::setprecision(1)
             << std::setw(6) << took << " s   ETA "
             << format_duration(m_spent / static_cast<double>(m_ran) * static_cast<double>(m_left) /
                                static_cast<double>(m_jobs));
        std::cout << line.str() << '\n' << std::flush;
    }

private:
    std::string head(std::size_t index, const case_key& key) const {
        std::ostringstream out;
        out << '[' << std::setw(static_cast<int>(std::to_string(m_total).size())) << index + 1
            << '/' << m_total << "] " << std::left << std::setw(static_cast<int>(m_width))
            << key.str() << std::right;
        return out.str();
    }
    std::size_t m_total = 0;
    int m_jobs = 1;
    std::size_t m_width = 4;
    std::size_t m_left = 0;
    std::size_t m_ran = 0;
    double m_spent = 0;
};

/// One case as it is run: its request, and what it is judged against.
struct case_context {
    const run_plan& plan;
    const case_ref& c;
    case_key key;
    process_request request;
    const json* expected = nullptr; ///< its baseline entry; a null document when none
    const profile* judged_by = nullptr;
    bool timed = false; ///< its time or a ratio it takes part in is judged (timing_judged)
};

/// The machine's memory and swap (/proc/meminfo), bytes; 0 where unknown.
std::uint64_t memory_and_swap_bytes() {
    std::ifstream in("/proc/meminfo");
    std::uint64_t total = 0;
    std::string name;
    std::uint64_t kib = 0;
    std::string unit;
    while (in >> name >> kib >> unit)
        if (name == "MemTotal:" || name == "SwapTotal:")
            total += kib * 1024;
    return total;
}

/// A case's resource limits: its scenario's "limits", else the defaults. CPU time: twice the
/// case's timeout on every hardware thread, plus 10 s (a re-measurement doubles the timeout);
/// it only stops a case spinning on past all reason. File size: 4 GiB. Address space: the
/// machine's memory and swap, so that a case allocating without end meets a failed allocation
/// instead of the kernel's OOM killer; never by default for a CUDA case or a program built with
/// CUDA (the driver reserves address ranges far larger than any memory: a limit makes CUDA fail
/// to initialise), nor in a sanitizer build (AddressSanitizer reserves terabytes of shadow).
resource_limits case_limits(const case_ref& c, double timeout_seconds, bool built_with_cuda) {
    const limits_spec& declared = c.scenario->description.limits;
    resource_limits limits;
    const double threads = std::max(1u, std::thread::hardware_concurrency());
    limits.cpu_seconds = declared.cpu_seconds.value_or(
        static_cast<std::uint64_t>(std::ceil(2 * timeout_seconds * threads)) + 10);
    limits.file_size_bytes = declared.file_size.value_or(std::uint64_t{4} << 30);
    limits.address_space_bytes = declared.address_space;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const bool sanitized = true;
#elif defined(__has_feature)
    const bool sanitized = __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||
                           __has_feature(memory_sanitizer);
#else
    const bool sanitized = false;
#endif
    static const std::uint64_t machine = memory_and_swap_bytes();
    // A CPU case of a program built with CUDA may still touch the driver (a device query, a
    // library that initialises it): no default there either.
    if (!limits.address_space_bytes && c.backend != "cuda" && !built_with_cuda && !sanitized &&
        machine > 0)
        limits.address_space_bytes = machine;
    return limits;
}

/// Whether a case's samples are judged here: its entry has timed series, or a ratio the chosen
/// profiles bound takes it as numerator or denominator.
bool timing_judged(const run_plan& plan, const case_context& ctx) {
    if (ctx.expected->is_object() && ctx.expected->contains("timings"))
        return true;
    for (const auto& r : ctx.c.scenario->description.ratios)
        if ((r.numerator == ctx.key.variant || r.denominator == ctx.key.variant) &&
            plan.choice.ratio_bounds_for(ctx.key.scenario, ctx.key.backend + "." + r.name).first !=
                nullptr)
            return true;
    return false;
}

case_context prepare_case(const run_plan& plan, const case_ref& c) {
    static const json no_entry;
    case_context ctx{plan, c, key_of(c), {}, &no_entry, nullptr, false};
    const run_folder& folder = *plan.folder;
    process_request& req = ctx.request;
    req.argv = {c.scenario->program,
                "--backend",
                c.backend,
                "--variant",
                c.variant->name,
                "--out",
                folder.case_result_path(ctx.key)};
    if (plan.options.samples)
        req.argv.insert(req.argv.end(),
                        {"--param", "samples=" + std::to_string(*plan.options.samples)});
    if (plan.options.full)
        req.argv.emplace_back("--full");
    req.output_path = folder.case_log_path(ctx.key);
    req.timeout_seconds = c.scenario->description.timeout_seconds * plan.options.timeout_scale;
    req.limits = case_limits(c, req.timeout_seconds, plan.index.built_with_cuda);
    req.case_token = plan.run_token + "/" + ctx.key.str(); // what it starts carries it too
    // Threads are part of what a case measures: OpenBLAS with two threads on two shared cores
    // runs at two speeds, and a baseline blessed with one count says nothing of another. Each
    // case gets its variant's count (1 unless scenario.json says why more), whatever this
    // shell exports; bless records it and timings are compared only at the same count.
    for (const char* name : case_thread_variables)
        req.env_set[name] = std::to_string(c.variant->threads);
    if (!plan.visible_devices.empty()) {
        // CTest's ids come from nvidia-smi, which counts in PCI order; CUDA's default order
        // is fastest first. Make CUDA count the same way.
        req.env_set["CUDA_VISIBLE_DEVICES"] = plan.visible_devices;
        req.env_set["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    }
    const auto [entry, from] = plan.choice.entry_for(ctx.key.scenario, ctx.key.entry_key());
    if (entry != nullptr) {
        ctx.expected = entry;
        ctx.judged_by = from;
    }
    ctx.timed = timing_judged(plan, ctx);
    return ctx;
}

/// One process of a case, observed and judged.
struct attempt {
    process_outcome p;
    observation o;
    verdict v;
    std::string log_text;
};

/// The machine-wide case lock, held for the life of one case process: shared by a case whose
/// time is not judged, exclusive by one whose time is. Runs of one user (CTest's `pitfall run`
/// per test under `ctest -j`, two terminals) then never time a case beside another case.
class case_lock {
public:
    /// Waits for the lock; false when Ctrl-C (or TERM) came meanwhile. Without a lock file
    /// (`path` empty, or one that cannot be opened) there is nothing to wait for.
    bool acquire(const std::string& path, bool exclusive) {
        if (path.empty())
            return true;
        m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (m_fd < 0)
            return true;
        while (::flock(m_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK && errno != EINTR)
                return true; // a lock the file system cannot hold: run unlocked
            if (interrupt_requested != 0)
                return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return true;
    }
    case_lock() = default;
    case_lock(const case_lock&) = delete;
    case_lock& operator=(const case_lock&) = delete;
    ~case_lock() {
        if (m_fd >= 0)
            ::close(m_fd); // releases it
    }

private:
    int m_fd = -1;
};

attempt measure(const case_context& ctx, const process_request& req) {
    const std::string result_path = ctx.plan.folder->case_result_path(ctx.key);
    ::unlink(result_path.c_str());
    attempt a;
    case_lock held;
    // --timed-in-parallel asked for timed cases beside others: then every case shares it.
    if (!held.acquire(ctx.plan.case_lock, ctx.timed && !ctx.plan.options.timed_in_parallel)) {
        a.p.interrupted = true;
        return a;
    }
    a.p = run_process(req);
    if (a.p.interrupted)
        return a;
    a.log_text = read_tail(req.output_path, std::size_t{16} * 1024);
    a.o = observe(ctx.c, a.p, result_path, a.log_text, ctx.request.timeout_seconds);
    // A link the case left at its own result or log (read as no result above) is removed, as
    // a link: the run folder stays free of links for every reader after this one.
    for (const std::string& own : {result_path, req.output_path}) {
        struct stat st {};
        if (::lstat(own.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            ::unlink(own.c_str());
    }
    a.o.peak_rss_bytes = static_cast<double>(a.p.peak_rss_bytes);
    a.o.threads = ctx.c.variant->threads;
    a.v = judge(a.o, *ctx.expected, ctx.c.backend, ctx.plan.judging);
    return a;
}

bool timing_uncertain(const verdict& v) {
    return v.kind == verdict_kind::ambiguous || v.kind == verdict_kind::perf_regression;
}

/// The timed series that made a verdict uncertain: those the next process is chosen by. A
/// normalised twin ("step_seconds/host_blas") stands for its series: the process is chosen by
/// the times themselves.
std::vector<std::string> uncertain_series(const verdict& v) {
    std::vector<std::string> names;
    for (const auto& [name, t] : v.timings.items()) {
        if (t.value("verdict", "") != "PERF_REGRESSION" && t.value("verdict", "") != "AMBIGUOUS")
            continue;
        const std::string series = name.substr(0, name.find('/'));
        if (std::find(names.begin(), names.end(), series) == names.end())
            names.push_back(series);
    }
    return names;
}

/// The attempt whose verdict stands, and each attempt's summary for the record. An attempt
/// that failed otherwise (a crash, another outcome) is the verdict; else the least disturbed by
/// the series being judged (`series`; relative_slowness: interference only ever adds time).
std::pair<std::size_t, json> least_disturbed(const std::vector<attempt>& tried,
                                             const std::vector<std::string>& series) {
    std::vector<const json*> results;
    results.reserve(tried.size());
    for (const auto& a : tried)
        results.push_back(&a.o.result);
    const std::vector<double> slowness = relative_slowness(results, series);
    std::size_t best = 0;
    json summaries = json::array();
    for (std::size_t i = 0; i < tried.size(); ++i) {
        json medians = json::object();
        for (const auto& name : series) {
            const double m = time_median(tried[i].o.result, name);
            medians[name] = std::isfinite(m) ? json(m) : json(nullptr);
        }
        summaries.push_back({{"verdict", to_string(tried[i].v.kind)},
                             {"reason", tried[i].v.reason},
                             {"samples", samples_taken(tried[i].o.result)},
                             {"median_seconds", medians},
                             {"wall_seconds", tried[i].p.wall_seconds}});
        if (is_failing(tried[i].v.kind) && !timing_uncertain(tried[i].v)) {
            best = i;
            break;
        }
        if (slowness[i] < slowness[best])
            best = i;
    }
    return {best, summaries};
}

/// A case whose first process came out AMBIGUOUS or PERF_REGRESSION, waiting for the end of the
/// run: its second process runs then, alone, after a pause, with three times the samples
/// (remeasure_request). Separate processes on a shared machine differ by more than one
/// process's samples show, and interference only ever adds time: like the baseline (the
/// fastest of the runs blessed), the candidate is the least disturbed of its two processes by
/// the series being judged. A PERF_REGRESSION then fails the run only when even that process is
/// slower beyond tolerance; AMBIGUOUS warns.
struct deferred_case {
    std::size_t index;
    case_context ctx;
    attempt first;
    double took; ///< the first process's seconds, for the ETA
};

/// The second process of a deferred case and the verdict that stands; nullopt when Ctrl-C (or
/// TERM) came meanwhile; an error when the kept result could not be written back to cases/.
status_or<std::optional<std::pair<attempt, json>>> measure_again(deferred_case& d) {
    attempt next = measure(d.ctx, remeasure_request(d.ctx.request, d.first.o.result));
    if (next.p.interrupted)
        return std::optional<std::pair<attempt, json>>{};
    const std::vector<std::string> series = uncertain_series(d.first.v);
    std::vector<attempt> tried;
    tried.push_back(std::move(d.first));
    tried.push_back(std::move(next));
    auto [best, summaries] = least_disturbed(tried, series);
    attempt stands = std::move(tried[best]);
    std::string judged_by;
    for (const auto& name : series)
        judged_by += (judged_by.empty() ? "" : ", ") + name;
    stands.v.reason = "least disturbed of 2 processes (by " + judged_by + "): " + stands.v.reason;
    if (stands.v.kind == verdict_kind::ambiguous)
        stands.v.reason += " (a warning, not a failure)";
    if (stands.o.result.is_object()) // the kept result is the one judged
        PITFALL_TRY(write_file_atomically(
            d.ctx.plan.folder->case_result_path(d.ctx.key),
            stands.o.result.dump(2, ' ', false, json::error_handler_t::replace) + "\n"));
    return std::optional<std::pair<attempt, json>>{
        std::make_pair(std::move(stands), std::move(summaries))};
}

case_record make_record(const case_context& ctx, const attempt& a, json attempts) {
    case_record r;
    r.key = ctx.key;
    r.kind = ctx.c.variant->kind;
    // A case that did not run predicted nothing: it is counted UNSUPPORTED, not a prediction.
    if (const auto it = ctx.c.variant->prediction.find(ctx.key.backend);
        it != ctx.c.variant->prediction.end() && a.o.outcome.value("status", "") != "unsupported")
        r.prediction = it->second;
    r.labels = ctx.c.labels();
    r.verdict = a.v.kind;
    r.reason = a.v.reason;
    r.observed = a.o.outcome;
    r.process.exit_code = a.p.exit_code;
    if (a.p.signal)
        r.process.signal = signal_name(*a.p.signal);
    r.process.timed_out = a.p.timed_out;
    r.process.wall_seconds = a.p.wall_seconds;
    r.process.peak_rss_bytes = a.p.peak_rss_bytes;
    r.process.threads = ctx.c.variant->threads;
    r.result = a.o.result;
    r.timings = a.v.timings;
    r.attempts = std::move(attempts);
    if (ctx.judged_by != nullptr)
        r.baseline_profile = ctx.judged_by->name;
    r.baseline_entry = *ctx.expected;
    r.log = run_folder::log_name(ctx.key);
    r.output_tail = detail::utf8_tail(a.log_text, 2000); // never half a character
    r.finished_at = now_iso8601();
    return r;
}

/// A case that cannot be recorded ends the run: printing it as finished would claim a result
/// that is not on disk. Said with the file and the errno, and how to go on.
status not_recorded(const run_plan& plan, const case_key& key, const status& why) {
    return bad_run_input(
        why.message() + "\n  " + key.str() + " is not recorded; the run stopped with " +
        std::to_string(plan.finished.size()) + " of " + std::to_string(plan.cases.size()) +
        " cases recorded (results.jsonl holds only whole records). Make room, "
        "then `pitfall run --resume " +
        plan.folder->dir() + "` completes it");
}

/// What a running case holds: slots (its threads, at most --jobs), the GPU (CUDA cases run
/// one at a time: a case may use every visible device), or the whole machine (a case whose
/// time or ratio is judged, unless --timed-in-parallel).
struct case_claim {
    int slots = 1;
    bool gpu = false;
    bool alone = false;
};

case_claim claim_of(const run_plan& plan, const case_context& ctx) {
    case_claim claim;
    claim.slots = std::min(ctx.c.variant->threads, plan.options.jobs);
    claim.gpu = ctx.c.backend == "cuda";
    claim.alone = plan.options.jobs > 1 && !plan.options.timed_in_parallel && ctx.timed;
    return claim;
}

/// The cases running now, and what they hold.
struct holdings {
    int slots = 0;
    bool gpu = false;
    bool alone = false;
    std::size_t running = 0;

    bool admits(const case_claim& c, int jobs) const {
        if (running == 0)
            return true;
        return !alone && !c.alone && slots + c.slots <= jobs && !(gpu && c.gpu);
    }
    void take(const case_claim& c) {
        slots += c.slots;
        gpu = gpu || c.gpu;
        alone = alone || c.alone;
        ++running;
    }
    void give_back(const case_claim& c) {
        slots -= c.slots;
        gpu = gpu && !c.gpu;
        alone = alone && !c.alone;
        --running;
    }
};

/// A case's first process, run on a worker thread; the main thread records it.
struct running_case {
    std::size_t index;
    case_claim claim;
    std::optional<case_context> ctx;
    attempt first;
    double took = 0;
    bool done = false;
    std::thread worker;
};

/// Records a finished case (or defers one whose timing is uncertain); an error when its record
/// could not be written.
status settle_first(run_plan& plan, running_case& rc, progress& out,
                    std::vector<deferred_case>& deferred) {
    const case_key key = rc.ctx->key;
    if (timing_uncertain(rc.first.v) && interrupt_requested == 0) {
        out.deferred(rc.index, key, rc.first.v.kind, rc.took);
        deferred.push_back({rc.index, std::move(*rc.ctx), std::move(rc.first), rc.took});
        return status::ok();
    }
    case_record record = make_record(*rc.ctx, rc.first, json::array());
    if (auto s = plan.folder->append(record); !s.is_ok()) {
        out.not_recorded(rc.index, key);
        return not_recorded(plan, key, s);
    }
    out.end(rc.index, record, rc.took);
    plan.finished.emplace(key.str(), std::move(record));
    return status::ok();
}

/// Each case not finished yet, up to --jobs at once (case_claim says which may share the
/// machine), each record appended as its case ends. Returns the cases whose timing came out
/// uncertain, for the end of the run; `interrupted` set on Ctrl-C (or TERM).
status_or<std::vector<deferred_case>> first_pass(run_plan& plan, progress& out, bool& interrupted) {
    std::vector<deferred_case> deferred;
    std::deque<std::size_t> pending;
    for (std::size_t i = 0; i < plan.cases.size(); ++i)
        if (plan.finished.count(plan.cases[i].key()) == 0)
            pending.push_back(i);
    std::mutex mutex;
    std::condition_variable finished_one;
    std::list<running_case> running;
    holdings held;
    status failure = status::ok();
    while (true) {
        // Start what fits, in order; a case that must run alone holds back every case after it
        // until the machine is free (else a stream of small cases would starve it).
        while (failure.is_ok() && interrupt_requested == 0 && !pending.empty()) {
            const std::size_t i = pending.front();
            case_context ctx = prepare_case(plan, plan.cases[i]);
            const case_claim claim = claim_of(plan, ctx);
            {
                const std::lock_guard<std::mutex> lock(mutex);
                if (!held.admits(claim, plan.options.jobs))
                    break;
                held.take(claim);
            }
            pending.pop_front();
            if (auto s = plan.folder->append_event("started", ctx.key, now_iso8601()); !s.is_ok()) {
                out.not_recorded(i, ctx.key);
                failure = not_recorded(plan, ctx.key, s);
                const std::lock_guard<std::mutex> lock(mutex);
                held.give_back(claim);
                break;
            }
            out.begin(i, ctx.key);
            running.emplace_back();
            running_case& rc = running.back();
            rc.index = i;
            rc.claim = claim;
            rc.ctx.emplace(std::move(ctx));
            rc.worker = std::thread([&rc, &mutex, &finished_one] {
                const auto started = std::chrono::steady_clock::now();
                attempt a = measure(*rc.ctx, rc.ctx->request);
                const std::lock_guard<std::mutex> lock(mutex);
                rc.first = std::move(a);
                rc.took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                              .count();
                rc.done = true;
                finished_one.notify_all();
            });
        }
        if (running.empty())
            break;
        std::unique_lock<std::mutex> lock(mutex);
        finished_one.wait(lock, [&] {
            return std::any_of(running.begin(), running.end(),
                               [](const running_case& rc) { return rc.done; });
        });
        for (auto it = running.begin(); it != running.end();) {
            if (!it->done) {
                ++it;
                continue;
            }
            held.give_back(it->claim);
            lock.unlock();
            it->worker.join();
            if (it->first.p.interrupted) {
                interrupted = true;
                out.interrupted(it->index, it->ctx->key);
                if (auto s = plan.folder->append_event("interrupted", it->ctx->key, now_iso8601());
                    !s.is_ok() && failure.is_ok())
                    failure = not_recorded(plan, it->ctx->key, s);
            } else if (failure.is_ok()) {
                failure = settle_first(plan, *it, out, deferred);
            }
            lock.lock();
            it = running.erase(it);
        }
    }
    interrupted = interrupted || interrupt_requested != 0;
    if (!failure.is_ok())
        return failure;
    return deferred;
}

/// The second processes of the deferred cases, one at a time after one pause (see
/// deferred_case). True when interrupted.
status_or<bool> measure_deferred(run_plan& plan, progress& out,
                                 std::vector<deferred_case>& deferred) {
    if (deferred.empty())
        return false;
    std::cout << "measuring again, one at a time after " << plan.options.remeasure_pause
              << " s: " << deferred.size() << (deferred.size() == 1 ? " case" : " cases")
              << " whose timing came out uncertain\n"
              << std::flush;
    if (!pause_unless_interrupted(plan.options.remeasure_pause))
        return true;
    for (deferred_case& d : deferred) {
        const case_key key = d.ctx.key;
        const auto started = std::chrono::steady_clock::now();
        out.begin(d.index, key);
        PITFALL_ASSIGN_OR_RETURN(auto settled, measure_again(d));
        if (!settled) {
            out.interrupted(d.index, key);
            if (auto s = plan.folder->append_event("interrupted", key, now_iso8601()); !s.is_ok())
                return not_recorded(plan, key, s);
            return true;
        }
        case_record record = make_record(d.ctx, settled->first, std::move(settled->second));
        if (auto s = plan.folder->append(record); !s.is_ok()) {
            out.not_recorded(d.index, key);
            return not_recorded(plan, key, s);
        }
        const double again =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        out.end(d.index, record, again);
        plan.finished.emplace(key.str(), std::move(record));
    }
    return false;
}

/// Runs every case not finished yet, then measures again those whose timing was uncertain;
/// true when interrupted; an error (the run ends, exit 2) when a record could not be written.
status_or<bool> execute(run_plan& plan) {
    install_interrupt_handlers();
    progress out(plan.cases, plan.finished, plan.options.jobs);
    bool interrupted = false;
    PITFALL_ASSIGN_OR_RETURN(std::vector<deferred_case> deferred,
                             first_pass(plan, out, interrupted));
    if (interrupted)
        return true;
    return measure_deferred(plan, out, deferred);
}

/// All timed series of the run judged together: a PERF_REGRESSION that does not survive the
/// correction for their number becomes AMBIGUOUS, and its case's record is appended again (the
/// newest record of a case is the one every reader keeps).
status correct_timings(run_plan& plan) {
    std::vector<case_record*> records;
    for (auto& [key, record] : plan.finished)
        records.push_back(&record);
    std::vector<case_record*> changed;
    plan.timing_family =
        correct_run_timings(records, plan.options.correction, plan.options.timing_level, changed);
    for (case_record* r : changed)
        if (auto s = plan.folder->append(*r); !s.is_ok())
            return not_recorded(plan, r->key, s);
    return status::ok();
}

// ---- summarise -----------------------------------------------------------------------------

/// Every finished case of the folder (a resumed run's earlier ones included), in run order.
struct run_totals {
    std::vector<const case_record*> finished;
    std::vector<std::string> not_run;
    std::map<std::string, int> counts;
    json ratios = json::array();
    bool any_failing = false;
    bool all_unsupported = true;
};

run_totals tally(const run_plan& plan) {
    run_totals t;
    for (const auto& c : plan.cases) {
        const auto it = plan.finished.find(c.key());
        if (it == plan.finished.end()) {
            t.not_run.push_back(c.key());
            t.all_unsupported = false;
            continue;
        }
        const case_record& r = it->second;
        t.finished.push_back(&r);
        ++t.counts[to_string(r.verdict)];
        t.any_failing = t.any_failing || r.failing();
        t.all_unsupported = t.all_unsupported && r.verdict == verdict_kind::unsupported;
    }
    t.ratios = compute_ratios(plan.index, plan.finished, plan.choice, plan.judging);
    for (const auto& r : t.ratios)
        t.any_failing = t.any_failing || r.value("failing", false);
    return t;
}

status write_summary(const run_plan& plan, const run_totals& t, bool interrupted, int code) {
    json cases = json::array();
    for (const case_record* r : t.finished)
        cases.push_back({{"case", r->key.str()},
                         {"verdict", to_string(r->verdict)},
                         {"failing", r->failing()},
                         {"reason", r->reason},
                         {"wall_seconds", r->process.wall_seconds}});
    const json summary = {{"schema", "pitfall.summary/1"},
                          {"at", now_iso8601()},
                          {"complete", !interrupted && t.not_run.empty()},
                          {"cases_selected", plan.cases.size()},
                          {"cases_finished", t.finished.size()},
                          {"counts", t.counts},
                          {"profile", plan.header.to_json()["profile"]},
                          {"fingerprint_summary", plan.header.fingerprint_summary},
                          {"ratios", t.ratios},
                          {"timing_family", plan.timing_family},
                          {"cases", cases},
                          {"exit_code", code}};
    return write_file_atomically(plan.folder->summary_path(),
                                 summary.dump(2, ' ', false, json::error_handler_t::replace) +
                                     "\n");
}

/// What a driver error means for a person, where the name alone does not say it.
const char* gloss(const std::string& error) {
    if (error == "cudaErrorInsufficientDriver")
        return "no NVIDIA driver, or one older than the CUDA runtime";
    if (error == "cudaErrorNoDevice")
        return "no CUDA device visible";
    return nullptr;
}

/// Cases that neither pass nor fail, grouped by verdict, backend and cause, in order of first
/// appearance: a cause shared by many cases is said once.
struct case_group {
    verdict_kind verdict;
    std::string backend;
    std::string cause;
    std::vector<const case_record*> members;
};

/// A skip's cause is the observed error (its name, not the wording around it); else the reason.
std::string cause_of(const case_record& r) {
    if (r.verdict != verdict_kind::unsupported)
        return r.reason;
    const std::string error = r.observed.value("error", "");
    if (const char* meaning = gloss(error))
        return error + " (" + meaning + ")";
    return r.observed.value("reason", r.reason);
}

std::vector<case_group> group_quiet_cases(const std::vector<const case_record*>& finished) {
    std::vector<case_group> groups;
    for (const case_record* r : finished) {
        if (r->failing() || r->verdict == verdict_kind::pass)
            continue;
        const std::string cause = cause_of(*r);
        const auto it = std::find_if(groups.begin(), groups.end(), [&](const case_group& g) {
            return g.verdict == r->verdict && g.backend == r->key.backend && g.cause == cause;
        });
        if (it != groups.end())
            it->members.push_back(r);
        else
            groups.push_back({r->verdict, r->key.backend, cause, {r}});
    }
    return groups;
}

std::string upper(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    return text;
}

/// "  cpu.harness_fixture.segv     CRASH             SIGSEGV (baseline: ok)"
std::string case_line(std::size_t width, const std::string& key, verdict_kind v,
                      const std::string& reason) {
    std::string line = reason.substr(0, reason.find('\n'));
    line.erase(line.find_last_not_of(' ') + 1);
    if (line.size() > 160) { // cut at a word, never inside one (or inside a UTF-8 character)
        const std::size_t space = line.rfind(' ', 157);
        line = detail::utf8_head(line, space != std::string::npos && space > 100 ? space : 157) +
               " ...";
    }
    const std::string verdict = to_string(v);
    std::ostringstream out;
    // The verdict's column fits the longest name, NUMERIC_MISMATCH and PERF_REGRESSION, and a
    // longer one still gets its space: never glued to the reason.
    out << "  " << std::left << std::setw(static_cast<int>(width)) << key << verdict
        << std::string(verdict.size() < 18 ? 18 - verdict.size() : 1, ' ') << line << '\n';
    return out.str();
}

/// Each failing case and ratio, with its reason.
void print_failures(const run_totals& t, std::size_t width) {
    std::string lines;
    for (const case_record* r : t.finished)
        if (r->failing())
            lines += case_line(width, r->key.str(), r->verdict, r->reason);
    for (const auto& ratio : t.ratios)
        if (ratio.value("failing", false))
            lines += "  ratio " + ratio["backend"].get<std::string>() + '.' +
                     ratio["scenario"].get<std::string>() + '.' + ratio["name"].get<std::string>() +
                     "  " + ratio.value("verdict", "") + ": " + ratio.value("reason", "") + '\n';
    if (!lines.empty())
        std::cout << "failing:\n" << lines;
}

/// A skip group's cause in the machine's words where the diagnosis explains its error:
/// "no NVIDIA driver (libcuda.so.1 not found); CUDA 13.0 needs driver >= 580
/// [cudaErrorInsufficientDriver]".
std::string group_cause(const case_group& g, const diagnosis& machine) {
    if (g.verdict != verdict_kind::unsupported || g.backend != "cuda" || machine.cuda_usable())
        return g.cause;
    const std::string error = g.members.front()->observed.value("error", "");
    for (const auto& name : machine.explained_errors())
        if (!error.empty() && name == error)
            return machine.headline() + " [" + error + "]";
    return g.cause;
}

/// Warnings, then skips: a case alone with its reason, a group as "33 CUDA cases UNSUPPORTED:
/// <cause>".
void print_groups(const run_totals& t, std::size_t width, const diagnosis& machine) {
    const auto groups = group_quiet_cases(t.finished);
    const std::pair<verdict_severity, const char*> sections[] = {
        {verdict_severity::warning, "warnings:\n"}, {verdict_severity::skip, "skipped:\n"}};
    for (const auto& [severity, heading] : sections) {
        std::string lines;
        for (const auto& g : groups) {
            if (info(g.verdict).severity != severity)
                continue;
            if (g.members.size() == 1)
                lines += case_line(width, g.members[0]->key.str(), g.verdict, g.members[0]->reason);
            else
                lines += "  " + std::to_string(g.members.size()) + ' ' + upper(g.backend) +
                         " cases " + to_string(g.verdict) + ": " + group_cause(g, machine) + '\n';
        }
        if (!lines.empty())
            std::cout << heading << lines;
    }
}

void print_ratios(const json& ratios) {
    for (const auto& r : ratios) {
        std::ostringstream value;
        value << std::setprecision(3) << r["ratio"].get<double>();
        std::cout << "ratio " << r["backend"].get<std::string>() << '.'
                  << r["scenario"].get<std::string>() << '.' << r["name"].get<std::string>()
                  << " = " << value.str();
        if (r.contains("verdict")) {
            std::cout << "  " << r["verdict"].get<std::string>();
            if (r.contains("bound"))
                std::cout << " (bound " << r["bound"].dump() << ")";
            // Not judged: say why (another host's or fingerprint's bound, full sizes).
            if (r["verdict"] == "NOT_COMPARED" && r.contains("reason") && r["reason"].is_string())
                std::cout << ": " << r["reason"].get<std::string>();
        }
        std::cout << '\n';
    }
}

/// One line on the run's timed series judged together, when any were.
void print_timing_family(const json& family) {
    if (!family.is_object() || family.value("series", 0) == 0)
        return;
    const json demoted = family.value("demoted", json::array());
    std::cout << "timing: " << family["series"].get<int>() << " series judged together ("
              << family.value("method", "") << ", level " << family.value("level", 0.0) << ")";
    if (!demoted.empty())
        std::cout << ": " << demoted.size()
                  << " slower beyond tolerance, but not significant among them (AMBIGUOUS)";
    std::cout << '\n';
}

/// The end of the terminal output: the counts; each failure with its reason; warnings and
/// skips, a group's cause said once; what did not run; the ratios; the timings judged
/// together; where things are.
void print_end(const run_plan& plan, const run_totals& t, bool interrupted) {
    std::size_t width = 4;
    for (const case_record* r : t.finished)
        width = std::max(width, r->key.str().size() + 2);
    std::cout << '\n';
    if (!t.not_run.empty())
        std::cout << t.finished.size() << " of ";
    std::cout << plan.cases.size() << " cases: " << counts_line(t.counts);
    if (interrupted)
        std::cout << "  (interrupted: --resume " << plan.folder->dir() << " completes it)";
    std::cout << '\n';
    std::size_t predicted = 0;
    for (const case_record* r : t.finished)
        predicted += r->prediction.empty() ? 0 : 1;
    if (predicted > 0) // a PASS of theirs judges a rule applied, not a failure seen
        std::cout << predicted << " of them predicted, not reproduced (scenario.json "
                  << "\"prediction\"; the report lists why)\n";
    print_failures(t, width);
    print_groups(t, width, plan.machine);
    if (!t.not_run.empty())
        std::cout << "not run: " << t.not_run.size()
                  << (t.not_run.size() == 1 ? " case\n" : " cases\n");
    print_ratios(t.ratios);
    print_timing_family(plan.timing_family);
    std::cout << "results: " << plan.folder->results_path()
              << "\nsummary: " << plan.folder->summary_path() << '\n';
}

int summarise(const run_plan& plan, bool interrupted) {
    const run_totals t = tally(plan);
    int code = interrupted ? exit_interrupted : t.any_failing ? exit_failed : exit_ok;
    if (!interrupted && !t.any_failing && t.all_unsupported && plan.options.skip_code)
        code = *plan.options.skip_code;
    // summary.json and the reports are what CI and people read: one that cannot be written
    // (a full disk) ends the run with exit 2 naming it, not a pass nobody can see. The
    // records are safe in results.jsonl; `pitfall report` renders them again.
    const status summary = write_summary(plan, t, interrupted, code);
    print_end(plan, t, interrupted);
    // The reports, rendered from results.jsonl as written (an interrupted run's too: what a
    // person reads first is what finished and what did not).
    const std::string dir = plan.folder->dir();
    auto rendered = load_run(dir);
    const status written = rendered.is_ok() ? write_reports(rendered.value()) : rendered.error();
    if (written.is_ok()) {
        std::cout << "reports: " << dir << '/';
        for (const auto& format : report_formats())
            std::cout << (&format == &report_formats().front() ? "" : ", ") << format.file_name;
        std::cout << '\n';
    }
    if (!summary.is_ok())
        std::cerr << "pitfall: error: summary not written: " << summary.message() << '\n';
    if (!written.is_ok())
        std::cerr << "pitfall: error: reports not written: " << written.message() << '\n';
    return summary.is_ok() && written.is_ok() ? code : exit_bad_input;
}

} // namespace

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
    return summarise(plan, interrupted.value());
}

} // namespace pitfall::runner
