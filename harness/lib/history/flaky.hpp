// `pitfall history flaky`: the cases whose verdict changes between runs of the same build on
// the same environment (the same fingerprint id): nothing that should matter changed, so the
// case itself is unstable. Each is listed with its verdicts, the runs where it flipped, and
// whether it is released: its last N runs there all passed (docs/history.md, "flaky").
//
//   PITFALL_ASSIGN_OR_RETURN(const auto found, history::flaky_cases(db, 10));
//   std::cout << history::flaky_table(found);
#pragma once

#include "history/history_db.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace pitfall::history {

/// A case is released after this many consecutive passing runs (`--release-after`).
inline constexpr std::size_t default_release_after = 10;

/// A run where the verdict differs from the run before it (same build and fingerprint).
struct verdict_flip {
    std::string at;
    std::string folder;
    std::string from, to;
};

struct flaky_case {
    std::string case_key;
    std::string build;          ///< the build identity: git_revision, else the build JSON
    std::string fingerprint_id; ///< runs.fingerprint_id
    std::size_t runs = 0;
    std::map<std::string, std::size_t> verdicts; ///< verdict -> runs
    std::vector<verdict_flip> flips;             ///< oldest first
    std::size_t trailing_passes = 0;             ///< PASS runs since the last other verdict
    bool released = false;                       ///< trailing_passes >= release_after
};

/// Every case with more than one verdict among the runs of one build on one fingerprint,
/// ordered by case, then build and fingerprint. `release_after` must be at least 1.
status_or<std::vector<flaky_case>> flaky_cases(const history_db& db, std::size_t release_after);

/// One block per flaky case: runs, verdicts with counts, released or not, then its flips.
std::string flaky_table(const std::vector<flaky_case>& found, std::size_t release_after);

/// {"schema": "pitfall.history-flaky/1", "release_after", "cases": [{case, build,
/// fingerprint_id, runs, verdicts, flips: [{at, folder, from, to}], trailing_passes, released}]}.
nlohmann::json flaky_json(const std::vector<flaky_case>& found, std::size_t release_after);

/// `pitfall history flaky`: the table (or, with `as_json`, the JSON) on `out`.
status write_flaky(const history_db& db, std::size_t release_after, bool as_json,
                   std::ostream& out);

} // namespace pitfall::history
