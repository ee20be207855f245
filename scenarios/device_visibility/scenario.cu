// device_visibility: the device a program asks for is not there, and what the program does next.
//
// What
//   Four ways a program meets "no such device", and the two ways it can react:
//     reproduce_empty_visible_devices  a child process is started with CUDA_VISIBLE_DEVICES=""
//                              (a scheduler, a container or a typo hid every GPU) and asks
//                              cudaGetDeviceCount how many devices it has.
//     reproduce_ordinal_past_last      cudaSetDevice(count): the seed's `/gpu:1` on a machine
//                              with one GPU (ordinals run 0 .. count-1).
//     reproduce_silent_fallback        the same hidden-GPU child runs a program written the way
//                              the seeds' examples are ("if gpus: ... else: run on the CPU"): it
//                              swallows the CUDA error and computes on the CPU. Nothing fails;
//                              only the proof of where the step ran (ran_on) says "cpu".
//     remedy_fail_loudly               the same child, a program that returns the CUDA error by
//                              name instead of falling back.
//     remedy_explicit_device           validate the ordinal against the count, select it
//                              explicitly, confirm the selection (cudaGetDevice) and run there.
//   The step every program runs is y = relu(a x + b) over `elements` floats, judged by a float64
//   reference.
//
// Why it fails
//   CUDA_VISIBLE_DEVICES is read once, when the CUDA runtime initialises in a process: an empty
//   list leaves the process with no device (cudaErrorNoDevice), a list naming absent devices
//   too, and ordinals are renumbered to the visible devices, so `/gpu:1` is past the end on a
//   one-GPU machine (cudaErrorInvalidDevice). Frameworks often treat "no GPU" as a reason to
//   use the CPU instead: the job runs, 10-100x slower, and nobody is told. That is why the
//   suite asks every case for proof of where it ran and the harness fails a CUDA case whose
//   proof says "cpu" ("GPU asked for, CPU used") unless its baseline expects exactly that, as
//   the baseline of reproduce_silent_fallback does.
//
// Expected per backend
//   cuda  (GPU; documented, seen once on an H100 (2026-11-22), not yet blessed)
//         reproduce_empty_visible_devices: cudaErrorNoDevice at init (the parent itself still
//         sees its devices); reproduce_ordinal_past_last: cudaErrorInvalidDevice at init;
//         reproduce_silent_fallback: ok, ran_on "cpu: silent fallback after cudaErrorNoDevice";
//         remedy_fail_loudly: cudaErrorNoDevice at init; remedy_explicit_device: ok on cuda:0.
//         Here (no driver) every call answers cudaErrorInsufficientDriver instead: the four
//         device-less cases observe exactly that (the silent one still falls back, ok, "cpu"),
//         and remedy_explicit_device, which needs a device, is UNSUPPORTED.
//   cpu   the analog of a visible-device list is the CPU affinity mask, inherited the same way:
//         an empty mask (reproduce_empty_visible_devices, in a child) and a CPU numbered past
//         the last (reproduce_ordinal_past_last) are refused by sched_setaffinity with EINVAL;
//         remedy_explicit_device pins to CPU `device` and proves it with sched_getcpu. The
//         fallback pair is the control: a CPU program asked for the CPU ignores
//         CUDA_VISIBLE_DEVICES, both run the step and succeed.
//
// Remedy
//   Decide at start-up which device the job needs, check it (count, ordinal < count), select it
//   explicitly and fail loudly, by name, when it is not there: never fall back silently. Print
//   (or record) where the work really ran.
//
// Seed
//   004 (a Keras model not using the GPU: missing CUDA/cuDNN or configuration make it run on the
//   CPU silently), 003 ex.1 (`if gpus: ... else: "No GPUs were found. Will run on CPU."`),
//   003 ex.2 (`tf.device('/GPU:0')`, `set_visible_devices`, `/gpu:1` for a second GPU).
//   Facts: docs/cuda-rules.md#runtime-error-names and #cuda-visible-devices (100
//   cudaErrorNoDevice with CUDA_VISIBLE_DEVICES="", 101 cudaErrorInvalidDevice),
//   sched_setaffinity(2).
#include "pitfall/scenario.hpp"

#include <nlohmann/json.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

constexpr bool is_cuda(pitfall::backend_kind kind) {
    return kind == pitfall::backend_kind::cuda;
}

// ---------------------------------------------------------------------------------------------
// The step: y = relu(a x + b). One functor for both backends (a host loop or a kernel).
// ---------------------------------------------------------------------------------------------
constexpr float step_a = 1.5f;
constexpr float step_b = 0.25f;

struct affine_relu {
    const float* x;
    float* y;
    float a;
    float b;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const float v = a * x[i] + b;
        y[i] = v > 0.f ? v : 0.f;
    }
};

// Inputs in [-1, 1], a fixed pattern (every value a multiple of 1/1000 rounded to float).
float step_input(std::size_t i) {
    return static_cast<float>((i * 7919u) % 2001u) / 1000.f - 1.f;
}

// Runs the step on Backend, whatever backend the case was asked for (the silent fallback runs
// the CPU one inside a CUDA case), times it and judges it against float64. |a x + b| <= 1.75,
// so one float32 rounding of the product and one of the sum (or one of an FMA) stay below
// 2 x 2^-24 x 2 = 2.4e-7; 1e-6 is the tolerance. A wrong step (a lost kernel, garbage from an
// unusable device) is off by ~1.
template <class Backend> status run_step(pitfall::context& ctx, std::size_t n) {
    std::vector<float> h_x(n), h_y(n);
    for (std::size_t i = 0; i < n; ++i)
        h_x[i] = step_input(i);
    PITFALL_ASSIGN_OR_RETURN(auto d_x, Backend::template allocate<float>(n));
    PITFALL_ASSIGN_OR_RETURN(auto d_y, Backend::template allocate<float>(n));
    PITFALL_TRY(Backend::copy_to_device(d_x, h_x.data(), n));
    const affine_relu step{d_x.data(), d_y.data(), step_a, step_b};
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
                                 return Backend::for_each(n, step);
                             }));
    PITFALL_TRY(Backend::synchronize());
    PITFALL_TRY(Backend::copy_to_host(h_y.data(), d_y, n));
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(step_a) * h_x[i] + static_cast<double>(step_b);
        worst = std::max(worst, std::fabs(static_cast<double>(h_y[i]) - (v > 0.0 ? v : 0.0)));
    }
    ctx.record_samples("step_seconds", seconds, "s");
    ctx.record("step_elements", static_cast<double>(n));
    ctx.record("step_max_abs_error_vs_fp64", worst);
    ctx.record_info("step_backend", Backend::name);
    std::ostringstream detail;
    detail << "max |y - y_ref| = " << worst << " over " << n << " elements; tolerance 1e-6";
    ctx.check("step_matches_fp64_reference", worst <= 1e-6, detail.str());
    return status::ok();
}

// ---------------------------------------------------------------------------------------------
// The CPU's device list: the affinity mask. Like CUDA_VISIBLE_DEVICES it is inherited by child
// processes and decides which processors the process may use; unlike CUDA ordinals, CPU numbers
// are not renumbered, so "past the last" is CPU number N of a machine with N configured CPUs.
// ---------------------------------------------------------------------------------------------

/// A whole decimal CPU number, or nullopt.
std::optional<int> cpu_number(const std::string& text) {
    int value = 0;
    const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (err != std::errc() || end != text.data() + text.size())
        return std::nullopt;
    return value;
}

/// "0,2-3" (taskset -c syntax) as CPU numbers; "" is the empty list. A syntax rule
/// scenario.json cannot state, so it is checked here (bad_parameter: exit 2).
status_or<std::vector<int>> parse_cpu_list(const std::string& text) {
    std::vector<int> cpus;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        if (item.empty())
            continue;
        const auto dash = item.find('-');
        const auto first = cpu_number(item.substr(0, dash));
        const auto last = dash == std::string::npos ? first : cpu_number(item.substr(dash + 1));
        if (!first || !last)
            return pitfall::bad_parameter("visible_devices",
                                          "'" + item + "' is not a CPU number or range");
        if (*first < 0 || *last < *first || *last >= CPU_SETSIZE)
            return pitfall::bad_parameter("visible_devices", "'" + item +
                                                                 "' is not a CPU range in [0, " +
                                                                 std::to_string(CPU_SETSIZE) + ")");
        for (int c = *first; c <= *last; ++c)
            cpus.push_back(c);
    }
    return cpus;
}

std::string join_cpus(const std::vector<int>& cpus) {
    std::string out;
    for (const int c : cpus)
        out += (out.empty() ? "" : ",") + std::to_string(c);
    return "{" + out + "}";
}

/// sched_setaffinity for this process; its refusal is the outcome, by errno name.
status set_affinity(const std::vector<int>& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const int c : cpus)
        if (c >= 0 && c < CPU_SETSIZE)
            CPU_SET(c, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0)
        return status::from_errno(errno, "sched_setaffinity(" + join_cpus(cpus) + ")",
                                  pitfall::stage::init, __FILE__, __LINE__);
    return status::ok();
}

/// The CPUs this process may run on (the CPU count a program should use).
int allowed_cpu_count() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    return CPU_COUNT(&set);
}

// ---------------------------------------------------------------------------------------------
// A child's result as this case's own: its outcome, proof of where it ran, figures and checks.
// ---------------------------------------------------------------------------------------------

/// The parent case reports what its child observed: the child's outcome becomes the case's
/// outcome (so the harness judges the CUDA error the child met, by name), its ran_on becomes
/// the case's proof of where the work ran, and its figures, samples, events and checks are kept
/// under "child." (the baselines judge child.cuda_probe; adopt_child_facts takes the info and
/// measurements, the rest is taken here). A child that crashed, hung or wrote nothing is an
/// error of its own (read_child), never ok.
status adopt_child(pitfall::context& ctx, const pitfall::child_run& child) {
    PITFALL_ASSIGN_OR_RETURN(const pitfall::child_report report,
                             pitfall::read_child(child, "the child process"));
    const nlohmann::json& doc = report.result;
    ctx.record("child_exit_code", static_cast<double>(child.process.exit_code.value_or(-1)));
    ctx.ran_on(doc.value("ran_on", std::string("unknown: the child recorded no ran_on")));
    pitfall::adopt_child_facts(ctx, doc);
    // value() returns a copy: each section is held in a local while it is iterated.
    const nlohmann::json samples = doc.value("samples", nlohmann::json::object());
    const nlohmann::json events = doc.value("events", nlohmann::json::object());
    const nlohmann::json checks = doc.value("checks", nlohmann::json::array());
    for (const auto& [name, s] : samples.items())
        ctx.record_samples("child." + name, s.value("values", std::vector<double>{}),
                           s.value("unit", "s"));
    for (const auto& [name, e] : events.items())
        ctx.record_event("child." + name, pitfall::outcome_from_json(e));
    for (const auto& c : checks)
        ctx.check("child." + c.value("name", "?"), c.value("passed", false), c.value("detail", ""));
    return report.outcome;
}

// ---------------------------------------------------------------------------------------------
// The cases.
// ---------------------------------------------------------------------------------------------
struct config {
    std::string visible_devices;
    long long bad_ordinal = -1;
    long long device = 0;
    std::size_t elements = 0;
    double child_timeout = 30;
};

/// Parameters (defaults, docs and bounds in scenario.json: every ordinal below CPU_SETSIZE,
/// 1024, so that it fits a cpu_set_t and a CUDA ordinal alike).
status_or<config> read_config(const pitfall::context& ctx) {
    static_assert(CPU_SETSIZE == 1024, "scenario.json bounds bad_ordinal and device by 1023");
    config c;
    PITFALL_ASSIGN_OR_RETURN(c.visible_devices, ctx.param_string("visible_devices"));
    PITFALL_ASSIGN_OR_RETURN(c.bad_ordinal, ctx.param_int("bad_ordinal"));
    PITFALL_ASSIGN_OR_RETURN(c.device, ctx.param_int("device"));
    PITFALL_ASSIGN_OR_RETURN(const long long elements, ctx.param_int("elements"));
    PITFALL_ASSIGN_OR_RETURN(c.child_timeout, ctx.param_double("child_timeout_seconds"));
    // On cpu the list is a CPU list the child parses; a malformed one is refused here, in the
    // case itself, rather than as a child that exits 2.
    if (!is_cuda(ctx.backend()))
        PITFALL_TRY(parse_cpu_list(c.visible_devices));
    c.elements = static_cast<std::size_t>(elements);
    return c;
}

// The child of reproduce_empty_visible_devices: how many devices does it have?
template <class Backend> status helper_count_devices(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
#if PITFALL_HAS_CUDA
    if constexpr (is_cuda(Backend::kind)) {
        int count = 0;
        // CUDA_VISIBLE_DEVICES was read when this call initialised the runtime.
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDeviceCount(&count));
        ctx.record("device_count", count);
        if (count == 0) // the runtime reports the error itself; kept for older releases
            return status::error(pitfall::library::cuda_runtime, "cudaErrorNoDevice",
                                 "cudaGetDeviceCount reported 0 devices", pitfall::stage::init);
        return status::ok();
    }
#endif
    // The CPU child applies the list to itself, as taskset would before exec.
    PITFALL_ASSIGN_OR_RETURN(const auto cpus, parse_cpu_list(cfg.visible_devices));
    PITFALL_TRY(set_affinity(cpus));
    ctx.record("device_count", allowed_cpu_count());
    return status::ok();
}

// reproduce_empty_visible_devices: the parent is a normal process; its child is started with
// the device list emptied, as a batch scheduler or a container runtime would start a job.
template <class Backend> status reproduce_empty_visible_devices(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    // The parent's own view first: on a GPU host it sees its devices; only the child is blind.
#if PITFALL_HAS_CUDA
    if constexpr (is_cuda(Backend::kind)) {
        int count = 0;
        const cudaError_t err = cudaGetDeviceCount(&count);
        if (err == cudaSuccess)
            ctx.record("parent_device_count", count);
        ctx.record_event("parent_cudaGetDeviceCount",
                         err == cudaSuccess ? status::ok()
                                            : pitfall::detail::from_cuda(err, pitfall::stage::init,
                                                                         "cudaGetDeviceCount",
                                                                         __FILE__, __LINE__));
    }
#endif
    if (!is_cuda(Backend::kind))
        ctx.record("parent_device_count", allowed_cpu_count());
    // The environment must be set before the CUDA runtime initialises, hence a new process.
    std::map<std::string, std::string> env;
    if (is_cuda(Backend::kind))
        env["CUDA_VISIBLE_DEVICES"] = cfg.visible_devices;
    ctx.record_info("child_device_list",
                    (is_cuda(Backend::kind) ? "CUDA_VISIBLE_DEVICES=\"" : "affinity \"") +
                        cfg.visible_devices + "\"");
    PITFALL_ASSIGN_OR_RETURN(const auto child,
                             pitfall::run_self(ctx, "helper_count_devices", env,
                                               {"visible_devices=" + cfg.visible_devices},
                                               cfg.child_timeout));
    return adopt_child(ctx, child);
}

// reproduce_ordinal_past_last: the program asks for a device by number, the way `/gpu:1` or
// `cuda:1` does, without looking at how many there are. In process: CUDA_VISIBLE_DEVICES is
// not changed, the ordinal is simply one too many.
template <class Backend> status reproduce_ordinal_past_last(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
#if PITFALL_HAS_CUDA
    if constexpr (is_cuda(Backend::kind)) {
        int count = 0;
        const cudaError_t err = cudaGetDeviceCount(&count);
        int ordinal = static_cast<int>(cfg.bad_ordinal);
        if (err == cudaSuccess) {
            ctx.record("device_count", count);
            if (ordinal < 0)
                ordinal = count; // one past the last: ordinals run 0 .. count-1
        } else {
            // The count is unknown: ask for the seed's /gpu:1 and see what the selection says.
            ctx.record_event("cudaGetDeviceCount",
                             pitfall::detail::from_cuda(err, pitfall::stage::init,
                                                        "cudaGetDeviceCount", __FILE__, __LINE__));
            if (ordinal < 0)
                ordinal = 1;
        }
        ctx.record("ordinal", ordinal);
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaSetDevice(ordinal));
        // Selected after all (bad_ordinal named a device that exists): nothing reproduced.
        ctx.ran_on(pitfall::cuda_backend::describe_device());
        return status::ok();
    }
#endif
    const long configured = ::sysconf(_SC_NPROCESSORS_CONF);
    ctx.record("device_count", static_cast<double>(configured));
    ctx.record("allowed_cpu_count", allowed_cpu_count());
    const int ordinal =
        cfg.bad_ordinal >= 0 ? static_cast<int>(cfg.bad_ordinal) : static_cast<int>(configured);
    ctx.record("ordinal", ordinal);
    // A refused mask leaves the old one in place; an accepted one is ours to undo.
    cpu_set_t before;
    CPU_ZERO(&before);
    const bool saved = ::sched_getaffinity(0, sizeof before, &before) == 0;
    PITFALL_TRY(set_affinity({ordinal}));
    if (saved)
        (void)::sched_setaffinity(0, sizeof before, &before);
    return status::ok();
}

// remedy_explicit_device: count, check, select, confirm, run, and say where. Every step that
// can fail fails by name; nothing falls back.
template <class Backend> status remedy_explicit_device(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const int device = static_cast<int>(cfg.device);
    ctx.record("ordinal", device);
#if PITFALL_HAS_CUDA
    if constexpr (is_cuda(Backend::kind)) {
        int count = 0;
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDeviceCount(&count));
        ctx.record("device_count", count);
        // Checked before use, and refused by name with the numbers a person needs.
        if (device >= count)
            return PITFALL_HOST_ERROR(pitfall::stage::init,
                                      pitfall::host_error::device_ordinal_out_of_range,
                                      "asked for cuda:" + std::to_string(device) + ", " +
                                          std::to_string(count) + " visible");
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaSetDevice(device));
        int current = -1;
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDevice(&current));
        ctx.check("selected_device_is_current", current == device,
                  "cudaGetDevice = " + std::to_string(current) + ", asked " +
                      std::to_string(device));
        PITFALL_TRY(run_step<pitfall::cuda_backend>(ctx, cfg.elements));
        ctx.ran_on(pitfall::cuda_backend::describe_device());
        return status::ok();
    }
#endif
    const int allowed = allowed_cpu_count();
    ctx.record("device_count", allowed);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0 || !CPU_ISSET(device, &set))
        return PITFALL_HOST_ERROR(
            pitfall::stage::init, pitfall::host_error::device_ordinal_out_of_range,
            "asked for cpu " + std::to_string(device) + ", not in this process's affinity mask (" +
                std::to_string(allowed) + " CPUs)");
    PITFALL_TRY(set_affinity({device}));
    PITFALL_TRY(run_step<pitfall::cpu_backend>(ctx, cfg.elements));
    const int current = ::sched_getcpu(); // pinned: the step can only have run here
    ctx.check("pinned_cpu_is_current", current == device,
              "sched_getcpu = " + std::to_string(current) + ", asked " + std::to_string(device));
    ctx.ran_on(pitfall::cpu_backend::describe_device() + ", pinned to cpu " +
               std::to_string(current));
    return status::ok();
}

// The program of both fallback children: the GPU when it answers; otherwise silent runs the
// step on the CPU (the pitfall), loud returns the CUDA error.
template <class Backend> status fallback_program(pitfall::context& ctx, bool silent) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
#if PITFALL_HAS_CUDA
    if constexpr (is_cuda(Backend::kind)) {
        const status probe = pitfall::cuda_probe();
        if (probe.is_ok()) {
            PITFALL_TRY(run_step<pitfall::cuda_backend>(ctx, cfg.elements));
            ctx.ran_on(pitfall::cuda_backend::describe_device());
            return status::ok();
        }
        ctx.record_event("cuda_probe", probe);
        if (!silent)
            return probe; // loud: the error, by name, is the outcome
        // The pitfall, on purpose: the error is swallowed and the CPU does the GPU's work. The
        // only trace is the proof of where it ran.
        ctx.ran_on("cpu: silent fallback after " + probe.name() + "; " +
                   pitfall::cpu_backend::describe_device());
        return run_step<pitfall::cpu_backend>(ctx, cfg.elements);
    }
#endif
    (void)silent; // asked for the CPU: there is nothing to fall back from
    return run_step<pitfall::cpu_backend>(ctx, cfg.elements);
}

// The parents of the fallback pair: the same hidden-GPU environment on both backends (the CPU
// program is the control: it never looks at CUDA_VISIBLE_DEVICES).
status run_fallback_child(pitfall::context& ctx, const char* helper) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    ctx.record_info("child_device_list", "CUDA_VISIBLE_DEVICES=\"" + cfg.visible_devices + "\"");
    PITFALL_ASSIGN_OR_RETURN(const auto child,
                             pitfall::run_self(ctx, helper,
                                               {{"CUDA_VISIBLE_DEVICES", cfg.visible_devices}}, {},
                                               cfg.child_timeout));
    return adopt_child(ctx, child);
}

template <class Backend> status reproduce_silent_fallback(pitfall::context& ctx) {
    return run_fallback_child(ctx, "helper_silent_fallback");
}
template <class Backend> status remedy_fail_loudly(pitfall::context& ctx) {
    return run_fallback_child(ctx, "helper_fail_loudly");
}
// The helper_* variants are the children the cases start with run_self(), never cases of
// their own.
template <class Backend> status helper_silent_fallback(pitfall::context& ctx) {
    return fallback_program<Backend>(ctx, true);
}
template <class Backend> status helper_fail_loudly(pitfall::context& ctx) {
    return fallback_program<Backend>(ctx, false);
}

} // namespace

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_empty_visible_devices),
                 PITFALL_VARIANT(reproduce_ordinal_past_last),
                 PITFALL_VARIANT(reproduce_silent_fallback), PITFALL_VARIANT(remedy_fail_loudly),
                 PITFALL_VARIANT(remedy_explicit_device), PITFALL_VARIANT(helper_count_devices),
                 PITFALL_VARIANT(helper_silent_fallback), PITFALL_VARIANT(helper_fail_loudly))
