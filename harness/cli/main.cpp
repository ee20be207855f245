// The `pitfall` command: list and run failure scenarios, each case in its own process.
// The command line is CLI11's; each command declares its options and turns them into the
// runner's option structs in its own file (commands.cpp lists them). Only main() and the
// commands' actions decide an exit code.
#include "commands.hpp"
#include "help.hpp"

#include "util/suggest.hpp"
#include "util/visible_output.hpp"

#include "pitfall/detail/process.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <csignal>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace pitfall::cli {
namespace {

void build_app(CLI::App& app, command_line& cl) {
    app.require_subcommand(0, 1); // one command; later words are that command's
    describe_program(app);
    app.add_flag("--version", cl.version, "the version (as `pitfall version`)");
    for (const command& c : commands()) {
        CLI::App* sub = app.add_subcommand(c.name, c.summary);
        c.declare(*sub, cl);
        sub->group("Commands");
        sub->allow_extras(); // unknown options come back to reject_leftovers, said our way
    }
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
        return usage_error("unknown option '" + first + "'" + runner::did_you_mean(first, flags));
    return usage_error("unknown command '" + first + "'" + runner::did_you_mean(first, names));
}

/// The exit code where the command line ends here (no command, an unknown one, help asked
/// for, a value CLI11 or a parser refused); nothing where a command is to run.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
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
    return std::nullopt;
}

/// The chosen command, once its leftover words and empty values are refused (where it checks
/// them); --version is `pitfall version`, whatever command follows it.
int dispatch(const CLI::App& app, command_line& cl) {
    const CLI::App& sub =
        cl.version ? *app.get_subcommand("version") : *app.get_subcommands().front();
    for (const command& c : commands()) {
        if (sub.get_name() != c.name)
            continue;
        if (c.checks_arguments) {
            if (const int rc = reject_leftovers(sub); rc != exit_ok)
                return rc;
            if (const int rc = reject_empty_values(sub); rc != exit_ok)
                return rc;
        }
        return c.run(sub, cl);
    }
    // CLI11 parses only the commands declared from the same list: not reached.
    return usage_error("unknown command '" + sub.get_name() + "'");
}

/// SIGXFSZ's default ends the process at the file size limit mid-write; caught, the write
/// returns EFBIG and the run says so. A handler, not SIG_IGN: exec resets it, so the cases
/// keep the default.
void on_file_too_large(int) {}

void catch_file_too_large() {
    struct sigaction xfsz {};
    xfsz.sa_handler = on_file_too_large;
    sigemptyset(&xfsz.sa_mask);
    ::sigaction(SIGXFSZ, &xfsz, nullptr);
}

} // namespace
} // namespace pitfall::cli

int main(int argc, char** argv) try {
    using namespace pitfall::cli;
    // Started with 0-2 closed, the first file opened (a run's .lock or results.jsonl) would be
    // descriptor 1, and the progress lines would be written into it.
    if (!pitfall::ensure_standard_descriptors())
        return exit_bad_input;
    // What pitfall prints can carry text from outside (reasons, names, paths): no escape
    // sequence in it reaches a terminal raw.
    pitfall::runner::make_standard_output_visible();
    catch_file_too_large();
    command_line cl;
    cl.argv.assign(argv, argv + argc);
    CLI::App app{"", "pitfall"};
    build_app(app, cl);
    if (const auto ended = parse_command_line(app, argc, argv))
        return *ended;
    return dispatch(app, cl);
} catch (const std::exception& e) { // a bug or the system (memory): said, never an abort
    std::cerr << "pitfall: error: " << e.what() << '\n';
    return pitfall::runner::exit_bad_input;
}
