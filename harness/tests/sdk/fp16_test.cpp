// pitfall/numeric/fp16.hpp on the host: the software converter against values derived by hand
// from the binary16 layout, and fp16 -> float32 -> fp16 the identity on every non-NaN pattern.
#include "pitfall/numeric/fp16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace {
using namespace pitfall::numeric;

TEST(Fp16, RoundsToNearestEvenAtTheEdges) {
    EXPECT_EQ(float_to_fp16(0.f), 0x0000u);
    EXPECT_EQ(float_to_fp16(-0.f), 0x8000u);
    EXPECT_EQ(float_to_fp16(1.f), 0x3C00u);
    EXPECT_EQ(float_to_fp16(65504.f), 0x7BFFu);  // the largest finite fp16
    EXPECT_EQ(float_to_fp16(65519.f), 0x7BFFu);  // below the midpoint to 65536
    EXPECT_EQ(float_to_fp16(65520.f), 0x7C00u);  // the midpoint rounds to even: inf
    EXPECT_EQ(float_to_fp16(-1e9f), 0xFC00u);    // far out of range: -inf
    EXPECT_EQ(float_to_fp16(2049.f), 0x6800u);   // 2048 and 2050 tie: the even 2048
    EXPECT_EQ(float_to_fp16(2051.f), 0x6802u);   // 2050 and 2052 tie: the even 2052
    EXPECT_EQ(float_to_fp16(0x1p-24f), 0x0001u); // the smallest subnormal
    EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000u); // half of it ties to the even 0
    EXPECT_EQ(float_to_fp16(0x1.8p-25f), 0x0001u);
    EXPECT_EQ(float_to_fp16(0x1p-14f), 0x0400u); // the smallest normal
    EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00u);
    const fp16_bits nan = float_to_fp16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(nan & 0x7C00u, 0x7C00u);
    EXPECT_NE(nan & 0x03FFu, 0u);
}

TEST(Fp16, WidensExactlyAndRoundTripsEveryValue) {
    EXPECT_EQ(fp16_to_float(0x3C00u), 1.f);
    EXPECT_EQ(fp16_to_float(0x7BFFu), 65504.f);
    EXPECT_EQ(fp16_to_float(0x0001u), 0x1p-24f);
    EXPECT_TRUE(std::isinf(fp16_to_float(0xFC00u)) && fp16_to_float(0xFC00u) < 0.f);
    EXPECT_TRUE(std::signbit(fp16_to_float(0x8000u)));
    unsigned mismatches = 0;
    for (std::uint32_t h = 0; h <= 0xFFFFu; ++h) {
        const auto bits = static_cast<fp16_bits>(h);
        const float x = fp16_to_float(bits);
        if (std::isnan(x))
            continue;
        mismatches += float_to_fp16(x) != bits ? 1u : 0u;
    }
    EXPECT_EQ(mismatches, 0u);
}

TEST(Fp16, FloatBitsRoundTrip) {
    EXPECT_EQ(bits_of(1.f), 0x3F800000u);
    EXPECT_EQ(float_of(0x3F800000u), 1.f);
}

} // namespace
