// soft_float.hpp: float32 -> fp16 / bf16 written here, twice, without CUDA's headers.
//
// 1. Bit-level round-to-nearest-even (`soft_fp16_bits`, `soft_bf16_bits`): what the CPU
//    backend's kernels use in place of __float2half_rn / __float2bfloat16_rn. Written from the
//    IEEE 754 binary16 layout (1 sign, 5 exponent bits biased 15, 10 mantissa bits) and the
//    bfloat16 layout (the upper half of a float32: 1, 8 biased 127, 7), not from cuda_fp16.hpp.
//    PITFALL_HOST_DEVICE: the same code compiles for a kernel, so a GPU run could use it too.
// 2. An arithmetic reference (`reference_bits`), host only: the value is split with frexp,
//    divided by its quantum (a power of two, so exactly), rounded with std::nearbyint (ties to
//    even in the default rounding mode) and re-encoded. It shares no code and no bit tricks
//    with (1), so it can judge both (1) and the GPU's conversion instructions.
//
// NaN: the bit-level converter keeps the sign and the top payload bits and sets the quiet bit
// (as x86 F16C and Arm do); CUDA answers a canonical 0x7FFF. Payloads are not part of the
// contract, so results are compared as "same bits, or both NaN" (`same_encoding`).
#pragma once

#include "pitfall/backend.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dtype_casting {

// ---- bits of a float (memcpy: the one well-defined type pun, also in device code) ----------
PITFALL_HOST_DEVICE inline std::uint32_t bits_of(float x) {
    std::uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
PITFALL_HOST_DEVICE inline float float_of(std::uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// ---- float32 -> fp16, bit level --------------------------------------------------------------
// Thresholds on |x|'s float32 bits:
//   0x7F800000 +inf;  0x477FF000 = 65520.0f, the midpoint between fp16's max 65504 and 65536:
//   at and above it round-to-nearest-even gives 65536, which does not exist -> inf;
//   0x38800000 = 2^-14, fp16's smallest normal; 0x33000000 = 2^-25, half the smallest
//   subnormal 2^-24: at or below it the result is zero (2^-25 itself ties to the even 0).
PITFALL_HOST_DEVICE inline std::uint16_t soft_fp16_bits(float x) {
    const std::uint32_t u = bits_of(x);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) // NaN: quiet, top 9 payload bits kept
        return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x01FFu));
    if (a >= 0x477FF000u) // >= 65520 (and inf): overflow to inf
        return static_cast<std::uint16_t>(sign | 0x7C00u);
    if (a >= 0x38800000u) {
        // Normal: drop 13 mantissa bits with round-to-nearest-even (add 0xFFF plus the lowest
        // kept bit; a carry runs into the exponent, which is the right answer), then re-bias
        // the exponent from 127 to 15 (subtract 112 << 10).
        const std::uint32_t rounded = (a + 0x0FFFu + ((a >> 13) & 1u)) >> 13;
        return static_cast<std::uint16_t>(sign | (rounded - (112u << 10)));
    }
    if (a <= 0x33000000u) // <= 2^-25: zero, sign kept
        return static_cast<std::uint16_t>(sign);
    // Subnormal: the result counts units of 2^-24. With the hidden bit, x = m * 2^(e - 150),
    // i.e. m * 2^(e - 126) units: shift m right by 126 - e (14..24) and round to even.
    const std::uint32_t e = a >> 23;
    const std::uint32_t m = (a & 0x007FFFFFu) | 0x00800000u;
    const std::uint32_t shift = 126u - e;
    const std::uint32_t rest = m & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    std::uint32_t q = m >> shift;
    if (rest > half || (rest == half && (q & 1u) != 0u))
        ++q; // may reach 0x400 = 2^-14, which is also its correct encoding
    return static_cast<std::uint16_t>(sign | q);
}

// fp16 -> float32 is exact (every fp16 value is a float32).
PITFALL_HOST_DEVICE inline float soft_fp16_to_float(std::uint16_t h) {
    const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
    const std::uint32_t e = (h >> 10) & 0x1Fu;
    const std::uint32_t m = h & 0x03FFu;
    if (e == 0x1Fu) // inf / NaN
        return float_of(sign | 0x7F800000u | (m << 13));
    if (e != 0u) // normal: re-bias 15 -> 127
        return float_of(sign | ((e + 112u) << 23) | (m << 13));
    // zero / subnormal: m units of 2^-24, exact in float (5.9604644775390625e-08f = 2^-24)
    const float magnitude = static_cast<float>(m) * 5.9604644775390625e-08f;
    return sign != 0u ? -magnitude : magnitude;
}

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
