// pinned_memory_exhaustion: page-locked host memory is a limited resource.
//
// What
//   A loader pins its whole host buffer (pin_memory, cudaHostAlloc of the data set) so that
//   copies to the device run at full speed. The case runs as a container's process does: without
//   CAP_IPC_LOCK (Docker drops it by default) and with RLIMIT_MEMLOCK lowered in the case's own
//   process to `memlock_limit_mib` (the lower of that and the current limit; never raised).
//     reproduce_pin_whole_buffer  pin the whole `transfer_mib` buffer.
//     remedy_staging_pool         two pinned staging buffers of `chunk_kib`, reused chunk after
//                                 chunk for the whole transfer (double buffering).
//
// Why it fails
//   Locked pages cannot be swapped or moved, so the kernel bounds them per process:
//   RLIMIT_MEMLOCK, enforced unless the process holds CAP_IPC_LOCK. Container runtimes pass on
//   a small limit (the daemon's own, commonly 64 KiB or 8 MiB) and do not grant the capability
//   (Docker's default capability set leaves CAP_IPC_LOCK out). mlock beyond the limit fails with
//   ENOMEM (EPERM when the limit is 0). Beyond any limit, pinned pages are taken from the host's
//   memory for everyone: pinning most of it drags the host down (this case never pins more than
//   `transfer_mib`, at most 1 GiB).
//
// Expected per backend
//   cpu   reproduce_pin_whole_buffer: host ENOMEM at alloc from mlock (mlock(2): "the caller had
//         a nonzero RLIMIT_MEMLOCK soft resource limit, but tried to lock more memory than the
//         limit permitted"; the limit is not enforced for a process with CAP_IPC_LOCK, which is
//         why the case drops it first). remedy_staging_pool: ok, 2 x chunk_kib pinned, the
//         data checked.
//   cuda  reproduce_pin_whole_buffer: cudaHostAlloc under the lowered limit is the outcome.
//         The NVIDIA driver pins through its own kernel module, not mlock, and the CUDA Runtime
//         API documents only cudaErrorMemoryAllocation for cudaHostAlloc (CUDA Runtime API,
//         "cudaHostAlloc", "cudaHostRegister"): whether RLIMIT_MEMLOCK is charged is measured
//         here (the outcome ok with pinned_beyond_memlock_limit = 1 means it was not), and
//         cudaHostRegister of a pageable buffer of the same size is recorded as an event.
//         Containers' pinning limits then come from elsewhere (the container's memory cgroup,
//         WSL2's pool: the evidence threads). remedy_staging_pool: ok. Without a driver:
//         UNSUPPORTED, cudaErrorInsufficientDriver.
//
// Remedy
//   Pin little and reuse it: a bounded pool of staging buffers (two suffice for overlap) that
//   every transfer goes through; the bytes pinned no longer grow with the data. Or raise the
//   limit where that is the operator's choice (--ulimit memlock=, LimitMEMLOCK=).
//
// Evidence
//   NVIDIA/nvidia-docker#1725 (cudaHostAlloc of a pinned pool fails in a container),
//   LMCache/LMCache-Ascend#5 (pinning fails under a low ulimit -l in Kubernetes),
//   abetlen/llama-cpp-python#618 (mlock ENOMEM in Docker, "increase RLIMIT_MLOCK").
#include "pitfall/scenario.hpp"

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

constexpr std::size_t mib = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// The container's conditions, applied to this process only.
// ---------------------------------------------------------------------------------------------

/// Drops CAP_IPC_LOCK from the effective set (a process may always lower its own
/// capabilities). Returns whether it was held; an error if the kernel refuses.
status_or<bool> drop_ipc_lock() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capget, &header, data) != 0)
        return status::from_errno(errno, "capget", pitfall::stage::init, __FILE__, __LINE__);
    const std::uint32_t bit = 1u << CAP_IPC_LOCK; // CAP_IPC_LOCK is 14: in the first word
    const bool held = (data[0].effective & bit) != 0;
    data[0].effective &= ~bit;
    if (::syscall(SYS_capset, &header, data) != 0)
        return status::from_errno(errno, "capset without CAP_IPC_LOCK", pitfall::stage::init,
                                  __FILE__, __LINE__);
    return held;
}

/// Lowers RLIMIT_MEMLOCK's soft limit to `wanted` (kept if already lower); the limit in force.
status_or<std::size_t> lower_memlock(std::size_t wanted) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0)
        return status::from_errno(errno, "getrlimit(RLIMIT_MEMLOCK)", pitfall::stage::init,
                                  __FILE__, __LINE__);
    if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > wanted) {
        lim.rlim_cur = wanted;
        if (::setrlimit(RLIMIT_MEMLOCK, &lim) != 0)
            return status::from_errno(errno, "setrlimit(RLIMIT_MEMLOCK)", pitfall::stage::init,
                                      __FILE__, __LINE__);
    }
    return static_cast<std::size_t>(lim.rlim_cur);
}

struct conditions {
    std::size_t limit = 0;
    std::size_t transfer = 0;
    std::size_t chunk = 0;
};

status_or<conditions> apply_container_conditions(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long limit_mib, ctx.param_int("memlock_limit_mib"));
    PITFALL_ASSIGN_OR_RETURN(const long long transfer_mib, ctx.param_int("transfer_mib"));
    PITFALL_ASSIGN_OR_RETURN(const long long chunk_kib, ctx.param_int("chunk_kib"));
    conditions c;
    c.transfer = static_cast<std::size_t>(transfer_mib) * mib;
    c.chunk = std::min(static_cast<std::size_t>(chunk_kib) * 1024, c.transfer);
    PITFALL_ASSIGN_OR_RETURN(const bool held, drop_ipc_lock());
    PITFALL_ASSIGN_OR_RETURN(c.limit, lower_memlock(static_cast<std::size_t>(limit_mib) * mib));
    ctx.record("cap_ipc_lock_was_held", held ? 1.0 : 0.0);
    ctx.record("memlock_limit_bytes", static_cast<double>(c.limit), "B");
    ctx.record("transfer_bytes", static_cast<double>(c.transfer), "B");
    return c;
}

// The data moved: a fixed pattern, so the device's copy can be checked without a second copy.
std::uint32_t pattern(std::size_t i) {
    return static_cast<std::uint32_t>(i * 2654435761u) ^ 0x5bd1e995u;
}

// A kernel (or host loop) over the device's copy: the check reads what the kernel wrote.
struct xor_key {
    const std::uint32_t* in;
    std::uint32_t* out;
    std::uint32_t key;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { out[i] = in[i] ^ key; }
};
constexpr std::uint32_t check_key = 0x9e3779b9u;

/// Reads the device's copy back through a kernel and compares it with the pattern.
template <class Backend>
status check_device_copy(pitfall::context& ctx, const pitfall::buffer<std::uint32_t, Backend>& dev,
                         std::size_t words) {
    PITFALL_ASSIGN_OR_RETURN(auto keyed, Backend::template allocate<std::uint32_t>(words));
    PITFALL_TRY(Backend::for_each(words, xor_key{dev.data(), keyed.data(), check_key}));
    PITFALL_TRY(Backend::synchronize());
    std::vector<std::uint32_t> back(words);
    PITFALL_TRY(Backend::copy_to_host(back.data(), keyed, words));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < words; ++i)
        wrong += (back[i] ^ check_key) != pattern(i) ? 1 : 0;
    ctx.check("device_copy_matches_source", wrong == 0,
              std::to_string(wrong) + " of " + std::to_string(words) + " words differ");
    return status::ok();
}

/// mlock(2) and munlock(2) as system calls: AddressSanitizer replaces the libc functions with
/// ones that do nothing and succeed, which would hide the kernel's answer in a sanitizer build.
int lock_pages(void* addr, std::size_t len) {
    return static_cast<int>(::syscall(SYS_mlock, addr, len));
}
void unlock_pages(void* addr, std::size_t len) {
    (void)::syscall(SYS_munlock, addr, len);
}

/// Page-aligned anonymous memory (what mlock and cudaHostRegister work on), unmapped on exit.
class host_pages {
public:
    explicit host_pages(std::size_t bytes) : m_bytes(bytes) {
        void* p =
            ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        m_data = p == MAP_FAILED ? nullptr : static_cast<std::uint32_t*>(p);
    }
    ~host_pages() {
        if (m_data != nullptr)
            ::munmap(m_data, m_bytes);
    }
    host_pages(const host_pages&) = delete;
    host_pages& operator=(const host_pages&) = delete;
    std::uint32_t* data() const { return m_data; }
    std::size_t bytes() const { return m_bytes; }

private:
    std::size_t m_bytes;
    std::uint32_t* m_data = nullptr;
};

status_or<std::uint32_t*> filled_source(host_pages& source) {
    if (source.data() == nullptr)
        return status::from_errno(errno, "mmap of the source buffer", pitfall::stage::alloc,
                                  __FILE__, __LINE__);
    for (std::size_t i = 0; i < source.bytes() / 4; ++i)
        source.data()[i] = pattern(i);
    return source.data();
}

} // namespace

// reproduce_pin_whole_buffer: the whole transfer buffer pinned at once.
template <class Backend> status reproduce_pin_whole_buffer(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const conditions c, apply_container_conditions(ctx));
    ctx.record("requested_pinned_bytes", static_cast<double>(c.transfer), "B");
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        // cudaHostRegister of pageable memory first, as an event: the path pin_memory() of an
        // existing buffer takes.
        host_pages pageable(c.transfer);
        PITFALL_TRY(filled_source(pageable));
        const cudaError_t reg =
            cudaHostRegister(pageable.data(), c.transfer, cudaHostRegisterDefault);
        ctx.record_event("cudaHostRegister_whole_buffer",
                         reg == cudaSuccess
                             ? status::ok()
                             : pitfall::detail::from_cuda(reg, pitfall::stage::alloc,
                                                          "cudaHostRegister", __FILE__, __LINE__));
        if (reg == cudaSuccess)
            PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaHostUnregister(pageable.data()));
        void* pinned = nullptr;
        PITFALL_CUDA_TRY(pitfall::stage::alloc,
                         cudaHostAlloc(&pinned, c.transfer, cudaHostAllocDefault));
        // Pinned although the limit is smaller: the driver did not charge RLIMIT_MEMLOCK.
        ctx.record("pinned_bytes", static_cast<double>(c.transfer), "B");
        ctx.record("pinned_beyond_memlock_limit", c.transfer > c.limit ? 1.0 : 0.0);
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaFreeHost(pinned));
        // The device did the work of a transfer through it: one kernel, so the claim is proved.
        PITFALL_ASSIGN_OR_RETURN(auto dev, Backend::template allocate<std::uint32_t>(1024));
        PITFALL_TRY(Backend::copy_to_device(dev, pageable.data(), 1024));
        PITFALL_TRY(check_device_copy<Backend>(ctx, dev, 1024));
        return status::ok();
    }
#endif
    host_pages buffer(c.transfer);
    PITFALL_TRY(filled_source(buffer));
    if (lock_pages(buffer.data(), c.transfer) != 0)
        return status::from_errno(errno,
                                  "mlock(" + std::to_string(c.transfer) +
                                      " bytes) under RLIMIT_MEMLOCK " + std::to_string(c.limit) +
                                      " bytes without CAP_IPC_LOCK",
                                  pitfall::stage::alloc, __FILE__, __LINE__);
    ctx.record("pinned_bytes", static_cast<double>(c.transfer), "B");
    ctx.record("pinned_beyond_memlock_limit", c.transfer > c.limit ? 1.0 : 0.0);
    unlock_pages(buffer.data(), c.transfer);
    return status::ok();
}

// remedy_staging_pool: two small pinned buffers, reused for the whole transfer.
template <class Backend> status remedy_staging_pool(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const conditions c, apply_container_conditions(ctx));
    host_pages source(c.transfer);
    PITFALL_ASSIGN_OR_RETURN(const std::uint32_t* src, filled_source(source));
    const std::size_t words = c.transfer / 4;
    PITFALL_ASSIGN_OR_RETURN(auto dev, Backend::template allocate<std::uint32_t>(words));
    const std::size_t chunk_words = std::max<std::size_t>(c.chunk / 4, 1);
    ctx.record("pinned_bytes", static_cast<double>(2 * chunk_words * 4), "B");
    const auto start = std::chrono::steady_clock::now();
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        std::uint32_t* staging[2] = {nullptr, nullptr};
        cudaStream_t streams[2] = {nullptr, nullptr};
        cudaEvent_t copied[2] = {nullptr, nullptr};
        status result = status::ok();
        const auto run = [&]() -> status {
            for (int b = 0; b < 2; ++b) {
                PITFALL_CUDA_TRY(pitfall::stage::alloc,
                                 cudaHostAlloc(reinterpret_cast<void**>(&staging[b]),
                                               chunk_words * 4, cudaHostAllocDefault));
                PITFALL_CUDA_TRY(pitfall::stage::init,
                                 cudaStreamCreateWithFlags(&streams[b], cudaStreamNonBlocking));
                PITFALL_CUDA_TRY(pitfall::stage::init,
                                 cudaEventCreateWithFlags(&copied[b], cudaEventDisableTiming));
            }
            for (std::size_t first = 0, n = 0; first < words; first += chunk_words, ++n) {
                const int b = static_cast<int>(n % 2);
                const std::size_t count = std::min(chunk_words, words - first);
                // The buffer is refilled only once its previous copy has left it.
                PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaEventSynchronize(copied[b]));
                std::memcpy(staging[b], src + first, count * 4);
                PITFALL_CUDA_TRY(pitfall::stage::copy,
                                 cudaMemcpyAsync(dev.data() + first, staging[b], count * 4,
                                                 cudaMemcpyHostToDevice, streams[b]));
                PITFALL_CUDA_TRY(pitfall::stage::copy, cudaEventRecord(copied[b], streams[b]));
            }
            for (int b = 0; b < 2; ++b)
                PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaStreamSynchronize(streams[b]));
            return status::ok();
        };
        result = run();
        for (int b = 0; b < 2; ++b) { // released whatever happened; their errors are not news
            if (copied[b] != nullptr)
                (void)cudaEventDestroy(copied[b]);
            if (streams[b] != nullptr)
                (void)cudaStreamDestroy(streams[b]);
            if (staging[b] != nullptr)
                (void)cudaFreeHost(staging[b]);
        }
        PITFALL_TRY(result);
    }
#endif
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        host_pages staging(2 * chunk_words * 4);
        if (staging.data() == nullptr)
            return status::from_errno(errno, "mmap of the staging buffers", pitfall::stage::alloc,
                                      __FILE__, __LINE__);
        if (lock_pages(staging.data(), staging.bytes()) != 0)
            return status::from_errno(errno, "mlock of the two staging buffers",
                                      pitfall::stage::alloc, __FILE__, __LINE__);
        for (std::size_t first = 0, n = 0; first < words; first += chunk_words, ++n) {
            std::uint32_t* stage_buf = staging.data() + (n % 2) * chunk_words;
            const std::size_t count = std::min(chunk_words, words - first);
            std::memcpy(stage_buf, src + first, count * 4);
            std::memcpy(dev.data() + first, stage_buf, count * 4);
        }
        unlock_pages(staging.data(), staging.bytes());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ctx.record("transfer_seconds", seconds, "s");
    ctx.record("transfer_bytes_per_second", static_cast<double>(c.transfer) / seconds, "B/s");
    ctx.check("pinned_within_limit", 2 * chunk_words * 4 <= c.limit,
              std::to_string(2 * chunk_words * 4) + " bytes pinned, limit " +
                  std::to_string(c.limit));
    return check_device_copy<Backend>(ctx, dev, words);
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_pin_whole_buffer), PITFALL_VARIANT(remedy_staging_pool))
