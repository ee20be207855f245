// no_kernel_image: a binary built only for an older GPU architecture, run on a newer one.
//
// What
//   The kernel fill_index (fill_index.cu) is built apart from the program, three ways
//   (scenario.json device_images), embedded as bytes and loaded at run time with
//   cudaLibraryLoadData (CUDA 12.0+), then launched over `elements`:
//     reproduce_old_arch_only  SASS sm_75 only, no PTX: what a build with an old
//                              TORCH_CUDA_ARCH_LIST / CMAKE_CUDA_ARCHITECTURES ships.
//     remedy_with_ptx          the same SASS plus PTX compute_75: the driver JIT-compiles it for
//                              any newer device.
//     remedy_device_sass       SASS for sm_75, 80, 86, 89, 90 (CUDA 11.8 builds them all): no
//                              JIT at all on 7.5 to 9.0 (10.x and 12.x need PTX or their SASS).
//   Needs no device: each case reads its image with the SDK's fatbin reader and predicts what a
//   device of `compute_capability` (default 9.0) runs (pitfall/detail/fatbin.hpp predict_image,
//   the rules of docs/cuda-rules.md#binary-compatibility). On a GPU it also loads and launches
//   the image, and checks the device's answer against the prediction for its own CC.
//
// Why it fails
//   SASS for sm_XY runs only on compute capability X.Z with Z >= Y (same major): sm_75 SASS
//   cannot run on 8.x, 9.0, 10.x or 12.x. PTX for compute_XY could be JIT-compiled for any
//   X.Y or newer, but this image has none. The driver finds no image for the device and the
//   runtime answers cudaErrorNoKernelImageForDevice (209; the driver's
//   CUDA_ERROR_NO_BINARY_FOR_GPU, 209).
//
// Expected per backend
//   cuda  without a device (here: cudaErrorInsufficientDriver, 35): every case ok with its
//         prediction for 9.0: reproduce "fails: ... cudaErrorNoKernelImageForDevice",
//         remedy_with_ptx "runs by PTX JIT from compute_75", remedy_device_sass "runs from
//         SASS sm_90". On a GPU of CC >= 8.0 (H100 9.0, A100 8.0, L4 8.9...):
//         reproduce_old_arch_only error cudaErrorNoKernelImageForDevice at init: the load
//         succeeds and cudaLibraryGetKernel answers it, lazy and eager loading alike (seen on
//         an H200, driver 580.159.04, CUDA 13.0, 2026-11-26, with a standalone program making
//         the same calls); the remedies ok on the device. On a 7.5 GPU
//         all three run (SASS sm_75).
//   cpu   UNSUPPORTED: no CPU analog here (see cuda_only below).
//
// Remedy
//   Build for every architecture the program will meet, SASS for each and PTX for the newest
//   (nvcc -gencode arch=compute_90,code=[sm_90,compute_90]; CMake "...;90-real;90-virtual";
//   PyTorch TORCH_CUDA_ARCH_LIST="...;9.0+PTX"); check a binary with cuobjdump --list-elf
//   --list-ptx, or as this scenario does, before it meets the device.
//
// Evidence
//   vllm-project/vllm#19906, vllm-project/vllm#20748, uzh-rpg/agile_autonomy#95.
//   Facts: docs/cuda-rules.md#binary-compatibility; CUDA Runtime API, cudaLibraryLoadData and
//   cudaLibraryGetKernel (Library Management); driver_types.h cudaErrorNoKernelImageForDevice.
#include "pitfall/scenario.hpp"

#include "pitfall/detail/fatbin.hpp"

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

// The images, embedded by add_failure_scenario (cmake/EmbedBinary.cmake) in a CUDA build.
#if PITFALL_HAS_CUDA
extern const unsigned char pitfall_image_sm75_sass_only[];
extern const std::size_t pitfall_image_sm75_sass_only_size;
extern const unsigned char pitfall_image_sm75_sass_and_ptx[];
extern const std::size_t pitfall_image_sm75_sass_and_ptx_size;
extern const unsigned char pitfall_image_sass_per_arch[];
extern const std::size_t pitfall_image_sass_per_arch_size;
#endif

namespace {

using pitfall::stage;
using pitfall::status;
using pitfall::detail::image_path;
using pitfall::detail::image_prediction;

constexpr const char* no_cpu_analog =
    "a CPU program has one instruction set per binary, chosen when it is built, with no driver "
    "picking among per-model images at load; the CPU's nearest failure (an x86-64 level the CPU "
    "lacks) is version_mismatch's arch_coverage";

#if PITFALL_HAS_CUDA
struct device_image {
    const unsigned char* bytes;
    std::size_t size;
    image_path expected; ///< what the case expects for the default compute capability
};

/// Loads `image` as a library, launches fill_index over `n` and checks every element. An error
/// comes back at the stage it surfaced: init (load, kernel lookup), launch, synchronize.
status load_and_run(pitfall::context& ctx, const unsigned char* image, unsigned n) {
#if CUDART_VERSION < 12000 // cudaLibrary* arrived in CUDA 12.0
    (void)ctx, (void)image, (void)n;
    return PITFALL_UNSUPPORTED("cudaLibraryLoadData needs a CUDA 12.0 or newer runtime");
#else
    cudaLibrary_t library = nullptr;
    PITFALL_CUDA_TRY(stage::init, cudaLibraryLoadData(&library, image, nullptr, nullptr, 0, nullptr,
                                                      nullptr, 0));
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

const char* path_name(image_path how) {
    return how == image_path::sass ? "sass" : how == image_path::ptx_jit ? "ptx_jit" : "no_image";
}

/// The image's contents, the prediction for `compute_capability`, and on a GPU the real load
/// and launch checked against the prediction for the device's own compute capability.
status judge_and_run(pitfall::context& ctx, const device_image& image) {
    PITFALL_ASSIGN_OR_RETURN(const std::string cc_text, ctx.param_string("compute_capability"));
    PITFALL_ASSIGN_OR_RETURN(const long long elements, ctx.param_int("elements"));
    const auto cc = pitfall::detail::parse_compute_capability(cc_text);
    if (!cc)
        return pitfall::bad_parameter("compute_capability", "'" + cc_text + "' is not X.Y");
    PITFALL_ASSIGN_OR_RETURN(
        const auto images,
        pitfall::detail::parse_fatbin(
            std::string_view(reinterpret_cast<const char*>(image.bytes), image.size),
            "embedded image"));
    std::string embedded;
    for (const auto& img : images)
        embedded += (embedded.empty() ? "" : ", ") + img.describe();
    ctx.record_info("embedded", embedded.empty() ? "no images" : embedded);
    ctx.record("image_count", static_cast<double>(images.size()));

    // The driver decides only for PTX (its ISA); 0 (no driver here) leaves that unchecked.
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        driver = 0;
    const bool force_jit = std::getenv("CUDA_FORCE_PTX_JIT") != nullptr &&
                           std::string(std::getenv("CUDA_FORCE_PTX_JIT")) == "1";
    const bool no_jit = std::getenv("CUDA_DISABLE_PTX_JIT") != nullptr &&
                        std::string(std::getenv("CUDA_DISABLE_PTX_JIT")) == "1";
    const image_prediction asked =
        pitfall::detail::predict_image(images, *cc, driver, force_jit, no_jit);
    ctx.record_info("prediction.cc_" + cc_text, asked.describe(*cc));
    ctx.check("prediction_as_expected", asked.how == image.expected,
              std::string("for ") + cc_text + ": " + path_name(asked.how) + ", expected " +
                  path_name(image.expected));

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
        return status::ok(); // the prediction is the case's finding here
    }
    int major = 0;
    int minor = 0;
    PITFALL_CUDA_TRY(stage::init,
                     cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    PITFALL_CUDA_TRY(stage::init,
                     cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    const auto device_cc = static_cast<unsigned>(major * 10 + minor);
    const image_prediction on_device =
        pitfall::detail::predict_image(images, device_cc, driver, force_jit, no_jit);
    ctx.record_info("prediction.device", on_device.describe(device_cc));
    const status ran = load_and_run(ctx, image.bytes, static_cast<unsigned>(elements));
    ctx.check("device_matches_prediction",
              on_device.how == image_path::no_image ? ran.name() == on_device.error : ran.is_ok(),
              "predicted '" + on_device.describe(device_cc) + "', the device answered " +
                  (ran.is_ok() ? std::string("ok") : ran.name()));
    return ran;
}
#endif

} // namespace

template <class Backend> status reproduce_old_arch_only(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA
    return judge_and_run(ctx, {pitfall_image_sm75_sass_only, pitfall_image_sm75_sass_only_size,
                               image_path::no_image});
#else
    (void)ctx;
    return status::ok();
#endif
}

template <class Backend> status remedy_with_ptx(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA
    return judge_and_run(ctx, {pitfall_image_sm75_sass_and_ptx,
                               pitfall_image_sm75_sass_and_ptx_size, image_path::ptx_jit});
#else
    (void)ctx;
    return status::ok();
#endif
}

template <class Backend> status remedy_device_sass(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA
    return judge_and_run(
        ctx, {pitfall_image_sass_per_arch, pitfall_image_sass_per_arch_size, image_path::sass});
#else
    (void)ctx;
    return status::ok();
#endif
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_old_arch_only), PITFALL_VARIANT(remedy_with_ptx),
                 PITFALL_VARIANT(remedy_device_sass))
