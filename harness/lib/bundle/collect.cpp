#include "bundle/collect.hpp"

#include "pitfall/detail/process.hpp"
#include "pitfall/detail/text.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pitfall::runner {
using nlohmann::json;

json bundle_item::to_json() const {
    json j = {{"file", detail::valid_utf8(file)}, {"from", what}, {"state", state}};
    if (!why.empty())
        j["why"] = detail::valid_utf8(why);
    if (state == "included" || state == "truncated" || bytes > 0)
        j["bytes"] = bytes;
    return j;
}

std::string find_program(const std::string& name) {
    std::string dirs;
    if (const char* path = std::getenv("PATH"))
        dirs = path;
    dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
    for (std::size_t start = 0; start <= dirs.size();) {
        const std::size_t colon = std::min(dirs.find(':', start), dirs.size());
        const std::string dir = dirs.substr(start, colon - start);
        start = colon + 1;
        if (dir.empty() || dir.front() != '/') // a relative PATH entry depends on the cwd
            continue;
        std::string candidate = dir;
        candidate += '/';
        candidate += name;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    return {};
}

namespace {
std::uint64_t file_size(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

std::string seconds_text(double s) {
    std::ostringstream out;
    out << s;
    return out.str();
}
} // namespace

bundle_item run_bounded(const std::vector<std::string>& argv, const std::string& out_path,
                        double timeout_seconds, std::uint64_t cap_bytes) {
    bundle_item item;
    for (const auto& a : argv)
        item.what += (item.what.empty() ? "" : " ") + a;
    process_request req;
    req.argv = argv;
    req.output_path = out_path;
    req.timeout_seconds = timeout_seconds;
    req.kill_grace_seconds = 1;
    req.limits.file_size_bytes = cap_bytes;
    const process_outcome p = run_process(req);
    item.bytes = file_size(out_path);
    if (!p.started) {
        item.state = "failed";
        item.why = "could not start: " + p.start_error;
        return item;
    }
    const bool capped = item.bytes >= cap_bytes || (p.signal && *p.signal == SIGXFSZ);
    if (capped || p.timed_out) {
        item.state = "truncated";
        item.why = capped ? "cut at " + std::to_string(cap_bytes) + " bytes"
                          : "ended after " + seconds_text(timeout_seconds) +
                                " s; what it wrote until then is kept";
    } else if (p.signal) {
        item.state = "failed";
        item.why = "ended by " + signal_name(*p.signal);
    } else if (p.exit_code.value_or(-1) != 0) {
        item.state = "failed";
        item.why =
            "exited " + std::to_string(p.exit_code.value_or(-1)) + " (its output, kept, says why)";
    } else {
        item.state = "included";
    }
    return item;
}

std::string nvidia_kernel_lines(const std::string& log, std::size_t max_lines) {
    std::deque<std::string> kept;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
        std::string lower = line;
        for (char& c : lower)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (line.find("NVRM") == std::string::npos && line.find("Xid") == std::string::npos &&
            lower.find("nvidia") == std::string::npos)
            continue;
        kept.push_back(std::move(line));
        if (kept.size() > max_lines)
            kept.pop_front();
    }
    std::string out;
    for (const auto& line : kept)
        out += line + '\n';
    return out;
}

namespace {
constexpr std::uint64_t raw_log_cap = std::uint64_t{32} << 20;
constexpr std::size_t kept_lines = 5000;

/// /dev/kmsg read without blocking until the buffer's end, at most `cap` bytes: each record
/// "prio,seq,time,flags;text", one per read.
bool read_kmsg(std::string& text, std::string& why) {
    const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        why = std::string("/dev/kmsg: ") + std::strerror(errno);
        return false;
    }
    char record[8192];
    while (text.size() < raw_log_cap) {
        const ssize_t n = ::read(fd, record, sizeof record);
        if (n < 0 && errno == EPIPE)
            continue; // overwritten while we read: the next record follows
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; // EAGAIN: the end
        const std::string one(record, static_cast<std::size_t>(n));
        const std::size_t semicolon = one.find(';');
        text += semicolon == std::string::npos ? one : one.substr(semicolon + 1);
    }
    ::close(fd);
    return true;
}

/// One source's text, or false with why not.
bool read_source(const std::vector<std::string>& argv, const std::string& scratch,
                 double timeout_seconds, std::string& text, std::string& why) {
    const std::string program = find_program(argv[0]);
    if (program.empty()) {
        why = argv[0] + ": not installed";
        return false;
    }
    std::vector<std::string> full = argv;
    full[0] = program;
    const bundle_item item = run_bounded(full, scratch, timeout_seconds, raw_log_cap);
    text = read_tail(scratch, raw_log_cap);
    ::unlink(scratch.c_str());
    if (item.state == "failed") {
        why = item.what + ": " + item.why + ": " + detail::utf8_head(text, 200);
        return false;
    }
    return true;
}
} // namespace

bundle_item collect_kernel_messages(const std::string& out_path, const std::string& scratch_dir,
                                    double timeout_seconds) {
    bundle_item item;
    item.what = "kernel messages of this boot (dmesg, journalctl -k -b or /dev/kmsg), lines "
                "matching NVRM, nvidia or Xid, the last " +
                std::to_string(kept_lines);
    const std::string scratch = scratch_dir + "/kernel-log.raw";
    std::string text;
    std::string why_dmesg;
    std::string why_journal;
    std::string why_kmsg;
    std::string source;
    if (read_source({"dmesg"}, scratch, timeout_seconds, text, why_dmesg))
        source = "dmesg";
    else if (read_source({"journalctl", "-k", "-b", "--no-pager", "-q"}, scratch, timeout_seconds,
                         text, why_journal))
        source = "journalctl -k -b";
    else if (read_kmsg(text, why_kmsg))
        source = "/dev/kmsg";
    if (source.empty()) {
        item.state = "missing";
        item.why = "no kernel log readable: " + why_dmesg + "; " + why_journal + "; " + why_kmsg;
        return item;
    }
    const std::string lines = nvidia_kernel_lines(text, kept_lines);
    std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
    out << "# from " << source << ", lines matching NVRM|nvidia|Xid\n" << lines;
    out.close();
    item.bytes = file_size(out_path);
    item.state = out ? "included" : "failed";
    item.why =
        out ? (lines.empty() ? "read from " + source + ": no NVIDIA lines" : "read from " + source)
            : "cannot write " + out_path;
    if (text.size() >= raw_log_cap)
        item.why += " (the log was read up to " + std::to_string(raw_log_cap) + " bytes)";
    return item;
}

} // namespace pitfall::runner
