// The `pitfall` command: list and run failure scenarios, each case in its own process.
#include "report.hpp"
#include "runner.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace {
using namespace pitfall::runner;

constexpr const char* usage_text = R"(usage: pitfall <command> [options]

Reproduce, measure and regression-test the failures numeric code meets moving from CPU to GPU.
Each case (scenario x backend x variant) runs in its own process and is judged against the
baselines in expected/.

commands:
  list [--json] [filters]        every case with its labels
  run [filters] [options]        run cases, record and judge them
  compare RUN_A RUN_B [--json] [--timing-floor F]
                                 case by case, what changed from run A to run B (outcome, time,
                                 memory, numerics) and the verdict each change would get
  bless RUN [RUN...] [--scenario S] [--case KEY] [--profile P] [--dry-run]
                                 write a run's observations into expected/ (prints the diff);
                                 with several runs of one machine, each case from the run
                                 with the lowest median time (the least disturbed)
  report RUN [--format html|junit|markdown|json] [--out FILE]
                                 render a run folder's results.jsonl (default: HTML on
                                 standard output); `run` writes all four into the run folder
  report --merge RUN RUN... [--format html|markdown] [--out FILE]
                                 runs side by side (a CUDA/cuDNN/driver matrix): each cell's
                                 verdict and outcome per case, and what differs between cells
  matrix list|images|run [...]   the CUDA/cuDNN matrix of ci/matrix.json in containers: build or
                                 reuse each cell's image, build and run pitfall in it, merge the
                                 cells into one report (`pitfall matrix --help`)
  help                           this text
  version                        the version

filters (repeatable, or comma-separated):
  --scenario S   --backend cpu|cuda   --variant V   --label L (a case needs every label)

run options:
  --out DIR          run folder (default: reports/runs/<UTC timestamp>)
  --resume DIR       complete an interrupted run: only the cases not finished there run
  --replace          start afresh when --out already holds a run
  --profile P        judge against expected/P instead of the profile the fingerprint picks
  --samples N        timed repetitions per case (odd; default: each scenario's, 9)
  --timeout-scale X  multiply every case's timeout (slow machines, sanitizers)
  --timing-floor F   smallest relative slowdown that can be PERF_REGRESSION (default 0.10)
  --remeasure-pause S  seconds before re-measuring an AMBIGUOUS or PERF_REGRESSION timing in a
                     new process (twice that before the third; default 2)
  --skip-code N      exit N when every selected case is UNSUPPORTED (CTest SKIP_RETURN_CODE)

compare: run B is judged against run A's observations as if A were the baseline: outcomes by
  name, tracked device bytes exactly, peak RSS within 25%, checks; times (Mann-Whitney U and a
  bootstrap interval of the median ratio) only when both runs share a fingerprint id.

bless options:
  --scenario S       only this scenario's cases (repeatable)
  --case KEY         only this case (cpu.float64_inputs.reproduce; repeatable); a crashed or
                     timed-out case is blessed only when named so (an expected SIGSEGV)
  --profile P        write into expected/P (default: the profile that judged each case)
  --dry-run          print the diff, write nothing
  Each entry is marked observed with the run's fingerprint and today's date; files are written
  whole and renamed into place. A run made with PITFALL_INJECT is refused.

global options:
  --index FILE       scenario index (default: the build's pitfall-index.json; env PITFALL_INDEX)
  --expected DIR     baselines (default: the source tree's expected/; env PITFALL_EXPECTED)

A run folder holds results.jsonl (one judged case a line, written as each finishes),
summary.json, fingerprint.json, cases/<case>.json and logs/<case>.log, and the reports rendered
from results.jsonl at the end: report.json, junit.xml, summary.md and report.html.

verdicts: PASS, FAIL, NUMERIC_MISMATCH, MEM_REGRESSION, PERF_REGRESSION, CRASH, TIMEOUT (these
fail the run; a timing verdict is taken on the fastest of up to three processes), AMBIGUOUS (a
timing neither clearly the same nor clearly slower: a warning), UNSUPPORTED (with the reason), NO_BASELINE (a warning).

environment:
  PITFALL_INJECT     fault injection for testing the verdicts: kind:case:argument, comma-
                     separated; slowdown:<case>:1.2, extra_device_bytes:<case>:4M,
                     outcome:<case>:cudaErrorLaunchFailure (<case> = cpu.float64_inputs.remedy
                     or *). Inert unless set; injected results say so and cannot be blessed.

exit status:
  0    every case met its baseline (UNSUPPORTED and NO_BASELINE do not fail a run)
  1    some case did not (compare: some change would fail)
  2    bad usage or bad input (unknown flag or name, malformed file, unwritable folder)
  130  interrupted: running cases were ended, finished cases kept (--resume completes it)
)";

int usage_error(const std::string& what) {
    std::cerr << "pitfall: error: " << what << " (see `pitfall help`)\n";
    return exit_bad_input;
}

void split_into(const std::string& value, std::vector<std::string>& out) {
    std::stringstream in(value);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty())
            out.push_back(item);
}

bool parse_int(const std::string& text, int& out) {
    try {
        std::size_t used = 0;
        out = std::stoi(text, &used);
        return used == text.size();
    } catch (const std::exception&) {
        return false;
    }
}
bool parse_fraction(const std::string& text, double& out) {
    try {
        std::size_t used = 0;
        const double x = std::stod(text, &used);
        if (used != text.size() || !(x >= 0 && x < 1))
            return false;
        out = x;
        return true;
    } catch (const std::exception&) {
        return false;
    }
}
} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        std::cerr << usage_text;
        return exit_bad_input;
    }
    const std::string command = args[0];
    if (command == "help" || command == "--help" || command == "-h") {
        std::cout << usage_text;
        return exit_ok;
    }
    if (command == "version" || command == "--version") {
        std::cout << "pitfall " << PITFALL_VERSION << '\n';
        return exit_ok;
    }
    if (command == "matrix") {
        // The matrix driver is a script (it drives podman or docker, debootstrap and pip); it
        // renders the merged report with this very binary.
        const char* env_driver = std::getenv("PITFALL_MATRIX_DRIVER");
        const std::string driver = env_driver != nullptr ? env_driver : PITFALL_DEFAULT_MATRIX_DRIVER;
        char self[4096] = {};
        if (const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1); n > 0)
            ::setenv("PITFALL_BINARY", self, 1);
        std::vector<char*> child{const_cast<char*>("python3"), const_cast<char*>(driver.c_str())};
        for (std::size_t i = 1; i < args.size(); ++i)
            child.push_back(argv[i + 1]);
        child.push_back(nullptr);
        ::execvp("python3", child.data());
        std::cerr << "pitfall: error: cannot start python3 " << driver << ": " << std::strerror(errno) << '\n';
        return exit_bad_input;
    }
    if (command == "compare") {
        compare_options c;
        c.argv.assign(argv, argv + argc);
        std::vector<std::string> runs;
        for (std::size_t i = 1; i < args.size(); ++i) {
            if (args[i] == "--help" || args[i] == "-h") {
                std::cout << usage_text;
                return exit_ok;
            }
            if (args[i] == "--json")
                c.as_json = true;
            else if (args[i] == "--timing-floor" && i + 1 < args.size()) {
                if (!parse_fraction(args[++i], c.timing_floor))
                    return usage_error("--timing-floor " + args[i] + ": expected a fraction in [0, 1) (0.10 = 10%)");
            } else if ((args[i] == "--index" || args[i] == "--expected") && i + 1 < args.size())
                ++i; // global options: accepted everywhere, unused here (the runs carry their facts)
            else if (args[i].rfind("--", 0) == 0)
                return usage_error("unknown option '" + args[i] + "' for `pitfall compare`");
            else
                runs.push_back(args[i]);
        }
        if (runs.size() != 2)
            return usage_error("compare needs two run folders: pitfall compare RUN_A RUN_B");
        c.run_a = runs[0];
        c.run_b = runs[1];
        return compare_runs(c);
    }
    if (command == "report") {
        report_options r;
        std::vector<std::string> runs;
        bool merge = false;
        for (std::size_t i = 1; i < args.size(); ++i) {
            const std::string& flag = args[i];
            if (flag == "--help" || flag == "-h") {
                std::cout << usage_text;
                return exit_ok;
            }
            if (flag == "--merge") {
                merge = true;
                continue;
            }
            if (flag == "--format" || flag == "--out") {
                if (i + 1 >= args.size())
                    return usage_error(flag + " needs a value");
                (flag == "--format" ? r.format : r.out) = args[++i];
            } else if ((flag == "--index" || flag == "--expected") && i + 1 < args.size())
                ++i; // global options: accepted everywhere, unused here (the run carries its facts)
            else if (flag.rfind("--", 0) == 0)
                return usage_error("unknown option '" + flag + "' for `pitfall report`");
            else
                runs.push_back(flag);
        }
        if (merge) {
            if (runs.empty())
                return usage_error("--merge needs two or more run folders (or matrix cell folders): pitfall report --merge RUN RUN... [--out FILE]");
            if (r.format != "html" && r.format != "markdown")
                return usage_error("--format " + r.format + ": a merged report is html or markdown");
            r.merge_dirs = runs;
            return report_run(r);
        }
        if (runs.size() != 1)
            return usage_error("report needs one run folder: pitfall report RUN [--format F] [--out FILE]");
        if (r.format != "html" && r.format != "junit" && r.format != "markdown" && r.format != "json")
            return usage_error("--format " + r.format + ": expected html, junit, markdown or json");
        r.run_dir = runs[0];
        return report_run(r);
    }
    if (command == "bless") {
        bless_options b;
        const char* env_index = std::getenv("PITFALL_INDEX");
        const char* env_expected = std::getenv("PITFALL_EXPECTED");
        b.common.index_path = env_index != nullptr ? env_index : PITFALL_DEFAULT_INDEX;
        b.common.expected_dir = env_expected != nullptr ? env_expected : PITFALL_DEFAULT_EXPECTED;
        for (std::size_t i = 1; i < args.size(); ++i) {
            const std::string& flag = args[i];
            if (flag == "--help" || flag == "-h") {
                std::cout << usage_text;
                return exit_ok;
            }
            if (flag == "--dry-run") {
                b.dry_run = true;
                continue;
            }
            if (flag.rfind("--", 0) != 0) {
                b.run_dirs.push_back(flag);
                continue;
            }
            if (flag != "--scenario" && flag != "--case" && flag != "--profile" && flag != "--index" &&
                flag != "--expected")
                return usage_error("unknown option '" + flag + "' for `pitfall bless`");
            if (i + 1 >= args.size())
                return usage_error(flag + " needs a value");
            const std::string value = args[++i];
            if (flag == "--scenario")
                split_into(value, b.scenarios);
            else if (flag == "--case")
                split_into(value, b.cases);
            else if (flag == "--profile")
                b.profile = value;
            else if (flag == "--index")
                b.common.index_path = value;
            else
                b.common.expected_dir = value;
        }
        if (b.run_dirs.empty())
            return usage_error("bless needs a run folder: pitfall bless RUN [RUN...]");
        return bless_run(b);
    }
    if (command != "list" && command != "run")
        return usage_error("unknown command '" + command + "'");

    run_options options;
    options.argv.assign(argv, argv + argc);
    common_options& common = options.common;
    const char* env_index = std::getenv("PITFALL_INDEX");
    const char* env_expected = std::getenv("PITFALL_EXPECTED");
    common.index_path = env_index != nullptr ? env_index : PITFALL_DEFAULT_INDEX;
    common.expected_dir = env_expected != nullptr ? env_expected : PITFALL_DEFAULT_EXPECTED;
    // The probe beside this binary (a relocated build folder works), else where it was built.
    options.probe_program = PITFALL_DEFAULT_PROBE;
    char self[4096] = {};
    if (const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1); n > 0) {
        const std::string beside = std::string(self, static_cast<std::size_t>(n));
        const std::string candidate = beside.substr(0, beside.rfind('/') + 1) + "pitfall-probe";
        if (::access(candidate.c_str(), X_OK) == 0)
            options.probe_program = candidate;
    }
    bool as_json = false;

    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string& flag = args[i];
        if (flag == "--help" || flag == "-h") {
            std::cout << usage_text;
            return exit_ok;
        }
        if (flag == "--json" && command == "list") {
            as_json = true;
            continue;
        }
        if (flag == "--replace" && command == "run") {
            options.replace = true;
            continue;
        }
        const bool takes_value = flag == "--scenario" || flag == "--backend" || flag == "--variant" ||
                                 flag == "--label" || flag == "--index" || flag == "--expected" ||
                                 (command == "run" && (flag == "--out" || flag == "--resume" || flag == "--profile" ||
                                                       flag == "--samples" || flag == "--timeout-scale" ||
                                                       flag == "--timing-floor" || flag == "--remeasure-pause" ||
                                                       flag == "--skip-code"));
        if (!takes_value)
            return usage_error("unknown option '" + flag + "' for `pitfall " + command + "`");
        if (i + 1 >= args.size())
            return usage_error(flag + " needs a value");
        const std::string value = args[++i];
        if (flag == "--scenario")
            split_into(value, common.filter.scenarios);
        else if (flag == "--backend")
            split_into(value, common.filter.backends);
        else if (flag == "--variant")
            split_into(value, common.filter.variants);
        else if (flag == "--label")
            split_into(value, common.filter.labels);
        else if (flag == "--index")
            common.index_path = value;
        else if (flag == "--expected")
            common.expected_dir = value;
        else if (flag == "--out")
            options.out_dir = value;
        else if (flag == "--resume")
            options.resume_dir = value;
        else if (flag == "--profile")
            options.profile_override = value;
        else if (flag == "--samples") {
            int n = 0;
            if (!parse_int(value, n) || n < 1 || n % 2 == 0)
                return usage_error("--samples " + value + ": expected an odd number >= 1");
            options.samples = n;
        } else if (flag == "--skip-code") {
            int n = 0;
            if (!parse_int(value, n) || n < 0 || n > 255)
                return usage_error("--skip-code " + value + ": expected 0..255");
            options.skip_code = n;
        } else if (flag == "--timing-floor") {
            if (!parse_fraction(value, options.timing_floor))
                return usage_error("--timing-floor " + value + ": expected a fraction in [0, 1) (0.10 = 10%)");
        } else if (flag == "--remeasure-pause") {
            try {
                std::size_t used = 0;
                options.remeasure_pause = std::stod(value, &used);
                if (used != value.size() || !(options.remeasure_pause >= 0) || options.remeasure_pause > 600)
                    throw std::invalid_argument(value);
            } catch (const std::exception&) {
                return usage_error("--remeasure-pause " + value + ": expected seconds in [0, 600]");
            }
        } else if (flag == "--timeout-scale") {
            try {
                std::size_t used = 0;
                options.timeout_scale = std::stod(value, &used);
                if (used != value.size() || options.timeout_scale <= 0)
                    throw std::invalid_argument(value);
            } catch (const std::exception&) {
                return usage_error("--timeout-scale " + value + ": expected a positive number");
            }
        }
    }
    if (!options.out_dir.empty() && !options.resume_dir.empty())
        return usage_error("--out and --resume exclude each other (--resume names the run folder)");
    if (command == "list")
        return list_cases(common, as_json);
    return run_cases(options);
}
