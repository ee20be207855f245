// pitfall/detail/cuda_libraries.hpp: cuBLAS and cuDNN, opened when first called.
//
// A scenario program links the CUDA runtime only. The cuBLAS and cuDNN functions it calls are
// defined by the SDK (harness/sdk/cuda_libraries.cpp) with the signatures of the libraries' own
// headers; the first call opens the library by its soname (dlopen, the loader's usual search:
// LD_LIBRARY_PATH, the program's RUNPATH, the cache, the system folders) and forwards every call
// after. So a CPU case never maps libcublas, libcublasLt or libcudnn (with CUDA 13.0 about
// 210 MiB of peak RSS and 70 ms of start-up), and a library that cannot be opened is an error
// value of the case that needed it, in the loader's words, instead of a process the loader
// refuses to start.
//
// A call that cannot be forwarded returns the library's "not initialized" status (or 0, or a
// text saying so); the status macros (PITFALL_CUBLAS_TRY, PITFALL_CUDNN_TRY) then report the
// reason instead, as host_error::library_not_loaded:
//
//   "libcudnn.so.9 could not be loaded: libcudnn.so.9: cannot open shared object file: No such
//    file or directory (from cudnnCreate(&handle))"
//
// Only the functions listed in cuda_libraries.cpp exist: a program calling another cuBLAS or
// cuDNN function fails to link ("undefined reference to cublasFoo"), and the function is added
// there, with its header's signature.
#pragma once

#include "pitfall/status.hpp"

namespace pitfall::detail {

enum class cuda_library { cublas, cudnn };

/// The name dlopen is given: "libcublas.so.13", "libcudnn.so.9" (the major of the headers this
/// SDK was built with, the library it was linked against before; a cuDNN-less build names
/// "libcudnn" alone).
const char* soname(cuda_library lib);

/// Opens `lib` now, as its first call would (once per process; later calls answer the same):
/// ok, unsupported where this build has no cuDNN, or host_error::library_not_loaded (stage init)
/// with the loader's words ("libcublas.so.13 could not be loaded: <dlerror>").
status open_cuda_library(cuda_library lib);

/// Why the latest call into `lib` on this thread did not reach the library (the library could
/// not be opened, or has no such function); nullptr when it did. The status constructors
/// (from_cublas, from_cudnn) ask before naming the status that call returned.
const char* unforwarded_call_reason(cuda_library lib);

/// The status of a call that did not reach the library: host_error::library_not_loaded, stage
/// init, `reason` and the call's expression in the message.
status library_not_loaded(const char* reason, const char* expr, const char* file, int line);

} // namespace pitfall::detail
