// pitfall/random.hpp: the one random generator of the scenarios and the reference code.
//
// splitmix64 is tiny, fast, and its output is defined bit for bit on every platform, unlike the
// distributions of <random>: a data set made from a seed is the same on every machine, so the
// CPU and GPU runs of a case, and a float64 reference, start from identical inputs.
//
//   pitfall::splitmix64 rng(2025);
//   const double w = rng.uniform(-0.5, 0.5);   // 53 random bits
//   const float u = rng.unit_float();          // [0, 1), 24 random bits: exact in float
//   const auto c = rng.next() % 10;            // raw 64 bits
#pragma once

#include <cstdint>

namespace pitfall {

class splitmix64 {
public:
    explicit splitmix64(std::uint64_t seed) : m_state(seed) {}

    /// The next 64 random bits.
    std::uint64_t next() {
        std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    /// Uniform in [lo, hi) with 53 random bits.
    double uniform(double lo, double hi) {
        return lo + (hi - lo) * (static_cast<double>(next() >> 11) * 0x1.0p-53);
    }
    /// Uniform in [0, 1) with 24 random bits: every value exact in float.
    float unit_float() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

private:
    std::uint64_t m_state;
};

} // namespace pitfall
