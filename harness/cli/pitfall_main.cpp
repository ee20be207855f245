// The `pitfall` command: list and run failure scenarios, each case in its own process.
// The command line is CLI11's; this file declares the commands and turns their options into
// the runner's option structs. Only main() decides an exit code.
#include "doctor/doctor.hpp"
#include "fingerprint/fingerprint.hpp"
#include "model/index.hpp"
#include "model/locate.hpp"
#include "report/report.hpp"
#include "run/runner.hpp"
#include "util/suggest.hpp"
#include "util/visible_output.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {
using namespace pitfall::runner;

constexpr const char* description =
    "Reproduce, measure and regression-test the failures numeric code meets moving from CPU to "
    "GPU.\nEach case (scenario x backend x variant) runs in its own process and is judged "
    "against the\nbaselines in expected/.";

constexpr const char* overview_footer =
    R"(`pitfall help COMMAND` (or `pitfall COMMAND --help`): that command's options and examples.

A run folder holds results.jsonl (one judged case a line, written as each finishes),
summary.json, fingerprint.json, cases/<case>.json and logs/<case>.log, and the reports rendered
from results.jsonl at the end: report.json, junit.xml, summary.md and report.html.

verdicts: PASS, FAIL, NUMERIC_MISMATCH, MEM_REGRESSION, PERF_REGRESSION, CRASH, TIMEOUT (these
fail the run; a timing verdict is taken on the fastest of up to three processes), AMBIGUOUS (a
timing neither clearly the same nor clearly slower: a warning), UNSUPPORTED (with the reason),
NO_BASELINE (a warning).

where things are: the scenario index is --index FILE, else $PITFALL_INDEX, else the one beside
this program (<bin>/../pitfall-index.json in a build tree, <bin>/../share/pitfall/ installed);
the index names the baselines (--expected DIR, $PITFALL_EXPECTED override it), the probe, the
matrix and fleet drivers ($PITFALL_MATRIX_DRIVER, $PITFALL_FLEET_DRIVER override them) and the
folder for runs.

environment:
  PITFALL_INJECT     fault injection for testing the verdicts: kind:case:argument, comma-
                     separated; slowdown:<case>:1.2, extra_device_bytes:<case>:4M,
                     outcome:<case>:cudaErrorLaunchFailure (<case> = cpu.float64_inputs.remedy
                     or *). Inert unless set; injected results say so and cannot be blessed.
  PITFALL_MUTATE     mutants of a case's records, to test that its baseline notices a check
                     that stops checking: force_pass:<case>:<check>, drop_check:<case>:<check>,
                     drop_measurement:<case>:<name>, scale_measurement:<case>:<name>=2,
                     drop_event:<case>:<name>. Inert unless set; listed in the result as
                     injected, and refused by bless.

exit status:
  0    every case met its baseline (UNSUPPORTED and NO_BASELINE do not fail a run)
  1    some case did not (compare: some change would fail)
  2    bad usage or bad input (unknown flag or name, malformed file, unwritable folder,
       a run folder in use by another run, a record the disk would not take)
  130  interrupted: running cases were ended, finished cases kept (--resume completes it))";

/// CLI11's help, laid out as this command's always was: the usage line first, then what the
/// command does, its options by group, and the notes and examples of its footer.
class help_formatter : public CLI::Formatter {
public:
    help_formatter() {
        label("Usage", "usage");
        label("OPTIONS", "options");
        label("SUBCOMMAND", "COMMAND");
        column_width(26);
    }
    std::string make_help(const CLI::App* app, std::string name,
                          CLI::AppFormatMode mode) const override {
        if (mode == CLI::AppFormatMode::Sub)
            return make_expanded(app);
        std::ostringstream out;
        out << make_usage(app, name) << '\n'
            << app->get_description() << '\n'
            << make_positionals(app) << make_groups(app, mode) << make_subcommands(app, mode)
            << '\n'
            << make_footer(app);
        return out.str();
    }
};

/// What the command line sets; the subcommands' options write straight into it.
struct command_line {
    std::string index_flag;
    std::string expected_flag;
    bool as_json = false;          ///< list, compare
    bool merge = false;            ///< report --merge
    bool version = false;          ///< --version
    std::vector<std::string> runs; ///< the run folders of compare, bless and report
    std::string help_topic;
    std::string explain;  ///< doctor --explain
    std::string spec_out; ///< resource-spec --out
    run_options run;
    compare_options compare;
    bless_options bless;
    report_options report;
    std::vector<std::string> argv; ///< recorded in a run's header
};

int usage_error(const std::string& what, const std::string& command = "") {
    std::cerr << "pitfall: error: " << what << " (see `pitfall help" << (command.empty() ? "" : " ")
              << command << "`)\n";
    return exit_bad_input;
}

int input_error(const pitfall::status& s) {
    std::cerr << "pitfall: error: " << s.message() << '\n';
    return exit_bad_input;
}

/// Splits "a,b" (the filters are repeatable and comma-separated). An empty item ("a,,b", "a,",
/// "") is an error naming the flag: it would select nothing, or everything, by accident.
std::optional<std::string> split_commas(std::vector<std::string>& values, const std::string& flag) {
    std::vector<std::string> out;
    for (const auto& value : values)
        for (std::size_t start = 0; start <= value.size();) {
            const std::size_t comma = std::min(value.find(',', start), value.size());
            if (comma == start) {
                std::string why = flag;
                why += " '" + value + "': an empty ";
                return why + (value.empty() ? "value" : "item");
            }
            out.push_back(value.substr(start, comma - start));
            start = comma + 1;
        }
    values = std::move(out);
    return std::nullopt;
}

template <class T> bool parse_whole(const std::string& text, T& out) {
    try {
        std::size_t used = 0;
        if constexpr (std::is_same_v<T, int>)
            out = std::stoi(text, &used);
        else
            out = std::stod(text, &used);
        return used == text.size();
    } catch (const std::exception&) {
        return false;
    }
}
bool parse_samples(const std::string& text, std::optional<int>& out) {
    int n = 0; // the bound of every scenario's built-in `samples`
    if (!parse_whole(text, n) || n < 1 || n > 100001 || n % 2 == 0)
        return false;
    out = n;
    return true;
}
bool parse_jobs(const std::string& text, int& out) {
    int n = 0;
    if (!parse_whole(text, n) || n < 1 || n > 256)
        return false;
    out = n;
    return true;
}
bool parse_exit_code(const std::string& text, std::optional<int>& out) {
    int n = 0;
    if (!parse_whole(text, n) || n < 0 || n > 255)
        return false;
    out = n;
    return true;
}
bool parse_fraction(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !(x >= 0 && x < 1))
        return false;
    out = x;
    return true;
}
bool parse_level(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !(x > 0 && x < 1))
        return false;
    out = x;
    return true;
}
bool parse_timings_mode(const std::string& text, bool& judge) {
    if (text != "judge" && text != "record")
        return false;
    judge = text == "judge";
    return true;
}
bool parse_correction(const std::string& text, pitfall::runner::timing_correction& out) {
    const auto c = pitfall::runner::timing_correction_from_string(text);
    if (!c)
        return false;
    out = *c;
    return true;
}
bool parse_scale(const std::string& text, double& out) {
    double x = 0; // nan and inf are refused too: a timeout must end
    if (!parse_whole(text, x) || !std::isfinite(x) || !(x > 0 && x <= 1000))
        return false;
    out = x;
    return true;
}
bool parse_ratio_tolerance(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !std::isfinite(x) || !(x > 1 && x <= 1000))
        return false;
    out = x;
    return true;
}
bool parse_pause(const std::string& text, double& out) {
    double x = 0;
    if (!parse_whole(text, x) || !(x >= 0 && x <= 600))
        return false;
    out = x;
    return true;
}

/// An option whose value `parse` must accept; else "FLAG VALUE: expected EXPECTED", exit 2.
template <class T>
CLI::Option* add_checked(CLI::App& sub, const std::string& flag, T& target,
                         bool (*parse)(const std::string&, T&), const std::string& expected,
                         const std::string& help) {
    auto check = [&target, flag, parse, expected](const std::string& value) {
        if (!parse(value, target))
            throw CLI::ValidationError(flag + " " + value + ": expected " + expected);
    };
    return sub.add_option_function<std::string>(flag, check, help);
}

/// --index and --expected; `used` false where the command takes its facts from run folders
/// (accepted, so one command line can carry them everywhere, and left out of its help).
void add_locations(CLI::App& sub, command_line& cl, bool used) {
    const std::string group = used ? "Locations" : "";
    sub.add_option("--index", cl.index_flag,
                   "scenario index (default: $PITFALL_INDEX, else the one beside\n"
                   "this program: <bin>/../pitfall-index.json, <bin>/../share/pitfall/)")
        ->type_name("FILE")
        ->group(group);
    sub.add_option("--expected", cl.expected_flag,
                   "baselines (default: $PITFALL_EXPECTED, else the index's\n"
                   "paths.expected)")
        ->type_name("DIR")
        ->group(group);
}

void add_filter(CLI::App& sub, const std::string& flag, std::vector<std::string>& into,
                const std::string& metavar, const std::string& help) {
    sub.add_option(flag, into, help + " (repeatable, or comma-separated)")
        ->type_name(metavar)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->group("Filters");
}

void add_filters(CLI::App& sub, case_filter& filter) {
    add_filter(sub, "--scenario", filter.scenarios, "S", "only these scenarios");
    add_filter(sub, "--backend", filter.backends, "cpu|cuda", "only these backends");
    add_filter(sub, "--variant", filter.variants, "V", "only these variants");
    add_filter(sub, "--label", filter.labels, "L", "only cases with every label given");
}

void add_list(CLI::App& app, command_line& cl) {
    CLI::App* sub = app.add_subcommand("list", "every case with its labels");
    sub->add_flag("--json", cl.as_json,
                  "JSON: test, scenario, backend, variant, kind, labels, timeout, doc");
    add_filters(*sub, cl.run.common.filter);
    add_locations(*sub, cl, true);
    sub->footer(R"(examples:
  pitfall list
  pitfall list --backend cpu --label reproduce
  pitfall list --scenario float64_inputs --json)");
}

void add_run(CLI::App& app, command_line& cl) {
    CLI::App* sub = app.add_subcommand("run", "run cases, record and judge them");
    run_options& r = cl.run;
    sub->add_option(
           "--out", r.out_dir,
           "run folder (default: <the index's paths.runs, else ./reports/runs>/\n<UTC time>)")
        ->type_name("DIR");
    sub->add_option("--resume", r.resume_dir,
                    "complete an interrupted run: only the cases not finished there run")
        ->type_name("DIR");
    sub->add_flag("--replace", r.replace, "start afresh when --out already holds a run");
    sub->add_option("--profile", r.profile_override,
                    "judge against expected/P, not the profile the fingerprint picks")
        ->type_name("P");
    add_checked(*sub, "--samples", r.samples, parse_samples, "an odd number in [1, 100001]",
                "timed repetitions per case (odd; default: each scenario's, 9)")
        ->type_name("N");
    add_checked(*sub, "--timeout-scale", r.timeout_scale, parse_scale,
                "a positive number up to 1000",
                "multiply every case's timeout (slow machines, sanitizers)")
        ->type_name("X");
    add_checked(*sub, "--timing-floor", r.timing_floor, parse_fraction,
                "a fraction in [0, 1) (0.10 = 10%)",
                "smallest relative slowdown that is PERF_REGRESSION (default 0.10)")
        ->type_name("F");
    add_checked(*sub, "--timings", r.judge_times, parse_timings_mode, "judge or record",
                "judge (default): judge every timed series against its baseline;\n"
                "record: record them, judge none (a run that shares the machine)")
        ->type_name("MODE");
    add_checked(*sub, "--timing-correction", r.correction, parse_correction, "holm, bh or none",
                "how the p-values of all the run's timed series are corrected for\n"
                "their number (default holm: the chance that unchanged code fails\n"
                "the run on time stays below --timing-level)")
        ->type_name("M");
    add_checked(*sub, "--timing-level", r.timing_level, parse_level, "a level in (0, 1)",
                "the run's false-alarm level for timings (default 0.05)")
        ->type_name("A");
    add_checked(*sub, "--remeasure-pause", r.remeasure_pause, parse_pause, "seconds in [0, 600]",
                "seconds between the last case and re-measuring, each once in a new\n"
                "process, the cases whose timing came out AMBIGUOUS or PERF_REGRESSION\n"
                "(default 2)")
        ->type_name("S");
    add_checked(*sub, "--jobs", r.jobs, parse_jobs, "a whole number in [1, 256]",
                "cases at once (default 1): each holds as many of the N slots as\n"
                "its BLAS threads; CUDA cases one at a time; a case whose time or\n"
                "ratio is judged runs alone")
        ->type_name("N");
    sub->add_flag("--fresh-probe", r.fresh_probe,
                  "start the environment probe even where an answer of the last\n"
                  "10 minutes of this boot is kept (see PITFALL_PROBE_CACHE)");
    sub->add_flag("--full", r.full,
                  "run each scenario with its full parameter set (the larger sizes of\n"
                  "scenario.json's \"full\" values) instead of the quick defaults CTest\n"
                  "uses; only outcomes and checks are judged (baselines hold the\n"
                  "defaults' measurements, memory and times), and bless refuses the run");
    sub->add_flag("--timed-in-parallel", r.timed_in_parallel,
                  "with --jobs, let cases whose times are judged run beside others\n"
                  "(faster, and their times measure the contention too)");
    add_checked(*sub, "--skip-code", r.skip_code, parse_exit_code, "0..255",
                "exit N when every selected case is UNSUPPORTED (SKIP_RETURN_CODE)")
        ->type_name("N");
    add_filters(*sub, r.common.filter);
    add_locations(*sub, cl, true);
    sub->footer(
        R"(A run folder holds results.jsonl, summary.json, fingerprint.json, cases/, logs/ and the
reports (report.json, junit.xml, summary.md, report.html).

examples:
  pitfall run --backend cpu
  pitfall run --scenario float64_inputs --variant reproduce,remedy --samples 15 --out runs/a
  pitfall run --backend cpu --jobs 2
  pitfall run --resume runs/a)");
}

void add_compare(CLI::App& app, command_line& cl) {
    CLI::App* sub = app.add_subcommand(
        "compare", "case by case, what changed from run A to run B (outcome, time,\n"
                   "memory, numerics) and the verdict each change would get");
    sub->add_option("RUN", cl.runs, "RUN_A RUN_B: the reference run folder, then the candidate");
    sub->add_flag("--json", cl.as_json, "the comparison as JSON");
    add_checked(*sub, "--timing-floor", cl.compare.timing_floor, parse_fraction,
                "a fraction in [0, 1) (0.10 = 10%)",
                "smallest relative slowdown that is PERF_REGRESSION (default 0.10)")
        ->type_name("F");
    add_locations(*sub, cl, false);
    sub->footer(
        R"(Run B is judged against run A's observations as if A were the baseline: outcomes by name,
tracked device bytes exactly, peak RSS within 25%, checks; times (Mann-Whitney U and a
bootstrap interval of the median ratio) only when both runs share a fingerprint id.
Exit 0 when no change would fail, 1 when one would.

examples:
  pitfall compare runs/a runs/b
  pitfall compare runs/a runs/b --json --timing-floor 0.2)");
}

void add_bless(CLI::App& app, command_line& cl) {
    CLI::App* sub = app.add_subcommand(
        "bless", "write a run's observations into expected/ (prints the diff); with\n"
                 "several runs of one machine, each case from the run with the lowest\n"
                 "median time (the least disturbed)");
    bless_options& b = cl.bless;
    sub->add_option("RUN", cl.runs, "one run folder, or several of the same cases and machine");
    add_filter(*sub, "--scenario", b.scenarios, "S", "only this scenario's cases");
    add_filter(*sub, "--case", b.cases, "KEY",
               "only this case (cpu.float64_inputs.reproduce); a crashed or\n"
               "timed-out case is blessed only when named so (an expected SIGSEGV)");
    sub->add_option("--profile", b.profile,
                    "write into expected/P (default: the profile that judged each case)")
        ->type_name("P");
    add_checked(*sub, "--ratio-tolerance", b.ratio_tolerance, parse_ratio_tolerance,
                "a factor in (1, 1000]",
                "each ratio whose two cases are blessed gets the bound [r / F, r x F]\n"
                "around the measured r (default 2)")
        ->type_name("F");
    sub->add_flag("--ratios-only", b.ratios_only,
                  "write only the ratios the selected cases measure; each case's\n"
                  "entry stays as it is");
    sub->add_flag("--dry-run", b.dry_run, "print the diff, write nothing");
    sub->add_flag("--no-timings", b.no_timings,
                  "write no timed series (and drop the entries' old ones): times\n"
                  "measured here must not gate later runs here (a shared, loaded host)");
    add_locations(*sub, cl, true);
    sub->footer(
        R"(Each entry is marked observed with the evidence of its run: today's date, the run's
fingerprint summary and id, the pitfall version that ran it and the case's run; files are
written whole and renamed into place. Each run blessed from is kept, gzip'd, under
expected/<profile>/runs/<id>/ (results.jsonl, fingerprint.json), named by its entries; a kept
run no entry names any more is removed. A run made with PITFALL_INJECT is refused. A ratio of
scenario.json whose two cases are both blessed is written as an observed bound (judged only
under this fingerprint); a documented ratio bound is kept, and the measured ratio printed.

examples:
  pitfall bless runs/a --dry-run
  pitfall bless runs/a runs/b runs/c
  pitfall bless runs/x --case cpu.float64_inputs.reproduce --profile host
  pitfall bless runs/a --ratios-only --ratio-tolerance 3)");
}

void add_report(CLI::App& app, command_line& cl) {
    CLI::App* sub = app.add_subcommand(
        "report", "render a run folder's results.jsonl (default: HTML on standard\n"
                  "output); --merge: runs side by side (a CUDA/cuDNN/driver matrix,\n"
                  "or a fleet's nodes)");
    sub->add_option("RUN", cl.runs,
                    "the run folder (with --merge: two or more run folders, matrix cell\n"
                    "folders, or fleet node folders)");
    sub->add_flag("--merge", cl.merge,
                  "runs side by side: each cell's verdict and outcome per case, and\n"
                  "what differs between cells. Fleet node folders (node.json, run/,\n"
                  "doctor.json: `pitfall fleet run`) are grouped by fingerprint (GPU,\n"
                  "driver, CUDA, cuDNN): which node differs from the rest of its group\n"
                  "first, then each node's job outcome, the groups, every case");
    sub->add_option("--format", cl.report.format,
                    "html, junit, markdown or json (merged: html or markdown, and json for "
                    "fleet node folders; default html)")
        ->type_name("F");
    sub->add_option("--out", cl.report.out, "write here instead of standard output")
        ->type_name("FILE");
    add_locations(*sub, cl, false);
    sub->footer(R"(`pitfall run` writes all four formats into the run folder.

examples:
  pitfall report runs/a > report.html
  pitfall report runs/a --format junit --out junit.xml
  pitfall report --merge cells/cuda12.4 cells/cuda13.0 --format markdown
  pitfall report --merge fleet/nodes/* --format markdown --out fleet/fleet.md
  pitfall report --merge fleet/nodes/* --format json --out fleet/fleet-report.json)");
}

void add_others(CLI::App& app, command_line& cl) {
    CLI::App* matrix = app.add_subcommand(
        "matrix", "list|images|run [...]: the CUDA/cuDNN matrix of ci/matrix.json in\n"
                  "containers: build or reuse each cell's image, build and run pitfall\n"
                  "in it, merge the cells into one report");
    // Everything after `matrix` is the driver's (it has its own --help).
    matrix->prefix_command()->set_help_flag();
    matrix->footer(
        R"(Arguments go to the matrix driver unchanged: `pitfall matrix --help` lists them. The driver is
$PITFALL_MATRIX_DRIVER, else the scenario index's paths.matrix_driver (ci/matrix.py).

examples:
  pitfall matrix list
  pitfall matrix run --cells cuda13.0-host --scenarios version_mismatch --out /tmp/m
  pitfall matrix run --dry-run --out /tmp/m)");
    CLI::App* fleet = app.add_subcommand(
        "fleet", "run|status|collect|cancel|manifest [...]: the suite on every GPU node of\n"
                 "a cluster (one Slurm array job, one task per node), and which node\n"
                 "differs; a Kubernetes Indexed Job manifest for the same");
    fleet->prefix_command()->set_help_flag();
    fleet->footer(
        R"(Arguments go to the fleet driver unchanged: `pitfall fleet --help` lists them. The driver is
$PITFALL_FLEET_DRIVER, else the scenario index's paths.fleet_driver (ci/fleet.py).

examples:
  pitfall fleet run --engine slurm --partition gpu --out /shared/fleet/a --scenario float64_inputs
  pitfall fleet run --engine slurm --nodelist gpu[01-04] --gres gpu:1 --dry-run
  pitfall fleet status /shared/fleet/a
  pitfall fleet manifest --engine kubernetes --nodes 8 --image registry/pitfall:1 --claim results)");
    CLI::App* doctor = app.add_subcommand(
        "doctor", "what is wrong with this machine for CUDA work: findings worst first,\n"
                  "each with the evidence, why it matters, the fix and the case that\n"
                  "reproduces it");
    doctor->add_flag("--json", cl.as_json,
                     "the findings as JSON (reports/schema/doctor.schema.json)");
    doctor
        ->add_option("--explain", cl.explain,
                     "what finding ID checks, why it matters, the fix\n(all: every finding)")
        ->type_name("ID");
    add_locations(*doctor, cl, false);
    doctor->footer(
        R"(It runs pitfall-probe (a child process: a broken driver or library cannot take pitfall
down), which asks the driver, NVML, the CUDA runtime, cuBLAS and cuDNN themselves, and applies
the rules of docs/cuda-rules.md to what they say.

exit status:
  0    CUDA work can run here (warnings may remain)
  1    a finding is an error: CUDA work cannot run here as it is
  2    bad usage (unknown flag, unknown finding ID), or no pitfall-probe to run

examples:
  pitfall doctor
  pitfall doctor --json
  pitfall doctor --explain stub-driver
  pitfall doctor --explain all)");
    CLI::App* spec = app.add_subcommand(
        "resource-spec", "CTest's resource spec for this machine, from the probe: one \"gpus\"\n"
                         "slot per CUDA device (one slot \"none\" without any), so that\n"
                         "`ctest -j` runs one CUDA case per device at a time");
    spec->add_option("--out", cl.spec_out, "write it here (atomically); default: standard output")
        ->type_name("FILE");
    add_locations(*spec, cl, false);
    spec->footer(
        R"(The CUDA cases' tests ask for RESOURCE_GROUPS "gpus:1"; the build writes this file to
<build>/resource-spec.json, which the presets' test runs read (resourceSpecFile).

exit status:
  0    written
  2    bad usage, no pitfall-probe to run, or the file could not be written

examples:
  pitfall resource-spec
  pitfall resource-spec --out build/ci/resource-spec.json
  ctest --test-dir build/ci -j4 --resource-spec-file build/ci/resource-spec.json)");
    CLI::App* help = app.add_subcommand("help", "the commands, or one command's options");
    help->add_option("COMMAND", cl.help_topic, "the command to explain");
    app.add_subcommand("version", "the version");
}

/// Leftovers of a parse (the subcommands allow extras so that the message can be ours): an
/// unknown option with the nearest known one, or an argument the command takes none of.
int reject_leftovers(const CLI::App& sub) {
    const std::vector<std::string> left = sub.remaining();
    if (left.empty())
        return exit_ok;
    const std::string& first = left.front();
    const std::string& command = sub.get_name();
    if (first.size() < 2 || first[0] != '-')
        return usage_error("unexpected argument '" + first + "' for `pitfall " + command + "`",
                           command);
    std::vector<std::string> known;
    for (const CLI::Option* opt : sub.get_options())
        for (const auto& name : opt->get_lnames())
            known.push_back("--" + name);
    const std::string flag = first.substr(0, first.find('='));
    return usage_error("unknown option '" + flag + "' for `pitfall " + command + "`" +
                           did_you_mean(flag, known),
                       command);
}

/// A flag given an empty value (`--out ""`, `--profile=`): exit 2 naming it. Left as it is, an
/// empty value reads as the flag left out (a run folder chosen by the clock, the profile the
/// fingerprint picks), which is not what was asked.
int reject_empty_values(const CLI::App& sub) {
    for (const CLI::Option* opt : sub.get_options()) {
        if (opt->get_expected_max() == 0 || opt->count() == 0 || opt->get_positional())
            continue;
        for (const auto& value : opt->results())
            if (value.empty())
                return usage_error(opt->get_name() + ": an empty value", sub.get_name());
    }
    return exit_ok;
}

std::vector<std::string> command_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    return names;
}

/// The first argument must be a command or -h/--help: said here, with the nearest command,
/// before CLI11 would call it an extra.
int check_command(const CLI::App& app, const std::string& first) {
    const std::vector<std::string> names = command_names(app);
    if (std::find(names.begin(), names.end(), first) != names.end())
        return exit_ok;
    std::vector<std::string> flags{"-h"};
    for (const CLI::Option* opt : app.get_options())
        for (const auto& name : opt->get_lnames())
            flags.push_back("--" + name);
    if (std::find(flags.begin(), flags.end(), first) != flags.end())
        return exit_ok;
    if (!first.empty() && first[0] == '-')
        return usage_error("unknown option '" + first + "'" + did_you_mean(first, flags));
    return usage_error("unknown command '" + first + "'" + did_you_mean(first, names));
}

int do_help(const CLI::App& app, const std::string& topic) {
    if (topic.empty()) { // app.help() would describe the command chosen: `help` itself
        std::cout << app.get_formatter()->make_help(&app, "pitfall", CLI::AppFormatMode::Normal);
        return exit_ok;
    }
    const std::vector<std::string> names = command_names(app);
    if (std::find(names.begin(), names.end(), topic) == names.end())
        return usage_error("unknown command '" + topic + "'" + did_you_mean(topic, names));
    std::cout << app.get_subcommand(topic)->help("pitfall");
    return exit_ok;
}

/// `pitfall matrix` and `pitfall fleet`: scripts (they drive podman, debootstrap and pip, or
/// Slurm's commands) that render their merged reports with this very binary, so they are told
/// its path.
int exec_driver(const CLI::App& command, const pitfall::status_or<std::string>& driver) {
    if (!driver.is_ok())
        return input_error(driver.error());
    const std::string self = self_executable();
    if (!self.empty())
        ::setenv("PITFALL_BINARY", self.c_str(), 1);
    std::vector<std::string> args{"python3", driver.value()};
    for (const auto& arg : command.remaining())
        args.push_back(arg);
    std::vector<char*> child;
    child.reserve(args.size() + 1);
    for (auto& arg : args)
        child.push_back(arg.data());
    child.push_back(nullptr);
    ::execvp("python3", child.data());
    std::cerr << "pitfall: error: cannot start python3 " << driver.value() << ": "
              << std::strerror(errno) << '\n';
    return exit_bad_input;
}

std::optional<std::string> split_filter(case_filter& filter) {
    for (const auto& [flag, values] :
         {std::pair{"--scenario", &filter.scenarios}, std::pair{"--backend", &filter.backends},
          std::pair{"--variant", &filter.variants}, std::pair{"--label", &filter.labels}})
        if (auto bad = split_commas(*values, flag))
            return bad;
    return std::nullopt;
}

int do_list(command_line& cl) {
    if (auto bad = split_filter(cl.run.common.filter))
        return usage_error(*bad, "list");
    auto at = locate(cl.index_flag, cl.expected_flag);
    if (!at.is_ok())
        return input_error(at.error());
    cl.run.common.index_path = at->index;
    cl.run.common.expected_dir = at->expected;
    return list_cases(cl.run.common, cl.as_json);
}

int do_run(command_line& cl) {
    run_options& r = cl.run;
    if (!r.out_dir.empty() && !r.resume_dir.empty())
        return usage_error("--out and --resume exclude each other (--resume names the run folder)",
                           "run");
    if (auto bad = split_filter(r.common.filter))
        return usage_error(*bad, "run");
    auto at = locate(cl.index_flag, cl.expected_flag);
    if (!at.is_ok())
        return input_error(at.error());
    auto expected = required_path(at.value(), at->expected, "baselines folder", "expected",
                                  "give --expected DIR or set PITFALL_EXPECTED");
    auto probe = required_path(at.value(), at->probe, "environment probe", "probe",
                               "and there is no pitfall-probe beside " + self_executable());
    for (const auto* found : {&expected, &probe})
        if (!found->is_ok())
            return input_error(found->error());
    r.common.index_path = at->index;
    r.common.expected_dir = expected.value();
    r.probe_program = probe.value();
    r.runs_dir = at->runs;
    r.argv = cl.argv;
    return run_cases(r);
}

/// The probe's folder: its probe.log is read and then removed with it.
struct temporary_folder {
    std::string path;
    temporary_folder() {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern =
            std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pitfall-doctor-XXXXXX";
        if (::mkdtemp(pattern.data()) != nullptr)
            path = pattern;
    }
    ~temporary_folder() {
        if (path.empty())
            return;
        ::unlink((path + "/probe.log").c_str());
        ::rmdir(path.c_str());
    }
    temporary_folder(const temporary_folder&) = delete;
    temporary_folder& operator=(const temporary_folder&) = delete;
};

/// The CTest resource spec of a fingerprint: a "gpus" slot per device the probe counted, else
/// one named "none" (the CUDA tests then run one at a time and report UNSUPPORTED with the
/// real reason, where CTest would otherwise refuse them for lack of resources).
nlohmann::json resource_spec(const nlohmann::json& fingerprint) {
    const nlohmann::json summary = fingerprint_summary(fingerprint);
    const nlohmann::json count = summary.value("gpu_count", nlohmann::json(0));
    nlohmann::json gpus = nlohmann::json::array();
    const long long n = count.is_number_integer() ? count.get<long long>() : 0;
    for (long long id = 0; id < std::min(n, 1024LL); ++id)
        gpus.push_back({{"id", std::to_string(id)}, {"slots", 1}});
    if (gpus.empty())
        gpus.push_back({{"id", "none"}, {"slots", 1}});
    return {{"version", {{"major", 1}, {"minor", 0}}}, {"local", {{{"gpus", gpus}}}}};
}

int do_resource_spec(command_line& cl) {
    std::string probe = self_executable();
    probe = probe.substr(0, probe.rfind('/') + 1) + "pitfall-probe";
    if (auto at = locate(cl.index_flag); at.is_ok()) {
        if (!at->probe.empty())
            probe = at->probe;
    } else if (!cl.index_flag.empty()) {
        return input_error(at.error());
    }
    if (::access(probe.c_str(), X_OK) != 0)
        return usage_error("no environment probe to run at " + probe +
                               " (build the pitfall_probe target)",
                           "resource-spec");
    temporary_folder logs;
    if (logs.path.empty())
        return usage_error(std::string("cannot make a folder under $TMPDIR: ") +
                           std::strerror(errno));
    const std::string text =
        pitfall::detail::dump_safe(resource_spec(take_fingerprint(probe, logs.path, true)), 2) +
        "\n";
    if (cl.spec_out.empty()) {
        std::cout << text;
        return exit_ok;
    }
    if (auto written = pitfall::write_file_atomically(cl.spec_out, text); !written.is_ok())
        return input_error(written);
    return exit_ok;
}

int do_doctor(command_line& cl) {
    if (!cl.explain.empty()) {
        const auto print = [](const rule_doc& rule) {
            std::cout << rule.id << "\n  checks    " << rule.checks << '\n';
            for (const auto& [label, value] : {std::pair{"why", &rule.why},
                                               {"fix", &rule.fix},
                                               {"case", &rule.reproduced_by},
                                               {"rule", &rule.rule}})
                if (!value->empty())
                    std::cout << "  " << label << std::string(10 - std::strlen(label), ' ')
                              << *value << '\n';
        };
        if (cl.explain == "all") {
            for (const auto& rule : doctor_rules())
                print(rule);
            return exit_ok;
        }
        const auto rule = find_rule(cl.explain);
        if (!rule) {
            std::vector<std::string> ids{"all"};
            for (const auto& r : doctor_rules())
                ids.push_back(r.id);
            return usage_error("--explain " + cl.explain + ": no such finding" +
                                   did_you_mean(cl.explain, ids),
                               "doctor");
        }
        print(*rule);
        return exit_ok;
    }
    // The probe: beside this program (or the index's paths.probe where an index is found).
    std::string probe = self_executable();
    probe = probe.substr(0, probe.rfind('/') + 1) + "pitfall-probe";
    // With an index (a build tree or an install), its probe and its programs' kernel images.
    std::vector<std::pair<std::string, std::string>> programs;
    if (auto at = locate(cl.index_flag); at.is_ok()) {
        if (!at->probe.empty())
            probe = at->probe;
        if (auto index = load_index(at->index); index.is_ok())
            for (const auto& s : index->scenarios)
                programs.emplace_back(s.description.name, s.program);
    } else if (!cl.index_flag.empty()) {
        return input_error(at.error());
    }
    if (::access(probe.c_str(), X_OK) != 0)
        return usage_error("no environment probe to run at " + probe +
                           " (build the pitfall_probe target)");
    temporary_folder logs;
    if (logs.path.empty())
        return usage_error(std::string("cannot make a folder under $TMPDIR: ") +
                           std::strerror(errno));
    auto fingerprint = take_fingerprint(probe, logs.path);
    fingerprint["build_images"] = build_images(programs);
    const diagnosis d = diagnose(fingerprint);
    if (cl.as_json) {
        nlohmann::json out = d.to_json();
        out["facts"] = fingerprint_summary(fingerprint);
        std::cout << pitfall::detail::dump_safe(out, 2) << '\n';
    } else
        std::cout << render_diagnosis(d);
    return d.cuda_usable() ? exit_ok : exit_failed;
}

int do_compare(command_line& cl) {
    if (cl.runs.size() != 2)
        return usage_error("compare needs two run folders: pitfall compare RUN_A RUN_B", "compare");
    cl.compare.run_a = cl.runs[0];
    cl.compare.run_b = cl.runs[1];
    cl.compare.as_json = cl.as_json;
    cl.compare.argv = cl.argv;
    return compare_runs(cl.compare);
}

int do_bless(command_line& cl) {
    if (cl.runs.empty())
        return usage_error("bless needs a run folder: pitfall bless RUN [RUN...]", "bless");
    for (const auto& [flag, values] :
         {std::pair{"--scenario", &cl.bless.scenarios}, std::pair{"--case", &cl.bless.cases}})
        if (auto bad = split_commas(*values, flag))
            return usage_error(*bad, "bless");
    // The names `pitfall list` prints (and CTest's) are the case keys with "pitfall." before.
    for (std::string& key : cl.bless.cases)
        if (key.rfind("pitfall.", 0) == 0)
            key.erase(0, 8);
    auto at = locate(cl.index_flag, cl.expected_flag);
    if (!at.is_ok())
        return input_error(at.error());
    auto expected = required_path(at.value(), at->expected, "baselines folder", "expected",
                                  "give --expected DIR or set PITFALL_EXPECTED");
    if (!expected.is_ok())
        return input_error(expected.error());
    cl.bless.common.index_path = at->index;
    cl.bless.common.expected_dir = expected.value();
    cl.bless.run_dirs = cl.runs;
    return bless_run(cl.bless);
}

int do_report(command_line& cl) {
    report_options& r = cl.report;
    if (cl.merge) {
        if (cl.runs.empty())
            return usage_error("--merge needs two or more run folders (or matrix cell or fleet "
                               "node folders): "
                               "pitfall report --merge RUN RUN... [--out FILE]",
                               "report");
        if (r.format != "html" && r.format != "markdown" && r.format != "json")
            return usage_error("--format " + r.format +
                                   ": a merged report is html or markdown (json: fleet node "
                                   "folders only)",
                               "report");
        r.merge_dirs = cl.runs;
        return report_run(r);
    }
    if (cl.runs.size() != 1)
        return usage_error(
            "report needs one run folder: pitfall report RUN [--format F] [--out FILE]", "report");
    if (r.format != "html" && r.format != "junit" && r.format != "markdown" && r.format != "json")
        return usage_error("--format " + r.format + ": expected html, junit, markdown or json",
                           "report");
    r.run_dir = cl.runs[0];
    return report_run(r);
}

void build_app(CLI::App& app, command_line& cl) {
    app.require_subcommand(0, 1); // one command; later words are that command's
    app.formatter(std::make_shared<help_formatter>());
    app.footer(overview_footer);
    app.add_flag("--version", cl.version, "the version (as `pitfall version`)");
    add_list(app, cl);
    add_run(app, cl);
    add_compare(app, cl);
    add_bless(app, cl);
    add_report(app, cl);
    add_others(app, cl);
    for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        sub->group("Commands");
        sub->allow_extras(); // unknown options come back to reject_leftovers, said our way
    }
}
} // namespace

/// SIGXFSZ's default ends the process at the file size limit mid-write; caught, the write
/// returns EFBIG and the run says so. A handler, not SIG_IGN: exec resets it, so the cases
/// keep the default.
static void on_file_too_large(int) {}

int main(int argc, char** argv) try {
    // Started with 0-2 closed, the first file opened (a run's .lock or results.jsonl) would be
    // descriptor 1, and the progress lines would be written into it.
    if (!pitfall::ensure_standard_descriptors())
        return pitfall::runner::exit_bad_input;
    // What pitfall prints can carry text from outside (reasons, names, paths): no escape
    // sequence in it reaches a terminal raw.
    make_standard_output_visible();
    struct sigaction xfsz {};
    xfsz.sa_handler = on_file_too_large;
    sigemptyset(&xfsz.sa_mask);
    ::sigaction(SIGXFSZ, &xfsz, nullptr);
    command_line cl;
    cl.argv.assign(argv, argv + argc);
    CLI::App app{description, "pitfall"};
    build_app(app, cl);
    if (argc < 2) {
        std::cerr << app.help();
        return exit_bad_input;
    }
    if (const int rc = check_command(app, argv[1]); rc != exit_ok)
        return rc;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return exit_ok;
    } catch (const CLI::ParseError& e) {
        const auto chosen = app.get_subcommands();
        return usage_error(e.what(), chosen.empty() ? "" : chosen.front()->get_name());
    }
    const auto chosen = app.get_subcommands();
    if (cl.version || chosen.front()->get_name() == "version") {
        std::cout << "pitfall " << PITFALL_VERSION << '\n'; // --version, or `pitfall version`
        return exit_ok;
    }
    CLI::App& sub = *chosen.front();
    const std::string& command = sub.get_name();
    if (command == "matrix")
        return exec_driver(sub, locate_matrix_driver());
    if (command == "fleet")
        return exec_driver(sub, locate_fleet_driver());
    if (const int rc = reject_leftovers(sub); rc != exit_ok)
        return rc;
    if (const int rc = reject_empty_values(sub); rc != exit_ok)
        return rc;
    if (command == "help")
        return do_help(app, cl.help_topic);
    if (command == "list")
        return do_list(cl);
    if (command == "doctor")
        return do_doctor(cl);
    if (command == "resource-spec")
        return do_resource_spec(cl);
    if (command == "run")
        return do_run(cl);
    if (command == "compare")
        return do_compare(cl);
    if (command == "bless")
        return do_bless(cl);
    return do_report(cl);
} catch (const std::exception& e) { // a bug or the system (memory): said, never an abort
    std::cerr << "pitfall: error: " << e.what() << '\n';
    return exit_bad_input;
}
