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

/// The build identity flaky_cases groups by, from a run header's "build": its git_revision
/// where it is a string, else the build JSON as ingest records it, else "".
std::string build_identity(const nlohmann::json& build);

/// A run as it finishes, before it is recorded: what `pitfall run --history` asks about.
struct finishing_run {
    std::string id; ///< its id in the database (a resumed run may be recorded already)
    std::string at, folder;
    std::string build; ///< build_identity of its header's build
    std::string fingerprint_id;
    std::vector<std::string> selected;           ///< its selected cases
    std::map<std::string, std::string> verdicts; ///< case -> verdict, for its finished cases
};

/// flaky_cases restricted to `run`'s build, fingerprint and selected cases, with `run`'s own
/// verdicts counted as its runs' (in time order): what `pitfall history flaky` will say of
/// these cases once the run is recorded. Reads only the runs of that build and fingerprint.
status_or<std::vector<flaky_case>>
flaky_cases_of_run(const history_db& db, const finishing_run& run, std::size_t release_after);

/// One block per flaky case: runs, verdicts with counts, released or not, then its flips.
std::string flaky_table(const std::vector<flaky_case>& found, std::size_t release_after);

/// {"schema": "pitfall.history-flaky/1", "release_after", "cases": [{case, build,
/// fingerprint_id, runs, verdicts, flips: [{at, folder, from, to}], trailing_passes, released}]}.
nlohmann::json flaky_json(const std::vector<flaky_case>& found, std::size_t release_after);

/// `pitfall history flaky`: the table (or, with `as_json`, the JSON) on `out`.
status write_flaky(const history_db& db, std::size_t release_after, bool as_json,
                   std::ostream& out);

} // namespace pitfall::history
