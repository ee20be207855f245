// library_init_reserved_memory: a library cannot start in memory its own process has reserved.
//
// What
//   A framework reserves (almost) all free device memory at start-up, for its own allocator
//   (TensorFlow's default; JAX preallocates 75%). Only then does the first matrix product or
//   convolution create its library handle: cublasCreate, cudnnCreate. Each needs device memory
//   of its own (its state, a default workspace, the modules of its kernels).
//     reproduce_cublas_after_reserve  reserve free - margin_mib (one cudaMalloc, stepping down
//                                     2 MiB until it is accepted), cublasCreate, one SGEMM.
//     reproduce_cudnn_after_reserve   the same reservation, then cudnnCreate.
//     remedy_handles_before_reserve   handles first (and one SGEMM), then the reservation.
//     remedy_leave_headroom           a reservation that leaves headroom_mib (allow_growth).
//
// Why it fails
//   The reservation is the framework's, not the library's: cuBLAS and cuDNN allocate with
//   cudaMalloc and find nothing left. The status says "not initialized" or "alloc failed",
//   nothing about memory held by the same process, which is why the threads look for driver or
//   version problems first.
//
// Expected per backend
//   cuda  reproduce_cublas_after_reserve: cublasCreate fails, CUBLAS_STATUS_NOT_INITIALIZED (1)
//         or CUBLAS_STATUS_ALLOC_FAILED (3) (cuBLAS documentation, "cublasCreate()": "the CUDA
//         Runtime initialization failed" / "the resources could not be allocated"); if the
//         handle does get created, the SGEMM's status is the outcome. reproduce_cudnn_after_
//         reserve: cudnnCreate fails, CUDNN_STATUS_ALLOC_FAILED or CUDNN_STATUS_INTERNAL_ERROR
//         (cuDNN API, "cudnnCreate()"). Both remedies: ok, the SGEMM checked against float64.
//         The status names are recorded as observed, the reservation and what was left free as
//         measurements. Observed with CUDA 13.0, cuBLAS 13 and cuDNN 9.14 on an H200 (3 MiB
//         left free): CUBLAS_STATUS_ALLOC_FAILED and CUDNN_STATUS_INTERNAL_ERROR (blessed in
//         expected/hopper-cuda13); the CUDA 11/12 profiles keep their documented names until a
//         run there. Without a driver: UNSUPPORTED, cudaErrorInsufficientDriver (the SDK's
//         probe).
//   cpu   UNSUPPORTED: no CPU analog. A CPU BLAS keeps no per-device state and allocates from
//         the same heap as the framework, which does not reserve host memory up front.
//
// Remedy
//   Create the library handles (run one operation) before reserving; or do not reserve all of
//   it: allow_growth / TF_FORCE_GPU_ALLOW_GROWTH=true, a memory fraction, XLA_PYTHON_CLIENT_
//   PREALLOCATE=false, which leave the libraries their headroom.
//
// Evidence
//   tensorflow/tensorflow#9489 (failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED),
//   tensorflow/tensorflow#36025 and matterport/Mask_RCNN#1620 (cuDNN failed to initialize;
//   allow_growth fixes it).
#include "pitfall/scenario.hpp"

#if PITFALL_HAS_CUDA
#include "pitfall/cudnn.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

constexpr const char* no_cpu_analog =
    "a CPU BLAS keeps no per-device state and allocates from the same heap as the framework, "
    "which reserves no host memory up front";

#if PITFALL_HAS_CUDA
constexpr std::size_t mib = 1024 * 1024;

/// The framework's up-front reservation: one cudaMalloc of what is free minus `leave`, stepping
/// down 2 MiB while cudaMalloc refuses (it cannot always hand out the last free byte).
class reservation {
public:
    reservation() = default;
    reservation(const reservation&) = delete;
    reservation& operator=(const reservation&) = delete;
    ~reservation() {
        if (m_data != nullptr)
            (void)cudaFree(m_data);
    }
    status reserve(pitfall::context& ctx, std::size_t leave) {
        std::size_t free = 0, total = 0;
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMemGetInfo(&free, &total));
        ctx.record("device_total_bytes", static_cast<double>(total), "B");
        ctx.record("free_before_reserve_bytes", static_cast<double>(free), "B");
        std::size_t want = free > leave ? (free - leave) / (2 * mib) * (2 * mib) : 0;
        cudaError_t err = cudaErrorMemoryAllocation;
        for (int tries = 0; want > 0 && tries < 256; ++tries, want -= 2 * mib) {
            err = cudaMalloc(&m_data, want);
            if (err == cudaSuccess)
                break;
            m_data = nullptr;
            (void)cudaGetLastError(); // the refusal is expected here; not sticky
            if (want <= 2 * mib)
                break;
        }
        if (err != cudaSuccess)
            return pitfall::detail::from_cuda(err, pitfall::stage::alloc, "cudaMalloc(reservation)",
                                              __FILE__, __LINE__);
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMemGetInfo(&free, &total));
        ctx.record("reserved_bytes", static_cast<double>(want), "B");
        ctx.record("free_after_reserve_bytes", static_cast<double>(free), "B");
        return status::ok();
    }

private:
    void* m_data = nullptr;
};

/// A cuBLAS handle, destroyed on exit.
struct blas_handle {
    cublasHandle_t h = nullptr;
    blas_handle() = default;
    blas_handle(const blas_handle&) = delete;
    blas_handle& operator=(const blas_handle&) = delete;
    ~blas_handle() {
        if (h != nullptr)
            (void)cublasDestroy(h);
    }
};
struct dnn_handle {
    cudnnHandle_t h = nullptr;
    dnn_handle() = default;
    dnn_handle(const dnn_handle&) = delete;
    dnn_handle& operator=(const dnn_handle&) = delete;
    ~dnn_handle() {
        if (h != nullptr)
            (void)cudnnDestroy(h);
    }
};

// Matrix entries in [-1, 1), a fixed pattern; the same function fills the device (a kernel)
// and the float64 reference.
struct fill_matrix {
    float* m;
    unsigned salt;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        m[i] =
            static_cast<float>(static_cast<int>((i * 2654435761u + salt) % 2001u) - 1000) / 1000.f;
    }
};

/// The operands of the product, allocated (and filled by a kernel) before any reservation,
/// as a framework's tensors live inside its own pool.
struct gemm_operands {
    pitfall::buffer<float, pitfall::cuda_backend> a, b, c;
    int n = 0;
};

status_or<gemm_operands> make_operands(int n) {
    gemm_operands g;
    g.n = n;
    const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    PITFALL_ASSIGN_OR_RETURN(g.a, pitfall::cuda_backend::allocate<float>(count));
    PITFALL_ASSIGN_OR_RETURN(g.b, pitfall::cuda_backend::allocate<float>(count));
    PITFALL_ASSIGN_OR_RETURN(g.c, pitfall::cuda_backend::allocate<float>(count));
    PITFALL_TRY(pitfall::cuda_backend::for_each(count, fill_matrix{g.a.data(), 1u}));
    PITFALL_TRY(pitfall::cuda_backend::for_each(count, fill_matrix{g.b.data(), 7u}));
    PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaDeviceSynchronize());
    return g;
}

/// C = A B with the handle (column-major), checked against a float64 product of the same
/// entries. |C| <= n, float32 accumulation error <= n * 2^-23 * n; tolerance 1e-5 * n * n.
status run_gemm(pitfall::context& ctx, cublasHandle_t h, gemm_operands& g, const std::string& tag) {
    const float one = 1.f, zero = 0.f;
    const int n = g.n;
    PITFALL_CUBLAS_TRY(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, g.a.data(), n,
                                   g.b.data(), n, &zero, g.c.data(), n));
    PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaDeviceSynchronize());
    pitfall::detail::count_library_call();
    const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    std::vector<float> c(count), a(count), b(count);
    PITFALL_TRY(pitfall::cuda_backend::copy_to_host(c.data(), g.c, count));
    for (std::size_t i = 0; i < count; ++i) {
        a[i] = 0.f;
        b[i] = 0.f;
        fill_matrix{a.data(), 1u}(i);
        fill_matrix{b.data(), 7u}(i);
    }
    double worst = 0.0;
    const std::size_t un = static_cast<std::size_t>(n);
    for (std::size_t col = 0; col < un; col += std::max<std::size_t>(1, un / 16))
        for (std::size_t row = 0; row < un; ++row) {
            double want = 0.0;
            for (std::size_t k = 0; k < un; ++k)
                want += static_cast<double>(a[k * un + row]) * static_cast<double>(b[col * un + k]);
            worst = std::max(worst, std::fabs(want - static_cast<double>(c[col * un + row])));
        }
    const double tolerance = 1e-5 * static_cast<double>(n) * static_cast<double>(n);
    ctx.check("sgemm_matches_fp64_" + tag, worst <= tolerance,
              "max |C - C_ref| = " + std::to_string(worst) + ", tolerance " +
                  std::to_string(tolerance));
    return status::ok();
}

struct config {
    std::size_t margin = 0;
    std::size_t headroom = 0;
    int gemm_n = 0;
};

status_or<config> read_config(const pitfall::context& ctx) {
    config c;
    PITFALL_ASSIGN_OR_RETURN(const long long margin, ctx.param_int("margin_mib"));
    PITFALL_ASSIGN_OR_RETURN(const long long headroom, ctx.param_int("headroom_mib"));
    PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("gemm_n"));
    c.margin = static_cast<std::size_t>(margin) * mib;
    c.headroom = static_cast<std::size_t>(headroom) * mib;
    c.gemm_n = static_cast<int>(n);
    return c;
}

/// A library status recorded under `name` and returned.
status observed(pitfall::context& ctx, const std::string& name, status s) {
    ctx.record_event(name, s);
    return s;
}
#endif

} // namespace

template <class Backend> status reproduce_cublas_after_reserve(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    PITFALL_ASSIGN_OR_RETURN(auto operands, make_operands(cfg.gemm_n));
    reservation framework;
    PITFALL_TRY(framework.reserve(ctx, cfg.margin));
    blas_handle blas;
    PITFALL_TRY(observed(ctx, "cublasCreate", [&]() -> status {
        PITFALL_CUBLAS_TRY(cublasCreate(&blas.h));
        return status::ok();
    }()));
    return observed(ctx, "cublasSgemm", run_gemm(ctx, blas.h, operands, "in_reservation"));
#else
    (void)ctx; // the build has no CUDA: cuda_only answered above
    return status::ok();
#endif
}

template <class Backend> status reproduce_cudnn_after_reserve(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    // One kernel before the reservation, as the framework's own start-up would run.
    PITFALL_ASSIGN_OR_RETURN(auto operands, make_operands(cfg.gemm_n));
    reservation framework;
    PITFALL_TRY(framework.reserve(ctx, cfg.margin));
    dnn_handle dnn;
    return observed(ctx, "cudnnCreate", [&]() -> status {
        PITFALL_CUDNN_TRY(cudnnCreate(&dnn.h));
        return status::ok();
    }());
#else
    (void)ctx; // the build has no CUDA: cuda_only answered above
    return status::ok();
#endif
}

template <class Backend> status remedy_handles_before_reserve(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    PITFALL_ASSIGN_OR_RETURN(auto operands, make_operands(cfg.gemm_n));
    blas_handle blas;
    dnn_handle dnn;
    PITFALL_CUBLAS_TRY(cublasCreate(&blas.h));
    PITFALL_CUDNN_TRY(cudnnCreate(&dnn.h));
    // The first product loads its kernels and workspace while memory is still free.
    PITFALL_TRY(run_gemm(ctx, blas.h, operands, "before_reservation"));
    reservation framework;
    PITFALL_TRY(framework.reserve(ctx, cfg.margin));
    return run_gemm(ctx, blas.h, operands, "in_reservation");
#else
    (void)ctx; // the build has no CUDA: cuda_only answered above
    return status::ok();
#endif
}

template <class Backend> status remedy_leave_headroom(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    PITFALL_ASSIGN_OR_RETURN(auto operands, make_operands(cfg.gemm_n));
    reservation framework;
    PITFALL_TRY(framework.reserve(ctx, cfg.headroom));
    blas_handle blas;
    dnn_handle dnn;
    PITFALL_CUBLAS_TRY(cublasCreate(&blas.h));
    PITFALL_CUDNN_TRY(cudnnCreate(&dnn.h));
    return run_gemm(ctx, blas.h, operands, "in_reservation");
#else
    (void)ctx; // the build has no CUDA: cuda_only answered above
    return status::ok();
#endif
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_cublas_after_reserve),
                 PITFALL_VARIANT(reproduce_cudnn_after_reserve),
                 PITFALL_VARIANT(remedy_handles_before_reserve),
                 PITFALL_VARIANT(remedy_leave_headroom))
