// pitfall/cuda/pinned_buffer.hpp: page-locked (pinned) host memory, freed with its owner.
//
// The memory cudaMemcpyAsync copies by DMA, concurrently with kernels, without a hidden
// synchronous bounce through a staging buffer of the driver's; and a limited resource (see
// scenarios/pinned_memory_exhaustion). Not counted by the SDK's memory tracker: it is host
// memory.
//
//   PITFALL_ASSIGN_OR_RETURN(auto staging, pitfall::cuda::pinned_buffer<float>::allocate(n));
//   PITFALL_CUDA_TRY(stage::copy, cudaMemcpyAsync(d, staging.data(), staging.bytes(),
//                                                 cudaMemcpyHostToDevice, s));
//
// CUDA only: empty where the build has no CUDA (PITFALL_HAS_CUDA 0).
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/cuda/handle.hpp"
#include "pitfall/status.hpp"

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace pitfall::cuda {

struct pinned_free {
    void operator()(void* p) const noexcept { (void)cudaFreeHost(p); }
};

/// `count` elements of T in pinned host memory (uninitialised).
template <class T> class pinned_buffer {
public:
    pinned_buffer() = default;

    /// cudaHostAlloc; cudaHostAllocDefault is what cudaMallocHost allocates. An error is
    /// reported at stage alloc.
    static status_or<pinned_buffer> allocate(std::size_t count,
                                             unsigned flags = cudaHostAllocDefault) {
        // A count whose bytes would wrap asks for SIZE_MAX, which fails as too large, rather
        // than for a small buffer.
        const std::size_t bytes = count > SIZE_MAX / sizeof(T) ? SIZE_MAX : count * sizeof(T);
        void* allocated = nullptr;
        PITFALL_CUDA_TRY(stage::alloc, cudaHostAlloc(&allocated, bytes, flags));
        return pinned_buffer(static_cast<T*>(allocated), count);
    }

    T* data() const noexcept { return static_cast<T*>(m_memory.get()); }
    std::size_t size() const noexcept { return m_count; }
    std::size_t bytes() const noexcept { return m_count * sizeof(T); }

private:
    pinned_buffer(T* data, std::size_t count) noexcept : m_memory(data), m_count(count) {}
    unique_handle<void*, pinned_free> m_memory;
    std::size_t m_count = 0;
};

} // namespace pitfall::cuda

#endif // PITFALL_HAS_CUDA
