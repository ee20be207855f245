#include "pitfall/backend.hpp"

#include <cblas.h>

#include <fstream>
#include <new>
#include <thread>

namespace pitfall {

status_or<void*> cpu_backend::allocate_bytes(std::size_t bytes) {
    auto& tracker = memory_tracker::for_backend(backend_kind::cpu);
    PITFALL_TRY(tracker.reserve(bytes));
    // operator new, not malloc: a real host OOM is std::bad_alloc, caught and returned as data.
    try {
        return ::operator new(bytes == 0 ? 1 : bytes);
    } catch (const std::bad_alloc&) {
        tracker.release(bytes);
        tracker.count_failure();
        return PITFALL_HOST_ERROR(stage::alloc, host_error::bad_alloc,
                                  "host allocation of " + std::to_string(bytes) + " bytes failed");
    }
}

void cpu_backend::deallocate_bytes(void* data, std::size_t bytes) {
    ::operator delete(data);
    memory_tracker::for_backend(backend_kind::cpu).release(bytes);
}

namespace {
CBLAS_TRANSPOSE to_cblas(transpose t) {
    return t == transpose::yes ? CblasTrans : CblasNoTrans;
}
} // namespace

status cpu_backend::gemm(transpose ta, transpose tb, int m, int n, int k, float alpha,
                         const float* a, int lda, const float* b, int ldb, float beta, float* c,
                         int ldc) {
    cblas_sgemm(CblasColMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
    return status::ok();
}

status cpu_backend::gemm(transpose ta, transpose tb, int m, int n, int k, double alpha,
                         const double* a, int lda, const double* b, int ldb, double beta, double* c,
                         int ldc) {
    cblas_dgemm(CblasColMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
    return status::ok();
}

status_or<cpu_backend::blas_info> cpu_backend::blas_handle() {
    blas_info info;
    info.config = openblas_get_config();
    info.threads = openblas_get_num_threads();
    return info;
}

std::string cpu_backend::describe_device() {
    std::string model = "unknown cpu";
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos)
                model = line.substr(line.find_first_not_of(' ', colon + 1));
            break;
        }
    }
    return "cpu: " + model + ", " + std::to_string(std::thread::hardware_concurrency()) +
           " threads";
}

} // namespace pitfall
