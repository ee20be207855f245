// Reading a run, matrix cell or fleet node folder into run_data.
#include "report/report_parts.hpp"

#include "run/run_folder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace pitfall::runner {
using namespace report_parts;
status_or<run_data> load_run(const std::string& dir) {
    PITFALL_ASSIGN_OR_RETURN(const run_folder folder, run_folder::open(dir));
    PITFALL_ASSIGN_OR_RETURN(const run_log log, folder.read());
    run_data run;
    run.dir = dir;
    run.header = log.header.to_json();
    run.resumed = log.resumed;
    run.interrupted = log.interrupted;
    // Run order is the selection's; cases finished but not selected (none today) go last.
    std::set<std::string> placed;
    for (const auto& selected : log.header.selection) {
        const std::string key = selected.str();
        placed.insert(key);
        if (const case_record* r = log.find(key)) {
            run.cases.push_back(r->to_json());
        } else {
            run.not_finished.push_back(key);
            if (log.started.count(key) != 0)
                run.started_unfinished.push_back(key);
        }
    }
    for (const auto& r : log.cases)
        if (placed.count(r.key.str()) == 0)
            run.cases.push_back(r.to_json());
    PITFALL_ASSIGN_OR_RETURN(run.ratios, folder.summary_ratios());
    load_flaky(run); // a damaged flaky.json is the report's to say, never a failed report
    return run;
}

namespace {
/// Whether `path` names anything, a dangling symlink or a FIFO included: what is there is then
/// read (and refused, naming the file), never silently taken for absent.
bool something_at(const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(std::filesystem::symlink_status(path, ec));
}

/// A fleet node folder: node.json (bad input when malformed), then doctor.json and run/ where
/// the job got that far.
status_or<run_data> load_node(const std::string& dir) {
    const std::string node_path = dir + "/node.json";
    // reports/schema/fleet-node.schema.json: what the fleet report reads has its type.
    PITFALL_ASSIGN_OR_RETURN(json node, detail::read_json_file(node_path));
    PITFALL_TRY(detail::validate_document("fleet-node", node, node_path));
    run_data run;
    if (run_folder::open(dir + "/run").is_ok()) { // a job that never ran has no run folder
        PITFALL_ASSIGN_OR_RETURN(run, load_run(dir + "/run"));
    }
    run.dir = dir;
    run.node = std::move(node);
    // The doctor's output of a node that broke may be cut short or empty: the node's row says
    // so, and the fleet report still shows every other node.
    const std::string doctor_path = dir + "/doctor.json";
    if (something_at(doctor_path)) {
        auto doctor = detail::read_json_file(doctor_path);
        if (!doctor.is_ok())
            run.doctor_problem = doctor.error().message();
        else if (!doctor.value().is_object() || !doctor.value().contains("headline") ||
                 !doctor.value()["headline"].is_string())
            run.doctor_problem = doctor_path + ": no string field 'headline': not `pitfall "
                                               "doctor --json` output";
        else
            run.doctor = std::move(doctor).value();
    }
    return run;
}
} // namespace

status_or<run_data> load_cell_or_run(const std::string& dir) {
    const std::string cell_path = dir + "/cell.json";
    const bool is_cell = something_at(cell_path);
    if (something_at(dir + "/node.json")) {
        if (is_cell)
            return bad_run_input(dir + ": holds both node.json and cell.json: a fleet node "
                                       "folder or a matrix cell folder, not both");
        return load_node(dir);
    }
    if (!is_cell)
        return load_run(dir);
    // reports/schema/cell.schema.json: what the matrix table reads has its type.
    PITFALL_ASSIGN_OR_RETURN(json cell, detail::read_json_file(cell_path));
    if (!cell.is_object() || !cell.contains("outcome") || !cell["outcome"].is_string())
        return bad_run_input(cell_path + ": no string field 'outcome': not a matrix cell");
    PITFALL_TRY(detail::validate_document("cell", cell, cell_path));
    run_data run;
    if (run_folder::open(dir + "/run").is_ok()) { // a cell that never ran has no run folder
        PITFALL_ASSIGN_OR_RETURN(run, load_run(dir + "/run"));
    }
    run.dir = dir;
    run.cell = std::move(cell);
    return run;
}

} // namespace pitfall::runner
