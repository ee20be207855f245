// Reports rendered from a run folder's results.jsonl (the source of truth): a versioned JSON
// document (reports/schema/report.schema.json), JUnit XML for CI systems, Markdown for step
// summaries and pull-request comments, and one self-contained HTML page (no scripts, fonts or
// styles from elsewhere). `pitfall report RUN` renders one; `pitfall run` ends by writing all
// four into the run folder.
#pragma once

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pitfall::runner {

/// What a run folder holds, as the reports need it.
struct run_data {
    std::string dir;
    nlohmann::json header;             ///< the first "run" record (null when the file has none)
    std::vector<nlohmann::json> cases; ///< the last "case" record of each case, in run order
    /// Cases selected (header "selection") with no "case" record: not run, or the run ended
    /// inside them ("started" with no result: crashed or killed mid-way).
    std::vector<std::string> not_finished;
    std::vector<std::string> started_unfinished; ///< the subset that had started
    int resumed = 0;          ///< "resumed" records: how many times it was completed later
    bool interrupted = false; ///< an "interrupted" record, not followed by a resume
    nlohmann::json ratios = nlohmann::json::array(); ///< from summary.json when present
    /// A matrix cell's cell.json (`pitfall matrix run`): the cell's definition and its own
    /// outcome (image build failed, compile failed for an architecture, ran...); null for a
    /// plain run folder. A cell that never ran has no cases.
    nlohmann::json cell;
    /// A fleet node's node.json (reports/schema/fleet-node.schema.json: the node, and how its
    /// job ended); null for other folders. A node whose job never ran has no cases.
    nlohmann::json node;
    /// The node's doctor.json (`pitfall doctor --json` there) when it holds a string
    /// "headline"; null when absent or unreadable (doctor_problem then says why).
    nlohmann::json doctor;
    std::string doctor_problem;
    /// flaky.json (`pitfall run --history`): the run's cases the results database calls flaky,
    /// as checked when read: {"db", "release_after", "cases": [{case, runs, verdicts, flips,
    /// flips_total, trailing_passes}]}. Null when absent or damaged (flaky_problem says why:
    /// a damaged flaky.json never fails a report).
    nlohmann::json flaky;
    std::string flaky_problem;
};

/// One case of run_data::flaky in a line: "FAIL x1, PASS x3 in 4 runs; latest flip AT PASS ->
/// FAIL".
std::string flaky_summary(const nlohmann::json& flaky_case);

/// Reads `dir`/results.jsonl (and summary.json for the ratios, when present). A truncated last
/// line (a kill mid-write) is skipped; anything else malformed is bad input naming the line.
status_or<run_data> load_run(const std::string& dir);

/// A fleet node folder (node.json; doctor.json and run/ when the job got that far), a matrix
/// cell folder (cell.json, and run/ when the cell got as far as running) or a plain run folder.
/// A malformed node.json or cell.json is bad input naming the file; a damaged doctor.json is
/// not (the node's row says so: a node that broke is what the fleet report is for).
status_or<run_data> load_cell_or_run(const std::string& dir);

nlohmann::json render_json(const run_data& run);
std::string render_junit(const run_data& run);
std::string render_markdown(const run_data& run);
std::string render_html(const run_data& run);

/// Several runs side by side (a matrix over CUDA/cuDNN versions, drivers, GPUs): for matrix
/// cells a table of each cell's toolkit, cuDNN, host compiler, architectures (refused by the
/// toolkit, embedded in the binaries) and own outcome; then one row per case, one column per
/// cell, each cell's verdict and observed outcome; and what differs between cells (cell facts
/// first, then cases).
std::string render_matrix_html(const std::vector<run_data>& runs);
std::string render_matrix_markdown(const std::vector<run_data>& runs);

/// Fleet node folders side by side (`pitfall fleet run`: one node a Slurm array task). The
/// nodes that ran are grouped by fingerprint (GPU, driver, CUDA runtime, cuDNN); first which
/// node differs from the rest of its group and in which cases, then every node with its job's
/// outcome, doctor headline and verdict counts, then the cases that differ between groups, then
/// the case x node table. Nodes that never ran are listed, never compared.
std::string render_fleet_markdown(const std::vector<run_data>& nodes);
std::string render_fleet_html(const std::vector<run_data>& nodes);
/// The fleet report as data (reports/schema/fleet-report.schema.json): what `pitfall fleet`
/// decides its exit status from.
nlohmann::json render_fleet_json(const std::vector<run_data>& nodes);

/// The file names `pitfall run` writes into the run folder.
inline const char* const report_json_name = "report.json";
inline const char* const report_junit_name = "junit.xml";
inline const char* const report_markdown_name = "summary.md";
inline const char* const report_html_name = "report.html";

/// Writes the four reports into `run.dir`, each atomically; the first error is returned.
status write_reports(const run_data& run);

/// Checked by the command line (`pitfall report`), which names a bad --format.
struct report_options {
    std::string run_dir;
    std::vector<std::string> merge_dirs; ///< --merge: these runs side by side (html or markdown)
    std::string format = "html";         ///< html, junit, markdown, json (merged: html, markdown)
    std::string out;                     ///< empty: standard output
};

/// `pitfall report RUN [--format F] [--out FILE]`: exit 0 written, 2 bad input.
int report_run(const report_options& options);

/// Text safe inside HTML or XML element content and attribute values (& < > " ' escaped;
/// control characters XML 1.0 forbids replaced by U+FFFD).
std::string escape_markup(const std::string& text);

} // namespace pitfall::runner
