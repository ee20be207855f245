// pitfall/cudnn.hpp: cuDNN statuses as pitfall statuses (scenarios whose scenario.json lists
// "cudnn" in "links": cuDNN's headers; the SDK opens libcudnn on first call).
//
//   PITFALL_CUDNN_TRY(cudnnCreate(&handle));   // no GPU: CUDNN_STATUS_NOT_INITIALIZED
//   ctx.record_event("cudnnOpsVersionCheck",
//                    PITFALL_CUDNN_STATUS(cudnnOpsVersionCheck(), "cudnnOpsVersionCheck"));
#pragma once

#include "pitfall/detail/cuda_libraries.hpp"
#include "pitfall/status.hpp"

#include <cudnn.h>

namespace pitfall::detail {
/// Name from cudnnGetErrorString ("CUDNN_STATUS_NOT_SUPPORTED"), never the number: cuDNN 9
/// renumbered its codes hierarchically.
/// A call that never reached cuDNN (opened on first call, pitfall/detail/cuda_libraries.hpp)
/// is reported as the reason it did not: host_error::library_not_loaded.
inline status from_cudnn(cudnnStatus_t err, const char* expr, const char* file, int line) {
    if (const char* reason = unforwarded_call_reason(cuda_library::cudnn))
        return library_not_loaded(reason, expr, file, line);
    return status::error(library::cudnn, cudnnGetErrorString(err), expr, stage::library_call, false,
                         file, line);
}
} // namespace pitfall::detail

namespace pitfall {
/// ok for CUDNN_STATUS_SUCCESS; any other status as PITFALL_CUDNN_TRY reports it, for a caller
/// that keeps it (an event) instead of returning it.
inline status cudnn_status_of(cudnnStatus_t err, const char* expr, const char* file = "",
                              int line = 0) {
    if (err == CUDNN_STATUS_SUCCESS)
        return status::ok();
    return detail::from_cudnn(err, expr, file, line);
}
} // namespace pitfall

/// cudnn_status_of with this file and line: `PITFALL_CUDNN_STATUS(result, "cudnnOpsVersionCheck")`.
#define PITFALL_CUDNN_STATUS(err_, expr_)                                                          \
    ::pitfall::cudnn_status_of((err_), (expr_), __FILE__, __LINE__)

#define PITFALL_CUDNN_TRY(expr)                                                                    \
    do {                                                                                           \
        const cudnnStatus_t pitfall_cudnn_err_ = (expr);                                           \
        if (pitfall_cudnn_err_ != CUDNN_STATUS_SUCCESS)                                            \
            return ::pitfall::detail::from_cudnn(pitfall_cudnn_err_, #expr, __FILE__, __LINE__);   \
    } while (0)
