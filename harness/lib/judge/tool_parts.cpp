// What `pitfall compare` and `pitfall bless` share (tool_parts.hpp).
#include "judge/tool_parts.hpp"

#include "fingerprint/host_identity.hpp"
#include "run/runner.hpp"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace pitfall::runner::tool_parts {
using nlohmann::json;
namespace fs = std::filesystem;

int report_error(const std::string& what) {
    std::cerr << "pitfall: error: " << what << '\n';
    return exit_bad_input;
}

observation_origin loaded_run::origin(const std::string& date) const {
    observation_origin o;
    o.fingerprint_summary = fingerprint_summary();
    o.fingerprint_id = fingerprint_id();
    o.date = date;
    o.pitfall_version = log.latest.pitfall_version;
    // The folder's own name ("20261125-173408" under reports/runs/), not the path
    // to it, which says nothing on another machine.
    std::error_code ec;
    fs::path folder = fs::absolute(dir, ec).lexically_normal();
    if (folder.filename().empty()) // "/x/runs/a/" (and "." made absolute): its name is "a"
        folder = folder.parent_path();
    o.run_folder = ec ? std::string() : folder.filename().string();
    o.run_started = log.header.at;
    o.host_id = host_id_of(log.latest.fingerprint);
    const json& build = log.latest.build;
    o.build_type =
        build.is_object() && build.contains("build_type") && build["build_type"].is_string()
            ? build["build_type"].get<std::string>()
            : "";
    return o;
}

status_or<loaded_run> load_run_folder(const std::string& dir) {
    PITFALL_ASSIGN_OR_RETURN(const run_folder folder, run_folder::open(dir));
    PITFALL_ASSIGN_OR_RETURN(run_log log, folder.read());
    return loaded_run{dir, std::move(log)};
}

std::string fixed(double x, int digits) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(digits) << x;
    return out.str();
}

} // namespace pitfall::runner::tool_parts
