// `pitfall list` and `pitfall run`.
#pragma once

#include "history/flaky.hpp"
#include "judge/timing.hpp"
#include "model/index.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pitfall::runner {

/// Documented exit codes of the `pitfall` command.
enum exit_code : int {
    exit_ok = 0,     ///< every case met its baseline (UNSUPPORTED and NO_BASELINE do not fail)
    exit_failed = 1, ///< some case did not: FAIL, NUMERIC_MISMATCH, MEM_REGRESSION, CRASH, TIMEOUT
    exit_bad_input = 2, ///< bad usage or bad input (flag, name, malformed file, unwritable folder)
    exit_interrupted = 130 ///< SIGINT/SIGTERM: children's groups ended, finished cases kept
};

struct common_options {
    std::string index_path;
    std::string expected_dir;
    case_filter filter;
};

struct run_options {
    common_options common;
    std::string probe_program;
    std::string out_dir;    ///< empty: <runs_dir>/<timestamp>
    std::string runs_dir;   ///< where a run without --out goes (the index's paths.runs)
    std::string resume_dir; ///< set: complete this run instead of starting one
    bool replace = false;   ///< --replace: an existing run folder at --out is started afresh
    std::string profile_override;
    std::optional<int> samples;   ///< --samples N passed to every case
    std::optional<int> skip_code; ///< exit with this when every selected case is UNSUPPORTED
    double timeout_scale = 1.0;
    /// The smallest relative change of a median time that can be a regression (see docs/timing.md,
    /// "Timing verdicts"): separate processes on a shared 2-vCPU machine differ by up to ~10%
    /// with nothing changed, which no run's own samples can see.
    double timing_floor = 0.10;
    /// Seconds between the last case and the second processes of the cases whose timing came
    /// out AMBIGUOUS or PERF_REGRESSION: interference comes in episodes of seconds, and a
    /// process started at once lands in the same one.
    double remeasure_pause = 2.0;
    /// --timings record: timed series are recorded, none judged (CTest's one-case runs, which
    /// share the machine with other tests); judge (the default) judges them.
    bool judge_times = true;
    /// How the p-values of all the run's timed series are corrected for their number, and the
    /// level a PERF_REGRESSION must stay below after it: the chance that a run of unchanged
    /// code fails on time (see docs/timing.md, "Timing verdicts").
    timing_correction correction = timing_correction::holm;
    double timing_level = 0.05;
    /// Cases at once (--jobs): each holds as many slots as its threads; CUDA cases one at a time.
    int jobs = 1;
    /// Under --jobs, cases whose times or ratios are judged run beside others too.
    bool timed_in_parallel = false;
    /// --fresh-probe: start the probe even where a kept answer is valid (see take_fingerprint).
    bool fresh_probe = false;
    /// --full: every case runs with its scenario's full parameter set (the "full" values of
    /// scenario.json) instead of the quick defaults; baselines are blessed at the defaults, so
    /// only outcomes, events and checks are judged.
    bool full = false;
    /// --build: each scenario's program built in the index's build tree just before its first
    /// case (run/program_build.hpp), so a first run starts without waiting for every program.
    bool build_programs = false;
    /// When set (the gate's budget): the probe and each case get at most the time left until
    /// then, and no case starts after it (those not started are not run, and said so).
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::vector<std::string> argv; ///< recorded in the run header
    /// --require gpu|PROFILE: what the machine must be; the run exits 1 before any case when
    /// it is not (a GPU job on a machine without one must not pass on driver errors).
    std::string require;
    /// --history DB: the results database the run records itself into once summarised.
    std::string history_db;
    /// --flaky-release-after N: with --history, a flaky case passing its last N runs is no
    /// longer reported flaky (history::default_release_after).
    std::size_t flaky_release_after = history::default_release_after;
};

int list_cases(const common_options& options, bool as_json);
int run_cases(const run_options& options);

/// "2 AMBIGUOUS, 45 PASS": verdict counts, for the last line of run and compare.
std::string counts_line(const std::map<std::string, int>& counts);
/// The current UTC time with a strftime format ("%Y-%m-%d").
std::string utc_now(const char* format);
/// The median of a result document's first series in seconds (by name): the figure a report
/// shows for a case; NaN when the case timed nothing.
double first_time_median(const nlohmann::json& result);
/// How slow each of several results of one case ran, for choosing the least disturbed: over
/// `series` (every series in seconds that all of them timed, when empty), the sum of each
/// result's median relative to the smallest median among them (1 per series for the fastest).
/// Infinity for a result that lacks one of the series; all infinite when there is no series
/// to compare.
std::vector<double> relative_slowness(const std::vector<const nlohmann::json*>& results,
                                      std::vector<std::string> series = {});

} // namespace pitfall::runner
