// pitfall/cuda/stream.hpp: CUDA streams and events, destroyed with their owner.
//
//   PITFALL_ASSIGN_OR_RETURN(auto copy, pitfall::cuda::stream::create(cudaStreamNonBlocking));
//   PITFALL_ASSIGN_OR_RETURN(auto copied, pitfall::cuda::event::create(cudaEventDisableTiming));
//   PITFALL_CUDA_TRY(pitfall::stage::launch, cudaEventRecord(copied.get(), copy.get()));
//
// CUDA only: empty where the build has no CUDA (PITFALL_HAS_CUDA 0).
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/cuda/handle.hpp"
#include "pitfall/status.hpp"

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>

namespace pitfall::cuda {

struct stream_destroy {
    void operator()(cudaStream_t s) const noexcept { (void)cudaStreamDestroy(s); }
};

/// A stream of this thread's current device. Destroying it does not wait: work already queued
/// on it still runs (cudaStreamDestroy); an owner whose buffers that work reads synchronises
/// first.
class stream : public unique_handle<cudaStream_t, stream_destroy> {
public:
    using unique_handle::unique_handle;
    /// cudaStreamDefault: a blocking stream, ordered with the legacy default stream (what
    /// cudaStreamCreate makes); cudaStreamNonBlocking: no implicit ordering with it. An error
    /// is reported at stage init.
    static status_or<stream> create(unsigned flags = cudaStreamDefault) {
        cudaStream_t created = nullptr;
        PITFALL_CUDA_TRY(stage::init, cudaStreamCreateWithFlags(&created, flags));
        return stream(created);
    }
};

struct event_destroy {
    void operator()(cudaEvent_t e) const noexcept { (void)cudaEventDestroy(e); }
};

/// An event. cudaEventDefault times (what cudaEventCreate makes); cudaEventDisableTiming is
/// cheaper where it only orders streams or wakes the host.
class event : public unique_handle<cudaEvent_t, event_destroy> {
public:
    using unique_handle::unique_handle;
    /// An error is reported at stage init.
    static status_or<event> create(unsigned flags = cudaEventDefault) {
        cudaEvent_t created = nullptr;
        PITFALL_CUDA_TRY(stage::init, cudaEventCreateWithFlags(&created, flags));
        return event(created);
    }
};

} // namespace pitfall::cuda

#endif // PITFALL_HAS_CUDA
