// fork_after_cuda_init: a process that initialised CUDA forks a worker.
//
// What
//   A data loader or worker pool started with fork() (Python multiprocessing's default start
//   method on Linux) after the parent already used the GPU. Three variants:
//     reproduce_fork_after_init   parent initialises, forks; the child's first call is judged.
//     remedy_fork_before_init     parent forks first; the child initialises its own runtime.
//     remedy_spawn_fresh_process  parent initialises, then starts the worker as a fresh
//                                 program (fork + exec: the SDK's run_self, the 'spawn' start
//                                 method): helper_spawned_worker.
//   The worker's step is y = 2 x + 1 over `n` exact values (equality check).
//
// Why it fails
//   fork() copies the address space but only the calling thread, and none of the driver's
//   state that lives outside it (the contexts behind the device files, the driver's own
//   threads). A child of fork() holds a copy of an initialised runtime that owns no context,
//   and the driver refuses it: the child's first CUDA call returns cudaErrorInitializationError
//   (3; CUDA Runtime API, "Data types": "the CUDA driver and runtime could not be initialized";
//   the driver API's CUDA_ERROR_NOT_INITIALIZED, as the evidence threads report it). PyTorch
//   checks for it itself and says "Cannot re-initialize CUDA in forked subprocess". The CPU analog
//   is the same mechanism with a lock: a thread of the parent (a runtime's worker) holds a mutex at
//   the moment of fork; the child gets the mutex locked by a thread it does not have, and nothing
//   will ever unlock it (POSIX fork(): "the child process shall be created with a single thread").
//   A plain lock() would hang forever; the child here waits with pthread_mutex_timedlock, which
//   answers ETIMEDOUT after lock_timeout_ms, and the parent kills a child that outlives
//   child_timeout_seconds, so the case never hangs and never leaves a process behind.
//
// Expected per backend
//   cpu   reproduce_fork_after_init    ETIMEDOUT (host, errno) at init: the child could not
//                                      take the lock a parent thread held at fork.
//         remedy_fork_before_init      ok; the child took the lock, y checked.
//         remedy_spawn_fresh_process   ok; the fresh program's lock is its own, y checked.
//   cuda  (GPU; documented) reproduce_fork_after_init: cudaErrorInitializationError (3) from
//         the child's cudaGetDeviceCount (or, where the runtime answers the count from what the
//         parent cached, from its first cudaMalloc: info child_failed_call says which),
//         reported through the pipe, stage init; both remedies
//         ok with the result checked. Here, with no driver, the parent's cudaFree(0) answers
//         cudaErrorInsufficientDriver (35) before any fork: that is the reproduce's observed
//         outcome; the remedies are UNSUPPORTED with that reason (nothing to show without a
//         driver).
//
// Remedy
//   Create workers before the first CUDA call (fork before init), or start them as fresh
//   programs: multiprocessing.set_start_method("spawn") / "forkserver", posix_spawn, fork +
//   exec. Never call CUDA in a child of fork() from a process that already did.
//
// Evidence
//   inducer/pycuda#137 (cuInit "initialization error" in a forked child; fork + exec advised),
//   triton-lang/triton#10443 (a child forked after CUDA init gets error 3 from cuInit),
//   tensorflow/tensorflow#57877 (CUDA_ERROR_NOT_INITIALIZED in a forked multiprocessing
//   worker), IDEA-Research/GroundingDINO#276 ("Cannot re-initialize CUDA in forked subprocess").
#include "pitfall/scenario.hpp"

#include <pthread.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace fork_after_cuda_init {

// =============================================================================================
// The worker's step and its check (the same in every process).
// =============================================================================================
struct affine {
    const float* x;
    float* y;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { y[i] = 2.0f * x[i] + 1.0f; }
};

/// Exact halves: 2 x + 1 is exact in float, so the check is equality.
float input_value(std::size_t i) {
    return static_cast<float>(static_cast<long long>(i % 4099) - 2049) * 0.5f;
}

/// Runs the step on `Backend` and counts wrong elements; an error is the backend's.
template <class Backend> pitfall::status_or<long long> run_step(std::size_t n) {
    std::vector<float> h_x(n), h_y(n);
    for (std::size_t i = 0; i < n; ++i)
        h_x[i] = input_value(i);
    PITFALL_ASSIGN_OR_RETURN(auto d_x, Backend::template allocate<float>(n));
    PITFALL_ASSIGN_OR_RETURN(auto d_y, Backend::template allocate<float>(n));
    PITFALL_TRY(Backend::copy_to_device(d_x, h_x.data(), n));
    PITFALL_TRY(Backend::for_each(n, affine{d_x.data(), d_y.data()}));
    PITFALL_TRY(Backend::synchronize());
    PITFALL_TRY(Backend::copy_to_host(h_y.data(), d_y, n));
    long long wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
        wrong += static_cast<double>(h_y[i]) != 2.0 * static_cast<double>(h_x[i]) + 1.0 ? 1 : 0;
    return wrong;
}

// =============================================================================================
// The CPU's "runtime": a lock that a worker thread of the process holds while it runs.
// =============================================================================================
pthread_mutex_t runtime_lock = PTHREAD_MUTEX_INITIALIZER;

/// A thread that takes runtime_lock and keeps it until stop(), as a runtime's worker thread
/// holds its internal locks at unpredictable moments. Joined on every path.
class lock_holder {
public:
    lock_holder() = default;
    lock_holder(const lock_holder&) = delete;
    lock_holder& operator=(const lock_holder&) = delete;
    ~lock_holder() { stop(); }
    void start() {
        m_thread = std::thread([this] {
            pthread_mutex_lock(&runtime_lock);
            m_held.store(true);
            while (!m_stop.load())
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            pthread_mutex_unlock(&runtime_lock);
        });
        while (!m_held.load()) // fork only once the lock is really held
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    void stop() {
        m_stop.store(true);
        if (m_thread.joinable())
            m_thread.join();
    }

private:
    std::thread m_thread;
    std::atomic<bool> m_held{false};
    std::atomic<bool> m_stop{false};
};

/// The CPU worker's first act, like a CUDA worker's first CUDA call: take the runtime lock,
/// waiting at most `timeout_ms`. 0 or the errno of pthread_mutex_timedlock.
int take_runtime_lock(long long timeout_ms) {
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += static_cast<time_t>(timeout_ms / 1000);
    deadline.tv_nsec += static_cast<long>((timeout_ms % 1000) * 1000000);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    const int err = pthread_mutex_timedlock(&runtime_lock, &deadline);
    if (err == 0)
        pthread_mutex_unlock(&runtime_lock);
    return err;
}

// =============================================================================================
// The forked child: one report through a pipe, then _exit. The parent waits with a deadline.
// =============================================================================================
enum class failed_in : int { nothing = 0, errno_value = 1, cuda_error = 2, backend = 3 };

/// What a forked child writes into the pipe (a plain struct: the child exits without flushing
/// anything it inherited).
struct child_message {
    failed_in failure = failed_in::nothing;
    int code = 0;         ///< the errno or cudaError_t
    int call = 0;         ///< cuda: which of first_calls failed
    long long wrong = -1; ///< wrong elements of the step (when it ran)
};

/// The child's work: its runtime's first call, then the step.
template <class Backend> child_message child_work(std::size_t n, long long lock_timeout_ms) {
    child_message m;
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        if (const int err = take_runtime_lock(lock_timeout_ms); err != 0) {
            m.failure = failed_in::errno_value;
            m.code = err;
            return m;
        }
    } else {
#if PITFALL_HAS_CUDA
        // The runtime may answer the count from what the parent cached before the fork; the
        // first call that needs a context (an allocation) cannot.
        int devices = 0;
        void* probe = nullptr;
        cudaError_t err = cudaGetDeviceCount(&devices);
        if (err == cudaSuccess) {
            m.call = 1;
            err = cudaMalloc(&probe, 256);
        }
        if (err != cudaSuccess) {
            m.failure = failed_in::cuda_error;
            m.code = static_cast<int>(err);
            return m;
        }
        (void)cudaFree(probe);
#endif
    }
    auto wrong = run_step<Backend>(n);
    if (!wrong.is_ok()) {
        m.failure = failed_in::backend;
        return m;
    }
    m.wrong = wrong.value();
    return m;
}

/// What the parent learned from its forked child.
struct fork_result {
    child_message message;
    bool reported = false;
    pitfall::process_outcome process;
};

/// Forks, runs child_work in the child, and waits for its report and its exit (SIGKILL at the
/// deadline: a child stuck in a lock never outlives the case).
template <class Backend>
pitfall::status_or<fork_result> fork_worker(std::size_t n, long long lock_timeout_ms,
                                            double timeout_seconds) {
    int fds[2];
    if (pipe(fds) != 0)
        return pitfall::status::from_errno(errno, "pipe", pitfall::stage::init);
    const auto started = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid < 0) {
        const int err = errno;
        close(fds[0]);
        close(fds[1]);
        return pitfall::status::from_errno(err, "fork", pitfall::stage::init);
    }
    if (pid == 0) {
        close(fds[0]);
        const child_message m = child_work<Backend>(n, lock_timeout_ms);
        const ssize_t written = write(fds[1], &m, sizeof m);
        _exit(written == static_cast<ssize_t>(sizeof m) ? 0 : 1);
    }
    close(fds[1]);
    fork_result r;
    r.process.started = true;
    const auto deadline = started + std::chrono::duration<double>(timeout_seconds);
    int wstatus = 0;
    for (;;) {
        const pid_t done = waitpid(pid, &wstatus, WNOHANG);
        if (done == pid)
            break;
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &wstatus, 0);
            r.process.timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    r.process.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (WIFEXITED(wstatus))
        r.process.exit_code = WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        r.process.signal = WTERMSIG(wstatus);
    r.reported =
        read(fds[0], &r.message, sizeof r.message) == static_cast<ssize_t>(sizeof r.message);
    close(fds[0]);
    return r;
}

/// The child's report as this case's outcome: its first call's error, or ok with the step
/// checked.
pitfall::status judge_child(pitfall::context& ctx, const fork_result& r, std::size_t n) {
    ctx.record("child_wall_seconds", r.process.wall_seconds, "s");
    if (r.process.timed_out)
        return PITFALL_HOST_ERROR(pitfall::stage::init, pitfall::host_error::child_timed_out,
                                  "the forked child outlived its timeout and was killed");
    if (r.process.signal)
        return PITFALL_HOST_ERROR(pitfall::stage::init, pitfall::host_error::child_killed,
                                  "the forked child died of " +
                                      pitfall::signal_name(*r.process.signal));
    if (!r.reported)
        return PITFALL_HOST_ERROR(pitfall::stage::init, pitfall::host_error::child_wrote_no_result,
                                  "the forked child exited without a report");
    switch (r.message.failure) {
    case failed_in::errno_value:
        return pitfall::status::from_errno(
            r.message.code,
            "forked child: pthread_mutex_timedlock on the runtime lock a parent thread held at "
            "fork (no thread of the child will ever unlock it)",
            pitfall::stage::init);
    case failed_in::cuda_error:
#if PITFALL_HAS_CUDA
        ctx.record_info("child_failed_call",
                        r.message.call == 1 ? "cudaMalloc" : "cudaGetDeviceCount");
        return pitfall::detail::from_cuda(
            static_cast<cudaError_t>(r.message.code), pitfall::stage::init,
            r.message.call == 1 ? "forked child: cudaMalloc" : "forked child: cudaGetDeviceCount",
            __FILE__, __LINE__);
#else
        [[fallthrough]]; // a CUDA code from a build without CUDA cannot be named
#endif
    case failed_in::backend:
        return PITFALL_HOST_ERROR(pitfall::stage::compute, pitfall::host_error::child_failed,
                                  "the forked child's step failed after its runtime started");
    case failed_in::nothing: break;
    }
    ctx.record("child_wrong_elements", static_cast<double>(r.message.wrong));
    ctx.check("child_step_matches", r.message.wrong == 0,
              std::to_string(r.message.wrong) + " of " + std::to_string(n) +
                  " elements of the child's y differ from 2 x + 1");
    return pitfall::status::ok();
}

// =============================================================================================
// The parent's runtime start: a CUDA call, or the CPU's lock-holding thread.
// =============================================================================================
template <class Backend> pitfall::status initialise_runtime(lock_holder& holder) {
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        holder.start();
    } else {
        (void)holder;
#if PITFALL_HAS_CUDA
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaFree(nullptr)); // the customary "init CUDA"
#endif
    }
    return pitfall::status::ok();
}

struct settings {
    std::size_t n = 0;
    long long lock_timeout_ms = 0;
    double child_timeout_seconds = 0;
};

pitfall::status_or<settings> read_settings(const pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("n"));
    PITFALL_ASSIGN_OR_RETURN(const long long lock_ms, ctx.param_int("lock_timeout_ms"));
    PITFALL_ASSIGN_OR_RETURN(const long long timeout, ctx.param_int("child_timeout_seconds"));
    return settings{static_cast<std::size_t>(n), lock_ms, static_cast<double>(timeout)};
}

/// A missing driver or device stops a remedy before it can show anything: UNSUPPORTED.
pitfall::status unless_no_gpu(const pitfall::status& s) {
    if (s.name() == "cudaErrorInsufficientDriver" || s.name() == "cudaErrorNoDevice")
        return pitfall::status::unsupported_because(s, s.name() + ": no GPU to run the worker on");
    return s;
}

// =============================================================================================
// The variants.
// =============================================================================================
template <class Backend> pitfall::status reproduce_fork_after_init(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const settings s, read_settings(ctx));
    lock_holder holder;
    PITFALL_TRY(initialise_runtime<Backend>(holder)); // no driver: cudaErrorInsufficientDriver
    ctx.record_info("start_method", "fork after the runtime started");
    PITFALL_ASSIGN_OR_RETURN(const fork_result r,
                             fork_worker<Backend>(s.n, s.lock_timeout_ms, s.child_timeout_seconds));
    holder.stop();
    return judge_child(ctx, r, s.n);
}

template <class Backend> pitfall::status remedy_fork_before_init(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const settings s, read_settings(ctx));
    ctx.record_info("start_method", "fork before the runtime started");
    PITFALL_ASSIGN_OR_RETURN(const fork_result r,
                             fork_worker<Backend>(s.n, s.lock_timeout_ms, s.child_timeout_seconds));
    lock_holder holder; // the parent starts its own runtime only now: the child is unaffected
    PITFALL_TRY(unless_no_gpu(initialise_runtime<Backend>(holder)));
    holder.stop();
    return unless_no_gpu(judge_child(ctx, r, s.n));
}

template <class Backend> pitfall::status remedy_spawn_fresh_process(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const settings s, read_settings(ctx));
    lock_holder holder;
    PITFALL_TRY(unless_no_gpu(initialise_runtime<Backend>(holder)));
    ctx.record_info("start_method", "spawn: fork + exec of a fresh program after the runtime "
                                    "started");
    PITFALL_ASSIGN_OR_RETURN(const pitfall::child_run child,
                             pitfall::run_self(ctx, "helper_spawned_worker", {},
                                               {"n=" + std::to_string(s.n)},
                                               s.child_timeout_seconds));
    holder.stop();
    PITFALL_ASSIGN_OR_RETURN(const pitfall::child_report report,
                             pitfall::read_child(child, "the spawned worker"));
    pitfall::adopt_child_facts(ctx, report.result);
    if (!report.outcome.is_ok())
        return unless_no_gpu(report.outcome);
    // The worker judged its own y; its verdicts are this case's proof that the remedy worked.
    std::size_t checks = 0, failed = 0;
    for (const auto& check : report.result.value("checks", nlohmann::json::array())) {
        ++checks;
        failed += check.value("passed", false) ? 0 : 1;
    }
    ctx.check("spawned_worker_checks_passed", checks > 0 && failed == 0,
              std::to_string(failed) + " of " + std::to_string(checks) +
                  " checks of the spawned worker failed");
    return pitfall::status::ok();
}

/// The spawned program: its runtime is its own (the SDK's probe started it on CUDA), so its
/// first call and its step succeed.
template <class Backend> pitfall::status helper_spawned_worker(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const settings s, read_settings(ctx));
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        if (const int err = take_runtime_lock(s.lock_timeout_ms); err != 0)
            return pitfall::status::from_errno(err, "spawned worker: runtime lock",
                                               pitfall::stage::init);
    }
    PITFALL_ASSIGN_OR_RETURN(const long long wrong, run_step<Backend>(s.n));
    ctx.record("wrong_elements", static_cast<double>(wrong));
    ctx.check("worker_step_matches", wrong == 0,
              std::to_string(wrong) + " of " + std::to_string(s.n) +
                  " elements of the worker's y differ from 2 x + 1");
    return pitfall::status::ok();
}

} // namespace fork_after_cuda_init

using namespace fork_after_cuda_init; // the variants by their own names
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_fork_after_init),
                 PITFALL_VARIANT(remedy_fork_before_init),
                 PITFALL_VARIANT(remedy_spawn_fresh_process),
                 PITFALL_VARIANT(helper_spawned_worker))
