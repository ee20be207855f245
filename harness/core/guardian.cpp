#include "process_parts.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>

// The guardian: a process of its own, forked by contain_cases(), that outlives a harness killed
// outright (SIGKILL) and then ends what the harness can no longer end itself.
namespace pitfall::process_parts {
namespace {
/// The guardian's start: out of the harness's process group and signals, holding nothing of the
/// harness's but the pipe.
void detach_from_harness(int pipe_fd) {
    ::setsid(); // a kill of the harness's process group must not take us with it
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE})
        ::sigaction(sig, &ignore, nullptr);
    ::prctl(PR_SET_NAME, "pitfall-guard");
    // Nothing of the harness's held open here (its run folder's lock above all): only the pipe.
    for (int fd = 0; fd < 1024; ++fd)
        if (fd != pipe_fd)
            ::close(fd);
}

/// One of the harness's lines: a group to watch or to forget, or the goodbye (we leave).
void follow_line(const std::string& line, std::set<pid_t>& groups) {
    if (line == "q")
        ::_exit(0);
    const long pgid = line.size() > 1 ? std::strtol(line.c_str() + 1, nullptr, 10) : 0;
    if (pgid > 1 && line[0] == '+')
        groups.insert(static_cast<pid_t>(pgid));
    else if (pgid > 1 && line[0] == '-')
        groups.erase(static_cast<pid_t>(pgid));
}

/// Reads the harness's lines until the pipe ends; the process groups of the cases running then.
std::set<pid_t> follow_harness(int pipe_fd) {
    // The harness's lines: "+<pgid>" a case started in its own process group, "-<pgid>" it
    // ended, "q" goodbye. End of file without a goodbye: the harness died.
    std::set<pid_t> groups;
    std::string pending;
    char chunk[512];
    for (;;) {
        const ssize_t got = ::read(pipe_fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        pending.append(chunk, static_cast<std::size_t>(got));
        for (std::size_t nl = pending.find('\n'); nl != std::string::npos;
             nl = pending.find('\n')) {
            const std::string line = pending.substr(0, nl);
            pending.erase(0, nl + 1);
            follow_line(line, groups);
        }
    }
    return groups;
}

/// After the harness died: ends its cgroup, the running cases' groups and what carries the
/// run's token, until none is left.
void end_the_run(const std::string& token, const std::string& cgroup,
                 const std::set<pid_t>& groups) {
    // Every running case's process group too: a descendant that cleared its environment (no
    // token) but stayed in the group is ended with it; one that also left the group with
    // setsid is found only by the cgroup, where there is one.
    const std::string entry = std::string(case_token_env) + "=" + token + "/";
    for (int round = 0; round < 200; ++round) { // up to ~2 s for what forks while we kill
        if (!cgroup.empty())
            (void)write_text(cgroup + "/cgroup.kill", "1");
        bool any_group = false;
        for (const pid_t group : groups)
            any_group = ::kill(-group, SIGKILL) == 0 || any_group;
        const std::vector<pid_t> left = processes_marked(process_table(), entry, false);
        for (const pid_t pid : left)
            ::kill(pid, SIGKILL);
        if (left.empty() && !any_group && round > 0)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!cgroup.empty())
        remove_cgroup_tree(cgroup);
}
} // namespace

void guard(int pipe_fd, const std::string& token, const std::string& cgroup) {
    detach_from_harness(pipe_fd);
    const std::set<pid_t> groups = follow_harness(pipe_fd);
    end_the_run(token, cgroup, groups);
    ::_exit(0);
}

} // namespace pitfall::process_parts
