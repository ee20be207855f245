// pitfall/cuda/math_libraries.hpp: cuBLAS and cuDNN, which the SDK opens on their first call.
//
// A scenario program links the CUDA runtime only; the SDK defines the cuBLAS and cuDNN
// functions a scenario calls and opens the library by its soname on the first one (the why and
// the how: pitfall/detail/cuda_libraries.hpp). A case that is about loading them opens one
// now, as its first call would, and gets the loader's answer as a status:
//
//   const pitfall::status loaded =
//   pitfall::cuda::open_library(pitfall::cuda::math_library::cublas); ctx.record_info("soname",
//   pitfall::cuda::soname(pitfall::cuda::math_library::cublas));
//
// A case that calls cuBLAS itself, rather than through cuda_backend::gemm, counts each call the
// library accepted (count_library_call) as the GPU work the harness checks it did.
//
// CUDA only: empty where the build has no CUDA (PITFALL_HAS_CUDA 0).
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/detail/cuda_libraries.hpp"
#include "pitfall/status.hpp"

#if PITFALL_HAS_CUDA

namespace pitfall::cuda {

/// cuBLAS or cuDNN.
using math_library = detail::cuda_library;

/// The name dlopen is given: "libcublas.so.13", "libcudnn.so.9" (the majors of the headers this
/// SDK was built with).
inline const char* soname(math_library lib) {
    return detail::soname(lib);
}

/// Opens `lib` now, as its first call would (once per process; later calls answer the same):
/// ok, UNSUPPORTED where this build has no cuDNN, or host_error::library_not_loaded at stage
/// init, in the loader's words.
inline status open_library(math_library lib) {
    return detail::open_cuda_library(lib);
}

/// One call into cuBLAS (or cuDNN) that the library accepted, counted as GPU work of the case
/// (the harness's evidence that it ran on the GPU): the SDK counts its own gemm calls.
inline void count_library_call() {
    detail::count_library_call();
}

} // namespace pitfall::cuda

#endif // PITFALL_HAS_CUDA
