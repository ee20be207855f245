// memory_growth: one process reserves the device up front and a second process starves.
//
// What
//   Two real processes on one device. Process A is this case; process B is the same program
//   started again by run_self() as the helper variant `second_process`, while A still holds
//   its memory (run_self waits for B).
//     reproduce  A does what TensorFlow (maps "nearly all" GPU memory unless memory growth is
//                set) and JAX (preallocates 75 % of the total) do by default: it reserves
//                reserve_fraction (0.9) of the free memory at start-up with one cudaMalloc and
//                keeps it. B then asks for b_fraction (0.25) of the device, a modest share
//                that would fit on an idle device, and gets cudaErrorMemoryAllocation.
//     remedy     A grows on demand: its working set (a_fraction, 0.25) comes from the
//                device's stream-ordered pool (cudaMallocAsync) in growth_steps allocations,
//                with cudaMemPoolAttrReleaseThreshold set, so that what A frees goes back to
//                the device at the next synchronize beyond the threshold. B gets its share;
//                both succeed. Then A frees and the pool shrinks to <= the threshold.
//   Recorded: the free memory each process saw (cudaMemGetInfo), what A reserved or grew to,
//   each process's peak (tracked device bytes, pool watermarks, peak RSS), B's outcome as the
//   event `second_process`, and the pool's reserved bytes after the release.
//
// How the budget is shared (PITFALL_DEVICE_MEMORY_LIMIT)
//   The SDK's tracker enforces PITFALL_DEVICE_MEMORY_LIMIT per process; a device's memory is
//   shared by all of them. So when the limit is set, it is the *device's* size for both: A
//   plans against it (its "free" = min(cudaMemGetInfo free, limit - what A holds)), and A tells
//   B what is left by starting it with PITFALL_DEVICE_MEMORY_LIMIT = limit - A's holding (the
//   bytes A has from the device: its cudaMalloc, or the pool's reserved bytes). B's tracker then
//   refuses anything beyond that with cudaErrorMemoryAllocation, as the device would. A's
//   holding does not change while B runs (A is blocked in run_self), so a number passed at
//   start is exact, not a snapshot that could go stale. Without the limit nothing is modelled:
//   the two processes compete for the real device memory and the error comes from cudaMalloc.
//
// CPU analog (what it models, and what not)
//   The "device" is a budget of cpu_budget (256 MiB) or PITFALL_DEVICE_MEMORY_LIMIT shared by
//   two real processes. A's reservation is real host memory (allocated and written, visible in
//   its RSS); B's budget is the same budget minus A's holding, passed the same way as on the
//   GPU, and B's tracker refuses the request with std::bad_alloc. The remedy's pool is a host
//   pool with the same release-threshold rule. It models the allocator's accounting of a
//   shared device (who holds what, who fails first and with which error), not real memory
//   pressure on the host, which has gigabytes to spare: the OOM is the budget's, by design.
//
// Why it fails
//   Preallocation makes a framework's own allocations fast and unfragmented, but the device
//   is not the process's alone: CUDA hands out memory first come, first served, and memory a
//   process has reserved is gone for every other process until it exits, used or not. Two
//   notebooks, a training and an evaluation job, or a data loader with its own CUDA context
//   on one GPU: the second one fails although nvidia-smi shows the first one "using" memory it
//   never touches. cudaErrorMemoryAllocation is not sticky: B's context stays usable, it just
//   cannot have the memory.
//
// Expected per backend
//   cpu   reproduce: outcome error std::bad_alloc (host, alloc) from process B, which saw exactly
//         budget - A's reservation free; remedy: ok, B saw budget - A's working set and filled
//         its share; after the release the pool holds <= release_threshold.
//   cuda  reproduce: outcome error cudaErrorMemoryAllocation (cuda_runtime, alloc, not sticky)
//         from B's cudaMalloc; remedy: ok, and the pool is back to <= the threshold after the
//         release. On an H100 80GB HBM3 (2026-11-22, CUDA 13.0 runtime, driver 580): A saw
//         78.7 GiB free and reserved 70.8 GiB; B saw 7.4 GiB free (A's holding and B's own
//         context gone), asked for 19.8 GiB and got cudaErrorMemoryAllocation. In the remedy A
//         grew to 19.8 GiB in 4 steps (pool reserved 19.81 GiB), B saw 58.3 GiB free and got
//         its 19.8 GiB, and after A's free + synchronize the pool held 0 bytes and A saw the
//         device's 78.7 GiB free again. With PITFALL_DEVICE_MEMORY_LIMIT=4G the same outcomes
//         come from the budget: B saw exactly 4 GiB - A's 3.6 GiB free (and the tracker, not
//         cudaMalloc, refused it, by the same name). In EXCLUSIVE_PROCESS compute mode B cannot
//         even create a context (a different outcome, by name). Where the device has no memory
//         pools (cudaDevAttrMemoryPoolsSupported = 0) the remedy is UNSUPPORTED, saying so.
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init, for A (and B is
//         never started).
//
// Remedy
//   Grow on demand: tf.config.experimental.set_memory_growth(gpu, True) (the seed), JAX's
//   XLA_PYTHON_CLIENT_PREALLOCATE=false or a smaller XLA_CLIENT_MEM_FRACTION; in CUDA terms, a
//   stream-ordered pool (cudaMallocAsync / cudaFreeAsync) whose release threshold returns
//   freed memory to the device, or an explicit per-process cap that leaves room for the others.
//
// Seed
//   004 ex.3 (set_memory_growth before training, nvidia-smi afterwards). Facts: TensorFlow's
//   "Use a GPU" guide (limiting GPU memory growth), JAX's "GPU memory allocation" page (running
//   several processes is its first listed cause of OOM), CUDA Runtime API
//   cudaMemPoolSetAttribute (cudaMemPoolAttrReleaseThreshold), error names:
//   docs/cuda-rules.md#runtime-error-names.
// Baselines per backend and profile (generated by ci/catalog.py from expected/; do not edit):
//   cpu   host: observed on AMD EPYC: 1 reproduced on the CPU, 1 remedy
//   cuda  no-gpu: observed without a GPU: 1 UNSUPPORTED, 1 remedy
//   cuda  hopper-cuda13: observed on NVIDIA H200: 1 reproduced on the GPU, 1 remedy
//   cuda  hopper-cuda11-12: documented, never observed: 1 predicted, 1 remedy
//   cuda  ada-ampere-cuda12: documented, never observed: 1 predicted, 1 remedy
//   cuda  compute-mode-exclusive-process: documented, never observed: 1 predicted, 1 remedy
// (end of the generated baselines)
#include "pitfall/cuda/status.hpp"
#include "pitfall/scenario.hpp"

// Header-only, from the system (Debian's nlohmann-json3-dev); used to read process B's result.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace memory_growth {

using nlohmann::json;
using pitfall::status;
using pitfall::status_or;

constexpr std::uint64_t mib = 1ULL << 20;

// ---------------------------------------------------------------------------------------------
// Parameters (defaults and docs in scenario.json).
// ---------------------------------------------------------------------------------------------
struct config {
    double reserve_fraction = 0;
    double a_fraction = 0;
    double b_fraction = 0;
    int growth_steps = 0;
    std::uint64_t release_threshold = 0;
    std::uint64_t cpu_budget = 0;
    std::uint64_t b_bytes = 0;         ///< B only: what A asks it to allocate
    std::uint64_t a_holding_bytes = 0; ///< B only: what A holds, for B's record
};

/// A byte size ("16M"): a string, so its syntax is checked here, not by scenario.json's bounds.
status_or<std::uint64_t> byte_size(const pitfall::context& ctx, const char* name) {
    PITFALL_ASSIGN_OR_RETURN(const std::string text, ctx.param_string(name));
    const auto bytes = pitfall::parse_byte_size(text);
    if (!bytes)
        return pitfall::bad_parameter(name,
                                      "'" + text + "' is not a byte size (e.g. 16M, 256M, 1G)");
    return *bytes;
}

/// The numeric bounds (fractions in (0, 1], growth_steps in [1, 1024], byte counts >= 0) are
/// in scenario.json; the SDK refuses a value outside them before the case starts.
status_or<config> read_config(const pitfall::context& ctx) {
    config c;
    PITFALL_ASSIGN_OR_RETURN(c.reserve_fraction, ctx.param_double("reserve_fraction"));
    PITFALL_ASSIGN_OR_RETURN(c.a_fraction, ctx.param_double("a_fraction"));
    PITFALL_ASSIGN_OR_RETURN(c.b_fraction, ctx.param_double("b_fraction"));
    PITFALL_ASSIGN_OR_RETURN(const long long steps, ctx.param_int("growth_steps"));
    c.growth_steps = static_cast<int>(steps);
    PITFALL_ASSIGN_OR_RETURN(c.release_threshold, byte_size(ctx, "release_threshold"));
    PITFALL_ASSIGN_OR_RETURN(c.cpu_budget, byte_size(ctx, "cpu_budget"));
    if (c.cpu_budget < 16 * mib)
        return pitfall::bad_parameter("cpu_budget", "must be at least 16M");
    PITFALL_ASSIGN_OR_RETURN(const long long b_bytes, ctx.param_int("b_bytes"));
    PITFALL_ASSIGN_OR_RETURN(const long long a_holding_bytes, ctx.param_int("a_holding_bytes"));
    c.b_bytes = static_cast<std::uint64_t>(b_bytes);
    c.a_holding_bytes = static_cast<std::uint64_t>(a_holding_bytes);
    return c;
}

/// `share` of `bytes`, rounded down to whole MiB (allocators hand out MiB-grained chunks anyway).
std::uint64_t share_of(std::uint64_t bytes, double share) {
    const auto raw = static_cast<std::uint64_t>(static_cast<double>(bytes) * share);
    return raw / mib * mib;
}

std::uint64_t minus(std::uint64_t a, std::uint64_t b) {
    return a > b ? a - b : 0;
}

/// This process's peak resident set: VmHWM of /proc/self/status, the high-water mark of the
/// address space exec() gave us. Not getrusage's ru_maxrss, nor the one wait4 reports for B:
/// Linux carries the pre-exec high-water mark into it, and between fork and exec the child is
/// a copy of A, so B's ru_maxrss would include A's whole reservation. -1 when unreadable.
double own_peak_rss_bytes() {
    std::ifstream status_file("/proc/self/status");
    for (std::string line; std::getline(status_file, line);) {
        if (line.rfind("VmHWM:", 0) == 0) {
            std::istringstream fields(line.substr(6));
            double kib = -1;
            fields >> kib;
            return kib >= 0 ? kib * 1024.0 : -1.0;
        }
    }
    return -1.0;
}

// ---------------------------------------------------------------------------------------------
// What a process sees of the (shared) device.
//   budget  the device's size: cudaMemGetInfo's total, or PITFALL_DEVICE_MEMORY_LIMIT when set;
//           on the CPU the limit or cpu_budget.
//   free    what this process could still get: cudaMemGetInfo's free, capped by the budget left
//           to it (limit - what its tracker holds); on the CPU that budget alone.
// ---------------------------------------------------------------------------------------------
struct memory_view {
    std::uint64_t budget = 0;
    std::uint64_t free = 0;
    std::uint64_t device_free = 0;  ///< cudaMemGetInfo (GPU); = free on the CPU
    std::uint64_t device_total = 0; ///< cudaMemGetInfo (GPU); = budget on the CPU
};

template <class Backend> status_or<memory_view> look(const config& cfg) {
    const auto& tracker = pitfall::memory_tracker::for_backend(Backend::kind);
    memory_view v;
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        v.budget = tracker.limit() ? *tracker.limit() : cfg.cpu_budget;
        v.free = minus(v.budget, tracker.current());
        v.device_free = v.free;
        v.device_total = v.budget;
    } else {
#if PITFALL_HAS_CUDA
        std::size_t free_bytes = 0;
        std::size_t total_bytes = 0;
        // The first call that needs a context: in B it also proves B can have one at all.
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaMemGetInfo(&free_bytes, &total_bytes));
        v.device_free = free_bytes;
        v.device_total = total_bytes;
        v.budget = tracker.limit() ? *tracker.limit() : total_bytes;
        v.free =
            tracker.limit()
                ? std::min<std::uint64_t>(free_bytes, minus(*tracker.limit(), tracker.current()))
                : free_bytes;
#endif
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// Memory that is really used: every word written (pages committed on the host; the device
// write proves the allocation is backed). One functor for both backends.
// ---------------------------------------------------------------------------------------------
struct fill_op {
    std::uint32_t* words;
    std::uint32_t salt;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        words[i] =
            static_cast<std::uint32_t>(i) * 2654435761u ^ salt; // Knuth's multiplicative hash
    }
};

/// The pattern fill_op writes, computed separately on the host for the check.
std::uint32_t expected_word(std::size_t i, std::uint32_t salt) {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(i) * 2654435761ULL) ^ salt;
}

// ---------------------------------------------------------------------------------------------
// The remedy's pool. Both keep the same three numbers: reserved (taken from the device: in use
// plus cached), used (handed out), and their high-water marks.
// ---------------------------------------------------------------------------------------------

/// CPU analog of a stream-ordered pool: freed chunks are cached for reuse; synchronize() gives
/// cached chunks back (through the tracker, i.e. to the shared budget) while the pool holds
/// more than the release threshold, the rule cudaMemPoolAttrReleaseThreshold states.
class host_pool {
public:
    explicit host_pool(std::uint64_t release_threshold) : m_threshold(release_threshold) {}
    host_pool(const host_pool&) = delete;
    host_pool& operator=(const host_pool&) = delete;
    ~host_pool() {
        for (const auto& c : m_cached)
            pitfall::cpu_backend::deallocate_bytes(c.first, c.second);
    }

    status_or<void*> allocate(std::uint64_t bytes) {
        for (auto it = m_cached.begin(); it != m_cached.end(); ++it) { // reuse first
            if (it->second == bytes) {
                void* p = it->first;
                m_cached.erase(it);
                note_used(bytes);
                return p;
            }
        }
        PITFALL_ASSIGN_OR_RETURN(void* p, pitfall::cpu_backend::allocate_bytes(bytes));
        m_reserved += bytes;
        m_reserved_high = std::max(m_reserved_high, m_reserved);
        note_used(bytes);
        return p;
    }
    status deallocate(void* p, std::uint64_t bytes) {
        m_cached.emplace_back(p, bytes);
        m_used -= bytes;
        return status::ok();
    }
    status synchronize() {
        while (m_reserved > m_threshold && !m_cached.empty()) {
            const auto c = m_cached.back();
            m_cached.pop_back();
            pitfall::cpu_backend::deallocate_bytes(c.first, c.second);
            m_reserved -= c.second;
        }
        return status::ok();
    }
    status_or<std::uint64_t> reserved() const { return m_reserved; }
    status_or<std::uint64_t> reserved_high() const { return m_reserved_high; }
    status_or<std::uint64_t> used_high() const { return m_used_high; }
    static const char* describe() {
        return "host pool (chunks cached, released above the threshold)";
    }

private:
    void note_used(std::uint64_t bytes) {
        m_used += bytes;
        m_used_high = std::max(m_used_high, m_used);
    }
    std::uint64_t m_threshold;
    std::uint64_t m_reserved = 0;
    std::uint64_t m_reserved_high = 0;
    std::uint64_t m_used = 0;
    std::uint64_t m_used_high = 0;
    std::vector<std::pair<void*, std::uint64_t>> m_cached;
};

#if PITFALL_HAS_CUDA
/// The device's default stream-ordered pool, on the legacy default stream. Allocations are
/// counted by the tracker too, so PITFALL_DEVICE_MEMORY_LIMIT applies to them.
class device_pool {
public:
    explicit device_pool(std::uint64_t release_threshold) : m_threshold(release_threshold) {}

    status create() {
        int device = 0;
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDevice(&device));
        // Stream-ordered allocation needs driver support (CUDA 11.2+, not every platform, e.g.
        // some vGPU/MIG setups): without it the remedy cannot run here, and says so.
        int pools_supported = 0;
        PITFALL_CUDA_TRY(
            pitfall::stage::init,
            cudaDeviceGetAttribute(&pools_supported, cudaDevAttrMemoryPoolsSupported, device));
        if (pools_supported == 0)
            return PITFALL_UNSUPPORTED("cudaDevAttrMemoryPoolsSupported is 0: this device or "
                                       "driver has no stream-ordered memory pools");
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaDeviceGetDefaultMemPool(&m_pool, device));
        unsigned long long threshold = m_threshold; // the attribute's type is cuuint64_t
        PITFALL_CUDA_TRY(
            pitfall::stage::init,
            cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrReleaseThreshold, &threshold));
        unsigned long long zero = 0; // watermarks count from here
        PITFALL_CUDA_TRY(pitfall::stage::init,
                         cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrReservedMemHigh, &zero));
        PITFALL_CUDA_TRY(pitfall::stage::init,
                         cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrUsedMemHigh, &zero));
        return status::ok();
    }

    status_or<void*> allocate(std::uint64_t bytes) {
        auto& tracker = pitfall::memory_tracker::for_backend(pitfall::backend_kind::cuda);
        PITFALL_TRY(tracker.reserve(bytes));
        void* p = nullptr;
        const cudaError_t err = cudaMallocAsync(&p, bytes, nullptr);
        if (err != cudaSuccess) {
            tracker.release(bytes);
            tracker.count_failure();
            return PITFALL_CUDA_STATUS(pitfall::stage::alloc, err, "cudaMallocAsync");
        }
        return p;
    }
    status deallocate(void* p, std::uint64_t bytes) {
        pitfall::memory_tracker::for_backend(pitfall::backend_kind::cuda).release(bytes);
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaFreeAsync(p, nullptr));
        return status::ok();
    }
    /// The release threshold acts here: the pool trims itself at a synchronize.
    status synchronize() {
        PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaStreamSynchronize(nullptr));
        return status::ok();
    }
    status_or<std::uint64_t> reserved() const {
        return attribute(cudaMemPoolAttrReservedMemCurrent);
    }
    status_or<std::uint64_t> reserved_high() const {
        return attribute(cudaMemPoolAttrReservedMemHigh);
    }
    status_or<std::uint64_t> used_high() const { return attribute(cudaMemPoolAttrUsedMemHigh); }
    static const char* describe() {
        return "the device's default stream-ordered pool (cudaMallocAsync, release threshold set)";
    }

private:
    status_or<std::uint64_t> attribute(cudaMemPoolAttr which) const {
        unsigned long long value = 0;
        PITFALL_CUDA_TRY(pitfall::stage::library_call,
                         cudaMemPoolGetAttribute(m_pool, which, &value));
        return static_cast<std::uint64_t>(value);
    }
    std::uint64_t m_threshold;
    cudaMemPool_t m_pool = nullptr;
};
#endif

template <class Backend> struct pool_for { using type = host_pool; };
#if PITFALL_HAS_CUDA
template <> struct pool_for<pitfall::cuda_backend> { using type = device_pool; };
#endif

/// A's working set, handed back to the pool on every path (the TRY macros return early).
template <class Pool> struct chunks {
    Pool& pool;
    std::vector<std::pair<void*, std::uint64_t>> held;
    chunks(const chunks&) = delete;
    chunks& operator=(const chunks&) = delete;
    ~chunks() { (void)release(); }
    status release() {
        status first = status::ok();
        for (const auto& c : held) {
            const status s = pool.deallocate(c.first, c.second);
            if (first.is_ok())
                first = s;
        }
        held.clear();
        return first;
    }
};

// ---------------------------------------------------------------------------------------------
// Process B: started by A (run_self), reports what it saw and whether it got its share.
// ---------------------------------------------------------------------------------------------
constexpr std::uint32_t b_salt = 0xB0B0B0B0u;

template <class Backend> status second_process_work(pitfall::context& ctx, const config& cfg) {
    if (cfg.b_bytes == 0)
        return pitfall::bad_parameter("b_bytes",
                                      "second_process is started by process A, which sets it");
    PITFALL_ASSIGN_OR_RETURN(const memory_view v, look<Backend>(cfg));
    ctx.record("b_free_seen_bytes", static_cast<double>(v.free), "B");
    ctx.record("b_device_free_bytes", static_cast<double>(v.device_free), "B");
    ctx.record("b_device_total_bytes", static_cast<double>(v.device_total), "B");
    ctx.record("b_requested_bytes", static_cast<double>(cfg.b_bytes), "B");
    ctx.record("a_holding_bytes", static_cast<double>(cfg.a_holding_bytes), "B");

    // The modest request. Over budget it fails here, by name, and that is B's outcome.
    const std::size_t words = static_cast<std::size_t>(cfg.b_bytes / sizeof(std::uint32_t));
    PITFALL_ASSIGN_OR_RETURN(auto d_b, Backend::template allocate<std::uint32_t>(words));
    PITFALL_TRY(Backend::for_each(words, fill_op{d_b.data(), b_salt}));
    PITFALL_TRY(Backend::synchronize());
    const std::size_t checked = std::min<std::size_t>(words, 4096);
    std::vector<std::uint32_t> h_head(checked);
    PITFALL_TRY(Backend::copy_to_host(h_head.data(), d_b, checked));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < checked; ++i)
        wrong += h_head[i] != expected_word(i, b_salt) ? 1 : 0;
    ctx.check("b_memory_usable", wrong == 0,
              std::to_string(wrong) + " of the first " + std::to_string(checked) +
                  " words differ from the fill pattern");
    ctx.record("b_allocated_bytes", static_cast<double>(d_b.bytes()), "B");
    return status::ok();
}

/// Helper variant: process B.
template <class Backend> status second_process(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const status outcome = second_process_work<Backend>(ctx, cfg);
    ctx.record("b_peak_rss_bytes_self", own_peak_rss_bytes(), "B"); // whatever the outcome
    return outcome;
}

// ---------------------------------------------------------------------------------------------
// Process A's side of B: start it, read its outcome and the figures A records about it.
// ---------------------------------------------------------------------------------------------
struct b_report {
    status outcome;
    bool reported = false; ///< B wrote a result with its view of memory
    double free_seen = 0;
    double device_free = 0;
    double tracked_peak = 0;
    double peak_rss = 0;
};

double measurement(const json& result, const char* name) {
    const auto& m = result.value("measurements", json::object());
    if (!m.contains(name))
        return -1;
    return m[name].value("value", -1.0);
}

template <class Backend>
status_or<b_report> start_second_process(pitfall::context& ctx, const config& cfg,
                                         const memory_view& a_view, std::uint64_t a_holding) {
    const auto& tracker = pitfall::memory_tracker::for_backend(Backend::kind);
    const std::uint64_t b_bytes = share_of(a_view.budget, cfg.b_fraction);
    std::map<std::string, std::string> env;
    // The budget across processes (see the top of the file): B gets what A left of it.
    const bool modelled =
        Backend::kind == pitfall::backend_kind::cpu || tracker.limit().has_value();
    if (modelled)
        env[pitfall::device_memory_limit_env] = std::to_string(minus(a_view.budget, a_holding));
    ctx.record("b_requested_bytes", static_cast<double>(b_bytes), "B");
    ctx.record_info("b_budget", modelled ? "PITFALL_DEVICE_MEMORY_LIMIT=" +
                                               env[pitfall::device_memory_limit_env] +
                                               " (budget - A's holding)"
                                         : "the device's real free memory (no limit set)");
    PITFALL_ASSIGN_OR_RETURN(pitfall::child_run child,
                             pitfall::run_self(ctx, "second_process", env,
                                               {"b_bytes=" + std::to_string(b_bytes),
                                                "a_holding_bytes=" + std::to_string(a_holding)},
                                               60));
    b_report r;
    // wait4's figure for B (child.process.peak_rss_bytes) includes A's pages copied by fork
    // (see own_peak_rss_bytes); B's own VmHWM, from its result, is the honest one.
    ctx.record("b_wait4_maxrss_bytes", static_cast<double>(child.process.peak_rss_bytes), "B");
    // B's outcome as B reported it (library, error name, stage, stickiness kept); a B that
    // crashed, hung or wrote nothing is an error of its own.
    auto read = pitfall::read_child(child, "process B (second_process)");
    if (!read.is_ok()) {
        ctx.record_info("second_process_output", child.output);
        r.outcome = read.error();
        return r;
    }
    const json& result = read.value().result;
    r.outcome = read.value().outcome;
    r.free_seen = measurement(result, "b_free_seen_bytes");
    r.device_free = measurement(result, "b_device_free_bytes");
    r.reported = r.free_seen >= 0;
    r.tracked_peak = result.value("memory", json::object()).value("tracked_peak_bytes", 0.0);
    r.peak_rss = measurement(result, "b_peak_rss_bytes_self");
    ctx.record_info("second_process_ran_on", result.value("ran_on", std::string()));
    for (const auto& c : result.value("checks", json::array())) // B's checks are A's too
        ctx.check("second_process." + c.value("name", std::string("?")), c.value("passed", false),
                  c.value("detail", std::string()));
    return r;
}

/// What A records about B, and the check that B saw A's holding.
template <class Backend>
void record_second_process(pitfall::context& ctx, const b_report& b, const memory_view& a_view,
                           std::uint64_t a_holding) {
    ctx.record_event("second_process", b.outcome);
    ctx.record("b_tracked_peak_bytes", b.tracked_peak, "B");
    ctx.record("b_peak_rss_bytes", b.peak_rss, "B");
    if (!b.reported)
        return;
    ctx.record("b_free_seen_bytes", b.free_seen, "B");
    ctx.record("b_device_free_bytes", b.device_free, "B");
    // The two processes share one device: B's free is what A left. On the CPU analog exactly
    // budget - A's holding; on a GPU at most A's free - A's holding (B's own context and any
    // rounding of A's allocation only lower it; 64 MiB of slack for other processes' churn).
    const double left = static_cast<double>(minus(a_view.free, a_holding));
    if constexpr (Backend::kind == pitfall::backend_kind::cpu)
        ctx.check(
            "b_saw_a_holding", b.free_seen == left,
            "B saw " + std::to_string(static_cast<long long>(b.free_seen)) +
                " B free, budget - A's holding = " + std::to_string(static_cast<long long>(left)));
    else
        ctx.check("b_saw_a_holding", b.free_seen <= left + static_cast<double>(64 * mib),
                  "B saw " + std::to_string(static_cast<long long>(b.free_seen)) +
                      " B free, A's free - A's holding = " +
                      std::to_string(static_cast<long long>(left)));
}

void record_view(pitfall::context& ctx, const char* prefix, const memory_view& v) {
    const std::string p = prefix;
    ctx.record(p + "_free_seen_bytes", static_cast<double>(v.free), "B");
    ctx.record(p + "_device_free_bytes", static_cast<double>(v.device_free), "B");
}

// ---------------------------------------------------------------------------------------------
// reproduce: A preallocates most of the device, then B asks for its share.
// ---------------------------------------------------------------------------------------------
constexpr std::uint32_t a_salt = 0xA0A0A0A0u;

template <class Backend> status reproduce(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const auto& tracker = pitfall::memory_tracker::for_backend(Backend::kind);
    PITFALL_ASSIGN_OR_RETURN(const memory_view before, look<Backend>(cfg));
    record_view(ctx, "a", before);
    ctx.record("budget_bytes", static_cast<double>(before.budget), "B");
    ctx.record("device_total_bytes", static_cast<double>(before.device_total), "B");

    // The framework default: one big reservation at start-up, kept for the process's life.
    const std::uint64_t reserve = share_of(before.free, cfg.reserve_fraction);
    const std::size_t words = static_cast<std::size_t>(reserve / sizeof(std::uint32_t));
    PITFALL_ASSIGN_OR_RETURN(auto d_reserved, Backend::template allocate<std::uint32_t>(words));
    PITFALL_TRY(Backend::for_each(words, fill_op{d_reserved.data(), a_salt}));
    PITFALL_TRY(Backend::synchronize());
    const std::uint64_t holding = tracker.current();
    ctx.record("a_reserved_bytes", static_cast<double>(holding), "B");
    ctx.record("a_peak_bytes", static_cast<double>(tracker.peak()), "B");

    PITFALL_ASSIGN_OR_RETURN(const b_report b,
                             start_second_process<Backend>(ctx, cfg, before, holding));
    record_second_process<Backend>(ctx, b, before, holding);
    ctx.record("a_peak_rss_bytes", own_peak_rss_bytes(), "B");
    // The reproduced failure is B's: its error (by name, library, stage) is this case's outcome.
    return b.outcome;
}

// ---------------------------------------------------------------------------------------------
// remedy: A grows on demand from a pool with a release threshold; B gets its share.
// ---------------------------------------------------------------------------------------------
template <class Backend> status remedy(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    using pool_type = typename pool_for<Backend>::type;
    PITFALL_ASSIGN_OR_RETURN(const memory_view before, look<Backend>(cfg));
    record_view(ctx, "a", before);
    ctx.record("budget_bytes", static_cast<double>(before.budget), "B");
    ctx.record("device_total_bytes", static_cast<double>(before.device_total), "B");
    ctx.record("release_threshold_bytes", static_cast<double>(cfg.release_threshold), "B");
    ctx.record_info("pool", pool_type::describe());

    pool_type pool(cfg.release_threshold);
    if constexpr (Backend::kind == pitfall::backend_kind::cuda)
        PITFALL_TRY(pool.create());

    // Growth: the working set arrives in steps, each allocation only when it is needed.
    const std::uint64_t working_set = share_of(before.budget, cfg.a_fraction);
    const std::uint64_t step = std::max<std::uint64_t>(
        mib, working_set / static_cast<std::uint64_t>(cfg.growth_steps) / mib * mib);
    chunks<pool_type> held{pool, {}};
    for (int s = 0; s < cfg.growth_steps; ++s) {
        PITFALL_ASSIGN_OR_RETURN(void* p, pool.allocate(step));
        held.held.emplace_back(p, step);
        auto* words = static_cast<std::uint32_t*>(p);
        PITFALL_TRY(Backend::for_each(static_cast<std::size_t>(step / sizeof(std::uint32_t)),
                                      fill_op{words, a_salt}));
    }
    PITFALL_TRY(pool.synchronize());
    PITFALL_ASSIGN_OR_RETURN(const std::uint64_t holding, pool.reserved());
    ctx.record("a_working_set_bytes", static_cast<double>(step) * cfg.growth_steps, "B");
    ctx.record("a_pool_reserved_bytes", static_cast<double>(holding), "B");
    PITFALL_ASSIGN_OR_RETURN(const memory_view grown, look<Backend>(cfg));
    ctx.record("a_free_after_growth_bytes", static_cast<double>(grown.free), "B");

    // B runs while A holds its working set: there is room for both.
    PITFALL_ASSIGN_OR_RETURN(const b_report b,
                             start_second_process<Backend>(ctx, cfg, before, holding));
    record_second_process<Backend>(ctx, b, before, holding);

    // A is done with its working set: freed to the pool, which gives back what is above the
    // release threshold at the next synchronize.
    PITFALL_TRY(held.release());
    PITFALL_TRY(pool.synchronize());
    PITFALL_ASSIGN_OR_RETURN(const std::uint64_t reserved_after, pool.reserved());
    PITFALL_ASSIGN_OR_RETURN(const std::uint64_t reserved_high, pool.reserved_high());
    PITFALL_ASSIGN_OR_RETURN(const std::uint64_t used_high, pool.used_high());
    PITFALL_ASSIGN_OR_RETURN(const memory_view released, look<Backend>(cfg));
    ctx.record("a_pool_reserved_peak_bytes", static_cast<double>(reserved_high), "B");
    ctx.record("a_pool_used_peak_bytes", static_cast<double>(used_high), "B");
    ctx.record("a_pool_reserved_after_release_bytes", static_cast<double>(reserved_after), "B");
    ctx.record("a_free_after_release_bytes", static_cast<double>(released.free), "B");
    ctx.record("a_peak_rss_bytes", own_peak_rss_bytes(), "B");
    ctx.check("pool_released_to_threshold", reserved_after <= cfg.release_threshold,
              std::to_string(reserved_after) +
                  " B still reserved after free + synchronize; release threshold " +
                  std::to_string(cfg.release_threshold));
    return b.outcome;
}

} // namespace memory_growth

// A real host OOM (the CPU analog's memory is real) is an outcome, not an escape: the SDK's
// exception boundary reports it as std::bad_alloc.
using namespace memory_growth; // PITFALL_VARIANT names each variant after its function

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce), PITFALL_VARIANT(remedy),
                 PITFALL_VARIANT(second_process))
