// `pitfall history show --case C --html FILE`: the case's trend as one self-contained HTML page
// (inline SVG and CSS, no script, nothing fetched): a chart per timed series (time across, the
// series' median in each run up), one of the process's peak RSS, the runs where the verdict
// changed marked on every chart, and the change points changes_of finds drawn as vertical lines
// with their step. Text from the database (case keys, reasons, folders) is escaped: it is
// whatever a run folder held.
//
//   PITFALL_ASSIGN_OR_RETURN(const auto found, history::changes_of(points));
//   const std::string page = history::trend_html(db_path, filter, points, found);
#pragma once

#include "history/changes.hpp"
#include "history/query.hpp"

#include "pitfall/status.hpp"

#include <string>
#include <vector>

namespace pitfall::history {

/// The page: a heading naming the case and the database, the charts, then a table of the
/// verdict changes and change points the charts mark.
std::string trend_html(const std::string& db_path, const trend_filter& filter,
                       const std::vector<trend_point>& points,
                       const std::vector<series_changes>& changes);

/// Finds the change points of `points` (changes_of) and writes the page to `path` atomically
/// (a temporary file beside it, then a rename). An error names the file.
status write_trend_html(const std::string& path, const std::string& db_path,
                        const trend_filter& filter, const std::vector<trend_point>& points);

} // namespace pitfall::history
