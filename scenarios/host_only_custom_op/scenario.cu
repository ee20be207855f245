// host_only_custom_op: a custom layer whose op exists only on the host, fed device data.
//
// What
//   The seed's Keras model puts a custom layer in front of Dense(10, relu), and the layer's
//   call() is np.square(inputs): a host-only function (numpy never runs on a GPU). Here the
//   op is `host_square` (a plain C++ host function, numpy's stand-in) and the model is
//       y = relu(square(x) W + b),   x: rows x 100, W: 100 x 10   (the seed's shapes)
//   with the dense layer as Backend::gemm (OpenBLAS / cuBLAS SGEMM) plus a bias+relu functor,
//   so a missing or wrong op shows in the layer's output. Four variants:
//     reproduce_host_fn_device_data  the host op handed the backend's buffer as is.
//     reproduce_kernel_host_data     the opposite mistake: the device op (a kernel) handed the
//                                    pageable host array (the numpy buffer) as is.
//     fallback_copy_to_host          what a framework does for an op without a GPU kernel:
//                                    copy to the host, run the host op, copy back.
//     remedy_device_op               the op written once as a PITFALL_HOST_DEVICE functor: a
//                                    host loop on the CPU, a kernel on the GPU.
//   And a compile-time variant, host_call_from_kernel.cu (a __host__ function called from a
//   __global__ one), which must not compile: CTest pitfall.compile.host_only_custom_op.*.
//
// Why it fails
//   CPU and GPU have separate memories. cudaMalloc returns an address in the GPU's part of the
//   unified virtual address space: valid for kernels and cudaMemcpy, but not mapped for the
//   CPU, so the host op's first load from it is a page fault the kernel turns into SIGSEGV,
//   and the process dies with no error value to catch. The other way round, a kernel that
//   reads a malloc/new/numpy buffer reads a host virtual address the GPU's page tables do not
//   map: the access faults on the device, the launch itself "succeeds", and the fault surfaces
//   at the next synchronising call as cudaErrorIllegalAddress, a STICKY error: every later
//   CUDA call in the process fails with it (docs/cuda-rules.md#sticky-errors). The exception is a
//   system where the GPU can reach pageable memory: HMM (PCIe GPUs, Turing or newer, CUDA 12.2
//   or newer with the open kernel modules and a Linux kernel with HMM, 6.1.24 or later) or ATS
//   (Grace Hopper's NVLink-C2C). cudaDevAttrPageableMemoryAccess says which, and the case
//   records it. On the CPU backend none of this exists: "device" memory is host memory, so
//   the same code works, and the seed's "works on CPU, fails on GPU" is exactly that.
//
// Expected per backend
//   cpu   every variant ok; square(x) bit-exact against an independent reference, the dense
//         output within 1e-5 (scaled) of a float64 reference. The "device" buffers are host
//         memory: no case dereferences a device pointer, so the CPU build stays clean under
//         AddressSanitizer (the deliberate faults below only fault on the CUDA backend).
//   cuda  reproduce_host_fn_device_data  the process dies with SIGSEGV inside host_square
//                                        (no result file; the harness records the signal and
//                                        the GPU baselines expect it). Under AddressSanitizer
//                                        it would be ASan's SEGV report and exit 1 instead.
//         reproduce_kernel_host_data     pageable_memory_access = 0: cudaErrorIllegalAddress,
//                                        sticky, at the synchronize after the launch (rarely
//                                        already at the launch check), and a later cudaMalloc
//                                        fails with it too (event after_fault_cuda_malloc).
//                                        pageable_memory_access = 1 (HMM/ATS): ok, the kernel
//                                        reads the host array and the checks pass. Which one a
//                                        GPU host gives depends on its kernel and driver setup,
//                                        not on the GPU model: the measurement tells.
//         fallback_copy_to_host          ok; 3.3 MB each way over PCIe (~0.1-0.5 ms per
//                                        direction from pageable memory) plus the host loop:
//                                        far slower than the kernel (the GPU profiles bound
//                                        fallback_over_device_op_layer_time at >= 2).
//         remedy_device_op               ok; one kernel of a few microseconds.
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init, before any of it.
//
// Remedy
//   Give the op a device implementation: mark it __host__ __device__ (PITFALL_HOST_DEVICE) and
//   run it through the backend (tf.square instead of np.square in the seed's fix). Where that
//   is impossible (a host-only library), copy explicitly: device -> host, host op, host ->
//   device, and pay the transfer cost, measured here. Never hand one side's pointer to the
//   other; cudaPointerGetAttributes tells which side a pointer belongs to.
//
// Seed
//   000 ex.3 (a Keras custom layer calling np.square "might function on CPU but fail on GPU";
//   the fix: tf.square). Field report of the same crash: code-saturne/code_saturne#164 (a CPU
//   convergence check dereferencing device-only buffers: SIGSEGV, CUDA 13.1, sm_75).
// Baselines per backend and profile (generated by ci/catalog.py from expected/; do not edit):
//   cpu   host: observed on AMD EPYC: 2 reproduced on the CPU, 2 remedies
//   cuda  no-gpu: observed without a GPU: 2 UNSUPPORTED, 2 remedies
//   cuda  hopper-cuda13: observed on NVIDIA H200: 2 reproduced on the GPU, 2 remedies
//   cuda  hopper-cuda11-12: documented, never observed: 2 predicted, 2 remedies
//   cuda  ada-ampere-cuda12: documented, never observed: 2 predicted, 2 remedies
//   cuda  pageable-memory-access: documented, never observed: 1 predicted
// (end of the generated baselines)
#include "pitfall/random.hpp"
#include "pitfall/scenario.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace host_only_custom_op {

// =============================================================================================
// The op, twice: as a host library ships it, and as the remedy writes it.
// =============================================================================================

/// The custom op as a host library provides it (numpy's np.square): a plain function. Under
/// nvcc a function without an execution-space annotation is __host__ only: a kernel cannot
/// call it (host_call_from_kernel.cu), and any pointer handed to it is dereferenced by the CPU.
void host_square(const float* in, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        out[i] = in[i] * in[i];
}

/// The remedy: the same op as a PITFALL_HOST_DEVICE functor, run by Backend::for_each (a host
/// loop on the CPU, a grid-stride kernel on the GPU). One definition, shared by both paths.
struct square_op {
    const float* in;
    float* out;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { out[i] = in[i] * in[i]; }
};

/// The dense layer's epilogue: y = relu(y + b), with y row-major rows x units.
struct bias_relu {
    float* y;
    const float* b;
    std::size_t units;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const float v = y[i] + b[i % units];
        y[i] = v > 0.f ? v : 0.f;
    }
};

// =============================================================================================
// The deliberate faults. Each is one clearly named function, called by one variant, and
// harmless on the CPU backend (whose "device" memory is host memory).
// =============================================================================================
namespace fault {

/// DELIBERATE FAULT (reproduce_host_fn_device_data): hands the backend's own buffers to the
/// host-only op. On the CPU backend they are host memory and this is simply the CPU path. On
/// the CUDA backend they are cudaMalloc addresses that the CPU cannot load from: the first
/// read in host_square raises SIGSEGV and the process ends here, by design. Nothing after the
/// call runs, so what the result would have said goes to stderr first (the harness keeps it).
template <class Backend>
void host_op_on_backend_buffers(const pitfall::buffer<float, Backend>& d_in,
                                pitfall::buffer<float, Backend>& d_out) {
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        cudaPointerAttributes attributes{};
        const cudaError_t err = cudaPointerGetAttributes(&attributes, d_in.data());
        std::fprintf(
            stderr,
            "host_only_custom_op: calling the host-only op on %p (cudaPointerGetAttributes:"
            " %s, type %d = %s); a SIGSEGV is the expected outcome on a GPU\n",
            static_cast<const void*>(d_in.data()), cudaGetErrorName(err),
            static_cast<int>(attributes.type),
            attributes.type == cudaMemoryTypeDevice ? "cudaMemoryTypeDevice" : "other");
        std::fflush(stderr);
    }
#endif
    host_square(d_in.data(), d_out.data(), d_in.size());
}

/// DELIBERATE FAULT (reproduce_kernel_host_data): runs the device op with a pageable host
/// pointer as its input. On the CPU backend the "kernel" is a host loop and host memory is
/// its memory: fine. On the CUDA backend the kernel's loads hit a host virtual address: the
/// launch succeeds and the synchronize reports cudaErrorIllegalAddress (sticky), unless the
/// device can access pageable memory (HMM/ATS), in which case it simply works.
template <class Backend>
pitfall::status device_op_on_host_pointer(const float* h_in,
                                          pitfall::buffer<float, Backend>& d_out) {
    PITFALL_TRY(Backend::for_each(d_out.size(), square_op{h_in, d_out.data()}));
    return Backend::synchronize();
}

} // namespace fault

// =============================================================================================
// Parameters and inputs.
// =============================================================================================
struct config {
    std::size_t rows = 0;
    std::size_t features = 0;
    std::size_t units = 0;
    std::uint64_t seed = 0;
    std::size_t elements() const { return rows * features; }
};

// The bounds (scenario.json; the SDK enforces them) keep every BLAS dimension (rows, features,
// units) an int, and the input below 2^36 bytes.
pitfall::status_or<config> read_config(const pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long rows, ctx.param_int("rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long features, ctx.param_int("features"));
    PITFALL_ASSIGN_OR_RETURN(const long long units, ctx.param_int("units"));
    PITFALL_ASSIGN_OR_RETURN(const long long seed, ctx.param_int("seed"));
    config c;
    c.rows = static_cast<std::size_t>(rows);
    c.features = static_cast<std::size_t>(features);
    c.units = static_cast<std::size_t>(units);
    c.seed = static_cast<std::uint64_t>(seed);
    return c;
}

/// What the model is fed, in float32 as Keras holds it, made on the host.
struct layer_inputs {
    std::vector<float> x; ///< rows x features, row-major, uniform in [-1, 1)
    std::vector<float> w; ///< units x features, column-major (w[u + f * units]), Glorot uniform
    std::vector<float> b; ///< units, uniform in [-0.1, 0.1) (non-zero, so the bias is tested)
};

layer_inputs make_inputs(const config& cfg) {
    pitfall::splitmix64 gen(cfg.seed); // defined bit for bit on every platform
    layer_inputs in;
    in.x.resize(cfg.elements());
    for (float& v : in.x)
        v = static_cast<float>(gen.uniform(-1.0, 1.0));
    const double limit =
        std::sqrt(6.0 / static_cast<double>(cfg.features + cfg.units)); // Keras' glorot_uniform
    in.w.resize(cfg.units * cfg.features);
    for (float& v : in.w)
        v = static_cast<float>(gen.uniform(-limit, limit));
    in.b.resize(cfg.units);
    for (float& v : in.b)
        v = static_cast<float>(gen.uniform(-0.1, 0.1));
    return in;
}

// =============================================================================================
// The independent reference and the checks.
// =============================================================================================

// The dense output is a float32 GEMM with k = features terms. Its error against the float64
// reference is at most about k * 2^-24 of the sum of the terms' magnitudes (6e-6 for k = 100,
// worst case; typically sqrt(k) * 2^-24 ~ 6e-7), so 1e-5 of that sum passes any correct
// float32 GEMM and fails a wrong op, a missing bias, or TF32 inputs (2^-11 ~ 5e-4 each).
constexpr double dense_tolerance = 1e-5;

std::string scientific(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return text;
}

/// Judges what the layer produced (copied back to the host) against references computed here
/// from the inputs alone: square(x) bit for bit, and relu(square(x) W + b) in float64.
void check_outputs(pitfall::context& ctx, const config& cfg, const layer_inputs& in,
                   const std::vector<float>& h_squared, const std::vector<float>& h_y) {
    // 1. The op. x is a float, so x * x in double is exact (48 significant bits <= 53) and its
    // rounding to float is the correctly rounded product: what an IEEE float multiply gives on
    // the CPU and on the GPU alike (no fused operation to change it).
    std::size_t square_mismatches = 0;
    for (std::size_t i = 0; i < cfg.elements(); ++i) {
        const double x = in.x[i];
        if (h_squared[i] != static_cast<float>(x * x))
            ++square_mismatches;
    }
    ctx.record("square_mismatches", static_cast<double>(square_mismatches));
    ctx.check("square_bit_exact", square_mismatches == 0,
              std::to_string(square_mismatches) + " of " + std::to_string(cfg.elements()) +
                  " squares differ from the correctly rounded x * x");

    // 2. The layer after it, sample by sample in float64.
    double worst = 0.0;
    std::size_t active = 0;
    for (std::size_t r = 0; r < cfg.rows; ++r) {
        for (std::size_t u = 0; u < cfg.units; ++u) {
            double z = in.b[u];
            double scale = std::fabs(static_cast<double>(in.b[u]));
            for (std::size_t f = 0; f < cfg.features; ++f) {
                const double x = in.x[r * cfg.features + f];
                const double term = static_cast<double>(in.w[u + f * cfg.units]) * x * x;
                z += term;
                scale += std::fabs(term);
            }
            const double y_ref = z > 0.0 ? z : 0.0;
            active += y_ref > 0.0 ? 1 : 0;
            const double err = std::fabs(static_cast<double>(h_y[r * cfg.units + u]) - y_ref) /
                               std::max(scale, std::numeric_limits<double>::min());
            worst =
                std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
        }
    }
    ctx.record("dense_max_scaled_error_vs_fp64_reference", worst);
    ctx.record("dense_active_fraction",
               static_cast<double>(active) / static_cast<double>(cfg.rows * cfg.units));
    ctx.check("dense_matches_fp64_reference", worst <= dense_tolerance,
              "max |y - y_ref| / sum|terms| = " + scientific(worst) + " over " +
                  std::to_string(cfg.rows * cfg.units) + " outputs; tolerance " +
                  scientific(dense_tolerance));
}

// =============================================================================================
// The model around the op: the backend buffers, the dense layer, the read-back.
// =============================================================================================
template <class Backend> struct model_buffers {
    pitfall::buffer<float, Backend> x, squared, w, b, y;
};

/// Allocates the layer's buffers on the backend and uploads x, W and b.
template <class Backend>
pitfall::status_or<model_buffers<Backend>> upload(const config& cfg, const layer_inputs& in) {
    model_buffers<Backend> d;
    PITFALL_ASSIGN_OR_RETURN(d.x, Backend::template allocate<float>(cfg.elements()));
    PITFALL_ASSIGN_OR_RETURN(d.squared, Backend::template allocate<float>(cfg.elements()));
    PITFALL_ASSIGN_OR_RETURN(d.w, Backend::template allocate<float>(in.w.size()));
    PITFALL_ASSIGN_OR_RETURN(d.b, Backend::template allocate<float>(in.b.size()));
    PITFALL_ASSIGN_OR_RETURN(d.y, Backend::template allocate<float>(cfg.rows * cfg.units));
    PITFALL_TRY(Backend::copy_to_device(d.x, in.x.data(), in.x.size()));
    PITFALL_TRY(Backend::copy_to_device(d.w, in.w.data(), in.w.size()));
    PITFALL_TRY(Backend::copy_to_device(d.b, in.b.data(), in.b.size()));
    return d;
}

/// Dense(units, relu) on the squared input, then both outputs back to the host and judged.
/// Column-major GEMM: y^T (units x rows) = W (units x features) * squared^T (features x rows),
/// which is y row-major rows x units.
template <class Backend>
pitfall::status dense_and_check(pitfall::context& ctx, const config& cfg, const layer_inputs& in,
                                model_buffers<Backend>& d) {
    const int m = static_cast<int>(cfg.units);
    const int n = static_cast<int>(cfg.rows);
    const int k = static_cast<int>(cfg.features);
    PITFALL_TRY(Backend::gemm(pitfall::transpose::no, pitfall::transpose::no, m, n, k, 1.0f,
                              d.w.data(), m, d.squared.data(), k, 0.0f, d.y.data(), m));
    PITFALL_TRY(Backend::for_each(d.y.size(), bias_relu{d.y.data(), d.b.data(), cfg.units}));
    PITFALL_TRY(Backend::synchronize());
    std::vector<float> h_squared(cfg.elements()), h_y(cfg.rows * cfg.units);
    PITFALL_TRY(Backend::copy_to_host(h_squared.data(), d.squared, h_squared.size()));
    PITFALL_TRY(Backend::copy_to_host(h_y.data(), d.y, h_y.size()));
    check_outputs(ctx, cfg, in, h_squared, h_y);
    return pitfall::status::ok();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// =============================================================================================
// The variants.
// =============================================================================================

/// reproduce_host_fn_device_data: the host op called on the backend's buffers as they are.
template <class Backend>
pitfall::status host_fn_device_data(pitfall::context& ctx, const config& cfg,
                                    const layer_inputs& in) {
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    // The fault, once, untimed: on the GPU the process ends inside this call (SIGSEGV).
    fault::host_op_on_backend_buffers(d.x, d.squared);
    // Only the CPU backend gets here. What it costs there, for comparison with the remedies.
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
                                 fault::host_op_on_backend_buffers(d.x, d.squared);
                                 return pitfall::status::ok();
                             }));
    ctx.record_samples("layer_seconds", seconds, "s");
    return dense_and_check(ctx, cfg, in, d);
}

#if PITFALL_HAS_CUDA
/// The facts that decide reproduce_kernel_host_data on a GPU, recorded before the launch (a
/// sticky error would make every later query fail). Returns cudaDevAttrPageableMemoryAccess.
pitfall::status_or<int> record_pageable_access(pitfall::context& ctx, const float* h_in) {
    int device = 0;
    PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDevice(&device));
    int pageable = 0, host_page_tables = 0, concurrent_managed = 0;
    PITFALL_CUDA_TRY(pitfall::stage::init,
                     cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device));
    PITFALL_CUDA_TRY(pitfall::stage::init,
                     cudaDeviceGetAttribute(&host_page_tables,
                                            cudaDevAttrPageableMemoryAccessUsesHostPageTables,
                                            device));
    PITFALL_CUDA_TRY(
        pitfall::stage::init,
        cudaDeviceGetAttribute(&concurrent_managed, cudaDevAttrConcurrentManagedAccess, device));
    // Gateable as a number: a baseline states the outcome together with the attribute it
    // assumes, so a host with the other answer reads as that, not as a mystery.
    ctx.record("pageable_memory_access", pageable);
    ctx.record("pageable_memory_access_uses_host_page_tables", host_page_tables);
    ctx.record("concurrent_managed_access", concurrent_managed);
    ctx.record_info("cudaDevAttrPageableMemoryAccess",
                    pageable == 0 ? "0: kernels cannot read pageable host memory: expect "
                                    "cudaErrorIllegalAddress (sticky)"
                                  : (host_page_tables != 0 ? "1: pageable memory reachable (ATS, "
                                                             "the host's page tables)"
                                                           : "1: pageable memory reachable (HMM)"));
    // What the runtime itself says about the pointer the kernel is about to be given.
    cudaPointerAttributes attributes{};
    PITFALL_CUDA_TRY(pitfall::stage::init, cudaPointerGetAttributes(&attributes, h_in));
    ctx.record_info("kernel_input_pointer_type",
                    attributes.type == cudaMemoryTypeUnregistered ? "cudaMemoryTypeUnregistered"
                    : attributes.type == cudaMemoryTypeHost       ? "cudaMemoryTypeHost"
                    : attributes.type == cudaMemoryTypeDevice     ? "cudaMemoryTypeDevice"
                                                                  : "cudaMemoryTypeManaged");
    return pageable;
}

/// After a fault: does the context still work? A sticky error answers every call, even an
/// allocation that has nothing to do with it.
pitfall::status allocate_after_fault() {
    void* p = nullptr;
    PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMalloc(&p, 256));
    PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaFree(p));
    return pitfall::status::ok();
}
#endif

/// reproduce_kernel_host_data: the device op given the host array (pageable, from the
/// allocator numpy uses) instead of the device copy.
template <class Backend>
pitfall::status kernel_host_data(pitfall::context& ctx, const config& cfg, const layer_inputs& in) {
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    const float* h_x = in.x.data(); // std::vector storage: pageable host memory
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda)
        PITFALL_TRY(record_pageable_access(ctx, h_x));
#endif
    const pitfall::status faulted = fault::device_op_on_host_pointer(h_x, d.squared);
    if (!faulted.is_ok()) {
#if PITFALL_HAS_CUDA
        // The outcome is the fault; the event proves its stickiness (or, if not sticky, that
        // the context survived).
        if constexpr (Backend::kind == pitfall::backend_kind::cuda)
            ctx.record_event("after_fault_cuda_malloc", allocate_after_fault());
#endif
        return faulted;
    }
    // CPU, or a GPU with HMM/ATS: the kernel read the host array; the results must be right.
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
                                 return fault::device_op_on_host_pointer(h_x, d.squared);
                             }));
    ctx.record_samples("layer_seconds", seconds, "s");
    return dense_and_check(ctx, cfg, in, d);
}

/// fallback_copy_to_host: device -> host, host op, host -> device, each phase timed.
template <class Backend>
pitfall::status copy_to_host_fallback(pitfall::context& ctx, const config& cfg,
                                      const layer_inputs& in) {
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    const std::size_t n = cfg.elements();
    // Pageable staging buffers, as a framework's fallback (or numpy) would use.
    std::vector<float> h_in(n), h_out(n);
    std::vector<double> d2h, host_op, h2d;
    using clock = std::chrono::steady_clock;
    auto seconds_since = [](clock::time_point t0) {
        return std::chrono::duration<double>(clock::now() - t0).count();
    };
    auto layer = [&]() -> pitfall::status {
        auto t0 = clock::now();
        PITFALL_TRY(Backend::copy_to_host(h_in.data(), d.x, n));
        d2h.push_back(seconds_since(t0));
        t0 = clock::now();
        host_square(h_in.data(), h_out.data(), n); // the host op on host memory: correct
        host_op.push_back(seconds_since(t0));
        t0 = clock::now();
        PITFALL_TRY(Backend::copy_to_device(d.squared, h_out.data(), n));
        // A pageable host-to-device cudaMemcpy may return once the data is staged: wait for the
        // DMA so that the phase holds the whole transfer.
        PITFALL_TRY(Backend::synchronize());
        h2d.push_back(seconds_since(t0));
        return pitfall::status::ok();
    };
    PITFALL_ASSIGN_OR_RETURN(const auto seconds, pitfall::time_samples<Backend>(ctx, layer));
    // The warm-up calls recorded phases too: keep those of the timed samples only.
    const auto drop = static_cast<std::ptrdiff_t>(d2h.size() - seconds.size());
    for (auto* phase : {&d2h, &host_op, &h2d})
        phase->erase(phase->begin(), phase->begin() + drop);
    ctx.record_samples("layer_seconds", seconds, "s");
    ctx.record_samples("d2h_seconds", d2h, "s");
    ctx.record_samples("host_op_seconds", host_op, "s");
    ctx.record_samples("h2d_seconds", h2d, "s");
    std::vector<double> fraction(seconds.size());
    for (std::size_t i = 0; i < seconds.size(); ++i) {
        const double total = d2h[i] + host_op[i] + h2d[i];
        fraction[i] = total > 0.0 ? (d2h[i] + h2d[i]) / total : 0.0;
    }
    const double bytes_each_way = static_cast<double>(n * sizeof(float));
    ctx.record("transfer_bytes_per_call", 2.0 * bytes_each_way, "B");
    ctx.record("transfer_fraction", median(fraction)); // of the layer's host-clock time
    const double d2h_median = median(d2h), h2d_median = median(h2d);
    ctx.record("d2h_gb_per_second", d2h_median > 0.0 ? bytes_each_way / d2h_median / 1e9 : 0.0,
               "GB/s");
    ctx.record("h2d_gb_per_second", h2d_median > 0.0 ? bytes_each_way / h2d_median / 1e9 : 0.0,
               "GB/s");
    return dense_and_check(ctx, cfg, in, d);
}

/// remedy_device_op: the shared functor on the backend's buffers; nothing leaves the device.
template <class Backend>
pitfall::status device_op(pitfall::context& ctx, const config& cfg, const layer_inputs& in) {
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    PITFALL_ASSIGN_OR_RETURN(
        const auto seconds, pitfall::time_samples<Backend>(ctx, [&] {
            return Backend::for_each(cfg.elements(), square_op{d.x.data(), d.squared.data()});
        }));
    ctx.record_samples("layer_seconds", seconds, "s");
    ctx.record("transfer_bytes_per_call", 0.0, "B");
    return dense_and_check(ctx, cfg, in, d);
}

/// Every variant: the parameters, the inputs made from them, then the variant's own `body`.
template <class Body> pitfall::status with_inputs(pitfall::context& ctx, Body body) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const layer_inputs in = make_inputs(cfg);
    ctx.record("input_bytes", static_cast<double>(in.x.size() * sizeof(float)), "B");
    return body(ctx, cfg, in);
}

template <class Backend> pitfall::status reproduce_host_fn_device_data(pitfall::context& ctx) {
    return with_inputs(ctx, host_fn_device_data<Backend>);
}
template <class Backend> pitfall::status reproduce_kernel_host_data(pitfall::context& ctx) {
    return with_inputs(ctx, kernel_host_data<Backend>);
}
template <class Backend> pitfall::status fallback_copy_to_host(pitfall::context& ctx) {
    return with_inputs(ctx, copy_to_host_fallback<Backend>);
}
template <class Backend> pitfall::status remedy_device_op(pitfall::context& ctx) {
    return with_inputs(ctx, device_op<Backend>);
}

} // namespace host_only_custom_op

// A host allocation failure (inputs and references at large `rows`) is std::bad_alloc, an
// outcome like any other (the SDK's exception boundary).
using namespace host_only_custom_op; // the variants by their own names
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_host_fn_device_data),
                 PITFALL_VARIANT(reproduce_kernel_host_data),
                 PITFALL_VARIANT(fallback_copy_to_host), PITFALL_VARIANT(remedy_device_op))
