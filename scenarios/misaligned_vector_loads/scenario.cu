// misaligned_vector_loads: 16-byte vector loads from a view that is not 16-byte aligned.
//
// What
//   y = 2 x + 1 over a view x that starts `offset_floats` floats into a 16-byte aligned buffer
//   (a tensor view x[1:], a column slice at an odd offset), computed four floats at a time with
//   16-byte loads, as vectorised kernels do. Three variants:
//     reproduce_misaligned_vector_load  16-byte aligned loads straight from the view.
//     remedy_scalar_head                scalar loads up to the first 16-byte boundary, then
//                                       aligned vectors, then a scalar tail.
//     remedy_unaligned_loads            cpu: unaligned loads (movups); cuda: copy the view to a
//                                       fresh aligned buffer, then float4 loads.
//
// Why it fails
//   A float4 load on the GPU is one 16-byte memory instruction (ld.global.v4.f32) whose address
//   must be a multiple of 16 ("CUDA C++ Programming Guide", "Size and Alignment Requirement":
//   any access to data residing in global memory compiles to a single instruction only if the
//   data is naturally aligned; a misaligned address gives undefined results or a fault). A view
//   at float offset 1 is 4 bytes past a boundary: the kernel faults with
//   cudaErrorMisalignedAddress (716), reported at the next synchronising call, and the error
//   is STICKY (driver_types.h; docs/cuda-rules.md#sticky-errors). On x86-64 the SSE aligned
//   load movaps (_mm_load_ps) raises a general-protection exception when its memory operand
//   is not 16-byte aligned (Intel SDM vol. 2, MOVAPS: "#GP(0) If a memory operand is not
//   aligned on a 16-byte boundary"); Linux delivers it as SIGSEGV and the process dies.
//   The CPU fault is real only through movaps itself: a compiler may fold _mm_load_ps into an
//   arithmetic operand, or under AVX encode it as vmovups/vaddps, which do not check, so the
//   deliberate fault issues movaps with inline assembly. It is x86-64 only (__SSE__);
//   elsewhere the variant is UNSUPPORTED.
//
// Expected per backend
//   cpu   reproduce_misaligned_vector_load: the process dies with SIGSEGV (no result file; the
//         baseline is a blessed crash); the case restores SIGSEGV's default action first, so a
//         sanitizer build (whose handler would report and exit 1) dies the same way. Remedies: ok,
//         y exact (0 mismatches against the float64 plain-loop reference; 2 x + 1 is exact in float
//         for these inputs).
//   cuda  reproduce_misaligned_vector_load: cudaErrorMisalignedAddress, sticky, at the
//         synchronize; event after_fault_cuda_malloc fails with it too. Remedies: ok, exact.
//         A standalone copy of scale_float4 on an H200 (driver 580.159.04, CUDA 13.0,
//         2026-11-26) compiled to LDG.E.128 and gave exactly that for offsets 1 and 2 (offset 0:
//         ok). All four components must be used: a kernel that reads only v.x and v.w was
//         narrowed by the compiler to scalar loads and did not fault.
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
//
// Remedy
//   Check the pointer's alignment before vectorising (reinterpret_cast<uintptr_t>(p) % 16):
//   peel a scalar head up to the boundary (or fall back to scalar code), or use loads that do
//   not need alignment (movups), or copy the view to an aligned buffer first (what a
//   framework's .contiguous()/clone does: its allocations are 256-byte aligned).
//
// Evidence
//   apache/tvm#8540 (vectorised load from an odd offset: CUDA misaligned address),
//   ggml-org/llama.cpp#18799 (int4 copy from an 8-byte aligned pointer: Warp Misaligned
//   Address), darktable-org/darktable#6811 and osu-crypto/libOTe#129 (_mm_load_ps on an
//   unaligned address segfaults; fixed with _mm_loadu_ps).
#include "pitfall/scenario.hpp"

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__SSE__)
#define MISALIGNED_HAS_SSE 1
#include <xmmintrin.h>
#else
#define MISALIGNED_HAS_SSE 0
#endif

namespace misaligned_vector_loads {

constexpr std::size_t vector_bytes = 16;

/// Floats before the first 16-byte boundary at or after p (0 when p is aligned).
std::size_t floats_to_boundary(const float* p) {
    const auto misalignment = reinterpret_cast<std::uintptr_t>(p) % vector_bytes;
    return misalignment == 0 ? 0 : (vector_bytes - misalignment) / sizeof(float);
}

/// The scalar form of the op, for heads, tails and the non-x86 path.
struct scale_scalar {
    const float* x;
    float* y;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { y[i] = 2.f * x[i] + 1.f; }
};

// =============================================================================================
// CPU: SSE.
// =============================================================================================
#if MISALIGNED_HAS_SSE
/// DELIBERATE FAULT (reproduce_misaligned_vector_load, cpu): movaps straight from `x`, written
/// in assembly so that the instruction really is the aligned load (see the header). With x
/// 4 bytes past a boundary the first movaps raises #GP: SIGSEGV, the process ends here.
void scale_movaps(const float* x, float* y, std::size_t vectors) {
    const __m128 two = _mm_set1_ps(2.f), one = _mm_set1_ps(1.f);
    for (std::size_t j = 0; j < vectors; ++j) {
        __m128 v;
        __asm__ volatile("movaps (%1), %0" : "=x"(v) : "r"(x + 4 * j) : "memory");
        _mm_storeu_ps(y + 4 * j, _mm_add_ps(_mm_mul_ps(v, two), one));
    }
}

/// Aligned intrinsic loads: `x` must be 16-byte aligned (remedy_scalar_head guarantees it).
void scale_load_ps(const float* x, float* y, std::size_t vectors) {
    const __m128 two = _mm_set1_ps(2.f), one = _mm_set1_ps(1.f);
    for (std::size_t j = 0; j < vectors; ++j)
        _mm_storeu_ps(y + 4 * j, _mm_add_ps(_mm_mul_ps(_mm_load_ps(x + 4 * j), two), one));
}

/// Unaligned loads (movups): any address.
void scale_loadu_ps(const float* x, float* y, std::size_t vectors) {
    const __m128 two = _mm_set1_ps(2.f), one = _mm_set1_ps(1.f);
    for (std::size_t j = 0; j < vectors; ++j)
        _mm_storeu_ps(y + 4 * j, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x + 4 * j), two), one));
}
#endif

// =============================================================================================
// CUDA: float4.
// =============================================================================================
#if PITFALL_HAS_CUDA && defined(__CUDACC__)
/// One float4 per index: a single 16-byte load (ld.global.v4.f32) from x + 4 j.
struct scale_float4 {
    const float* x;
    float* y;
    __device__ void operator()(std::size_t j) const {
        const float4 v = reinterpret_cast<const float4*>(x)[j];
        y[4 * j + 0] = 2.f * v.x + 1.f;
        y[4 * j + 1] = 2.f * v.y + 1.f;
        y[4 * j + 2] = 2.f * v.z + 1.f;
        y[4 * j + 3] = 2.f * v.w + 1.f;
    }
};
#endif

/// y[0, vectors * 4) with 16-byte loads from x: on the CPU movaps when `fault_path` (the
/// deliberate fault), else _mm_loadu_ps when `unaligned_ok`, else _mm_load_ps; float4 on the
/// GPU.
template <class Backend>
pitfall::status scale_vectors(const float* x, float* y, std::size_t vectors, bool fault_path,
                              bool unaligned_ok) {
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
#if MISALIGNED_HAS_SSE
        if (fault_path)
            scale_movaps(x, y, vectors);
        else if (unaligned_ok)
            scale_loadu_ps(x, y, vectors);
        else
            scale_load_ps(x, y, vectors);
        return pitfall::status::ok();
#else
        (void)fault_path;
        (void)unaligned_ok;
        return Backend::for_each(vectors * 4, scale_scalar{x, y});
#endif
    } else {
        (void)fault_path;
        (void)unaligned_ok;
#if PITFALL_HAS_CUDA && defined(__CUDACC__)
        return Backend::for_each(vectors, scale_float4{x, y});
#else
        return pitfall::status::ok();
#endif
    }
}

/// The buffer (n + offset floats, the view inside it) on the backend, the output and the host
/// copy of the view's values: x[i] = i mod 4096 - 2048, all exact through 2 x + 1.
template <class Backend> struct data {
    pitfall::buffer<float, Backend> buffer;
    pitfall::buffer<float, Backend> y;
    std::vector<float> h_x;
    std::size_t n = 0, offset = 0;
    float* view() { return buffer.data() + offset; }
};

template <class Backend> pitfall::status_or<data<Backend>> prepare(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long n, ctx.param_int("n"));
    PITFALL_ASSIGN_OR_RETURN(const long long offset, ctx.param_int("offset_floats"));
    data<Backend> d;
    d.n = static_cast<std::size_t>(n);
    d.offset = static_cast<std::size_t>(offset);
    d.h_x.resize(d.n);
    for (std::size_t i = 0; i < d.n; ++i)
        d.h_x[i] = static_cast<float>(static_cast<long long>(i % 4096) - 2048);
    PITFALL_ASSIGN_OR_RETURN(d.buffer, Backend::template allocate<float>(d.n + d.offset));
    PITFALL_ASSIGN_OR_RETURN(d.y, Backend::template allocate<float>(d.n));
    std::vector<float> whole(d.n + d.offset, 0.f);
    std::copy(d.h_x.begin(), d.h_x.end(), whole.begin() + static_cast<std::ptrdiff_t>(d.offset));
    PITFALL_TRY(Backend::copy_to_device(d.buffer, whole.data(), whole.size()));
    // The facts the variants rest on: the allocation is 16-byte aligned, the view is not.
    const auto base_mod = reinterpret_cast<std::uintptr_t>(d.buffer.data()) % vector_bytes;
    const auto view_mod = reinterpret_cast<std::uintptr_t>(d.view()) % vector_bytes;
    ctx.record("buffer_address_mod_16", static_cast<double>(base_mod), "B");
    ctx.record("view_address_mod_16", static_cast<double>(view_mod), "B");
    ctx.check("view_misaligned", base_mod == 0 && view_mod != 0,
              "buffer % 16 = " + std::to_string(base_mod) +
                  ", view % 16 = " + std::to_string(view_mod));
    return d;
}

/// y against the independent reference: a plain loop in float64 over the host values.
template <class Backend> pitfall::status check_y(pitfall::context& ctx, const data<Backend>& d) {
    std::vector<float> y(d.n);
    PITFALL_TRY(Backend::copy_to_host(y.data(), d.y, d.n));
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < d.n; ++i) {
        const double want = 2.0 * static_cast<double>(d.h_x[i]) + 1.0;
        mismatches += static_cast<double>(y[i]) == want ? 0 : 1;
    }
    ctx.record("mismatches", static_cast<double>(mismatches));
    ctx.check("y_exact", mismatches == 0,
              std::to_string(mismatches) + " of " + std::to_string(d.n) + " outputs differ");
    return pitfall::status::ok();
}

template <class Backend> pitfall::status reproduce_misaligned_vector_load(pitfall::context& ctx) {
#if !MISALIGNED_HAS_SSE
    if constexpr (Backend::kind == pitfall::backend_kind::cpu)
        return PITFALL_UNSUPPORTED("the CPU fault is x86-64 SSE's movaps (an aligned load that "
                                   "checks alignment); this build targets another CPU");
#endif
    PITFALL_ASSIGN_OR_RETURN(auto d, prepare<Backend>(ctx));
    ctx.ran_on(Backend::describe_device());
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        // Nothing after the fault runs: say what is coming first (the harness keeps stderr).
        std::fprintf(stderr,
                     "misaligned_vector_loads: movaps from %p (address %% 16 = %u); SIGSEGV is "
                     "the expected outcome\n",
                     static_cast<const void*>(d.view()),
                     static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(d.view()) % 16));
        std::fflush(stderr);
        // The outcome is the kernel's signal. A sanitizer build installs its own SIGSEGV
        // handler (AddressSanitizer reports and exits 1): the default action is restored so
        // that every build dies the same way, as the program would without one.
        std::signal(SIGSEGV, SIG_DFL);
    }
    const pitfall::status fault = [&] {
        PITFALL_TRY(scale_vectors<Backend>(d.view(), d.y.data(), d.n / 4, true, false));
        return Backend::synchronize();
    }();
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        // Proof of stickiness: an unrelated allocation after the fault fails with it too.
        void* unrelated = nullptr;
        const cudaError_t err = cudaMalloc(&unrelated, 256);
        ctx.record_event("after_fault_cuda_malloc",
                         err == cudaSuccess
                             ? pitfall::status::ok()
                             : pitfall::detail::from_cuda(err, pitfall::stage::alloc, "cudaMalloc",
                                                          __FILE__, __LINE__));
        if (err == cudaSuccess)
            cudaFree(unrelated);
    }
#endif
    return fault;
}

template <class Backend> pitfall::status remedy_scalar_head(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(auto d, prepare<Backend>(ctx));
    const float* x = d.view();
    float* y = d.y.data();
    const std::size_t head = std::min(floats_to_boundary(x), d.n);
    const std::size_t vectors = (d.n - head) / 4;
    const std::size_t tail_start = head + vectors * 4;
    ctx.record("head_floats", static_cast<double>(head));
    PITFALL_TRY(Backend::for_each(head, scale_scalar{x, y}));
    PITFALL_TRY(scale_vectors<Backend>(x + head, y + head, vectors, false, false));
    PITFALL_TRY(Backend::for_each(d.n - tail_start, scale_scalar{x + tail_start, y + tail_start}));
    PITFALL_TRY(Backend::synchronize());
    ctx.ran_on(Backend::describe_device());
    return check_y(ctx, d);
}

template <class Backend> pitfall::status remedy_unaligned_loads(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(auto d, prepare<Backend>(ctx));
    const std::size_t vectors = d.n / 4;
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        PITFALL_TRY(scale_vectors<Backend>(d.view(), d.y.data(), vectors, false, true));
        PITFALL_TRY(Backend::for_each(
            d.n - vectors * 4, scale_scalar{d.view() + vectors * 4, d.y.data() + vectors * 4}));
    } else {
#if PITFALL_HAS_CUDA
        // The GPU has no unaligned 16-byte load: copy the view into a fresh allocation
        // (cudaMalloc returns 256-byte aligned memory), then vectorise over the copy.
        PITFALL_ASSIGN_OR_RETURN(auto aligned, Backend::template allocate<float>(d.n));
        PITFALL_CUDA_TRY(
            pitfall::stage::copy,
            cudaMemcpy(aligned.data(), d.view(), d.n * sizeof(float), cudaMemcpyDeviceToDevice));
        ctx.record("copy_address_mod_16",
                   static_cast<double>(reinterpret_cast<std::uintptr_t>(aligned.data()) % 16), "B");
        PITFALL_TRY(scale_vectors<Backend>(aligned.data(), d.y.data(), vectors, false, false));
        PITFALL_TRY(Backend::for_each(d.n - vectors * 4, scale_scalar{aligned.data() + vectors * 4,
                                                                      d.y.data() + vectors * 4}));
#endif
    }
    PITFALL_TRY(Backend::synchronize());
    ctx.ran_on(Backend::describe_device());
    return check_y(ctx, d);
}

} // namespace misaligned_vector_loads

using namespace misaligned_vector_loads; // the variants by their own names
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_misaligned_vector_load),
                 PITFALL_VARIANT(remedy_scalar_head), PITFALL_VARIANT(remedy_unaligned_loads))
