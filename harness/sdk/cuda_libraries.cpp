// cuBLAS and cuDNN opened on first call (pitfall/detail/cuda_libraries.hpp says why): the entry
// points the SDK and the scenarios call, each with its header's exact signature (the compiler
// rejects a definition whose C function differs from the declaration), forwarding to the
// function of the same name in the library opened with dlopen.
#include "pitfall/detail/cuda_libraries.hpp"

#include <cublas_v2.h>
#if PITFALL_HAS_CUDNN
#include <cudnn.h>
#endif

#include <dlfcn.h>

#include <array>
#include <cstddef>
#include <mutex>
#include <string>

#define PITFALL_STRINGIFY_INNER(x) #x
#define PITFALL_STRINGIFY(x) PITFALL_STRINGIFY_INNER(x)

namespace pitfall::detail {

const char* soname(cuda_library lib) {
    switch (lib) {
    case cuda_library::cublas: return "libcublas.so." PITFALL_STRINGIFY(CUBLAS_VER_MAJOR);
    case cuda_library::cudnn:
#if PITFALL_HAS_CUDNN
        return "libcudnn.so." PITFALL_STRINGIFY(CUDNN_MAJOR);
#else
        return "libcudnn";
#endif
    }
    return "?";
}

namespace {
constexpr std::size_t library_count = 2;

std::size_t index_of(cuda_library lib) {
    return static_cast<std::size_t>(lib);
}

struct opened_library {
    std::once_flag once;
    void* handle = nullptr;
    std::string failure; // why handle is null: the loader's words
};

/// The library, opened on the first call for it from any thread; never closed (its functions
/// may be called until the process ends, from static destructors too).
const opened_library& opened(cuda_library lib) {
    static std::array<opened_library, library_count> libraries;
    opened_library& library = libraries[index_of(lib)];
    std::call_once(library.once, [&library, lib] {
        const char* name = soname(lib);
#if !PITFALL_HAS_CUDNN
        if (lib == cuda_library::cudnn) {
            library.failure = "this build has no cuDNN (CMake found none)";
            return;
        }
#endif
        // RTLD_NOW: a library missing a symbol it needs fails here, as a value, rather than at
        // whichever call first reaches that symbol. RTLD_GLOBAL: what it exports serves the
        // libraries it opens itself (cuDNN's sub-libraries), as when it was linked.
        library.handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
        if (library.handle == nullptr) {
            const char* why = dlerror();
            library.failure = std::string(name) + " could not be loaded: " +
                              (why != nullptr ? why : "dlopen returned no handle");
        }
    });
    return library;
}

/// Per thread, for each library: why its latest call was not forwarded (null: it was).
thread_local std::array<const std::string*, library_count> unforwarded{};

/// One function of a library: its address, or why there is none.
template <class Function> struct entry_point {
    Function* address = nullptr;
    std::string failure;
};

template <class Function> entry_point<Function> resolve(cuda_library lib, const char* symbol) {
    entry_point<Function> entry;
    const opened_library& library = opened(lib);
    if (library.handle == nullptr) {
        entry.failure = library.failure;
        return entry;
    }
    (void)dlerror(); // clear: dlsym's null is an error only with a message
    void* address = dlsym(library.handle, symbol);
    if (address == nullptr) {
        const char* why = dlerror();
        entry.failure = std::string(soname(lib)) + " has no " + symbol + ": " +
                        (why != nullptr ? why : "dlsym found it null");
        return entry;
    }
    entry.address = reinterpret_cast<Function*>(address);
    return entry;
}

/// True when the call goes to the library; either way this thread's reason is updated, so a
/// status constructor reading it right after the call describes this call.
template <class Function> bool forwarding(cuda_library lib, const entry_point<Function>& entry) {
    unforwarded[index_of(lib)] = entry.address == nullptr ? &entry.failure : nullptr;
    return entry.address != nullptr;
}
} // namespace

status open_cuda_library(cuda_library lib) {
#if !PITFALL_HAS_CUDNN
    if (lib == cuda_library::cudnn)
        return PITFALL_UNSUPPORTED("built without cuDNN");
#endif
    const opened_library& library = opened(lib);
    if (library.handle == nullptr)
        return status::error(host_error::library_not_loaded, library.failure, stage::init);
    return status::ok();
}

const char* unforwarded_call_reason(cuda_library lib) {
    const std::string* reason = unforwarded[index_of(lib)];
    return reason != nullptr ? reason->c_str() : nullptr;
}

status library_not_loaded(const char* reason, const char* expr, const char* file, int line) {
    return status::error(host_error::library_not_loaded,
                         std::string(reason) + " (from " + expr + ")", stage::init, file, line);
}

} // namespace pitfall::detail

// The body of an entry point: resolve `symbol` on the first call (a function-local static, so
// once, thread-safe), then forward `args`, or answer `fallback` when the library or the function
// is missing. `args` is parenthesised: "(handle, stream)", "()".
#define PITFALL_FORWARD(lib, symbol, fallback, args)                                               \
    static const auto entry = ::pitfall::detail::resolve<decltype(::symbol)>(                      \
        ::pitfall::detail::cuda_library::lib, #symbol);                                            \
    return ::pitfall::detail::forwarding(::pitfall::detail::cuda_library::lib, entry)              \
               ? entry.address args                                                                \
               : (fallback)

// =============================================================================================
// cuBLAS (cublas_api.h; cublas_v2.h maps cublasCreate to cublasCreate_v2 and so on). A call
// that cannot be forwarded answers CUBLAS_STATUS_NOT_INITIALIZED, the status of a cuBLAS that
// could not start; from_cublas reports the reason.
// =============================================================================================

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
    PITFALL_FORWARD(cublas, cublasCreate_v2, CUBLAS_STATUS_NOT_INITIALIZED, (handle));
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
    PITFALL_FORWARD(cublas, cublasDestroy_v2, CUBLAS_STATUS_NOT_INITIALIZED, (handle));
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
    PITFALL_FORWARD(cublas, cublasSetStream_v2, CUBLAS_STATUS_NOT_INITIALIZED, (handle, streamId));
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                                  size_t workspaceSizeInBytes) {
    PITFALL_FORWARD(cublas, cublasSetWorkspace_v2, CUBLAS_STATUS_NOT_INITIALIZED,
                    (handle, workspace, workspaceSizeInBytes));
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    PITFALL_FORWARD(cublas, cublasSetMathMode, CUBLAS_STATUS_NOT_INITIALIZED, (handle, mode));
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                           cublasOperation_t transb, int m, int n, int k,
                                           const float* alpha, const float* A, int lda,
                                           const float* B, int ldb, const float* beta, float* C,
                                           int ldc) {
    PITFALL_FORWARD(cublas, cublasSgemm_v2, CUBLAS_STATUS_NOT_INITIALIZED,
                    (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc));
}

cublasStatus_t CUBLASWINAPI cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                           cublasOperation_t transb, int m, int n, int k,
                                           const double* alpha, const double* A, int lda,
                                           const double* B, int ldb, const double* beta, double* C,
                                           int ldc) {
    PITFALL_FORWARD(cublas, cublasDgemm_v2, CUBLAS_STATUS_NOT_INITIALIZED,
                    (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc));
}

// The names of statuses need the library too; without it they say so (the status constructors
// never get here for a call that was not forwarded: they report the reason instead).
const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
    PITFALL_FORWARD(cublas, cublasGetStatusName, "cublasStatus_t (libcublas not loaded)", (status));
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    PITFALL_FORWARD(cublas, cublasGetStatusString, "libcublas could not be loaded", (status));
}

// =============================================================================================
// cuDNN (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h, cudnn_adv.h). A call that cannot be forwarded
// answers CUDNN_STATUS_NOT_INITIALIZED; the version queries answer 0 (no library, no version).
// =============================================================================================
#if PITFALL_HAS_CUDNN

size_t CUDNNWINAPI cudnnGetVersion(void) {
    PITFALL_FORWARD(cudnn, cudnnGetVersion, 0, ());
}

size_t CUDNNWINAPI cudnnGetCudartVersion(void) {
    PITFALL_FORWARD(cudnn, cudnnGetCudartVersion, 0, ());
}

const char* CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
    PITFALL_FORWARD(cudnn, cudnnGetErrorString, "cudnnStatus_t (libcudnn not loaded)", (status));
}

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t* handle) {
    PITFALL_FORWARD(cudnn, cudnnCreate, CUDNN_STATUS_NOT_INITIALIZED, (handle));
}

cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle) {
    PITFALL_FORWARD(cudnn, cudnnDestroy, CUDNN_STATUS_NOT_INITIALIZED, (handle));
}

cudnnStatus_t CUDNNWINAPI cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
    PITFALL_FORWARD(cudnn, cudnnCreateTensorDescriptor, CUDNN_STATUS_NOT_INITIALIZED, (tensorDesc));
}

cudnnStatus_t CUDNNWINAPI cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                                     cudnnTensorFormat_t format,
                                                     cudnnDataType_t dataType, int n, int c, int h,
                                                     int w) {
    PITFALL_FORWARD(cudnn, cudnnSetTensor4dDescriptor, CUDNN_STATUS_NOT_INITIALIZED,
                    (tensorDesc, format, dataType, n, c, h, w));
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
    PITFALL_FORWARD(cudnn, cudnnDestroyTensorDescriptor, CUDNN_STATUS_NOT_INITIALIZED,
                    (tensorDesc));
}

#if CUDNN_MAJOR >= 9
size_t CUDNNWINAPI cudnnGetMaxDeviceVersion(void) {
    PITFALL_FORWARD(cudnn, cudnnGetMaxDeviceVersion, 0, ());
}

cudnnStatus_t CUDNNWINAPI cudnnGraphVersionCheck(void) {
    PITFALL_FORWARD(cudnn, cudnnGraphVersionCheck, CUDNN_STATUS_NOT_INITIALIZED, ());
}

cudnnStatus_t CUDNNWINAPI cudnnOpsVersionCheck(void) {
    PITFALL_FORWARD(cudnn, cudnnOpsVersionCheck, CUDNN_STATUS_NOT_INITIALIZED, ());
}

cudnnStatus_t CUDNNWINAPI cudnnCnnVersionCheck(void) {
    PITFALL_FORWARD(cudnn, cudnnCnnVersionCheck, CUDNN_STATUS_NOT_INITIALIZED, ());
}

cudnnStatus_t CUDNNWINAPI cudnnAdvVersionCheck(void) {
    PITFALL_FORWARD(cudnn, cudnnAdvVersionCheck, CUDNN_STATUS_NOT_INITIALIZED, ());
}
#endif

// cuDNN 9 marks the legacy activation API deprecated; float64_inputs calls it on purpose (the
// seed's sigmoid), so its entry points exist here. decltype names the function: a "use".
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
cudnnStatus_t CUDNNWINAPI
cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* activationDesc) {
    PITFALL_FORWARD(cudnn, cudnnCreateActivationDescriptor, CUDNN_STATUS_NOT_INITIALIZED,
                    (activationDesc));
}

cudnnStatus_t CUDNNWINAPI cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc,
                                                       cudnnActivationMode_t mode,
                                                       cudnnNanPropagation_t reluNanOpt,
                                                       double coef) {
    PITFALL_FORWARD(cudnn, cudnnSetActivationDescriptor, CUDNN_STATUS_NOT_INITIALIZED,
                    (activationDesc, mode, reluNanOpt, coef));
}

cudnnStatus_t CUDNNWINAPI
cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t activationDesc) {
    PITFALL_FORWARD(cudnn, cudnnDestroyActivationDescriptor, CUDNN_STATUS_NOT_INITIALIZED,
                    (activationDesc));
}

cudnnStatus_t CUDNNWINAPI cudnnActivationForward(cudnnHandle_t handle,
                                                 cudnnActivationDescriptor_t activationDesc,
                                                 const void* alpha,
                                                 const cudnnTensorDescriptor_t xDesc, const void* x,
                                                 const void* beta,
                                                 const cudnnTensorDescriptor_t yDesc, void* y) {
    PITFALL_FORWARD(cudnn, cudnnActivationForward, CUDNN_STATUS_NOT_INITIALIZED,
                    (handle, activationDesc, alpha, xDesc, x, beta, yDesc, y));
}
#pragma GCC diagnostic pop

#endif // PITFALL_HAS_CUDNN
