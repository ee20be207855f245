#include "pitfall/detail/process.hpp"
#include "pitfall/detail/text.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

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
    default: return "signal " + std::to_string(sig);
    }
}

std::string read_tail(const std::string& path, std::size_t max_bytes) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in)
        return {};
    const auto size = static_cast<std::size_t>(in.tellg());
    const std::size_t start = size > max_bytes ? size - max_bytes : 0;
    in.seekg(static_cast<std::streamoff>(start));
    std::string text(size - start, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    // A child's output is bytes; what is kept of it is text (records are JSON).
    return detail::utf8_tail(text, max_bytes);
}

namespace {
// Everything the child needs, prepared before fork: after it only async-signal-safe calls.
struct exec_plan {
    std::vector<std::string> env_strings;
    std::vector<std::string> args;
    std::vector<char*> envp;
    std::vector<char*> argv;
    std::string output;
};

void prepare(const process_request& request, exec_plan& plan) {
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const auto eq = entry.find('=');
        if (eq != std::string::npos && request.env_set.count(entry.substr(0, eq)) != 0)
            continue;
        plan.env_strings.push_back(entry);
    }
    for (const auto& [key, value] : request.env_set)
        plan.env_strings.push_back(key + "=" + value);
    for (auto& s : plan.env_strings)
        plan.envp.push_back(s.data());
    plan.envp.push_back(nullptr);
    plan.args = request.argv;
    for (auto& a : plan.args)
        plan.argv.push_back(a.data());
    plan.argv.push_back(nullptr);
    plan.output = request.output_path.empty() ? "/dev/null" : request.output_path;
}

// In the child, between fork and exec: its own group, death with the parent, default signal
// handlers, output to the file; an exec failure goes back through the pipe as errno.
[[noreturn]] void exec_child(const exec_plan& plan, pid_t parent, int error_pipe) {
    ::setpgid(0, 0); // its own group: a timeout ends it and everything it started
    // A harness killed outright (SIGKILL) cannot end its case: the kernel does it, so no
    // orphaned case runs on beside the `--resume` that repeats it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
        ::_exit(127);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGINT, &dfl, nullptr);
    ::sigaction(SIGTERM, &dfl, nullptr);
    ::sigaction(SIGHUP, &dfl, nullptr);
    const int fd = ::open(plan.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null_in = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
    }
    if (null_in >= 0)
        ::dup2(null_in, STDIN_FILENO);
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
    const pid_t pid = ::fork();
    if (pid < 0) {
        out.start_error = std::string("fork: ") + std::strerror(errno);
        ::close(exec_error_pipe[0]);
        ::close(exec_error_pipe[1]);
        return -1;
    }
    if (pid == 0)
        exec_child(plan, parent, exec_error_pipe[1]);
    ::setpgid(pid, pid); // also from the parent: no race with an early kill
    ::close(exec_error_pipe[1]);
    int exec_errno = 0;
    const bool exec_failed =
        ::read(exec_error_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
    ::close(exec_error_pipe[0]);
    if (exec_failed) {
        int st = 0;
        ::waitpid(pid, &st, 0);
        out.start_error = "cannot execute " + request.argv[0] + ": " + std::strerror(exec_errno);
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

process_outcome run_process(const process_request& request) {
    process_outcome out;
    if (request.argv.empty()) {
        out.start_error = "empty argv";
        return out;
    }
    exec_plan plan;
    prepare(request, plan);
    const auto started = clock_type::now();
    const pid_t pid = spawn(request, plan, out);
    if (pid < 0)
        return out;
    out.started = true;
    watch(pid, request, started, out);
    reap(pid, started, out);
    return out;
}

} // namespace pitfall
