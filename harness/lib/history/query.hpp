// Questions asked of the results database: a case's trend over the runs that hold it, oldest
// first, as rows, as a table for the terminal and as JSON (`pitfall history show`).
//
//   PITFALL_ASSIGN_OR_RETURN(const auto points, history::case_trend(db, {"cpu.x.reproduce"}));
//   std::cout << history::trend_table(points, "");
#pragma once

#include "history/history_db.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pitfall::history {

/// Which rows: one case; optionally one series, one host, runs started at or after a time.
struct trend_filter {
    std::string case_key;
    std::string series; ///< "": every series
    std::string host;   ///< "": every host (runs.host_id)
    std::string since;  ///< "": from the first run; else an ISO 8601 date or UTC time
    /// Leave each series' samples out (unit and median kept): what the table, the charts and
    /// the change points read. A case's samples are four fifths of its row's text, and parsing
    /// them was half of a 10,000-run trend's time (docs/history.md, Scale).
    bool without_samples = false;
};

/// The case in one run.
struct trend_point {
    std::string at; ///< the run's start time
    std::string run_id;
    std::string folder;
    std::string host_id;
    std::string verdict;
    std::string status; ///< "" when the record had none
    std::string error;
    std::string reason;
    std::optional<std::int64_t> peak_rss_bytes;
    std::optional<std::int64_t> tracked_peak_bytes;
    std::optional<double> wall_seconds;
    nlohmann::json series = nlohmann::json::object(); ///< as the cases table holds it (filtered)
};

/// Whether `text` is a --since value: YYYY-MM-DD, or YYYY-MM-DDTHH:MM:SSZ.
bool valid_since(const std::string& text);

/// The statement case_trend prepares (?1 case, ?2 host or NULL, ?3 since or NULL, ?4 NULL to
/// keep the samples): the scale benchmark prints SQLite's plan of it.
const char* case_trend_sql();

/// The case's rows, oldest run first. With filter.series, only that series is kept in each row.
status_or<std::vector<trend_point>> case_trend(const history_db& db, const trend_filter& filter);

/// Every case key the database holds (for "did you mean" when one is unknown).
status_or<std::vector<std::string>> known_cases(const history_db& db);

/// The trend as a table: time, run, host, verdict, outcome, the median of each series, memory.
std::string trend_table(const std::vector<trend_point>& points);

/// {"schema": "pitfall.history-trend/1", "database", "case", "points": [...]}.
nlohmann::json trend_json(const std::string& db_path, const trend_filter& filter,
                          const std::vector<trend_point>& points);

} // namespace pitfall::history
