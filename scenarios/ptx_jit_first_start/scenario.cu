// ptx_jit_first_start: a program that carries only PTX for the GPU starts slowly, every time the
// JIT cache cannot help.
//
// What
//   The kernel `heavy` (heavy_kernel.cu, unrolled into thousands of instructions) is built
//   apart from the program two ways (scenario.json device_images): PTX text for compute_75
//   only, and SASS for sm_80, 86, 89, 90 only. Each case starts child processes of this program
//   (helper_start) with a fresh, empty CUDA_CACHE_PATH of its own (a temporary folder), each
//   child timing: load the image (cudaLibraryLoadData), find the kernel, run it once. Cases:
//     reproduce_first_start     one start from the PTX: the JIT's time, the cache filled.
//     reproduce_cache_disabled  two starts with CUDA_CACHE_DISABLE=1: both JIT, nothing cached.
//     remedy_warm_cache         two starts sharing the cache folder: the second reads the JIT's
//                               result instead of compiling again.
//     remedy_sass               one start from SASS for the device: no JIT, nothing cached.
//   The start times and the cache folder's size are measurements (judged, where at all,
//   against blessed ones from the same machine); checks are only what the cache rules make
//   certain: written after a JIT, empty when disabled.
//
// Why it fails
//   A device with no SASS among a module's images runs its PTX after the driver JIT-compiles it
//   for the device at load (with lazy loading, CUDA 12.2+, at the kernel's first use). That
//   compile costs milliseconds to minutes, by the size of the code. The driver keeps its result
//   in the compute cache (~/.nv/ComputeCache; CUDA_CACHE_PATH elsewhere; CUDA_CACHE_MAXSIZE
//   bytes, default 256 MiB; CUDA_CACHE_DISABLE=1 turns it off), keyed by the PTX, the device
//   and the driver. A cache that is disabled, too small for the code, read-only, or thrown away
//   with the container (a fresh HOME) makes every start pay the JIT again; a driver upgrade
//   invalidates it once.
//
// Expected per backend
//   cuda  on a GPU (cc 8.0, 8.6, 8.9, 9.0 for remedy_sass): all four ok; the PTX starts take
//         far longer than the SASS one and than a warm second start; cache_bytes > 0 after
//         reproduce_first_start and remedy_warm_cache, 0 with CUDA_CACHE_DISABLE=1 and after
//         the SASS start (seen with a small kernel on an H200, driver 580.159.04: 4406 bytes
//         after a PTX load, an index and one entry; 0 after SASS; no folder when disabled). Without
//         a device (here: no driver) each child is UNSUPPORTED (cudaErrorInsufficientDriver, 35)
//         and so is its parent, with the child's reason.
//   cpu   UNSUPPORTED: no CPU analog (see cuda_only below).
//
// Remedy
//   Ship SASS for every GPU the program meets (-gencode arch=compute_XY,code=sm_XY; PTX only
//   for the newest, for GPUs not yet made), or keep the JIT cache: a persistent CUDA_CACHE_PATH
//   (a mounted volume in containers), CUDA_CACHE_MAXSIZE large enough for the code, never
//   CUDA_CACHE_DISABLE=1.
//
// Evidence
//   FORTH-ModelBasedTracker/HandTracker#7, dl-container-registry/furnari-flow#3,
//   ComputationalRadiationPhysics/isaac#24.
//   Facts: CUDA C++ Programming Guide, "CUDA Environment Variables" (CUDA_CACHE_DISABLE,
//   CUDA_CACHE_MAXSIZE, CUDA_CACHE_PATH) and "Just-in-Time Compilation"; NVIDIA Technical Blog,
//   "CUDA Pro Tip: Understand Fat Binaries and JIT Caching"; docs/cuda-rules.md#binary-
//   compatibility and #lazy-loading.
#include "pitfall/scenario.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#if PITFALL_HAS_CUDA
extern const unsigned char pitfall_image_heavy_ptx[];
extern const std::size_t pitfall_image_heavy_ptx_size;
extern const unsigned char pitfall_image_heavy_sass[];
extern const std::size_t pitfall_image_heavy_sass_size;
#endif

namespace {

using pitfall::stage;
using pitfall::status;
using pitfall::status_or;

constexpr const char* no_cpu_analog =
    "a CPU binary is machine code loaded as is: nothing is compiled at load, nothing cached";

/// A fresh, empty folder for one case's JIT cache, removed with the case.
class temp_cache {
public:
    static status_or<temp_cache> make() {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern = (tmp != nullptr && tmp[0] != '\0' ? std::string(tmp) : "/tmp") +
                              "/pitfall-jit-cache-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr)
            return PITFALL_HOST_ERROR(stage::init, pitfall::host_error::no_temp_dir,
                                      "mkdtemp(" + pattern + ") failed");
        return temp_cache(pattern);
    }
    temp_cache(temp_cache&& other) noexcept : m_path(std::move(other.m_path)) {
        other.m_path.clear();
    }
    temp_cache(const temp_cache&) = delete;
    temp_cache& operator=(const temp_cache&) = delete;
    temp_cache& operator=(temp_cache&&) = delete;
    ~temp_cache() {
        std::error_code ignored; // a leftover temporary folder is no reason to fail the case
        if (!m_path.empty())
            std::filesystem::remove_all(m_path, ignored);
    }
    const std::string& path() const { return m_path; }

    /// The bytes of every file under the folder (the driver's cache index and entries).
    double bytes() const {
        std::error_code err;
        double total = 0;
        for (auto it = std::filesystem::recursive_directory_iterator(m_path, err);
             !err && it != std::filesystem::recursive_directory_iterator(); it.increment(err))
            if (it->is_regular_file(err))
                total += static_cast<double>(it->file_size(err));
        return total;
    }

private:
    explicit temp_cache(std::string path) : m_path(std::move(path)) {}
    std::string m_path;
};

/// One start: a child process of this program loading `image` under the cache settings `env`.
/// Its load time comes back; an unsupported or failed child is this case's outcome.
status_or<double> start_once(pitfall::context& ctx, const std::string& label,
                             const std::string& image,
                             const std::map<std::string, std::string>& env) {
    PITFALL_ASSIGN_OR_RETURN(const long long timeout, ctx.param_int("child_timeout_seconds"));
    PITFALL_ASSIGN_OR_RETURN(const long long elements, ctx.param_int("elements"));
    PITFALL_ASSIGN_OR_RETURN(
        const auto child,
        pitfall::run_self(ctx, "helper_start", env,
                          {"image=" + image, "elements=" + std::to_string(elements)},
                          static_cast<double>(timeout)));
    PITFALL_ASSIGN_OR_RETURN(const pitfall::child_report report,
                             pitfall::read_child(child, "start " + label));
    pitfall::adopt_child_facts(ctx, report.result, label + ".");
    if (!report.outcome.is_ok())
        return report.outcome.is_unsupported()
                   ? status::unsupported_because(report.outcome,
                                                 "start " + label + ": " +
                                                     report.result["outcome"].value("reason", ""))
                   : report.outcome;
    ctx.ran_on(report.result.value("ran_on", std::string("unknown: the child recorded none")));
    const auto& load = report.result["measurements"]["start_seconds"];
    if (!load.is_object() || !load["value"].is_number())
        return PITFALL_HOST_ERROR(stage::check, pitfall::host_error::child_result_unreadable,
                                  "start " + label + " recorded no start_seconds");
    return load["value"].get<double>();
}

/// `starts` starts of `image` sharing one fresh cache folder; the times and the folder's size
/// are recorded. Returns the folder's size in bytes.
/// What a series of starts sharing one cache folder measured.
struct starts_seen {
    std::vector<double> seconds; ///< each start's module load, in order
    double cache_bytes = 0;
};

status_or<starts_seen> starts_sharing_cache(pitfall::context& ctx, const std::string& image,
                                            int starts, bool cache_disabled) {
    PITFALL_ASSIGN_OR_RETURN(const temp_cache cache, temp_cache::make());
    const std::map<std::string, std::string> env{
        {"CUDA_CACHE_PATH", cache.path()},
        {"CUDA_CACHE_DISABLE", cache_disabled ? "1" : "0"},
        {"CUDA_CACHE_MAXSIZE", "268435456"}}; // the documented default, whatever the host says
    ctx.record_info("cache", std::string("fresh CUDA_CACHE_PATH, CUDA_CACHE_DISABLE=") +
                                 (cache_disabled ? "1" : "0") + ", image " + image);
    starts_seen seen;
    for (int i = 1; i <= starts; ++i) {
        const std::string label = "start_" + std::to_string(i);
        PITFALL_ASSIGN_OR_RETURN(const double seconds, start_once(ctx, label, image, env));
        ctx.record(label + "_seconds", seconds, "s");
        seen.seconds.push_back(seconds);
    }
    seen.cache_bytes = cache.bytes();
    ctx.record("cache_bytes", seen.cache_bytes, "B");
    return seen;
}

// The second start against the first. The JIT of this image takes about a second on an H200
// and a cached load milliseconds (1.21 s vs 2.5 ms there), so a factor of 4 either way is far
// outside what a busy machine's noise can make of it.
constexpr double cached_speedup_at_least = 4.0;

std::string starts_detail(const starts_seen& seen) {
    std::ostringstream out;
    out << "first start " << seen.seconds.front() << " s, second " << seen.seconds.back() << " s";
    return out.str();
}

} // namespace

template <class Backend> status reproduce_first_start(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
    PITFALL_ASSIGN_OR_RETURN(const starts_seen seen, starts_sharing_cache(ctx, "ptx", 1, false));
    const double bytes = seen.cache_bytes;
    ctx.check("jit_result_cached", bytes > 0,
              "the cache folder holds " + std::to_string(bytes) + " bytes after a JIT");
    return status::ok();
}

template <class Backend> status reproduce_cache_disabled(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
    PITFALL_ASSIGN_OR_RETURN(const starts_seen seen, starts_sharing_cache(ctx, "ptx", 2, true));
    const double bytes = seen.cache_bytes;
    ctx.check("nothing_cached", bytes == 0,
              "the cache folder holds " + std::to_string(bytes) +
                  " bytes with CUDA_CACHE_DISABLE=1");
    // The failure itself: with no cache the second start pays the JIT again.
    ctx.check("second_start_pays_the_jit_again",
              seen.seconds.back() * cached_speedup_at_least > seen.seconds.front(),
              starts_detail(seen));
    return status::ok();
}

template <class Backend> status remedy_warm_cache(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
    PITFALL_ASSIGN_OR_RETURN(const starts_seen seen, starts_sharing_cache(ctx, "ptx", 2, false));
    const double bytes = seen.cache_bytes;
    ctx.check("jit_result_cached", bytes > 0,
              "the cache folder holds " + std::to_string(bytes) + " bytes after a JIT");
    // The remedy: the second start loads the cached SASS instead of compiling.
    ctx.check("second_start_from_cache",
              seen.seconds.back() * cached_speedup_at_least < seen.seconds.front(),
              starts_detail(seen));
    return status::ok();
}

template <class Backend> status remedy_sass(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
    PITFALL_ASSIGN_OR_RETURN(const starts_seen seen, starts_sharing_cache(ctx, "sass", 1, false));
    const double bytes = seen.cache_bytes;
    // Only JIT results are cached: SASS for the device leaves the folder empty (an H200 with
    // driver 580.159.04 made it and wrote 0 bytes; a PTX load of a small kernel wrote 4406).
    ctx.check("nothing_cached", bytes == 0,
              "the cache folder holds " + std::to_string(bytes) + " bytes after a SASS start");
    return status::ok();
}

// The child the cases start (run_self), never a case of its own: context first (its cost is
// not the JIT's), then the timed start.
template <class Backend> status helper_start(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(no_cpu_analog));
#if PITFALL_HAS_CUDA && CUDART_VERSION < 12000 // cudaLibrary* arrived in CUDA 12.0
    (void)ctx;
    return PITFALL_UNSUPPORTED("cudaLibraryLoadData needs a CUDA 12.0 or newer runtime");
#elif PITFALL_HAS_CUDA
    PITFALL_ASSIGN_OR_RETURN(const std::string image, ctx.param_string("image"));
    PITFALL_ASSIGN_OR_RETURN(const long long elements, ctx.param_int("elements"));
    const unsigned n = static_cast<unsigned>(elements);
    PITFALL_CUDA_TRY(stage::init, cudaFree(nullptr));
    PITFALL_ASSIGN_OR_RETURN(auto d_out, pitfall::cuda_backend::allocate<float>(n));
    const void* bytes = image == "ptx" ? static_cast<const void*>(pitfall_image_heavy_ptx)
                                       : static_cast<const void*>(pitfall_image_heavy_sass);
    ctx.record("image_bytes",
               static_cast<double>(image == "ptx" ? pitfall_image_heavy_ptx_size
                                                  : pitfall_image_heavy_sass_size),
               "B");
    const auto started = std::chrono::steady_clock::now();
    cudaLibrary_t library = nullptr;
    PITFALL_CUDA_TRY(stage::init, cudaLibraryLoadData(&library, bytes, nullptr, nullptr, 0, nullptr,
                                                      nullptr, 0));
    struct unload_at_exit {
        cudaLibrary_t library;
        ~unload_at_exit() { (void)cudaLibraryUnload(library); }
    } unload{library};
    cudaKernel_t kernel = nullptr;
    PITFALL_CUDA_TRY(stage::init, cudaLibraryGetKernel(&kernel, library, "heavy"));
    float* out = d_out.data();
    unsigned count = n;
    void* args[] = {&out, &count};
    PITFALL_CUDA_TRY(stage::launch,
                     cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3((n + 255) / 256),
                                      dim3(256), args, 0, nullptr));
    PITFALL_CUDA_TRY(stage::synchronize, cudaDeviceSynchronize());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ctx.record("start_seconds", seconds, "s");
    ctx.ran_on(pitfall::cuda_backend::describe_device());
    return status::ok();
#else
    (void)ctx;
    return status::ok();
#endif
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_first_start), PITFALL_VARIANT(reproduce_cache_disabled),
                 PITFALL_VARIANT(remedy_warm_cache), PITFALL_VARIANT(remedy_sass),
                 PITFALL_VARIANT(helper_start))
