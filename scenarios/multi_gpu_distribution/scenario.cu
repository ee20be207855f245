// multi_gpu_distribution: a data-parallel training step, and a global batch that does not split.
//
// What
//   One SGD step of softmax regression (the seed's Dense(10, softmax) head on MNIST-shaped
//   inputs: 784 features, 10 classes, 7850 parameters) spread over R replicas: each replica
//   takes a shard of the global batch, computes the gradient of its shard, the replicas add
//   their gradients with an all-reduce, and every replica applies the same update.
//     remedy                 shards that differ by at most one sample cover the whole batch;
//                            each replica *sums* its per-sample gradients, the all-reduce adds
//                            the sums, the step divides by the global batch. The result equals
//                            one replica's full-batch gradient (to float32 rounding).
//     reproduce_uneven_batch the classic sharding: per_replica = global_batch / replicas
//                            (integer division), each replica takes the *mean* over its shard,
//                            the all-reduce adds the means and the step divides by R. With
//                            global_batch % R != 0 the last global_batch % R samples belong to
//                            no shard: they are dropped without a word, and the gradient is
//                            that of the kept samples, not of the batch.
//   GPU: one replica per visible device driven from one host thread, the all-reduce is NCCL's
//   (ncclCommInitAll + ncclAllReduce in a group, loaded with dlopen so that a missing NCCL is
//   an outcome, not a start-up failure). CPU analog: one std::thread per replica, each with
//   its own buffers, and a ring all-reduce over shared memory (reduce-scatter then
//   all-gather, R-1 steps each, a barrier between steps: NCCL's ring algorithm).
//
// Why it fails
//   Nothing crashes. Dropping samples or weighting shards of different sizes equally changes
//   the gradient, so a multi-GPU run trains a slightly different model from the single-GPU
//   run it was checked against, and the difference depends on the number of GPUs. With the
//   default batch (1001) and 3 replicas, 2 samples of 1001 are dropped every step and the
//   gradient moves by 3.9% of its largest entry (measured against the float64 references).
//   Frameworks avoid the drop in different ways (uneven last shards, padding with repeated
//   samples, drop_last), each with its own bias; the sum-then-divide remedy has none.
//   Below two GPUs there is no data parallelism to test: the GPU cases are UNSUPPORTED with the
//   device count.
//
// Expected per backend
//   cpu   remedy: ok, every sample used, the gradient equals the float64 full-batch reference
//         and the single-replica run to ~1e-6 (tolerance 1e-4, relative to the largest entry),
//         the replicas' all-reduced gradients are bitwise identical.
//         reproduce_uneven_batch: ok (that is the failure), samples_dropped = 1001 % 3 = 2,
//         the gradient equals the float64 reference of the kept 999 samples, and its distance
//         from the full-batch gradient (3.9e-2) equals the float64 references' own distance.
//   cuda  (>= 2 GPUs, documented, not yet observed) the same outcomes and checks with NCCL's
//         all-reduce; samples_dropped = 1001 % R. With one GPU: UNSUPPORTED ("1 CUDA device
//         visible"); here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
//
// Remedy
//   Shard so that every sample belongs to exactly one replica (sizes may differ by one), reduce
//   gradient *sums* (or sample-count-weighted means) and divide by the global batch; or pick a
//   global batch divisible by the replica count and say so. Check a distributed step against
//   a single-replica step before trusting it.
//
// Seed
//   003 ex.3 (tf.distribute.MirroredStrategy over the available GPUs, batch_size=32 split
//   across replicas), 002 ex.1 (MirroredStrategy, the batch size chosen for the devices).
//   NCCL: "Collective Operations", "Group Calls" and ncclCommInitAll in NCCL's user guide.
#include "pitfall/random.hpp"
#include "pitfall/scenario.hpp"

#if PITFALL_HAS_CUDA
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

constexpr int classes = 10; // MNIST digits; a compile-time constant keeps logits in registers
// Agreement, relative to the largest gradient entry. A float32 sum of n terms of size <= 1
// is off by at most ~n 2^-24 (6e-5 for n = 1001) and typically ~sqrt(n) 2^-24 (2e-6) before
// it is divided by n; against the largest entry of the mean gradient (~0.02) that is ~1e-6
// (observed: 0.6e-6 to 1.3e-6, float32 softmax included). 1e-4 leaves room for larger batches
// and still sits ~400x below the effect of dropping 2 of 1001 samples (3.9e-2).
constexpr double agreement_tolerance = 1e-4;

std::string scientific(double v) {
    std::ostringstream out;
    out.precision(3);
    out << std::scientific << v;
    return out.str();
}

// ---------------------------------------------------------------------------------------------
// The problem: x (batch x features, row-major, values in [0, 1)), integer labels, weights W
// (classes x features, class-major) followed by the bias b (classes).
// ---------------------------------------------------------------------------------------------
struct problem {
    std::size_t features = 0;
    std::size_t batch = 0;
    std::vector<float> x;
    std::vector<int> labels;
    std::vector<float> weights;
    std::size_t parameter_count() const { return classes * features + classes; }
};

problem make_problem(std::size_t batch, std::size_t features, std::uint64_t seed) {
    problem p;
    p.features = features;
    p.batch = batch;
    pitfall::splitmix64 rng(seed); // one stream: x, then the labels, then the weights
    p.x.resize(batch * features);
    for (auto& v : p.x)
        v = rng.unit_float();
    p.labels.resize(batch);
    for (auto& l : p.labels)
        l = static_cast<int>(rng.next() % classes);
    p.weights.resize(p.parameter_count());
    for (auto& w : p.weights) // small: every class starts near p = 0.1
        w = (rng.unit_float() - 0.5f) * 0.02f;
    return p;
}

// ---------------------------------------------------------------------------------------------
// The step, as functors shared by the host loop and the kernels.
// ---------------------------------------------------------------------------------------------
#if defined(__CUDA_ARCH__)
#define PITFALL_UNROLL _Pragma("unroll")
#else
#define PITFALL_UNROLL
#endif

/// Row i: logits, softmax, and delta = (p - onehot(label)) * row_scale (row_scale = 1 sums the
/// shard's gradients, 1 / rows averages them).
struct softmax_delta {
    const float* x;
    const int* labels;
    const float* w;
    float* delta;
    std::size_t features;
    float row_scale;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const float* xi = x + i * features;
        const float* bias = w + classes * features;
        float z[classes];
        PITFALL_UNROLL
        for (int k = 0; k < classes; ++k)
            z[k] = bias[k];
        // Feature-outer, class-inner with a constant trip count: z stays in registers.
        for (std::size_t f = 0; f < features; ++f) {
            const float xf = xi[f];
            PITFALL_UNROLL
            for (int k = 0; k < classes; ++k)
                z[k] += w[static_cast<std::size_t>(k) * features + f] * xf;
        }
        float top = z[0];
        PITFALL_UNROLL
        for (int k = 1; k < classes; ++k)
            top = z[k] > top ? z[k] : top;
        float total = 0.f;
        PITFALL_UNROLL
        for (int k = 0; k < classes; ++k) {
            z[k] = expf(z[k] - top);
            total += z[k];
        }
        const int label = labels[i];
        PITFALL_UNROLL
        for (int k = 0; k < classes; ++k)
            delta[i * classes + k] = (z[k] / total - (k == label ? 1.f : 0.f)) * row_scale;
    }
};

/// Parameter j: the sum over the shard's rows of delta[i, k] * x[i, f] (or delta[i, k] for a
/// bias). One output per thread, no atomics: the order of the sum is fixed, so a replica's
/// local gradient is reproducible run to run and the only order that changes between one
/// replica and R is the split into shards plus the all-reduce's own order of addition.
/// On the GPU neighbouring threads read neighbouring features of a row (coalesced); on the
/// CPU the column walk stays in cache (a shard's x is ~1 MB).
struct gradient_sum {
    const float* x;
    const float* delta;
    float* grad;
    std::size_t features;
    std::size_t rows;
    PITFALL_HOST_DEVICE void operator()(std::size_t j) const {
        const std::size_t weights = classes * features;
        float acc = 0.f;
        if (j < weights) {
            const std::size_t k = j / features;
            const std::size_t f = j % features;
            for (std::size_t i = 0; i < rows; ++i)
                acc += delta[i * classes + k] * x[i * features + f];
        } else {
            const std::size_t k = j - weights;
            for (std::size_t i = 0; i < rows; ++i)
                acc += delta[i * classes + k];
        }
        grad[j] = acc;
    }
};

/// w -= step * g (step = learning rate x the post-reduction scale).
struct sgd_update {
    float* w;
    const float* grad;
    float step;
    PITFALL_HOST_DEVICE void operator()(std::size_t j) const { w[j] -= step * grad[j]; }
};

// ---------------------------------------------------------------------------------------------
// The independent float64 reference: the mean gradient over rows [first, first + count),
// sample by sample, softmax in double.
// ---------------------------------------------------------------------------------------------
std::vector<double> reference_mean_gradient(const problem& p, std::size_t first,
                                            std::size_t count) {
    const std::size_t F = p.features;
    std::vector<double> g(p.parameter_count(), 0.0);
    for (std::size_t i = first; i < first + count; ++i) {
        const float* xi = p.x.data() + i * F;
        double z[classes];
        double top = -1e300;
        for (int k = 0; k < classes; ++k) {
            double acc = p.weights[classes * F + static_cast<std::size_t>(k)];
            for (std::size_t f = 0; f < F; ++f)
                acc += static_cast<double>(p.weights[static_cast<std::size_t>(k) * F + f]) * xi[f];
            z[k] = acc;
            top = std::max(top, acc);
        }
        double total = 0.0;
        for (double& v : z) {
            v = std::exp(v - top);
            total += v;
        }
        for (int k = 0; k < classes; ++k) {
            const double d = z[k] / total - (k == p.labels[i] ? 1.0 : 0.0);
            const std::size_t kk = static_cast<std::size_t>(k);
            for (std::size_t f = 0; f < F; ++f)
                g[kk * F + f] += d * xi[f];
            g[classes * F + kk] += d;
        }
    }
    for (double& v : g)
        v /= static_cast<double>(count);
    return g;
}

/// max |a - b| / max |b|: relative to the gradient's scale, meaningful for entries near zero.
double normwise_difference(const std::vector<double>& a, const std::vector<double>& b) {
    double diff = 0.0, scale = 0.0;
    for (std::size_t j = 0; j < b.size(); ++j) {
        diff = std::max(diff, std::fabs(a[j] - b[j]));
        scale = std::max(scale, std::fabs(b[j]));
    }
    return scale > 0.0 ? diff / scale : diff;
}

// ---------------------------------------------------------------------------------------------
// Sharding: the remedy's and the classic one.
// ---------------------------------------------------------------------------------------------
struct shard {
    std::size_t first = 0;
    std::size_t rows = 0;
};

std::vector<shard> make_shards(std::size_t batch, int replicas, bool cover_all) {
    const std::size_t r_count = static_cast<std::size_t>(replicas);
    std::vector<shard> shards(r_count);
    const std::size_t base = batch / r_count;                  // the classic per-replica batch
    const std::size_t extra = cover_all ? batch % r_count : 0; // the remedy spreads the rest
    std::size_t next = 0;
    for (std::size_t r = 0; r < r_count; ++r) {
        shards[r] = {next, base + (r < extra ? 1 : 0)};
        next += shards[r].rows;
    }
    return shards; // classic: rows [R * base, batch) are in no shard
}

// ---------------------------------------------------------------------------------------------
// Replicas. Each owns its shard of the data, its copy of the weights and its gradient buffer,
// on its own device (CUDA) or in host memory (CPU).
// ---------------------------------------------------------------------------------------------
template <class Backend> status select_device(int device) {
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaSetDevice(device));
        return status::ok();
    }
#endif
    (void)device;
    return status::ok();
}

template <class Backend> struct replica {
    int device = 0;
    shard part;
    float row_scale = 1.f;
    pitfall::buffer<float, Backend> x, w, delta, grad;
    pitfall::buffer<int, Backend> labels;

    replica() = default;
    replica(const replica&) = delete;
    replica& operator=(const replica&) = delete;
    // The body runs before the members are destroyed: device memory is freed with its own
    // device current.
    ~replica() { (void)select_device<Backend>(device); }

    status compute_local_gradient(std::size_t features) {
        const std::size_t params = classes * features + classes;
        PITFALL_TRY(Backend::for_each(part.rows, softmax_delta{x.data(), labels.data(), w.data(),
                                                               delta.data(), features, row_scale}));
        return Backend::for_each(
            params, gradient_sum{x.data(), delta.data(), grad.data(), features, part.rows});
    }
};

template <class Backend> using replica_list = std::vector<std::unique_ptr<replica<Backend>>>;

/// Builds one replica per shard: selects its device, allocates its buffers there and copies
/// in its rows of x and labels and the initial weights (every replica starts from the same
/// weights, as MirroredStrategy's mirrored variables do). A classic shard of zero rows cannot
/// happen (global_batch >= replicas is checked), but its buffers would still be one row long
/// so that no backend is asked for a zero-byte allocation.
template <class Backend>
status_or<replica_list<Backend>> make_replicas(const problem& p, const std::vector<shard>& shards,
                                               bool sum_rows, const std::vector<int>& devices) {
    replica_list<Backend> out;
    const std::size_t F = p.features;
    const std::size_t P = p.parameter_count();
    for (std::size_t r = 0; r < shards.size(); ++r) {
        auto rep = std::make_unique<replica<Backend>>();
        rep->device = devices[r];
        rep->part = shards[r];
        rep->row_scale = sum_rows ? 1.f : 1.f / static_cast<float>(shards[r].rows);
        PITFALL_TRY(select_device<Backend>(rep->device));
        const std::size_t rows = std::max<std::size_t>(shards[r].rows, 1);
        PITFALL_ASSIGN_OR_RETURN(rep->x, Backend::template allocate<float>(rows * F));
        PITFALL_ASSIGN_OR_RETURN(rep->labels, Backend::template allocate<int>(rows));
        PITFALL_ASSIGN_OR_RETURN(rep->delta, Backend::template allocate<float>(rows * classes));
        PITFALL_ASSIGN_OR_RETURN(rep->w, Backend::template allocate<float>(P));
        PITFALL_ASSIGN_OR_RETURN(rep->grad, Backend::template allocate<float>(P));
        PITFALL_TRY(
            Backend::copy_to_device(rep->x, p.x.data() + shards[r].first * F, shards[r].rows * F));
        PITFALL_TRY(Backend::copy_to_device(rep->labels, p.labels.data() + shards[r].first,
                                            shards[r].rows));
        PITFALL_TRY(Backend::copy_to_device(rep->w, p.weights.data(), P));
        out.push_back(std::move(rep));
    }
    return out;
}

/// What one data-parallel run observed.
struct run_result {
    std::vector<double> gradient;     ///< the first step's reduced gradient, post-scaled
    double replica_gradient_diff = 0; ///< max |g_r - g_0| over replicas after the all-reduce
    std::vector<double> step_seconds;
    std::vector<double> allreduce_seconds;
};

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// CPU analog: replicas are threads; the all-reduce is a ring over shared memory.
// ---------------------------------------------------------------------------------------------

/// A reusable barrier for `count` threads (std::barrier is C++20).
class thread_barrier {
public:
    explicit thread_barrier(int count) : m_count(count) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(m_mutex);
        const unsigned long generation = m_generation;
        if (++m_arrived == m_count) {
            m_arrived = 0;
            ++m_generation;
            m_cv.notify_all();
            return;
        }
        m_cv.wait(lock, [&] { return generation != m_generation; });
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    int m_count;
    int m_arrived = 0;
    unsigned long m_generation = 0;
};

/// Ring all-reduce (sum) of `count` floats, in place in every rank's buffer; called by all R
/// ranks at once. The vector is cut into R chunks. Reduce-scatter: at step s rank r adds its
/// left neighbour's chunk (r - s - 1) into its own; after R-1 steps rank r holds the complete
/// sum of chunk (r + 1). All-gather: at step s rank r copies chunk (r - s) from its left
/// neighbour. In any step a rank writes one chunk that nobody reads in that step, so a barrier
/// between steps is the only synchronisation; every rank ends with the same bits.
void ring_allreduce(const std::vector<float*>& buffers, std::size_t count, int rank,
                    thread_barrier& barrier) {
    const int R = static_cast<int>(buffers.size());
    const float* left = buffers[static_cast<std::size_t>((rank - 1 + R) % R)];
    float* mine = buffers[static_cast<std::size_t>(rank)];
    auto bounds = [&](int chunk) {
        const std::size_t c = static_cast<std::size_t>(((chunk % R) + R) % R);
        const std::size_t r_count = static_cast<std::size_t>(R);
        return std::make_pair(count * c / r_count, count * (c + 1) / r_count);
    };
    for (int s = 0; s < R - 1; ++s) {
        const auto [lo, hi] = bounds(rank - s - 1);
        for (std::size_t i = lo; i < hi; ++i)
            mine[i] += left[i];
        barrier.arrive_and_wait();
    }
    for (int s = 0; s < R - 1; ++s) {
        const auto [lo, hi] = bounds(rank - s);
        for (std::size_t i = lo; i < hi; ++i)
            mine[i] = left[i];
        barrier.arrive_and_wait();
    }
}

/// One step on every replica: local gradient, all-reduce, update. Fills the timings.
/// Threads are started per step (R - 1 of them; the calling thread is rank 0): simpler than a
/// pool, and ~50 us against a step of tens of milliseconds. Each thread touches only its own
/// replica's buffers except inside ring_allreduce, where it reads its left neighbour's.
status cpu_step(replica_list<pitfall::cpu_backend>& reps, std::size_t features, float step,
                double& allreduce_seconds) {
    using backend = pitfall::cpu_backend;
    const int R = static_cast<int>(reps.size());
    const std::size_t P = classes * features + classes;
    std::vector<float*> grads;
    for (auto& rep : reps)
        grads.push_back(rep->grad.data());
    thread_barrier barrier(R);
    std::vector<status> outcomes(reps.size());
    clock_type::time_point t0;
    auto replica_main = [&](int rank) {
        auto& rep = *reps[static_cast<std::size_t>(rank)];
        const status local = rep.compute_local_gradient(features);
        // Every rank takes part in every barrier, whatever its own status (a missing rank
        // would deadlock the others); the CPU loops cannot fail, the status is kept anyway.
        barrier.arrive_and_wait();
        if (rank == 0)
            t0 = clock_type::now();
        ring_allreduce(grads, P, rank, barrier);
        if (rank == 0)
            allreduce_seconds = seconds_since(t0); // the last ring step ended at a barrier
        const status updated =
            local.is_ok() ? backend::for_each(P, sgd_update{rep.w.data(), rep.grad.data(), step})
                          : local;
        // A named slot: nvcc's front end takes `outcomes[rank] = ...` for a discarded
        // [[nodiscard]] status (its assignment operator's result).
        status& outcome = outcomes[static_cast<std::size_t>(rank)];
        outcome = updated;
    };
    std::vector<std::thread> threads;
    for (int rank = 1; rank < R; ++rank)
        threads.emplace_back(replica_main, rank);
    replica_main(0);
    for (auto& t : threads)
        t.join();
    for (const auto& s : outcomes)
        PITFALL_TRY(s);
    return status::ok();
}

// ---------------------------------------------------------------------------------------------
// GPU: one replica per device, NCCL loaded at run time.
// ---------------------------------------------------------------------------------------------
#if PITFALL_HAS_CUDA
// NCCL's errors travel under their own ncclResult_t names.
constexpr pitfall::library nccl_library = pitfall::library::nccl;

const char* nccl_result_name(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResultUnknown";
    }
}

/// The NCCL entry points this scenario uses, from the libnccl.so.2 the loader finds.
struct nccl_api {
    decltype(&ncclGetVersion) get_version = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
    decltype(&ncclCommInitAll) comm_init_all = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclGroupStart) group_start = nullptr;
    decltype(&ncclGroupEnd) group_end = nullptr;
    std::string path;
    int version = 0;

    status check(ncclResult_t r, const char* expr, const char* file, int line) const {
        if (r == ncclSuccess)
            return status::ok();
        return status::error(nccl_library, nccl_result_name(r),
                             std::string(error_string(r)) + " (from " + expr + ")",
                             pitfall::stage::library_call, false, file, line);
    }
};

#define PITFALL_NCCL_TRY(api, expr) PITFALL_TRY((api).check((expr), #expr, __FILE__, __LINE__))

template <class Fn> bool load_symbol(void* lib, const char* name, Fn& fn) {
    fn = reinterpret_cast<Fn>(::dlsym(lib, name));
    return fn != nullptr;
}

/// Loaded, not linked: a GPU host without NCCL then reports "NCCL missing" (UNSUPPORTED, with
/// the loader's message) instead of a binary that cannot start, and the CPU cases never load
/// a 200 MB library they do not use. The prototypes come from nccl.h, so a signature change in
/// a new NCCL is a compile error here, not a crash.
/// dlopen, never dlclose: NCCL keeps threads and state for the life of the process.
status_or<nccl_api> load_nccl() {
    void* lib = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
        return status::error(nccl_library, "nccl_missing", ::dlerror(), pitfall::stage::init, false,
                             __FILE__, __LINE__);
    nccl_api api;
    const bool all = load_symbol(lib, "ncclGetVersion", api.get_version) &&
                     load_symbol(lib, "ncclGetErrorString", api.error_string) &&
                     load_symbol(lib, "ncclCommInitAll", api.comm_init_all) &&
                     load_symbol(lib, "ncclCommDestroy", api.comm_destroy) &&
                     load_symbol(lib, "ncclAllReduce", api.all_reduce) &&
                     load_symbol(lib, "ncclGroupStart", api.group_start) &&
                     load_symbol(lib, "ncclGroupEnd", api.group_end);
    if (!all)
        return status::error(nccl_library, "nccl_symbol_missing", ::dlerror(), pitfall::stage::init,
                             false, __FILE__, __LINE__);
    link_map* map = nullptr;
    if (::dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
        api.path = map->l_name;
    PITFALL_NCCL_TRY(api, api.get_version(&api.version));
    return api;
}

/// One communicator per device (ncclCommInitAll: a single process drives every GPU).
struct nccl_comms {
    const nccl_api* api = nullptr;
    std::vector<ncclComm_t> comms;
    nccl_comms() = default;
    nccl_comms(const nccl_comms&) = delete;
    nccl_comms& operator=(const nccl_comms&) = delete;
    ~nccl_comms() {
        for (ncclComm_t c : comms)
            if (c != nullptr)
                (void)api->comm_destroy(c);
    }
};

/// A stream per device for the all-reduce; blocking streams, so they are also ordered after
/// the kernels for_each launched on the device's legacy default stream.
struct device_streams {
    std::vector<int> devices;
    std::vector<cudaStream_t> streams;
    device_streams() = default;
    device_streams(const device_streams&) = delete;
    device_streams& operator=(const device_streams&) = delete;
    ~device_streams() {
        for (std::size_t i = 0; i < streams.size(); ++i) {
            (void)cudaSetDevice(devices[i]);
            (void)cudaStreamDestroy(streams[i]);
        }
    }
};

status sync_all(const replica_list<pitfall::cuda_backend>& reps) {
    for (const auto& rep : reps) {
        PITFALL_TRY(select_device<pitfall::cuda_backend>(rep->device));
        PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaDeviceSynchronize());
    }
    return status::ok();
}

struct cuda_collective {
    const nccl_api* api = nullptr;
    nccl_comms comms;
    device_streams streams;
};

status make_collective(cuda_collective& c, const nccl_api& api, const std::vector<int>& devices) {
    c.api = &api;
    c.comms.api = &api;
    c.comms.comms.assign(devices.size(), nullptr);
    PITFALL_NCCL_TRY(api, api.comm_init_all(c.comms.comms.data(), static_cast<int>(devices.size()),
                                            devices.data()));
    for (const int d : devices) {
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaSetDevice(d));
        cudaStream_t s = nullptr;
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaStreamCreate(&s));
        c.streams.devices.push_back(d);
        c.streams.streams.push_back(s);
    }
    return status::ok();
}

/// One step on every device: the local gradients (asynchronous launches, all devices at
/// once), a synchronisation so that the all-reduce is timed alone, the grouped all-reduce on
/// each device's stream, and the update. Timed on the host clock: CUDA events belong to one
/// device and this step spans all of them.
status cuda_step(replica_list<pitfall::cuda_backend>& reps, std::size_t features, float step,
                 cuda_collective* collective, double& allreduce_seconds) {
    using backend = pitfall::cuda_backend;
    const std::size_t P = classes * features + classes;
    // Launches are asynchronous: every device computes its shard at the same time.
    for (auto& rep : reps) {
        PITFALL_TRY(select_device<backend>(rep->device));
        PITFALL_TRY(rep->compute_local_gradient(features));
    }
    PITFALL_TRY(sync_all(reps));
    const auto t0 = clock_type::now();
    if (collective != nullptr) { // a single replica has nothing to reduce
        const nccl_api& api = *collective->api;
        // One call per device inside a group: NCCL launches them together (a single thread
        // driving several devices must group them, or the first call waits for the others).
        PITFALL_NCCL_TRY(api, api.group_start());
        for (std::size_t r = 0; r < reps.size(); ++r)
            PITFALL_NCCL_TRY(api, api.all_reduce(reps[r]->grad.data(), reps[r]->grad.data(), P,
                                                 ncclFloat, ncclSum, collective->comms.comms[r],
                                                 collective->streams.streams[r]));
        PITFALL_NCCL_TRY(api, api.group_end());
        for (std::size_t r = 0; r < reps.size(); ++r) {
            PITFALL_TRY(select_device<backend>(reps[r]->device));
            PITFALL_CUDA_TRY(pitfall::stage::synchronize,
                             cudaStreamSynchronize(collective->streams.streams[r]));
        }
    }
    allreduce_seconds = seconds_since(t0);
    for (auto& rep : reps) {
        PITFALL_TRY(select_device<backend>(rep->device));
        PITFALL_TRY(backend::for_each(P, sgd_update{rep->w.data(), rep->grad.data(), step}));
    }
    return sync_all(reps);
}
#endif

// ---------------------------------------------------------------------------------------------
// A data-parallel run: the checked first step, then warm-up and timed steps.
// ---------------------------------------------------------------------------------------------
/// Everything that distinguishes the remedy, the classic sharding and the single replica:
/// the same run_data_parallel executes all three.
struct run_plan {
    std::vector<shard> shards;
    std::vector<int> devices;
    bool sum_rows = true;    ///< remedy: sums per shard; classic: means per shard
    double post_scale = 1.0; ///< remedy: 1 / global batch; classic: 1 / replicas
    float learning_rate = 0.1f;
    int warmup = 0;
    int timed = 0;
};

struct backend_extras {
#if PITFALL_HAS_CUDA
    const nccl_api* nccl = nullptr;
#endif
};

template <class Backend>
status_or<run_result> run_data_parallel(const problem& p, const run_plan& plan,
                                        const backend_extras& extras) {
    PITFALL_ASSIGN_OR_RETURN(auto reps,
                             make_replicas<Backend>(p, plan.shards, plan.sum_rows, plan.devices));
    const std::size_t P = p.parameter_count();
    const float step = static_cast<float>(plan.learning_rate * plan.post_scale);
    (void)extras;
#if PITFALL_HAS_CUDA
    cuda_collective collective;
    cuda_collective* collective_ptr = nullptr;
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        if (reps.size() > 1) {
            PITFALL_TRY(make_collective(collective, *extras.nccl, plan.devices));
            collective_ptr = &collective;
        }
    }
#endif
    auto one_step = [&](double& allreduce) -> status {
#if PITFALL_HAS_CUDA
        if constexpr (Backend::kind == pitfall::backend_kind::cuda)
            return cuda_step(reps, p.features, step, collective_ptr, allreduce);
        else
#endif
            return cpu_step(reps, p.features, step, allreduce);
    };

    run_result out;
    // The checked step: keep the reduced gradients (the update leaves them in place).
    double allreduce = 0;
    PITFALL_TRY(one_step(allreduce));
    std::vector<float> h_grad0(P), h_grad(P);
    PITFALL_TRY(Backend::copy_to_host(h_grad0.data(), reps[0]->grad, P));
    for (std::size_t r = 1; r < reps.size(); ++r) {
        PITFALL_TRY(Backend::copy_to_host(h_grad.data(), reps[r]->grad, P));
        for (std::size_t j = 0; j < P; ++j)
            out.replica_gradient_diff =
                std::max(out.replica_gradient_diff, std::fabs(static_cast<double>(h_grad[j]) -
                                                              static_cast<double>(h_grad0[j])));
    }
    out.gradient.resize(P);
    for (std::size_t j = 0; j < P; ++j)
        out.gradient[j] = static_cast<double>(h_grad0[j]) * plan.post_scale;

    // Timed steps go on training from where the checked step left the weights: the numbers
    // are judged on the first step only, the time of every later one is the same work.
    for (int i = 0; i < plan.warmup + plan.timed; ++i) {
        const auto t0 = clock_type::now();
        PITFALL_TRY(one_step(allreduce));
        const double seconds = seconds_since(t0);
        if (i >= plan.warmup) {
            out.step_seconds.push_back(seconds);
            out.allreduce_seconds.push_back(allreduce);
        }
    }
    return out;
}

/// The middle sample (odd counts, as the SDK enforces); for the bandwidth figure only, the
/// harness computes its own statistics from the raw samples.
double median(std::vector<double> v) {
    if (v.empty())
        return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// ---------------------------------------------------------------------------------------------
// The case.
// ---------------------------------------------------------------------------------------------
/// Both variants: `remedy` shards the whole batch and reduces sums; otherwise the classic
/// sharding (integer division, means averaged over replicas).
template <class Backend> status data_parallel_step(pitfall::context& ctx, bool remedy) {
    PITFALL_ASSIGN_OR_RETURN(const long long replicas_param, ctx.param_int("replicas"));
    PITFALL_ASSIGN_OR_RETURN(const long long batch_param, ctx.param_int("global_batch"));
    PITFALL_ASSIGN_OR_RETURN(const long long features_param, ctx.param_int("features"));
    PITFALL_ASSIGN_OR_RETURN(const double learning_rate, ctx.param_double("learning_rate"));
    PITFALL_ASSIGN_OR_RETURN(const long long seed, ctx.param_int("seed"));
    // Bounds (replicas 0..1024 with 0 = automatic, global_batch 1..2^24, features 1..2^20, a
    // positive learning rate) are in scenario.json; only the rule between two parameters is here.

    // How many replicas: every visible GPU, or threads on the CPU. On the GPU the order is
    // what a person debugging the machine needs: the device count (the reason a case cannot
    // run), NCCL's presence and version (recorded even when the count says no), then the
    // replica count against the devices.
    int replicas = static_cast<int>(replicas_param);
    backend_extras extras;
    std::vector<int> devices;
#if PITFALL_HAS_CUDA
    nccl_api nccl;
    if constexpr (Backend::kind == pitfall::backend_kind::cuda) {
        int count = 0;
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDeviceCount(&count));
        ctx.record("device_count", count);
        auto loaded = load_nccl();
        ctx.record_event("nccl_load", loaded.is_ok() ? status::ok() : loaded.error());
        if (loaded.is_ok()) {
            nccl = std::move(loaded).value();
            ctx.record_info("nccl_version", std::to_string(nccl.version));
            ctx.record_info("nccl_library", nccl.path);
        }
        if (count < 2)
            return PITFALL_UNSUPPORTED(std::to_string(count) +
                                       " CUDA device visible (cudaGetDeviceCount): a data-parallel "
                                       "step needs at least 2");
        if (replicas == 0)
            replicas = count;
        if (replicas > count)
            return PITFALL_UNSUPPORTED("asked for " + std::to_string(replicas) + " replicas, " +
                                       std::to_string(count) + " CUDA devices visible");
        if (!loaded.is_ok())
            return status::unsupported_because(loaded.error(),
                                               "NCCL missing: " + loaded.error().message());
        extras.nccl = &nccl;
        ctx.record_info("allreduce", "ncclAllReduce (ncclSum, float32, in place), one group call");
    }
#endif
    if (Backend::kind == pitfall::backend_kind::cpu) {
        if (replicas == 0)
            replicas = 3;
        ctx.record_info("allreduce", "ring (reduce-scatter + all-gather) over shared memory, one "
                                     "std::thread per replica");
    }
    for (int r = 0; r < replicas; ++r)
        devices.push_back(Backend::kind == pitfall::backend_kind::cuda ? r : 0);

    const std::size_t batch = static_cast<std::size_t>(batch_param);
    const std::size_t R = static_cast<std::size_t>(replicas);
    if (batch < R)
        return pitfall::bad_parameter("global_batch", std::to_string(batch) +
                                                          " samples cannot feed " +
                                                          std::to_string(replicas) + " replicas");
    if (!remedy && batch % R == 0)
        return PITFALL_UNSUPPORTED("global_batch " + std::to_string(batch) + " is divisible by " +
                                   std::to_string(replicas) +
                                   " replicas: no sample is dropped, nothing to reproduce "
                                   "(choose a global_batch that is not)");

    // The same data and initial weights on every backend and for every replica count: the
    // references below depend only on (global_batch, features, seed).
    const problem p = make_problem(batch, static_cast<std::size_t>(features_param),
                                   static_cast<std::uint64_t>(seed));
    run_plan plan;
    plan.shards = make_shards(batch, replicas, remedy);
    plan.devices = devices;
    plan.sum_rows = remedy;
    plan.post_scale = remedy ? 1.0 / static_cast<double>(batch) : 1.0 / static_cast<double>(R);
    plan.learning_rate = static_cast<float>(learning_rate);
    plan.warmup = ctx.warmup_count();
    plan.timed = ctx.sample_count();

    // What the sharding did, before anything runs: these figures alone show the dropped
    // samples (the remedy's samples_used is the whole batch; the classic one's is R * (B / R)).
    std::size_t used = 0, smallest = batch, largest = 0;
    for (const auto& s : plan.shards) {
        used += s.rows;
        smallest = std::min(smallest, s.rows);
        largest = std::max(largest, s.rows);
    }
    const std::size_t dropped = batch - used;
    ctx.record("replicas", replicas);
    ctx.record("global_batch", static_cast<double>(batch));
    ctx.record("per_replica_batch_min", static_cast<double>(smallest));
    ctx.record("per_replica_batch_max", static_cast<double>(largest));
    ctx.record("samples_used", static_cast<double>(used));
    ctx.record("samples_dropped", static_cast<double>(dropped));
    ctx.record("gradient_elements", static_cast<double>(p.parameter_count()));
    ctx.record("allreduce_bytes", static_cast<double>(p.parameter_count() * sizeof(float)), "B");

    // 1. The data-parallel run under test.
    PITFALL_ASSIGN_OR_RETURN(const run_result dp, run_data_parallel<Backend>(p, plan, extras));

    // 2. The same code as one replica over the whole batch (device 0 / one thread): what the
    // single-GPU run people compare with computes.
    run_plan single = plan;
    single.shards = make_shards(batch, 1, true);
    single.devices = {devices[0]};
    single.sum_rows = true;
    single.post_scale = 1.0 / static_cast<double>(batch);
    single.warmup = 0;
    single.timed = 0;
    PITFALL_ASSIGN_OR_RETURN(const run_result one, run_data_parallel<Backend>(p, single, extras));

    // 3. The float64 references: the whole batch, and the samples the shards kept.
    const auto reference_start = clock_type::now();
    const std::vector<double> ref_full = reference_mean_gradient(p, 0, batch);
    const std::vector<double> ref_kept =
        dropped == 0 ? ref_full : reference_mean_gradient(p, 0, used);
    ctx.record("reference_seconds", seconds_since(reference_start), "s");

    ctx.record_samples("step_seconds", dp.step_seconds, "s");
    ctx.record_samples("allreduce_seconds", dp.allreduce_seconds, "s");
    const double allreduce_median = median(dp.allreduce_seconds);
    if (allreduce_median > 0.0) // NCCL's "bus bandwidth" of a ring all-reduce: 2 (R-1)/R bytes/t
        ctx.record("allreduce_bus_bandwidth",
                   2.0 * static_cast<double>(R - 1) / static_cast<double>(R) *
                       static_cast<double>(p.parameter_count() * sizeof(float)) / allreduce_median,
                   "B/s");

    // All distances are relative to the largest entry of the second argument (see
    // normwise_difference): the gradient of a barely trained softmax has many entries near 0.
    const double vs_full = normwise_difference(dp.gradient, ref_full);
    const double vs_single = normwise_difference(dp.gradient, one.gradient);
    const double single_vs_full = normwise_difference(one.gradient, ref_full);
    ctx.record("grad_rel_diff_vs_fp64_full_batch", vs_full);
    ctx.record("grad_rel_diff_vs_single_replica", vs_single);
    ctx.record("single_replica_grad_rel_diff_vs_fp64", single_vs_full);
    ctx.record("replica_gradient_max_abs_diff", dp.replica_gradient_diff);
    // Every replica must hold the same reduced gradient, bit for bit, or the weights drift.
    ctx.check("replicas_agree_after_allreduce", dp.replica_gradient_diff == 0.0,
              "max |g_r - g_0| = " + scientific(dp.replica_gradient_diff));
    ctx.check("single_replica_matches_fp64", single_vs_full <= agreement_tolerance,
              "one replica vs the float64 full-batch gradient: " + scientific(single_vs_full) +
                  "; tolerance " + scientific(agreement_tolerance));
    if (remedy) {
        ctx.check("all_samples_used", used == batch,
                  std::to_string(used) + " of " + std::to_string(batch) + " samples in a shard");
        ctx.check("gradient_matches_fp64_full_batch", vs_full <= agreement_tolerance,
                  scientific(vs_full) + "; tolerance " + scientific(agreement_tolerance));
        ctx.check("gradient_matches_single_replica", vs_single <= agreement_tolerance,
                  scientific(vs_single) + "; tolerance " + scientific(agreement_tolerance));
        return status::ok();
    }
    // The reproduced failure, pinned down: exactly global_batch % R samples are lost, the
    // gradient is the kept samples' gradient, and its error is the references' own distance
    // between the kept samples and the whole batch (not float32 noise).
    const double vs_kept = normwise_difference(dp.gradient, ref_kept);
    const double expected_error = normwise_difference(ref_kept, ref_full);
    ctx.record("grad_rel_diff_vs_fp64_kept_samples", vs_kept);
    ctx.record("expected_grad_rel_diff_from_dropping", expected_error);
    ctx.check("dropped_as_computed_by_hand", dropped == batch % R,
              std::to_string(dropped) +
                  " dropped; global_batch % replicas = " + std::to_string(batch % R));
    ctx.check("gradient_matches_fp64_kept_samples", vs_kept <= agreement_tolerance,
              scientific(vs_kept) + "; tolerance " + scientific(agreement_tolerance));
    ctx.check("error_is_the_dropped_samples",
              std::fabs(vs_full - expected_error) <= agreement_tolerance,
              "observed " + scientific(vs_full) + " vs the float64 kept-vs-full distance " +
                  scientific(expected_error));
    return status::ok();
}

template <class Backend> status remedy(pitfall::context& ctx) {
    return data_parallel_step<Backend>(ctx, true);
}
template <class Backend> status reproduce_uneven_batch(pitfall::context& ctx) {
    return data_parallel_step<Backend>(ctx, false);
}

} // namespace

PITFALL_SCENARIO(PITFALL_VARIANT(remedy), PITFALL_VARIANT(reproduce_uneven_batch))
