// `pitfall export --openmetrics`: a run folder or a gate document as Prometheus metrics, for
// node_exporter's textfile collector (report/openmetrics.hpp renders them).
#include "commands.hpp"

#include "report/openmetrics.hpp"

#include "pitfall/detail/result_file.hpp"

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include <unistd.h>

namespace pitfall::cli {
namespace {

/// What `pitfall export` alone takes (command_line holds what commands share).
struct export_flags {
    bool openmetrics = false;
    std::string input;
    std::string out;
};

export_flags& export_options() {
    static export_flags flags;
    return flags;
}

void declare_export(CLI::App& sub, command_line&) {
    export_flags& flags = export_options();
    sub.add_flag("--openmetrics", flags.openmetrics,
                 "Prometheus text exposition format 0.0.4, as node_exporter's\n"
                 "textfile collector reads it (the one format today; required)");
    sub.add_option("RUN_OR_GATE_JSON", flags.input,
                   "a run folder (`pitfall run --out`), or a gate document\n"
                   "(`pitfall gate --json`, schema pitfall.gate/1): told apart by content");
    sub.add_option("--out", flags.out,
                   "write here, atomically and mode 0644 (a .prom file in the\n"
                   "textfile collector's folder); default: standard output")
        ->type_name("FILE");
    sub.footer(R"(Every metric family and its labels: docs/metrics.md.

exit status:
  0    written
  2    bad usage, an input that is neither a run folder nor a gate document (or is damaged),
       or the output could not be written (nothing half-written is left)

examples:
  pitfall export --openmetrics runs/nightly
  pitfall export --openmetrics runs/nightly --out /var/lib/prometheus/node-exporter/pitfall.prom
  pitfall gate --json gate.json; pitfall export --openmetrics gate.json --out DIR/pitfall-gate.prom)");
}

/// All of `text` to standard output, or why not (a full disk behind it, an I/O error).
int write_standard_output(const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            std::cerr << "pitfall: error: standard output: " << std::strerror(errno) << '\n';
            return exit_bad_input;
        }
        done += static_cast<std::size_t>(n);
    }
    return exit_ok;
}

int run_export(const CLI::App&, command_line&) {
    const export_flags& flags = export_options();
    if (!flags.openmetrics)
        return usage_error("export needs a format: pitfall export --openmetrics RUN_OR_GATE_JSON",
                           "export");
    if (flags.input.empty())
        return usage_error(
            "export needs a run folder or a gate document: pitfall export --openmetrics "
            "RUN_OR_GATE_JSON [--out FILE]",
            "export");
    auto text = runner::metrics_of(flags.input);
    if (!text.is_ok())
        return input_error(text.error());
    if (flags.out.empty() || flags.out == "-")
        return write_standard_output(*text);
    // 0644 whatever the umask: node_exporter reads the file as its own user.
    if (auto written = write_file_atomically(flags.out, *text, 0644); !written.is_ok()) {
        std::cerr << "pitfall: error: --out " << flags.out << ": " << written.message() << '\n';
        return exit_bad_input;
    }
    return exit_ok;
}

} // namespace

command export_command() {
    return {"export",
            "a run folder or a gate document as Prometheus metrics\n"
            "(--openmetrics), for node_exporter's textfile collector",
            declare_export, run_export};
}

} // namespace pitfall::cli
