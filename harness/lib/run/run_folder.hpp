// A run folder: what `pitfall run` writes and what resume, report, compare and bless read.
//
//   <dir>/results.jsonl      one record a line (model.hpp), appended as each case finishes
//   <dir>/summary.json       counts, ratios and the exit code, rewritten at the end
//   <dir>/fingerprint.json   the environment fingerprint
//   <dir>/cases/<key>.json   each case's result document
//   <dir>/logs/<key>.log     each case's output (and probe.log)
//
//   PITFALL_ASSIGN_OR_RETURN(run_folder folder, run_folder::open(dir));
//   PITFALL_ASSIGN_OR_RETURN(const run_log log, folder.read());
#pragma once

#include "model/model.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pitfall::runner {

/// What results.jsonl says, read once.
struct run_log {
    run_header header;        ///< the "run" record that started the folder
    run_header latest;        ///< the newest "run" or "resumed": the last session's fingerprint
    int resumed = 0;          ///< how many times --resume continued it
    bool interrupted = false; ///< an "interrupted" record not followed by a resume
    std::set<std::string> started;  ///< keys with a "started" record
    std::vector<case_record> cases; ///< the newest record of each case, in first-finished order

    const case_record* find(const std::string& key) const;
    /// Adds a case's record; a newer record of a case replaces the older one in its place.
    void keep(case_record record);

private:
    std::map<std::string, std::size_t> m_at; ///< key -> index in cases
};

class run_folder {
public:
    /// A new run at `dir` (made if missing). A folder that already holds a run is refused unless
    /// `replace`; then only what a run writes is removed (--out may name a folder holding more).
    static status_or<run_folder> create(const std::string& dir, bool replace);
    /// An existing run, to read: "not a run folder" without results.jsonl.
    static status_or<run_folder> open(const std::string& dir);
    /// An existing run, to complete: appends go to its results.jsonl, whose last line, if a
    /// kill cut it short, is cut off first so that the next record starts a line of its own.
    /// create and resume lock the folder for the life of the object: a second run or resume
    /// of it is bad input ("<dir> is in use by pitfall pid N"); open (readers) does not.
    static status_or<run_folder> resume(const std::string& dir);

    run_folder(run_folder&& other) noexcept;
    run_folder& operator=(run_folder&& other) noexcept;
    run_folder(const run_folder&) = delete;
    run_folder& operator=(const run_folder&) = delete;
    ~run_folder();

    const std::string& dir() const { return m_dir; }
    std::string results_path() const { return m_dir + "/results.jsonl"; }
    std::string summary_path() const { return m_dir + "/summary.json"; }
    std::string fingerprint_path() const { return m_dir + "/fingerprint.json"; }
    std::string logs_dir() const { return m_dir + "/logs"; }
    /// The lock a run or resume holds (flock) for as long as it writes the folder.
    std::string lock_path() const { return m_dir + "/.lock"; }
    std::string case_result_path(const case_key& key) const;
    std::string case_log_path(const case_key& key) const { return m_dir + "/" + log_name(key); }
    /// "logs/<key>.log": the log as records name it, relative to the folder.
    static std::string log_name(const case_key& key) { return "logs/" + key.str() + ".log"; }

    /// Appends one record as one line, fsync'd: a run killed at any moment keeps every line it
    /// finished. A write or fsync that fails (ENOSPC, EFBIG, EIO, a short write) cuts the file
    /// back to its length before the record and says so, naming the file and the errno.
    status append(const nlohmann::json& record);
    status append(const run_header& header) { return append(header.to_json()); }
    status append(const case_record& record) { return append(record.to_json()); }
    /// A "started" or "interrupted" record of a case.
    status append_event(const char* kind, const case_key& key, const std::string& at);

    /// Every line's JSON. A truncated last line (a kill mid-write) is skipped; any other
    /// malformed line is bad input naming the file and line.
    status_or<std::vector<nlohmann::json>> read_lines() const;
    /// The records, typed; a record of the wrong shape is bad input naming line and field. A
    /// file without a run header is "not written by pitfall run".
    status_or<run_log> read() const;
    /// summary.json's "ratios"; empty when the file is missing (a run killed before its end),
    /// bad input naming the file and field when it is there but damaged.
    status_or<nlohmann::json> summary_ratios() const;

    /// After the last case, before summary.json: results.jsonl checked against the bytes this
    /// process wrote (and, resumed, read and verified at the start), and written again from
    /// them where another process changed it in place, replaced or removed it. Its seal for
    /// summary.json's "records": {"sha256", "bytes", "lines", "line_sha256": [...],
    /// "restored": [what was found, each time]}. Every reader refuses records that do not
    /// match it, naming the first line that differs.
    status_or<nlohmann::json> seal();
    /// What seal() found and undid so far (empty: results.jsonl is as this process wrote it).
    const std::vector<std::string>& restorations() const { return m_restored; }
    /// The seal of results.jsonl's bytes `text` (without "restored").
    static nlohmann::json records_seal(std::string_view text);

private:
    explicit run_folder(std::string dir) : m_dir(std::move(dir)) {}
    status lock();
    status open_for_append();
    status write_failed(int err, off_t keep, bool cut);
    void close_files();
    /// Before each append: results.jsonl is still the file this process opened, whole, as
    /// long as it wrote it; else restore() from m_written. `next` names the record to come.
    status keep_ours(const std::string& next);
    /// results.jsonl written again from m_written (a new file renamed over whatever is there)
    /// and opened for appending; `why` is kept in m_restored.
    status restore(const std::string& why);

    std::string m_dir;
    int m_fd = -1;      ///< results.jsonl, for appending
    int m_lock_fd = -1; ///< <dir>/.lock, flock'd
    /// The SHA-256 of the last line on disk, which the next record names as its "prev": a line
    /// anyone else adds or changes breaks the chain there, and every reader refuses it.
    std::string m_last_digest;
    /// results.jsonl's bytes as this process wrote (or, resumed, verified) them: what a case
    /// that rewrites or replaces the file is undone from (the records of a run are small).
    std::string m_written;
    std::vector<std::string> m_restored; ///< each change another process made, as found
    /// Appends from the threads of `run --jobs N` one at a time (a pointer: the folder moves).
    std::unique_ptr<std::mutex> m_append_mutex = std::make_unique<std::mutex>();
};

} // namespace pitfall::runner
