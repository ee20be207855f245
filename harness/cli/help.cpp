// `pitfall help [COMMAND]`, and the layout every help text shares.
#include "help.hpp"

#include "commands.hpp"

#include "util/suggest.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace pitfall::cli {
namespace {

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

void declare_help(CLI::App& sub, command_line& cl) {
    sub.add_option("COMMAND", cl.help_topic, "the command to explain");
}

int run_help(const CLI::App& sub, command_line& cl) {
    const CLI::App& app = *sub.get_parent();
    const std::string& topic = cl.help_topic;
    if (topic.empty()) { // app.help() would describe the command chosen: `help` itself
        std::cout << app.get_formatter()->make_help(&app, "pitfall", CLI::AppFormatMode::Normal);
        return exit_ok;
    }
    const std::vector<std::string> names = command_names(app);
    if (std::find(names.begin(), names.end(), topic) == names.end())
        return usage_error("unknown command '" + topic + "'" + runner::did_you_mean(topic, names));
    std::cout << app.get_subcommand(topic)->help("pitfall");
    return exit_ok;
}

} // namespace

void describe_program(CLI::App& app) {
    app.description(description);
    app.formatter(std::make_shared<help_formatter>());
    app.footer(overview_footer);
}

command help_command() {
    return {"help", "the commands, or one command's options", declare_help, run_help};
}

} // namespace pitfall::cli
