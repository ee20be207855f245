// What every command of `pitfall` shares: the struct its options write into, the messages of a
// usage or input error (exit 2), the parsers of flag values, and the option groups several
// commands declare alike (--index/--expected, the case filters).
#pragma once

#include "gate/gate.hpp"
#include "judge/bless.hpp"
#include "judge/compare.hpp"
#include "report/report.hpp"
#include "run/runner.hpp"

#include "pitfall/status.hpp"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace pitfall::cli {

using runner::exit_bad_input;
using runner::exit_failed;
using runner::exit_ok;

/// What the command line sets; the subcommands' options write straight into it.
struct command_line {
    std::string index_flag;
    std::string expected_flag;
    bool as_json = false;          ///< list, compare, doctor
    bool merge = false;            ///< report --merge
    bool version = false;          ///< --version
    std::vector<std::string> runs; ///< the run folders of compare, bless and report
    std::string help_topic;
    std::string explain;  ///< doctor --explain
    std::string spec_out; ///< resource-spec --out
    runner::run_options run;
    runner::compare_options compare;
    runner::bless_options bless;
    runner::report_options report;
    runner::gate_options gate;
    bool slurm_prolog = false;       ///< gate --slurm-prolog
    bool slurm_health_check = false; ///< gate --slurm-health-check
    std::vector<std::string> argv;   ///< recorded in a run's header
};

/// "pitfall: error: WHAT (see `pitfall help COMMAND`)" on standard error; exit 2.
int usage_error(const std::string& what, const std::string& command = "");

/// "pitfall: error: MESSAGE" on standard error; exit 2.
int input_error(const pitfall::status& s);

/// Splits "a,b" (the filters are repeatable and comma-separated). An empty item ("a,,b", "a,",
/// "") is an error naming the flag: it would select nothing, or everything, by accident.
std::optional<std::string> split_commas(std::vector<std::string>& values, const std::string& flag);

/// A case named as `pitfall list` and CTest print it ("pitfall.cpu.x.v") or as records and
/// history do ("cpu.x.v"): the case key, either way.
std::string case_key_from_user(std::string name);

/// split_commas over --scenario, --backend, --variant and --label.
std::optional<std::string> split_filter(runner::case_filter& filter);

// The flag values a command accepts: false (and `out` untouched) for anything else.
bool parse_samples(const std::string& text, std::optional<int>& out);
bool parse_jobs(const std::string& text, int& out);
bool parse_exit_code(const std::string& text, std::optional<int>& out);
bool parse_fraction(const std::string& text, double& out);
bool parse_level(const std::string& text, double& out);
bool parse_timings_mode(const std::string& text, bool& judge);
bool parse_correction(const std::string& text, runner::timing_correction& out);
bool parse_scale(const std::string& text, double& out);
bool parse_ratio_tolerance(const std::string& text, double& out);
bool parse_pause(const std::string& text, double& out);

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
void add_locations(CLI::App& sub, command_line& cl, bool used);

/// A repeatable, comma-separated filter in the "Filters" group.
void add_filter(CLI::App& sub, const std::string& flag, std::vector<std::string>& into,
                const std::string& metavar, const std::string& help);

/// --scenario, --backend, --variant and --label.
void add_filters(CLI::App& sub, runner::case_filter& filter);

/// The names of `app`'s commands, in the order they were declared.
std::vector<std::string> command_names(const CLI::App& app);

/// Leftovers of a parse (the subcommands allow extras so that the message can be ours): an
/// unknown option with the nearest known one, or an argument the command takes none of.
int reject_leftovers(const CLI::App& sub);

/// A flag given an empty value (`--out ""`, `--profile=`): exit 2 naming it. Left as it is, an
/// empty value reads as the flag left out (a run folder chosen by the clock, the profile the
/// fingerprint picks), which is not what was asked.
int reject_empty_values(const CLI::App& sub);

} // namespace pitfall::cli
