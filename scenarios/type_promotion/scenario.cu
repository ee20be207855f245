// type_promotion: a float32 loop body meets double constants and computes in float64, silently.
//
// What
//   n independent damped springs, float32 position and velocity each, advanced `steps` steps by
//   one loop body (spring_step.cuh: semi-implicit Euler, dt = 0.01, stiffness 4, damping 0.1):
//     reproduce  the body as people type it, `v = v + 0.01 * (-4.0 * p - 0.1 * v)`: the
//                constants are double literals, so each right-hand side is computed in
//                float64 and narrowed to float by the assignment.
//     remedy     the same body with typed constants (0.01f, 4.0f, 0.1f): float32 throughout.
//     reproduce_device_size / remedy_device_size   the pair with 16 Mi elements (CUDA only),
//                enough threads to fill a GPU, so the time follows its throughput.
//     reproduce_fp64_in_generated_code   no GPU needed: the PTX nvcc generated for the same
//                bodies (the device image spring_ptx, compiled from spring_ptx.cu, which
//                includes spring_step.cuh), read back from this program and counted per kernel.
//   Each timed sample (pipeline_seconds) advances every element `steps` steps. Then a check
//   run from the initial state is compared, on check_n elements spread over the array (all of
//   them at the defaults), with three host computations written apart, the types spelled out:
//   the body in double arithmetic narrowed each step (what C++'s usual arithmetic conversions
//   say the reproduce computes), the body in float arithmetic (what the remedy computes), and
//   a float64 reference of the whole trajectory.
//
// Why it fails
//   In C and C++ an unsuffixed floating literal is a double, and a float operand meeting a
//   double is converted to double (C++ [expr.arith.conv], the usual arithmetic conversions). The
//   result type of `0.01 * v` is double; nothing warns unless -Wdouble-promotion or
//   -Wfloat-conversion is asked for (neither is in -Wall -Wextra; -Wconversion has the second),
//   and nvcc passes neither to device code. The seed's "CPU: automatic type promotion; GPU:
//   strict type adherence" is half right: promotion is the language's rule on both, silent on
//   both; what differs is the price. On a CPU float64 scalar arithmetic costs about what float32
//   does (the conversions, cvtss2sd and cvtsd2ss, lengthen the dependent chain); on a GPU every
//   widened operation runs on the FP64 units (1/2 of the FP32 rate on sm_80/sm_90, 1/64 on
//   sm_86/sm_89: docs/cuda-rules.md#fp64-vs-fp32-throughput-by-architecture) and every widening
//   and narrowing is an instruction of its own. This build's sm_90 SASS (cuobjdump -sass,
//   CUDA 13.0, 2026-11-28): the untyped loop body is DFMA 21, DMUL 7, F2F.F64.F32 16 and
//   F2F.F32.F64 14 (unrolled four times); the typed one FFMA 21, FMUL 7 and no D* or F2F.
//   The usual one-line example `x * 0.5` is not the failure by itself: 0.5 is exact in float and a
//   single product rounded twice equals it rounded once, so GCC 12 (mulss) and nvcc 13.0
//   (mul.f32) narrow it back; `x * 0.1` stays in double on both (cvtss2sd, mulsd, cvtsd2ss;
//   cvt.f64.f32, mul.f64, cvt.rn.f32.f64), and so does the loop body here.
//
// Expected per backend
//   cpu   both variants ok. reproduce: every element bit-equal to the double-arithmetic
//         emulation (fraction_equal_to_double_emulation 1) and almost none to the float one
//         (the values round like float64: a promoted build cannot hide in the numbers); remedy
//         the other way round. Both within 1e-4 (normwise) of the float64 reference.
//         promoted_over_typed_time about 1.7 at the defaults (scalar, latency-bound: the
//         conversions add to each step's chain; 1.69 measured on 2 cores of an AMD EPYC,
//         OpenBLAS not involved, 2026-11-28).
//   cuda  the same checks (fractions above 0.99 / below 0.5: the GPU contracts a * b + c into
//         one fused multiply-add, which changes the last bit of a double intermediate only in
//         rare cases and of a float one often, so the remedy is checked against the float64
//         reference, not bit for bit). promoted_over_typed_time_device_size heads for the
//         FP32:FP64 and conversion throughput (predicted, not yet seen): above 1.5 on an H100/H200
//         (FP64 at half the FP32 rate, plus the F2F conversions), tens on sm_86/sm_89. The
//         default pair (32768 threads) is latency-bound on a large GPU: recorded, not bounded.
//         reproduce_fp64_in_generated_code runs here too (host code reading the image):
//         spring_untyped_kernel has f64 arithmetic and cvt instructions, spring_typed_kernel
//         none; scale_by_tenth_kernel one mul.f64, scale_by_half_kernel none.
//         Here (no driver): the four GPU cases UNSUPPORTED, cudaErrorInsufficientDriver at
//         init; reproduce_fp64_in_generated_code ok.
//
// Remedy
//   Type the constants (0.01f), or write them as T(0.01) / static_cast<T>(0.01) in templated
//   code; compile with -Wdouble-promotion (host) and read the PTX or SASS for f64 (cuobjdump
//   -sass: DFMA, DMUL, DADD, F2F.F64.F32) in single-precision kernels. Not -use_fast_math: it
//   does not narrow double arithmetic.
//
// Seed
//   000 (its prose: the CPU allows "automatic type promotion", the GPU needs "strict type
//   adherence"; float32 for best performance). Evidence:
//   AliceO2Group/AliceO2#15689 (a literal forces a division into double: 23% of stalls),
//   acts-project/detray#845 (literals missing the f suffix), ccsb-scripps/AutoDock-GPU#123
//   (1.0 instead of 1.0f in single-precision kernels).
// Baselines per backend and profile (generated by ci/catalog.py from expected/; do not edit):
//   cpu   host: observed on AMD EPYC: 1 reproduced on the CPU, 1 UNSUPPORTED, 1 remedy
//   cuda  no-gpu: observed without a GPU: 1 predicted, 2 UNSUPPORTED, 2 remedies
//   cuda  hopper-cuda13: documented, never observed: 3 predicted, 2 remedies
//   cuda  hopper-cuda11-12: documented, never observed: 3 predicted, 2 remedies
//   cuda  ada-ampere-cuda12: documented, never observed: 3 predicted, 2 remedies
//   evidence threads: 3 modelled (docs/evidence.md)
// (end of the generated baselines)
#include "pitfall/random.hpp"
#include "pitfall/scenario.hpp"

#include "spring_step.cuh"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#if PITFALL_HAS_CUDA
#include <sstream>
// The PTX image of scenario.json's device_images, embedded by the build (a NUL follows it).
extern const unsigned char pitfall_image_spring_ptx[];
extern const std::size_t pitfall_image_spring_ptx_size;
#endif

namespace {

// The type the language gives the reproduce's expressions, stated where a reader can see it.
static_assert(std::is_same_v<decltype(0.01 * float{}), double>, "a double literal widens a float");
static_assert(std::is_same_v<decltype(0.01f * float{}), float>, "a float literal does not");

struct config {
    std::size_t n = 0;
    std::size_t check_n = 0; ///< elements judged on the host, spread over all n
    int steps = 0;
    std::uint64_t seed = 0;
};

pitfall::status_or<config> read_config(const pitfall::context& ctx) {
    config c;
    PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("n"));
    PITFALL_ASSIGN_OR_RETURN(const long long steps, ctx.param_int("steps"));
    PITFALL_ASSIGN_OR_RETURN(const long long seed, ctx.param_int("seed"));
    PITFALL_ASSIGN_OR_RETURN(const long long check_n, ctx.param_int("check_n"));
    c.n = static_cast<std::size_t>(n);
    c.check_n = std::min(c.n, static_cast<std::size_t>(check_n));
    c.steps = static_cast<int>(steps);
    c.seed = static_cast<std::uint64_t>(seed);
    return c;
}

/// Positions and velocities uniform in [-1, 1).
struct state {
    std::vector<float> pos, vel;
};

state initial_state(const config& cfg) {
    pitfall::splitmix64 rng(cfg.seed);
    state s;
    s.pos.resize(cfg.n);
    s.vel.resize(cfg.n);
    for (std::size_t i = 0; i < cfg.n; ++i) {
        s.pos[i] = static_cast<float>(rng.uniform(-1.0, 1.0));
        s.vel[i] = static_cast<float>(rng.uniform(-1.0, 1.0));
    }
    return s;
}

/// The code under test: `steps` loop bodies per element, in a host loop or a kernel.
template <bool Untyped> struct spring_pipeline {
    float* pos;
    float* vel;
    int steps;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        float p = pos[i];
        float v = vel[i];
        for (int s = 0; s < steps; ++s) {
            if constexpr (Untyped)
                type_promotion::spring_step_untyped(p, v);
            else
                type_promotion::spring_step_typed(p, v);
        }
        pos[i] = p;
        vel[i] = v;
    }
};

// ---------------------------------------------------------------------------------------------
// Host computations written apart from the loop body, every type spelled out.
// ---------------------------------------------------------------------------------------------

/// What the usual arithmetic conversions make of the untyped body: each operation in double,
/// the float state widened first and each result narrowed by the assignment.
void emulate_double_arithmetic(float& p, float& v, int steps) {
    for (int s = 0; s < steps; ++s) {
        const double v_wide = static_cast<double>(v);
        const double force = -4.0 * static_cast<double>(p) - 0.1 * v_wide;
        v = static_cast<float>(v_wide + 0.01 * force);
        p = static_cast<float>(static_cast<double>(p) + 0.01 * static_cast<double>(v));
    }
}

/// The typed body: float operations on float constants.
void emulate_float_arithmetic(float& p, float& v, int steps) {
    const float dt = 0.01f, stiffness = 4.0f, damping = 0.1f;
    for (int s = 0; s < steps; ++s) {
        const float force = -stiffness * p - damping * v;
        v = v + dt * force;
        p = p + dt * v;
    }
}

/// The float64 reference: the whole trajectory in double, from the same float start.
void reference_fp64(double& p, double& v, int steps) {
    for (int s = 0; s < steps; ++s) {
        v += 0.01 * (-4.0 * p - 0.1 * v);
        p += 0.01 * v;
    }
}

/// Bit equality of two floats (a NaN would compare unequal to itself; a bit pattern does not).
bool same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
}

std::string short_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", value);
    return text;
}

/// The check run's results against the three host computations.
template <bool Untyped>
void judge_values(pitfall::context& ctx, const config& cfg, const state& start,
                  const state& result) {
    std::size_t equal_double = 0, equal_float = 0;
    double max_error = 0.0, max_magnitude = 0.0;
    for (std::size_t k = 0; k < cfg.check_n; ++k) {
        // Spread over the whole array, so every block of a GPU launch has a say.
        const std::size_t i = k * (cfg.n / cfg.check_n);
        float pd = start.pos[i], vd = start.vel[i];
        emulate_double_arithmetic(pd, vd, cfg.steps);
        float pf = start.pos[i], vf = start.vel[i];
        emulate_float_arithmetic(pf, vf, cfg.steps);
        double pr = start.pos[i], vr = start.vel[i];
        reference_fp64(pr, vr, cfg.steps);
        const float p = result.pos[i], v = result.vel[i];
        equal_double += same_bits(p, pd) && same_bits(v, vd) ? 1 : 0;
        equal_float += same_bits(p, pf) && same_bits(v, vf) ? 1 : 0;
        max_error = std::max({max_error, std::abs(static_cast<double>(p) - pr),
                              std::abs(static_cast<double>(v) - vr)});
        max_magnitude = std::max({max_magnitude, std::abs(pr), std::abs(vr)});
    }
    const double n = static_cast<double>(cfg.check_n);
    const double fraction_double = static_cast<double>(equal_double) / n;
    const double fraction_float = static_cast<double>(equal_float) / n;
    const double normwise = max_magnitude > 0.0 ? max_error / max_magnitude : max_error;
    ctx.record("fraction_equal_to_double_emulation", fraction_double);
    ctx.record("fraction_equal_to_float_emulation", fraction_float);
    ctx.record("max_error_vs_fp64_reference", normwise);
    const std::string counts = std::to_string(equal_double) + " of " + std::to_string(cfg.check_n) +
                               " elements bit-equal to double arithmetic, " +
                               std::to_string(equal_float) + " to float arithmetic";
    if constexpr (Untyped) {
        // 0.99, not 1: a GPU fuses a * b + c, which moves a double intermediate's last bit and,
        // rarely, the float it rounds to.
        ctx.check("matches_double_arithmetic", fraction_double >= 0.99, counts);
        ctx.check("differs_from_float_arithmetic", fraction_float <= 0.5, counts);
    } else {
        ctx.check("not_double_arithmetic", fraction_double <= 0.5, counts);
    }
    // float32 rounding over `steps` steps of a stable update: ~1e-6 at the defaults.
    ctx.check("close_to_fp64_reference", normwise <= 1e-4,
              "max |x - x_ref| / max |x_ref| = " + short_number(normwise) + " after " +
                  std::to_string(cfg.steps) + " steps");
}

template <class Backend, bool Untyped> pitfall::status run_pipeline(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const state start = initial_state(cfg);
    ctx.record_info("expression_type", Untyped ? "double (0.01 * float)" : "float (0.01f * float)");
    ctx.record_info("loop_body", Untyped ? "v = v + 0.01 * (-4.0 * p - 0.1 * v); p = p + 0.01 * v"
                                         : "v = v + 0.01f * (-4.0f * p - 0.1f * v); p = p + "
                                           "0.01f * v");
    PITFALL_ASSIGN_OR_RETURN(auto d_pos, Backend::template allocate<float>(cfg.n));
    PITFALL_ASSIGN_OR_RETURN(auto d_vel, Backend::template allocate<float>(cfg.n));
    PITFALL_TRY(Backend::copy_to_device(d_pos, start.pos.data(), cfg.n));
    PITFALL_TRY(Backend::copy_to_device(d_vel, start.vel.data(), cfg.n));
    const spring_pipeline<Untyped> body{d_pos.data(), d_vel.data(), cfg.steps};

    // Timed: each sample advances the state further (the springs decay slowly, never to
    // subnormal values within the samples).
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
                                 return Backend::for_each(cfg.n, body);
                             }));
    ctx.record_samples("pipeline_seconds", seconds, "s");
    ctx.record("element_steps_per_second", static_cast<double>(cfg.n) * cfg.steps /
                                               *std::min_element(seconds.begin(), seconds.end()));

    // Checked: one run from the initial state.
    PITFALL_TRY(Backend::copy_to_device(d_pos, start.pos.data(), cfg.n));
    PITFALL_TRY(Backend::copy_to_device(d_vel, start.vel.data(), cfg.n));
    PITFALL_TRY(Backend::for_each(cfg.n, body));
    PITFALL_TRY(Backend::synchronize());
    state result;
    result.pos.resize(cfg.n);
    result.vel.resize(cfg.n);
    PITFALL_TRY(Backend::copy_to_host(result.pos.data(), d_pos, cfg.n));
    PITFALL_TRY(Backend::copy_to_host(result.vel.data(), d_vel, cfg.n));
    ctx.ran_on(Backend::describe_device());
    judge_values<Untyped>(ctx, cfg, start, result);
    return pitfall::status::ok();
}

/// Double constants in a float body: float64 arithmetic, narrowed each step.
template <class Backend> pitfall::status reproduce(pitfall::context& ctx) {
    return run_pipeline<Backend, true>(ctx);
}

/// Typed constants: float32 throughout.
template <class Backend> pitfall::status remedy(pitfall::context& ctx) {
    return run_pipeline<Backend, false>(ctx);
}

// ---------------------------------------------------------------------------------------------
// reproduce_fp64_in_generated_code: the PTX of the same loop bodies, counted per kernel.
// ---------------------------------------------------------------------------------------------
#if PITFALL_HAS_CUDA
/// Instruction counts of one PTX kernel (static: a loop body counts once).
struct ptx_counts {
    bool found = false;
    int f64_arithmetic = 0;  ///< add/sub/mul/fma/div/... .f64
    int f64_conversions = 0; ///< cvt to or from f64
    int f32_arithmetic = 0;  ///< the same operations on .f32
};

bool is_arithmetic(const std::string& op) {
    static const char* const names[] = {"add", "sub", "mul", "fma",  "mad", "div",  "neg",
                                        "abs", "min", "max", "sqrt", "rcp", "rsqrt"};
    return std::any_of(std::begin(names), std::end(names),
                       [&](const char* name) { return op == name; });
}

/// Counts the instructions of `.entry <kernel>(`...`}` in the PTX text.
ptx_counts count_kernel(const std::string& ptx, const std::string& kernel) {
    ptx_counts counts;
    const std::size_t entry = ptx.find(".entry " + kernel + "(");
    if (entry == std::string::npos)
        return counts;
    counts.found = true;
    std::istringstream body(ptx.substr(entry));
    std::string line;
    while (std::getline(body, line)) {
        if (line.rfind('}', 0) == 0) // the kernel's closing brace, at the start of a line
            break;
        std::istringstream words(line);
        std::string opcode;
        words >> opcode;
        if (!opcode.empty() && opcode[0] == '@') // a predicate guard: the opcode follows
            words >> opcode;
        if (opcode.empty() || opcode[0] == '.' || opcode[0] == '/' || opcode[0] == '$')
            continue;
        std::vector<std::string> parts;
        std::istringstream dotted(opcode);
        for (std::string part; std::getline(dotted, part, '.');)
            parts.push_back(part);
        const bool f64 = std::find(parts.begin(), parts.end(), "f64") != parts.end();
        const bool f32 = std::find(parts.begin(), parts.end(), "f32") != parts.end();
        if (parts[0] == "cvt" && f64)
            ++counts.f64_conversions;
        else if (is_arithmetic(parts[0]) && f64)
            ++counts.f64_arithmetic;
        else if (is_arithmetic(parts[0]) && f32)
            ++counts.f32_arithmetic;
    }
    return counts;
}

pitfall::status reproduce_fp64_in_generated_code(pitfall::context& ctx) {
    const std::string ptx(reinterpret_cast<const char*>(pitfall_image_spring_ptx),
                          pitfall_image_spring_ptx_size);
    const std::string kernels[] = {"spring_untyped_kernel", "spring_typed_kernel",
                                   "scale_by_half_kernel", "scale_by_tenth_kernel"};
    ptx_counts seen[4];
    for (int k = 0; k < 4; ++k) {
        seen[k] = count_kernel(ptx, kernels[k]);
        if (!seen[k].found)
            return PITFALL_HOST_ERROR(pitfall::stage::init, pitfall::host_error::malformed_elf,
                                      "PTX image spring_ptx: no .entry " + kernels[k]);
        const std::string prefix = "ptx." + kernels[k] + ".";
        ctx.record(prefix + "f64_arithmetic", seen[k].f64_arithmetic);
        ctx.record(prefix + "f64_conversions", seen[k].f64_conversions);
        ctx.record(prefix + "f32_arithmetic", seen[k].f32_arithmetic);
    }
    ctx.record("ptx_bytes", static_cast<double>(pitfall_image_spring_ptx_size), "B");
    const auto describe = [](const ptx_counts& c) {
        return std::to_string(c.f64_arithmetic) + " f64 arithmetic, " +
               std::to_string(c.f64_conversions) + " f64 conversions, " +
               std::to_string(c.f32_arithmetic) + " f32 arithmetic";
    };
    ctx.check("untyped_kernel_has_fp64_arithmetic",
              seen[0].f64_arithmetic > 0 && seen[0].f64_conversions > 0,
              "spring_untyped_kernel: " + describe(seen[0]));
    ctx.check("typed_kernel_has_no_fp64",
              seen[1].f64_arithmetic == 0 && seen[1].f64_conversions == 0,
              "spring_typed_kernel: " + describe(seen[1]));
    ctx.check("scale_by_half_narrowed_to_f32",
              seen[2].f64_arithmetic == 0 && seen[2].f64_conversions == 0,
              "x * 0.5: " + describe(seen[2]));
    ctx.check("scale_by_tenth_stays_f64", seen[3].f64_arithmetic == 1,
              "x * 0.1: " + describe(seen[3]));
    return pitfall::status::ok();
}
#endif

constexpr const char* generated_code_why_cpu =
    "the host has no device code image to read: the CPU's promotion is shown by the reproduce "
    "case's values (bit-equal to double arithmetic) and time";

} // namespace

// The device_size variants are reproduce and remedy themselves: only their parameter set
// (scenario.json, "params" of each variant) differs, and the SDK applies it before the case.
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce), PITFALL_VARIANT(remedy),
                 PITFALL_NAMED_VARIANT("reproduce_device_size", reproduce),
                 PITFALL_NAMED_VARIANT("remedy_device_size", remedy),
                 PITFALL_CUDA_VARIANT(reproduce_fp64_in_generated_code, generated_code_why_cpu))
