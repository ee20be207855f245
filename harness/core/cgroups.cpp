#include "process_parts.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

// The cgroup v2 folders of a contained run: the run's own under ours, made and proved once, and
// one per case under it, each emptied with cgroup.kill and removed when its case is over.
namespace pitfall::process_parts {

bool cgroup_populated(const std::string& dir) {
    std::string events;
    return read_file(dir + "/cgroup.events", events) &&
           events.find("populated 0") == std::string::npos;
}

void case_cgroup::make() {
    if (g_contained.run_cgroup.empty())
        return;
    dir = g_contained.run_cgroup + "/case-" + std::to_string(++g_contained.case_count);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        dir.clear();
        return;
    }
    procs_fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

bool case_cgroup::holds(pid_t pid) const {
    std::string text;
    if (dir.empty() || !read_file("/proc/" + std::to_string(pid) + "/cgroup", text))
        return false;
    const std::string leaf = dir.substr(dir.rfind('/')) + "\n";
    return text.size() >= leaf.size() &&
           text.compare(text.size() - leaf.size(), leaf.size(), leaf) == 0;
}

void case_cgroup::kill() const {
    if (!dir.empty())
        (void)write_text(dir + "/cgroup.kill", "1");
}

void case_cgroup::remove() {
    if (procs_fd >= 0)
        ::close(procs_fd);
    procs_fd = -1;
    if (dir_fd >= 0)
        ::close(dir_fd);
    dir_fd = -1;
    if (dir.empty())
        return;
    const auto until = clock_type::now() + std::chrono::seconds(5);
    while (::rmdir(dir.c_str()) != 0 && errno == EBUSY && clock_type::now() < until) {
        kill();
        reap_zombie_children(-1);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    dir.clear();
}

pid_t clone_into_cgroup(int cgroup_dir_fd) {
#if defined(SYS_clone3)
    struct { // struct clone_args of <linux/sched.h>, up to its `cgroup` field (version 2)
        std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls,
            set_tid, set_tid_size, cgroup;
    } args{};
    constexpr std::uint64_t clone_into_cgroup_flag = 0x200000000ULL; // CLONE_INTO_CGROUP
    args.flags = clone_into_cgroup_flag;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup_dir_fd);
    return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
#else
    (void)cgroup_dir_fd;
    errno = ENOSYS;
    return -1;
#endif
}

namespace {
/// Our cgroup v2 folder: the cgroup2 mount (/proc/self/mountinfo) joined with our path in it
/// (/proc/self/cgroup, "0::<path>"); "" with the reason where there is none.
std::string own_cgroup_dir(std::string& why) {
    std::string cgroup_text;
    std::string mounts;
    if (!read_file("/proc/self/cgroup", cgroup_text) ||
        !read_file("/proc/self/mountinfo", mounts)) {
        why = "cannot read /proc/self/cgroup or /proc/self/mountinfo";
        return {};
    }
    std::string path;
    std::istringstream lines(cgroup_text);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("0::", 0) == 0)
            path = line.substr(3);
    std::istringstream mount_lines(mounts);
    for (std::string line; std::getline(mount_lines, line);) {
        // "id parent major:minor root mount-point options ... - fstype source super-options"
        const auto dash = line.find(" - ");
        if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0)
            continue;
        std::istringstream fields(line.substr(0, dash));
        std::string id, parent, device, root, point;
        fields >> id >> parent >> device >> root >> point;
        if (path.empty()) {
            why = "no cgroup v2 line in /proc/self/cgroup";
            return {};
        }
        if (root != "/" && path.rfind(root, 0) != 0) {
            why = "our cgroup " + path;
            why += " is outside the cgroup2 mount at " + point;
            return {};
        }
        const std::string inside = root == "/" ? path : path.substr(root.size());
        return inside == "/" ? point : point + inside;
    }
    why = "no cgroup v2 hierarchy mounted (cgroup v1 only)";
    return {};
}
} // namespace

std::string planned_run_cgroup(const std::string& token, std::string& why) {
    const std::string own = own_cgroup_dir(why);
    return own.empty() ? own : own + "/pitfall-" + std::to_string(::getpid()) + "-" + token;
}

bool make_run_cgroup(const std::string& dir, std::string& why) {
    if (::mkdir(dir.c_str(), 0755) != 0) {
        why = "cannot make the cgroup " + dir + ": " + std::strerror(errno);
        return false;
    }
    const auto give_up = [&](const std::string& reason) {
        ::rmdir(dir.c_str());
        why = reason;
        return false;
    };
    if (::access((dir + "/cgroup.kill").c_str(), W_OK) != 0)
        return give_up("no writable cgroup.kill in " + dir + " (Linux 5.14 or later)");
    const int procs = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (procs < 0)
        return give_up("cannot write " + dir + "/cgroup.procs: " + std::strerror(errno));
    // Cloned straight into it where the kernel can (no migration to wait for), else a forked
    // child moves itself in.
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    pid_t probe = dir_fd >= 0 ? clone_into_cgroup(dir_fd) : -1;
    const bool cloned = probe >= 0;
    if (!cloned)
        probe = ::fork();
    if (probe == 0)
        ::_exit(cloned || ::write(procs, "0", 1) == 1 ? 0 : 1);
    if (dir_fd >= 0)
        ::close(dir_fd);
    ::close(procs);
    int status = 1;
    if (probe < 0 || ::waitpid(probe, &status, 0) != probe || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        return give_up("cannot move a process into " + dir + " (not delegated to us)");
    return true;
}

void remove_cgroup_tree(const std::string& dir) {
    std::vector<std::string> cases;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d))
            if (std::strncmp(e->d_name, "case-", 5) == 0)
                cases.push_back(dir + "/" + e->d_name);
        ::closedir(d);
    }
    cases.push_back(dir);
    for (const auto& folder : cases)
        for (int tries = 0; tries < 100 && ::rmdir(folder.c_str()) != 0 && errno == EBUSY; ++tries)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

} // namespace pitfall::process_parts
