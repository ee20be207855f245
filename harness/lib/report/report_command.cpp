// `pitfall run` writing its reports into the run folder, and `pitfall report` rendering one.
#include "report/formats.hpp"
#include "report/matrix_view.hpp"

#include "pitfall/detail/json_file.hpp"

#include <algorithm>
#include <iostream>
#include <unistd.h>

namespace pitfall::runner {

status write_reports(const run_data& run) {
    for (const auto& format : report_formats())
        PITFALL_TRY(
            write_file_atomically(run.dir + "/" + format.file_name, format.render_run(run)));
    return status::ok();
}

namespace {
/// A rendered report to standard output ("" or "-") or, whole and atomically, to `out`.
int emit(const std::string& text, const std::string& out) {
    if (out.empty() || out == "-") {
        std::cout << text;
        return exit_ok;
    }
    if (auto written = write_file_atomically(out, text); !written.is_ok()) {
        std::cerr << "pitfall: error: --out " << out << ": " << written.message() << '\n';
        return exit_bad_input;
    }
    std::cerr << "pitfall: wrote " << out << '\n';
    return exit_ok;
}

/// `--merge DIR...`: fleet node folders make a fleet report, of one node too; runs and matrix
/// cells a matrix (one matrix cell is a matrix, one plain run is not).
int report_merged(const report_options& options, const report_format& format) {
    std::vector<run_data> runs;
    for (const auto& dir : options.merge_dirs) {
        auto one = load_cell_or_run(dir);
        if (!one.is_ok()) {
            std::cerr << "pitfall: error: --merge: " << one.error().message() << '\n';
            return exit_bad_input;
        }
        runs.push_back(std::move(one).value());
    }
    // Mixed with cells or runs, node folders would be compared across unlike things.
    const auto is_node = [](const run_data& r) { return r.node.is_object(); };
    if (std::any_of(runs.begin(), runs.end(), is_node)) {
        const auto other = std::find_if_not(runs.begin(), runs.end(), is_node);
        if (other != runs.end()) {
            const auto node = std::find_if(runs.begin(), runs.end(), is_node);
            std::cerr << "pitfall: error: --merge: " << node->dir
                      << " is a fleet node folder (node.json) but " << other->dir
                      << " is not: merge fleet node folders only with each other\n";
            return exit_bad_input;
        }
        if (format.render_fleet == nullptr) {
            std::cerr << "pitfall: error: --format " << format.name
                      << ": fleet node folders merge as "
                      << report_format_names(
                             [](const report_format& f) { return f.render_fleet != nullptr; })
                      << '\n';
            return exit_bad_input;
        }
        return emit(format.render_fleet(runs), options.out);
    }
    if (format.render_matrix == nullptr) {
        std::cerr << "pitfall: error: --format " << format.name << ": a merged report is "
                  << format.title << " for fleet node folders only; merge runs or matrix cells as "
                  << report_format_names(
                         [](const report_format& f) { return f.render_matrix != nullptr; })
                  << '\n';
        return exit_bad_input;
    }
    if (runs.size() < 2 && !report_parts::any_cell(runs)) {
        std::cerr << "pitfall: error: --merge needs two or more run folders, or matrix cell "
                     "or fleet node folders (see `pitfall help report`)\n";
        return exit_bad_input;
    }
    return emit(format.render_matrix(runs), options.out);
}
} // namespace

int report_run(const report_options& options) {
    const report_format* format = find_report_format(options.format);
    if (format == nullptr) {
        std::cerr << "pitfall: error: --format " << options.format << ": expected "
                  << report_format_names() << '\n';
        return exit_bad_input;
    }
    // A page for a browser poured into a terminal is a screenful of markup. An explicit
    // "--out -" (or a pipe) still gets it.
    if (!format->for_terminal && options.out.empty() && ::isatty(STDOUT_FILENO) == 1) {
        std::cerr << "pitfall: error: the " << format->title
                  << " report is not written to a terminal: give --out FILE (or --out - to "
                     "print it), or --format markdown to read it here"
                  << (options.merge_dirs.empty()
                          ? "; the run's own is " + options.run_dir + "/" + format->file_name
                          : std::string())
                  << '\n';
        return exit_bad_input;
    }
    if (!options.merge_dirs.empty())
        return report_merged(options, *format);
    auto run = load_run(options.run_dir);
    if (!run.is_ok()) {
        std::cerr << "pitfall: error: " << run.error().message() << '\n';
        return exit_bad_input;
    }
    return emit(format->render_run(run.value()), options.out);
}

} // namespace pitfall::runner
