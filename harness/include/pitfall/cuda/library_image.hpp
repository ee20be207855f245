// pitfall/cuda/library_image.hpp: device code loaded at run time from memory.
//
// A cubin, a fatbinary or PTX text (an image embedded by scenario.json's device_images, or
// text written by the case) loaded with cudaLibraryLoadData, and unloaded with its owner:
//
//   PITFALL_ASSIGN_OR_RETURN(const auto library, pitfall::cuda::library_image::load(image));
//   PITFALL_ASSIGN_OR_RETURN(const void* kernel, library.kernel("fill_index"));
//   PITFALL_CUDA_TRY(stage::launch, cudaLaunchKernel(kernel, grid, block, args, 0, nullptr));
//
// The driver's cuLibrary* came in CUDA 12.0, the runtime's cudaLibrary* later: 12.4's
// cuda_runtime_api.h (Debian's 12.4.131) declares none of them and 13.0's does, and the guard
// takes 12.5 as the first release with them (no 12.5 toolkit was at hand to confirm it). With
// an older runtime load() answers UNSUPPORTED.
// CUDA only: empty where the build has no CUDA (PITFALL_HAS_CUDA 0).
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/cuda/handle.hpp"
#include "pitfall/status.hpp"

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>

namespace pitfall::cuda {

#if CUDART_VERSION >= 12050
struct library_unload {
    void operator()(cudaLibrary_t library) const noexcept { (void)cudaLibraryUnload(library); }
};
#endif

/// One loaded library; its kernels are valid while it lives.
class library_image {
public:
    library_image() = default;

    /// cudaLibraryLoadData of `image` (no JIT or library options). Errors at stage init.
    static status_or<library_image> load(const void* image) {
#if CUDART_VERSION >= 12050
        cudaLibrary_t loaded = nullptr;
        PITFALL_CUDA_TRY(stage::init, cudaLibraryLoadData(&loaded, image, nullptr, nullptr, 0,
                                                          nullptr, nullptr, 0));
        library_image library;
        library.m_library = unique_handle<cudaLibrary_t, library_unload>(loaded);
        return library;
#else
        (void)image;
        return PITFALL_UNSUPPORTED("cudaLibraryLoadData needs a CUDA 12.5 or newer runtime");
#endif
    }

    /// The kernel `name` as cudaLaunchKernel takes it (cudaLibraryGetKernel). With lazy
    /// loading (the default since CUDA 12.2) this is where the driver picks the device's image
    /// or JIT-compiles PTX, so where no image for the device (cudaErrorNoKernelImageForDevice)
    /// or PTX newer than the driver (cudaErrorUnsupportedPtxVersion) is reported, at stage init.
    status_or<const void*> kernel(const char* name) const {
#if CUDART_VERSION >= 12050
        cudaKernel_t found = nullptr;
        PITFALL_CUDA_TRY(stage::init, cudaLibraryGetKernel(&found, m_library.get(), name));
        return reinterpret_cast<const void*>(found);
#else
        (void)name;
        return PITFALL_UNSUPPORTED("cudaLibraryGetKernel needs a CUDA 12.5 or newer runtime");
#endif
    }

private:
#if CUDART_VERSION >= 12050
    unique_handle<cudaLibrary_t, library_unload> m_library;
#endif
};

} // namespace pitfall::cuda

#endif // PITFALL_HAS_CUDA
