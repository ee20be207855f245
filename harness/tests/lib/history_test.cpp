// The results database on real SQLite files: its schema, ingesting run folders (twice, and
// again after a resume), the trend query's filters, a version-1 file migrated, and the files it
// refuses (newer schema, another application's, damaged, not a file).
#include "history/history_db.hpp"
#include "history/ingest.hpp"
#include "history/query.hpp"
#include "run/run_folder.hpp"

#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace {
using namespace pitfall;
using namespace pitfall::runner;
namespace fs = std::filesystem;
using nlohmann::json;

class HistoryDatabase : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-history-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_tmp = pattern;
        m_db = m_tmp + "/nested/folder/history.sqlite";
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(m_tmp, ec);
    }

    static case_record record(const std::string& key, const std::vector<double>& samples) {
        case_record r;
        r.key = case_key::parse(key).value();
        r.verdict = verdict_kind::pass;
        r.reason = "as expected";
        r.observed = {{"status", "error"}, {"error", "std::out_of_range"}};
        r.process.wall_seconds = 0.25;
        r.process.peak_rss_bytes = 3 << 20;
        // A result document as reports/schema/result.schema.json has it (the reader checks).
        r.result = {{"schema", "pitfall.result/1"},
                    {"scenario", r.key.scenario},
                    {"variant", r.key.variant},
                    {"backend", "cpu"},
                    {"params", {{"samples", samples.size()}, {"warmup", 0}}},
                    {"outcome", {{"status", "ok"}}},
                    {"ran_on", "cpu"},
                    {"measurements", json::object()},
                    // A control measured beside the series in the same process (median 0.5).
                    {"samples",
                     {{"train_seconds",
                       {{"unit", "s"},
                        {"values", samples},
                        {"controls", {{"host_blas", {0.5, 0.5, 1.0}}}}}}}},
                    {"events", json::object()},
                    {"info", json::object()},
                    {"checks", json::array()},
                    {"memory",
                     {{"tracked_peak_bytes", 4096},
                      {"tracked_current_bytes", 0},
                      {"limit_bytes", nullptr},
                      {"allocations", 1},
                      {"failed_allocations", 0}}}};
        r.log = run_folder::log_name(r.key);
        return r;
    }
    /// A run folder of `keys` (each timed with `samples`), started `at` on `host`.
    std::string make_run(const std::string& name, const std::string& at, const std::string& host,
                         const std::vector<std::string>& keys, const std::vector<double>& samples) {
        std::string dir = m_tmp + "/" + name;
        auto created = run_folder::create(dir, false);
        EXPECT_TRUE(created.is_ok()) << created.error().message();
        run_header h;
        h.at = at;
        h.fingerprint_id = "0123456789abcdef";
        h.fingerprint = {{"host", {{"identity", {{"id", host}}}}}};
        h.profile = "host";
        h.build = {{"build_type", "Release"}, {"git_revision", "abc123"}};
        for (const auto& k : keys)
            h.selection.push_back(case_key::parse(k).value());
        EXPECT_TRUE(created->append(h).is_ok());
        for (const auto& k : keys)
            EXPECT_TRUE(created->append(record(k, samples)).is_ok());
        return dir;
    }
    history::ingest_outcome ingest(const history::history_db& db, const std::string& dir) {
        auto rows = history::read_run_rows(dir);
        EXPECT_TRUE(rows.is_ok()) << rows.error().message();
        if (!rows.is_ok())
            return history::ingest_outcome::unchanged;
        auto done = history::store_run(db, rows.value());
        EXPECT_TRUE(done.is_ok()) << done.error().message();
        return done.is_ok() ? done->outcome : history::ingest_outcome::unchanged;
    }
    /// The first column of the first row of `sql` on the file itself, outside the library.
    static std::string raw_query(const std::string& path, const std::string& sql) {
        sqlite3* db = nullptr;
        EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
        sqlite3_stmt* s = nullptr;
        std::string out;
        if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) != nullptr)
            out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
        sqlite3_close(db);
        return out;
    }
    static void raw_exec(const std::string& path, const std::string& sql) {
        sqlite3* db = nullptr;
        ASSERT_EQ(
            sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr),
            SQLITE_OK);
        char* error = nullptr;
        const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
        const std::string message = error != nullptr ? error : "";
        sqlite3_free(error);
        sqlite3_close(db);
        ASSERT_EQ(rc, SQLITE_OK) << message;
    }
    /// Opening `path` is refused as bad input naming it, saying `why`.
    static void expect_refused(const std::string& path, const std::string& why) {
        auto db = history::history_db::open(path, true);
        ASSERT_FALSE(db.is_ok()) << path << " was opened";
        EXPECT_EQ(db.error().name(), "bad_input");
        EXPECT_NE(db.error().message().find(path), std::string::npos) << db.error().message();
        EXPECT_NE(db.error().message().find(why), std::string::npos) << db.error().message();
    }

    std::string m_tmp;
    std::string m_db;
};

TEST_F(HistoryDatabase, CreatesTheSchemaWithWalAndItsOwner) {
    auto db = history::history_db::open(m_db, true);
    ASSERT_TRUE(db.is_ok()) << db.error().message();
    EXPECT_EQ(raw_query(m_db, "PRAGMA user_version"), std::to_string(history::schema_version));
    EXPECT_EQ(raw_query(m_db, "PRAGMA application_id"), std::to_string(history::application_id));
    EXPECT_EQ(raw_query(m_db, "PRAGMA journal_mode"), "wal");
    EXPECT_EQ(raw_query(m_db, "SELECT value FROM meta WHERE key = 'application'"),
              "pitfall history");
    EXPECT_EQ(raw_query(m_db, "SELECT count(*) FROM sqlite_master WHERE name IN ('runs', "
                              "'cases', 'cases_by_case_time', 'runs_by_host_time')"),
              "4");
    // Opened again: nothing to migrate, and the file is still accepted.
    EXPECT_TRUE(history::history_db::open(m_db, false).is_ok());
}

TEST_F(HistoryDatabase, MissingDatabaseIsNotMadeForReading) {
    auto db = history::history_db::open(m_db, false);
    ASSERT_FALSE(db.is_ok());
    EXPECT_NE(db.error().message().find(m_db), std::string::npos);
    EXPECT_FALSE(fs::exists(m_db));
}

TEST_F(HistoryDatabase, IngestingTwiceIsANoOpAndAResumedRunIsUpdated) {
    const std::string dir =
        make_run("run", "2026-11-01T10:00:00Z", "host-a", {"cpu.s.a", "cpu.s.b"}, {3.0, 1.0, 2.0});
    auto db = history::history_db::open(m_db, true);
    ASSERT_TRUE(db.is_ok()) << db.error().message();
    EXPECT_EQ(ingest(db.value(), dir), history::ingest_outcome::added);
    EXPECT_EQ(ingest(db.value(), dir), history::ingest_outcome::unchanged);
    EXPECT_EQ(raw_query(m_db, "SELECT count(*) FROM runs"), "1");
    EXPECT_EQ(raw_query(m_db, "SELECT count(*) FROM cases"), "2");
    EXPECT_EQ(raw_query(m_db, "SELECT git_revision || ' ' || host_id || ' ' || profile FROM runs"),
              "abc123 host-a host");
    // The run folder grows (a resume finished another case): the same run, replaced.
    auto more = run_folder::resume(dir);
    ASSERT_TRUE(more.is_ok()) << more.error().message();
    ASSERT_TRUE(more->append(record("cpu.s.c", {5.0})).is_ok());
    EXPECT_EQ(ingest(db.value(), dir), history::ingest_outcome::updated);
    EXPECT_EQ(raw_query(m_db, "SELECT count(*) FROM runs"), "1");
    EXPECT_EQ(raw_query(m_db, "SELECT count(*) FROM cases"), "3");
}

TEST_F(HistoryDatabase, CaseRowsHoldOutcomeMemoryAndSeries) {
    const std::string dir =
        make_run("run", "2026-11-01T10:00:00Z", "host-a", {"cpu.s.a"}, {3.0, 1.0, 2.0});
    auto db = history::history_db::open(m_db, true);
    ASSERT_TRUE(db.is_ok());
    ingest(db.value(), dir);
    auto points = history::case_trend(db.value(), {"cpu.s.a", "", "", ""});
    ASSERT_TRUE(points.is_ok()) << points.error().message();
    ASSERT_EQ(points->size(), 1u);
    const history::trend_point& p = points->front();
    EXPECT_EQ(p.verdict, "PASS");
    EXPECT_EQ(p.status, "error");
    EXPECT_EQ(p.error, "std::out_of_range");
    EXPECT_EQ(p.peak_rss_bytes, std::int64_t{3} << 20);
    EXPECT_EQ(p.tracked_peak_bytes, 4096);
    EXPECT_EQ(p.series["train_seconds"]["median"], 2.0);
    EXPECT_EQ(p.series["train_seconds"]["unit"], "s");
    EXPECT_EQ(p.series["train_seconds"]["samples"], json({3.0, 1.0, 2.0}));
    // Its normalised twin, over the control's median from the same process, as the judge has it.
    EXPECT_EQ(p.series["train_seconds/host_blas"]["samples"], json({6.0, 2.0, 4.0}));
    EXPECT_EQ(p.series["train_seconds/host_blas"]["median"], 4.0);
    EXPECT_EQ(p.series["train_seconds/host_blas"]["unit"], "");
    EXPECT_NE(history::trend_table(points.value()).find("train_seconds"), std::string::npos);
}

TEST_F(HistoryDatabase, TrendWithoutSamplesKeepsUnitAndMedian) {
    const std::string dir =
        make_run("run", "2026-11-01T10:00:00Z", "host-a", {"cpu.s.a"}, {3.0, 1.0, 2.0});
    auto db = history::history_db::open(m_db, true);
    ASSERT_TRUE(db.is_ok());
    ingest(db.value(), dir);
    history::trend_filter f{"cpu.s.a", "", "", ""};
    f.without_samples = true;
    auto series = [&]() {
        auto points = history::case_trend(db.value(), f);
        EXPECT_TRUE(points.is_ok()) << points.error().message();
        return points.is_ok() && points->size() == 1 ? points->front().series : json();
    };
    EXPECT_EQ(series(), json::parse(R"({"train_seconds": {"unit": "s", "median": 2.0},
        "train_seconds/host_blas": {"unit": "", "median": 4.0, "control_median": 0.5}})"));
    // Rows edited by hand are read, never an error: what is not an object is left out.
    const std::pair<const char*, const char*> edited[] = {
        {"not json", "{}"},
        {"[1, 2]", "{}"},
        {R"({"a": "text", "b": {"median": 1, "samples": [1]}, "c": 5})",
         R"({"b": {"median": 1}})"}};
    for (const auto& [row, read] : edited) {
        raw_exec(m_db, "UPDATE cases SET series = '" + std::string(row) + "'");
        EXPECT_EQ(series(), json::parse(read)) << row;
    }
}

TEST_F(HistoryDatabase, TrendIsOldestFirstAndFiltered) {
    auto db = history::history_db::open(m_db, true);
    ASSERT_TRUE(db.is_ok());
    // Ingested out of time order: the trend is ordered by the runs' start times.
    ingest(db.value(), make_run("c", "2026-11-03T10:00:00Z", "host-b", {"cpu.s.a"}, {3.0}));
    ingest(db.value(), make_run("a", "2026-11-01T10:00:00Z", "host-a", {"cpu.s.a"}, {1.0}));
    ingest(db.value(),
           make_run("b", "2026-11-02T10:00:00Z", "host-a", {"cpu.s.a", "cpu.s.z"}, {2.0}));
    auto medians = [&](const history::trend_filter& f) {
        auto points = history::case_trend(db.value(), f);
        EXPECT_TRUE(points.is_ok()) << points.error().message();
        std::vector<double> out;
        for (const auto& p : points.value())
            out.push_back(p.series.contains("train_seconds")
                              ? p.series["train_seconds"]["median"].get<double>()
                              : -1.0);
        return out;
    };
    EXPECT_EQ(medians({"cpu.s.a", "", "", ""}), (std::vector<double>{1.0, 2.0, 3.0}));
    EXPECT_EQ(medians({"cpu.s.a", "", "host-a", ""}), (std::vector<double>{1.0, 2.0}));
    EXPECT_EQ(medians({"cpu.s.a", "", "", "2026-11-02"}), (std::vector<double>{2.0, 3.0}));
    EXPECT_EQ(medians({"cpu.s.a", "", "", "2026-11-02T10:00:01Z"}), (std::vector<double>{3.0}));
    EXPECT_EQ(medians({"cpu.s.a", "other_series", "", ""}),
              (std::vector<double>{-1.0, -1.0, -1.0}));
    EXPECT_EQ(medians({"cpu.s.nothing", "", "", ""}), (std::vector<double>{}));
    auto known = history::known_cases(db.value());
    ASSERT_TRUE(known.is_ok());
    EXPECT_EQ(known.value(), (std::vector<std::string>{"cpu.s.a", "cpu.s.z"}));
}

TEST_F(HistoryDatabase, SinceAcceptsOnlyTimesThatOrderAsText) {
    EXPECT_TRUE(history::valid_since("2026-11-02"));
    EXPECT_TRUE(history::valid_since("2026-11-02T10:00:00Z"));
    EXPECT_FALSE(history::valid_since("2026-11-2"));
    EXPECT_FALSE(history::valid_since("yesterday"));
    EXPECT_FALSE(history::valid_since("2026-11-02 10:00:00"));
}

TEST_F(HistoryDatabase, VersionOneIsMigrated) {
    fs::create_directories(fs::path(m_db).parent_path());
    raw_exec(m_db, history::migration_sql(1));
    raw_exec(m_db, "PRAGMA application_id = " + std::to_string(history::application_id) +
                       "; PRAGMA user_version = 1;"
                       "INSERT INTO runs (id, at, folder, cases_recorded, resumed, interrupted, "
                       "content, ingested_at) VALUES ('r1', '2026-10-01T00:00:00Z', '/x', 1, 0, "
                       "0, 'c', 'now');"
                       "INSERT INTO cases (run_id, case_key, verdict, series) VALUES ('r1', "
                       "'cpu.s.a', 'PASS', '{}');");
    auto db = history::history_db::open(m_db, false);
    ASSERT_TRUE(db.is_ok()) << db.error().message();
    EXPECT_EQ(raw_query(m_db, "PRAGMA user_version"), std::to_string(history::schema_version));
    EXPECT_EQ(raw_query(m_db, "SELECT run_at FROM cases"), "2026-10-01T00:00:00Z");
    auto points = history::case_trend(db.value(), {"cpu.s.a", "", "", ""});
    ASSERT_TRUE(points.is_ok());
    EXPECT_EQ(points->size(), 1u);
}

TEST_F(HistoryDatabase, NewerSchemaIsRefused) {
    ASSERT_TRUE(history::history_db::open(m_db, true).is_ok());
    raw_exec(m_db, "PRAGMA user_version = 99");
    expect_refused(m_db, "schema version 99 is newer");
}

TEST_F(HistoryDatabase, AnotherApplicationsDatabaseIsRefusedAndLeftAlone) {
    const std::string other = m_tmp + "/other.sqlite";
    raw_exec(other, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')");
    expect_refused(other, "another application");
    EXPECT_EQ(raw_query(other, "PRAGMA journal_mode"), "delete"); // not switched to WAL
    const std::string stamped = m_tmp + "/stamped.sqlite";
    raw_exec(stamped, "PRAGMA application_id = 42; CREATE TABLE t (x)");
    expect_refused(stamped, "application_id 42");
    // Ours by its id, but holding a table pitfall never makes (and no meta table): refused by
    // the schema check, before any query of its tables.
    const std::string no_meta = m_tmp + "/no-meta.sqlite";
    raw_exec(no_meta, "PRAGMA application_id = " + std::to_string(history::application_id) +
                          "; CREATE TABLE t (x)");
    expect_refused(no_meta, "a table 't' pitfall did not make");
}

TEST_F(HistoryDatabase, DamagedFilesAreRefused) {
    const std::string noise = m_tmp + "/noise.sqlite";
    {
        std::mt19937 random(7);
        std::ofstream out(noise, std::ios::binary);
        for (int i = 0; i < 8192; ++i)
            out.put(char(random() & 0xFF));
    }
    expect_refused(noise, "not an SQLite database");
    // A real database with many pages, cut in half (a copy interrupted, a full disk).
    {
        auto db = history::history_db::open(m_db, true);
        ASSERT_TRUE(db.is_ok());
        for (int i = 0; i < 20; ++i)
            ingest(db.value(), make_run("run" + std::to_string(i),
                                        "2026-11-01T10:00:" + std::to_string(10 + i) + "Z", "h",
                                        {"cpu.s.a", "cpu.s.b"}, std::vector<double>(200, 1.0)));
    } // closed: checkpointed, the write-ahead log removed
    ASSERT_FALSE(fs::exists(m_db + "-wal"));
    const auto size = fs::file_size(m_db);
    ASSERT_GT(size, 8192u);
    fs::resize_file(m_db, size / 2);
    expect_refused(m_db, "truncated");
    // A header and nothing else.
    fs::resize_file(m_db, 50);
    expect_refused(m_db, "not an SQLite database");
}

TEST_F(HistoryDatabase, WhatIsNotAFileIsRefused) {
    const std::string folder = m_tmp + "/a-folder";
    fs::create_directories(folder);
    expect_refused(folder, "not a regular file");
    const std::string fifo = m_tmp + "/fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    expect_refused(fifo, "not a regular file");
}

TEST_F(HistoryDatabase, BadRunFolderIsBadInputNamingIt) {
    auto rows = history::read_run_rows(m_tmp + "/nothing-here");
    ASSERT_FALSE(rows.is_ok());
    EXPECT_NE(rows.error().message().find("nothing-here"), std::string::npos);
}

} // namespace
