// soft_float.hpp: float32 -> bf16 without CUDA's headers, and a reference that judges both 16-bit
// formats.
//
// 1. Bit-level round-to-nearest-even: fp16 is the SDK's (pitfall/numeric/fp16.hpp,
//    `soft_float_to_fp16`); bf16 (`soft_bf16_bits`) is written here, from the bfloat16 layout
//    (the upper half of a float32: 1 sign bit, 8 exponent bits biased 127, 7 mantissa bits).
//    What the CPU backend's kernels use in place of __float2half_rn / __float2bfloat16_rn.
//    PITFALL_HOST_DEVICE: the same code compiles for a kernel, so a GPU run could use it too.
// 2. An arithmetic reference (`reference_bits`), host only: the value is split with frexp,
//    divided by its quantum (a power of two, so exactly), rounded with std::nearbyint (ties to
//    even in the default rounding mode) and re-encoded. It shares no code and no bit tricks
//    with (1), so it can judge both (1) and the GPU's conversion instructions.
//
// NaN: the bit-level converters keep the sign and the top payload bits and set the quiet bit
// (as x86 F16C and Arm do); CUDA answers a canonical 0x7FFF. Payloads are not part of the
// contract, so results are compared as "same bits, or both NaN" (`same_encoding`).
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/numeric/fp16.hpp"

#include <cmath>
#include <cstdint>

namespace dtype_casting {

// The bits of a float and back, and the fp16 converter, are the SDK's (pitfall/numeric/fp16.hpp).
using pitfall::numeric::bits_of;
using pitfall::numeric::float_of;
using pitfall::numeric::soft_float_to_fp16;
using pitfall::numeric::soft_fp16_to_float;

// ---- float32 -> bf16, bit level --------------------------------------------------------------
// bf16 is the upper 16 bits of a float32: round the lower 16 to nearest even. Adding
// 0x7FFF + (lowest kept bit) carries exactly when the lower half is above 0x8000, or equal to
// it with an odd kept half; a carry out of the mantissa bumps the exponent (FLT_MAX -> inf).
PITFALL_HOST_DEVICE inline std::uint16_t soft_bf16_bits(float x) {
    const std::uint32_t u = bits_of(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) // NaN: quiet, sign and top payload kept
        return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
PITFALL_HOST_DEVICE inline float soft_bf16_to_float(std::uint16_t b) {
    return float_of(static_cast<std::uint32_t>(b) << 16);
}

// ---- classification of a 16-bit encoding -----------------------------------------------------
enum class fp_class { zero, subnormal, normal, inf, nan };

/// fp16: 5 exponent bits, 10 mantissa bits; bf16: 8 and 7.
struct format16 {
    const char* name;
    int exponent_bits;
    int mantissa_bits;
};
inline constexpr format16 fp16_format{"fp16", 5, 10};
inline constexpr format16 bf16_format{"bf16", 8, 7};

inline fp_class classify(std::uint16_t bits, const format16& f) {
    const unsigned e_all = (1u << f.exponent_bits) - 1u;
    const unsigned e = (bits >> f.mantissa_bits) & e_all;
    const unsigned m = bits & ((1u << f.mantissa_bits) - 1u);
    if (e == e_all)
        return m == 0u ? fp_class::inf : fp_class::nan;
    if (e == 0u)
        return m == 0u ? fp_class::zero : fp_class::subnormal;
    return fp_class::normal;
}

/// "Same bits, or both NaN" (NaN payloads differ between converters and are no contract).
inline bool same_encoding(std::uint16_t a, std::uint16_t b, const format16& f) {
    return a == b || (classify(a, f) == fp_class::nan && classify(b, f) == fp_class::nan);
}

// ---- the arithmetic reference (host only) ----------------------------------------------------
// p significant bits (with the hidden one), exponents emin..emax, bias -emin + 1. The largest
// finite value is (2 - 2^(1-p)) * 2^emax; the midpoint to the next (non-existent) step is
// 2^(emax+1) - 2^(emax-p), and from it on nearest-even rounds to infinity:
//   fp16 (p 11, emax 15): 65536 - 16 = 65520;  bf16 (p 8, emax 127): 2^128 - 2^119.
inline std::uint16_t reference_bits(float x, const format16& f) {
    const int p = f.mantissa_bits + 1;
    const int emax = (1 << (f.exponent_bits - 1)) - 1;
    const int emin = 1 - emax;
    const auto exponent_field = [&](int e) { return static_cast<unsigned>(e + emax); };
    const unsigned inf_bits = ((1u << f.exponent_bits) - 1u) << f.mantissa_bits;
    if (std::isnan(x))
        return static_cast<std::uint16_t>(inf_bits | (1u << (f.mantissa_bits - 1)));
    const unsigned sign = std::signbit(x) ? 0x8000u : 0u;
    const double a = std::fabs(static_cast<double>(x));
    const double overflow_from = std::ldexp(1.0, emax + 1) - std::ldexp(1.0, emax - p);
    if (a >= overflow_from) // includes inf
        return static_cast<std::uint16_t>(sign | inf_bits);
    if (a == 0.0)
        return static_cast<std::uint16_t>(sign);
    int e2 = 0;
    (void)std::frexp(a, &e2);              // a = m * 2^e2 with m in [0.5, 1): a in [2^(e2-1), 2^e2)
    int e = e2 - 1 < emin ? emin : e2 - 1; // below emin the quantum stops shrinking
    const double quantum = std::ldexp(1.0, e - (p - 1));
    double r = std::nearbyint(a / quantum); // a / quantum is exact: a power-of-two scale
    const double hidden = std::ldexp(1.0, p - 1);
    if (r == 0.0)
        return static_cast<std::uint16_t>(sign);
    if (e == emin && r < hidden) // subnormal: r units of the smallest quantum
        return static_cast<std::uint16_t>(sign | static_cast<unsigned>(r));
    if (r == 2.0 * hidden) { // rounded up into the next binade
        r = hidden;
        ++e;
    }
    return static_cast<std::uint16_t>(sign | (exponent_field(e) << f.mantissa_bits) |
                                      static_cast<unsigned>(r - hidden));
}

/// The value of a 16-bit encoding, in double, decoded arithmetically (host only).
inline double reference_value(std::uint16_t bits, const format16& f) {
    const int emax = (1 << (f.exponent_bits - 1)) - 1;
    const unsigned e_all = (1u << f.exponent_bits) - 1u;
    const unsigned e = (bits >> f.mantissa_bits) & e_all;
    const unsigned m = bits & ((1u << f.mantissa_bits) - 1u);
    const double sign = (bits & 0x8000u) != 0u ? -1.0 : 1.0;
    if (e == e_all)
        return m == 0u ? sign * HUGE_VAL : std::nan("");
    const double frac = static_cast<double>(m) / std::ldexp(1.0, f.mantissa_bits);
    if (e == 0u)
        return sign * std::ldexp(frac, 1 - emax);
    return sign * std::ldexp(1.0 + frac, static_cast<int>(e) - emax);
}

} // namespace dtype_casting
