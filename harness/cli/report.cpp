// `pitfall report`: render a run folder's results, or several runs side by side (--merge).
#include "commands.hpp"

#include "report/formats.hpp"
#include "report/report.hpp"

#include <optional>
#include <string>

namespace pitfall::cli {
namespace {

/// The formats that render runs or matrix cells side by side (`report --merge`).
bool renders_merged(const runner::report_format& format) {
    return format.render_matrix != nullptr;
}
/// The formats that render fleet node folders side by side and no other merge.
bool renders_fleet_only(const runner::report_format& format) {
    return format.render_fleet != nullptr && format.render_matrix == nullptr;
}

/// --format's help: every format of report/formats.hpp, and those a merge takes.
std::string format_help() {
    return runner::report_format_names() +
           " (merged: " + runner::report_format_names(renders_merged) + ", and " +
           runner::report_format_names(renders_fleet_only) + " for fleet node folders; default " +
           runner::report_options{}.format + ")";
}

/// Why `format` renders no single run (`merged` false) or no runs side by side (true: a
/// fleet-only format is let through, the library tells fleet node folders from runs); nothing
/// where it does. Said before any run is read.
std::optional<std::string> format_refusal(const std::string& format, bool merged) {
    const runner::report_format* found = runner::find_report_format(format);
    if (!merged) {
        if (found != nullptr)
            return std::nullopt;
        return "--format " + format + ": expected " + runner::report_format_names();
    }
    if (found != nullptr && (found->render_matrix != nullptr || found->render_fleet != nullptr))
        return std::nullopt;
    return "--format " + format + ": a merged report is " +
           runner::report_format_names(renders_merged) + " (" +
           runner::report_format_names(renders_fleet_only) + ": fleet node folders only)";
}

void declare_report(CLI::App& sub, command_line& cl) {
    sub.add_option("RUN", cl.runs,
                   "the run folder (with --merge: two or more run folders, matrix cell\n"
                   "folders, or fleet node folders)");
    sub.add_flag("--merge", cl.merge,
                 "runs side by side: each cell's verdict and outcome per case, and\n"
                 "what differs between cells. Fleet node folders (node.json, run/,\n"
                 "doctor.json: `pitfall fleet run`) are grouped by fingerprint (GPU,\n"
                 "driver, CUDA, cuDNN): which node differs from the rest of its group\n"
                 "first, then each node's job outcome, the groups, every case");
    sub.add_option("--format", cl.report.format, format_help())->type_name("F");
    sub.add_option("--out", cl.report.out, "write here instead of standard output")
        ->type_name("FILE");
    add_locations(sub, cl, false);
    sub.footer(R"(`pitfall run` writes all four formats into the run folder.

examples:
  pitfall report runs/a > report.html
  pitfall report runs/a --format junit --out junit.xml
  pitfall report --merge cells/cuda12.4 cells/cuda13.0 --format markdown
  pitfall report --merge fleet/nodes/* --format markdown --out fleet/fleet.md
  pitfall report --merge fleet/nodes/* --format json --out fleet/fleet-report.json)");
}

int run_report(const CLI::App&, command_line& cl) {
    runner::report_options& r = cl.report;
    if (cl.merge) {
        if (cl.runs.empty())
            return usage_error("--merge needs two or more run folders (or matrix cell or fleet "
                               "node folders): "
                               "pitfall report --merge RUN RUN... [--out FILE]",
                               "report");
        if (auto refused = format_refusal(r.format, true))
            return usage_error(*refused, "report");
        r.merge_dirs = cl.runs;
        return runner::report_run(r);
    }
    if (cl.runs.size() != 1)
        return usage_error(
            "report needs one run folder: pitfall report RUN [--format F] [--out FILE]", "report");
    if (auto refused = format_refusal(r.format, false))
        return usage_error(*refused, "report");
    r.run_dir = cl.runs[0];
    return runner::report_run(r);
}

} // namespace

command report_command() {
    return {"report",
            "render a run folder's results.jsonl (default: HTML on standard\n"
            "output); --merge: runs side by side (a CUDA/cuDNN/driver matrix,\n"
            "or a fleet's nodes)",
            declare_report, run_report};
}

} // namespace pitfall::cli
