// context_per_process: every process that touches CUDA pays for a context of its own.
//
// What
//   N worker processes (data-loader workers, several ranks on one GPU) are started at once with
//   run_self, the SDK's real second process, and held alive together at a rendezvous (files in
//   a private folder: each says "ready", waits for the parent's "go", measures itself, says
//   "measured", waits for "exit"). While they all live the parent measures.
//     reproduce_context_per_worker   cuda: each worker initialises CUDA on device 0 (cudaFree(0));
//                                    the parent's cudaMemGetInfo before and while they live gives
//                                    device_bytes_per_worker. cpu: each worker reads the same
//                                    read-only data set into a private copy.
//     reproduce_eager_module_loading cuda: the same with CUDA_MODULE_LOADING=EAGER.
//     remedy_host_only_workers       cuda: the parent alone owns the device, the workers do host
//                                    work only. cpu: the workers map one shared copy (MAP_SHARED
//                                    of a memfd) instead of copying it.
//
// Why it fails
//   A CUDA context belongs to one process: its page tables, the loaded modules (the code of
//   every kernel loaded so far), the local-memory and printf heaps and the driver's own state
//   are allocated on the device for each process that initialises CUDA, and released only when
//   that process exits. Nothing is shared between processes (MPS aside). N workers that touch
//   CUDA (set_device, pin_memory, a CUDA tensor in the dataset) cost N contexts.
//
// Expected per backend
//   cuda  reproduce_context_per_worker: ok; device_bytes_per_worker of the order of hundreds of
//         MiB (pytorch/pytorch#20532: 300-400 MB; ai2cm/ace#1396: ~520 MiB with a framework's
//         kernels; this program's own context is smaller, it has few kernels: measured).
//         reproduce_eager_module_loading: ok, at least as much per worker (CUDA Programming
//         Guide, "Lazy Loading": lazy is the default since 12.2; eager loads every module at
//         context creation). remedy_host_only_workers: ok, device_bytes_per_worker near 0.
//         Without a driver: UNSUPPORTED, cudaErrorInsufficientDriver (the SDK's probe).
//   cpu   reproduce_context_per_worker: ok; each worker's PSS includes the whole data set
//         (data_pss_bytes_per_worker >= data set). remedy_host_only_workers: ok; the shared mapping
//         is divided among the processes that map it (proc(5), /proc/pid/smaps_rollup "Pss"), so a
//         worker's share is at most half the data set (the parent maps it too).
//         reproduce_eager_module_loading: UNSUPPORTED, no CPU analog.
//
// Remedy
//   One process owns the device; workers do host-only work and hand host (pinned by the owner)
//   batches back; never initialise CUDA in a worker (no set_device, no CUDA tensors in the
//   dataset). Where several processes must use the GPU, lazy module loading (the default since
//   12.2) keeps each context smaller; MPS shares one. On the CPU: share read-only data through
//   one mapping instead of copying it into each worker.
//
// Evidence
//   pytorch/pytorch#20532, pytorch/pytorch#107667, ai2cm/ace#1396.
#include "pitfall/scenario.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

constexpr std::size_t mib = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Rendezvous through files in a private folder: simple, and visible to a person debugging it.
// ---------------------------------------------------------------------------------------------
bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}
status touch(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return status::from_errno(errno, "create " + path, pitfall::stage::init, __FILE__,
                                  __LINE__);
    ::close(fd);
    return status::ok();
}
/// Waits until `count` of the files `prefix`0.. exist (or `prefix` itself when count is 0).
/// `gone` says the processes that would write them have all exited: no use waiting on.
status wait_for(const std::string& prefix, int count, double seconds,
                const std::function<bool()>& gone = {}) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
        int seen = 0;
        if (count == 0)
            seen = exists(prefix) ? 1 : 0;
        else
            for (int i = 0; i < count; ++i)
                seen += exists(prefix + std::to_string(i)) ? 1 : 0;
        if (seen >= (count == 0 ? 1 : count))
            return status::ok();
        if (std::chrono::steady_clock::now() > deadline || (gone && gone()))
            return PITFALL_HOST_ERROR(
                pitfall::stage::synchronize, pitfall::host_error::child_timed_out,
                "waited " + std::to_string(seconds) + " s for " + prefix + " (" +
                    std::to_string(seen) + " of " + std::to_string(count) + ")");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

/// "Rss:" and "Pss:" of this process in bytes, from /proc/self/smaps_rollup.
std::map<std::string, double> memory_rollup() {
    std::map<std::string, double> out;
    std::ifstream in("/proc/self/smaps_rollup");
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string key;
        double kb = 0;
        if (fields >> key >> kb && (key == "Rss:" || key == "Pss:"))
            out[key.substr(0, key.size() - 1)] = kb * 1024.0;
    }
    return out;
}

// The data set: a fixed pattern; its sum (an independent check of what each worker read).
std::uint64_t data_word(std::size_t i) {
    return (i * 0x9e3779b97f4a7c15ull) ^ (i >> 7);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// One worker.
// ---------------------------------------------------------------------------------------------
template <class Backend> status helper_worker(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const std::string mode, ctx.param_string("mode"));
    PITFALL_ASSIGN_OR_RETURN(const std::string dir, ctx.param_string("rendezvous"));
    PITFALL_ASSIGN_OR_RETURN(const std::string data_path, ctx.param_string("data_path"));
    PITFALL_ASSIGN_OR_RETURN(const long long index, ctx.param_int("index"));
    PITFALL_ASSIGN_OR_RETURN(const long long wait_whole, ctx.param_int("wait_seconds"));
    const double wait = static_cast<double>(wait_whole);
    if (dir.empty())
        return pitfall::bad_parameter("rendezvous",
                                      "helper_worker is started by the other variants");
    std::vector<std::uint64_t> private_copy;
    const std::uint64_t* data = nullptr;
    std::size_t words = 0;
    void* mapping = MAP_FAILED;
    std::size_t mapped_bytes = 0;
    // The whole process's PSS includes the program, its libraries and a sanitizer's shadow
    // memory: the data set's share is what reading it added.
    const double pss_before_data = memory_rollup()["Pss"];
    if (mode == "private_copy" || mode == "shared_mapping") {
        const int fd = ::open(data_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return status::from_errno(errno, "open " + data_path, pitfall::stage::init, __FILE__,
                                      __LINE__);
        struct stat st {};
        (void)::fstat(fd, &st);
        mapped_bytes = static_cast<std::size_t>(st.st_size);
        words = mapped_bytes / 8;
        if (mode == "private_copy") {
            // What a worker that unpickles or reads the data set does: its own copy.
            private_copy.resize(words);
            std::size_t done = 0;
            while (done < mapped_bytes) {
                const ssize_t got = ::pread(fd, reinterpret_cast<char*>(private_copy.data()) + done,
                                            mapped_bytes - done, static_cast<off_t>(done));
                if (got <= 0)
                    break;
                done += static_cast<std::size_t>(got);
            }
            data = private_copy.data();
        } else {
            mapping = ::mmap(nullptr, mapped_bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (mapping == MAP_FAILED) {
                ::close(fd);
                return status::from_errno(errno, "mmap " + data_path, pitfall::stage::init,
                                          __FILE__, __LINE__);
            }
            data = static_cast<const std::uint64_t*>(mapping);
        }
        ::close(fd);
        std::uint64_t sum = 0; // reads every page: it is resident in this process
        for (std::size_t i = 0; i < words; ++i)
            sum += data[i];
        ctx.record("data_sum_low32", static_cast<double>(sum & 0xffffffffu));
    }
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        if (mode == "cuda_context") {
            PITFALL_CUDA_TRY(pitfall::stage::init, cudaSetDevice(0));
            PITFALL_CUDA_TRY(pitfall::stage::init, cudaFree(nullptr)); // creates the context
            std::size_t free = 0, total = 0;
            PITFALL_CUDA_TRY(pitfall::stage::init, cudaMemGetInfo(&free, &total));
            ctx.record("free_seen_bytes", static_cast<double>(free), "B");
        }
    }
#endif
    const std::string me = std::to_string(index);
    PITFALL_TRY(touch(dir + "/ready" + me));
    PITFALL_TRY(wait_for(dir + "/go", 0, wait));
    const auto rollup = memory_rollup();
    for (const auto& [key, bytes] : rollup)
        ctx.record(key == "Pss" ? "pss_bytes" : "rss_bytes", bytes, "B");
    ctx.record("data_pss_bytes", rollup.count("Pss") ? rollup.at("Pss") - pss_before_data : -1.0,
               "B");
    PITFALL_TRY(touch(dir + "/measured" + me));
    PITFALL_TRY(wait_for(dir + "/exit", 0, wait));
    if (mapping != MAP_FAILED)
        ::munmap(mapping, mapped_bytes);
    return status::ok();
}

namespace {

/// Starts `workers` copies of helper_worker at once, holds them at the rendezvous, and calls
/// `measure` while all of them live. Returns their result documents.
template <class Measure>
status_or<std::vector<nlohmann::json>> run_workers(pitfall::context& ctx, const std::string& mode,
                                                   const std::map<std::string, std::string>& env,
                                                   const std::string& data_path,
                                                   Measure&& measure) {
    PITFALL_ASSIGN_OR_RETURN(const long long workers, ctx.param_int("workers"));
    PITFALL_ASSIGN_OR_RETURN(const long long wait_whole, ctx.param_int("wait_seconds"));
    const double wait = static_cast<double>(wait_whole);
    const char* tmp = std::getenv("TMPDIR");
    std::string dir =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pitfall-workers-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr)
        return PITFALL_HOST_ERROR(pitfall::stage::init, pitfall::host_error::no_temp_dir, dir);
    const int n = static_cast<int>(workers);
    std::vector<status_or<pitfall::child_run>> runs(n, status(PITFALL_UNSUPPORTED("not started")));
    std::vector<std::thread> threads;
    std::atomic<int> exited{0};
    for (int i = 0; i < n; ++i)
        threads.emplace_back([&, i] {
            runs[i] = pitfall::run_self(ctx, "helper_worker", env,
                                        {"mode=" + mode, "rendezvous=" + dir,
                                         "data_path=" + data_path, "index=" + std::to_string(i),
                                         "wait_seconds=" + std::to_string(wait_whole)},
                                        3 * wait);
            ++exited;
        });
    const auto all_gone = [&] { return exited.load() == n; };
    status phase = wait_for(dir + "/ready", n, wait, all_gone);
    if (phase.is_ok())
        phase = measure();
    // Released whatever happened, so that no worker waits out its timeout.
    (void)touch(dir + "/go");
    if (phase.is_ok())
        phase = wait_for(dir + "/measured", n, wait, all_gone);
    (void)touch(dir + "/exit");
    for (auto& t : threads)
        t.join();
    for (const char* name : {"go", "exit"})
        (void)std::remove((dir + "/" + name).c_str());
    for (int i = 0; i < n; ++i)
        for (const char* name : {"ready", "measured"})
            (void)std::remove((dir + "/" + name + std::to_string(i)).c_str());
    (void)::rmdir(dir.c_str());
    // A worker's own failure explains a rendezvous that never completed: it comes first.
    std::vector<nlohmann::json> results;
    for (int i = 0; i < n; ++i) {
        if (!runs[i].is_ok())
            return runs[i].error();
        PITFALL_ASSIGN_OR_RETURN(
            const auto report, pitfall::read_child(runs[i].value(), "worker " + std::to_string(i)));
        PITFALL_TRY(report.outcome);
        results.push_back(report.result);
    }
    PITFALL_TRY(phase);
    ctx.record("workers", static_cast<double>(n));
    return results;
}

double measurement(const nlohmann::json& result, const std::string& name) {
    return result.value("measurements", nlohmann::json::object())
        .value(name, nlohmann::json::object())
        .value("value", -1.0);
}

#if PITFALL_HAS_CUDA
struct mark {
    int* x;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { x[i] = static_cast<int>(i); }
};

/// The parent's own context and one kernel, then N workers: what each costs the device.
status device_cost(pitfall::context& ctx, const std::string& mode,
                   const std::map<std::string, std::string>& env) {
    PITFALL_ASSIGN_OR_RETURN(auto owned, pitfall::cuda_backend::allocate<int>(1024));
    PITFALL_TRY(pitfall::cuda_backend::for_each(owned.size(), mark{owned.data()}));
    PITFALL_TRY(pitfall::cuda_backend::synchronize());
    std::size_t before = 0, total = 0;
    PITFALL_CUDA_TRY(pitfall::stage::init, cudaMemGetInfo(&before, &total));
    std::size_t during = before;
    PITFALL_ASSIGN_OR_RETURN(const auto results, run_workers(ctx, mode, env, "", [&]() -> status {
                                 // All workers live: the device's free memory now.
                                 PITFALL_CUDA_TRY(pitfall::stage::init,
                                                  cudaMemGetInfo(&during, &total));
                                 return status::ok();
                             }));
    const double n = static_cast<double>(results.size());
    const double used = before > during ? static_cast<double>(before - during) : 0.0;
    ctx.record("free_before_workers_bytes", static_cast<double>(before), "B");
    ctx.record("free_while_workers_live_bytes", static_cast<double>(during), "B");
    ctx.record("device_bytes_per_worker", used / n, "B");
    ctx.record("device_bytes_all_workers", used, "B");
    ctx.record("device_total_bytes", static_cast<double>(total), "B");
    return status::ok();
}
#endif

/// cpu: the data set in a memfd the workers open through /proc/<parent>/fd/<fd>.
status host_cost(pitfall::context& ctx, const std::string& mode) {
    PITFALL_ASSIGN_OR_RETURN(const long long data_mib, ctx.param_int("data_mib"));
    const std::size_t bytes = static_cast<std::size_t>(data_mib) * mib;
    const int fd = ::memfd_create("pitfall-dataset", 0);
    if (fd < 0)
        return status::from_errno(errno, "memfd_create", pitfall::stage::alloc, __FILE__, __LINE__);
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        ::close(fd);
        return status::from_errno(errno, "ftruncate of the data set", pitfall::stage::alloc,
                                  __FILE__, __LINE__);
    }
    void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        ::close(fd);
        return status::from_errno(errno, "mmap of the data set", pitfall::stage::alloc, __FILE__,
                                  __LINE__);
    }
    auto* words = static_cast<std::uint64_t*>(map);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < bytes / 8; ++i) {
        words[i] = data_word(i);
        sum += data_word(i); // from the formula, not from the memory the workers read
    }
    const std::string path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
    auto results = run_workers(ctx, mode, {}, path, [] { return status::ok(); });
    ::munmap(map, bytes);
    ::close(fd);
    PITFALL_TRY(results);
    double pss_sum = 0, pss_max = 0;
    int wrong_sums = 0;
    for (const auto& r : results.value()) {
        const double pss = measurement(r, "data_pss_bytes");
        pss_sum += pss;
        pss_max = std::max(pss_max, pss);
        wrong_sums +=
            measurement(r, "data_sum_low32") != static_cast<double>(sum & 0xffffffffu) ? 1 : 0;
    }
    const double n = static_cast<double>(results.value().size());
    ctx.record("data_bytes", static_cast<double>(bytes), "B");
    ctx.record("data_pss_bytes_per_worker", pss_sum / n, "B");
    ctx.record("data_pss_bytes_max_worker", pss_max, "B");
    ctx.record("data_pss_bytes_all_workers", pss_sum, "B");
    ctx.check("workers_read_the_data_set", wrong_sums == 0,
              std::to_string(wrong_sums) + " workers summed the data set differently");
    if (mode == "private_copy")
        // Each worker's own copy: its PSS grew by the whole data set. 10% of slack: the shares
        // of the pages it had before (libraries) move as the other workers come and go.
        ctx.check("each_worker_holds_a_whole_copy", pss_sum / n >= 0.9 * static_cast<double>(bytes),
                  "mean PSS added by the data set " + std::to_string(pss_sum / n) +
                      " B, data set " + std::to_string(bytes) + " B");
    else
        // Shared pages are divided among the processes that map them: the parent and this
        // worker at least, so no worker's share exceeds half (1 MiB for page tables and such).
        ctx.check("workers_share_one_copy", pss_max <= static_cast<double>(bytes) / 2 + 1.0 * mib,
                  "largest PSS added by the data set " + std::to_string(pss_max) + " B, data set " +
                      std::to_string(bytes) + " B shared by the parent and " +
                      std::to_string(results.value().size()) + " workers");
    return status::ok();
}

} // namespace

template <class Backend> status reproduce_context_per_worker(pitfall::context& ctx) {
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda)
        return device_cost(ctx, "cuda_context", {});
#endif
    return host_cost(ctx, "private_copy");
}

template <class Backend> status reproduce_eager_module_loading(pitfall::context& ctx) {
    PITFALL_TRY(pitfall::cuda_only<Backend>(
        "module loading is the CUDA driver's: a host program's code pages are shared by every "
        "process that runs it"));
#if PITFALL_HAS_CUDA
    return device_cost(ctx, "cuda_context", {{"CUDA_MODULE_LOADING", "EAGER"}});
#else
    (void)ctx; // the build has no CUDA: cuda_only answered above
    return status::ok();
#endif
}

template <class Backend> status remedy_host_only_workers(pitfall::context& ctx) {
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda)
        return device_cost(ctx, "host_only", {});
#endif
    return host_cost(ctx, "shared_mapping");
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_context_per_worker),
                 PITFALL_VARIANT(reproduce_eager_module_loading),
                 PITFALL_VARIANT(remedy_host_only_workers), PITFALL_VARIANT(helper_worker))
