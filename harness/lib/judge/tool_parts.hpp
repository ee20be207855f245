// What `pitfall compare` (compare.cpp) and `pitfall bless` (bless.cpp) share, private to
// harness/lib/judge: a run folder as both read it, and how they report.
#pragma once

#include "judge/baseline.hpp"
#include "pitfall/status.hpp"
#include "run/run_folder.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace pitfall::runner::tool_parts {

/// Says `what` on stderr as an error; returns exit_bad_input.
int report_error(const std::string& what);

/// One run folder as compare and bless need it.
struct loaded_run {
    std::string dir;
    run_log log;

    /// The last session's: a resumed run was fingerprinted again.
    const std::string& fingerprint_id() const { return log.latest.fingerprint_id; }
    const nlohmann::json& fingerprint_summary() const { return log.latest.fingerprint_summary; }

    /// The evidence an entry blessed from this run carries (`date`: the day it is blessed).
    observation_origin origin(const std::string& date) const;
};

status_or<loaded_run> load_run_folder(const std::string& dir);

/// `x` with `digits` digits after the point.
std::string fixed(double x, int digits);

} // namespace pitfall::runner::tool_parts
