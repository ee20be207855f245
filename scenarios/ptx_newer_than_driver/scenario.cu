// ptx_newer_than_driver: PTX written by a newer toolkit than the driver's JIT knows.
//
// What
//   PTX carries its ISA version in its first directive (`.version X.Y`). A driver JIT-compiles
//   PTX up to the ISA of its own CUDA version and refuses newer PTX. Cases:
//     reproduce_future_ptx                 a small hand-written PTX kernel (fill_index) at
//                                          `.version 9.9` (future_ptx_isa), loaded with
//                                          cudaLibraryLoadData: no driver takes it.
//     reproduce_build_ptx_on_older_driver  the PTX this very program embeds (read from its own
//                                          .nv_fatbin with the SDK's fatbin reader: PTX ISA 9.0
//                                          from CUDA 13.0's nvcc) judged against a driver of
//                                          `driver_version` (default: the release before the
//                                          one it needs, CUDA 12.9 for ISA 9.0): refused, and
//                                          the oldest driver that takes it named.
//     remedy_driver_ptx_isa                the same kernel written at the newest ISA that
//                                          driver JITs (8.8 for CUDA 12.9): accepted, and on a
//                                          GPU loaded and run.
//
// Why it fails
//   The PTX ISA grows with each toolkit (new instructions, new directives); a driver's JIT only
//   knows the ISA of its own CUDA version. A program built with a newer toolkit than the
//   driver (a container with CUDA 12.4 on a host with an R470 driver; CUDA 13.2 on R580, CUDA
//   13.0) runs its SASS where there is some, but every PTX it needs JIT for is refused with
//   cudaErrorUnsupportedPtxVersion (222, "the provided PTX was compiled with an unsupported
//   toolchain"; the driver's CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222). Minor-version
//   compatibility of the runtime does not cover the PTX.
//
// Expected per backend
//   cuda  without a device (here: no driver, cudaErrorInsufficientDriver) each case is its
//         rule, ok: reproduce_future_ptx "no driver in the table JITs PTX ISA 9.9";
//         reproduce_build_ptx_on_older_driver "PTX ISA 9.0 needs CUDA 13.0 (13000), a CUDA 12.9
//         driver JITs up to 8.8: cudaErrorUnsupportedPtxVersion"; remedy_driver_ptx_isa
//         "PTX ISA 8.8: accepted by the CUDA 12.9 driver". A CUDA 12.x build judges its own
//         PTX ISA (8.x) against the release before its toolkit the same way. On a GPU:
//         reproduce_future_ptx error cudaErrorUnsupportedPtxVersion at init: cudaLibraryLoadData
//         takes the text and cudaLibraryGetKernel, where the JIT runs, refuses it (seen on an
//         H200, driver 580.159.04, with a standalone program making the same calls, 2026-11-26;
//         the same kernel at .version 8.8 and 9.0 ran there); the build's PTX case is the same
//         rule (ok); remedy_driver_ptx_isa ok on the device, every element checked.
//   cpu   UNSUPPORTED: no CPU analog (see cuda_only below).
//
// Remedy
//   Ship SASS for the GPUs deployed on (no JIT, no PTX ISA check), and PTX no newer than the
//   oldest driver supported: build with the toolkit that driver supports (nvcc's PTX ISA is the
//   toolkit's), or upgrade the driver (NVIDIA's forward-compatibility package on data-center
//   GPUs). Read a binary's PTX ISA with cuobjdump --list-ptx, or as this scenario does.
//
// Evidence
//   Tiiny-AI/PowerInfer#229, NVIDIA-AI-IOT/Lidar_AI_Solution#289, weiyithu/SurroundOcc#121.
//   Facts: docs/cuda-rules.md#ptx-isa-versions (the PTX ISA per toolkit table, from the PTX ISA
//   release notes; pitfall/detail/fatbin.hpp max_ptx_isa, first_driver_for_ptx_isa,
//   driver_can_jit); driver_types.h cudaErrorUnsupportedPtxVersion; CUDA Runtime API,
//   cudaLibraryLoadData.
#include "pitfall/scenario.hpp"

#include "pitfall/detail/fatbin.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

using pitfall::stage;
using pitfall::status;
using pitfall::status_or;
using pitfall::detail::ptx_isa;

constexpr const char* no_cpu_analog =
    "PTX and its JIT belong to the GPU driver; a CPU binary is machine code, loaded as is";

status_or<ptx_isa> parse_isa(const std::string& param, const std::string& text) {
    unsigned major = 0;
    unsigned minor = 0;
    char dot = 0;
    char extra = 0;
    if (std::sscanf(text.c_str(), "%u%c%u%c", &major, &dot, &minor, &extra) != 3 || dot != '.' ||
        minor > 9)
        return pitfall::bad_parameter(param, "'" + text + "' is not a PTX ISA version X.Y");
    return ptx_isa{major, minor};
}

std::string driver_text(int version) {
    return version == 0 ? std::string("none")
                        : "CUDA " + pitfall::detail::cuda_version_text(version) + " (" +
                              std::to_string(version) + ")";
}

/// What the table says of `isa` against `driver`: recorded, and whether it is accepted.
bool judge(pitfall::context& ctx, const std::string& prefix, ptx_isa isa, int driver) {
    const auto first = pitfall::detail::first_driver_for_ptx_isa(isa);
    const auto newest = pitfall::detail::max_ptx_isa(driver);
    const bool accepted = pitfall::detail::driver_can_jit(isa, driver);
    ctx.record_info(prefix + "needs_driver",
                    first ? driver_text(*first)
                          : "no driver in the table (docs/cuda-rules.md#ptx-isa-versions) JITs "
                            "PTX ISA " +
                                isa.text());
    if (driver == 0) // no driver to judge against: what it needs is the finding
        return accepted;
    ctx.record_info(
        prefix + "rule",
        "PTX ISA " + isa.text() + " on a " + driver_text(driver) + " driver (JITs up to " +
            (newest ? newest->text() : std::string("?")) +
            "): " + (accepted ? "accepted" : "refused, cudaErrorUnsupportedPtxVersion"));
    return accepted;
}

#if PITFALL_HAS_CUDA
/// fill_index in PTX (out[i] = 3 i + 1 for i < n), for sm_75 and newer; `.version` is filled
/// in. Checked with CUDA 13.0's ptxas at .version 9.0 and 7.8 (it refuses 9.9: "Unsupported
/// .version 9.9; current version is '9.0'").
std::string fill_index_ptx(ptx_isa isa) {
    return ".version " + isa.text() + R"ptx(
.target sm_75
.address_size 64

.visible .entry fill_index(
    .param .u64 fill_index_out,
    .param .u32 fill_index_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [fill_index_out];
    ld.param.u32 %r1, [fill_index_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    mad.lo.s32 %r6, %r5, 3, 1;
    st.global.u32 [%rd4], %r6;
DONE:
    ret;
}
)ptx";
}

/// The driver of this machine, 0 when none answers (then nothing is loaded).
int real_driver() {
    int driver = 0;
    return cudaDriverGetVersion(&driver) == cudaSuccess ? driver : 0;
}

/// Loads `ptx` (text) with cudaLibraryLoadData, launches fill_index over `n` and checks every
/// element. The error comes back at the stage it surfaced (init: the load, where the JIT runs).
status load_and_run(pitfall::context& ctx, const std::string& ptx, unsigned n) {
#if CUDART_VERSION < 12000 // cudaLibrary* arrived in CUDA 12.0
    (void)ctx, (void)ptx, (void)n;
    return PITFALL_UNSUPPORTED("cudaLibraryLoadData needs a CUDA 12.0 or newer runtime");
#else
    cudaLibrary_t library = nullptr;
    PITFALL_CUDA_TRY(stage::init, cudaLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0,
                                                      nullptr, nullptr, 0));
    struct unload_at_exit {
        cudaLibrary_t library;
        ~unload_at_exit() { (void)cudaLibraryUnload(library); }
    } unload{library};
    cudaKernel_t kernel = nullptr;
    PITFALL_CUDA_TRY(stage::init, cudaLibraryGetKernel(&kernel, library, "fill_index"));
    PITFALL_ASSIGN_OR_RETURN(auto d_out, pitfall::cuda_backend::allocate<unsigned>(n));
    unsigned* out = d_out.data();
    void* args[] = {&out, &n};
    PITFALL_CUDA_TRY(stage::launch,
                     cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3((n + 255) / 256),
                                      dim3(256), args, 0, nullptr));
    PITFALL_CUDA_TRY(stage::synchronize, cudaDeviceSynchronize());
    std::vector<unsigned> h_out(n);
    PITFALL_TRY(pitfall::cuda_backend::copy_to_host(h_out.data(), d_out, n));
    unsigned wrong = 0;
    for (unsigned i = 0; i < n; ++i)
        wrong += h_out[i] != 3u * i + 1u ? 1u : 0u;
    ctx.check("fill_index_output", wrong == 0,
              std::to_string(wrong) + " of " + std::to_string(n) + " elements differ from 3 i + 1");
    return status::ok();
#endif
}

/// Where a device answers: `ptx` loaded and run, the outcome checked against the rule for the
/// real driver. Without one: ok, the rule is the finding (the query's error an event).
status on_device(pitfall::context& ctx, const std::string& ptx, ptx_isa isa) {
    PITFALL_ASSIGN_OR_RETURN(const long long elements, ctx.param_int("elements"));
    int count = 0;
    const cudaError_t count_err = cudaGetDeviceCount(&count);
    if (count_err != cudaSuccess || count == 0) {
        ctx.record_event("device_query",
                         count_err != cudaSuccess
                             ? pitfall::detail::from_cuda(count_err, stage::init,
                                                          "cudaGetDeviceCount(&count)", __FILE__,
                                                          __LINE__)
                             : status::error(pitfall::library::cuda_runtime, "cudaErrorNoDevice",
                                             "no CUDA device", stage::init));
        return status::ok();
    }
    const int driver = real_driver();
    const bool accepted = judge(ctx, "device.", isa, driver);
    const status ran = load_and_run(ctx, ptx, static_cast<unsigned>(elements));
    ctx.check("device_matches_rule",
              accepted ? ran.is_ok() : ran.name() == "cudaErrorUnsupportedPtxVersion",
              "the rule says " + std::string(accepted ? "accepted" : "refused") + " on " +
                  driver_text(driver) + ", the load answered " +
                  (ran.is_ok() ? std::string("ok") : ran.name()));
    return ran;
}
#endif

} // namespace

template <class Backend> status reproduce_future_ptx(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
    PITFALL_ASSIGN_OR_RETURN(const std::string text, ctx.param_string("future_ptx_isa"));
    PITFALL_ASSIGN_OR_RETURN(const ptx_isa isa, parse_isa("future_ptx_isa", text));
    const bool known = pitfall::detail::first_driver_for_ptx_isa(isa).has_value();
    (void)judge(ctx, "", isa, 0);
    // What the table says of this ISA is recorded, not checked: the table is the rule itself,
    // and only a driver (on_device) can say whether it holds.
    ctx.record_info("driver_in_table",
                    "PTX ISA " + isa.text() + (known ? " has a driver in the table" : " has none"));
#if PITFALL_HAS_CUDA
    return on_device(ctx, fill_index_ptx(isa), isa);
#else
    return status::ok();
#endif
}

/// The PTX images this very program carries (its .nv_fatbin), newest ISA last.
status_or<std::vector<pitfall::detail::fatbin_image>> build_ptx() {
    char path[PATH_MAX] = {};
    const ssize_t length = ::readlink("/proc/self/exe", path, sizeof path - 1);
    if (length <= 0)
        return PITFALL_HOST_ERROR(stage::init, pitfall::host_error::no_self_exe,
                                  "readlink(/proc/self/exe) failed");
    const std::string self(path, static_cast<std::size_t>(length));
    PITFALL_ASSIGN_OR_RETURN(const auto elf, pitfall::detail::read_elf(self));
    PITFALL_ASSIGN_OR_RETURN(const auto images, pitfall::detail::fatbin_images(elf, self));
    std::vector<pitfall::detail::fatbin_image> ptx;
    for (const auto& img : images)
        if (img.is_ptx())
            ptx.push_back(img);
    std::sort(ptx.begin(), ptx.end(), [](const auto& a, const auto& b) {
        return ptx_isa{a.version_major, a.version_minor} <
               ptx_isa{b.version_major, b.version_minor};
    });
    if (ptx.empty())
        return PITFALL_UNSUPPORTED("this build embeds no PTX (CMAKE_CUDA_ARCHITECTURES names no "
                                   "virtual architecture): nothing for a driver to JIT");
    return ptx;
}

/// driver_version, or for 0 the release just before the first driver that JITs the newest PTX
/// this program carries: the table's previous entry (13000 for ISA 9.0 -> 12.9, 12090).
status_or<int> judged_driver(pitfall::context& ctx,
                             const std::vector<pitfall::detail::fatbin_image>& ptx) {
    PITFALL_ASSIGN_OR_RETURN(const long long asked, ctx.param_int("driver_version"));
    if (asked != 0)
        return static_cast<int>(asked);
    const ptx_isa newest{ptx.back().version_major, ptx.back().version_minor};
    const auto needs = pitfall::detail::first_driver_for_ptx_isa(newest);
    const auto previous_isa = needs ? pitfall::detail::max_ptx_isa(*needs - 1) : std::nullopt;
    const auto previous =
        previous_isa ? pitfall::detail::first_driver_for_ptx_isa(*previous_isa) : std::nullopt;
    if (!previous)
        return PITFALL_UNSUPPORTED("PTX ISA " + newest.text() +
                                   " has no older release in the table to judge it against: "
                                   "give driver_version");
    ctx.record_info("judged_driver", driver_text(*previous) + ": the release before " +
                                         driver_text(*needs) + ", which PTX ISA " + newest.text() +
                                         " needs");
    return *previous;
}

template <class Backend> status reproduce_build_ptx_on_older_driver(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
    PITFALL_ASSIGN_OR_RETURN(const auto ptx, build_ptx());
    PITFALL_ASSIGN_OR_RETURN(const int driver, judged_driver(ctx, ptx));
    int refused = 0;
    for (const auto& img : ptx)
        if (!judge(ctx, img.name() + ".", ptx_isa{img.version_major, img.version_minor}, driver))
            ++refused;
    const int count = static_cast<int>(ptx.size());
    ctx.record_info("embedded_ptx", ptx.back().describe());
    ctx.record("ptx_images", count);
    ctx.record("ptx_images_refused", refused);
    // The prediction of the table for the PTX this build really embeds (its .version read from
    // the fatbin): recorded, since the judged driver is chosen from the same table.
    ctx.record_info("build_ptx_refused_by_driver",
                    std::to_string(refused) + " of " + std::to_string(count) +
                        " embedded PTX images refused by a " + driver_text(driver) + " driver");
    return status::ok();
}

template <class Backend> status remedy_driver_ptx_isa(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
    PITFALL_ASSIGN_OR_RETURN(const auto ptx, build_ptx());
    PITFALL_ASSIGN_OR_RETURN(const int driver, judged_driver(ctx, ptx));
    const auto isa = pitfall::detail::max_ptx_isa(driver);
    if (!isa)
        return pitfall::bad_parameter("driver_version", "older than any driver in the PTX table");
    ctx.record_info("written_ptx_isa", isa->text());
    const bool accepted = judge(ctx, "", *isa, driver);
    ctx.record_info("accepted_by_driver", std::string(accepted ? "yes" : "no") + ": PTX ISA " +
                                              isa->text() + " on a " + driver_text(driver) +
                                              " driver");
#if PITFALL_HAS_CUDA
    return on_device(ctx, fill_index_ptx(*isa), *isa);
#else
    return status::ok();
#endif
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_future_ptx),
                 PITFALL_VARIANT(reproduce_build_ptx_on_older_driver),
                 PITFALL_VARIANT(remedy_driver_ptx_isa))
