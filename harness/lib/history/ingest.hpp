// A run folder turned into rows of the results database: one row in runs, one per case in
// cases. Reading the folder and writing the rows are two steps, so that a caller can tell a
// bad run folder (skipped, with a warning) from a database that cannot be written.
//
//   PITFALL_ASSIGN_OR_RETURN(const history::run_rows rows, history::read_run_rows(dir));
//   PITFALL_ASSIGN_OR_RETURN(const history::ingested done, history::store_run(db, rows));
#pragma once

#include "history/history_db.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pitfall::history {

/// One row of the cases table.
struct case_row {
    std::string case_key;
    std::string verdict;
    std::optional<std::string> status; ///< observed.status: ok, error, signal, timeout...
    std::optional<std::string> error;  ///< observed.error: the error's name
    std::string reason;
    std::optional<std::int64_t> peak_rss_bytes;
    std::optional<std::int64_t> tracked_peak_bytes;
    std::optional<double> wall_seconds;
    /// {"<series>": {"unit", "median" (null when there is none), "samples": [...]}}
    nlohmann::json series = nlohmann::json::object();
    std::string finished_at;
};

/// A run folder as rows.
// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json fields
struct run_rows {
    std::string id; ///< SHA-256 of the run's header record: the same run wherever it lies
    std::string at; ///< the header's start time (ISO 8601, UTC)
    std::string folder;
    std::string host_id;
    std::string fingerprint_id;
    nlohmann::json fingerprint_summary;
    std::optional<std::string> profile;
    std::optional<std::string> git_revision; ///< the header's build.git_revision, when it has one
    nlohmann::json build;
    std::string pitfall_version;
    nlohmann::json summary; ///< summary.json, null where the run ended before writing it
    int resumed = 0;
    bool interrupted = false;
    /// A digest of everything above that a resume can change: the same digest is a no-op.
    std::string content;
    std::vector<case_row> cases;
};

/// Reads `dir` (load_run: results.jsonl, summary.json); bad input naming the file otherwise.
status_or<run_rows> read_run_rows(const std::string& dir);

enum class ingest_outcome {
    added,     ///< a run the database did not hold
    updated,   ///< the run was there, but its folder has changed since (resumed, completed)
    unchanged, ///< already there as it is: nothing written
};
const char* to_string(ingest_outcome outcome);

struct ingested {
    ingest_outcome outcome = ingest_outcome::unchanged;
    std::size_t cases = 0;
};

/// Writes `rows` in one transaction (waiting for another writer up to the busy timeout).
status_or<ingested> store_run(const history_db& db, const run_rows& rows);

/// `pitfall run --history DB`, once the run's summary is written: records the run and prints a
/// line, or prints a warning naming the database and why. Never fails the run.
void record_finished_run(const std::string& db_path, const std::string& run_dir);

} // namespace pitfall::history
