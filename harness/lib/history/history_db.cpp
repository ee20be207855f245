// Opening the results database: checks of the file before SQLite reads it, the owner and
// version checks, WAL and the busy timeout, and the schema's migrations.
#include "history/history_db.hpp"

#include "pitfall/detail/process.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

namespace pitfall::history {
namespace fs = std::filesystem;

status bad_database(const std::string& path, const std::string& why) {
    return status::error(pitfall_error::bad_input, path + ": " + why, stage::none);
}

status_or<std::string> default_database_path() {
    const char* named = std::getenv(history_env);
    if (named != nullptr && *named != '\0')
        return std::string(named);
    // The XDG base directory rules: a relative XDG_DATA_HOME is invalid and ignored.
    const char* data_home = std::getenv("XDG_DATA_HOME");
    if (data_home != nullptr && data_home[0] == '/')
        return std::string(data_home) + "/pitfall/history.sqlite";
    const char* home = std::getenv("HOME");
    if (home != nullptr && home[0] == '/')
        return std::string(home) + "/.local/share/pitfall/history.sqlite";
    return status::error(pitfall_error::bad_environment,
                         std::string("no history database: set ") + history_env +
                             ", XDG_DATA_HOME or HOME, or give --db FILE",
                         stage::none);
}

namespace {

// Version 1: the runs and their cases. Version 2: each case row carries its run's start time,
// indexed with the case key, so that a case's trend (and, later, change points over it) reads
// one index range; runs are indexed by host for the per-host questions.
constexpr std::array<const char*, schema_version> migrations{
    R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
INSERT INTO meta (key, value) VALUES ('application', 'pitfall history');
CREATE TABLE runs (
  id TEXT PRIMARY KEY NOT NULL,
  at TEXT NOT NULL,
  folder TEXT NOT NULL,
  host_id TEXT,
  fingerprint_id TEXT,
  fingerprint_summary TEXT,
  profile TEXT,
  git_revision TEXT,
  build TEXT,
  pitfall_version TEXT,
  summary TEXT,
  cases_recorded INTEGER NOT NULL,
  resumed INTEGER NOT NULL,
  interrupted INTEGER NOT NULL,
  content TEXT NOT NULL,
  ingested_at TEXT NOT NULL
);
CREATE TABLE cases (
  run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  case_key TEXT NOT NULL,
  verdict TEXT NOT NULL,
  status TEXT,
  error TEXT,
  reason TEXT,
  peak_rss_bytes INTEGER,
  tracked_peak_bytes INTEGER,
  wall_seconds REAL,
  series TEXT NOT NULL,
  finished_at TEXT,
  PRIMARY KEY (run_id, case_key)
);
)sql",
    R"sql(
ALTER TABLE cases ADD COLUMN run_at TEXT;
UPDATE cases SET run_at = (SELECT at FROM runs WHERE runs.id = cases.run_id);
CREATE INDEX cases_by_case_time ON cases (case_key, run_at);
CREATE INDEX runs_by_host_time ON runs (host_id, at);
)sql",
    // A case's trend reads its own rows only: with its run's host and folder beside them, one
    // case over 10,000 runs is 10,000 row reads instead of 20,000 (the runs' rows, each in a
    // page of its own, were half of `history show`'s time).
    R"sql(
ALTER TABLE cases ADD COLUMN host_id TEXT;
ALTER TABLE cases ADD COLUMN run_folder TEXT;
UPDATE cases SET host_id = (SELECT host_id FROM runs WHERE runs.id = cases.run_id),
                 run_folder = (SELECT folder FROM runs WHERE runs.id = cases.run_id);
)sql",
};

std::uint32_t big_endian(const unsigned char* p, int bytes) {
    std::uint32_t v = 0;
    for (int i = 0; i < bytes; ++i)
        v = (v << 8) | p[i];
    return v;
}

/// What can be told from the file alone, before SQLite reads it: a regular file, an SQLite
/// header, and no fewer bytes than the header says the database has. The length is trusted only
/// where no write-ahead log is beside it: a checkpoint in progress may grow the file after
/// rewriting its first page.
status check_file(const std::string& path, bool create) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (!fs::exists(st)) {
        if (!create)
            return bad_database(path, "no history database here (`pitfall history ingest RUN "
                                      "--db FILE` makes one)");
        const fs::path parent = fs::path(path).parent_path();
        if (!parent.empty() && !fs::create_directories(parent, ec) && ec)
            return bad_database(path, "cannot make its folder: " + ec.message());
        return status::ok();
    }
    if (!fs::is_regular_file(st))
        return bad_database(path, "not a regular file: not a history database");
    const auto size = fs::file_size(path, ec);
    if (ec)
        return bad_database(path, "cannot read: " + ec.message());
    if (size == 0)
        return status::ok(); // an empty file is a new database to SQLite
    std::array<unsigned char, 100> header{};
    std::ifstream in(path, std::ios::binary);
    if (size < header.size() ||
        !in.read(reinterpret_cast<char*>(header.data()), std::streamsize(header.size())) ||
        std::memcmp(header.data(), "SQLite format 3", 16) != 0)
        return bad_database(path, "not an SQLite database (no SQLite header): not a history "
                                  "database");
    std::uint64_t page_size = big_endian(&header[16], 2);
    if (page_size == 1)
        page_size = 65536;
    const std::uint32_t pages = big_endian(&header[28], 4);
    const bool pages_valid = big_endian(&header[92], 4) == big_endian(&header[24], 4);
    const auto wal_size = fs::file_size(path + "-wal", ec);
    const bool has_wal = !ec && wal_size > 0;
    if (pages_valid && !has_wal && page_size * pages > size)
        return bad_database(path, "truncated: its header counts " +
                                      std::to_string(page_size * pages) + " bytes, the file has " +
                                      std::to_string(size));
    return status::ok();
}

} // namespace

const char* migration_sql(int to_version) {
    if (to_version < 1 || to_version > schema_version)
        return nullptr;
    return migrations[std::size_t(to_version - 1)];
}

status_or<history_db> history_db::open(const std::string& path, bool create) {
    PITFALL_TRY(check_file(path, create));
    sqlite3* raw = nullptr;
    const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
    history_db db(path, raw);
    if (rc != SQLITE_OK)
        return db.failure("cannot open");
    db.watch_queries();
    PITFALL_TRY(db.check_owner_and_migrate());
    return db;
}

status_or<history_db> history_db::in_memory() {
    sqlite3* raw = nullptr;
    const int rc =
        sqlite3_open_v2(":memory:", &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    history_db db(":memory:", raw);
    if (rc != SQLITE_OK)
        return db.failure("cannot open");
    db.watch_queries();
    return db;
}

namespace {
/// SQLite's progress callback: non-zero ends the statement (SQLITE_INTERRUPT) once its time is
/// up or Ctrl-C (or TERM) came.
int query_watch(void* self) {
    const auto* db = static_cast<const history_db*>(self);
    return interrupt_requested != 0 || std::chrono::steady_clock::now() > db->query_deadline() ? 1
                                                                                               : 0;
}
} // namespace

void history_db::watch_queries() {
    m_deadline = std::chrono::steady_clock::now() + query_budget;
    if (m_db != nullptr)
        sqlite3_progress_handler(m_db, 1000, query_watch, this);
}

history_db::history_db(history_db&& other) noexcept
    : m_path(std::move(other.m_path)), m_db(std::exchange(other.m_db, nullptr)) {
    watch_queries(); // the callback names the object it is given: this one now
}

history_db& history_db::operator=(history_db&& other) noexcept {
    if (this != &other) {
        sqlite3_close(m_db);
        m_path = std::move(other.m_path);
        m_db = std::exchange(other.m_db, nullptr);
        watch_queries();
    }
    return *this;
}

history_db::~history_db() {
    sqlite3_close(m_db); // a no-op on nullptr
}

status history_db::failure(const std::string& purpose) const {
    const char* why = m_db != nullptr ? sqlite3_errmsg(m_db) : "out of memory";
    return bad_database(m_path, purpose + ": " + why);
}

status history_db::exec(const char* sql, const char* purpose) const {
    if (sqlite3_exec(m_db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
        return failure(purpose);
    return status::ok();
}

namespace {

status_or<std::int64_t> pragma_number(const history_db& db, const char* sql) {
    statement read(db, sql);
    PITFALL_TRY(read.prepared("reading its header"));
    PITFALL_ASSIGN_OR_RETURN(const bool row, read.step("reading its header"));
    return row ? read.integer(0) : 0;
}

status refuse_newer(const history_db& db, std::int64_t version) {
    if (version > schema_version)
        return bad_database(db.path(), "schema version " + std::to_string(version) +
                                           " is newer than this pitfall reads (" +
                                           std::to_string(schema_version) +
                                           "): use a newer pitfall");
    if (version < 0)
        return bad_database(db.path(), "schema version " + std::to_string(version) +
                                           ": not a history database");
    return status::ok();
}

/// A schema object: type, name, table and SQL (SQLite's own, named sqlite_*, left out).
using schema_object = std::array<std::string, 4>;

status_or<std::vector<schema_object>> schema_objects(const history_db& db) {
    // sqlite_master is read as data: no view or trigger of the file runs.
    statement list(db, "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master "
                       "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name");
    PITFALL_TRY(list.prepared("reading its schema"));
    std::vector<schema_object> out;
    while (true) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, list.step("reading its schema"));
        if (!row)
            break;
        out.push_back({list.text(0), list.text(1), list.text(2), list.text(3)});
    }
    return out;
}

/// What a history database of `version` holds: its migrations, run in memory now.
status_or<std::vector<schema_object>> made_by_pitfall(std::int64_t version) {
    auto made = history_db::in_memory();
    if (!made.is_ok())
        return made.error();
    for (std::int64_t to = 1; to <= version; ++to)
        PITFALL_TRY(made.value().exec(migration_sql(int(to)), "making the schema to compare"));
    return schema_objects(made.value());
}

/// A file that holds exactly the schema pitfall made for its version, no more: a trigger could
/// rewrite verdicts as they are written (a crash stored as PASS), a view could stand in for a
/// table or never finish. The first difference is named.
status check_exact_schema(const history_db& db, std::int64_t version) {
    PITFALL_ASSIGN_OR_RETURN(const std::vector<schema_object> seen, schema_objects(db));
    PITFALL_ASSIGN_OR_RETURN(const std::vector<schema_object> made, made_by_pitfall(version));
    auto named = [](const std::vector<schema_object>& list, const schema_object& o) {
        return std::find_if(list.begin(), list.end(),
                            [&](const schema_object& x) { return x[0] == o[0] && x[1] == o[1]; });
    };
    for (const auto& o : seen) {
        const auto mine = named(made, o);
        if (mine == made.end())
            return bad_database(db.path(), "a " + o[0] + " '" + o[1] +
                                               "' pitfall did not make (on '" + o[2] +
                                               "'): not a history database pitfall can trust");
        if (*mine != o)
            return bad_database(db.path(), "its " + o[0] + " '" + o[1] +
                                               "' is not the one pitfall made: not a history "
                                               "database pitfall can trust");
    }
    for (const auto& o : made)
        if (named(seen, o) == seen.end())
            return bad_database(db.path(), "its " + o[0] + " '" + o[1] +
                                               "' is missing: not a history database");
    return status::ok();
}

/// Whether the file is ours, new, or neither; its schema must be exactly pitfall's for its
/// version, and the owner's meta table must say so too.
status_or<bool> is_new_database(const history_db& db) {
    // One statement, so one read of the file: read apart, another process making the same new
    // database could commit between them, and its tables would be seen without its id.
    statement header(db, "SELECT (SELECT application_id FROM pragma_application_id), "
                         "(SELECT count(*) FROM sqlite_master)");
    PITFALL_TRY(header.prepared("reading its header"));
    PITFALL_ASSIGN_OR_RETURN(const bool read, header.step("reading its header"));
    const std::int64_t app = read ? header.integer(0) : 0;
    const std::int64_t objects = read ? header.integer(1) : 0;
    if (app == 0 && objects == 0)
        return true;
    if (app != application_id)
        return bad_database(db.path(),
                            "an SQLite database of another application (application_id " +
                                std::to_string(app) + "): not a history database");
    // Before any query of its tables: a view in a table's place would run.
    PITFALL_ASSIGN_OR_RETURN(const std::int64_t version, pragma_number(db, "PRAGMA user_version"));
    PITFALL_TRY(refuse_newer(db, version));
    PITFALL_TRY(check_exact_schema(db, version));
    statement meta(db, "SELECT value FROM meta WHERE key = 'application'");
    if (!meta.prepared("").is_ok())
        return bad_database(db.path(), "no meta table: not a history database");
    PITFALL_ASSIGN_OR_RETURN(const bool row, meta.step("reading its meta table"));
    if (!row || meta.text(0) != application_name)
        return bad_database(db.path(), "its meta table names no 'pitfall history': not a "
                                       "history database");
    return false;
}

/// The journal mode `sql` answers; `busy` says whether a failure was another process's lock
/// (read before the statement is finalized, which may reset the connection's error code).
status_or<std::string> journal_mode(const history_db& db, const char* sql, bool& busy) {
    statement mode(db, sql);
    PITFALL_TRY(mode.prepared("setting the WAL journal"));
    auto row = mode.step("setting the WAL journal");
    const int code = sqlite3_errcode(db.handle());
    busy = !row.is_ok() && (code == SQLITE_BUSY || code == SQLITE_LOCKED);
    if (!row.is_ok())
        return row.error();
    return row.value() ? mode.text(0) : std::string();
}

} // namespace

status history_db::configure() {
    sqlite3_busy_timeout(m_db, busy_timeout_ms);
    PITFALL_TRY(exec("PRAGMA foreign_keys = ON", "enabling foreign keys"));
    // WAL: readers never block the writer, and a writer that finds another waits (busy
    // timeout) instead of failing. The mode is kept in the file: set once, then only read.
    bool busy = false;
    PITFALL_ASSIGN_OR_RETURN(std::string mode, journal_mode(*this, "PRAGMA journal_mode", busy));
    // Switching takes an exclusive lock, for which SQLite does not call the busy handler (a
    // process making the same new file holds its lock): it is retried here, as long as the busy
    // timeout would have waited.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
    while (mode != "wal") {
        auto set = journal_mode(*this, "PRAGMA journal_mode = WAL", busy);
        if (set.is_ok()) {
            mode = set.value();
            if (mode != "wal")
                return bad_database(m_path, "the WAL journal cannot be used here (journal mode '" +
                                                mode +
                                                "'): put the database on a local file system");
        } else if (!busy || std::chrono::steady_clock::now() > give_up) {
            return set.error();
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return status::ok();
}

status history_db::check_owner_and_migrate() {
    sqlite3_busy_timeout(m_db, busy_timeout_ms);
    // Read only, before anything is written: another application's file is left untouched.
    PITFALL_TRY(is_new_database(*this));
    PITFALL_ASSIGN_OR_RETURN(const std::int64_t seen, pragma_number(*this, "PRAGMA user_version"));
    PITFALL_TRY(refuse_newer(*this, seen));
    PITFALL_TRY(configure());
    if (seen == schema_version)
        return status::ok();
    // One writer migrates; one that waited finds the work done (the checks are repeated inside
    // the transaction, which sees the other's commit).
    PITFALL_TRY(exec("BEGIN IMMEDIATE", "starting its migration"));
    auto migrate = [&]() -> status {
        PITFALL_TRY(is_new_database(*this));
        PITFALL_ASSIGN_OR_RETURN(const std::int64_t from,
                                 pragma_number(*this, "PRAGMA user_version"));
        PITFALL_TRY(refuse_newer(*this, from));
        for (std::int64_t to = from + 1; to <= schema_version; ++to)
            PITFALL_TRY(exec(migration_sql(int(to)), "migrating its schema"));
        const std::string stamp = "PRAGMA application_id = " + std::to_string(application_id) +
                                  "; PRAGMA user_version = " + std::to_string(schema_version);
        return exec(stamp.c_str(), "stamping its schema version");
    };
    if (status done = migrate(); !done.is_ok()) {
        (void)exec("ROLLBACK", "rolling back its migration");
        return done;
    }
    return exec("COMMIT", "committing its migration");
}

statement::statement(const history_db& db, const char* sql) : m_db(db) {
    db.start_query();
    if (sqlite3_prepare_v2(db.handle(), sql, -1, &m_stmt, nullptr) != SQLITE_OK) {
        sqlite3_finalize(m_stmt);
        m_stmt = nullptr;
    }
}

statement::~statement() {
    sqlite3_finalize(m_stmt);
}

status statement::prepared(const std::string& purpose) const {
    return m_stmt != nullptr ? status::ok() : m_db.failure(purpose);
}

void statement::bind(int at, const std::string& text) {
    sqlite3_bind_text(m_stmt, at, text.data(), int(text.size()), SQLITE_TRANSIENT);
}
void statement::bind(int at, std::int64_t number) {
    sqlite3_bind_int64(m_stmt, at, number);
}
void statement::bind(int at, double number) {
    sqlite3_bind_double(m_stmt, at, number);
}
void statement::bind_null(int at) {
    sqlite3_bind_null(m_stmt, at);
}

status_or<bool> statement::step(const std::string& purpose) {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW)
        return true;
    if (rc == SQLITE_DONE)
        return false;
    return m_db.failure(purpose);
}

void statement::reset() {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
}

std::string statement::text(int column) const {
    const auto* p = sqlite3_column_text(m_stmt, column);
    return p != nullptr ? std::string(reinterpret_cast<const char*>(p),
                                      std::size_t(sqlite3_column_bytes(m_stmt, column)))
                        : std::string();
}
bool statement::is_null(int column) const {
    return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}
std::int64_t statement::integer(int column) const {
    return sqlite3_column_int64(m_stmt, column);
}
double statement::real(int column) const {
    return sqlite3_column_double(m_stmt, column);
}

} // namespace pitfall::history
