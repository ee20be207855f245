// pitfall/cuda/status.hpp: a CUDA runtime error as a status value, for code that keeps it.
//
// PITFALL_CUDA_TRY returns the error at once. Where the error is itself the evidence (an event
// the case records and goes on, the first error of a stream capture kept until the capture has
// ended, a failed allocation whose budget must be given back first), the same status is wanted
// as a value:
//
//   void* unrelated = nullptr;
//   const cudaError_t err = cudaMalloc(&unrelated, 256);
//   ctx.record_event("after_fault_cuda_malloc",
//                    PITFALL_CUDA_STATUS(pitfall::stage::alloc, err, "cudaMalloc"));
//
// CUDA only: empty where the build has no CUDA (PITFALL_HAS_CUDA 0).
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/status.hpp"

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>

namespace pitfall::cuda {

/// ok for cudaSuccess; any other error as PITFALL_CUDA_TRY reports it: its name, stickiness,
/// the stage, `expr` and the place. A non-sticky error is cleared once it has been recorded
/// (cudaGetLastError), so the next call does not report it again.
inline status status_of(cudaError_t err, stage where, const char* expr, const char* file = "",
                        int line = 0) {
    if (err == cudaSuccess)
        return status::ok();
    return detail::from_cuda(err, where, expr, file, line);
}

} // namespace pitfall::cuda

/// status_of with this file and line: `PITFALL_CUDA_STATUS(pitfall::stage::init, err, "what")`.
#define PITFALL_CUDA_STATUS(stage_, err_, expr_)                                                   \
    ::pitfall::cuda::status_of((err_), (stage_), (expr_), __FILE__, __LINE__)

#endif // PITFALL_HAS_CUDA
