// How `pitfall history` holds up over a long history: a synthetic database of many runs of many
// cases (by default 10,000 runs of 210 cases: 2.1 million case rows), written through the same
// store_run that `pitfall history ingest` uses, one transaction a run. It prints a table of
//   - the ingest rate (runs/s and case rows/s, store_run alone: making the rows is not counted),
//   - the database's size (bytes, and per case row, after a WAL checkpoint),
//   - one case's trend (case_trend, and case_trend + trend_table) in this process, and the real
//     `pitfall history show --case C --db DB` as a process,
//   - the case's change points (changes_of) in this process, and `pitfall history changes`,
// each the median of --repeat timings, and the plan SQLite chose for the trend's query.
//
// The rows look like real runs': 3 hosts taking turns, an hour apart; each run's summary.json
// with a line per case; a third of the cases with no timed series, a third with one, a third
// with two, 9 samples each with 3% noise; a +15% step in every tenth case's series at 60% of
// the history, and now and then a failing verdict with its reason.
//
//   build/NAME/bench/pitfall_history_scale [--runs N] [--cases N] [--repeat N] [--db FILE]
//                                          [--keep] [--pitfall PATH]
// --db names a new file to make (and keep; without it a temporary one is made and removed
// unless --keep): runs already in it would be found unchanged and cost nothing.
#include "history/changes.hpp"
#include "history/history_db.hpp"
#include "history/ingest.hpp"
#include "history/query.hpp"
#include "util/sha256.hpp"

#include "pitfall/detail/process.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace {
namespace fs = std::filesystem;
using namespace pitfall::history;
using nlohmann::json;
using clock_type = std::chrono::steady_clock;

struct options {
    long runs = 10000;
    long cases = 210;
    long repeat = 10;
    std::string db;
    bool keep = false;
    std::string pitfall = PITFALL_BENCH_PITFALL;
};

std::string case_key(long c) {
    char key[64];
    std::snprintf(key, sizeof key, "cpu.scenario_%02ld.variant_%ld", c / 7, c % 7);
    return key;
}

std::string time_text(long hours_after_start) {
    const std::time_t t = 1735689600 + std::time_t(hours_after_start) * 3600; // 2025-01-01
    std::tm parts{};
    gmtime_r(&t, &parts);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return text;
}

/// The case's timed series in run `i`: 0, 1 or 2 of them, 9 noisy samples each.
json series_of(long c, long i, long runs, std::mt19937_64& random) {
    json out = json::object();
    std::normal_distribution<double> noise(0.0, 0.03);
    const char* names[] = {"epoch_seconds", "step_seconds"};
    for (long s = 0; s < c % 3; ++s) {
        double level = 0.001 * double(1 + (c * 7 + s) % 50);
        if (c % 10 == 0 && i >= runs * 6 / 10)
            level *= 1.15;
        std::vector<double> samples(9);
        for (double& sample : samples)
            sample = level * (1 + noise(random));
        std::vector<double> sorted = samples;
        std::nth_element(sorted.begin(), sorted.begin() + 4, sorted.end());
        out[names[s]] = {{"unit", "s"}, {"median", sorted[4]}, {"samples", samples}};
    }
    return out;
}

run_rows make_run(long i, const options& o, std::mt19937_64& random) {
    static const std::string hosts[] = {"681990fa47120e98", "4c1d7e2b9a03f551", "b7e0a9d2c4f61835"};
    run_rows rows;
    rows.id = pitfall::runner::sha256_hex("synthetic run " + std::to_string(i));
    rows.at = time_text(i);
    rows.folder = "/srv/pitfall/runs/" + rows.at;
    rows.host_id = hosts[i % 3];
    rows.fingerprint_id = rows.host_id.substr(0, 8) + "d54cd729e";
    rows.fingerprint_summary = {
        {"blas_core", "Haswell"},   {"blas_library", "OpenBLAS 0.3.21"},
        {"built_with_cuda", false}, {"cpu_model", "AMD EPYC"},
        {"cpu_threads", 2},         {"os", "Debian GNU/Linux 12 (bookworm)"}};
    rows.profile = "host";
    rows.git_revision = pitfall::runner::sha256_hex(std::to_string(i / 20)).substr(0, 40);
    rows.build = {{"build_type", "Release"}, {"cxx_compiler", "GNU 12.2.0"}};
    rows.pitfall_version = "0.1.0";
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    json summary_cases = json::array();
    for (long c = 0; c < o.cases; ++c) {
        case_row row;
        row.case_key = case_key(c);
        const bool failing = unit(random) < 0.002;
        row.verdict = failing ? "PERF_REGRESSION" : "PASS";
        row.status = "ok";
        row.reason = failing ? "epoch_seconds: median 12.3 ms is 41% above the baseline's 8.7 ms"
                             : "as expected: ok; every timed series within its bounds";
        row.peak_rss_bytes = 40'000'000 + (c % 13) * 1'000'000 + std::int64_t(unit(random) * 1e5);
        row.tracked_peak_bytes = 8'000'000 + (c % 7) * 1'000'000;
        row.wall_seconds = 0.05 + 0.01 * double(c % 9) * (1 + 0.03 * unit(random));
        row.series = series_of(c, i, o.runs, random);
        row.finished_at = rows.at;
        summary_cases.push_back({{"case", row.case_key},
                                 {"failing", failing},
                                 {"reason", row.reason},
                                 {"verdict", row.verdict},
                                 {"wall_seconds", *row.wall_seconds}});
        rows.cases.push_back(std::move(row));
    }
    rows.summary = {{"schema", "pitfall.summary/1"},
                    {"at", rows.at},
                    {"cases", summary_cases},
                    {"cases_selected", o.cases},
                    {"cases_finished", o.cases},
                    {"complete", true},
                    {"exit_code", 0}};
    rows.content = pitfall::runner::sha256_hex(rows.summary.dump());
    return rows;
}

double seconds_since(clock_type::time_point start) {
    return std::chrono::duration<double>(clock_type::now() - start).count();
}

/// The median of `repeat` timings of `work` (seconds); false from work stops with an error.
double median_time(long repeat, const std::function<bool()>& work) {
    std::vector<double> times;
    for (long k = 0; k < repeat; ++k) {
        const auto start = clock_type::now();
        if (!work()) {
            std::fprintf(stderr, "history_scale: a timed step failed\n");
            std::exit(1);
        }
        times.push_back(seconds_since(start));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

bool parse(int argc, char** argv, options& o) {
    for (int k = 1; k < argc; ++k) {
        const std::string arg = argv[k];
        auto number = [&](long& into, long least) {
            char* end = nullptr;
            into = k + 1 < argc ? std::strtol(argv[++k], &end, 10) : 0;
            if (end == nullptr || *end != '\0' || into < least) {
                std::fprintf(stderr, "history_scale: %s needs a whole number >= %ld\n", arg.c_str(),
                             least);
                return false;
            }
            return true;
        };
        if (arg == "--runs" || arg == "--cases" || arg == "--repeat") {
            if (!number(arg == "--runs" ? o.runs : arg == "--cases" ? o.cases : o.repeat, 1))
                return false;
        } else if ((arg == "--db" || arg == "--pitfall") && k + 1 < argc) {
            (arg == "--db" ? o.db : o.pitfall) = argv[++k];
        } else if (arg == "--keep") {
            o.keep = true;
        } else {
            std::fprintf(stderr,
                         "history_scale: unknown or incomplete argument '%s'\nusage: "
                         "pitfall_history_scale [--runs N] [--cases N] [--repeat N] [--db FILE] "
                         "[--keep] [--pitfall PATH]\n",
                         arg.c_str());
            return false;
        }
    }
    return true;
}

/// The plan SQLite picks for the trend's query (the statement case_trend prepares).
void print_plan(const history_db& db) {
    const std::string sql = std::string("EXPLAIN QUERY PLAN ") + case_trend_sql();
    statement plan(db, sql.c_str());
    if (!plan.prepared("").is_ok())
        return;
    std::printf("query plan of case_trend:\n");
    for (auto row = plan.step(""); row.is_ok() && row.value(); row = plan.step(""))
        std::printf("  %s\n", plan.text(3).c_str());
}

/// The CLI as a process, output to a file: the median wall time of `repeat` runs.
double cli_time(const options& o, const std::vector<std::string>& args, const std::string& out) {
    pitfall::process_request request;
    request.argv = {o.pitfall};
    request.argv.insert(request.argv.end(), args.begin(), args.end());
    request.output_path = out;
    request.timeout_seconds = 600;
    return median_time(o.repeat, [&] { return pitfall::run_process(request).exit_code == 0; });
}

/// Stores the synthetic runs one by one: the seconds spent in store_run, or -1 on an error.
double store_all(const history_db& db, const options& o) {
    std::mt19937_64 random(20261128);
    double storing = 0;
    for (long i = 0; i < o.runs; ++i) {
        const run_rows rows = make_run(i, o, random);
        const auto start = clock_type::now();
        if (auto done = store_run(db, rows); !done.is_ok()) {
            std::fprintf(stderr, "history_scale: %s\n", done.error().message().c_str());
            return -1;
        }
        storing += seconds_since(start);
        if ((i + 1) % 1000 == 0)
            std::fprintf(stderr, "  %ld runs stored (%.1f s)\n", i + 1, storing);
    }
    return storing;
}

int run_benchmark(int argc, char** argv) {
    options o;
    if (!parse(argc, argv, o))
        return 2;
    std::error_code ec;
    const fs::path folder =
        fs::temp_directory_path() / ("pitfall-history-scale-" + std::to_string(::getpid()));
    fs::create_directories(folder, ec);
    const std::string db_path = o.db.empty() ? (folder / "history.sqlite").string() : o.db;
    auto opened = history_db::open(db_path, true);
    if (!opened.is_ok()) {
        std::fprintf(stderr, "history_scale: %s\n", opened.error().message().c_str());
        return 2;
    }
    const history_db& db = opened.value();
    const double storing = store_all(db, o);
    if (storing < 0)
        return 1;
    (void)db.exec("PRAGMA wal_checkpoint(TRUNCATE)", "checkpointing");
    const double rows_total = double(o.runs) * double(o.cases);
    const auto bytes = fs::file_size(db_path, ec);

    const std::string key = case_key(std::min<long>(20, o.cases - 1));
    trend_filter filter; // as `history show` (the table) and `history changes` read it
    filter.case_key = key;
    filter.without_samples = true;
    std::vector<trend_point> points;
    const double trend_s = median_time(o.repeat, [&] {
        auto found = case_trend(db, filter);
        points = found.is_ok() ? std::move(found.value()) : std::vector<trend_point>{};
        return found.is_ok();
    });
    const double table_s = median_time(o.repeat, [&] {
        auto fresh = history_db::open(db_path, false); // as the command does: open, read, print
        auto found = fresh.is_ok() ? case_trend(fresh.value(), filter)
                                   : pitfall::status_or<std::vector<trend_point>>(fresh.error());
        return found.is_ok() && !trend_table(found.value()).empty();
    });
    std::size_t change_points = 0;
    const double changes_s = median_time(o.repeat, [&] {
        auto found = changes_of(points);
        change_points = 0;
        if (found.is_ok())
            for (const auto& g : found.value())
                change_points += g.analysis.change_points.size();
        return found.is_ok();
    });
    const std::string out = (folder / "cli-output.txt").string();
    const double cli_show_s = cli_time(o, {"history", "show", "--case", key, "--db", db_path}, out);
    const double cli_changes_s =
        cli_time(o, {"history", "changes", "--case", key, "--db", db_path}, out);

    std::printf("pitfall history at scale: %ld runs x %ld cases = %.0f case rows (SQLite %s)\n\n",
                o.runs, o.cases, rows_total, sqlite3_libversion());
    std::printf("| measure | value |\n|---|---|\n");
    std::printf("| ingest (store_run, one transaction a run) | %.1f s: %.0f runs/s, %.0f case "
                "rows/s |\n",
                storing, double(o.runs) / storing, rows_total / storing);
    std::printf("| database size | %.1f MB, %.0f bytes per case row |\n", double(bytes) / 1e6,
                double(bytes) / rows_total);
    std::printf("| case_trend, one case (%zu runs) | %.1f ms |\n", points.size(), trend_s * 1e3);
    std::printf("| open + case_trend + trend_table | %.1f ms (target < 100 ms) |\n", table_s * 1e3);
    std::printf("| `pitfall history show --case` (process) | %.1f ms |\n", cli_show_s * 1e3);
    std::printf("| changes_of, one case (%zu change points) | %.3f s (target < 1 s) |\n",
                change_points, changes_s);
    std::printf("| `pitfall history changes --case` (process) | %.3f s |\n", cli_changes_s);
    std::printf("\nmedians of %ld; case %s\n", o.repeat, key.c_str());
    print_plan(db);
    const bool keep = o.keep || !o.db.empty(); // a database named by --db is the caller's
    if (keep)
        std::printf("database kept: %s\n", db_path.c_str());
    if (!(keep && o.db.empty()))
        fs::remove_all(folder, ec); // the CLI's output, and the default database
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run_benchmark(argc, argv);
    } catch (const std::exception& e) { // a full disk, a JSON value out of range: said, not aborted
        std::fprintf(stderr, "history_scale: %s\n", e.what());
        return 1;
    }
}
