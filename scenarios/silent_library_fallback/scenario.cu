// silent_library_fallback: a BLAS that does not load, and a program that quietly computes on
// the CPU instead.
//
// What
//   A framework opens its GPU libraries at run time (dlopen) by soname: TensorFlow's
//   dso_loader asks for 'libcudnn.so.8', 'libcublas.so.11'... by the major version it was built
//   for. When the loader cannot find that soname it logs dlerror() as a warning, "Skipping
//   registering GPU devices", and runs on the CPU. Cases (step: C = A B, n x n, float32):
//     reproduce_silent_fallback  dlopen(<next major soname>) fails for real; the program logs
//                                dlerror() and runs the step in a plain host loop: outcome ok,
//                                only ran_on ("cpu: silent fallback after dlopen(...) failed")
//                                shows the library was never used.
//     remedy_fail_loudly         the same failure returned by name: host library_not_loaded,
//                                naming the soname with the loader's words.
//     remedy_built_soname        the soname the program was built against loads and runs the
//                                step (cuBLAS on the device; OpenBLAS on the CPU).
//
// Why it fails
//   A shared library's soname carries its ABI major ("libcublas.so.13"); the loader matches the
//   name exactly (ld.so(8): LD_LIBRARY_PATH, the caller's RUNPATH, /etc/ld.so.cache, the
//   system directories), so a program built for another major, or a library installed off
//   those paths, finds nothing, and dlopen returns NULL with dlerror() "libX.so.N: cannot open
//   shared object file: No such file or directory" (dlopen(3)). Whether that is fatal is the
//   program's choice: a fallback turns it into a job that runs 10-100x slower and says nothing.
//
// Expected per backend
//   cuda  needs no device: reproduce_silent_fallback ok, ran_on "cpu: silent fallback after
//         dlopen(libcublas.so.<built major + 1>) failed"; remedy_fail_loudly error host
//         library_not_loaded at init; remedy_built_soname: cuBLAS loads by its soname (event
//         cublas_load ok), then on a GPU the GEMM runs there (ok, ran_on cuda:0); without a
//         device (here: cudaErrorInsufficientDriver, 35) UNSUPPORTED after the load.
//   cpu   the same with OpenBLAS: dlopen("libopenblas.so.1") fails, the plain loop runs (ok,
//         ran_on "cpu: silent fallback after dlopen(libopenblas.so.1) failed"); fail_loudly:
//         library_not_loaded; built_soname: OpenBLAS's sgemm (the library this program links).
//
// Remedy
//   Treat a library the program needs as a hard requirement: fail at start-up naming the
//   library and the loader's words (tf.config.list_physical_devices('GPU') == [] is an error,
//   not a branch), and install the soname the build expects (or build for the one installed).
//
// Evidence
//   tensorflow/tensorflow#45200, JdeRobot/BehaviorMetrics#385, tensorflow/tensorflow#60854.
//   Facts: dlopen(3) and ld.so(8) (search order, exact soname match); the soname this build's
//   SDK opens: pitfall/detail/cuda_libraries.hpp (soname()).
#include "pitfall/scenario.hpp"

#if PITFALL_HAS_CUDA
#include "pitfall/detail/cuda_libraries.hpp"
#endif

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

/// OpenBLAS's soname (its Makefile.system: MAJOR_VERSION 0 since 0.2): what the CPU build links.
constexpr const char* openblas_soname = "libopenblas.so.0";

/// The soname the program was built against, for the backend.
template <class Backend> std::string built_soname() {
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda)
        return pitfall::detail::soname(pitfall::detail::cuda_library::cublas);
#endif
    return openblas_soname;
}

/// "libcublas.so.13" -> "libcublas.so.14": a major this machine does not have (yet).
std::string next_major(const std::string& soname) {
    const auto dot = soname.rfind('.');
    if (dot == std::string::npos || dot + 1 == soname.size())
        return soname + ".1";
    char* end = nullptr;
    const long major = std::strtol(soname.c_str() + dot + 1, &end, 10);
    if (end == nullptr || *end != '\0')
        return soname + ".1";
    return soname.substr(0, dot + 1) + std::to_string(major + 1);
}

template <class Backend> status_or<std::string> missing_soname(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const std::string asked, ctx.param_string("missing_soname"));
    return asked == "auto" ? next_major(built_soname<Backend>()) : asked;
}

/// The loader's answer to dlopen(soname): "" when it loaded (the handle is closed again).
std::string try_dlopen(const std::string& soname) {
    dlerror(); // clear a stale message
    void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
        dlclose(handle);
        return "";
    }
    const char* why = dlerror();
    return why != nullptr ? why : "dlopen returned NULL without a dlerror() message";
}

// ---------------------------------------------------------------------------------------------
// The step and its reference. Row-major n x n: C[i][j] = sum_k A[i][k] B[k][j].
// ---------------------------------------------------------------------------------------------
struct problem {
    int n = 0;
    std::vector<float> a;
    std::vector<float> b;
};

problem make_problem(int n) {
    problem p;
    p.n = n;
    const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    p.a.resize(count);
    p.b.resize(count);
    for (std::size_t i = 0; i < count; ++i) { // small exact values: the sums stay well in range
        p.a[i] = static_cast<float>(static_cast<int>(i * 7 % 23) - 11) / 8.0f;
        p.b[i] = static_cast<float>(static_cast<int>(i * 5 % 19) - 9) / 4.0f;
    }
    return p;
}

/// The fallback a framework would run: the plain i-j-k loop in float32.
std::vector<float> host_loop_gemm(const problem& p) {
    const auto n = static_cast<std::size_t>(p.n);
    std::vector<float> c(n * n, 0.0f);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (std::size_t k = 0; k < n; ++k)
                sum += p.a[i * n + k] * p.b[k * n + j];
            c[i * n + j] = sum;
        }
    return c;
}

/// The independent reference: float64, i-k-j order, and the bound n * 2^-23 * sum |a||b| per
/// element (float32 accumulation of n products, any order).
status check_against_reference(pitfall::context& ctx, const problem& p,
                               const std::vector<float>& c) {
    const auto n = static_cast<std::size_t>(p.n);
    std::vector<double> exact(n * n, 0.0);
    std::vector<double> magnitude(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < n; ++k) {
            const double aik = p.a[i * n + k];
            for (std::size_t j = 0; j < n; ++j) {
                exact[i * n + j] += aik * p.b[k * n + j];
                magnitude[i * n + j] += std::fabs(aik * p.b[k * n + j]);
            }
        }
    std::size_t outside = 0;
    double worst = 0.0;
    for (std::size_t e = 0; e < n * n; ++e) {
        const double err = std::fabs(static_cast<double>(c[e]) - exact[e]);
        worst = std::fmax(worst, err);
        if (err > static_cast<double>(n) * 0x1p-23 * magnitude[e] + 1e-30)
            ++outside;
    }
    ctx.record("max_abs_error", worst);
    std::ostringstream detail;
    detail << outside << " of " << n * n << " elements outside n * 2^-23 * sum|a||b| (largest "
           << "error " << worst << ")";
    ctx.check("gemm_matches_float64_reference", outside == 0, detail.str());
    return status::ok();
}

// ---------------------------------------------------------------------------------------------
// The GEMM through the backend's BLAS (cuBLAS on the device, OpenBLAS on the host). Row-major
// C = A B is column-major C^T = B^T A^T: the operands go in swapped, untransposed.
// ---------------------------------------------------------------------------------------------
template <class Backend> status_or<std::vector<float>> backend_gemm(const problem& p) {
    const std::size_t count = p.a.size();
    PITFALL_ASSIGN_OR_RETURN(auto d_a, Backend::template allocate<float>(count));
    PITFALL_ASSIGN_OR_RETURN(auto d_b, Backend::template allocate<float>(count));
    PITFALL_ASSIGN_OR_RETURN(auto d_c, Backend::template allocate<float>(count));
    PITFALL_TRY(Backend::copy_to_device(d_a, p.a.data(), count));
    PITFALL_TRY(Backend::copy_to_device(d_b, p.b.data(), count));
    PITFALL_TRY(Backend::gemm(pitfall::transpose::no, pitfall::transpose::no, p.n, p.n, p.n, 1.0f,
                              d_b.data(), p.n, d_a.data(), p.n, 0.0f, d_c.data(), p.n));
    PITFALL_TRY(Backend::synchronize());
    std::vector<float> c(count);
    PITFALL_TRY(Backend::copy_to_host(c.data(), d_c, count));
    return c;
}

// ---------------------------------------------------------------------------------------------
// The cases.
// ---------------------------------------------------------------------------------------------
template <class Backend> status reproduce_silent_fallback(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("n"));
    PITFALL_ASSIGN_OR_RETURN(const std::string soname, missing_soname<Backend>(ctx));
    ctx.record_info("built_soname", built_soname<Backend>());
    ctx.record_info("asked_soname", soname);
    const std::string why = try_dlopen(soname);
    if (why.empty())
        return PITFALL_UNSUPPORTED(soname + " loads on this machine: nothing to fall back from");
    ctx.record_info("dlerror", why);
    // What the frameworks do: a warning on stderr that scrolls by, and the CPU path.
    std::fprintf(stderr,
                 "warning: could not load dynamic library '%s'; dlerror: %s; "
                 "skipping the accelerated BLAS\n",
                 soname.c_str(), why.c_str());
    const problem p = make_problem(static_cast<int>(n));
    const std::vector<float> c = host_loop_gemm(p);
    PITFALL_TRY(check_against_reference(ctx, p, c));
    ctx.ran_on("cpu: silent fallback after dlopen(" + soname + ") failed");
    return status::ok();
}

template <class Backend> status remedy_fail_loudly(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const std::string soname, missing_soname<Backend>(ctx));
    ctx.record_info("asked_soname", soname);
    const std::string why = try_dlopen(soname);
    if (why.empty())
        return PITFALL_UNSUPPORTED(soname + " loads on this machine: nothing to fail on");
    ctx.record_info("dlerror", why);
    return PITFALL_HOST_ERROR(pitfall::stage::init, pitfall::host_error::library_not_loaded,
                              soname + " could not be loaded: " + why +
                                  " (the step needs it: no CPU fallback)");
}

template <class Backend> status remedy_built_soname(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("n"));
    ctx.record_info("built_soname", built_soname<Backend>());
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        // The load needs no device: its outcome is real everywhere. The GEMM after it does.
        const status loaded =
            pitfall::detail::open_cuda_library(pitfall::detail::cuda_library::cublas);
        ctx.record_event("cublas_load", loaded);
        PITFALL_TRY(loaded);
        int devices = 0;
        if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
            const status none =
                e != cudaSuccess
                    ? pitfall::detail::from_cuda(e, pitfall::stage::init,
                                                 "cudaGetDeviceCount(&devices)", __FILE__, __LINE__)
                    : status::error(pitfall::library::cuda_runtime, "cudaErrorNoDevice",
                                    "no CUDA device", pitfall::stage::init);
            return status::unsupported_because(
                none, built_soname<Backend>() + " loaded; the GEMM needs a device: " + none.name());
        }
    }
#endif
    const problem p = make_problem(static_cast<int>(n));
    PITFALL_ASSIGN_OR_RETURN(const std::vector<float> c, backend_gemm<Backend>(p));
    PITFALL_TRY(check_against_reference(ctx, p, c));
    ctx.ran_on(Backend::describe_device());
    return status::ok();
}

} // namespace

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_silent_fallback), PITFALL_VARIANT(remedy_fail_loudly),
                 PITFALL_VARIANT(remedy_built_soname))
