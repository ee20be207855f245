// pitfall/cuda_backend.cuh: the CUDA backend and the CUDA error macros.
//
// Included by backend.hpp when the build has CUDA. Host members (allocate, copy, gemm, timer)
// are plain host code and work from .cpp files; for_each launches a kernel and exists only in
// translation units nvcc compiles (.cu).
//
//   PITFALL_CUDA_TRY(pitfall::stage::copy, cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
//   PITFALL_CUBLAS_TRY(cublasSgemm(...));
#pragma once

#include "pitfall/status.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace pitfall {

namespace detail {
/// A status from a CUDA runtime error: its name from cudaGetErrorName, stickiness from the
/// sticky list; a non-sticky error is cleared (cudaGetLastError) once it has been recorded, so
/// the next call does not report it again.
status from_cuda(cudaError_t err, stage where, const char* expr, const char* file, int line);
status from_cublas(cublasStatus_t err, const char* expr, const char* file, int line);
} // namespace detail

/// The CUDA backend: cudaMalloc through the tracker, cudaMemcpy, kernels, cuBLAS.
struct cuda_backend {
    static constexpr backend_kind kind = backend_kind::cuda;
    static constexpr const char* name = "cuda";

    static status_or<void*> allocate_bytes(std::size_t bytes);
    static void deallocate_bytes(void* data, std::size_t bytes);

    template <class T> static status_or<buffer<T, cuda_backend>> allocate(std::size_t count) {
        if (count > SIZE_MAX / sizeof(T)) // count * sizeof(T) would wrap to a small buffer
            return memory_tracker::for_backend(kind).reserve(UINT64_MAX);
        auto raw = allocate_bytes(count * sizeof(T));
        if (!raw.is_ok())
            return raw.error();
        return buffer<T, cuda_backend>(static_cast<T*>(raw.value()), count);
    }
    static status copy_bytes_to_device(void* dst, const void* src, std::size_t bytes);
    static status copy_bytes_to_host(void* dst, const void* src, std::size_t bytes);
    template <class T>
    static status copy_to_device(buffer<T, cuda_backend>& dst, const T* src, std::size_t count) {
        return copy_bytes_to_device(dst.data(), src, count * sizeof(T));
    }
    template <class T>
    static status copy_to_host(T* dst, const buffer<T, cuda_backend>& src, std::size_t count) {
        return copy_bytes_to_host(dst, src.data(), count * sizeof(T));
    }

#if defined(__CUDACC__)
    /// f(i) for i in [0, n) on the legacy default stream.
    template <class F> static status for_each(std::size_t n, F f) {
        return for_each(cudaStream_t{}, n, f);
    }
    /// The same on `stream` (a pipeline that overlaps copies and kernels on its own streams;
    /// the default stream would serialise them).
    template <class F> static status for_each(cudaStream_t stream, std::size_t n, F f);
#endif
    static status synchronize();

    static status gemm(transpose ta, transpose tb, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc);
    static status gemm(transpose ta, transpose tb, int m, int n, int k, double alpha,
                       const double* a, int lda, const double* b, int ldb, double beta, double* c,
                       int ldc);
    /// The process's cuBLAS handle, created on first use.
    static status_or<cublasHandle_t> blas_handle();

    /// GPU time between two events on the default stream.
    class timer {
    public:
        timer() = default;
        timer(const timer&) = delete;
        timer& operator=(const timer&) = delete;
        ~timer();
        status start();
        status_or<double> stop_seconds();

    private:
        cudaEvent_t m_start = nullptr;
        cudaEvent_t m_stop = nullptr;
    };

    /// "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)", or the error that says why not.
    static std::string describe_device();
};

/// Readiness of the CUDA backend: the first runtime call a case makes (cudaGetDeviceCount).
/// Without a driver it answers cudaErrorInsufficientDriver; with no device, cudaErrorNoDevice.
status cuda_probe();

/// Evidence that a case's work ran on the GPU, independent of what the case says (its ran_on):
/// `kernels` is counted by the device itself (every SDK kernel and every scenario kernel that
/// calls pitfall::count_this_kernel() adds one from its first thread, also when a CUDA Graph
/// replays it) and read back from device memory at the end of the case; `library_calls` are
/// cuBLAS calls the library accepted (counted on the host: their kernels are the library's).
/// Counted on the case's current device: a multi-GPU case is counted where it ends.
struct gpu_work_count {
    unsigned long long kernels = 0;
    unsigned long long library_calls = 0;
};

/// Synchronises the device and reads every counter; an error (a sticky fault, no driver) when
/// the device cannot answer.
status_or<gpu_work_count> count_gpu_work();

namespace detail {
/// Reads one translation unit's device counter (cudaMemcpyFromSymbol of its own variable).
using kernel_counter_reader = cudaError_t (*)(unsigned long long* count);
/// Adds a translation unit's counter to those count_gpu_work() reads; true, for a static
/// initialiser.
bool register_kernel_counter(kernel_counter_reader reader);
/// A library call that returned success (cuda_backend::gemm).
void count_library_call();
} // namespace detail

#if defined(__CUDACC__)
// One counter per translation unit: a __device__ variable lives in its own module (there is no
// device linking across files without relocatable device code), so each .cu file that includes
// this header gets its own counter and registers a reader for it at static initialisation.
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): one copy per translation unit is the
            // point
__device__ unsigned long long kernels_counted_here = 0;

cudaError_t read_kernels_counted_here(unsigned long long* count) {
    return cudaMemcpyFromSymbol(count, kernels_counted_here, sizeof *count);
}

[[maybe_unused]] const bool kernels_counted_here_registered =
    ::pitfall::detail::register_kernel_counter(&read_kernels_counted_here);

/// First statement of a kernel: its first thread adds one to this file's device counter, so the
/// harness can tell work that ran on the GPU from a case that only says so. Costs one atomic per
/// launch.
__device__ __forceinline__ void count_this_kernel() {
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0 && blockIdx.x == 0 &&
        blockIdx.y == 0 && blockIdx.z == 0)
        atomicAdd(&kernels_counted_here, 1ULL);
}
} // namespace

namespace detail {
template <class F> __global__ void for_each_kernel(std::size_t n, F f) {
    count_this_kernel();
    // Grid-stride loop: any n fits a grid of bounded size.
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(blockDim.x) * gridDim.x)
        f(i);
}
} // namespace detail

template <class F> status cuda_backend::for_each(cudaStream_t stream, std::size_t n, F f) {
    if (n == 0)
        return status::ok();
    constexpr unsigned block = 256;
    const std::size_t wanted = (n + block - 1) / block;
    const unsigned grid = static_cast<unsigned>(wanted < 65535u ? wanted : 65535u);
    detail::for_each_kernel<<<grid, block, 0, stream>>>(n, f);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return detail::from_cuda(err, stage::launch, "for_each_kernel<<<>>>", __FILE__, __LINE__);
    return status::ok();
}
#endif

} // namespace pitfall

#define PITFALL_CUDA_TRY(stage_, expr)                                                             \
    do {                                                                                           \
        const cudaError_t pitfall_cuda_err_ = (expr);                                              \
        if (pitfall_cuda_err_ != cudaSuccess)                                                      \
            return ::pitfall::detail::from_cuda(pitfall_cuda_err_, (stage_), #expr, __FILE__,      \
                                                __LINE__);                                         \
    } while (0)

#define PITFALL_CUBLAS_TRY(expr)                                                                   \
    do {                                                                                           \
        const cublasStatus_t pitfall_cublas_err_ = (expr);                                         \
        if (pitfall_cublas_err_ != CUBLAS_STATUS_SUCCESS)                                          \
            return ::pitfall::detail::from_cublas(pitfall_cublas_err_, #expr, __FILE__, __LINE__); \
    } while (0)

/// After a launch: the launch error now, and (synchronising) the asynchronous one.
#define PITFALL_CUDA_CHECK_LAUNCH()                                                                \
    do {                                                                                           \
        PITFALL_CUDA_TRY(::pitfall::stage::launch, cudaGetLastError());                            \
        PITFALL_CUDA_TRY(::pitfall::stage::synchronize, cudaDeviceSynchronize());                  \
    } while (0)

#if defined(__CUDACC__)
#include "pitfall/detail/gpu_controls.cuh"
#endif
