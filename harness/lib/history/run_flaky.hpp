// `pitfall run --history DB`: which of the run's cases the results database calls flaky (their
// verdict changed across runs of this build on this fingerprint, and they are not released),
// written into the run folder as flaky.json before the reports are rendered, so that every
// report of the run says so with the history behind the claim (docs/history.md, "Flaky cases").
//
//   history::write_run_flaky(options.history_db, folder.dir(), options.flaky_release_after);
#pragma once

#include "history/flaky.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace pitfall::history {

/// The file in the run folder, and the schema it carries.
inline constexpr const char* run_flaky_file = "flaky.json";
inline constexpr const char* run_flaky_schema = "pitfall.run-flaky/1";
/// The latest flips kept per case in flaky.json (`flips_total` counts them all): the reports
/// show the latest, and a case flipping on every run would otherwise grow without bound.
inline constexpr std::size_t run_flaky_flips_kept = 20;

/// {"schema": "pitfall.run-flaky/1", "db", "release_after", "build", "fingerprint_id",
/// "cases": [{case, runs, verdicts, flips: [{at, folder, from, to}], flips_total,
/// trailing_passes}]}: the cases of `found` that are not released.
nlohmann::json run_flaky_json(const std::string& db_path, const std::vector<flaky_case>& found,
                              std::size_t release_after);

/// Writes `run_dir`/flaky.json (whole: a temporary file renamed) from the database at
/// `db_path`, counting the run's own verdicts as its newest run. No database there: no file.
/// A database that cannot be read, or a file that cannot be written: a warning on standard
/// error and no file. Never fails the run, never changes its exit code.
void write_run_flaky(const std::string& db_path, const std::string& run_dir,
                     std::size_t release_after);

} // namespace pitfall::history
