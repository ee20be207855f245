// `pitfall run`: run cases, record and judge them.
#include "commands.hpp"

#include "environment_probe.hpp"

#include "gate/requirement.hpp"
#include "model/locate.hpp"
#include "run/runner.hpp"

#include <charconv>
#include <iostream>
#include <set>

namespace pitfall::cli {
namespace {

/// --flaky-release-after: digits only, 1 to a million runs.
bool parse_release_after(const std::string& text, std::size_t& out) {
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 1000000)
        return false;
    out = n;
    return true;
}

/// Where the run goes, and how it is resumed or restarted.
void declare_run_folder(CLI::App& sub, runner::run_options& r) {
    sub.add_option(
           "--out", r.out_dir,
           "run folder (default: <the index's paths.runs, else ./reports/runs>/\n<UTC time>)")
        ->type_name("DIR");
    sub.add_option("--resume", r.resume_dir,
                   "complete an interrupted run: only the cases not finished there run")
        ->type_name("DIR");
    sub.add_flag("--replace", r.replace, "start afresh when --out already holds a run");
    sub.add_option("--profile", r.profile_override,
                   "judge against expected/P, not the profile the fingerprint picks")
        ->type_name("P");
}

/// How the cases' times are measured and judged.
void declare_timing(CLI::App& sub, runner::run_options& r) {
    add_checked(sub, "--samples", r.samples, parse_samples, "an odd number in [1, 100001]",
                "timed repetitions per case (odd; default: each scenario's, 9)")
        ->type_name("N");
    add_checked(sub, "--timeout-scale", r.timeout_scale, parse_scale,
                "a positive number up to 1000",
                "multiply every case's timeout (slow machines, sanitizers)")
        ->type_name("X");
    add_checked(sub, "--timing-floor", r.timing_floor, parse_fraction,
                "a fraction in [0, 1) (0.10 = 10%)",
                "smallest relative slowdown that is PERF_REGRESSION (default 0.10)")
        ->type_name("F");
    add_checked(sub, "--timings", r.judge_times, parse_timings_mode, "judge or record",
                "judge (default): judge every timed series against its baseline;\n"
                "record: record them, judge none (a run that shares the machine)")
        ->type_name("MODE");
    add_checked(sub, "--timing-correction", r.correction, parse_correction, "holm, bh or none",
                "how the p-values of all the run's timed series are corrected for\n"
                "their number (default holm: the chance that unchanged code fails\n"
                "the run on time stays below --timing-level)")
        ->type_name("M");
    add_checked(sub, "--timing-level", r.timing_level, parse_level, "a level in (0, 1)",
                "the run's false-alarm level for timings (default 0.05)")
        ->type_name("A");
    add_checked(sub, "--remeasure-pause", r.remeasure_pause, parse_pause, "seconds in [0, 600]",
                "seconds between the last case and re-measuring, each once in a new\n"
                "process, the cases whose timing came out AMBIGUOUS or PERF_REGRESSION\n"
                "(default 2)")
        ->type_name("S");
}

/// How many cases run at once, with which probe and parameters, and the exit code of a run
/// with nothing supported.
void declare_execution(CLI::App& sub, runner::run_options& r) {
    add_checked(sub, "--jobs", r.jobs, parse_jobs, "a whole number in [1, 256]",
                "cases at once (default 1): each holds as many of the N slots as\n"
                "its BLAS threads; CUDA cases one at a time; a case whose time or\n"
                "ratio is judged runs alone")
        ->type_name("N");
    sub.add_flag("--fresh-probe", r.fresh_probe,
                 "start the environment probe even where an answer of the last\n"
                 "10 minutes of this boot is kept (see PITFALL_PROBE_CACHE)");
    sub.add_flag("--full", r.full,
                 "run each scenario with its full parameter set (the larger sizes of\n"
                 "scenario.json's \"full\" values) instead of the quick defaults CTest\n"
                 "uses; only outcomes and checks are judged (baselines hold the\n"
                 "defaults' measurements, memory and times), and bless refuses the run");
    sub.add_flag("--build", r.build_programs,
                 "build each scenario's program (cmake --build, in the index's build\n"
                 "tree) just before its first case, while no case runs: a fresh\n"
                 "build's first case starts after one program is built, not all");
    sub.add_flag("--timed-in-parallel", r.timed_in_parallel,
                 "with --jobs, let cases whose times are judged run beside others\n"
                 "(faster, and their times measure the contention too)");
    sub.add_option("--require", r.require,
                   "exit 1 before any case unless this machine is what the job\n"
                   "expects: gpu (a usable GPU) or a baseline profile's name")
        ->type_name("gpu|PROFILE");
    add_checked(sub, "--skip-code", r.skip_code, parse_exit_code, "0..255",
                "exit N when every selected case is UNSUPPORTED (SKIP_RETURN_CODE)")
        ->type_name("N");
    sub.add_option("--history", r.history_db,
                   "record the finished run in this results database (docs/history.md);\n"
                   "one that cannot be written is a warning, never a failed run")
        ->type_name("DB");
    add_checked(sub, "--flaky-release-after", r.flaky_release_after, parse_release_after,
                "a whole number in [1, 1000000]",
                "with --history: the reports call a case flaky until it passed\n"
                "its last N runs of this build and fingerprint (default 10)")
        ->type_name("N");
}

void declare_run(CLI::App& sub, command_line& cl) {
    // In this order in `pitfall help run`.
    declare_run_folder(sub, cl.run);
    declare_timing(sub, cl.run);
    declare_execution(sub, cl.run);
    add_filters(sub, cl.run.common.filter);
    add_locations(sub, cl, true);
    sub.footer(
        R"(A run folder holds results.jsonl, summary.json, fingerprint.json, cases/, logs/ and the
reports (report.json, junit.xml, summary.md, report.html).

examples:
  pitfall run --backend cpu
  pitfall run --scenario float64_inputs --variant reproduce,remedy --samples 15 --out runs/a
  pitfall run --backend cpu --jobs 2
  pitfall run --resume runs/a)");
}

/// --require: this machine, as the doctor sees it, against what the job expects. exit_ok when
/// it is, exit_failed (said in the doctor's words) when not, exit_bad_input for a requirement
/// no profile has or baselines that cannot be read.
int check_machine(const runner::run_options& r) {
    auto index = runner::load_index(r.common.index_path);
    if (!index.is_ok())
        return input_error(index.error());
    temporary_folder logs;
    if (logs.path.empty())
        return usage_error("cannot make a folder under $TMPDIR for the probe's log");
    runner::machine_view view;
    if (auto seen = runner::examine_machine(r.probe_program, logs.path, index.value(),
                                            r.common.expected_dir, !r.fresh_probe, view);
        !seen.is_ok())
        return input_error(seen);
    if (auto known = runner::check_requirement(r.require, view.profiles, "--require");
        !known.is_ok())
        return usage_error(known.message(), "run");
    if (const auto unmet = runner::unmet_requirement(r.require, view)) {
        std::cerr << "pitfall: this machine is not what --require " << r.require
                  << " expects: " << *unmet
                  << "\n(`pitfall doctor` for the evidence and the fix; no case was run)\n";
        return exit_failed;
    }
    return exit_ok;
}

int run_run(const CLI::App&, command_line& cl) {
    runner::run_options& r = cl.run;
    if (!r.out_dir.empty() && !r.resume_dir.empty())
        return usage_error("--out and --resume exclude each other (--resume names the run folder)",
                           "run");
    if (auto bad = split_filter(r.common.filter))
        return usage_error(*bad, "run");
    auto at = runner::locate_for_cases(cl.index_flag, cl.expected_flag);
    if (!at.is_ok())
        return input_error(at.error());
    r.common.index_path = at->index;
    r.common.expected_dir = at->expected;
    r.probe_program = at->probe;
    r.runs_dir = at->runs;
    r.argv = cl.argv;
    if (!r.require.empty())
        if (const int rc = check_machine(r); rc != exit_ok)
            return rc;
    return runner::run_cases(r);
}

} // namespace

command run_command() {
    return {"run", "run cases, record and judge them", declare_run, run_run};
}

} // namespace pitfall::cli
