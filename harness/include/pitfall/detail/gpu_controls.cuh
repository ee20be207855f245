// pitfall/detail/gpu_controls.cuh: the GPU calibration controls (pitfall/controls.hpp), compiled
// into each CUDA scenario by cuda_backend.cuh and registered with the SDK at static
// initialisation. Their kernels never call count_this_kernel(): a control is not the case's work.
#pragma once

#include "pitfall/controls.hpp"
#include "pitfall/status.hpp"

#include <cuda_runtime.h>

#include <string>

namespace pitfall::detail {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): one copy per translation unit

__global__ void control_empty_kernel() {}

__global__ void control_copy_kernel(const float4* in, float4* out, std::size_t n) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(blockDim.x) * gridDim.x)
        out[i] = in[i];
}

// Dependent FMAs per thread: the SM's arithmetic at its current clock. The store that never
// happens (a is never exactly -1) keeps the compiler from removing the loop.
__global__ void control_fma_kernel(float* out, float seed) {
    float a = seed + static_cast<float>(threadIdx.x) * 1e-7F;
    float b = 0.999F;
    for (int i = 0; i < 4096; ++i) {
        a = fmaf(a, b, 1e-7F);
        b = fmaf(b, 0.9999F, 1e-8F);
    }
    if (a == -1.0F)
        out[threadIdx.x] = a + b;
}

/// The buffers, events and grid the controls use, made on first use in the process.
struct gpu_control_state {
    float4* from = nullptr;
    float4* to = nullptr;
    void* pinned = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
    int sms = 0;
    bool ready = false;
};

constexpr std::size_t control_copy_bytes = std::size_t{64} << 20;
constexpr std::size_t control_h2d_bytes = std::size_t{16} << 20;

cudaError_t prepare_gpu_controls(gpu_control_state& s) {
    if (s.ready)
        return cudaSuccess;
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess)
        err = cudaEventCreate(&s.start);
    if (err == cudaSuccess)
        err = cudaEventCreate(&s.stop);
    s.ready = err == cudaSuccess;
    return err;
}

// Device buffers only for the controls that copy: a case bound by launches or arithmetic takes
// no device memory for its controls (some cases measure free memory).
cudaError_t prepare_copy_buffers(gpu_control_state& s) {
    cudaError_t err = cudaSuccess;
    if (s.from == nullptr)
        err = cudaMalloc(reinterpret_cast<void**>(&s.from), control_copy_bytes);
    if (err == cudaSuccess && s.to == nullptr)
        err = cudaMalloc(reinterpret_cast<void**>(&s.to), control_copy_bytes);
    if (err == cudaSuccess && s.pinned == nullptr)
        err = cudaMallocHost(&s.pinned, control_h2d_bytes);
    return err;
}

status_or<double> run_gpu_control(const std::string& name) {
    static gpu_control_state s;
    PITFALL_CUDA_TRY(stage::init, prepare_gpu_controls(s));
    if (name == "gpu_memory" || name == "gpu_h2d")
        PITFALL_CUDA_TRY(stage::alloc, prepare_copy_buffers(s));
    PITFALL_CUDA_TRY(stage::launch, cudaEventRecord(s.start));
    if (name == "gpu_launch") {
        for (int i = 0; i < 32; ++i)
            control_empty_kernel<<<1, 1>>>();
    } else if (name == "gpu_memory") {
        const std::size_t n = control_copy_bytes / sizeof(float4);
        control_copy_kernel<<<static_cast<unsigned>(s.sms * 8), 256>>>(s.from, s.to, n);
    } else if (name == "gpu_fma") {
        control_fma_kernel<<<static_cast<unsigned>(s.sms * 4), 256>>>(
            reinterpret_cast<float*>(s.to), 0.5F);
    } else if (name == "gpu_h2d") {
        PITFALL_CUDA_TRY(stage::copy, cudaMemcpyAsync(s.from, s.pinned, control_h2d_bytes,
                                                      cudaMemcpyHostToDevice));
    } else {
        return status::error(pitfall_error::bad_parameter, "no GPU control named '" + name + "'",
                             stage::init);
    }
    PITFALL_CUDA_TRY(stage::launch, cudaGetLastError());
    PITFALL_CUDA_TRY(stage::launch, cudaEventRecord(s.stop));
    PITFALL_CUDA_TRY(stage::synchronize, cudaEventSynchronize(s.stop));
    float ms = 0;
    PITFALL_CUDA_TRY(stage::synchronize, cudaEventElapsedTime(&ms, s.start, s.stop));
    return static_cast<double>(ms) / 1000.0;
}

std::string read_gpu_bus_id() {
    int device = 0;
    char id[32] = {};
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof id), device) != cudaSuccess)
        return "";
    return id;
}

[[maybe_unused]] const bool gpu_controls_registered =
    register_gpu_controls(&run_gpu_control, &read_gpu_bus_id);

} // namespace
} // namespace pitfall::detail
