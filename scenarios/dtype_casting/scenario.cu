// dtype_casting: what narrowing a number costs, measured against hand-computed values.
//
// What
//   Code that moves from CPU to GPU changes its number types: float64 data becomes float32,
//   activations and gradients become fp16 or bf16 ("mixed precision"), labels ride along in
//   the float tensor of a batch, and indices stay `int` because they always fit on the CPU.
//   Each cast here is run on the backend (a host loop with the software conversions of
//   soft_float.hpp, or a CUDA kernel with __float2half_rn / __float2bfloat16_rn /
//   __double2float_rn) and judged against values derived by hand in the comments:
//     reproduce_narrowing      float64 -> float32 (16777217 -> 16777216, 0.1 off by 1.5e-9),
//                              float32 -> fp16 (65520 -> inf, 2^-25 -> 0, 2049 -> 2048),
//                              float32 -> bf16 (pi -> 3.140625, 257 -> 256), fp16 and bf16
//                              accumulators that stop counting, and a sweep of 2^20 float32
//                              values whose fp16/bf16 bits must match an arithmetic reference.
//     reproduce_index_and_labels  class labels stored as fp16 or float truncate to the wrong
//                              class, and the flat index of a 50000 x 50000 matrix wraps
//                              negative in int32 (computed, nothing that large is allocated).
//     reproduce_fp16_training_no_loss_scaling  logistic regression whose activation gradients
//                              (~1.2e-8) are stored in fp16: all flush to zero, loss stays ln 2.
//     remedy_loss_scaling      the same run with the loss scaled by 2^16 before the cast and
//                              the gradient unscaled in fp32: it trains like float64 does.
//     remedy_wider_types       int64 indices, int32 labels (rounding where a float is
//                              unavoidable), fp32 accumulation: every count above goes to 0.
//
// Why it fails
//   fp16 has 5 exponent bits: its largest value is 65504 and its smallest 2^-24 = 5.96e-8, so
//   activations overflow to inf and small gradients underflow to 0 with no error raised. bf16
//   keeps float32's range but has 8 significant bits (integers exact only to 256). float32 has
//   24 (integers exact to 2^24 = 16777216). A label that is a float is an index only after a
//   cast, which truncates (2.9999998 -> 2). `int` index arithmetic wraps past 2^31 - 1, and a
//   negative offset on a GPU reads before the buffer: another allocation's data, or
//   cudaErrorIllegalAddress (sticky).
//   On the CPU the same code often never meets the problem: it keeps float64 (NumPy's default),
//   never casts to fp16, and uses 64-bit size_t indices.
//
// Expected per backend
//   cpu   every reproduce variant observes exactly the hand-derived values (outcome ok, every
//         check passes); the remedies observe none of the failures. The conversions are the
//         bit-level software ones, judged by an independent arithmetic reference.
//   cuda  (GPU; documented, seen once on an H100 (2026-11-22), not yet blessed)
//         the same numbers from the GPU's conversion instructions (cvt.rn.f16.f32 and friends):
//         the same checks judge them, and the sweep also counts device-vs-software mismatches
//         (expected 0; NaN payloads are compared as "both NaN"). Without a driver the case ends
//         UNSUPPORTED (cudaErrorInsufficientDriver) before any of this runs.
//
// Remedy
//   Cast explicitly at the boundary and choose the type for the range: bf16 where range
//   matters, loss scaling (static 2^16 with back-off, or dynamic) where fp16 holds gradients,
//   fp32 accumulators, integer labels kept integer (or rounded, never truncated), and 64-bit
//   index arithmetic (`size_t` / `int64_t`) for anything that can pass 2^31 elements.
//
// Seed
//   002 ex.3 ("Handling data type inconsistencies": cast features to float32 and labels to
//   int32 before feeding them), 000 ex.1 (float64 data on a GPU model). Facts:
//   docs/cuda-rules.md#numbers; loss scaling: NVIDIA's "Training with Mixed Precision" guide.
#include "pitfall/scenario.hpp"

#include "soft_float.hpp"

#if PITFALL_HAS_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace dtype_casting {

// =============================================================================================
// The conversions each backend uses. On the GPU (device pass, __CUDA_ARCH__ defined) they are
// CUDA's intrinsics; in a host loop they are the software converters of soft_float.hpp.
// Buffers carry fp16/bf16 as their 16-bit patterns (uint16_t), so host code never needs
// cuda_fp16.h and the CPU-only build sees no CUDA type.
// =============================================================================================
PITFALL_HOST_DEVICE inline std::uint16_t to_fp16_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(x));
#else
    return soft_fp16_bits(x);
#endif
}
PITFALL_HOST_DEVICE inline float fp16_to_float(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return soft_fp16_to_float(h);
#endif
}
PITFALL_HOST_DEVICE inline std::uint16_t to_bf16_bits(float x) {
#if defined(__CUDA_ARCH__)
    // The bits through __nv_bfloat16_raw: CUDA 11.x declares __bfloat16_as_ushort only for
    // sm_80 and up, and the matrix builds sm_70 and sm_75 with it too.
    const __nv_bfloat16_raw raw = __float2bfloat16_rn(x);
    return raw.x;
#else
    return soft_bf16_bits(x);
#endif
}
PITFALL_HOST_DEVICE inline float bf16_to_float(std::uint16_t b) {
#if defined(__CUDA_ARCH__)
    __nv_bfloat16_raw raw;
    raw.x = b;
    return __bfloat162float(__nv_bfloat16(raw));
#else
    return soft_bf16_to_float(b);
#endif
}
// float64 -> float32: cvt.rn.f32.f64 on the GPU, the CPU's own conversion (cvtsd2ss) here.
PITFALL_HOST_DEVICE inline float narrow_to_float(double x) {
#if defined(__CUDA_ARCH__)
    return __double2float_rn(x);
#else
    return static_cast<float>(x);
#endif
}
// float -> int rounding to nearest (the remedy for float labels); the cast truncates.
PITFALL_HOST_DEVICE inline std::int32_t round_to_int(float x) {
#if defined(__CUDA_ARCH__)
    return __float2int_rn(x);
#else
    return static_cast<std::int32_t>(std::lrint(x));
#endif
}

// =============================================================================================
// Kernels (functors run by Backend::for_each). Each writes only its own element.
// =============================================================================================

/// float64 -> float32, element-wise.
struct narrow_f64 {
    const double* in;
    float* out;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { out[i] = narrow_to_float(in[i]); }
};

/// float32 -> fp16 and bf16 bit patterns, element-wise (the edge table and the sweep).
struct convert_16 {
    const float* in;
    std::uint16_t* fp16;
    std::uint16_t* bf16;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        fp16[i] = to_fp16_bits(in[i]);
        bf16[i] = to_bf16_bits(in[i]);
    }
};

/// fp16 / bf16 -> float32 (exact), element-wise: the decode path of the backend.
struct decode_16 {
    const std::uint16_t* fp16;
    const std::uint16_t* bf16;
    float* fp16_value;
    float* bf16_value;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        fp16_value[i] = fp16_to_float(fp16[i]);
        bf16_value[i] = bf16_to_float(bf16[i]);
    }
};

/// One thread sums n fp16-stored values into an fp16, a bf16 and an fp32 accumulator. An fp16
/// addition is the fp32 sum of the two operands rounded to fp16 (fp32 holds it exactly), so
/// `to_fp16(from_fp16(acc) + x)` is __hadd's result; likewise for bf16.
struct accumulate {
    const std::uint16_t* values_fp16;
    std::size_t n;
    float* sums; // [0] fp16 accumulator, [1] bf16 accumulator, [2] fp32 accumulator
    PITFALL_HOST_DEVICE void operator()(std::size_t) const {
        std::uint16_t acc16 = 0;
        std::uint16_t acc_bf = 0;
        float acc32 = 0.f;
        for (std::size_t i = 0; i < n; ++i) {
            const float x = fp16_to_float(values_fp16[i]);
            acc16 = to_fp16_bits(fp16_to_float(acc16) + x);
            acc_bf = to_bf16_bits(bf16_to_float(acc_bf) + x);
            acc32 += x;
        }
        sums[0] = fp16_to_float(acc16);
        sums[1] = bf16_to_float(acc_bf);
        sums[2] = acc32;
    }
};

/// Flat index of element (row, col) of a row-major matrix with `ld` columns.
/// int32: what `int idx = row * ld + col;` gives on the hardware, a 32-bit multiply-add that
/// wraps modulo 2^32. Written with unsigned arithmetic (signed overflow is undefined in C++,
/// and the optimizer may assume it away) and converted back to int32 (two's complement: defined
/// by GCC and nvcc, and by C++20).
struct flat_index_int32 {
    const std::int32_t* rows;
    const std::int32_t* cols;
    std::int32_t ld;
    std::int64_t* out; // widened only for storage; the value is the int32 result
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const std::uint32_t wrapped =
            static_cast<std::uint32_t>(rows[i]) * static_cast<std::uint32_t>(ld) +
            static_cast<std::uint32_t>(cols[i]);
        out[i] = static_cast<std::int32_t>(wrapped);
    }
};
/// The remedy: the same arithmetic in 64 bits.
struct flat_index_int64 {
    const std::int32_t* rows;
    const std::int32_t* cols;
    std::int32_t ld;
    std::int64_t* out;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        out[i] = static_cast<std::int64_t>(rows[i]) * ld + cols[i];
    }
};

/// The class index a sparse cross-entropy gathers with, per sample.
///   keep_int false: the labels travelled in the batch's float tensor cast to fp16 (one
///                   `.half()` on the whole batch), and the loss casts them back with a
///                   truncating float -> int; the first `norm_n` labels also went through a
///                   min-max normalisation in float32 (k / (n-1), later * (n-1)).
///   keep_int true:  labels stay int32; the normalised ones are rounded, not truncated.
struct decode_labels {
    const std::int32_t* classes;
    std::int32_t norm_n;
    bool keep_int;
    std::int32_t* via_fp16;
    std::int32_t* via_normalised;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const std::int32_t k = classes[i];
        via_fp16[i] =
            keep_int
                ? k
                : static_cast<std::int32_t>(fp16_to_float(to_fp16_bits(static_cast<float>(k))));
        if (i < static_cast<std::size_t>(norm_n)) {
            const float span = static_cast<float>(norm_n - 1);
            const float stored = static_cast<float>(k) / span; // IEEE division on both backends
            const float back = stored * span;
            via_normalised[i] = keep_int ? round_to_int(back) : static_cast<std::int32_t>(back);
        }
    }
};

/// Labels that arrive as float32 values, cast to a class index by truncation (the bug).
struct float_label_to_class {
    const float* labels;
    std::int32_t* out;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        out[i] = static_cast<std::int32_t>(labels[i]);
    }
};

/// Logistic regression backward, per sample: p = sigmoid(z), dz = factor * (p - y) with
/// factor = upstream * scale / N, stored as fp16 (the activation-gradient buffer of a
/// mixed-precision backward pass), read back and unscaled in fp32 for the weight-gradient GEMM.
/// Counts, per sample over the steps, values the cast flushed to zero and values left subnormal.
struct logistic_backward {
    const float* z;
    const float* y;
    float factor;
    float inv_scale;
    float* grad_z;
    std::uint32_t* flushed;
    std::uint32_t* subnormal;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const float p = 1.f / (1.f + std::exp(-z[i]));
        const float dz = factor * (p - y[i]);
        const std::uint16_t h = to_fp16_bits(dz);
        if (dz != 0.f && (h & 0x7FFFu) == 0u)
            ++flushed[i];
        else if ((h & 0x7C00u) == 0u && (h & 0x03FFu) != 0u)
            ++subnormal[i];
        grad_z[i] = fp16_to_float(h) * inv_scale; // unscale in fp32, after the fp16 storage
    }
};

/// Adam on the fp32 master weights (bias corrections computed on the host per step).
struct adam_update {
    float* w;
    float* m;
    float* v;
    const float* grad;
    float lr, beta1, beta2, eps, correction1, correction2;
    PITFALL_HOST_DEVICE void operator()(std::size_t j) const {
        const float g = grad[j];
        m[j] = beta1 * m[j] + (1.f - beta1) * g;
        v[j] = beta2 * v[j] + (1.f - beta2) * g * g;
        w[j] -= lr * (m[j] / correction1) / (std::sqrt(v[j] / correction2) + eps);
    }
};

// =============================================================================================
// Host helpers: formatting, hashing, deterministic inputs.
// =============================================================================================
std::string num(double x) {
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", x);
    return text;
}
std::string hex(std::uint64_t x, int digits) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%0*llX", digits, static_cast<unsigned long long>(x));
    return text;
}

/// A bijective 32-bit mixer (Wellons' lowbias32): deterministic inputs, no RNG state.
std::uint32_t mix32(std::uint32_t x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}
/// Uniform in [lo, hi) from an index and a stream number.
float uniform(std::uint32_t i, std::uint32_t stream, float lo, float hi) {
    const std::uint32_t h = mix32(i * 0x9E3779B1u + mix32(stream));
    return lo + (hi - lo) * static_cast<float>(h >> 8) * (1.f / 16777216.f);
}

/// The sweep's i-th float32, chosen to hit every branch of a conversion:
///   i % 4 == 0  any bit pattern (NaN, inf, float32 subnormals, far out of fp16's range);
///   i % 4 == 1  sign and mantissa random, exponent 2^-26 .. 2^16 (fp16's range and both ends);
///   i % 4 == 2  the same exponents, low 13 mantissa bits exactly 0x1000: fp16 ties;
///   i % 4 == 3  any exponent, low 16 bits exactly 0x8000: bf16 ties.
float sweep_value(std::uint32_t i) {
    const std::uint32_t h = mix32(i);
    const std::uint32_t g = mix32(h ^ 0x9E3779B9u);
    const std::uint32_t sign = g & 0x80000000u;
    const std::uint32_t fp16_exponent = 101u + h % 43u; // biased: 2^-26 .. 2^16
    switch (i % 4u) {
    case 0u: return float_of(h);
    case 1u: return float_of(sign | (fp16_exponent << 23) | (g & 0x007FFFFFu));
    case 2u: return float_of(sign | (fp16_exponent << 23) | (g & 0x007FE000u) | 0x1000u);
    default: return float_of(sign | ((1u + h % 254u) << 23) | (g & 0x007F0000u) | 0x8000u);
    }
}

/// FNV-1a over 16-bit codes, NaNs canonicalised: the same sweep gives the same hash on every
/// correct converter, CPU or GPU, so two runs on two machines can be compared by one string.
struct fnv1a {
    std::uint64_t state = 0xCBF29CE484222325ull;
    void add(std::uint16_t code, const format16& f) {
        if (classify(code, f) == fp_class::nan)
            code = static_cast<std::uint16_t>((((1u << f.exponent_bits) - 1u) << f.mantissa_bits) |
                                              (1u << (f.mantissa_bits - 1)));
        for (int b = 0; b < 2; ++b) {
            state ^= (code >> (8 * b)) & 0xFFu;
            state *= 0x100000001B3ull;
        }
    }
};

struct class_counts {
    long long zero = 0, subnormal = 0, normal = 0, inf = 0, nan = 0;
    void add(fp_class c) {
        switch (c) {
        case fp_class::zero: ++zero; break;
        case fp_class::subnormal: ++subnormal; break;
        case fp_class::normal: ++normal; break;
        case fp_class::inf: ++inf; break;
        case fp_class::nan: ++nan; break;
        }
    }
};

/// Copy a backend buffer into a fresh host vector.
template <class Backend, class T>
pitfall::status_or<std::vector<T>> to_host(const pitfall::buffer<T, Backend>& d_buf) {
    std::vector<T> h_out(d_buf.size());
    PITFALL_TRY(Backend::copy_to_host(h_out.data(), d_buf, d_buf.size()));
    return pitfall::status_or<std::vector<T>>(std::move(h_out));
}
/// Allocate a backend buffer holding a copy of a host vector.
template <class Backend, class T>
pitfall::status_or<pitfall::buffer<T, Backend>> to_device(const std::vector<T>& h_in) {
    PITFALL_ASSIGN_OR_RETURN(auto d_buf, Backend::template allocate<T>(h_in.size()));
    PITFALL_TRY(Backend::copy_to_device(d_buf, h_in.data(), h_in.size()));
    // Spelled out: nvcc's C++17 front end does not move a named local into a converting
    // constructor (GCC does, P1825), and buffer cannot be copied.
    return pitfall::status_or<pitfall::buffer<T, Backend>>(std::move(d_buf));
}

/// A check that compares an observed number with its hand-derived value.
void check_equal(pitfall::context& ctx, const std::string& name, double observed, double expected,
                 const std::string& why) {
    ctx.check(name, observed == expected,
              "observed " + num(observed) + ", expected " + num(expected) + " (" + why + ")");
}

// =============================================================================================
// reproduce_narrowing
// =============================================================================================

/// One row of the float32 edge table: the input and its fp16 / bf16 encodings, derived by hand.
struct edge_value {
    const char* what;
    float input;
    std::uint16_t fp16;
    std::uint16_t bf16;
};

// Derivations (fp16: 1 + 5 + 10 bits, bias 15; bf16: the upper 16 bits of a float32; ties go
// to the even encoding):
const edge_value edge_table[] = {
    // 65504 = (2 - 2^-10) * 2^15 = fp16's largest finite, 0x7BFF. In bf16 (8 significant bits)
    // 65504 = 0x477FE000: the dropped half 0xE000 > 0x8000 rounds up to 0x4780 = 65536.
    {"65504 (fp16 max)", 65504.f, 0x7BFF, 0x4780},
    // fp16 steps are 32 apart above 32768; 65519 is below the midpoint 65520 -> 65504.
    {"65519", 65519.f, 0x7BFF, 0x4780},
    // 65520 is the midpoint between 65504 (odd mantissa 0x3FF) and 65536 (even, but 2^16 does
    // not exist in fp16): nearest-even picks 65536 -> +inf (0x7C00).
    {"65520 (first fp16 overflow)", 65520.f, 0x7C00, 0x4780},
    // 1e5 = 0x47C35000: fp16 +inf; bf16 drops 0x5000 < 0x8000 -> 0x47C3 = 1.5234375 * 2^16 =
    // 99840 (finite: bf16 has float32's range).
    {"1e5", 1e5f, 0x7C00, 0x47C3},
    {"-1e5", -1e5f, 0xFC00, 0xC7C3},
    // 2^-14 = 6.103515625e-05: fp16's smallest normal, 0x0400; bf16 exact, 0x3880.
    {"2^-14 (fp16 min normal)", 6.103515625e-05f, 0x0400, 0x3880},
    // 2^-24 = 5.9604644775390625e-08: fp16's smallest subnormal, 0x0001.
    {"2^-24 (fp16 min subnormal)", 5.9604644775390625e-08f, 0x0001, 0x3380},
    // 2^-25 is exactly half of 2^-24: the tie between 0 (even) and 0x0001 -> 0.
    {"2^-25 (tie -> 0)", 2.98023223876953125e-08f, 0x0000, 0x3300},
    // 3e-8f = 0x3300D959 is just above 2^-25 -> rounds up to 2^-24; bf16 0xD959 > 0x8000 ->
    // 0x3301.
    {"3e-8", 3e-8f, 0x0001, 0x3301},
    // 1e-8 < 2^-25 -> fp16 0 (a gradient lost); bf16 0x322BCC77 -> 0x322C = 1.0012e-8.
    {"1e-8 (fp16 underflow)", 1e-8f, 0x0000, 0x322C},
    // 1e-5 / 2^-24 = 167.77 -> 168 units of 2^-24 = 0x00A8 = 1.0013580322265625e-05
    // (a subnormal: 8 significant bits left); bf16 0x3727C5AC -> 0x3728.
    {"1e-5 (fp16 subnormal)", 1e-5f, 0x00A8, 0x3728},
    // 2048 = 2^11: exact, 0x6800. Above it fp16 steps by 2.
    {"2048", 2048.f, 0x6800, 0x4500},
    // 2049: tie between 2048 (mantissa 0) and 2050 (mantissa 1) -> 2048. bf16 steps by 16 here.
    {"2049 (-> 2048)", 2049.f, 0x6800, 0x4500},
    // 2051: tie between 2050 (odd) and 2052 (even) -> 2052 = 0x6802. bf16 -> 2048.
    {"2051 (-> 2052)", 2051.f, 0x6802, 0x4500},
    // 0.1f = 0x3DCCCCCD -> fp16 0x2E66 = 0.0999755859375; bf16 0x3DCD = 0.10009765625.
    {"0.1", 0.1f, 0x2E66, 0x3DCD},
    {"-0.0", -0.0f, 0x8000, 0x8000},
    // pi = 0x40490FDB: bf16 drops 0x0FDB < 0x8000 -> 0x4049 = 3.140625; fp16 (11 bits)
    // 3.140625 too: 0x4248.
    {"3.14159265", 3.14159265f, 0x4248, 0x4049},
    // 257 = 0x43808000: bf16 tie, 0x4380 is even -> 256. fp16 holds 257 exactly: 0x5C04.
    {"257 (bf16 -> 256)", 257.f, 0x5C04, 0x4380},
    // 259 = 0x43818000: bf16 tie, 0x4381 is odd -> 0x4382 = 260. fp16 exact: 0x5C0C.
    {"259 (bf16 -> 260)", 259.f, 0x5C0C, 0x4382},
    // 1 + 2^-8: half of bf16's eps 2^-7, a tie -> 1.0 (0x3F80); fp16 exact: 0x3C04.
    {"1 + 2^-8 (bf16 -> 1)", 1.00390625f, 0x3C04, 0x3F80},
    // FLT_MAX = 0x7F7FFFFF: bf16 rounds the low half up, the carry reaches the exponent -> inf.
    {"FLT_MAX", std::numeric_limits<float>::max(), 0x7C00, 0x7F80},
    {"+inf", std::numeric_limits<float>::infinity(), 0x7C00, 0x7F80},
    {"NaN", std::numeric_limits<float>::quiet_NaN(), 0x7E00, 0x7FC0},
    // 16777217 is not a float32: 16777216 (see the float64 table) -> fp16 inf, bf16 exact.
    {"16777217 (as float32)", 16777216.f, 0x7C00, 0x4B80},
};
constexpr std::size_t edge_count = sizeof edge_table / sizeof edge_table[0];

// Counts over edge_table, by hand from the column above:
//   fp16 inf: 65520, 1e5, -1e5, FLT_MAX, +inf, 16777216 = 6; NaN 1; zero: 2^-25, 1e-8, -0.0 = 3;
//   subnormal: 2^-24, 3e-8, 1e-5 = 3; finite -> inf (overflow): 6 - 1 (+inf itself) = 5;
//   non-zero -> zero (underflow): 2^-25, 1e-8 = 2.
//   bf16 inf: FLT_MAX, +inf = 2; NaN 1; zero: -0.0 = 1; subnormal 0; overflow 1; underflow 0.
constexpr long long fp16_edge_inf = 6, fp16_edge_nan = 1, fp16_edge_zero = 3,
                    fp16_edge_subnormal = 3, fp16_edge_overflow = 5, fp16_edge_underflow = 2;
constexpr long long bf16_edge_inf = 2, bf16_edge_nan = 1, bf16_edge_zero = 1,
                    bf16_edge_subnormal = 0, bf16_edge_overflow = 1, bf16_edge_underflow = 0;

// Unit roundoffs (half the distance from 1 to the next value): fp32 2^-24, fp16 2^-11,
// bf16 2^-8. Every in-range (normal) result is within this relative error of its input.
constexpr double u_fp32 = 5.9604644775390625e-08; // 2^-24
constexpr double u_fp16 = 4.8828125e-04;          // 2^-11
constexpr double u_bf16 = 3.90625e-03;            // 2^-8

template <class Backend> pitfall::status float64_to_float32(pitfall::context& ctx) {
    // Inputs: 4 edge values, then 4096 "measurements" i * 0.1 (float64 data as NumPy makes it),
    // then 1024 values exactly midway between two float32 neighbours in [1, 2).
    const double edges[] = {
        16777217.0, // 2^24 + 1 needs 25 significant bits; tie between 2^24 (even) and 2^24 + 2
        0.1,        // -> 0x3DCCCCCD = 0.100000001490116119384765625
        1e39,       // > FLT_MAX = 3.4028235e38 -> +inf
        1e-46,      // < 2^-150 = 7.0e-46 (half of float32's smallest subnormal 2^-149) -> 0
    };
    const std::uint32_t edge_bits[] = {0x4B800000u, 0x3DCCCCCDu, 0x7F800000u, 0x00000000u};
    constexpr std::size_t n_edges = 4, n_decimal = 4096, n_ties = 1024;
    std::vector<double> h_in(edges, edges + n_edges);
    for (std::size_t i = 0; i < n_decimal; ++i)
        h_in.push_back(static_cast<double>(i) * 0.1);
    // 1 + (2i + 1) * 2^-24: float32 steps by 2^-23 in [1, 2), so each is a tie: |error| is
    // exactly 2^-24, and ties-to-even rounds i even down and i odd up: the signed errors cancel.
    for (std::size_t i = 0; i < n_ties; ++i)
        h_in.push_back(1.0 + static_cast<double>(2 * i + 1) * u_fp32);

    PITFALL_ASSIGN_OR_RETURN(auto d_in, (to_device<Backend>(h_in)));
    PITFALL_ASSIGN_OR_RETURN(auto d_out, Backend::template allocate<float>(h_in.size()));
    PITFALL_TRY(Backend::for_each(h_in.size(), narrow_f64{d_in.data(), d_out.data()}));
    PITFALL_TRY(Backend::synchronize());
    PITFALL_ASSIGN_OR_RETURN(const std::vector<float> h_out, (to_host<Backend>(d_out)));

    long long overflow = 0, underflow = 0;
    for (std::size_t i = 0; i < n_edges; ++i) {
        const bool ok = bits_of(h_out[i]) == edge_bits[i];
        ctx.check("f64->f32 " + num(edges[i]), ok,
                  "bits " + hex(bits_of(h_out[i]), 8) + ", expected " + hex(edge_bits[i], 8));
        overflow += std::isinf(h_out[i]) && !std::isinf(edges[i]);
        underflow += h_out[i] == 0.f && edges[i] != 0.0;
    }
    const double error_0_1 = static_cast<double>(h_out[1]) - 0.1;
    ctx.record("f32_of_16777217", static_cast<double>(h_out[0]));
    ctx.record("f32_abs_error_of_0_1", error_0_1);
    ctx.record("f32_rel_error_of_0_1", error_0_1 / 0.1);
    // 0.100000001490116119384765625 - 0.1000000000000000055511151231257827 (the double 0.1)
    // = 1.4901161138336505e-09; relative 1.49e-8 (below u_fp32 = 5.96e-8, as it must be).
    check_equal(ctx, "0.1 -> float32 absolute error", error_0_1, 1.4901161138336505e-09,
                "0x3DCCCCCD minus the double 0.1");
    check_equal(ctx, "float64 -> float32 overflows", static_cast<double>(overflow), 1, "1e39");
    check_equal(ctx, "float64 -> float32 underflows", static_cast<double>(underflow), 1, "1e-46");
    ctx.record("f64_to_f32_overflow_count", static_cast<double>(overflow));
    ctx.record("f64_to_f32_underflow_count", static_cast<double>(underflow));

    double max_abs = 0.0, max_rel = 0.0;
    for (std::size_t i = n_edges; i < n_edges + n_decimal; ++i) {
        const double err = std::fabs(static_cast<double>(h_out[i]) - h_in[i]);
        max_abs = std::fmax(max_abs, err);
        if (h_in[i] != 0.0)
            max_rel = std::fmax(max_rel, err / h_in[i]);
    }
    ctx.record("f64_to_f32_max_abs_error", max_abs);
    ctx.record("f64_to_f32_max_rel_error", max_rel);
    ctx.check("float64 -> float32 relative error <= 2^-24", max_rel <= u_fp32,
              "max over i * 0.1, i < 4096: " + num(max_rel) + " (bound " + num(u_fp32) + ")");

    double tie_max = 0.0, tie_sum = 0.0;
    for (std::size_t i = n_edges + n_decimal; i < h_in.size(); ++i) {
        const double err = static_cast<double>(h_out[i]) - h_in[i];
        tie_max = std::fmax(tie_max, std::fabs(err));
        tie_sum += err;
    }
    ctx.record("f64_to_f32_tie_max_abs_error", tie_max);
    check_equal(ctx, "midpoints: max error is half an ulp", tie_max, u_fp32, "2^-24");
    check_equal(ctx, "midpoints: ties to even cancel", tie_sum, 0.0,
                "512 round down, 512 round up");
    return pitfall::status::ok();
}

template <class Backend> pitfall::status edge_table_16(pitfall::context& ctx) {
    std::vector<float> h_in;
    for (const auto& e : edge_table)
        h_in.push_back(e.input);
    PITFALL_ASSIGN_OR_RETURN(auto d_in, (to_device<Backend>(h_in)));
    PITFALL_ASSIGN_OR_RETURN(auto d_fp16, Backend::template allocate<std::uint16_t>(edge_count));
    PITFALL_ASSIGN_OR_RETURN(auto d_bf16, Backend::template allocate<std::uint16_t>(edge_count));
    PITFALL_ASSIGN_OR_RETURN(auto d_fp16_value, Backend::template allocate<float>(edge_count));
    PITFALL_ASSIGN_OR_RETURN(auto d_bf16_value, Backend::template allocate<float>(edge_count));
    PITFALL_TRY(
        Backend::for_each(edge_count, convert_16{d_in.data(), d_fp16.data(), d_bf16.data()}));
    PITFALL_TRY(Backend::for_each(edge_count, decode_16{d_fp16.data(), d_bf16.data(),
                                                        d_fp16_value.data(), d_bf16_value.data()}));
    PITFALL_TRY(Backend::synchronize());
    PITFALL_ASSIGN_OR_RETURN(const auto h_fp16, (to_host<Backend>(d_fp16)));
    PITFALL_ASSIGN_OR_RETURN(const auto h_bf16, (to_host<Backend>(d_bf16)));
    PITFALL_ASSIGN_OR_RETURN(const auto h_fp16_value, (to_host<Backend>(d_fp16_value)));
    PITFALL_ASSIGN_OR_RETURN(const auto h_bf16_value, (to_host<Backend>(d_bf16_value)));

    class_counts fp16_counts, bf16_counts;
    long long fp16_overflow = 0, fp16_underflow = 0, bf16_overflow = 0, bf16_underflow = 0;
    for (std::size_t i = 0; i < edge_count; ++i) {
        const edge_value& e = edge_table[i];
        // The decoded value must be the encoding's value (decoded arithmetically here), or NaN.
        const auto decodes = [](float got, std::uint16_t bits, const format16& f) {
            const double want = reference_value(bits, f);
            return std::isnan(want) ? std::isnan(got) : static_cast<double>(got) == want;
        };
        const bool ok = same_encoding(h_fp16[i], e.fp16, fp16_format) &&
                        same_encoding(h_bf16[i], e.bf16, bf16_format) &&
                        decodes(h_fp16_value[i], h_fp16[i], fp16_format) &&
                        decodes(h_bf16_value[i], h_bf16[i], bf16_format);
        ctx.check(std::string("edge ") + e.what, ok,
                  "fp16 " + hex(h_fp16[i], 4) + " = " + num(h_fp16_value[i]) + " (expected " +
                      hex(e.fp16, 4) + "), bf16 " + hex(h_bf16[i], 4) + " = " +
                      num(h_bf16_value[i]) + " (expected " + hex(e.bf16, 4) + ")");
        const fp_class c16 = classify(h_fp16[i], fp16_format);
        const fp_class cbf = classify(h_bf16[i], bf16_format);
        fp16_counts.add(c16);
        bf16_counts.add(cbf);
        const bool finite_in = std::isfinite(e.input);
        fp16_overflow += finite_in && c16 == fp_class::inf;
        bf16_overflow += finite_in && cbf == fp_class::inf;
        fp16_underflow += e.input != 0.f && c16 == fp_class::zero;
        bf16_underflow += e.input != 0.f && cbf == fp_class::zero;
    }
    const struct {
        const char* name;
        long long observed, expected;
    } counts[] = {
        {"fp16_inf_count", fp16_counts.inf, fp16_edge_inf},
        {"fp16_nan_count", fp16_counts.nan, fp16_edge_nan},
        {"fp16_zero_count", fp16_counts.zero, fp16_edge_zero},
        {"fp16_subnormal_count", fp16_counts.subnormal, fp16_edge_subnormal},
        {"fp16_overflow_count", fp16_overflow, fp16_edge_overflow},
        {"fp16_underflow_count", fp16_underflow, fp16_edge_underflow},
        {"bf16_inf_count", bf16_counts.inf, bf16_edge_inf},
        {"bf16_nan_count", bf16_counts.nan, bf16_edge_nan},
        {"bf16_zero_count", bf16_counts.zero, bf16_edge_zero},
        {"bf16_subnormal_count", bf16_counts.subnormal, bf16_edge_subnormal},
        {"bf16_overflow_count", bf16_overflow, bf16_edge_overflow},
        {"bf16_underflow_count", bf16_underflow, bf16_edge_underflow},
    };
    for (const auto& c : counts) {
        ctx.record(c.name, static_cast<double>(c.observed));
        check_equal(ctx, std::string("edge table ") + c.name, static_cast<double>(c.observed),
                    static_cast<double>(c.expected), "counted by hand over the edge table");
    }
    return pitfall::status::ok();
}

/// Sums of 4096 ones in fp16, bf16 and fp32 accumulators.
template <class Backend> pitfall::status_or<std::vector<float>> sum_of_ones() {
    constexpr std::size_t n = 4096;
    const std::vector<std::uint16_t> h_ones(n, 0x3C00); // fp16 1.0
    PITFALL_ASSIGN_OR_RETURN(auto d_ones, (to_device<Backend>(h_ones)));
    PITFALL_ASSIGN_OR_RETURN(auto d_sums, Backend::template allocate<float>(3));
    PITFALL_TRY(Backend::for_each(1, accumulate{d_ones.data(), n, d_sums.data()}));
    PITFALL_TRY(Backend::synchronize());
    return to_host<Backend>(d_sums);
}

template <class Backend> pitfall::status sweep_16(pitfall::context& ctx) {
    // At least 4 (scenario.json): one value of each of sweep_value's four kinds.
    PITFALL_ASSIGN_OR_RETURN(const long long count, ctx.param_int("sweep_count"));
    const auto n = static_cast<std::size_t>(count);
    std::vector<float> h_in(n);
    for (std::size_t i = 0; i < n; ++i)
        h_in[i] = sweep_value(static_cast<std::uint32_t>(i));
    PITFALL_ASSIGN_OR_RETURN(auto d_in, (to_device<Backend>(h_in)));
    PITFALL_ASSIGN_OR_RETURN(auto d_fp16, Backend::template allocate<std::uint16_t>(n));
    PITFALL_ASSIGN_OR_RETURN(auto d_bf16, Backend::template allocate<std::uint16_t>(n));

    // The timed work: n conversions to each format (kernel time on the GPU, loop time here).
    const convert_16 kernel{d_in.data(), d_fp16.data(), d_bf16.data()};
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
                                 return Backend::for_each(n, kernel);
                             }));
    ctx.record_samples("sweep_seconds", seconds, "s");
    PITFALL_TRY(Backend::synchronize());
    PITFALL_ASSIGN_OR_RETURN(const auto h_fp16, (to_host<Backend>(d_fp16)));
    PITFALL_ASSIGN_OR_RETURN(const auto h_bf16, (to_host<Backend>(d_bf16)));

    // Judge every result with the arithmetic reference; on the GPU also with the bit-level
    // software converter (the CPU backend's), which is the CPU-GPU agreement figure.
    constexpr bool on_gpu = Backend::kind == pitfall::backend_kind::cuda;
    long long fp16_mismatch = 0, bf16_mismatch = 0, fp16_vs_soft = 0, bf16_vs_soft = 0;
    std::size_t first_fp16_mismatch = n, first_bf16_mismatch = n;
    double fp16_max_rel = 0.0, bf16_max_rel = 0.0;
    class_counts fp16_counts, bf16_counts;
    fnv1a hash;
    for (std::size_t i = 0; i < n; ++i) {
        const float x = h_in[i];
        if (!same_encoding(h_fp16[i], reference_bits(x, fp16_format), fp16_format)) {
            ++fp16_mismatch;
            first_fp16_mismatch = first_fp16_mismatch == n ? i : first_fp16_mismatch;
        }
        if (!same_encoding(h_bf16[i], reference_bits(x, bf16_format), bf16_format)) {
            ++bf16_mismatch;
            first_bf16_mismatch = first_bf16_mismatch == n ? i : first_bf16_mismatch;
        }
        if (on_gpu) {
            fp16_vs_soft += !same_encoding(h_fp16[i], soft_fp16_bits(x), fp16_format);
            bf16_vs_soft += !same_encoding(h_bf16[i], soft_bf16_bits(x), bf16_format);
        }
        const fp_class c16 = classify(h_fp16[i], fp16_format);
        const fp_class cbf = classify(h_bf16[i], bf16_format);
        fp16_counts.add(c16);
        bf16_counts.add(cbf);
        hash.add(h_fp16[i], fp16_format);
        hash.add(h_bf16[i], bf16_format);
        const double xd = static_cast<double>(x);
        if (c16 == fp_class::normal)
            fp16_max_rel =
                std::fmax(fp16_max_rel,
                          std::fabs(reference_value(h_fp16[i], fp16_format) - xd) / std::fabs(xd));
        if (cbf == fp_class::normal)
            bf16_max_rel =
                std::fmax(bf16_max_rel,
                          std::fabs(reference_value(h_bf16[i], bf16_format) - xd) / std::fabs(xd));
    }
    const auto where = [&](std::size_t i) {
        return i == n ? std::string("none")
                      : "first at input " + hex(bits_of(h_in[i]), 8) + " -> fp16 " +
                            hex(h_fp16[i], 4) + ", bf16 " + hex(h_bf16[i], 4);
    };
    ctx.record("sweep_values", static_cast<double>(n));
    ctx.record("sweep_fp16_mismatches", static_cast<double>(fp16_mismatch));
    ctx.record("sweep_bf16_mismatches", static_cast<double>(bf16_mismatch));
    ctx.check("sweep fp16 == arithmetic reference", fp16_mismatch == 0,
              num(static_cast<double>(fp16_mismatch)) + " of " + num(static_cast<double>(n)) +
                  " differ; " + where(first_fp16_mismatch));
    ctx.check("sweep bf16 == arithmetic reference", bf16_mismatch == 0,
              num(static_cast<double>(bf16_mismatch)) + " of " + num(static_cast<double>(n)) +
                  " differ; " + where(first_bf16_mismatch));
    if (on_gpu) {
        ctx.record("sweep_fp16_device_vs_software_mismatches", static_cast<double>(fp16_vs_soft));
        ctx.record("sweep_bf16_device_vs_software_mismatches", static_cast<double>(bf16_vs_soft));
        ctx.check("sweep device fp16 == software fp16", fp16_vs_soft == 0,
                  num(static_cast<double>(fp16_vs_soft)) + " differ (NaN payloads excepted)");
        ctx.check("sweep device bf16 == software bf16", bf16_vs_soft == 0,
                  num(static_cast<double>(bf16_vs_soft)) + " differ (NaN payloads excepted)");
    }
    ctx.record_info("sweep_fnv1a64", hex(hash.state, 16));
    ctx.record("sweep_fp16_inf_count", static_cast<double>(fp16_counts.inf));
    ctx.record("sweep_fp16_nan_count", static_cast<double>(fp16_counts.nan));
    ctx.record("sweep_fp16_zero_count", static_cast<double>(fp16_counts.zero));
    ctx.record("sweep_fp16_subnormal_count", static_cast<double>(fp16_counts.subnormal));
    ctx.record("sweep_bf16_inf_count", static_cast<double>(bf16_counts.inf));
    ctx.record("sweep_bf16_nan_count", static_cast<double>(bf16_counts.nan));
    ctx.record("sweep_bf16_zero_count", static_cast<double>(bf16_counts.zero));
    ctx.record("sweep_bf16_subnormal_count", static_cast<double>(bf16_counts.subnormal));
    ctx.record("sweep_fp16_max_rel_error", fp16_max_rel);
    ctx.record("sweep_bf16_max_rel_error", bf16_max_rel);
    ctx.check("sweep fp16 normal results within 2^-11", fp16_max_rel <= u_fp16,
              "max relative error " + num(fp16_max_rel));
    ctx.check("sweep bf16 normal results within 2^-8", bf16_max_rel <= u_bf16,
              "max relative error " + num(bf16_max_rel));
    return pitfall::status::ok();
}

template <class Backend> pitfall::status run_narrowing(pitfall::context& ctx) {
    PITFALL_TRY(float64_to_float32<Backend>(ctx));
    PITFALL_TRY(edge_table_16<Backend>(ctx));

    // Accumulators: fp16 counts 1, 2, ..., 2048; then 2048 + 1 = 2049 is a tie between 2048
    // (even) and 2050 -> 2048, forever. bf16 stops at 256 the same way (256 + 1 -> 256).
    // fp32 reaches 4096 exactly (integers are exact to 2^24).
    PITFALL_ASSIGN_OR_RETURN(const auto sums, sum_of_ones<Backend>());
    ctx.record("fp16_accumulator_sum_of_4096_ones", static_cast<double>(sums[0]));
    ctx.record("bf16_accumulator_sum_of_4096_ones", static_cast<double>(sums[1]));
    ctx.record("fp32_accumulator_sum_of_4096_ones", static_cast<double>(sums[2]));
    check_equal(ctx, "fp16 accumulator stalls at 2048", sums[0], 2048, "2048 + 1 ties to 2048");
    check_equal(ctx, "bf16 accumulator stalls at 256", sums[1], 256, "256 + 1 ties to 256");
    check_equal(ctx, "fp32 accumulator counts to 4096", sums[2], 4096, "exact below 2^24");

    return sweep_16<Backend>(ctx);
}

// =============================================================================================
// reproduce_index_and_labels / remedy_wider_types
// =============================================================================================

// The matrix: 50000 x 50000 = 2.5e9 elements > 2^31 - 1 = 2147483647 (never allocated).
constexpr std::int32_t matrix_side = 50000;
// Probed: the last column of every row, then two single elements around the int32 limit.
//   Row r's last element has index 50000 r + 49999 > 2147483647 from r = 42949 on
//   (42949 * 50000 + 49999 = 2147499999): rows 42949 .. 49999 wrap, 50000 - 42949 = 7051 rows.
//   The very last: 49999 * 50000 + 49999 = 2499999999 -> 2499999999 - 2^32 = -1794967297.
//   (42949, 33647): 2147450000 + 33647 = 2147483647 = INT32_MAX, still right;
//   (42949, 33648): one more -> wraps to -2147483648 = INT32_MIN.
constexpr long long wrapped_rows = 7051;
constexpr long long first_wrapped_row = 42949;
constexpr long long last_index_int32 = -1794967297;
constexpr long long last_index_int64 = 2499999999;

// Labels: a 32000-class vocabulary (LLaMA's tokenizer size), labels 0 .. 31999.
//   fp16 holds integers exactly up to 2048; above, it steps by 2 (to 4096), 4, 8, then 16
//   (16384 .. 32768). Exact labels: 0..2048 (2049), multiples of 2 in (2048, 4096] (1024), of 4
//   in (4096, 8192] (1024), of 8 in (8192, 16384] (1024), of 16 in (16384, 31999] (16400 ..
//   31984: 975) = 6096. Wrong: 32000 - 6096 = 25904. Out of range: 31992 is the tie between
//   31984 (odd fp16 mantissa) and 32000 (even), so 31992 .. 31999 all become 32000 = a class
//   that does not exist: 8 labels whose gather reads past the logits row.
constexpr std::int32_t num_classes = 32000;
constexpr long long fp16_wrong_labels = 25904;
constexpr long long fp16_out_of_range_labels = 8;
// Min-max normalised labels k / 99 (100 classes) stored as float32, decoded by truncating
// (k / 99.0f) * 99.0f. Each step rounds once (IEEE); derived exactly (rational arithmetic,
// then float32 rounding of each step): for k = 7, 14, 25, 28, 31, 50, 56, 62 the product lands
// one ulp below k and truncates to k - 1. 8 wrong.
constexpr std::int32_t normalised_classes = 100;
constexpr long long normalised_wrong_labels = 8;
// Labels that arrive as float32: 2.9999998f = 3 - 2^-22 (the float just below 3, what a
// float pipeline produces for "3") truncates to 2; 16777217 cannot be a float32 (-> 16777216).
// (The literal 2.9999999 is no example: it rounds to 3.0f, float32 steps by 2.4e-7 near 3.)
const float float_labels[] = {2.99999976158142089844f, 16777216.f};
const std::int32_t true_float_labels[] = {3, 16777217};

template <class Backend> pitfall::status run_index_and_labels(pitfall::context& ctx, bool wide) {
    // ---- inputs -------------------------------------------------------------------------
    std::vector<std::int32_t> h_rows, h_cols;
    for (std::int32_t r = 0; r < matrix_side; ++r) {
        h_rows.push_back(r);
        h_cols.push_back(matrix_side - 1);
    }
    h_rows.insert(h_rows.end(), {42949, 42949});
    h_cols.insert(h_cols.end(), {33647, 33648});
    std::vector<std::int32_t> h_classes(num_classes);
    for (std::int32_t k = 0; k < num_classes; ++k)
        h_classes[static_cast<std::size_t>(k)] = k;
    const std::vector<float> h_float_labels(std::begin(float_labels), std::end(float_labels));

    PITFALL_ASSIGN_OR_RETURN(auto d_rows, (to_device<Backend>(h_rows)));
    PITFALL_ASSIGN_OR_RETURN(auto d_cols, (to_device<Backend>(h_cols)));
    PITFALL_ASSIGN_OR_RETURN(auto d_index, Backend::template allocate<std::int64_t>(h_rows.size()));
    PITFALL_ASSIGN_OR_RETURN(auto d_classes, (to_device<Backend>(h_classes)));
    PITFALL_ASSIGN_OR_RETURN(auto d_via_fp16,
                             Backend::template allocate<std::int32_t>(h_classes.size()));
    PITFALL_ASSIGN_OR_RETURN(auto d_via_norm,
                             Backend::template allocate<std::int32_t>(normalised_classes));
    PITFALL_ASSIGN_OR_RETURN(auto d_float_labels, (to_device<Backend>(h_float_labels)));
    PITFALL_ASSIGN_OR_RETURN(auto d_float_classes, Backend::template allocate<std::int32_t>(2));

    // ---- the timed work: index arithmetic and label decoding -----------------------------
    const std::size_t n_index = h_rows.size();
    const flat_index_int32 index32{d_rows.data(), d_cols.data(), matrix_side, d_index.data()};
    const flat_index_int64 index64{d_rows.data(), d_cols.data(), matrix_side, d_index.data()};
    const decode_labels labels{d_classes.data(), normalised_classes, wide, d_via_fp16.data(),
                               d_via_norm.data()};
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
                                 PITFALL_TRY(wide ? Backend::for_each(n_index, index64)
                                                  : Backend::for_each(n_index, index32));
                                 return Backend::for_each(h_classes.size(), labels);
                             }));
    ctx.record_samples("pipeline_seconds", seconds, "s");
    if (!wide)
        PITFALL_TRY(Backend::for_each(
            2, float_label_to_class{d_float_labels.data(), d_float_classes.data()}));
    PITFALL_TRY(Backend::synchronize());

    // ---- index ---------------------------------------------------------------------------
    PITFALL_ASSIGN_OR_RETURN(const auto h_index, (to_host<Backend>(d_index)));
    // Judge: the row's true index, in int64 on the host.
    long long wrapped = 0, first_wrapped = -1;
    for (std::int32_t r = 0; r < matrix_side; ++r) {
        const std::int64_t want = std::int64_t{r} * matrix_side + (matrix_side - 1);
        if (h_index[static_cast<std::size_t>(r)] != want) {
            ++wrapped;
            first_wrapped = first_wrapped < 0 ? r : first_wrapped;
        }
    }
    const std::int64_t last = h_index[static_cast<std::size_t>(matrix_side - 1)];
    const std::int64_t at_limit = h_index[n_index - 2];
    const std::int64_t past_limit = h_index[n_index - 1];
    ctx.record("index_wrapped_rows", static_cast<double>(wrapped));
    ctx.record("index_first_wrapped_row", static_cast<double>(first_wrapped));
    ctx.record("index_of_last_element", static_cast<double>(last));
    ctx.record("index_of_42949_33648", static_cast<double>(past_limit));
    check_equal(ctx, "rows whose last index wraps", static_cast<double>(wrapped),
                wide ? 0.0 : static_cast<double>(wrapped_rows),
                wide ? "int64 holds 2.5e9" : "rows 42949 .. 49999");
    check_equal(ctx, "first wrapped row", static_cast<double>(first_wrapped),
                wide ? -1.0 : static_cast<double>(first_wrapped_row),
                wide ? "none" : "42949 * 50000 + 49999 > 2^31 - 1");
    check_equal(ctx, "index of (49999, 49999)", static_cast<double>(last),
                static_cast<double>(wide ? last_index_int64 : last_index_int32),
                wide ? "49999 * 50000 + 49999" : "2499999999 - 2^32");
    check_equal(ctx, "index of (42949, 33647)", static_cast<double>(at_limit), 2147483647.0,
                "INT32_MAX, the last index int32 holds");
    check_equal(ctx, "index of (42949, 33648)", static_cast<double>(past_limit),
                wide ? 2147483648.0 : -2147483648.0, wide ? "2^31" : "wraps to INT32_MIN");

    // ---- labels --------------------------------------------------------------------------
    PITFALL_ASSIGN_OR_RETURN(const auto h_via_fp16, (to_host<Backend>(d_via_fp16)));
    PITFALL_ASSIGN_OR_RETURN(const auto h_via_norm, (to_host<Backend>(d_via_norm)));
    long long wrong_fp16 = 0, out_of_range = 0, wrong_norm = 0;
    std::string wrong_norm_list;
    for (std::size_t k = 0; k < h_via_fp16.size(); ++k) {
        wrong_fp16 += h_via_fp16[k] != h_classes[k];
        out_of_range += h_via_fp16[k] < 0 || h_via_fp16[k] >= num_classes;
    }
    for (std::size_t k = 0; k < h_via_norm.size(); ++k)
        if (h_via_norm[k] != h_classes[k]) {
            ++wrong_norm;
            wrong_norm_list += (wrong_norm_list.empty() ? "" : ",") + std::to_string(k);
        }
    ctx.record("fp16_label_wrong_count", static_cast<double>(wrong_fp16));
    ctx.record("fp16_label_out_of_range_count", static_cast<double>(out_of_range));
    ctx.record("normalised_label_wrong_count", static_cast<double>(wrong_norm));
    ctx.record_info("normalised_labels_wrong", wrong_norm_list);
    check_equal(ctx, "labels stored as fp16: wrong classes", static_cast<double>(wrong_fp16),
                wide ? 0.0 : static_cast<double>(fp16_wrong_labels),
                wide ? "int32 labels" : "32000 - 6096 exact");
    check_equal(ctx, "labels stored as fp16: class >= 32000", static_cast<double>(out_of_range),
                wide ? 0.0 : static_cast<double>(fp16_out_of_range_labels),
                wide ? "int32 labels" : "31992 .. 31999 -> 32000");
    check_equal(ctx, "normalised float labels: wrong classes", static_cast<double>(wrong_norm),
                wide ? 0.0 : static_cast<double>(normalised_wrong_labels),
                wide ? "rounded, not truncated" : "7,14,25,28,31,50,56,62");

    if (!wide) {
        PITFALL_ASSIGN_OR_RETURN(const auto h_float_classes, (to_host<Backend>(d_float_classes)));
        long long wrong_float = 0;
        for (std::size_t i = 0; i < h_float_classes.size(); ++i)
            wrong_float += h_float_classes[i] != true_float_labels[i];
        ctx.record("float_label_wrong_count", static_cast<double>(wrong_float));
        check_equal(ctx, "float label 2.9999998 -> class", h_float_classes[0], 2,
                    "truncation of 3 - 2^-22");
        check_equal(ctx, "float label 16777217 -> class", h_float_classes[1], 16777216,
                    "16777217 is not a float32");
    } else {
        // fp32 accumulation of fp16-stored values: the remedy for the stalled fp16 sum.
        PITFALL_ASSIGN_OR_RETURN(const auto sums, sum_of_ones<Backend>());
        ctx.record("fp32_accumulator_sum_of_4096_ones", static_cast<double>(sums[2]));
        check_equal(ctx, "fp32 accumulation of fp16 ones", sums[2], 4096, "exact below 2^24");
    }
    return pitfall::status::ok();
}

// =============================================================================================
// reproduce_fp16_training_no_loss_scaling / remedy_loss_scaling
// =============================================================================================
//
// Logistic regression, N = 4096 samples, 16 features plus a bias column of ones, Adam on fp32
// master weights initialised to zero. The loss gradient reaching this layer is scaled by
// upstream = 1e-4, standing in for the layers behind it: late in training, activation
// gradients of 1e-8 .. 1e-5 are typical (NVIDIA's mixed-precision guide shows most of SSD's
// below 2^-24). Per sample dz = upstream * (p - y) / N; at w = 0, p = 0.5 and
//   |dz| = 1e-4 * 0.5 / 4096 = 1.2207e-08 < 2^-25 = 2.98e-08
// so every dz flushes to zero in fp16, the weight gradient is exactly 0, Adam's update
// m / (sqrt(v) + eps) is 0, w stays 0 and the loss stays ln 2 = 0.69314718055994531 forever:
// flushed = N * steps exactly. Adam rescales the gradient, so the tiny-but-nonzero float32
// gradient trains normally (the float64 reference below); only the cast loses it.
//
// Loss scaling: multiply by S = 2^16 (GradScaler's initial scale) before the cast and by 1/S
// in fp32 after it; a non-finite gradient skips the step and halves S. Here
// |S * dz| <= 2^16 * 1e-4 / 4096 = 1.6e-3, far below 65504: no step is skipped.
constexpr int train_rows = 4096;
constexpr int train_features = 16;
constexpr int train_cols = train_features + 1; // + bias column
constexpr double upstream_factor = 1e-4;
constexpr double ln2 = 0.69314718055994530942;
constexpr double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8;

struct train_data {
    std::vector<float> x; // row-major N x (d + 1), last column 1
    std::vector<float> y; // 0 / 1
};

/// Labels from a fixed linear rule plus uniform noise: not separable, so the best loss is > 0.
train_data make_train_data() {
    train_data data;
    data.x.resize(static_cast<std::size_t>(train_rows) * train_cols);
    data.y.resize(train_rows);
    std::vector<float> w_true(train_features);
    for (int j = 0; j < train_features; ++j)
        w_true[static_cast<std::size_t>(j)] =
            uniform(static_cast<std::uint32_t>(j), 1, -1.5f, 1.5f);
    for (int i = 0; i < train_rows; ++i) {
        float score = 0.25f + uniform(static_cast<std::uint32_t>(i), 3, -1.f, 1.f);
        for (int j = 0; j < train_features; ++j) {
            const float v =
                uniform(static_cast<std::uint32_t>(i * train_features + j), 2, -1.f, 1.f);
            data.x[static_cast<std::size_t>(i * train_cols + j)] = v;
            score += v * w_true[static_cast<std::size_t>(j)];
        }
        data.x[static_cast<std::size_t>(i * train_cols + train_features)] = 1.f;
        data.y[static_cast<std::size_t>(i)] = score > 0.f ? 1.f : 0.f;
    }
    return data;
}

/// Mean binary cross-entropy in float64, from the weights: the independent loss.
double mean_loss(const train_data& data, const std::vector<double>& w) {
    double total = 0.0;
    for (int i = 0; i < train_rows; ++i) {
        double z = 0.0;
        for (int j = 0; j < train_cols; ++j)
            z += static_cast<double>(data.x[static_cast<std::size_t>(i * train_cols + j)]) *
                 w[static_cast<std::size_t>(j)];
        // softplus(z) - y z, written to stay finite for large |z|
        total += std::fmax(z, 0.0) + std::log1p(std::exp(-std::fabs(z))) -
                 static_cast<double>(data.y[static_cast<std::size_t>(i)]) * z;
    }
    return total / train_rows;
}

/// The same training in float64 on the host, without any fp16: what the model should reach.
std::vector<double> reference_training(const train_data& data, int steps, double lr) {
    std::vector<double> w(train_cols, 0.0), m(train_cols, 0.0), v(train_cols, 0.0);
    std::vector<double> dz(train_rows);
    for (int t = 1; t <= steps; ++t) {
        for (int i = 0; i < train_rows; ++i) {
            double z = 0.0;
            for (int j = 0; j < train_cols; ++j)
                z += static_cast<double>(data.x[static_cast<std::size_t>(i * train_cols + j)]) *
                     w[static_cast<std::size_t>(j)];
            const double p = 1.0 / (1.0 + std::exp(-z));
            dz[static_cast<std::size_t>(i)] =
                upstream_factor * (p - static_cast<double>(data.y[static_cast<std::size_t>(i)])) /
                train_rows;
        }
        const double c1 = 1.0 - std::pow(adam_beta1, t), c2 = 1.0 - std::pow(adam_beta2, t);
        for (int j = 0; j < train_cols; ++j) {
            double g = 0.0;
            for (int i = 0; i < train_rows; ++i)
                g += dz[static_cast<std::size_t>(i)] *
                     static_cast<double>(data.x[static_cast<std::size_t>(i * train_cols + j)]);
            auto& mj = m[static_cast<std::size_t>(j)];
            auto& vj = v[static_cast<std::size_t>(j)];
            mj = adam_beta1 * mj + (1.0 - adam_beta1) * g;
            vj = adam_beta2 * vj + (1.0 - adam_beta2) * g * g;
            w[static_cast<std::size_t>(j)] -= lr * (mj / c1) / (std::sqrt(vj / c2) + adam_eps);
        }
    }
    return w;
}

/// Device state of the training runs, allocated once; each run starts again from w = 0.
template <class Backend> struct train_state {
    pitfall::buffer<float, Backend> x, y, w, m, v, grad, z, grad_z;
    pitfall::buffer<std::uint32_t, Backend> flushed, subnormal;
    int skipped_steps = 0; // host side: GradScaler's bookkeeping
    double final_scale = 1.0;
};

template <class Backend>
pitfall::status_or<train_state<Backend>> make_train_state(const train_data& data) {
    train_state<Backend> s;
    PITFALL_ASSIGN_OR_RETURN(s.x, (to_device<Backend>(data.x)));
    PITFALL_ASSIGN_OR_RETURN(s.y, (to_device<Backend>(data.y)));
    PITFALL_ASSIGN_OR_RETURN(s.w, Backend::template allocate<float>(train_cols));
    PITFALL_ASSIGN_OR_RETURN(s.m, Backend::template allocate<float>(train_cols));
    PITFALL_ASSIGN_OR_RETURN(s.v, Backend::template allocate<float>(train_cols));
    PITFALL_ASSIGN_OR_RETURN(s.grad, Backend::template allocate<float>(train_cols));
    PITFALL_ASSIGN_OR_RETURN(s.z, Backend::template allocate<float>(train_rows));
    PITFALL_ASSIGN_OR_RETURN(s.grad_z, Backend::template allocate<float>(train_rows));
    PITFALL_ASSIGN_OR_RETURN(s.flushed, Backend::template allocate<std::uint32_t>(train_rows));
    PITFALL_ASSIGN_OR_RETURN(s.subnormal, Backend::template allocate<std::uint32_t>(train_rows));
    return pitfall::status_or<train_state<Backend>>(std::move(s));
}

/// One training run on the backend, from w = 0: per step z = X w (GEMM), the backward with
/// its fp16 cast (for_each), grad = X^T dz (GEMM), GradScaler's finite check when scaled, and
/// Adam (for_each). Results stay on the device until fetched.
template <class Backend>
pitfall::status train_fp16(train_state<Backend>& s, int steps, double lr, double initial_scale,
                           bool scaled) {
    const auto n = static_cast<std::size_t>(train_rows);
    const auto d = static_cast<std::size_t>(train_cols);
    const std::vector<float> h_zero_d(d, 0.f);
    const std::vector<std::uint32_t> h_zero_n(n, 0u);
    for (auto* buf : {&s.w, &s.m, &s.v})
        PITFALL_TRY(Backend::copy_to_device(*buf, h_zero_d.data(), d));
    PITFALL_TRY(Backend::copy_to_device(s.flushed, h_zero_n.data(), n));
    PITFALL_TRY(Backend::copy_to_device(s.subnormal, h_zero_n.data(), n));
    s.skipped_steps = 0;

    double scale = scaled ? initial_scale : 1.0;
    int t = 0; // Adam steps taken
    std::vector<float> h_grad(d);
    for (int step = 0; step < steps; ++step) {
        // z = X w: X is row-major N x d, i.e. column-major d x N (lda = d), used transposed.
        PITFALL_TRY(Backend::gemm(pitfall::transpose::yes, pitfall::transpose::no, train_rows, 1,
                                  train_cols, 1.f, s.x.data(), train_cols, s.w.data(), train_cols,
                                  0.f, s.z.data(), train_rows));
        const auto factor = static_cast<float>(upstream_factor * scale / train_rows);
        const auto inv_scale = static_cast<float>(1.0 / scale);
        PITFALL_TRY(Backend::for_each(n, logistic_backward{s.z.data(), s.y.data(), factor,
                                                           inv_scale, s.grad_z.data(),
                                                           s.flushed.data(), s.subnormal.data()}));
        // grad = X^T dz (d x 1).
        PITFALL_TRY(Backend::gemm(pitfall::transpose::no, pitfall::transpose::no, train_cols, 1,
                                  train_rows, 1.f, s.x.data(), train_cols, s.grad_z.data(),
                                  train_rows, 0.f, s.grad.data(), train_cols));
        if (scaled) {
            // GradScaler's rule: any inf/NaN in the unscaled gradient skips the step, halves S.
            PITFALL_TRY(Backend::copy_to_host(h_grad.data(), s.grad, d));
            bool finite = true;
            for (const float g : h_grad)
                finite = finite && std::isfinite(g);
            if (!finite) {
                ++s.skipped_steps;
                scale /= 2.0;
                continue;
            }
        }
        ++t;
        const auto c1 = static_cast<float>(1.0 - std::pow(adam_beta1, t));
        const auto c2 = static_cast<float>(1.0 - std::pow(adam_beta2, t));
        PITFALL_TRY(Backend::for_each(
            d, adam_update{s.w.data(), s.m.data(), s.v.data(), s.grad.data(),
                           static_cast<float>(lr), static_cast<float>(adam_beta1),
                           static_cast<float>(adam_beta2), static_cast<float>(adam_eps), c1, c2}));
    }
    s.final_scale = scale;
    return pitfall::status::ok();
}

template <class Backend> pitfall::status run_training(pitfall::context& ctx, bool scaled) {
    PITFALL_ASSIGN_OR_RETURN(const long long steps, ctx.param_int("train_steps"));
    PITFALL_ASSIGN_OR_RETURN(const double lr, ctx.param_double("learning_rate"));
    PITFALL_ASSIGN_OR_RETURN(const double loss_scale, ctx.param_double("loss_scale"));
    const train_data data = make_train_data();
    const int n_steps = static_cast<int>(steps);

    // Each timing sample is one whole training run from w = 0; the last one is judged.
    PITFALL_ASSIGN_OR_RETURN(auto state, make_train_state<Backend>(data));
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
                                 return train_fp16<Backend>(state, n_steps, lr, loss_scale, scaled);
                             }));
    ctx.record_samples("train_seconds", seconds, "s");
    PITFALL_TRY(Backend::synchronize());
    PITFALL_ASSIGN_OR_RETURN(const auto h_w, (to_host<Backend>(state.w)));
    PITFALL_ASSIGN_OR_RETURN(const auto h_flushed, (to_host<Backend>(state.flushed)));
    PITFALL_ASSIGN_OR_RETURN(const auto h_subnormal, (to_host<Backend>(state.subnormal)));
    long long flushed = 0, subnormal = 0;
    for (std::size_t i = 0; i < h_flushed.size(); ++i) {
        flushed += h_flushed[i];
        subnormal += h_subnormal[i];
    }

    const std::vector<double> w_ref = reference_training(data, n_steps, lr);
    const double ref_loss = mean_loss(data, w_ref);
    const std::vector<double> w(h_w.begin(), h_w.end());
    const double final_loss = mean_loss(data, w);
    double update_norm = 0.0;
    for (const double wj : w)
        update_norm += wj * wj;
    update_norm = std::sqrt(update_norm);
    const long long gradient_values = static_cast<long long>(train_rows) * steps;

    ctx.record("final_loss", final_loss);
    ctx.record("reference_final_loss", ref_loss);
    ctx.record("initial_loss", ln2);
    ctx.record("weight_update_norm", update_norm);
    ctx.record("gradient_values", static_cast<double>(gradient_values));
    ctx.record("fp16_flushed_gradients", static_cast<double>(flushed));
    ctx.record("fp16_subnormal_gradients", static_cast<double>(subnormal));
    ctx.record("fp16_flushed_fraction",
               static_cast<double>(flushed) / static_cast<double>(gradient_values));
    ctx.record("dz_magnitude_at_start", upstream_factor * 0.5 / train_rows);
    ctx.record("loss_scale", scaled ? loss_scale : 1.0);
    ctx.record("final_loss_scale", state.final_scale);
    ctx.record("skipped_steps", state.skipped_steps);

    // The reference itself must learn, or the stall below would prove nothing.
    ctx.check("float64 reference trains", ref_loss < ln2 - 0.1,
              "reference loss " + num(ref_loss) + " vs ln 2 = " + num(ln2));
    if (!scaled) {
        check_equal(ctx, "every fp16 gradient flushed", static_cast<double>(flushed),
                    static_cast<double>(gradient_values),
                    "N * steps: 1.22e-8 < 2^-25 at w = 0, and w never moves");
        check_equal(ctx, "weights never move", update_norm, 0.0, "the gradient is exactly 0");
        ctx.check("loss stays ln 2", std::fabs(final_loss - ln2) < 1e-12,
                  "final loss " + num(final_loss) + ", ln 2 = " + num(ln2));
    } else {
        check_equal(ctx, "no step skipped", state.skipped_steps, 0,
                    "|S dz| <= 2^16 * 1e-4 / 4096 = 1.6e-3 < 65504");
        ctx.check("scaled run matches the float64 reference",
                  std::fabs(final_loss - ref_loss) <= 0.01 * ref_loss,
                  "final loss " + num(final_loss) + ", reference " + num(ref_loss) +
                      " (tolerance 1%)");
    }
    return pitfall::status::ok();
}

} // namespace dtype_casting

namespace {

// The variants of scenario.json; the shared runs above take the variant's choice as a flag.
template <class Backend> pitfall::status reproduce_narrowing(pitfall::context& ctx) {
    return dtype_casting::run_narrowing<Backend>(ctx);
}
template <class Backend> pitfall::status reproduce_index_and_labels(pitfall::context& ctx) {
    return dtype_casting::run_index_and_labels<Backend>(ctx, false);
}
template <class Backend> pitfall::status remedy_wider_types(pitfall::context& ctx) {
    return dtype_casting::run_index_and_labels<Backend>(ctx, true);
}
template <class Backend>
pitfall::status reproduce_fp16_training_no_loss_scaling(pitfall::context& ctx) {
    return dtype_casting::run_training<Backend>(ctx, false);
}
template <class Backend> pitfall::status remedy_loss_scaling(pitfall::context& ctx) {
    return dtype_casting::run_training<Backend>(ctx, true);
}

} // namespace

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_narrowing), PITFALL_VARIANT(reproduce_index_and_labels),
                 PITFALL_VARIANT(remedy_wider_types),
                 PITFALL_VARIANT(reproduce_fp16_training_no_loss_scaling),
                 PITFALL_VARIANT(remedy_loss_scaling))
