// pitfall/numeric/fp16.hpp: float32 <-> fp16 (IEEE 754 binary16) the same way on both backends.
//
// Buffers carry fp16 as its 16-bit pattern (std::uint16_t), so host code and the CPU-only build
// never need a CUDA type. In device code (nvcc's device pass) float_to_fp16 / fp16_to_float are
// CUDA's conversion instructions (__float2half_rn, cvt.rn.f16.f32); everywhere else they are
// the software converter below, which gives the same bits for every input but NaN:
//
//   struct store_fp16 { const float* x; std::uint16_t* h;
//       PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
//           h[i] = pitfall::numeric::float_to_fp16(x[i]); } };
//
// The software converter is bit-level round-to-nearest-even, written from the binary16 layout
// (1 sign bit, 5 exponent bits biased 15, 10 mantissa bits), not from cuda_fp16.hpp. NaN keeps
// its sign and top payload bits and gets the quiet bit (as x86 F16C and Arm do); CUDA answers a
// canonical 0x7FFF. Payloads are no contract: compare converted NaNs as "both NaN".
#pragma once

#include "pitfall/backend.hpp" // PITFALL_HOST_DEVICE

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace pitfall::numeric {

/// An fp16 value as its bits.
using fp16_bits = std::uint16_t;

/// The bits of a float and back (memcpy: the one well-defined type pun, in device code too).
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

/// float32 -> fp16 in software, round to nearest even. Thresholds on |x|'s float32 bits:
///   0x7F800000 +inf; 0x477FF000 = 65520.0f, the midpoint between fp16's max 65504 and 65536:
///   at and above it round-to-nearest-even gives 65536, which does not exist -> inf;
///   0x38800000 = 2^-14, fp16's smallest normal; 0x33000000 = 2^-25, half the smallest
///   subnormal 2^-24: at or below it the result is zero (2^-25 itself ties to the even 0).
PITFALL_HOST_DEVICE inline fp16_bits soft_float_to_fp16(float x) {
    const std::uint32_t u = bits_of(x);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) // NaN: quiet, top 9 payload bits kept
        return static_cast<fp16_bits>(sign | 0x7E00u | ((a >> 13) & 0x01FFu));
    if (a >= 0x477FF000u) // >= 65520 (and inf): overflow to inf
        return static_cast<fp16_bits>(sign | 0x7C00u);
    if (a >= 0x38800000u) {
        // Normal: drop 13 mantissa bits with round-to-nearest-even (add 0xFFF plus the lowest
        // kept bit; a carry runs into the exponent, which is the right answer), then re-bias
        // the exponent from 127 to 15 (subtract 112 << 10).
        const std::uint32_t rounded = (a + 0x0FFFu + ((a >> 13) & 1u)) >> 13;
        return static_cast<fp16_bits>(sign | (rounded - (112u << 10)));
    }
    if (a <= 0x33000000u) // <= 2^-25: zero, sign kept
        return static_cast<fp16_bits>(sign);
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
    return static_cast<fp16_bits>(sign | q);
}

/// fp16 -> float32 in software: exact (every fp16 value is a float32).
PITFALL_HOST_DEVICE inline float soft_fp16_to_float(fp16_bits h) {
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

/// float32 -> fp16 as each backend's kernels convert: __float2half_rn in device code, the
/// software converter on the host.
PITFALL_HOST_DEVICE inline fp16_bits float_to_fp16(float x) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(x));
#else
    return soft_float_to_fp16(x);
#endif
}

/// fp16 -> float32 (exact) as each backend's kernels convert: __half2float in device code, the
/// software converter on the host.
PITFALL_HOST_DEVICE inline float fp16_to_float(fp16_bits h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return soft_fp16_to_float(h);
#endif
}

} // namespace pitfall::numeric
