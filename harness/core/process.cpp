#include "pitfall/detail/process.hpp"
#include "pitfall/detail/text.hpp"

#include "process_parts.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <iomanip>
#include <map>
#include <mutex>
#include <optional>
#include <poll.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace pitfall {

using namespace process_parts;

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
    case SIGSTOP: return "SIGSTOP";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
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
        forget_running_case(pid);
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
            ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WSTOPPED | WNOHANG | WNOWAIT);
        if (seen < 0 && errno != EINTR)
            break;
        const double elapsed = seconds_since(started);
        if (seen == 0 && info.si_pid == pid) {
            if (info.si_code == CLD_EXITED || info.si_code == CLD_KILLED ||
                info.si_code == CLD_DUMPED)
                break;
            std::ostringstream how;
            how << "stopped by " << signal_name(info.si_status) << " at " << std::fixed
                << std::setprecision(2) << elapsed << " s";
            if (info.si_code == CLD_TRAPPED && !term_sent) {
                // A ptrace stop with this process its tracer (PTRACE_TRACEME): only we could
                // resume it, and we never will. Ended now, as a timeout would end it.
                out.stopped = how.str() + " in a ptrace stop (pitfall its tracer): it could "
                                          "never go on, so it was ended then";
                out.timed_out = true;
                ::kill(-pid, SIGKILL);
                term_sent = true;
                term_time = clock_type::now();
                continue;
            }
            if (info.si_code == CLD_STOPPED && out.stopped.empty())
                out.stopped = how.str() + " (job control) and not resumed";
        }
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
        // An exit wakes the poll below; a stop does not: look again every 100 ms for one
        // (a ptrace stop is ended at once, see above).
        if (!term_sent && wait_for > 0.1)
            wait_for = 0.1;
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
    forget_running_case(pid);
    cgroup.remove();
    return out;
}

} // namespace pitfall
