// pitfall/backend.hpp: the two backends behind one static interface.
//
// `cpu_backend` and `cuda_backend` have the same static members, so a scenario is written once
// as a template over the backend and the same `PITFALL_HOST_DEVICE` functor runs in a host loop
// or a kernel:
//
//   struct relu { float* x; PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
//       x[i] = x[i] > 0.f ? x[i] : 0.f; } };
//
//   template <class Backend> pitfall::status step(std::size_t n) {
//       PITFALL_ASSIGN_OR_RETURN(auto d_x, Backend::template allocate<float>(n));
//       PITFALL_TRY(Backend::for_each(n, relu{d_x.data()}));
//       return Backend::synchronize();
//   }
//
// Interface (both backends):
//   allocate<T>(n) -> status_or<buffer<T, Backend>>   counted by memory_tracker, budget honoured
//   copy_to_device(buffer&, const T* host, n)  /  copy_to_host(T* host, const buffer&, n)
//   for_each(n, functor)                               functor(i) for i in [0, n)
//   synchronize()                                      surfaces asynchronous errors
//   gemm(...)                                          OpenBLAS / cuBLAS, column-major,
//   float+double timer                                              steady clock / CUDA events
//   describe_device()                                  where the case really ran (proof)
#pragma once

#include "pitfall/memory.hpp"
#include "pitfall/status.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#ifndef PITFALL_HAS_CUDA
#define PITFALL_HAS_CUDA 0
#endif
#ifndef PITFALL_HAS_CUDNN // 1 in scenarios whose scenario.json links cuDNN
#define PITFALL_HAS_CUDNN 0
#endif
#ifndef PITFALL_HAS_NCCL // 1 in scenarios whose scenario.json links NCCL
#define PITFALL_HAS_NCCL 0
#endif

#if defined(__CUDACC__)
#define PITFALL_HOST_DEVICE __host__ __device__
#else
#define PITFALL_HOST_DEVICE
#endif

namespace pitfall {

enum class transpose { no, yes };

/// Memory owned by a backend: move-only, released through the backend and its tracker.
template <class T, class Backend> class buffer {
public:
    buffer() = default;
    buffer(T* data, std::size_t count) : m_data(data), m_count(count) {}
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    buffer(buffer&& other) noexcept
        : m_data(std::exchange(other.m_data, nullptr)), m_count(std::exchange(other.m_count, 0)) {}
    buffer& operator=(buffer&& other) noexcept {
        if (this != &other) {
            reset();
            m_data = std::exchange(other.m_data, nullptr);
            m_count = std::exchange(other.m_count, 0);
        }
        return *this;
    }
    ~buffer() { reset(); }

    T* data() { return m_data; }
    const T* data() const { return m_data; }
    std::size_t size() const { return m_count; }
    std::size_t bytes() const { return m_count * sizeof(T); }
    void reset() {
        if (m_data != nullptr)
            Backend::deallocate_bytes(m_data, bytes());
        m_data = nullptr;
        m_count = 0;
    }

private:
    T* m_data = nullptr;
    std::size_t m_count = 0;
};

/// Host loop backend: "device" memory is host memory, kernels are loops, BLAS is OpenBLAS.
struct cpu_backend {
    static constexpr backend_kind kind = backend_kind::cpu;
    static constexpr const char* name = "cpu";

    static status_or<void*> allocate_bytes(std::size_t bytes);
    static void deallocate_bytes(void* data, std::size_t bytes);

    template <class T> static status_or<buffer<T, cpu_backend>> allocate(std::size_t count) {
        if (count > SIZE_MAX / sizeof(T)) // count * sizeof(T) would wrap to a small buffer
            return memory_tracker::for_backend(kind).reserve(UINT64_MAX);
        auto raw = allocate_bytes(count * sizeof(T));
        if (!raw.is_ok())
            return raw.error();
        return buffer<T, cpu_backend>(static_cast<T*>(raw.value()), count);
    }
    template <class T>
    static status copy_to_device(buffer<T, cpu_backend>& dst, const T* src, std::size_t count) {
        std::memcpy(dst.data(), src, count * sizeof(T));
        return status::ok();
    }
    template <class T>
    static status copy_to_host(T* dst, const buffer<T, cpu_backend>& src, std::size_t count) {
        std::memcpy(dst, src.data(), count * sizeof(T));
        return status::ok();
    }
    template <class F> static status for_each(std::size_t n, F f) {
        for (std::size_t i = 0; i < n; ++i)
            f(i);
        return status::ok();
    }
    static status synchronize() { return status::ok(); }

    static status gemm(transpose ta, transpose tb, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc);
    static status gemm(transpose ta, transpose tb, int m, int n, int k, double alpha,
                       const double* a, int lda, const double* b, int ldb, double beta, double* c,
                       int ldc);

    /// Wall-clock intervals of synchronous host work.
    class timer {
    public:
        status start() {
            m_start = std::chrono::steady_clock::now();
            return status::ok();
        }
        status_or<double> stop_seconds() {
            const auto end = std::chrono::steady_clock::now();
            return std::chrono::duration<double>(end - m_start).count();
        }

    private:
        std::chrono::steady_clock::time_point m_start;
    };

    /// What the BLAS behind gemm() is (OpenBLAS's own config string and thread count): the
    /// CPU's counterpart of cuda_backend::blas_handle().
    struct blas_info {
        std::string config;
        int threads = 0;
    };
    static status_or<blas_info> blas_handle();

    /// "cpu: <model>, N threads".
    static std::string describe_device();
};

} // namespace pitfall

#if PITFALL_HAS_CUDA
#include "pitfall/cuda_backend.cuh"
#endif
