// The results database of `pitfall history`: every run folder's header and cases as rows of one
// SQLite file, so that a case's trend over weeks of runs is one query. The run folders stay the
// source of truth: the database can always be rebuilt from them (docs/history.md).
//
//   PITFALL_ASSIGN_OR_RETURN(history::history_db db, history::history_db::open(path, true));
//   PITFALL_ASSIGN_OR_RETURN(auto outcome, history::ingest_run(db, run_dir));   (ingest.hpp)
//
// Safety: WAL journal with a busy timeout (two writers wait, neither fails), the schema's
// version in PRAGMA user_version and the file's owner in PRAGMA application_id and the meta
// table; a database of a newer schema, of another application, or damaged is refused naming
// the file (pitfall_error::bad_input: exit 2).
#pragma once

#include "pitfall/status.hpp"

#include <chrono>
#include <cstdint>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace pitfall::history {

/// The schema this build writes; opening applies the migrations from the file's version up.
inline constexpr int schema_version = 3;
/// PRAGMA application_id of a pitfall history database: "ptfh" in ASCII.
inline constexpr std::int32_t application_id = 0x70746668;
/// The meta table's "application" value.
inline constexpr const char* application_name = "pitfall history";
/// How long a writer waits for another one's transaction before giving up.
inline constexpr int busy_timeout_ms = 10000;
/// The variable naming the database (`pitfall history` and `pitfall run --history` defaults).
inline constexpr const char* history_env = "PITFALL_HISTORY";

/// $PITFALL_HISTORY, else $XDG_DATA_HOME/pitfall/history.sqlite (an absolute XDG_DATA_HOME),
/// else $HOME/.local/share/pitfall/history.sqlite; bad_environment when none can be formed.
status_or<std::string> default_database_path();

/// The SQL of each schema step: [0] makes version 1 from nothing, [1] makes 2 from 1, ...
/// Public so that a test can build a database of an older version by hand.
const char* migration_sql(int to_version);

class history_db {
public:
    /// Opens `path`; with `create`, a missing file (and its folders) is made with the current
    /// schema. An older schema is migrated in one transaction. Refused (bad_input naming the
    /// file): a path that is not a regular file, a file that is not an SQLite database or is
    /// truncated, another application's database, a newer schema.
    static status_or<history_db> open(const std::string& path, bool create);
    /// An empty database in memory (no file, no schema): what a file's schema is compared with.
    static status_or<history_db> in_memory();

    history_db(history_db&& other) noexcept;
    history_db& operator=(history_db&& other) noexcept;
    history_db(const history_db&) = delete;
    history_db& operator=(const history_db&) = delete;
    ~history_db();

    const std::string& path() const { return m_path; }
    sqlite3* handle() const { return m_db; }

    /// Runs `sql` (no rows expected); an error names the file and the statement's purpose.
    status exec(const char* sql, const char* purpose) const;
    /// The error of the last call on this connection as a status naming the file.
    status failure(const std::string& purpose) const;

    /// How long one statement may run: a query past it (or one Ctrl-C or TERM came during)
    /// ends with SQLITE_INTERRUPT, an error naming the file, never a hang.
    static constexpr std::chrono::seconds query_budget{60};
    /// Each statement's budget starts when it is made (statement's constructor calls it).
    void start_query() const { m_deadline = std::chrono::steady_clock::now() + query_budget; }
    std::chrono::steady_clock::time_point query_deadline() const { return m_deadline; }

private:
    history_db(std::string path, sqlite3* db) : m_path(std::move(path)), m_db(db) {}
    status configure();
    status check_owner_and_migrate();
    void watch_queries(); ///< installs the progress callback that ends a statement past its time

    std::string m_path;
    sqlite3* m_db = nullptr;
    mutable std::chrono::steady_clock::time_point m_deadline{};
};

/// bad_input naming the database: what every refusal of a database is.
status bad_database(const std::string& path, const std::string& why);

/// One prepared statement: bind by position (1-based), step through rows, read columns.
class statement {
public:
    statement(const history_db& db, const char* sql);
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;
    ~statement();

    /// Whether preparing succeeded; the failure names the file and `purpose`.
    status prepared(const std::string& purpose) const;
    void bind(int at, const std::string& text);
    void bind(int at, std::int64_t number);
    void bind(int at, double number);
    void bind_null(int at);
    /// true: a row to read; false: done.
    status_or<bool> step(const std::string& purpose);
    void reset();

    std::string text(int column) const;
    bool is_null(int column) const;
    std::int64_t integer(int column) const;
    double real(int column) const;

private:
    const history_db& m_db;
    sqlite3_stmt* m_stmt = nullptr;
};

} // namespace pitfall::history
