// Run folder -> rows (read_run_rows), rows -> database (store_run), and the end of
// `pitfall run --history` (record_finished_run).
#include "history/ingest.hpp"
#include "util/json_member.hpp"

#include "fingerprint/host_identity.hpp"
#include "judge/stats.hpp"
#include "judge/timing.hpp"
#include "report/report.hpp"
#include "run/runner.hpp"
#include "util/sha256.hpp"

#include "pitfall/detail/json_file.hpp"

#include <cmath>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>

namespace pitfall::history {
namespace fs = std::filesystem;
using nlohmann::json;
using runner::member;

namespace {

std::optional<std::string> text_of(const json& j) {
    if (j.is_string())
        return j.get<std::string>();
    return std::nullopt;
}

/// An integer that fits a database column; anything else (a float, a huge or a negative
/// count from a damaged document) is left out.
std::optional<std::int64_t> count_of(const json& j) {
    if (j.is_number_integer() && j.get<std::int64_t>() >= 0)
        return j.get<std::int64_t>();
    if (j.is_number_unsigned() &&
        j.get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        return std::int64_t(j.get<std::uint64_t>());
    return std::nullopt;
}

std::optional<double> finite_of(const json& j) {
    if (j.is_number() && std::isfinite(j.get<double>()))
        return j.get<double>();
    return std::nullopt;
}

/// A series' normalised twins, one per control measured beside it in the same process
/// (`epoch_seconds/host_blas`: the samples over that control's median, as the judge divides
/// them), so trends, change points and the upgrade report can follow the code across hosts.
void add_normalised_twins(const std::string& name, const json& series, json& out) {
    const json& controls = member(series, "controls");
    if (!controls.is_object() || text_of(member(series, "unit")).value_or("") != "s")
        return;
    for (const auto& [control, _] : controls.items()) {
        std::string why;
        const auto n = runner::normalise(series, control, why);
        if (!n)
            continue;
        std::vector<double> kept;
        for (const double x : n->samples)
            if (std::isfinite(x))
                kept.push_back(x);
        const double median = stats::median_or_nan(kept);
        std::string twin = name;
        twin += '/';
        twin += control;
        out[twin] = {{"unit", ""},
                     {"median", std::isnan(median) ? json() : json(median)},
                     {"samples", kept},
                     {"control_median", n->control_median}};
    }
}

/// Every timed series of a result document: its unit, samples and median, and its normalised
/// twins.
json series_of(const json& result) {
    json out = json::object();
    const json& samples = member(result, "samples");
    if (!samples.is_object())
        return out;
    for (const auto& [name, series] : samples.items()) {
        const json& values = member(series, "values");
        if (!values.is_array())
            continue;
        std::vector<double> kept;
        for (const auto& v : values)
            if (const auto x = finite_of(v))
                kept.push_back(*x);
        const double median = stats::median_or_nan(kept);
        out[name] = {{"unit", text_of(member(series, "unit")).value_or("")},
                     {"median", std::isnan(median) ? json() : json(median)},
                     {"samples", kept}};
        add_normalised_twins(name, series, out);
    }
    return out;
}

case_row case_row_of(const json& record) {
    case_row row;
    row.case_key = text_of(member(record, "case")).value_or("");
    row.verdict = text_of(member(record, "verdict")).value_or("");
    const json& observed = member(record, "observed");
    row.status = text_of(member(observed, "status"));
    row.error = text_of(member(observed, "error"));
    row.reason = text_of(member(record, "reason")).value_or("");
    const json& process = member(record, "process");
    row.peak_rss_bytes = count_of(member(process, "peak_rss_bytes"));
    row.wall_seconds = finite_of(member(process, "wall_seconds"));
    const json& result = member(record, "result");
    row.tracked_peak_bytes = count_of(member(member(result, "memory"), "tracked_peak_bytes"));
    row.series = series_of(result);
    row.finished_at = text_of(member(record, "finished_at")).value_or("");
    return row;
}

} // namespace

status_or<run_rows> read_run_rows(const std::string& dir) {
    PITFALL_ASSIGN_OR_RETURN(const runner::run_data run, runner::load_run(dir));
    const json& header = run.header;
    if (!header.is_object())
        return status::error(pitfall_error::bad_input, dir + ": no run header in results.jsonl",
                             stage::none);
    run_rows rows;
    // The header is the run's identity: written once when the run starts, kept by a resume.
    rows.id = runner::sha256_hex(header.dump());
    rows.at = text_of(member(header, "at")).value_or("");
    std::error_code ec;
    const fs::path absolute = fs::absolute(dir, ec);
    rows.folder = ec ? dir : absolute.lexically_normal().string();
    rows.host_id = runner::host_id_of(member(header, "fingerprint"));
    rows.fingerprint_id = text_of(member(header, "fingerprint_id")).value_or("");
    rows.fingerprint_summary = member(header, "fingerprint_summary");
    rows.profile = text_of(member(member(header, "profile"), "name"));
    rows.build = member(header, "build");
    rows.git_revision = text_of(member(rows.build, "git_revision"));
    rows.pitfall_version = text_of(member(header, "pitfall_version")).value_or("");
    const std::string summary_path = dir + "/summary.json";
    if (fs::exists(fs::symlink_status(summary_path, ec))) {
        PITFALL_ASSIGN_OR_RETURN(rows.summary, detail::read_json_file(summary_path));
    }
    rows.resumed = run.resumed;
    rows.interrupted = run.interrupted;
    std::string content = rows.summary.dump() + '\n' + std::to_string(run.resumed) +
                          (run.interrupted ? " interrupted\n" : "\n");
    for (const json& record : run.cases) {
        content += record.dump() + '\n';
        rows.cases.push_back(case_row_of(record));
    }
    rows.content = runner::sha256_hex(content);
    return rows;
}

const char* to_string(ingest_outcome outcome) {
    switch (outcome) {
    case ingest_outcome::added: return "added";
    case ingest_outcome::updated: return "updated";
    case ingest_outcome::unchanged: return "already recorded";
    }
    return "?";
}

namespace {

void bind_text_or_null(statement& s, int at, const std::optional<std::string>& value) {
    if (value)
        s.bind(at, *value);
    else
        s.bind_null(at);
}

template <class T> void bind_or_null(statement& s, int at, const std::optional<T>& value) {
    if (value)
        s.bind(at, *value);
    else
        s.bind_null(at);
}

std::optional<std::string> json_or_null(const json& j) {
    return j.is_null() ? std::nullopt : std::optional<std::string>(j.dump());
}

status insert_run(const history_db& db, const run_rows& rows) {
    statement run(db, "INSERT INTO runs (id, at, folder, host_id, fingerprint_id, "
                      "fingerprint_summary, profile, git_revision, build, pitfall_version, "
                      "summary, cases_recorded, resumed, interrupted, content, ingested_at) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                      "?15, ?16)");
    PITFALL_TRY(run.prepared("recording a run"));
    run.bind(1, rows.id);
    run.bind(2, rows.at);
    run.bind(3, rows.folder);
    run.bind(4, rows.host_id);
    run.bind(5, rows.fingerprint_id);
    bind_text_or_null(run, 6, json_or_null(rows.fingerprint_summary));
    bind_text_or_null(run, 7, rows.profile);
    bind_text_or_null(run, 8, rows.git_revision);
    bind_text_or_null(run, 9, json_or_null(rows.build));
    run.bind(10, rows.pitfall_version);
    bind_text_or_null(run, 11, json_or_null(rows.summary));
    run.bind(12, std::int64_t(rows.cases.size()));
    run.bind(13, std::int64_t(rows.resumed));
    run.bind(14, std::int64_t(rows.interrupted ? 1 : 0));
    run.bind(15, rows.content);
    run.bind(16, runner::utc_now("%Y-%m-%dT%H:%M:%SZ"));
    PITFALL_TRY(run.step("recording a run"));
    return status::ok();
}

status insert_cases(const history_db& db, const run_rows& rows) {
    statement add(db, "INSERT INTO cases (run_id, case_key, verdict, status, error, reason, "
                      "peak_rss_bytes, tracked_peak_bytes, wall_seconds, series, finished_at, "
                      "run_at, host_id, run_folder) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
    PITFALL_TRY(add.prepared("recording a case"));
    for (const case_row& c : rows.cases) {
        add.reset();
        add.bind(1, rows.id);
        add.bind(2, c.case_key);
        add.bind(3, c.verdict);
        bind_text_or_null(add, 4, c.status);
        bind_text_or_null(add, 5, c.error);
        add.bind(6, c.reason);
        bind_or_null(add, 7, c.peak_rss_bytes);
        bind_or_null(add, 8, c.tracked_peak_bytes);
        bind_or_null(add, 9, c.wall_seconds);
        add.bind(10, c.series.dump());
        add.bind(11, c.finished_at);
        add.bind(12, rows.at);
        add.bind(13, rows.host_id);
        add.bind(14, rows.folder);
        PITFALL_TRY(add.step("recording case " + c.case_key));
    }
    return status::ok();
}

/// Inside the transaction: what the database holds of this run decides what is written.
status_or<ingest_outcome> write_rows(const history_db& db, const run_rows& rows) {
    statement seen(db, "SELECT content FROM runs WHERE id = ?1");
    PITFALL_TRY(seen.prepared("looking the run up"));
    seen.bind(1, rows.id);
    PITFALL_ASSIGN_OR_RETURN(const bool known, seen.step("looking the run up"));
    if (known && seen.text(0) == rows.content)
        return ingest_outcome::unchanged;
    if (known) { // its cases go with it (ON DELETE CASCADE)
        statement drop(db, "DELETE FROM runs WHERE id = ?1");
        PITFALL_TRY(drop.prepared("replacing the run"));
        drop.bind(1, rows.id);
        PITFALL_TRY(drop.step("replacing the run"));
    }
    PITFALL_TRY(insert_run(db, rows));
    PITFALL_TRY(insert_cases(db, rows));
    return known ? ingest_outcome::updated : ingest_outcome::added;
}

} // namespace

status_or<ingested> store_run(const history_db& db, const run_rows& rows) {
    // IMMEDIATE: the write lock is taken (or waited for) before the run is looked up, so two
    // processes ingesting the same run cannot both find it missing.
    PITFALL_TRY(db.exec("BEGIN IMMEDIATE", "starting a write"));
    auto written = write_rows(db, rows);
    if (!written.is_ok()) {
        (void)db.exec("ROLLBACK", "rolling back");
        return written.error();
    }
    PITFALL_TRY(db.exec("COMMIT", "committing the run"));
    return ingested{written.value(), rows.cases.size()};
}

void record_finished_run(const std::string& db_path, const std::string& run_dir) {
    auto record = [&]() -> status {
        PITFALL_ASSIGN_OR_RETURN(const run_rows rows, read_run_rows(run_dir));
        PITFALL_ASSIGN_OR_RETURN(const history_db db, history_db::open(db_path, true));
        PITFALL_ASSIGN_OR_RETURN(const ingested done, store_run(db, rows));
        std::cout << "history: " << to_string(done.outcome) << ' ' << done.cases
                  << (done.cases == 1 ? " case in " : " cases in ") << db_path << '\n';
        return status::ok();
    };
    // The run folder is the record; the database is a copy of it that can be rebuilt, so a
    // database that cannot be written costs a warning, never the run or its exit code.
    try {
        if (const status recorded = record(); !recorded.is_ok())
            std::cerr << "pitfall: warning: the run was not recorded in the history database "
                      << db_path << ": " << recorded.message() << " (`pitfall history ingest "
                      << run_dir << " --db " << db_path << "` adds it later)\n";
    } catch (const std::exception& e) {
        std::cerr << "pitfall: warning: the run was not recorded in the history database "
                  << db_path << ": " << e.what() << '\n';
    }
}

} // namespace pitfall::history
