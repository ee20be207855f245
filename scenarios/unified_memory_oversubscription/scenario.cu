// unified_memory_oversubscription: managed memory beyond what the device has free "works", slowly.
//
// What
//   A process reserves most of the device up front (a framework's allocator does; see
//   library_init_reserved_memory), then works on a managed buffer (cudaMallocManaged) larger
//   than what is left. Every variant reserves the device's free memory minus remainder_mib (R,
//   128 MiB), one cudaMalloc stepping down 2 MiB until it is accepted, and then times passes of
//   a kernel that adds one to every 32-bit word of a managed buffer filled on the host:
//     reproduce_oversubscribed     a buffer of oversubscription (2) x what is left free.
//     remedy_fits                  a buffer of fit_fraction (0.5) x what is left: it fits.
//     remedy_chunked_prefetch      the oversubscribed buffer in chunks of fit_fraction x what is
//                                  left: cudaMemPrefetchAsync a chunk to the device, run all the
//                                  sample's passes on it, go on to the next.
//     remedy_advise_host_resident  the oversubscribed buffer with cudaMemAdviseSetPreferredLocation
//                                  = host and cudaMemAdviseSetAccessedBy = this device.
//   Each sample is `passes` (2) passes over the whole buffer; the series pass_seconds_per_gib is
//   a sample's time divided by passes and by the buffer's GiB, so buffers of different sizes
//   compare (the ratios oversubscribed_over_fits, chunked_over_oversubscribed and
//   advised_over_oversubscribed). The words are then read back on the host and every 4093rd
//   one (and the last) compared with the host's own count: start word + passes run, exactly.
//
// Safety
//   Asking for more managed memory than the device has free can stall a GPU for minutes. The
//   managed buffer is a small multiple of R, and the case refuses (UNSUPPORTED, saying so) when
//   it would exceed a quarter of the memory that was free before the reservation: on an H200
//   (~140 GiB free) the default buffer is 256 MiB. Everything is released on every path.
//
// Why it fails
//   cudaMalloc refuses memory the device does not have (cudaErrorMemoryAllocation), but on Linux
//   with a Pascal or newer GPU (cudaDevAttrConcurrentManagedAccess = 1) managed memory may
//   exceed it: the driver keeps the pages where they were last touched and migrates them on
//   page faults, evicting others to make room. Nothing fails. A kernel that sweeps a buffer
//   larger than the free memory evicts exactly the pages it will need next (the least recently
//   used ones), so every pass moves the whole buffer across the host link, in and out, at the
//   speed of fault handling, where a buffer that fits moves once and then runs from device
//   memory. This is the seed's "slow performance due to excessive swapping between GPU and CPU".
//
// Expected per backend
//   cuda  every variant ok, and its words match the host's count. reproduce_oversubscribed:
//         oversubscription_ratio ~ 2 (managed bytes over the free memory measured after the
//         reservation); its pass time per GiB far above remedy_fits' (fault-driven migration
//         over PCIe at some GB/s, in and out, against device memory at some TB/s: two orders
//         of magnitude or more by that arithmetic; the ratio oversubscribed_over_fits is what
//         a GPU run measures).
//         remedy_chunked_prefetch moves each chunk once per sample instead of once per pass,
//         and its last prefetch location is the device; remedy_advise_host_resident's
//         preferred location reads back as the host (cudaCpuDeviceId) and its passes run at the
//         host link's speed without migrations. Where the device has no concurrent managed
//         access (Windows, WSL, pre-Pascal) managed memory cannot exceed the device and the
//         case is UNSUPPORTED, saying so. Page-fault and migration counts are not recorded:
//         the driver gives them only through CUPTI's unified-memory counters
//         (CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER), which this suite does not link; what
//         is recorded instead is the free memory after the passes (the managed pages that
//         stayed resident fill what was left) and, for the remedies, the range attributes the
//         driver reports (cudaMemRangeGetAttribute). Here (no driver): UNSUPPORTED,
//         cudaErrorInsufficientDriver (the SDK's probe).
//   cpu   UNSUPPORTED: no CPU analog. The host has one memory and no driver that moves pages
//         between two; the nearest thing, the kernel paging a process out to swap, cannot be
//         provoked without pressing on every other process of a shared host.
//
// Remedy
//   Keep the working set within the device (a smaller model or batch: the seed's advice), or
//   schedule the migration instead of faulting it in: process the data in chunks that fit,
//   each prefetched (cudaMemPrefetchAsync) before its kernels; or, for data touched once per
//   pass, advise it to stay on the host and be mapped by the device (cudaMemAdvise
//   SetPreferredLocation host + SetAccessedBy device), which trades faults for remote reads.
//   Facts: CUDA C++ Programming Guide, "Unified Memory Programming" (oversubscription on
//   devices with concurrentManagedAccess, data migration and coherency, performance hints:
//   https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#um-unified-memory-programming-hd);
//   CUDA Runtime API, cudaMemPrefetchAsync, cudaMemAdvise, cudaMemRangeGetAttribute
//   (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__MEMORY.html); NVIDIA
//   developer blog "Improving GPU Memory Oversubscription Performance" (2021,
//   https://developer.nvidia.com/blog/improving-gpu-memory-oversubscription-performance/).
//
// Seed
//   001 ex.3 (three Dense(1024) layers said to exceed GPU memory, "slow performance due to
//   excessive swapping between GPU and CPU memory").
//
// Evidence
//   kokkos/kokkos#2330 (oversubscribed managed memory gives no error, the GPU swaps),
//   NVIDIA/cudf#13821 (page faults once the oversubscription factor is above 1; prefetch and
//   AccessedBy hints), pytorch/pytorch#5313 (cudaMallocManaged as swap, declined for its cost).
// Baselines per backend and profile (generated by ci/catalog.py from expected/; do not edit):
//   cpu   host: observed on AMD EPYC: 1 UNSUPPORTED, 3 remedies
//   cuda  no-gpu: observed without a GPU: 1 UNSUPPORTED, 3 remedies
//   cuda  hopper-cuda13: documented, never observed: 1 predicted, 3 remedies
//   cuda  hopper-cuda11-12: documented, never observed: 1 predicted, 3 remedies
//   cuda  ada-ampere-cuda12: documented, never observed: 1 predicted, 3 remedies
//   evidence threads: 3 modelled (docs/evidence.md)
// (end of the generated baselines)
#include "pitfall/cuda/status.hpp"
#include "pitfall/scenario.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

constexpr const char* no_cpu_analog =
    "the host has one memory and no driver that migrates pages between two; its nearest analog, "
    "paging a process out to swap, cannot be provoked without pressing on every other process "
    "of a shared host";

#if PITFALL_HAS_CUDA
using backend = pitfall::cuda_backend;

constexpr std::size_t mib = 1024 * 1024;
constexpr std::size_t grain = 2 * mib; // the driver's large-page size: buffers are multiples
constexpr double gib = 1024.0 * 1024.0 * 1024.0;
// Words checked on the host: every 4093rd (a prime, so the checked words fall on every offset
// within the pages over the buffer) and the last one.
constexpr std::size_t check_stride = 4093;

/// One pass: every word + 1. Unsigned, so the expected value is exact after any number of
/// passes (modulo 2^32), and a word that missed or repeated a pass cannot go unnoticed.
struct add_one {
    std::uint32_t* words;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { words[i] += 1u; }
};

/// The word the host writes at index i before any pass: a hash of i, so that a page that came
/// back from the wrong place (another page's words) is told apart.
std::uint32_t start_word(std::size_t i) {
    return static_cast<std::uint32_t>(i * 2654435761u) ^ 0x5bd1e995u;
}

std::size_t round_down(std::size_t bytes) {
    return bytes / grain * grain;
}

/// The framework's up-front reservation: one cudaMalloc of what is free minus `leave`, stepping
/// down 2 MiB while cudaMalloc refuses (it cannot always hand out the last free byte). Not
/// counted by the SDK's tracker: it is the real device's memory that managed pages compete for,
/// whatever budget PITFALL_DEVICE_MEMORY_LIMIT models.
class reservation {
public:
    reservation() = default;
    reservation(const reservation&) = delete;
    reservation& operator=(const reservation&) = delete;
    ~reservation() {
        if (m_data != nullptr)
            (void)cudaFree(m_data);
    }
    status reserve(std::size_t free_bytes, std::size_t leave) {
        std::size_t want = free_bytes > leave ? round_down(free_bytes - leave) : 0;
        cudaError_t err = cudaErrorMemoryAllocation;
        for (int tries = 0; want > 0 && tries < 256; ++tries, want -= grain) {
            err = cudaMalloc(&m_data, want);
            if (err == cudaSuccess)
                break;
            m_data = nullptr;
            (void)cudaGetLastError(); // the refusal is expected here; not sticky
            if (want <= grain)
                break;
        }
        if (err != cudaSuccess)
            return PITFALL_CUDA_STATUS(pitfall::stage::alloc, err, "cudaMalloc(reservation)");
        m_bytes = want;
        return status::ok();
    }
    std::size_t bytes() const { return m_bytes; }

private:
    void* m_data = nullptr;
    std::size_t m_bytes = 0;
};

/// A managed buffer of 32-bit words, freed with its owner.
class managed_words {
public:
    managed_words() = default;
    managed_words(const managed_words&) = delete;
    managed_words& operator=(const managed_words&) = delete;
    ~managed_words() {
        if (m_data != nullptr)
            (void)cudaFree(m_data);
    }
    status allocate(std::size_t bytes) {
        void* p = nullptr;
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
        m_data = static_cast<std::uint32_t*>(p);
        m_count = bytes / sizeof(std::uint32_t);
        return status::ok();
    }
    std::uint32_t* data() const { return m_data; }
    std::size_t count() const { return m_count; }
    std::size_t bytes() const { return m_count * sizeof(std::uint32_t); }

private:
    std::uint32_t* m_data = nullptr;
    std::size_t m_count = 0;
};

// CUDA 13 takes a cudaMemLocation where CUDA 11 and 12 took a device ordinal (cudaCpuDeviceId
// for the host); the suite builds with both.
status prefetch_to_device(const void* p, std::size_t bytes, int device) {
#if CUDART_VERSION >= 13000
    cudaMemLocation where{};
    where.type = cudaMemLocationTypeDevice;
    where.id = device;
    PITFALL_CUDA_TRY(pitfall::stage::copy, cudaMemPrefetchAsync(p, bytes, where, 0, nullptr));
#else
    PITFALL_CUDA_TRY(pitfall::stage::copy, cudaMemPrefetchAsync(p, bytes, device, nullptr));
#endif
    return status::ok();
}

status advise(const void* p, std::size_t bytes, cudaMemoryAdvise advice, bool host, int device) {
#if CUDART_VERSION >= 13000
    cudaMemLocation where{};
    where.type = host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = host ? 0 : device;
    PITFALL_CUDA_TRY(pitfall::stage::library_call, cudaMemAdvise(p, bytes, advice, where));
#else
    PITFALL_CUDA_TRY(pitfall::stage::library_call,
                     cudaMemAdvise(p, bytes, advice, host ? cudaCpuDeviceId : device));
#endif
    return status::ok();
}

/// An int-valued range attribute (a device ordinal, cudaCpuDeviceId for the host,
/// cudaInvalidDeviceId when unset).
status_or<int> range_attribute(const void* p, std::size_t bytes, cudaMemRangeAttribute which) {
    int value = 0;
    PITFALL_CUDA_TRY(pitfall::stage::library_call,
                     cudaMemRangeGetAttribute(&value, sizeof value, which, p, bytes));
    return value;
}

enum class mode { oversubscribed, fits, chunked_prefetch, advise_host_resident };

struct config {
    std::size_t remainder = 0;
    double oversubscription = 0;
    double fit_fraction = 0;
    int passes = 0;
};

status_or<config> read_config(const pitfall::context& ctx) {
    config c;
    PITFALL_ASSIGN_OR_RETURN(const long long remainder, ctx.param_int("remainder_mib"));
    PITFALL_ASSIGN_OR_RETURN(c.oversubscription, ctx.param_double("oversubscription"));
    PITFALL_ASSIGN_OR_RETURN(c.fit_fraction, ctx.param_double("fit_fraction"));
    PITFALL_ASSIGN_OR_RETURN(const long long passes, ctx.param_int("passes"));
    c.remainder = static_cast<std::size_t>(remainder) * mib;
    c.passes = static_cast<int>(passes);
    return c;
}

/// What the device looked like around the reservation.
struct device_view {
    int device = 0;
    std::size_t total = 0;
    std::size_t free_before = 0; ///< before the reservation
    std::size_t free_after = 0;  ///< after it: what managed pages can occupy
};

/// Everything that needs device memory of its own happens before the reservation, as a
/// framework creates its workspaces first: the timing controls' buffers, and the kernel's
/// module (loaded lazily at its first launch, which would need memory once the device is full).
status prepare_before_reservation(pitfall::context& ctx) {
    { pitfall::series_watch<backend> warm_controls(ctx); }
    PITFALL_ASSIGN_OR_RETURN(auto d_probe, backend::allocate<std::uint32_t>(1024));
    PITFALL_TRY(backend::for_each(d_probe.size(), add_one{d_probe.data()}));
    return backend::synchronize();
}

status_or<device_view> reserve_device(pitfall::context& ctx, const config& cfg,
                                      reservation& framework) {
    device_view v;
    PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDevice(&v.device));
    int concurrent = 0;
    PITFALL_CUDA_TRY(
        pitfall::stage::init,
        cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, v.device));
    ctx.record("concurrent_managed_access", concurrent);
    if (concurrent == 0)
        return status::unsupported(
            "cudaDevAttrConcurrentManagedAccess = 0 (Windows, WSL or a pre-Pascal GPU): managed "
            "memory cannot exceed the device there, so it cannot be oversubscribed");
    PITFALL_TRY(prepare_before_reservation(ctx));
    PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMemGetInfo(&v.free_before, &v.total));
    // The safety rule, before anything is reserved: the largest managed buffer this case can
    // ask for stays within a quarter of what is free now.
    if (cfg.oversubscription * static_cast<double>(cfg.remainder) >
        static_cast<double>(v.free_before) / 4)
        return status::unsupported("remainder_mib x oversubscription exceeds a quarter of the " +
                                   std::to_string(v.free_before) +
                                   " B free on this device: too small to oversubscribe safely");
    PITFALL_TRY(framework.reserve(v.free_before, cfg.remainder));
    std::size_t total = 0;
    PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMemGetInfo(&v.free_after, &total));
    ctx.record("device_total_bytes", static_cast<double>(v.total), "B");
    ctx.record("free_before_reserve_bytes", static_cast<double>(v.free_before), "B");
    ctx.record("reserved_bytes", static_cast<double>(framework.bytes()), "B");
    ctx.record("free_after_reserve_bytes", static_cast<double>(v.free_after), "B");
    return v;
}

/// The managed buffer's size for the variant; refused beyond a quarter of what was free before
/// the reservation, so that no parameter can ask the driver for more than the device has.
status_or<std::size_t> managed_size(pitfall::context& ctx, const config& cfg, mode m,
                                    const device_view& v) {
    const double share = m == mode::fits ? cfg.fit_fraction : cfg.oversubscription;
    const std::size_t bytes = round_down(static_cast<std::size_t>(share * v.free_after));
    const std::size_t ceiling = v.free_before / 4;
    if (bytes < grain || bytes > ceiling)
        return status::unsupported(
            "the managed buffer would be " + std::to_string(bytes) +
            " B; this case keeps it "
            "between 2 MiB and a quarter of the device's free memory (" +
            std::to_string(ceiling) +
            " B): lower remainder_mib or oversubscription, or use a larger device");
    ctx.record("managed_bytes", static_cast<double>(bytes), "B");
    ctx.record("oversubscription_ratio",
               static_cast<double>(bytes) /
                   static_cast<double>(std::max<std::size_t>(1, v.free_after)));
    if (m == mode::fits)
        ctx.check("buffer_fits_free_memory", bytes <= v.free_after,
                  std::to_string(bytes) + " B managed, " + std::to_string(v.free_after) +
                      " B free after the reservation");
    else
        ctx.check("buffer_exceeds_free_memory", bytes > v.free_after,
                  std::to_string(bytes) + " B managed, " + std::to_string(v.free_after) +
                      " B free after the reservation");
    return bytes;
}

/// The remedies' setup: hints given once, before any pass.
status apply_hints(pitfall::context& ctx, mode m, const managed_words& buf, int device) {
    if (m != mode::advise_host_resident)
        return status::ok();
    PITFALL_TRY(advise(buf.data(), buf.bytes(), cudaMemAdviseSetPreferredLocation, true, device));
    PITFALL_TRY(advise(buf.data(), buf.bytes(), cudaMemAdviseSetAccessedBy, false, device));
    PITFALL_ASSIGN_OR_RETURN(
        const int preferred,
        range_attribute(buf.data(), buf.bytes(), cudaMemRangeAttributePreferredLocation));
    ctx.record("preferred_location", preferred);
    ctx.check("preferred_location_is_host", preferred == cudaCpuDeviceId,
              "cudaMemRangeAttributePreferredLocation = " + std::to_string(preferred) +
                  " (cudaCpuDeviceId = " + std::to_string(cudaCpuDeviceId) + ")");
    return status::ok();
}

/// One timed sample: `passes` passes over every word, in the variant's order.
status one_sample(mode m, const managed_words& buf, std::size_t chunk_words, int passes,
                  int device) {
    if (m != mode::chunked_prefetch) {
        for (int p = 0; p < passes; ++p)
            PITFALL_TRY(backend::for_each(buf.count(), add_one{buf.data()}));
        return status::ok();
    }
    for (std::size_t start = 0; start < buf.count(); start += chunk_words) {
        const std::size_t n = std::min(chunk_words, buf.count() - start);
        // On the default stream, like the kernels: the prefetch completes before they start.
        PITFALL_TRY(prefetch_to_device(buf.data() + start, n * sizeof(std::uint32_t), device));
        for (int p = 0; p < passes; ++p)
            PITFALL_TRY(backend::for_each(n, add_one{buf.data() + start}));
    }
    return status::ok();
}

/// Reads back every check_stride-th word (and the last) on the host: start word + the passes
/// run. The host's count is the reference: it shares nothing with the kernel but the rule.
void check_words(pitfall::context& ctx, const managed_words& buf, std::uint32_t passes_run) {
    std::size_t checked = 0;
    std::size_t wrong = 0;
    std::size_t first_wrong = 0;
    const auto check_one = [&](std::size_t i) {
        ++checked;
        if (buf.data()[i] != start_word(i) + passes_run && wrong++ == 0)
            first_wrong = i;
    };
    for (std::size_t i = 0; i < buf.count(); i += check_stride)
        check_one(i);
    check_one(buf.count() - 1);
    ctx.record("checked_words", static_cast<double>(checked));
    ctx.record("wrong_words", static_cast<double>(wrong));
    ctx.check("words_match_host_count", wrong == 0,
              std::to_string(wrong) + " of " + std::to_string(checked) +
                  " checked words differ from start + " + std::to_string(passes_run) +
                  (wrong ? " (first at index " + std::to_string(first_wrong) + ")" : ""));
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

status run_case(pitfall::context& ctx, mode m) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    reservation framework;
    PITFALL_ASSIGN_OR_RETURN(const device_view view, reserve_device(ctx, cfg, framework));
    PITFALL_ASSIGN_OR_RETURN(const std::size_t bytes, managed_size(ctx, cfg, m, view));
    managed_words buf;
    PITFALL_TRY(buf.allocate(bytes));
    for (std::size_t i = 0; i < buf.count(); ++i) // on the host: the pages start there
        buf.data()[i] = start_word(i);
    PITFALL_TRY(apply_hints(ctx, m, buf, view.device));

    // A chunk is what fits (at least one 2 MiB page of words, so a tiny remainder still
    // makes progress).
    const std::size_t chunk_words =
        std::max(grain, round_down(static_cast<std::size_t>(cfg.fit_fraction * view.free_after))) /
        sizeof(std::uint32_t);
    if (m == mode::chunked_prefetch)
        ctx.record("chunk_bytes", static_cast<double>(chunk_words * sizeof(std::uint32_t)), "B");
    std::uint32_t samples_run = 0;
    PITFALL_ASSIGN_OR_RETURN(std::vector<double> seconds,
                             pitfall::time_samples<backend>(ctx, [&]() -> status {
                                 ++samples_run;
                                 return one_sample(m, buf, chunk_words, cfg.passes, view.device);
                             }));
    PITFALL_TRY(backend::synchronize());
    const double gib_passed = static_cast<double>(cfg.passes) * static_cast<double>(bytes) / gib;
    for (double& s : seconds)
        s /= gib_passed;
    ctx.record_samples("pass_seconds_per_gib", seconds, "s");
    ctx.record("pass_seconds_per_gib_median", median(seconds), "s");
    ctx.record("passes_per_sample", cfg.passes);

    std::size_t free_now = 0, total = 0;
    PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMemGetInfo(&free_now, &total));
    ctx.record("free_after_passes_bytes", static_cast<double>(free_now), "B");
    if (m == mode::chunked_prefetch) {
        const std::size_t last = (buf.count() - 1) / chunk_words * chunk_words;
        PITFALL_ASSIGN_OR_RETURN(const int where,
                                 range_attribute(buf.data() + last,
                                                 (buf.count() - last) * sizeof(std::uint32_t),
                                                 cudaMemRangeAttributeLastPrefetchLocation));
        ctx.record("last_prefetch_location", where);
        ctx.check("prefetch_reached_device", where == view.device,
                  "cudaMemRangeAttributeLastPrefetchLocation of the last chunk = " +
                      std::to_string(where) + ", device " + std::to_string(view.device));
    }
    ctx.record_info("fault_counts",
                    "not recorded: the driver reports unified-memory page faults and migrations "
                    "only through CUPTI (CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER), which this "
                    "suite does not link");
    check_words(ctx, buf, samples_run * static_cast<std::uint32_t>(cfg.passes));
    return status::ok();
}

status reproduce_oversubscribed(pitfall::context& ctx) {
    return run_case(ctx, mode::oversubscribed);
}
status remedy_fits(pitfall::context& ctx) {
    return run_case(ctx, mode::fits);
}
status remedy_chunked_prefetch(pitfall::context& ctx) {
    return run_case(ctx, mode::chunked_prefetch);
}
status remedy_advise_host_resident(pitfall::context& ctx) {
    return run_case(ctx, mode::advise_host_resident);
}
#endif

} // namespace

PITFALL_SCENARIO(PITFALL_CUDA_VARIANT(reproduce_oversubscribed, no_cpu_analog),
                 PITFALL_CUDA_VARIANT(remedy_fits, no_cpu_analog),
                 PITFALL_CUDA_VARIANT(remedy_chunked_prefetch, no_cpu_analog),
                 PITFALL_CUDA_VARIANT(remedy_advise_host_resident, no_cpu_analog))
