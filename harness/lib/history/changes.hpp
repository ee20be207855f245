// `pitfall history changes`: the change points of a case's timed series over the runs the
// database holds, per series and per host (times are compared within one host: another
// machine's level is not a step). Each change point names the first run after it, the size of
// the step and its confidence (change_points.hpp; docs/change-points.md).
#pragma once

#include "history/change_points.hpp"
#include "history/query.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pitfall::history {

/// One series of one case on one host, and what the detector found in it.
struct series_changes {
    std::string series;
    std::string unit;
    std::string host_id;
    std::vector<const trend_point*> runs; ///< the runs that timed it, oldest first
    change_point_analysis analysis;
};

/// Groups the trend's medians by (series, host) and finds each group's change points. Series
/// other than times (unit "s") are analysed too: a memory or a count can step as well.
status_or<std::vector<series_changes>> changes_of(const std::vector<trend_point>& points,
                                                  const change_point_options& options = {});

/// The table `pitfall history changes` prints: per series and host, its shape, then each change
/// point with the first run after it (time and folder), before -> after, the step and the
/// confidence.
std::string changes_table(const std::string& case_key, const std::vector<series_changes>& found);

/// {"schema": "pitfall.history-changes/1", "case", "series": [{series, unit, host_id, runs,
/// shape, trend_change, change_points: [{first_run, at, folder, median_before, median_after,
/// step, confidence, p_value}]}]}.
nlohmann::json changes_json(const std::string& case_key, const std::vector<series_changes>& found);

} // namespace pitfall::history
