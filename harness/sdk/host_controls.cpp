// The host calibration controls (pitfall/controls.hpp): in the SDK, which links OpenBLAS.
#include "pitfall/controls.hpp"

#include <cblas.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace pitfall::controls {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Kept out of the optimiser's reach: a control whose result is unused would be removed.
volatile double control_sink = 0;

// Each control's unit of work is short (tens of microseconds): the SDK repeats it until a
// control sample lasts as long as a sample of the series it stands beside.
double scalar_chain() {
    const auto start = std::chrono::steady_clock::now();
    double x = 1.0;
    std::uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < (1 << 14); ++i) {
        x = x * 1.0000001 + 1e-9; // each step waits for the last: latency, not throughput
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
    }
    control_sink = x + static_cast<double>(s & 1U);
    return seconds_since(start);
}

// 1 MiB at a time through a 64 MiB ring: the next call reads the next MiB, so no run finds its
// data in a cache of less than 64 MiB.
double stream_sum() {
    constexpr std::size_t ring = std::size_t{8} << 20;    // doubles: 64 MiB, touched once
    constexpr std::size_t chunk = std::size_t{128} << 10; // doubles: 1 MiB
    static std::vector<double> data(ring, 1.0);
    static std::size_t next = 0;
    const auto start = std::chrono::steady_clock::now();
    double a = 0;
    double b = 0;
    double c = 0;
    double d = 0;
    const double* p = data.data() + next;
    for (std::size_t i = 0; i < chunk; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    next = (next + chunk) % ring;
    control_sink = a + b + c + d;
    return seconds_since(start);
}

double blas_gemm() {
    constexpr int n = 128;
    static std::vector<float> a(std::size_t{n} * n, 0.5F);
    static std::vector<float> b(std::size_t{n} * n, 0.25F);
    static std::vector<float> c(std::size_t{n} * n, 0.0F);
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0F, a.data(), n, b.data(), n,
                0.0F, c.data(), n);
    control_sink = c[0];
    return seconds_since(start);
}

} // namespace

status_or<double> run_host(const std::string& name) {
    if (name == "host_scalar")
        return scalar_chain();
    if (name == "host_stream")
        return stream_sum();
    if (name == "host_blas")
        return blas_gemm();
    return status::error(pitfall_error::bad_parameter, "no host control named '" + name + "'",
                         stage::init);
}

} // namespace pitfall::controls
