// pitfall/scenario.hpp: what a scenario program sees, and its registration macros.
//
// A scenario is one function template over the backend per variant. Each returns the observed
// outcome as a status; everything else it learns goes into the context:
//
//   template <class Backend> pitfall::status reproduce(pitfall::context& ctx) {
//       PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("n"));
//       PITFALL_ASSIGN_OR_RETURN(auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
//           return Backend::for_each(n, my_functor{...}); }));
//       ctx.record_samples("step_seconds", seconds, "s");
//       return pitfall::status::ok();
//   }
//   template <class Backend> pitfall::status remedy(pitfall::context& ctx) { ... }
//   PITFALL_SCENARIO(PITFALL_VARIANT(reproduce), PITFALL_VARIANT(remedy))
//
// The macro writes main(): the process protocol (`--list`, `--check-variants`, `--backend B
// --variant V --out F [--param k=v ...]`), parameter defaults and bounds from scenario.json
// (compiled in: `min`, `max`, `choices`), the CUDA readiness probe, the exception boundary and
// the result file. The variants in code must be exactly those of scenario.json, or the program
// refuses to start. Exit 0: a result was written whatever the outcome; 77: unsupported here
// (reason in the result); 2: bad usage or a bad parameter.
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/controls.hpp"
#include "pitfall/process.hpp"
#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pitfall {

/// One running case: its identity, its parameters and what it records.
class context {
public:
    context(std::string scenario, std::string variant, backend_kind backend,
            const std::string& params_json);
    ~context();
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    const std::string& scenario() const;
    const std::string& variant() const;
    backend_kind backend() const;

    /// Parameters, with defaults from scenario.json; a malformed value is a bad_parameter error
    /// naming the parameter (the program then exits 2).
    status_or<long long> param_int(const std::string& name) const;
    status_or<double> param_double(const std::string& name) const;
    status_or<std::string> param_string(const std::string& name) const;

    /// Timed repetitions (built-in parameters `samples`, odd and >= 1, default 9; `warmup`,
    /// untimed repetitions first, default 1; `warmup_seconds`, at least that long warming up,
    /// default 0.25).
    int sample_count() const;
    int warmup_count() const;
    /// The seconds the next warm-up must last: `warmup_seconds` for the process's first timed
    /// series, 0 after one warm-up has run that long (what it waits out, clock ramp-up, page
    /// faults, memory placement, belongs to the process, not to each series).
    double warmup_seconds() const;
    /// Said by warm_up once it has warmed the process for `warmup_seconds`.
    void process_warmed();

    /// A single measured number ("final_loss", "samples_per_second").
    void record(const std::string& name, double value, const std::string& unit = "");
    /// Raw timing samples, kept as measured (statistics are the harness's job).
    void record_samples(const std::string& name, const std::vector<double>& values,
                        const std::string& unit = "s");
    /// A library outcome that is not the case's outcome (e.g. cuDNN refusing double).
    void record_event(const std::string& name, const status& observed);
    /// A free-form fact (a version string, a device attribute).
    void record_info(const std::string& name, const std::string& value);
    /// A self-check against an independent reference; a failed check is NUMERIC_MISMATCH.
    void check(const std::string& name, bool passed, const std::string& detail);
    /// Proof of where the work ran ("cpu: ...", "cuda:0 ..."): the harness compares it with the
    /// backend that was asked for.
    void ran_on(const std::string& where);
    bool has_ran_on() const;
    /// The SDK's count of the GPU work the case did (pitfall::count_gpu_work), written as the
    /// result's "gpu_work": {kernels, library_calls, required} or {error, required}. Set by the
    /// SDK after the case returns, never by a case.
    void record_gpu_work(const nlohmann::json& evidence);

    /// The calibration controls this case's timed series are bound by (scenario.json's
    /// "timings" for its variant and backend), set by the SDK before the case starts.
    const std::vector<std::string>& controls() const;
    void set_controls(std::vector<std::string> names);
    /// Whether a control has had its untimed first run in this process.
    bool control_warm(const std::string& name) const;
    /// One run of a control (time_samples does this around every sample): `warming` marks the
    /// untimed first run; an error is kept (the series then says its control is missing) and
    /// never changes the case's outcome. The samples go with the next series recorded.
    /// `cpu_wait_share`: the share of the control sample's time the thread waited for a CPU
    /// (controls::cpu_wait_clock), for a host control.
    void record_control(const std::string& name, const status_or<double>& seconds, bool warming,
                        std::optional<double> cpu_wait_share = std::nullopt);
    /// The share of each sample's time the timing thread waited for a CPU (series_watch, on the
    /// CPU backend): goes with the series recorded next that have as many samples.
    void record_cpu_wait_shares(const std::vector<double>& shares);
    /// What may have disturbed the series being timed (controls::cpu_watch, GPU state before and
    /// after): goes with the next series recorded.
    void record_disturbance(const nlohmann::json& disturbance);

    /// The result document (JSON text) for this case with the given outcome.
    std::string result_json(const status& outcome) const;

    struct impl;

private:
    std::unique_ptr<impl> m_impl;
};

/// A parameter value that breaks a rule scenario.json cannot state (one parameter against
/// another: a batch larger than the data set). The case does not run: the program exits 2 and
/// names the parameter. Bounds of one parameter belong in scenario.json (min, max, choices).
status bad_parameter(const std::string& name, const std::string& why);

/// For a variant with no honest CPU analog: UNSUPPORTED on the CPU backend, saying why; ok on
/// CUDA. `PITFALL_TRY(pitfall::cuda_only<Backend>("a CUDA Graph removes launch cost..."));`
/// A variant that is CUDA-only as a whole is registered with PITFALL_CUDA_VARIANT instead.
template <class Backend> status cuda_only(const std::string& why_not_on_cpu) {
    if constexpr (Backend::kind == backend_kind::cpu)
        return status::unsupported("no CPU analog: " + why_not_on_cpu);
    else
        return status::ok();
}

/// Untimed calls of `fn` until both `warmup` calls and `warmup_seconds` have passed. Time, not
/// a count: a fresh process runs its first ~0.1 s up to 30% slower on shared machines (clock
/// ramp, page faults, memory placement), and a median taken in that phase moves a whole run.
/// Once per process: a later series of the same process only runs its `warmup` calls (its own
/// code path's caches), not the time again.
template <class Backend, class Fn> status warm_up(context& ctx, Fn&& fn) {
    const auto start = std::chrono::steady_clock::now();
    const auto enough = std::chrono::duration<double>(ctx.warmup_seconds());
    for (int i = 0; i < ctx.warmup_count() || std::chrono::steady_clock::now() - start < enough;
         ++i) {
        PITFALL_TRY(fn());
        PITFALL_TRY(Backend::synchronize());
    }
    ctx.process_warmed();
    return status::ok();
}

namespace detail {
/// One sample of each of the case's controls, as long as `target_seconds` (a sample of the
/// series) or one run if that is shorter; the first run of each in the process is untimed, and
/// a target of 0 only warms them up.
void run_controls(context& ctx, double target_seconds);
} // namespace detail

/// The controls and the disturbance watch around one timed series (time_samples keeps one; a
/// case that times with its own clock keeps its own, calling after_sample and finish): a
/// control sample as long as each sample after it, the run queue after each, steal over the
/// whole series, and (CUDA) the GPU's clocks and throttle reasons before and after.
///
///   pitfall::series_watch<Backend> watch(ctx);
///   for (...) { const double s = one_epoch(); seconds.push_back(s); watch.after_sample(s); }
///   watch.finish();
///   ctx.record_samples("epoch_seconds", seconds);
template <class Backend> class series_watch {
public:
    explicit series_watch(context& ctx) : m_ctx(ctx) {
        if constexpr (Backend::kind == backend_kind::cuda)
            m_gpu_before = controls::gpu_state(detail::current_gpu_bus_id());
        detail::run_controls(m_ctx, 0);
        m_waited.mark();
    }
    /// Optional: marks where a sample starts, so that its CPU wait is its own (without it, the
    /// wait counts from the end of the last after_sample).
    void before_sample() { m_waited.mark(); }
    void after_sample(double sample_seconds) {
        // The host thread's wait says what held back host work; a CUDA sample is the device's.
        if constexpr (Backend::kind == backend_kind::cpu) {
            const std::optional<double> share = m_waited.share();
            m_shares_ok = m_shares_ok && share.has_value();
            m_shares.push_back(share.value_or(0.0));
        }
        m_cpu.tick();
        detail::run_controls(m_ctx, sample_seconds);
        m_waited.mark();
    }
    void finish() {
        nlohmann::json d = {{"cpu", m_cpu.finish()}};
        if constexpr (Backend::kind == backend_kind::cuda)
            d["gpu"] = {{"before", m_gpu_before},
                        {"after", controls::gpu_state(detail::current_gpu_bus_id())}};
        m_ctx.record_disturbance(d);
        if (Backend::kind == backend_kind::cpu && m_shares_ok && !m_shares.empty())
            m_ctx.record_cpu_wait_shares(m_shares);
    }

private:
    context& m_ctx;
    controls::cpu_watch m_cpu;
    controls::cpu_wait_clock m_waited;
    std::vector<double> m_shares;
    bool m_shares_ok = true;
    nlohmann::json m_gpu_before;
};

/// Warm-up (warm_up) then `ctx.sample_count()` timed calls of `fn` (returns status); seconds
/// per call. CPU: steady clock around synchronous work. CUDA: events around the work on the
/// stream. Between samples it runs the case's calibration controls and watches for disturbance
/// (series_watch); both go with the series the case records next.
template <class Backend, class Fn>
status_or<std::vector<double>> time_samples(context& ctx, Fn&& fn) {
    PITFALL_TRY(warm_up<Backend>(ctx, fn));
    std::vector<double> seconds;
    seconds.reserve(static_cast<std::size_t>(ctx.sample_count()));
    typename Backend::timer clock;
    series_watch<Backend> watch(ctx);
    for (int i = 0; i < ctx.sample_count(); ++i) {
        watch.before_sample();
        PITFALL_TRY(clock.start());
        PITFALL_TRY(fn());
        PITFALL_ASSIGN_OR_RETURN(const double s, clock.stop_seconds());
        seconds.push_back(s);
        watch.after_sample(s);
    }
    watch.finish();
    return seconds;
}

/// What a child copy of this scenario program did (see run_self).
struct child_run {
    process_outcome process;
    std::string result_json; ///< the child's result document ("" when it wrote none)
    std::string output;      ///< the end of its stdout + stderr
};

/// Starts this scenario program again as a separate process running `variant` (usually a
/// `"helper": true` variant) on the same backend, with extra environment and `--param k=v`
/// values, and waits for it (timeout: TERM, then KILL). For cases that need a second real
/// process (one holds GPU memory while another asks for some) or a process started under a
/// changed environment (CUDA_VISIBLE_DEVICES, the dynamic loader's library path).
///
///   PITFALL_ASSIGN_OR_RETURN(auto b, pitfall::run_self(ctx, "second_process",
///                                                      {{"CUDA_VISIBLE_DEVICES", "0"}}, {}, 60));
status_or<child_run> run_self(const context& ctx, const std::string& variant,
                              const std::map<std::string, std::string>& env,
                              const std::vector<std::string>& params, double timeout_seconds);

/// What a child copy reported, read back (see read_child).
struct child_report {
    status outcome;        ///< the child's own outcome: library, name, stage, stickiness kept
    nlohmann::json result; ///< its whole result document
};

/// Reads back what a child copy did. A child that timed out, was killed by a signal, exited
/// outside the protocol (not 0 or 77) or left no readable result is an error of its own
/// (host_error::child_*), never ok; `who` names it in messages ("process B").
status_or<child_report> read_child(const child_run& child, const std::string& who);

/// Copies a child's info and measurements into this case under `prefix` ("child."), so a
/// reader of the parent's result sees what the child observed. Its wall time is left out.
void adopt_child_facts(context& ctx, const nlohmann::json& child_result,
                       const std::string& prefix = "child.");

/// The status a result document's "outcome" object describes (the inverse of what the SDK
/// writes); `context` is put in front of its message.
status outcome_from_json(const nlohmann::json& outcome, const std::string& context = "");

using case_entry = status (*)(context&);

/// One variant of the scenario: its name and its function for each backend (null: the build
/// has no CUDA). Made by PITFALL_VARIANT.
struct variant_entry {
    const char* name;
    case_entry cpu;
    case_entry cuda;
};

namespace detail {
/// The process protocol behind PITFALL_SCENARIO.
int scenario_main(int argc, char** argv, const char* manifest_json,
                  std::initializer_list<variant_entry> variants);
} // namespace detail

} // namespace pitfall

/// scenario.json, compiled into the program by add_failure_scenario().
extern const char* const pitfall_scenario_manifest;

// NOLINTBEGIN(bugprone-macro-parentheses): `fn` names a function template (fn<backend>), which
// parentheses would break.
#if PITFALL_HAS_CUDA
#define PITFALL_DETAIL_CUDA_ENTRY(fn) (&fn<::pitfall::cuda_backend>)
#else
#define PITFALL_DETAIL_CUDA_ENTRY(fn) (static_cast<::pitfall::case_entry>(nullptr))
#endif

/// A variant named like its function template: PITFALL_VARIANT(reproduce).
#define PITFALL_VARIANT(fn) PITFALL_NAMED_VARIANT(#fn, fn)
/// A variant whose name differs from its function: PITFALL_NAMED_VARIANT("remedy_batch_32", b32).
#define PITFALL_NAMED_VARIANT(name_, fn)                                                           \
    ::pitfall::variant_entry {                                                                     \
        (name_), &fn<::pitfall::cpu_backend>, PITFALL_DETAIL_CUDA_ENTRY(fn)                        \
    }
// NOLINTEND(bugprone-macro-parentheses)

/// A variant with no honest CPU analog, written for CUDA alone: `fn` is a plain function
/// `pitfall::status fn(pitfall::context&)`, needed only where the build has CUDA (it may live
/// under `#if PITFALL_HAS_CUDA`). On the CPU backend the variant answers UNSUPPORTED,
/// "no CPU analog: " + `why_not_on_cpu` (cuda_only), before it reads a parameter:
///
///   #if PITFALL_HAS_CUDA
///   pitfall::status reproduce_malloc_in_capture(pitfall::context& ctx) { ... }
///   #endif
///   PITFALL_SCENARIO(PITFALL_CUDA_VARIANT(reproduce_malloc_in_capture, why_cuda_only), ...)
#define PITFALL_CUDA_VARIANT(fn, why_not_on_cpu)                                                   \
    ::pitfall::variant_entry {                                                                     \
        (#fn), PITFALL_DETAIL_NO_CPU_ANALOG(why_not_on_cpu), PITFALL_DETAIL_CUDA_ONLY_ENTRY(fn)    \
    }
#define PITFALL_DETAIL_NO_CPU_ANALOG(why_not_on_cpu)                                               \
    [](::pitfall::context&) { return ::pitfall::cuda_only<::pitfall::cpu_backend>(why_not_on_cpu); }
#if PITFALL_HAS_CUDA
#define PITFALL_DETAIL_CUDA_ONLY_ENTRY(fn) (&(fn))
#else
#define PITFALL_DETAIL_CUDA_ONLY_ENTRY(fn) (static_cast<::pitfall::case_entry>(nullptr))
#endif

/// Registers the scenario's variants (PITFALL_VARIANT...); defines main().
#define PITFALL_SCENARIO(...)                                                                      \
    int main(int argc, char** argv) {                                                              \
        return ::pitfall::detail::scenario_main(argc, argv, pitfall_scenario_manifest,             \
                                                {__VA_ARGS__});                                    \
    }
