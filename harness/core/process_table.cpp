#include "process_parts.hpp"

#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

// The reads of /proc that find a case's processes and our children: the process table, the
// environments that carry a case's token, and the zombies to reap.
namespace pitfall::process_parts {

bool read_file(const std::string& path, std::string& text) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return false;
    std::ostringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
    return true;
}

bool write_text(const std::string& path, const char* text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    const bool ok = ::write(fd, text, std::strlen(text)) == static_cast<ssize_t>(std::strlen(text));
    ::close(fd);
    return ok;
}

std::map<pid_t, proc_entry> process_table() {
    std::map<pid_t, proc_entry> table;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr)
        return table;
    while (const dirent* e = ::readdir(proc)) {
        const char* name = e->d_name;
        if (*name < '1' || *name > '9')
            continue;
        std::string stat;
        if (!read_file(std::string("/proc/") + name + "/stat", stat))
            continue;
        // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so from the last ')'.
        const auto close = stat.rfind(')');
        if (close == std::string::npos)
            continue;
        std::istringstream rest(stat.substr(close + 1));
        char state = '?';
        long ppid = 0;
        rest >> state >> ppid;
        table[static_cast<pid_t>(std::atol(name))] = {static_cast<pid_t>(ppid), state == 'Z'};
    }
    ::closedir(proc);
    return table;
}

namespace {
/// Whether pid's environment holds `entry_prefix` ("PITFALL_CASE_TOKEN=<token>") as the start
/// of one of its entries; `whole` asks for the entry to be exactly that.
bool environment_holds(pid_t pid, const std::string& entry_prefix, bool whole) {
    std::string environ_text;
    if (!read_file("/proc/" + std::to_string(pid) + "/environ", environ_text))
        return false;
    std::size_t at = 0;
    while (at < environ_text.size()) {
        std::size_t end = environ_text.find('\0', at);
        if (end == std::string::npos)
            end = environ_text.size();
        const std::size_t length = end - at;
        if (length >= entry_prefix.size() &&
            environ_text.compare(at, entry_prefix.size(), entry_prefix) == 0 &&
            (!whole || length == entry_prefix.size()))
            return true;
        at = end + 1;
    }
    return false;
}
} // namespace

std::vector<pid_t> processes_marked(const std::map<pid_t, proc_entry>& table,
                                    const std::string& entry_prefix, bool whole) {
    std::vector<pid_t> found;
    const pid_t self = ::getpid();
    for (const auto& [pid, entry] : table)
        if (pid != self && !entry.zombie && environment_holds(pid, entry_prefix, whole))
            found.push_back(pid);
    return found;
}

std::vector<pid_t> descendants(const std::map<pid_t, proc_entry>& table, pid_t spare) {
    std::vector<pid_t> found;
    const pid_t self = ::getpid();
    const std::set<pid_t> running = running_cases();
    const auto another_case = [&](pid_t pid) { return pid != spare && running.count(pid) != 0; };
    for (const auto& [pid, entry] : table) {
        if (entry.zombie || pid == spare || pid == g_contained.guardian || another_case(pid))
            continue;
        pid_t up = entry.ppid;
        for (int depth = 0; depth < 4096 && up > 1 && up != self; ++depth) {
            const auto it = table.find(up);
            if (it == table.end() || up == g_contained.guardian || another_case(up))
                break;
            up = it->second.ppid;
        }
        if (up == self)
            found.push_back(pid);
    }
    return found;
}

namespace {
/// Our children, from the kernel's per-thread lists (a few small reads, where a scan of /proc
/// reads every process on the machine); nullopt where the kernel has no such lists.
std::optional<std::vector<pid_t>> own_children() {
    DIR* tasks = ::opendir("/proc/self/task");
    if (tasks == nullptr)
        return std::nullopt;
    std::vector<pid_t> children;
    bool listed = false;
    while (const dirent* e = ::readdir(tasks)) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        std::string text;
        if (!read_file(std::string("/proc/self/task/") + e->d_name + "/children", text))
            continue;
        listed = true;
        std::istringstream in(text);
        for (long pid = 0; in >> pid;)
            children.push_back(static_cast<pid_t>(pid));
    }
    ::closedir(tasks);
    if (!listed)
        return std::nullopt;
    return children;
}
} // namespace

void reap_zombie_children(pid_t spare) {
    // The children first: a case forked after the list was read is not in it.
    const std::optional<std::vector<pid_t>> children = own_children();
    std::vector<pid_t> exited;
    if (children) {
        exited = *children; // waitpid(WNOHANG) leaves a live one alone
    } else {
        for (const auto& [pid, entry] : process_table())
            if (entry.ppid == ::getpid() && entry.zombie)
                exited.push_back(pid);
    }
    const std::set<pid_t> running = running_cases();
    for (const pid_t pid : exited)
        if (pid != spare && pid != g_contained.guardian && running.count(pid) == 0) {
            int status = 0;
            ::waitpid(pid, &status, WNOHANG);
        }
}

} // namespace pitfall::process_parts
