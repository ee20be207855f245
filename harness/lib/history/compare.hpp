// `pitfall history compare --by KEY=A,B`: the upgrade report. The runs whose KEY (a fingerprint
// summary key, or profile, host, git_revision, pitfall_version) reads A against those reading
// B: every case whose verdict, outcome, time or memory differs between the two sides, with the
// number of runs behind each side (docs/history.md, "compare").
//
//   PITFALL_ASSIGN_OR_RETURN(const auto by, history::parse_compare_by("blas_core=Haswell,Zen"));
//   PITFALL_ASSIGN_OR_RETURN(const auto report, history::compare_runs(db, by));
//   std::cout << history::compare_markdown(db.path(), report);
#pragma once

#include "history/history_db.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace pitfall::history {

/// How far outside side A's range of run medians side B's median must lie to differ: A's
/// [min, max] widened by this fraction on each side.
inline constexpr double compare_widening = 0.10;

/// `--by KEY=A,B` taken apart. The values are split at the comma later, against the values the
/// database holds (a value may itself hold a comma); `spec` keeps what follows '='.
struct compare_by {
    std::string key;
    std::string spec;    ///< "A,B" as given
    std::string value_a; ///< set by compare_runs
    std::string value_b;
};

/// KEY=A,B with a non-empty key and a comma after '='; bad_input naming --by otherwise.
status_or<compare_by> parse_compare_by(const std::string& text);

/// One measured quantity (a timed series or the memory) on both sides.
struct quantity_difference {
    std::string what;  ///< "time" or "memory"
    std::string name;  ///< the series ("epoch_seconds/host_blas") or the memory column
    std::string basis; ///< time: "normalised" or "absolute"; memory: "tracked" or "peak RSS"
    std::string unit;  ///< "s", "bytes", or the series' own unit
    std::size_t runs_a = 0, runs_b = 0;
    double median_a = 0, min_a = 0, max_a = 0; ///< A: median, range of its run medians
    double median_b = 0, min_b = 0, max_b = 0;
};

/// One case on both sides, and what differs between them.
struct case_comparison {
    std::string case_key;
    std::size_t runs_a = 0, runs_b = 0;
    std::map<std::string, std::size_t> verdicts_a, verdicts_b; ///< verdict -> runs
    std::map<std::string, std::size_t> outcomes_a, outcomes_b; ///< "error: name" -> runs
    std::vector<quantity_difference> quantities;               ///< only those that differ
    bool verdict_differs = false;
    bool outcome_differs = false;
    bool differs() const { return verdict_differs || outcome_differs || !quantities.empty(); }
};

struct compare_report {
    compare_by by;
    std::size_t runs_a = 0, runs_b = 0;
    std::vector<case_comparison> differing;      ///< run on both sides, something differs
    std::vector<case_comparison> only_a, only_b; ///< run on one side only
    std::size_t same = 0;                        ///< run on both sides, nothing differs
};

/// The values each key takes over the database's runs (key -> sorted distinct values).
status_or<std::map<std::string, std::vector<std::string>>> comparable_values(const history_db& db);

/// Compares the runs of by.key = A with those of B. An unknown key, a spec that names no two
/// values the database holds: bad_input naming the key and the values it has.
status_or<compare_report> compare_runs(const history_db& db, compare_by by);

/// Side B's median differs from side A when it lies outside [min_a, max_a] widened by
/// compare_widening on each side.
bool outside_widened_range(double median_b, double min_a, double max_a);

std::string compare_markdown(const std::string& db_path, const compare_report& report);
/// A self-contained page: inline style, no scripts, no external resources, all text escaped.
std::string compare_html(const std::string& db_path, const compare_report& report);
/// {"schema": "pitfall.history-compare/1", "database", "by", "a", "b", "differing", "only_a",
/// "only_b", "same"}.
nlohmann::json compare_json(const std::string& db_path, const compare_report& report);

/// `pitfall history compare`: the report for `by_text` (KEY=A,B) as `format` (markdown, html,
/// json) on `out`, or, with `out_path`, written atomically to that file. bad_input naming the
/// flag for a bad --by or --format, an unknown key or value.
status write_compare(const history_db& db, const std::string& by_text, const std::string& format,
                     const std::string& out_path, std::ostream& out);

} // namespace pitfall::history
