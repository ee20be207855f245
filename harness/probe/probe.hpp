// pitfall-probe's parts: each asks one library (or the loader, or the kernel) about itself and
// answers with JSON; main.cpp puts the answers together, in the order they must be asked.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pitfall::probe {

// loader.cpp: what the dynamic loader loaded, and where it would look.

/// dlerror()'s text, else `fallback`, as valid UTF-8.
std::string dl_error_text(const char* fallback);
/// The file a loaded library came from, symlinks resolved (libcuda.so.1 ->
/// libcuda.so.580.65.06: the name carries the user-mode driver's version); empty where
/// `symbol` is null or belongs to no file.
std::string library_file(void* symbol);
/// The CUDA, BLAS and NVRTC libraries this process has loaded, as the loader names them.
nlohmann::json loaded_libraries();
/// The folders the dynamic loader searches, in its order.
std::vector<std::string> loader_folders();
/// Every copy of a CUDA library's soname in those folders, by soname, in search order.
nlohmann::json loader_path_copies();

// cuda.cpp: the driver (by its own API, opened by name) and the CUDA runtime.

/// libcuda.so.1's answers, with the kernel module's version and the /dev/nvidia* nodes.
nlohmann::json driver_facts();
#if PITFALL_HAS_CUDA
/// The runtime's versions and devices, as this build's cudart reports them.
nlohmann::json cuda_facts();
#endif

// nvml.cpp

/// NVML's driver version and devices (memory, modes, ECC, remapped rows, clocks).
nlohmann::json nvml_facts();

// libraries.cpp: the math libraries the scenarios load.

/// OpenBLAS's version, build and the kernel type it chose for this CPU.
nlohmann::json openblas_facts();
#if PITFALL_HAS_CUDA
/// Where cuBLAS of this build's CUDA major loads from, or why it does not.
nlohmann::json cublas_facts();
#endif
#if PITFALL_HAS_CUDNN
/// cuDNN's versions and its sub-libraries' checks, each in a child process.
nlohmann::json cudnn_facts();
#endif

} // namespace pitfall::probe
