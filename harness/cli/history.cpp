// `pitfall history`: the results database (docs/history.md). `ingest RUN...` adds run folders,
// `show --case C` prints the case's trend over them, `changes --case C` its change points
// (docs/change-points.md).
#include "commands.hpp"

#include "history/changes.hpp"
#include "history/compare.hpp"
#include "history/flaky.hpp"
#include "history/history_db.hpp"
#include "history/ingest.hpp"
#include "history/query.hpp"
#include "history/trend_html.hpp"
#include "util/suggest.hpp"

#include <iostream>

namespace pitfall::cli {
namespace {

/// The options of `pitfall history`, kept here: no other command reads them.
struct history_command_options {
    std::string action;
    std::vector<std::string> runs;
    std::string db;
    history::trend_filter filter;
    bool json = false;
    std::string by, format, out;                                // compare
    std::size_t release_after = history::default_release_after; // flaky
    std::string html;
};

history_command_options& history_options() {
    static history_command_options options;
    return options;
}

void declare_history(CLI::App& sub, command_line&) {
    history_command_options& h = history_options();
    sub.add_option("action", h.action,
                   "ingest (add run folders), show (a case's trend), changes\n"
                   "(its change points, per series and host), compare (the upgrade\n"
                   "report: KEY=A against KEY=B) or flaky (verdicts that change)")
        ->type_name("ingest|show|changes|compare|flaky");
    sub.add_option("runs", h.runs, "ingest: the run folders to add")->type_name("RUN");
    sub.add_option("--db", h.db,
                   "the database (default: $PITFALL_HISTORY, else\n"
                   "$XDG_DATA_HOME/pitfall/history.sqlite, else\n"
                   "~/.local/share/pitfall/history.sqlite)")
        ->type_name("FILE");
    sub.add_option("--case", h.filter.case_key,
                   "show, changes: the case (cpu.SCENARIO.VARIANT, or as `pitfall list` prints it)")
        ->type_name("CASE");
    sub.add_option("--series", h.filter.series, "show: only this timed series")
        ->type_name("SERIES");
    sub.add_option("--host", h.filter.host, "show: only runs on this host (its host id)")
        ->type_name("HOST");
    sub.add_option("--since", h.filter.since, "show: only runs started at or after this time")
        ->type_name("YYYY-MM-DD[THH:MM:SSZ]");
    sub.add_flag("--json", h.json, "show, changes, flaky: as JSON");
    sub.add_option("--by", h.by,
                   "compare: the runs of KEY=A against those of KEY=B\n"
                   "(a fingerprint summary key, profile, host, git_revision)")
        ->type_name("KEY=A,B");
    sub.add_option("--format", h.format, "compare: markdown (default), html or json")
        ->type_name("FORMAT");
    sub.add_option("--out", h.out, "compare: write the report to FILE (atomically)")
        ->type_name("FILE");
    sub.add_option("--release-after", h.release_after,
                   "flaky: a case is released after N passing runs in a row (10)")
        ->type_name("N");
    sub.add_option("--html", h.html, "show: also write the trend as an HTML page with charts")
        ->type_name("FILE");
    sub.footer(
        R"(Every run folder can be kept in one SQLite database: its header (time, host, fingerprint,
profile, build) and each case's verdict, outcome, memory and timed series. The run folders stay
the source of truth: ingesting one twice changes nothing, and the database can be rebuilt from
them. `pitfall run --history DB` records a run as it finishes.

exit status:
  0    ingested (or already there); shown
  1    ingest: a run folder was skipped (a warning names it and why)
  2    bad usage; a database that is missing (show, changes), damaged, of a newer schema or
       not pitfall's

examples:
  pitfall history ingest runs/* --db history.sqlite
  pitfall history show --case cpu.async_error_reporting.reproduce_reported_later
  pitfall history show --case cpu.dtype_casting.remedy_loss_scaling --series train_seconds \
      --since 2026-11-01 --json
  pitfall history changes --case cpu.float64_inputs.remedy --series epoch_seconds

docs/history.md: the tables, WAL and the busy timeout, what is refused.)");
}

int history_ingest(const history_command_options& h, const std::string& db_path) {
    if (h.runs.empty())
        return usage_error("history ingest needs one or more run folders", "history");
    const auto& f = h.filter;
    if (!f.case_key.empty() || !f.series.empty() || !f.host.empty() || !f.since.empty() || h.json)
        return usage_error(
            "--case, --series, --host, --since and --json are for history show and changes",
            "history");
    auto db = history::history_db::open(db_path, true);
    if (!db.is_ok())
        return input_error(db.error());
    int skipped = 0;
    for (const std::string& dir : h.runs) {
        auto rows = history::read_run_rows(dir);
        if (!rows.is_ok()) {
            std::cerr << "pitfall: warning: skipped " << dir << ": " << rows.error().message()
                      << '\n';
            ++skipped;
            continue;
        }
        auto done = history::store_run(db.value(), rows.value());
        if (!done.is_ok()) // the database, not the run: nothing later would fare better
            return input_error(done.error());
        std::cout << dir << ": " << history::to_string(done->outcome) << " (" << done->cases
                  << (done->cases == 1 ? " case, run " : " cases, run ") << rows->id.substr(0, 12)
                  << ")\n";
    }
    if (skipped > 0) {
        std::cerr << "pitfall: " << skipped << " of " << h.runs.size() << " run folders skipped\n";
        return exit_failed;
    }
    return exit_ok;
}

/// The case's trend (show and changes): its points, or the exit code of why there are none to
/// give (a bad flag, a database that cannot be read, a case the database never saw).
int read_trend(const history_command_options& h, const std::string& db_path,
               std::vector<history::trend_point>& points) {
    if (!h.runs.empty())
        return usage_error("history " + h.action + " takes no run folders (did you mean ingest?)",
                           "history");
    if (h.filter.case_key.empty())
        return usage_error("history " + h.action + " needs --case CASE", "history");
    if (!h.filter.since.empty() && !history::valid_since(h.filter.since))
        return usage_error("--since " + h.filter.since +
                               ": expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (UTC)",
                           "history");
    auto db = history::history_db::open(db_path, false);
    if (!db.is_ok())
        return input_error(db.error());
    history::trend_filter filter = h.filter; // the table, the page and changes read medians
    filter.without_samples = (h.action == "show" && !h.json) || h.action == "changes";
    auto found = history::case_trend(db.value(), filter);
    if (!found.is_ok())
        return input_error(found.error());
    if (found->empty()) {
        auto known = history::known_cases(db.value());
        if (!known.is_ok())
            return input_error(known.error());
        const auto& keys = known.value();
        if (std::find(keys.begin(), keys.end(), h.filter.case_key) == keys.end())
            return usage_error("no case '" + h.filter.case_key + "' in " + db_path +
                                   runner::did_you_mean(h.filter.case_key, keys),
                               "history");
    }
    points = std::move(found.value());
    return exit_ok;
}

int history_show(const history_command_options& h, const std::string& db_path) {
    std::vector<history::trend_point> points;
    if (const int rc = read_trend(h, db_path, points); rc != exit_ok)
        return rc;
    if (!h.html.empty())
        if (const status written = history::write_trend_html(h.html, db_path, h.filter, points);
            !written.is_ok())
            return input_error(written);
    if (h.json) {
        // Text read back from the file: bytes that are not UTF-8 (an edited database) replaced.
        std::cout << history::trend_json(db_path, h.filter, points)
                         .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                  << '\n';
        return exit_ok;
    }
    if (points.empty()) {
        std::cout << "no run of " << h.filter.case_key << " matches in " << db_path << '\n';
        return exit_ok;
    }
    std::cout << history::trend_table(points);
    return exit_ok;
}

int history_changes(const history_command_options& h, const std::string& db_path) {
    std::vector<history::trend_point> points;
    if (const int rc = read_trend(h, db_path, points); rc != exit_ok)
        return rc;
    auto found = history::changes_of(points);
    if (!found.is_ok())
        return input_error(found.error());
    if (h.json)
        std::cout << history::changes_json(h.filter.case_key, found.value())
                         .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                  << '\n';
    else
        std::cout << history::changes_table(h.filter.case_key, found.value());
    return exit_ok;
}

/// compare and flaky: the whole database, read only.
int history_compare_or_flaky(const history_command_options& h, const std::string& db_path) {
    if (!h.runs.empty())
        return usage_error("history " + h.action + " takes no run folders", "history");
    if (h.action == "compare" && h.by.empty())
        return usage_error("history compare needs --by KEY=A,B", "history");
    auto db = history::history_db::open(db_path, false);
    if (!db.is_ok())
        return input_error(db.error());
    const status done = h.action == "compare"
                            ? history::write_compare(db.value(), h.by, h.format, h.out, std::cout)
                            : history::write_flaky(db.value(), h.release_after, h.json, std::cout);
    return done.is_ok() ? exit_ok : input_error(done);
}

int run_history_command(const CLI::App&, command_line&) {
    history_options().filter.case_key = case_key_from_user(history_options().filter.case_key);
    const history_command_options& h = history_options();
    const std::vector<std::string> actions{"ingest", "show", "changes", "compare", "flaky"};
    if (h.action.empty())
        return usage_error("history needs an action: ingest, show, changes, compare or flaky",
                           "history");
    if (std::find(actions.begin(), actions.end(), h.action) == actions.end())
        return usage_error("unknown history action '" + h.action + "'" +
                               runner::did_you_mean(h.action, actions),
                           "history");
    std::string db_path = h.db;
    if (db_path.empty()) {
        auto found = history::default_database_path();
        if (!found.is_ok())
            return input_error(found.error());
        db_path = found.value();
    }
    if (!h.html.empty() && h.action != "show")
        return usage_error("--html is for history show", "history");
    if (h.action == "ingest")
        return history_ingest(h, db_path);
    if (h.action == "compare" || h.action == "flaky")
        return history_compare_or_flaky(h, db_path);
    return h.action == "show" ? history_show(h, db_path) : history_changes(h, db_path);
}

} // namespace

command history_command() {
    return {"history",
            "keep every run in one results database, show a case's trend and\n"
            "its change points: history ingest RUN..., history show|changes\n"
            "--case CASE; compare --by KEY=A,B (the upgrade report), flaky\n"
            "(SQLite)",
            declare_history, run_history_command};
}

} // namespace pitfall::cli
