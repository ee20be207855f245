// async_error_reporting: a kernel's fault is reported by a later, unrelated call.
//
// What
//   A kernel writes y[i * stride] for i < n with a wrong stride (the bug: every i >= n / stride
//   writes past y, the far ones into unmapped memory: with the defaults, n = 2^20 floats and
//   stride 16, up to 60 MiB past the 4 MiB buffer). The program then goes on with unrelated
//   work on another buffer, checking every call:
//     call 0  the launch check (cudaGetLastError)
//     call 1  cudaMemcpy of another buffer to the device
//     call 2  cudaMemcpy of it back
//     call 3  cudaFree of an unrelated scratch allocation
//     call 4  cudaDeviceSynchronize
//   The first call that fails "reports" the fault: recorded as info reported_by and the
//   measurement calls_after_launch (its number above). Three variants:
//     reproduce_reported_later   the sequence as written.
//     remedy_check_after_launch  cudaGetLastError + cudaStreamSynchronize right after the
//                                launch, before anything else.
//     remedy_launch_blocking     the sequence in a child process started with
//                                CUDA_LAUNCH_BLOCKING=1.
//
// Why it fails
//   A kernel launch is asynchronous: it returns once the launch is queued, before the kernel
//   runs, so cudaGetLastError after it sees only launch errors (a bad configuration). A fault
//   while the kernel runs (cudaErrorIllegalAddress, 700) is reported "by any subsequent
//   call" (CUDA C++ Programming Guide, "Error Checking" and "Asynchronous Concurrent
//   Execution"): here the next cudaMemcpy, which waits for the kernel on the legacy default
//   stream. The error message and the stack trace then name a copy of an unrelated buffer.
//   It is also STICKY (docs/cuda-rules.md#sticky-errors): every later call fails with it, so
//   every later line looks guilty. CUDA_LAUNCH_BLOCKING=1 makes every launch synchronous
//   (CUDA C++ Programming Guide, "CUDA Environment Variables": "disables asynchronous kernel
//   launches"); the driver reads it when CUDA initialises, so it must be in the environment
//   before the first CUDA call, hence a child process (run_self).
//   The CPU has the same shape with threads: work handed to a worker (std::async) fails on the
//   worker, and its exception is stored in the future until someone calls future.get(): the
//   calls in between run normally and the error surfaces at the get(), far from its cause.
//   The worker uses bounds-checked writes (vector::at), so the CPU analogue is a real
//   std::out_of_range, not an out-of-bounds write.
//
// Expected per backend
//   cpu   reproduce_reported_later: std::out_of_range (host, synchronize) from the worker,
//         reported_by "future.get()", calls_after_launch 4 (the unrelated copies succeeded).
//         Measured, not assumed: the case waits until the worker has faulted, then counts the
//         calls that succeed with the fault already there (calls_unaware_of_the_fault, 4:
//         the launch check and the three unrelated calls) and
//         checks that some did and that a later wait reported it
//         (reported_later_than_it_happened).
//         remedy_check_after_launch: the same error, calls_after_launch 0.
//         remedy_launch_blocking: UNSUPPORTED (CUDA_LAUNCH_BLOCKING is the CUDA driver's).
//   cuda  reproduce_reported_later: cudaErrorIllegalAddress, sticky, reported by call 1 (the
//         cudaMemcpy of the other buffer), stage copy; calls 2-4 fail with it too (events).
//         The name depends on how far the stray writes go: a standalone copy of this kernel
//         on an H200 (driver 580.159.04, CUDA 13.0, 2026-11-26) gave cudaErrorIllegalAddress
//         (700) for strides 2-64 and cudaErrorInvalidAddressSpace (717, also sticky) for
//         strides 256 and 4096, whose writes reach 1 GiB and more past the buffer; in every
//         case the launch check saw nothing and call 1 reported it, and under
//         CUDA_LAUNCH_BLOCKING=1 call 0 did.
//         remedy_check_after_launch: the same error at the launch's own synchronize (call 0).
//         remedy_launch_blocking: the child's outcome, the same error, reported by call 0
//         (child.calls_after_launch 0). Sources: the Programming Guide sections above.
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
//
// Remedy
//   In debug builds, check every launch and synchronise right after it (cudaGetLastError +
//   cudaStreamSynchronize: PITFALL_CUDA_CHECK_LAUNCH), or run with CUDA_LAUNCH_BLOCKING=1 to
//   find the kernel; compute-sanitizer names the faulting access itself. Release builds keep
//   the asynchrony and check at natural synchronisation points, knowing what a report there
//   means.
//
// Evidence
//   Erkaman/parle-cuda#1 (a failed launch reported by a later cudaMemcpy), microsoft/CNTK#1850
//   (illegal access reported by cudaMemcpy; the fault is in an earlier kernel), NVIDIA/cudf#22130
//   (reported from a stream synchronise, not where it occurred), pytorch/pytorch#19120 (the
//   next, unrelated line raises the kernel's error).
// Baselines per backend and profile (generated by ci/catalog.py from expected/; do not edit):
//   cpu   host: observed on AMD EPYC: 1 reproduced on the CPU, 2 remedies
//   cuda  no-gpu: observed without a GPU: 1 UNSUPPORTED, 2 remedies
//   cuda  hopper-cuda13: observed on NVIDIA H200: 1 reproduced on the GPU, 2 remedies
//   cuda  hopper-cuda11-12: documented, never observed: 1 predicted, 2 remedies
//   cuda  ada-ampere-cuda12: documented, never observed: 1 predicted, 2 remedies
//   evidence threads: 4 gated (docs/evidence.md)
// (end of the generated baselines)
#include "pitfall/scenario.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace async_error_reporting {

/// The faulty kernel body: the wrong stride writes past y for every i >= n / stride.
struct strided_store {
    float* y;
    std::size_t stride;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { y[i * stride] = 1.f; }
};

/// The CPU worker's body: the same wrong stride through bounds-checked writes, so the bug is a
/// std::out_of_range on the worker thread instead of an out-of-bounds write.
void strided_store_checked(std::vector<float>& y, std::size_t n, std::size_t stride) {
    for (std::size_t i = 0; i < n; ++i)
        y.at(i * stride) = 1.f;
}

struct config {
    std::size_t n = 0, stride = 0, other = 0;
    double child_timeout = 0;
};

pitfall::status_or<config> read_config(const pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("n"));
    PITFALL_ASSIGN_OR_RETURN(const long long stride, ctx.param_int("stride"));
    PITFALL_ASSIGN_OR_RETURN(const long long other, ctx.param_int("other"));
    PITFALL_ASSIGN_OR_RETURN(const long long timeout, ctx.param_int("child_timeout_seconds"));
    config c;
    c.n = static_cast<std::size_t>(n);
    c.stride = static_cast<std::size_t>(stride);
    c.other = static_cast<std::size_t>(other);
    c.child_timeout = static_cast<double>(timeout);
    return c;
}

/// Runs the numbered calls after the launch in order, each checked; every result is an event
/// ("call_<k>_<what>"), the first failure is the one a program would have reported.
class call_log {
public:
    explicit call_log(pitfall::context& ctx) : m_ctx(ctx) {}
    template <class Call> void run(const std::string& what, Call call) {
        const pitfall::status s = call();
        m_ctx.record_event("call_" + std::to_string(m_next) + "_" + what, s);
        if (s.is_ok() && m_first.is_ok() && m_fault_seen)
            ++m_unaware; // succeeded with the fault already there
        if (!s.is_ok() && m_first.is_ok()) {
            m_first = s;
            m_ctx.record_info("reported_by", what);
            m_ctx.record("calls_after_launch", static_cast<double>(m_next));
        }
        ++m_next;
    }
    /// The first failure (ok when every call succeeded: then nothing was reported at all).
    const pitfall::status& first_failure() const { return m_first; }
    /// Whether the fault was known (to the harness, not to the calls) to have happened before
    /// the calls that follow.
    void note_fault(bool happened) { m_fault_seen = happened; }
    bool fault_seen() const { return m_fault_seen; }
    /// The calls that succeeded after the fault had happened and before one reported it.
    int unaware() const { return m_unaware; }

private:
    pitfall::context& m_ctx;
    int m_next = 0;
    int m_unaware = 0;
    bool m_fault_seen = false;
    pitfall::status m_first;
};

pitfall::status from_exception(const std::exception& e) {
    return pitfall::status::error(pitfall::library::host, "std::out_of_range", e.what(),
                                  pitfall::stage::synchronize);
}

/// Waits for the CPU worker and turns its stored exception into the status a program sees.
pitfall::status collect_worker(std::future<void>& work) {
    try {
        work.get();
    } catch (const std::out_of_range& e) {
        return from_exception(e);
    }
    return pitfall::status::ok();
}

/// The CPU form of the sequence: the faulty work on a worker thread (std::async), then the
/// unrelated calls. `check_at_once`: the launch check also waits for the worker.
template <class Backend, class DeviceBuffer>
void cpu_sequence(const config& cfg, bool check_at_once, const std::vector<float>& h_other,
                  std::vector<float>& h_back, DeviceBuffer& d_other, call_log& calls) {
    std::vector<float> y(cfg.n, 0.f);
    std::atomic<bool> faulted{false};
    std::future<void> work = std::async(std::launch::async, [&] {
        try {
            strided_store_checked(y, cfg.n, cfg.stride);
        } catch (...) {
            faulted = true; // the fault has happened; who hears of it is the question
            throw;
        }
    });
    if (!check_at_once) {
        // Measured, not assumed: the fault has happened before the unrelated calls run,
        // so each of them that succeeds ran with the error already there, unreported.
        while (!faulted &&
               work.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
        }
        calls.note_fault(faulted);
    }
    // Starting the worker cannot report its failure; waiting for it can.
    calls.run("launch_check", [&]() -> pitfall::status {
        if (!check_at_once)
            return pitfall::status::ok();
        return collect_worker(work);
    });
    calls.run("copy_other_to_device",
              [&] { return Backend::copy_to_device(d_other, h_other.data(), cfg.other); });
    calls.run("copy_other_to_host",
              [&] { return Backend::copy_to_host(h_back.data(), d_other, cfg.other); });
    calls.run("free_scratch", [&] {
        std::vector<float>().swap(h_back); // a host release: nothing to report
        return pitfall::status::ok();
    });
    calls.run("future_get", [&]() -> pitfall::status {
        if (!work.valid()) // already collected by the launch check
            return pitfall::status::ok();
        return collect_worker(work);
    });
}

/// The CUDA form of the sequence: the faulty kernel, then the unrelated calls. An error
/// setting it up (the allocations) is returned; the calls' own results go to `calls`.
template <class Backend, class DeviceBuffer>
pitfall::status cuda_sequence(const config& cfg, bool check_at_once,
                              const std::vector<float>& h_other, std::vector<float>& h_back,
                              DeviceBuffer& d_other, call_log& calls) {
#if PITFALL_HAS_CUDA && defined(__CUDACC__)
    PITFALL_ASSIGN_OR_RETURN(auto y, Backend::template allocate<float>(cfg.n));
    void* scratch = nullptr; // what call 3 frees: an allocation unrelated to the fault
    PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMalloc(&scratch, 256));
    // DELIBERATE FAULT: y[i * stride] leaves y for i >= n / stride (far into unmapped
    // addresses for the largest i). for_each checks the launch (cudaGetLastError) itself.
    calls.run("launch_check", [&]() -> pitfall::status {
        PITFALL_TRY(Backend::for_each(cfg.n, strided_store{y.data(), cfg.stride}));
        if (check_at_once)
            PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaStreamSynchronize(nullptr));
        return pitfall::status::ok();
    });
    calls.run("copy_other_to_device", [&]() -> pitfall::status {
        PITFALL_CUDA_TRY(pitfall::stage::copy,
                         cudaMemcpy(d_other.data(), h_other.data(), cfg.other * sizeof(float),
                                    cudaMemcpyHostToDevice));
        return pitfall::status::ok();
    });
    calls.run("copy_other_to_host", [&]() -> pitfall::status {
        PITFALL_CUDA_TRY(pitfall::stage::copy,
                         cudaMemcpy(h_back.data(), d_other.data(), cfg.other * sizeof(float),
                                    cudaMemcpyDeviceToHost));
        return pitfall::status::ok();
    });
    calls.run("free_scratch", [&]() -> pitfall::status {
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaFree(scratch));
        return pitfall::status::ok();
    });
    calls.run("device_synchronize", [&]() -> pitfall::status {
        PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaDeviceSynchronize());
        return pitfall::status::ok();
    });
#else
    (void)cfg, (void)check_at_once, (void)h_other, (void)h_back, (void)d_other, (void)calls;
#endif
    return pitfall::status::ok();
}

/// The checks on who reported the fault, and (CPU reproduce) how late.
template <class Backend>
void check_reporting(pitfall::context& ctx, const call_log& calls, bool check_at_once) {
    const pitfall::status& reported = calls.first_failure();
    ctx.check("fault_reported", !reported.is_ok(),
              reported.is_ok() ? "no call reported the faulty launch" : reported.describe());
    if (Backend::kind == pitfall::backend_kind::cpu && !check_at_once) {
        // The failure itself, measured: the worker had faulted before the unrelated calls,
        // and they succeeded all the same, one after the other, until a wait reported it.
        ctx.record("calls_unaware_of_the_fault", static_cast<double>(calls.unaware()));
        ctx.check("reported_later_than_it_happened",
                  calls.fault_seen() && calls.unaware() > 0 && !reported.is_ok(),
                  std::string(calls.fault_seen() ? "the worker had faulted; "
                                                 : "the worker never faulted; ") +
                      std::to_string(calls.unaware()) +
                      " call(s) succeeded after the fault before one reported it");
    }
}

/// The whole sequence: the faulty launch, then the calls. `check_at_once`: the launch check
/// also waits for the work (remedy_check_after_launch).
template <class Backend>
pitfall::status faulty_sequence(pitfall::context& ctx, bool check_at_once) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const std::vector<float> h_other(cfg.other, 2.f);
    std::vector<float> h_back(cfg.other, 0.f);
    PITFALL_ASSIGN_OR_RETURN(auto d_other, Backend::template allocate<float>(cfg.other));
    call_log calls(ctx);
    ctx.ran_on(Backend::describe_device());
    if constexpr (Backend::kind == pitfall::backend_kind::cpu)
        cpu_sequence<Backend>(cfg, check_at_once, h_other, h_back, d_other, calls);
    else
        PITFALL_TRY(cuda_sequence<Backend>(cfg, check_at_once, h_other, h_back, d_other, calls));
    check_reporting<Backend>(ctx, calls, check_at_once);
    return calls.first_failure();
}

template <class Backend> pitfall::status reproduce_reported_later(pitfall::context& ctx) {
    return faulty_sequence<Backend>(ctx, false);
}

template <class Backend> pitfall::status remedy_check_after_launch(pitfall::context& ctx) {
    return faulty_sequence<Backend>(ctx, true);
}

template <class Backend> pitfall::status helper_faulty_sequence(pitfall::context& ctx) {
    return faulty_sequence<Backend>(ctx, false);
}

constexpr const char* launch_blocking_is_the_drivers =
    "CUDA_LAUNCH_BLOCKING is read by the CUDA driver; the CPU's synchronous form is "
    "remedy_check_after_launch (future.get() right after starting the worker)";

// CUDA only (PITFALL_CUDA_VARIANT answers for the CPU backend).
pitfall::status remedy_launch_blocking(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    // Set before the child's first CUDA call: the driver reads it once, at initialisation.
    PITFALL_ASSIGN_OR_RETURN(const auto child, pitfall::run_self(ctx, "helper_faulty_sequence",
                                                                 {{"CUDA_LAUNCH_BLOCKING", "1"}},
                                                                 {}, cfg.child_timeout));
    PITFALL_ASSIGN_OR_RETURN(const pitfall::child_report report,
                             pitfall::read_child(child, "the CUDA_LAUNCH_BLOCKING=1 child"));
    ctx.ran_on(report.result.value("ran_on", std::string("unknown: the child recorded no ran_on")));
    pitfall::adopt_child_facts(ctx, report.result);
    const nlohmann::json events = report.result.value("events", nlohmann::json::object());
    for (const auto& [name, e] : events.items())
        ctx.record_event("child." + name, pitfall::outcome_from_json(e));
    return report.outcome;
}

} // namespace async_error_reporting

using namespace async_error_reporting; // the variants by their own names
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_reported_later),
                 PITFALL_VARIANT(remedy_check_after_launch),
                 PITFALL_CUDA_VARIANT(remedy_launch_blocking, launch_blocking_is_the_drivers),
                 PITFALL_VARIANT(helper_faulty_sequence))
