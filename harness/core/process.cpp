#include "pitfall/detail/process.hpp"
#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <poll.h>
#include <random>
#include <set>
#include <sstream>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace pitfall {

volatile std::sig_atomic_t interrupt_requested = 0;
namespace {
volatile std::sig_atomic_t g_interrupt_signal = 0;
// Self-pipe: the handler writes a byte, so a poll() that began just before the signal still
// wakes at once (a flag alone is only seen when the poll times out).
int g_interrupt_pipe[2] = {-1, -1};
void on_interrupt(int sig) {
    interrupt_requested = 1;
    g_interrupt_signal = sig;
    if (g_interrupt_pipe[1] >= 0) {
        const char byte = 1;
        (void)!::write(g_interrupt_pipe[1], &byte, 1);
    }
}
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
    return std::chrono::duration<double>(clock_type::now() - start).count();
}

// pidfd lets us sleep in poll() until the child exits or the deadline passes, instead of
// polling wait4 in a loop; where the kernel lacks it we fall back to short sleeps.
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}
} // namespace

void install_interrupt_handlers() {
    if (g_interrupt_pipe[0] < 0 && ::pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        g_interrupt_pipe[0] = g_interrupt_pipe[1] = -1; // then the flag alone, checked each round
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: poll() returns EINTR so we notice at once
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGHUP, &sa, nullptr);
}
int interrupt_signal() {
    return g_interrupt_signal;
}

std::string signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGTRAP: return "SIGTRAP";
    case SIGPIPE: return "SIGPIPE";
    case SIGHUP: return "SIGHUP";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "signal " + std::to_string(sig);
    }
}

std::string read_tail(const std::string& path, std::size_t max_bytes) {
    // A regular file, never through a link (a case could swap its log for one to a file of
    // pitfall's user that would then land in the record), never blocking (a FIFO).
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return {};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return {};
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    const std::size_t start = size > max_bytes ? size - max_bytes : 0;
    std::string text(size - start, '\0');
    std::size_t got = 0;
    while (got < text.size()) {
        const ssize_t n =
            ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(start + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    text.resize(got);
    // A child's output is bytes; what is kept of it is text (records are JSON).
    return detail::utf8_tail(text, max_bytes);
}

// ---- containment ---------------------------------------------------------------------------

namespace {
// Set once by contain_cases(): then this process is a subreaper, g_guardian watches over the
// run, and (where one could be made) each case runs in a cgroup under g_run_cgroup.
struct containment_state {
    bool active = false;
    pid_t guardian = -1;
    int guardian_fd = -1; ///< our end of the guardian's pipe (close-on-exec: no case holds it)
    std::string run_cgroup;
    std::string run_token;
    std::atomic<unsigned> case_count{0};
};
containment_state g_contained;

// The case processes running now, each watched by its own run_process call (`pitfall run
// --jobs N` runs several at once from threads): one case's clean-up must neither kill another
// case's processes nor reap another's exit status.
std::mutex g_running_mutex;
std::set<pid_t> g_running_cases;

/// Tells the guardian a case's process group, to end should the harness die ("+<pgid>"), or
/// that the case is over ("-<pgid>"). One write of a short line each: atomic on a pipe.
void tell_guardian(char what, pid_t pgid) {
    if (!g_contained.active || g_contained.guardian_fd < 0)
        return;
    const std::string line = what + std::to_string(pgid) + "\n";
    (void)!::write(g_contained.guardian_fd, line.data(), line.size());
}

std::set<pid_t> running_cases() {
    const std::lock_guard<std::mutex> lock(g_running_mutex);
    return g_running_cases;
}

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

/// Every process's parent and whether it has exited but is not reaped ("Z").
struct proc_entry {
    pid_t ppid = 0;
    bool zombie = false;
};
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

std::vector<pid_t> processes_marked(const std::map<pid_t, proc_entry>& table,
                                    const std::string& entry_prefix, bool whole) {
    std::vector<pid_t> found;
    const pid_t self = ::getpid();
    for (const auto& [pid, entry] : table)
        if (pid != self && !entry.zombie && environment_holds(pid, entry_prefix, whole))
            found.push_back(pid);
    return found;
}

/// Our live descendants but the guardian (and its own, none), `spare`, and the other running
/// cases and theirs.
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

/// Our children that exited and wait to be reaped, but the guardian, `spare` and the running
/// cases (each reaped by its own watcher, which reads its exit status).
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

/// Whether a cgroup still holds a live process (its cgroup.events; a zombie does not count).
bool cgroup_populated(const std::string& dir) {
    std::string events;
    return read_file(dir + "/cgroup.events", events) &&
           events.find("populated 0") == std::string::npos;
}

/// Ends (KILL) every process of a case that has finished. In the case's cgroup (`cgroup_dir`
/// not empty), everything in it, however it left the process group: cgroup.kill until it is
/// empty. Then, in either mode, what carries its token and, under containment, every
/// descendant but `child` (still unreaped, so that its pid and group id are not reused
/// meanwhile), found by scanning /proc. Either until none is left or 5 s have passed (a
/// process stuck in a driver call). What became our child is reaped.
void end_case_processes(const std::string& token, pid_t child, const std::string& cgroup_dir) {
    const auto until = clock_type::now() + std::chrono::seconds(5);
    if (!cgroup_dir.empty()) {
        while (cgroup_populated(cgroup_dir) && clock_type::now() < until) {
            (void)write_text(cgroup_dir + "/cgroup.kill", "1");
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        reap_zombie_children(child);
    }
    // Then the sweep, whatever the mode: a process that moved itself out of the case's cgroup
    // (into another it may write to) is no longer in what cgroup.kill ends, but it still
    // carries the token, or descends from us (the subreaper) by its parents.
    const std::string entry = std::string(case_token_env) + "=" + token;
    for (;;) {
        const auto table = process_table();
        std::vector<pid_t> left = processes_marked(table, entry, true);
        if (g_contained.active)
            for (const pid_t pid : descendants(table, child))
                left.push_back(pid);
        left.erase(std::remove(left.begin(), left.end(), child), left.end());
        for (const pid_t pid : left)
            ::kill(pid, SIGKILL);
        reap_zombie_children(child);
        if (left.empty() || clock_type::now() > until)
            return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

/// A case's own cgroup: made before the fork, the child moves itself in, cgroup.kill ends
/// whatever is in it however it left the process group.
struct case_cgroup {
    std::string dir;
    int procs_fd = -1; ///< <dir>/cgroup.procs, written "0" by a forked child
    int dir_fd = -1;   ///< <dir> itself, for a child cloned straight into it

    void make() {
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
    /// Whether `pid` is in it (/proc/<pid>/cgroup ends with its folder's name).
    bool holds(pid_t pid) const {
        std::string text;
        if (dir.empty() || !read_file("/proc/" + std::to_string(pid) + "/cgroup", text))
            return false;
        const std::string leaf = dir.substr(dir.rfind('/')) + "\n";
        return text.size() >= leaf.size() &&
               text.compare(text.size() - leaf.size(), leaf.size(), leaf) == 0;
    }
    void kill() const {
        if (!dir.empty())
            (void)write_text(dir + "/cgroup.kill", "1");
    }
    /// Once what was in it is gone and reaped: waits (up to 5 s) for it to empty, removes it.
    void remove() {
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
};
} // namespace

std::vector<int> marked_processes(const std::string& token_prefix) {
    return processes_marked(process_table(), std::string(case_token_env) + "=" + token_prefix,
                            false);
}

// ---- one process ---------------------------------------------------------------------------

namespace {
// Everything the child needs, prepared before fork: after it only async-signal-safe calls.
struct exec_plan {
    std::vector<std::string> env_strings;
    std::vector<std::string> args;
    std::vector<char*> envp;
    std::vector<char*> argv;
    std::string output;
    resource_limits limits;
    int cgroup_procs_fd = -1;
    int cgroup_dir_fd = -1;
};

void prepare(const process_request& request, exec_plan& plan) {
    std::map<std::string, std::string> env_set = request.env_set;
    if (!request.case_token.empty())
        env_set[case_token_env] = request.case_token;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const auto eq = entry.find('=');
        if (eq != std::string::npos && env_set.count(entry.substr(0, eq)) != 0)
            continue;
        plan.env_strings.push_back(entry);
    }
    for (const auto& [key, value] : env_set) {
        std::string entry = key;
        entry += '=';
        entry += value;
        plan.env_strings.push_back(std::move(entry));
    }
    for (auto& s : plan.env_strings)
        plan.envp.push_back(s.data());
    plan.envp.push_back(nullptr);
    plan.args = request.argv;
    for (auto& a : plan.args)
        plan.argv.push_back(a.data());
    plan.argv.push_back(nullptr);
    plan.output = request.output_path.empty() ? "/dev/null" : request.output_path;
    plan.limits = request.limits;
}

void apply_limits(const resource_limits& limits) {
    const auto set = [](int resource, unsigned long long soft, unsigned long long hard) {
        struct rlimit now {};
        if (::getrlimit(resource, &now) != 0)
            return;
        // Never above what we were given: a raise past the hard limit would fail outright.
        const auto cap = [&](unsigned long long v) {
            return now.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(v)
                                                 : std::min(static_cast<rlim_t>(v), now.rlim_max);
        };
        const struct rlimit wanted { cap(soft), cap(hard) };
        ::setrlimit(resource, &wanted);
    };
    if (limits.address_space_bytes)
        set(RLIMIT_AS, *limits.address_space_bytes, *limits.address_space_bytes);
    if (limits.cpu_seconds) // SIGXCPU at the soft limit (a core dump, a CRASH), KILL at the hard
        set(RLIMIT_CPU, *limits.cpu_seconds, *limits.cpu_seconds + 5);
    if (limits.file_size_bytes)
        set(RLIMIT_FSIZE, *limits.file_size_bytes, *limits.file_size_bytes);
}

// In the child, between fork and exec: its own group (and cgroup), death with the parent,
// default signal handlers, its limits, output to the file; an exec failure goes back through
// the pipe as errno.
[[noreturn]] void exec_child(const exec_plan& plan, pid_t parent, int error_pipe,
                             bool in_cgroup_already) {
    ::setpgid(0, 0); // its own group: a timeout ends it and everything it started
    if (plan.cgroup_procs_fd >= 0 && !in_cgroup_already)
        (void)!::write(plan.cgroup_procs_fd, "0", 1); // else the subreaper's sweep alone
    // A harness killed outright (SIGKILL) cannot end its case: the kernel does it, so no
    // orphaned case runs on beside the `--resume` that repeats it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
        ::_exit(127);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ, SIGXCPU})
        ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // The case's log: never through a link, and never pitfall's own stdout instead. A log that
    // cannot be opened ends the child before it runs anything: the parent names the path
    // (the negated errno says it was the log, not the exec).
    const int fd =
        ::open(plan.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        const int err = -errno;
        (void)!::write(error_pipe, &err, sizeof err);
        ::_exit(127);
    }
    const int null_in = ::open("/dev/null", O_RDONLY);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    if (null_in >= 0)
        ::dup2(null_in, STDIN_FILENO);
    apply_limits(plan.limits);
    ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
    const int err = errno;
    (void)!::write(error_pipe, &err, sizeof err);
    ::_exit(127);
}
/// A child started straight in the cgroup `cgroup_dir_fd` (clone3 with CLONE_INTO_CGROUP,
/// Linux 5.7): like fork, but the kernel places it at creation, where a forked child writing
/// its own pid into cgroup.procs waits for the cgroup migration (~10 ms a case here). -1 with
/// errno where the kernel or the cgroup refuses; the caller forks instead.
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

// Forks and execs; the pid, or -1 with out.start_error set.
pid_t spawn(const process_request& request, const exec_plan& plan, process_outcome& out) {
    // An inherited "SIGCHLD ignored" makes the kernel reap children itself: wait4 would then
    // fail and every exit status read as 0. Children are ours to reap.
    struct sigaction chld {};
    if (::sigaction(SIGCHLD, nullptr, &chld) == 0 && chld.sa_handler == SIG_IGN) {
        chld.sa_handler = SIG_DFL;
        ::sigaction(SIGCHLD, &chld, nullptr);
    }
    int exec_error_pipe[2];
    if (::pipe2(exec_error_pipe, O_CLOEXEC) != 0) {
        out.start_error = std::string("pipe: ") + std::strerror(errno);
        return -1;
    }
    const pid_t parent = ::getpid();
    // Registered under the lock it was forked under: a clean-up that read the process table
    // before taking the lock cannot have seen it exit.
    std::unique_lock<std::mutex> registering(g_running_mutex);
    pid_t pid = plan.cgroup_dir_fd >= 0 ? clone_into_cgroup(plan.cgroup_dir_fd) : -1;
    const bool cloned_into_cgroup = pid >= 0;
    if (!cloned_into_cgroup)
        pid = ::fork();
    if (pid < 0) {
        registering.unlock();
        out.start_error = std::string("fork: ") + std::strerror(errno);
        ::close(exec_error_pipe[0]);
        ::close(exec_error_pipe[1]);
        return -1;
    }
    if (pid == 0)
        exec_child(plan, parent, exec_error_pipe[1], cloned_into_cgroup);
    g_running_cases.insert(pid);
    registering.unlock();
    ::setpgid(pid, pid); // also from the parent: no race with an early kill
    tell_guardian('+', pid);
    ::close(exec_error_pipe[1]);
    int exec_errno = 0;
    const bool exec_failed =
        ::read(exec_error_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
    ::close(exec_error_pipe[0]);
    if (exec_failed) {
        int st = 0;
        tell_guardian('-', pid);
        ::waitpid(pid, &st, 0);
        {
            const std::lock_guard<std::mutex> lock(g_running_mutex);
            g_running_cases.erase(pid);
        }
        out.start_error =
            exec_errno < 0
                ? "cannot open its log " + request.output_path + ": " + std::strerror(-exec_errno)
                : "cannot execute " + request.argv[0] + ": " + std::strerror(exec_errno);
        return -1;
    }
    return pid;
}

// Waits until the child exits, ending its whole group at the timeout or on an interrupt
// (TERM, then KILL after the grace period). The child is left unreaped.
void watch(pid_t pid, const process_request& request, clock_type::time_point started,
           process_outcome& out) {
    const int pidfd = open_pidfd(pid);
    bool term_sent = false;
    clock_type::time_point term_time;
    for (;;) {
        // WNOWAIT: look without reaping, so the group id stays ours while we end the rest of
        // the group (grandchildren a crashed case left behind), then reap with wait4.
        siginfo_t info{};
        const int seen =
            ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
        if ((seen == 0 && info.si_pid == pid) || (seen < 0 && errno != EINTR))
            break;
        const double elapsed = seconds_since(started);
        if (!term_sent && (elapsed >= request.timeout_seconds || interrupt_requested != 0)) {
            out.timed_out = interrupt_requested == 0;
            out.interrupted = interrupt_requested != 0;
            ::kill(-pid, SIGTERM);
            ::kill(-pid, SIGCONT); // a stopped process (SIGSTOP) only sees its TERM when running
            term_sent = true;
            term_time = clock_type::now();
        } else if (term_sent && seconds_since(term_time) >= request.kill_grace_seconds) {
            ::kill(-pid, SIGKILL);
        }
        double wait_for = term_sent ? request.kill_grace_seconds - seconds_since(term_time)
                                    : request.timeout_seconds - elapsed;
        // After the KILL a child stuck in a driver call may take a while to go: look again
        // every 100 ms rather than spin.
        if (wait_for < (term_sent ? 0.1 : 0.001))
            wait_for = term_sent ? 0.1 : 0.001;
        if (pidfd >= 0) {
            struct pollfd pfds[2] = {{pidfd, POLLIN, 0}, {g_interrupt_pipe[0], POLLIN, 0}};
            const nfds_t count = g_interrupt_pipe[0] >= 0 && !term_sent ? 2 : 1;
            ::poll(pfds, count, static_cast<int>(wait_for * 1000) + 1);
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(wait_for > 0.01 ? 10 : 1));
        }
    }
    if (pidfd >= 0)
        ::close(pidfd);
}

// Ends what is left of the group and reaps the child: its exit status or signal, peak RSS.
void reap(pid_t pid, clock_type::time_point started, process_outcome& out) {
    ::kill(-pid, SIGKILL);
    int status = 0;
    struct rusage usage {};
    pid_t reaped = -1;
    while ((reaped = ::wait4(pid, &status, 0, &usage)) < 0 && errno == EINTR) {
    }
    out.wall_seconds = seconds_since(started);
    if (reaped != pid) { // never report an exit status we did not read
        out.start_error = std::string("wait4: ") + std::strerror(errno);
        out.started = false;
        return;
    }
    out.peak_rss_bytes = static_cast<long long>(usage.ru_maxrss) * 1024;
    if (WIFEXITED(status))
        out.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        out.signal = WTERMSIG(status);
}
} // namespace

bool ensure_standard_descriptors() noexcept {
    for (int fd = 0; fd <= 2; ++fd) {
        if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        // The lowest free number is fd itself: the ones below it are open by now.
        const int opened = ::open("/dev/null", (fd == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        if (opened < 0)
            return false;
        if (opened != fd) { // cannot happen while 0..fd-1 are open; leave nothing half done
            ::close(opened);
            return false;
        }
        // Inherited by children like a real standard descriptor would be.
        ::fcntl(fd, F_SETFD, 0);
    }
    return true;
}

process_outcome run_process(const process_request& request) {
    process_outcome out;
    if (request.argv.empty()) {
        out.start_error = "empty argv";
        return out;
    }
    exec_plan plan;
    prepare(request, plan);
    case_cgroup cgroup;
    if (!request.case_token.empty())
        cgroup.make();
    plan.cgroup_procs_fd = cgroup.procs_fd;
    plan.cgroup_dir_fd = cgroup.dir_fd;
    const auto started = clock_type::now();
    const pid_t pid = spawn(request, plan, out);
    if (pid < 0) {
        cgroup.remove();
        return out;
    }
    out.started = true;
    // Where the case is in its cgroup (it has exec'd: it went in before), cgroup.kill ends all
    // it leaves; else the /proc sweep by token and descent does.
    const bool contained_by_cgroup = cgroup.holds(pid);
    watch(pid, request, started, out);
    ::kill(-pid, SIGKILL);
    if (!request.case_token.empty()) {
        cgroup.kill();
        end_case_processes(request.case_token, pid, contained_by_cgroup ? cgroup.dir : "");
    }
    // Before the reap: the group is ended by now, and until the reap its id cannot be reused,
    // so a guardian that outlives us never kills a stranger's group of the same number.
    tell_guardian('-', pid);
    reap(pid, started, out);
    {
        const std::lock_guard<std::mutex> lock(g_running_mutex);
        g_running_cases.erase(pid);
    }
    cgroup.remove();
    return out;
}

// ---- the run's containment -----------------------------------------------------------------

namespace {
std::string random_token() {
    std::random_device device;
    std::ostringstream out;
    out << std::hex << device() << device();
    return out.str();
}

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

/// Where the run's cgroup goes: a folder under ours; "" with the reason where there is none.
std::string planned_run_cgroup(const std::string& token, std::string& why) {
    const std::string own = own_cgroup_dir(why);
    return own.empty() ? own : own + "/pitfall-" + std::to_string(::getpid()) + "-" + token;
}

/// Makes the run's cgroup, proved by moving a process into it; false with the reason where
/// that cannot be done.
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

/// Removes a run's cgroup and its cases' (empty by now, or soon: up to 1 s).
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

/// The guardian's whole life: wait on the pipe; at a goodbye, leave; at its end without one
/// (the harness died), kill every process carrying the run's token, and the run's cgroup.
[[noreturn]] void guard(int pipe_fd, const std::string& token, const std::string& cgroup) {
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
            if (line == "q")
                ::_exit(0);
            const long pgid = line.size() > 1 ? std::strtol(line.c_str() + 1, nullptr, 10) : 0;
            if (pgid > 1 && line[0] == '+')
                groups.insert(static_cast<pid_t>(pgid));
            else if (pgid > 1 && line[0] == '-')
                groups.erase(static_cast<pid_t>(pgid));
        }
    }
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
    ::_exit(0);
}
} // namespace

status_or<containment> contain_cases(const std::string& mode) {
    if (mode != "auto" && mode != "cgroup" && mode != "subreaper")
        return status::error(
            pitfall_error::bad_environment,
            "PITFALL_CONTAINMENT='" + mode + "': expected auto, cgroup or subreaper", stage::init);
    if (g_contained.active)
        return containment{g_contained.run_cgroup.empty() ? "subreaper" : "cgroup",
                           g_contained.run_cgroup, g_contained.run_token};
    containment held{"subreaper", "PITFALL_CONTAINMENT=subreaper", random_token()};
    std::string planned;
    if (mode != "subreaper")
        planned = planned_run_cgroup(held.run_token, held.detail);
    // Orphaned descendants of a case (a setsid grandchild whose parent exited) come back to us,
    // not to init: each case's sweep finds them by their parents.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        return status::from_errno(errno, "prctl(PR_SET_CHILD_SUBREAPER)", stage::init);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return status::from_errno(errno, "pipe for the guardian", stage::init);
    std::cout.flush();
    // The guardian first, the cgroup after: a kill from here on leaves no cgroup behind.
    const pid_t guardian = ::fork();
    if (guardian < 0)
        return status::from_errno(errno, "fork of the guardian", stage::init);
    if (guardian == 0) {
        ::close(fds[1]);
        guard(fds[0], held.run_token, planned);
    }
    ::close(fds[0]);
    g_contained.active = true;
    g_contained.guardian = guardian;
    g_contained.guardian_fd = fds[1];
    g_contained.run_token = held.run_token;
    if (!planned.empty() && make_run_cgroup(planned, held.detail)) {
        g_contained.run_cgroup = planned;
        held.method = "cgroup";
        held.detail = planned;
    }
    if (mode == "cgroup" && held.method != "cgroup") {
        end_containment();
        return status::error(pitfall_error::bad_environment,
                             "PITFALL_CONTAINMENT=cgroup: " + held.detail, stage::init);
    }
    return held;
}

void end_containment() {
    if (!g_contained.active)
        return;
    (void)!::write(g_contained.guardian_fd, "q\n", 2);
    ::close(g_contained.guardian_fd);
    int status = 0;
    while (::waitpid(g_contained.guardian, &status, 0) < 0 && errno == EINTR) {
    }
    if (!g_contained.run_cgroup.empty())
        ::rmdir(g_contained.run_cgroup.c_str());
    g_contained.active = false;
    g_contained.guardian = -1;
    g_contained.guardian_fd = -1;
    g_contained.run_cgroup.clear();
    g_contained.run_token.clear();
    g_contained.case_count = 0;
}

} // namespace pitfall
