// Host half of the CUDA backend: plain C++ against cudart and cuBLAS (no kernels here).
#include "pitfall/backend.hpp"
#include "pitfall/detail/cuda_libraries.hpp"

#include <sstream>
#include <vector>

namespace pitfall {

namespace detail {
status from_cuda(cudaError_t err, stage where, const char* expr, const char* file, int line) {
    const char* name = cudaGetErrorName(err);
    const bool sticky = is_sticky_cuda_error(name);
    if (!sticky)
        (void)cudaGetLastError(); // recorded: clear it so the next call does not report it again
    std::string message = cudaGetErrorString(err);
    message += " (from ";
    message += expr;
    message += ")";
    return status::error(library::cuda_runtime, name, std::move(message), where, sticky, file,
                         line);
}

status from_cublas(cublasStatus_t err, const char* expr, const char* file, int line) {
    // cuBLAS is opened on first call: a call that never reached it answered a stand-in status,
    // and the reason (the loader's words) is the outcome.
    if (const char* reason = unforwarded_call_reason(cuda_library::cublas))
        return library_not_loaded(reason, expr, file, line);
    // After a sticky CUDA fault cuBLAS answers EXECUTION_FAILED or INTERNAL_ERROR; the fault
    // itself is the outcome worth naming, wherever it surfaced.
    const cudaError_t pending = cudaPeekAtLastError();
    if (pending != cudaSuccess && is_sticky_cuda_error(cudaGetErrorName(pending)))
        return from_cuda(pending, stage::library_call, expr, file, line);
    return status::error(library::cublas, cublasGetStatusName(err),
                         std::string(cublasGetStatusString(err)) + " (from " + expr + ")",
                         stage::library_call, false, file, line);
}
} // namespace detail

status cuda_probe() {
    int count = 0;
    PITFALL_CUDA_TRY(stage::init, cudaGetDeviceCount(&count));
    if (count == 0)
        return status::error(library::cuda_runtime, "cudaErrorNoDevice",
                             "cudaGetDeviceCount reported 0 devices", stage::init);
    return status::ok();
}

namespace {
// Filled at static initialisation (one reader per .cu file of the program), read at the end of
// the case: function-local statics, so the order of initialisation across files cannot matter.
std::vector<detail::kernel_counter_reader>& kernel_counter_readers() {
    static std::vector<detail::kernel_counter_reader> readers;
    return readers;
}
unsigned long long& library_calls_counted() {
    static unsigned long long count = 0;
    return count;
}
} // namespace

namespace detail {
bool register_kernel_counter(kernel_counter_reader reader) {
    kernel_counter_readers().push_back(reader);
    return true;
}
void count_library_call() {
    ++library_calls_counted();
}
} // namespace detail

status_or<gpu_work_count> count_gpu_work() {
    // Work still queued on any stream is counted once it has run; a fault it meets is the
    // answer instead of a count.
    PITFALL_CUDA_TRY(stage::synchronize, cudaDeviceSynchronize());
    gpu_work_count work;
    for (const auto read : kernel_counter_readers()) {
        unsigned long long here = 0;
        PITFALL_CUDA_TRY(stage::copy, read(&here));
        work.kernels += here;
    }
    work.library_calls = library_calls_counted();
    return work;
}

status_or<void*> cuda_backend::allocate_bytes(std::size_t bytes) {
    auto& tracker = memory_tracker::for_backend(backend_kind::cuda);
    PITFALL_TRY(tracker.reserve(bytes));
    void* data = nullptr;
    const cudaError_t err = cudaMalloc(&data, bytes);
    if (err != cudaSuccess) {
        tracker.release(bytes);
        tracker.count_failure();
        return detail::from_cuda(err, stage::alloc, "cudaMalloc", __FILE__, __LINE__);
    }
    return data;
}

void cuda_backend::deallocate_bytes(void* data, std::size_t bytes) {
    // A free after a sticky error fails too; the error is already recorded, nothing to add.
    (void)cudaFree(data);
    memory_tracker::for_backend(backend_kind::cuda).release(bytes);
}

status cuda_backend::copy_bytes_to_device(void* dst, const void* src, std::size_t bytes) {
    PITFALL_CUDA_TRY(stage::copy, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return status::ok();
}

status cuda_backend::copy_bytes_to_host(void* dst, const void* src, std::size_t bytes) {
    PITFALL_CUDA_TRY(stage::copy, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return status::ok();
}

status cuda_backend::synchronize() {
    PITFALL_CUDA_TRY(stage::synchronize, cudaDeviceSynchronize());
    return status::ok();
}

status_or<cublasHandle_t> cuda_backend::blas_handle() {
    // One handle per process, made on first use and kept (cuBLAS handles are costly to create).
    static cublasHandle_t handle = nullptr;
    if (handle == nullptr)
        PITFALL_CUBLAS_TRY(cublasCreate(&handle));
    return handle;
}

namespace {
cublasOperation_t to_cublas(transpose t) {
    return t == transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}
} // namespace

status cuda_backend::gemm(transpose ta, transpose tb, int m, int n, int k, float alpha,
                          const float* a, int lda, const float* b, int ldb, float beta, float* c,
                          int ldc) {
    PITFALL_ASSIGN_OR_RETURN(cublasHandle_t handle, blas_handle());
    PITFALL_CUBLAS_TRY(cublasSgemm(handle, to_cublas(ta), to_cublas(tb), m, n, k, &alpha, a, lda, b,
                                   ldb, &beta, c, ldc));
    detail::count_library_call();
    return status::ok();
}

status cuda_backend::gemm(transpose ta, transpose tb, int m, int n, int k, double alpha,
                          const double* a, int lda, const double* b, int ldb, double beta,
                          double* c, int ldc) {
    PITFALL_ASSIGN_OR_RETURN(cublasHandle_t handle, blas_handle());
    PITFALL_CUBLAS_TRY(cublasDgemm(handle, to_cublas(ta), to_cublas(tb), m, n, k, &alpha, a, lda, b,
                                   ldb, &beta, c, ldc));
    detail::count_library_call();
    return status::ok();
}

cuda_backend::timer::~timer() {
    if (m_start != nullptr)
        (void)cudaEventDestroy(m_start);
    if (m_stop != nullptr)
        (void)cudaEventDestroy(m_stop);
}

status cuda_backend::timer::start() {
    if (m_start == nullptr) {
        PITFALL_CUDA_TRY(stage::init, cudaEventCreate(&m_start));
        PITFALL_CUDA_TRY(stage::init, cudaEventCreate(&m_stop));
    }
    PITFALL_CUDA_TRY(stage::launch, cudaEventRecord(m_start));
    return status::ok();
}

status_or<double> cuda_backend::timer::stop_seconds() {
    PITFALL_CUDA_TRY(stage::launch, cudaEventRecord(m_stop));
    PITFALL_CUDA_TRY(stage::synchronize, cudaEventSynchronize(m_stop));
    float ms = 0.f;
    PITFALL_CUDA_TRY(stage::synchronize, cudaEventElapsedTime(&ms, m_start, m_stop));
    return static_cast<double>(ms) / 1000.0;
}

std::string cuda_backend::describe_device() {
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    cudaDeviceProp prop{};
    if (err == cudaSuccess)
        err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return std::string("cuda: no device (") + cudaGetErrorName(err) + ")";
    }
    std::ostringstream out;
    out << "cuda:" << device << ' ' << prop.name << " (sm_" << prop.major << prop.minor << ", "
        << prop.multiProcessorCount << " SMs)";
    return out.str();
}

} // namespace pitfall
