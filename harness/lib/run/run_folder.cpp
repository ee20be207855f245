#include "run/run_folder.hpp"

#include "pitfall/detail/json_file.hpp"
#include "report/report.hpp"
#include "util/sha256.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pitfall::runner {
using nlohmann::json;
namespace fs = std::filesystem;

const case_record* run_log::find(const std::string& key) const {
    const auto it = m_at.find(key);
    return it == m_at.end() ? nullptr : &cases[it->second];
}

void run_log::keep(case_record record) {
    const std::string key = record.key.str();
    if (const auto it = m_at.find(key); it != m_at.end()) {
        cases[it->second] = std::move(record);
        return;
    }
    m_at[key] = cases.size();
    cases.push_back(std::move(record));
}

std::string run_folder::case_result_path(const case_key& key) const {
    return m_dir + "/cases/" + key.str() + ".json";
}

run_folder::run_folder(run_folder&& other) noexcept
    : m_dir(std::move(other.m_dir)), m_fd(other.m_fd), m_lock_fd(other.m_lock_fd),
      m_last_digest(std::move(other.m_last_digest)), m_written(std::move(other.m_written)),
      m_restored(std::move(other.m_restored)), m_append_mutex(std::move(other.m_append_mutex)) {
    other.m_fd = -1;
    other.m_lock_fd = -1;
}

run_folder& run_folder::operator=(run_folder&& other) noexcept {
    if (this != &other) {
        close_files();
        m_dir = std::move(other.m_dir);
        m_fd = other.m_fd;
        m_lock_fd = other.m_lock_fd;
        m_last_digest = std::move(other.m_last_digest);
        m_written = std::move(other.m_written);
        m_restored = std::move(other.m_restored);
        m_append_mutex = std::move(other.m_append_mutex);
        other.m_fd = -1;
        other.m_lock_fd = -1;
    }
    return *this;
}

run_folder::~run_folder() {
    close_files();
}

void run_folder::close_files() {
    if (m_fd >= 0)
        ::close(m_fd);
    if (m_lock_fd >= 0)
        ::close(m_lock_fd); // releases the lock
    m_fd = m_lock_fd = -1;
}

namespace {

/// "No space left on device (ENOSPC)": the words and the name a person searches for.
std::string describe_errno(int err) {
    static const std::pair<int, const char*> names[] = {
        {ENOSPC, "ENOSPC"}, {EFBIG, "EFBIG"},   {EIO, "EIO"},        {EDQUOT, "EDQUOT"},
        {EROFS, "EROFS"},   {EACCES, "EACCES"}, {EBADF, "EBADF"},    {EINVAL, "EINVAL"},
        {ENOENT, "ENOENT"}, {EPERM, "EPERM"},   {ENOTDIR, "ENOTDIR"}};
    std::string text = std::strerror(err);
    for (const auto& [code, name] : names)
        if (code == err)
            return text + " (" + name + ")";
    return text + " (errno " + std::to_string(err) + ")";
}

/// A run folder holds only what pitfall made there: a symbolic link anywhere in it (a planted
/// results.jsonl, logs/ or cases/ pointing elsewhere) would have pitfall write, cut or delete
/// outside the folder. Every entry is looked at with lstat (links never followed), at most
/// 100000 of them, before anything is read, written or removed.
status refuse_links(const std::string& dir) {
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
    std::size_t seen = 0;
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (++seen > 100000)
            return bad_run_input(dir + ": more than 100000 entries: not a run folder pitfall made");
        if (it->is_symlink(ec))
            return bad_run_input(it->path().string() +
                                 ": a symbolic link inside a run folder (pitfall makes none, and "
                                 "writes only files of its own there): remove it");
    }
    if (ec && ec != std::errc::no_such_file_or_directory)
        return bad_run_input(dir + ": cannot read the run folder: " + ec.message());
    return status::ok();
}

/// The pid a lock file names; empty when it names none (its holder had not written it yet).
std::string lock_holder(int fd) {
    char text[32] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    std::string pid = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
    pid.erase(std::remove_if(pid.begin(), pid.end(), [](char c) { return c < '0' || c > '9'; }),
              pid.end());
    return pid;
}

} // namespace

namespace {

using numbered_lines = std::vector<std::pair<std::size_t, json>>; // (line number, record)

/// The lines of `path` (its bytes: `all`) as JSON with their numbers; a truncated last line is
/// skipped. A file whose first record names a "prev" is chained: each record must name the
/// SHA-256 of the line before it, so a line another process added, changed or removed (a case
/// forging a PASS for an earlier case) is refused, naming it.
status_or<numbered_lines> parse_lines(const std::string& path, std::string_view all) {
    std::vector<std::pair<std::size_t, std::string_view>> lines;
    std::size_t number = 0;
    for (std::size_t at = 0; at < all.size();) {
        const std::size_t end = std::min(all.find('\n', at), all.size());
        if (++number; end > at)
            lines.emplace_back(number, all.substr(at, end - at));
        at = end + 1;
    }
    numbered_lines records;
    bool chained = false;
    std::string previous; // the digest of the line before
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string place = path + ": line " + std::to_string(lines[i].first);
        auto record = detail::parse_json(lines[i].second, place);
        if (record.is_ok()) {
            const json& r = record.value();
            if (i == 0)
                chained = r.is_object() && r.contains("prev");
            if (chained && (!r.is_object() || r.value("prev", json()) != previous))
                return bad_run_input(place +
                                     ": not a record pitfall wrote there: it does not name the "
                                     "SHA-256 of the line before it (\"prev\"), so a line was "
                                     "added, changed or removed after pitfall wrote it");
            previous = sha256_hex(lines[i].second);
            records.emplace_back(lines[i].first, std::move(record).value());
            continue;
        }
        if (i + 1 == lines.size())
            break; // a kill mid-write: that case did not finish
        const std::string why = record.error().message().substr(place.size());
        std::string message = place + " is not JSON";
        message += why;
        return bad_run_input(message);
    }
    return records;
}

/// results.jsonl's bytes `text` against the seal summary.json keeps of them ("records"),
/// where the run ended and wrote one: the first line that differs is named. A folder without
/// that seal (a run killed before its end, or one written before seals) is read as it is.
status check_seal(const std::string& summary_path, const std::string& path, std::string_view text) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(summary_path, ec)))
        return status::ok();
    auto summary = detail::read_json_file(summary_path);
    if (!summary.is_ok() || !summary.value().is_object() || !summary.value().contains("records"))
        return status::ok(); // a damaged summary.json is refused by what reads it for itself
    const json& seal = summary.value()["records"];
    if (!seal.is_object() || !seal.contains("line_sha256") || !seal["line_sha256"].is_array())
        return bad_run_input(summary_path + ": /records: expected an object with line_sha256");
    const json& expected = seal["line_sha256"];
    std::size_t index = 0;
    std::size_t number = 0;
    for (std::size_t at = 0; at < text.size(); ++index) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        ++number;
        if (end == at) { // an empty line: no record, not sealed
            at = end + 1;
            --index;
            continue;
        }
        if (index >= expected.size() || !expected[index].is_string() ||
            expected[index].get<std::string>() !=
                sha256_hex(std::string(text.substr(at, end - at))))
            return bad_run_input(
                path + ": line " + std::to_string(number) +
                ": not the record pitfall wrote there (summary.json's seal of the records "
                "says otherwise): results.jsonl was changed after pitfall wrote it");
        at = end + 1;
    }
    if (index != expected.size())
        return bad_run_input(path + ": " + std::to_string(expected.size() - index) +
                             " records of summary.json's seal are missing after line " +
                             std::to_string(number) + ": results.jsonl was cut after pitfall " +
                             "wrote it");
    return status::ok();
}

status_or<numbered_lines> read_lines_of(const std::string& path,
                                        const std::string& summary_path = "") {
    auto text = detail::read_regular_file(path);
    if (!text.is_ok())
        return bad_run_input(text.error().message());
    if (!summary_path.empty())
        PITFALL_TRY(check_seal(summary_path, path, text.value()));
    return parse_lines(path, text.value());
}

} // namespace

status run_folder::lock() {
    // flock, not a pid file: the kernel lets go when the holder ends, however it ends (a
    // SIGKILL too), so a folder is never left locked by a run that is gone.
    const std::string path = lock_path();
    m_lock_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (m_lock_fd < 0)
        return bad_run_input("cannot lock " + m_dir + ": " + path + ": " + describe_errno(errno));
    int locked = ::flock(m_lock_fd, LOCK_EX | LOCK_NB);
    // The flock can outlive its run for an instant: a process forked by a run that was then
    // killed holds the descriptor until it execs (close-on-exec) or is ended by the run's
    // guardian. While the pid written in the file is gone, wait a little for that to pass.
    for (int tries = 0; locked != 0 && errno == EWOULDBLOCK && tries < 50; ++tries) {
        const std::string holder = lock_holder(m_lock_fd);
        if (!holder.empty() && holder.size() < 10 &&
            ::kill(static_cast<pid_t>(std::stol(holder)), 0) == 0)
            break; // the run that wrote it is alive: in use
        ::usleep(100 * 1000);
        locked = ::flock(m_lock_fd, LOCK_EX | LOCK_NB);
    }
    if (locked != 0) {
        const int err = errno;
        const std::string pid = lock_holder(m_lock_fd);
        ::close(m_lock_fd);
        m_lock_fd = -1;
        if (err == EWOULDBLOCK)
            return bad_run_input(m_dir + " is in use by pitfall " +
                                 (pid.empty() ? std::string("(another process)") : "pid " + pid) +
                                 ": one run at a time writes a run folder");
        return bad_run_input("cannot lock " + path + ": " + describe_errno(err));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    // The pid is for the message of a run refused; the lock itself is the flock.
    if (::ftruncate(m_lock_fd, 0) != 0 ||
        ::pwrite(m_lock_fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
        return bad_run_input("cannot write " + path + ": " + describe_errno(errno));
    return status::ok();
}

status_or<run_folder> run_folder::create(const std::string& dir, bool replace) {
    run_folder folder(dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir, ec))
        return bad_run_input("--out " + dir + ": cannot create the run folder" +
                             (ec ? ": " + ec.message() : std::string()));
    PITFALL_TRY(refuse_links(dir));
    // Locked before anything is looked at or removed: a run in progress is never replaced.
    PITFALL_TRY(folder.lock());
    if (fs::exists(folder.results_path(), ec)) {
        if (!replace)
            return bad_run_input("--out " + dir +
                                 " already holds a run (use --resume to complete "
                                 "it, --replace to start it afresh)");
        // Everything the old run wrote, its reports included: a new run killed before its own
        // are written must not sit beside the old run's green junit.xml. Nothing else (a
        // user's file in the folder is not pitfall's to delete).
        for (const char* item :
             {"results.jsonl", "summary.json", "fingerprint.json", "cases", "logs",
              report_json_name, report_junit_name, report_markdown_name, report_html_name})
            fs::remove_all(fs::path(dir) / item, ec);
    }
    fs::create_directories(dir + "/cases", ec);
    if (!ec)
        fs::create_directories(folder.logs_dir(), ec);
    if (ec || ::access(dir.c_str(), W_OK) != 0)
        return bad_run_input("--out " + dir + ": cannot create or write the run folder" +
                             (ec ? ": " + ec.message() : std::string()));
    PITFALL_TRY(folder.open_for_append());
    return folder;
}

status_or<run_folder> run_folder::open(const std::string& dir) {
    run_folder folder(dir);
    std::error_code ec;
    // results.jsonl first: a folder that is no run (`pitfall report /tmp`) is said so at once,
    // instead of after a walk of everything under it looking for links.
    // (A results.jsonl that is a link is left to refuse_links, which names it.)
    const auto results = fs::symlink_status(folder.results_path(), ec);
    if (!fs::is_regular_file(results) && !fs::is_symlink(results))
        return bad_run_input(dir + ": not a run folder (no results.jsonl)");
    PITFALL_TRY(refuse_links(dir));
    return folder;
}

status_or<run_folder> run_folder::resume(const std::string& dir) {
    PITFALL_ASSIGN_OR_RETURN(run_folder folder, open(dir));
    // Locked before the last line is repaired: a line another run is writing is not cut.
    PITFALL_TRY(folder.lock());
    std::error_code ec;
    fs::create_directories(dir + "/cases", ec);
    fs::create_directories(folder.logs_dir(), ec);
    PITFALL_TRY(folder.open_for_append());
    return folder;
}

status run_folder::open_for_append() {
    const std::string path = results_path();
    // O_NOFOLLOW: a link put there since the folder was looked at is refused, not followed.
    m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (m_fd < 0)
        return bad_run_input("cannot write " + path + ": " + describe_errno(errno) +
                             (errno == ELOOP ? " (a symbolic link: refused)" : ""));
    struct stat st {};
    if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode))
        return bad_run_input(path + ": not a regular file: refused");
    // A line cut short by a kill mid-write is cut off, back to the last whole record, so the
    // next record starts a line of its own and every later read sees only whole lines. Read
    // through the descriptor opened above: the file checked is the file cut.
    std::string text;
    char buffer[65536];
    for (off_t at = 0;;) {
        const ssize_t n = ::pread(m_fd, buffer, sizeof buffer, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return bad_run_input("cannot read " + path + ": " + describe_errno(errno));
        if (n == 0)
            break;
        text.append(buffer, static_cast<std::size_t>(n));
        at += n;
    }
    if (!text.empty() && text.back() != '\n') {
        const auto last_newline = text.rfind('\n');
        const off_t keep =
            last_newline == std::string::npos ? 0 : static_cast<off_t>(last_newline + 1);
        if (::ftruncate(m_fd, keep) != 0)
            return bad_run_input("cannot repair " + path + ": " + describe_errno(errno));
        text.resize(static_cast<std::size_t>(keep));
    }
    // The chain goes on from the last whole line, once the lines before it are shown to be
    // pitfall's (a resumed run does not vouch for a line it did not write).
    if (!text.empty()) {
        PITFALL_TRY(parse_lines(path, text));
        PITFALL_TRY(check_seal(summary_path(), path, text));
        m_written = text;
        text.pop_back(); // its newline
        m_last_digest = sha256_hex(text.substr(text.rfind('\n') + 1));
    }
    return status::ok();
}

status run_folder::keep_ours(const std::string& next) {
    struct stat open {};
    struct stat on_disk {};
    const std::string path = results_path();
    const bool fstat_ok = ::fstat(m_fd, &open) == 0;
    const bool there = ::lstat(path.c_str(), &on_disk) == 0;
    std::string why;
    if (!fstat_ok)
        return bad_run_input("cannot read " + path + ": " + describe_errno(errno));
    if (!there)
        why = "removed";
    else if (!S_ISREG(on_disk.st_mode) || on_disk.st_dev != open.st_dev ||
             on_disk.st_ino != open.st_ino || open.st_nlink == 0)
        why = "replaced by another file";
    else if (static_cast<std::size_t>(open.st_size) != m_written.size())
        why = "changed in length (" + std::to_string(open.st_size) + " bytes, pitfall wrote " +
              std::to_string(m_written.size()) + ")";
    if (why.empty())
        return status::ok();
    return restore("results.jsonl " + why + " while cases ran, found before " + next);
}

status run_folder::restore(const std::string& why) {
    const std::string path = results_path();
    std::string temporary = m_dir + "/.results.jsonl.restore.XXXXXX";
    const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
    if (fd < 0)
        return bad_run_input(
            why + "; and cannot write it again from pitfall's own copy: " + describe_errno(errno));
    bool ok = ::fchmod(fd, 0644) == 0;
    for (std::size_t done = 0; ok && done < m_written.size();) {
        const ssize_t n = ::write(fd, m_written.data() + done, m_written.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        ok = n > 0;
        done += ok ? static_cast<std::size_t>(n) : 0;
    }
    ok = ok && ::fsync(fd) == 0;
    ::close(fd);
    std::error_code ec;
    // Whatever stands at the name (a folder, a link) goes; the name is pitfall's.
    if (ok && ::rename(temporary.c_str(), path.c_str()) != 0) {
        fs::remove_all(path, ec);
        ok = ::rename(temporary.c_str(), path.c_str()) == 0;
    }
    if (!ok) {
        const int err = errno;
        ::unlink(temporary.c_str());
        return bad_run_input(
            why + "; and cannot write it again from pitfall's own copy: " + describe_errno(err));
    }
    ::close(m_fd);
    m_fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (m_fd < 0)
        return bad_run_input(why + "; written again, but cannot open it: " + describe_errno(errno));
    m_restored.push_back(why + ": written again from pitfall's own copy");
    return status::ok();
}

json run_folder::records_seal(std::string_view text) {
    json lines = json::array();
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = std::min(text.find('\n', at), text.size());
        if (end > at)
            lines.push_back(sha256_hex(std::string(text.substr(at, end - at))));
        at = end + 1;
    }
    return {{"sha256", sha256_hex(std::string(text))},
            {"bytes", text.size()},
            {"lines", lines.size()},
            {"line_sha256", std::move(lines)}};
}

status_or<json> run_folder::seal() {
    const std::lock_guard<std::mutex> one_at_a_time(*m_append_mutex);
    PITFALL_TRY(keep_ours("the summary"));
    // Same file, same length: the bytes themselves, which a case may have changed in place.
    std::string on_disk(m_written.size(), '\0');
    std::size_t done = 0;
    while (done < on_disk.size()) {
        const ssize_t n =
            ::pread(m_fd, on_disk.data() + done, on_disk.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += static_cast<std::size_t>(n);
    }
    if (done != on_disk.size() || on_disk != m_written)
        PITFALL_TRY(restore("results.jsonl changed in place while cases ran, found before the "
                            "summary"));
    json out = records_seal(m_written);
    out["restored"] = m_restored;
    return out;
}

status run_folder::append(const json& record) {
    if (m_fd < 0)
        return bad_run_input(results_path() + ": opened for reading, not for appending");
    // Text from outside (argv, paths, the environment, a child's output) is made UTF-8 where
    // it enters a record; replacing here too means a byte missed there costs a character,
    // not the run (dump() would throw).
    const std::lock_guard<std::mutex> one_at_a_time(*m_append_mutex);
    PITFALL_TRY(keep_ours(record.contains("case") && record["case"].is_string()
                              ? "the record of " + record["case"].get<std::string>()
                              : std::string("the next record")));
    json chained = record;
    chained["prev"] = m_last_digest; // "" on the first line: the chain starts there
    const std::string body = chained.dump(-1, ' ', false, json::error_handler_t::replace);
    const std::string line = body + "\n";
    struct stat before {};
    if (::fstat(m_fd, &before) != 0)
        return write_failed(errno, 0, false);
    std::size_t done = 0;
    while (done < line.size()) {
        const ssize_t n = ::write(m_fd, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) // 0: a short write that made no progress; say it as the disk being full
            return write_failed(n < 0 ? errno : ENOSPC, before.st_size, true);
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(m_fd) != 0)
        return write_failed(errno, before.st_size, true);
    m_written += line;
    m_last_digest = sha256_hex(body);
    return status::ok();
}

status run_folder::write_failed(int err, off_t keep, bool cut) {
    // Back to the length before this record: never a partial line, so every line on disk is a
    // record that was written whole (a resume appends after it).
    std::string message = "cannot write " + results_path() + ": " + describe_errno(err);
    if (cut && ::ftruncate(m_fd, keep) != 0)
        message += "; and cannot cut it back to its last whole line: " + describe_errno(errno);
    return bad_run_input(message);
}

status run_folder::append_event(const char* kind, const case_key& key, const std::string& at) {
    return append(json{{"record", kind}, {"case", key.str()}, {"at", at}});
}

status_or<std::vector<json>> run_folder::read_lines() const {
    PITFALL_ASSIGN_OR_RETURN(numbered_lines lines, read_lines_of(results_path(), summary_path()));
    std::vector<json> records;
    for (auto& [number, record] : lines)
        records.push_back(std::move(record));
    return records;
}

namespace {

/// Adds one record to the log; a record of the wrong shape is an error without the place.
status add_record(run_log& log, bool& have_header, const json& j) {
    PITFALL_ASSIGN_OR_RETURN(const std::string kind, record_kind(j));
    if (kind == "run" || kind == "resumed") {
        PITFALL_ASSIGN_OR_RETURN(run_header h, run_header::from_json(j));
        if (kind == "resumed") {
            ++log.resumed;
            log.interrupted = false;
        } else if (!have_header) {
            log.header = h;
            have_header = true;
        }
        log.latest = std::move(h);
    } else if (kind == "case") {
        PITFALL_ASSIGN_OR_RETURN(case_record c, case_record::from_json(j));
        log.keep(std::move(c));
    } else if (kind == "started" || kind == "interrupted") {
        const auto key = j.find("case");
        if (key == j.end() || !key->is_string())
            return bad_run_input("field 'case': expected a string (the case key)");
        if (kind == "started")
            log.started.insert(key->get<std::string>());
        else
            log.interrupted = true;
    } else {
        return bad_run_input("field 'record': '" + kind + "' is not a record kind (run, resumed, " +
                             "started, case, interrupted)");
    }
    return status::ok();
}

} // namespace

status_or<run_log> run_folder::read() const {
    PITFALL_ASSIGN_OR_RETURN(const numbered_lines lines,
                             read_lines_of(results_path(), summary_path()));
    run_log log;
    bool have_header = false;
    for (const auto& [number, record] : lines)
        if (auto added = add_record(log, have_header, record); !added.is_ok())
            return bad_run_input(results_path() + ": line " + std::to_string(number) + ": " +
                                 added.message());
    if (!have_header)
        return bad_run_input(results_path() + ": no run header (record \"run\"): not written by " +
                             "pitfall run");
    return log;
}

status_or<json> run_folder::summary_ratios() const {
    // A run killed before its end has no summary.json: no ratios. One that is there but is not
    // the document a run writes is refused like any other damaged file of the folder.
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(summary_path(), ec)))
        return json::array();
    PITFALL_ASSIGN_OR_RETURN(const json s, detail::read_json_file(summary_path()));
    const auto bad = [this](const std::string& why) {
        return bad_run_input(summary_path() + ": " + why);
    };
    if (!s.is_object())
        return bad("expected an object");
    if (!s.contains("ratios"))
        return json::array();
    const json& ratios = s["ratios"];
    if (!ratios.is_array())
        return bad("/ratios: expected an array");
    // What the reports read of a ratio with a type of its own: failing a boolean, bound an
    // object of numbers.
    for (std::size_t i = 0; i < ratios.size(); ++i) {
        const json& r = ratios[i];
        const std::string at = "/ratios/" + std::to_string(i);
        if (!r.is_object())
            return bad(at + ": expected an object");
        if (r.contains("failing") && !r["failing"].is_boolean())
            return bad(at + "/failing: expected a boolean");
        if (r.contains("bound") &&
            (!r["bound"].is_object() || !std::all_of(r["bound"].begin(), r["bound"].end(),
                                                     [](const json& x) { return x.is_number(); })))
            return bad(at + "/bound: expected an object of numbers");
    }
    return ratios;
}

} // namespace pitfall::runner
