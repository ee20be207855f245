// batch_size_one: training an MLP one sample per step, and the remedies (bigger batches, a
// CUDA Graph).
//
// What: the seed's Keras model, Dense(128, relu, input 784) -> Dense(10, softmax), categorical
//   cross-entropy, Adam, fitted on MNIST-shaped data (synthetic, fixed seed) with batch_size=1
//   (`reproduce`), then with 32, 64, 128, 256 (`remedy_batch_*`), and at batch 1 with the whole
//   training step captured once in a CUDA Graph and replayed (`remedy_cuda_graph`).
// Why it fails: nothing breaks; the GPU just does almost nothing. A step is the same 12 calls
//   (8 elementwise kernels, 4 cuBLAS GEMMs) whatever the batch. At batch 1 each carries one
//   sample: most kernels launch a single 256-thread block on a device with 58..132 SMs, so the
//   step is bound by the host's launch rate (a few microseconds per launch) and per-kernel
//   latency, not by arithmetic; throughput is flat in the device's size, and a CPU, which pays
//   no launch cost, often beats it. Larger batches carry up to 256 samples per launch for
//   roughly the same step time, so samples/s grows almost linearly until the GEMMs start to
//   cost real time.
// Expected per backend:
//   cpu  every batch-size case ok: the model learns (loss on a fixed evaluation set falls) and
//        matches an independent float64 reference; samples/s grows with the batch (OpenBLAS
//        GEMMs beat GEMVs, and Adam's 101 770-parameter update, paid once per step, dominates
//        a batch-1 step). remedy_cuda_graph: UNSUPPORTED, no CPU analog (see remedy_cuda_graph).
//   cuda (GPU; documented, seen once on an H100 (2026-11-22), not yet blessed) all ok. Batch
//        1: 12 launches per sample, 7 of 8 elementwise grids of 1..4 blocks (below the SM
//        count); throughput at 256 over 1 far
//        above the CPU's ratio (up to ~256 while the step stays launch-bound); the CUDA Graph
//        replay issues 1 launch per step and cuts the step time; the CPU/GPU crossover is the
//        smallest batch at which the GPU's samples/s passes the CPU's (measured on the same
//        host, same run). Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
// Remedy: batch 32..256 (Keras' default is 32; the seed suggests 32..256): the same launches
//   carry 32..256 samples. If the batch must stay small (online learning, latency), capture
//   the step in a CUDA Graph: one launch per step instead of 12, and no host work in between.
// Seed: 001 ex.1 (model.fit(..., batch_size=1) "leading to low GPU utilization").
//
// Every case runs, on its backend:
//   1. a census of one step: the calls it issues (for_each + gemm: the launches), the grid each
//      elementwise launch uses; on the GPU also the SM count, the occupancy calculator's answer
//      for each kernel, and the exact kernel count of a captured step (cuBLAS's included);
//   2. the timed fit: each timed sample is ceil(samples_per_timing / batch) steps; it gives
//      step_seconds and seconds_per_sample (the harness's throughput ratios use the latter:
//      seconds_per_sample(batch 1) / seconds_per_sample(batch N) = samples/s(N) / samples/s(1));
//   3. comparisons measured in the same process, which the baselines gate on, timed chunk by
//      chunk in alternation with the fit so that a change of load moves both alike:
//      remedy_batch_* against a batch-1 model (throughput_over_batch_1), remedy_cuda_graph
//      against eager batch 1 (graph_speedup_over_eager); every CUDA case also times the CPU at
//      its batch (gpu_over_cpu_throughput), and the CUDA `reproduce` sweeps batch 1..256 on both
//      backends for the crossover;
//   4. a check: a fresh model trained `check_steps` steps, judged by a float64 reference written
//      independently below (its own weight layout, sample-by-sample loops).
#include "pitfall/models/mlp.hpp"
#include "pitfall/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

using pitfall::status;
using pitfall::mlp::adam_config;
using pitfall::mlp::dataset;
using pitfall::mlp::shape;

// ---------------------------------------------------------------------------------------------
// Parameters (defaults, docs and bounds in scenario.json) and what the variant sets.
// ---------------------------------------------------------------------------------------------

/// What a variant trains: its batch, whether the step is replayed from a CUDA Graph, and
/// whether the CUDA case also sweeps the batch sizes for the CPU/GPU crossover.
struct variant_setup {
    int batch = 1;
    bool graph = false;
    bool crossover = false;
};

struct config {
    std::size_t rows = 0;
    std::uint64_t seed = 0;
    double learning_rate = 0;
    int samples_per_timing = 0;
    int check_steps = 0;
    std::size_t eval_rows = 0;
    int crossover_max_batch = 0;
    int batch = 0;          ///< from the variant
    bool graph = false;     ///< remedy_cuda_graph
    bool crossover = false; ///< reproduce
};

pitfall::status_or<config> read_config(const pitfall::context& ctx, const variant_setup& setup) {
    config c;
    PITFALL_ASSIGN_OR_RETURN(const long long rows, ctx.param_int("rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long seed, ctx.param_int("seed"));
    PITFALL_ASSIGN_OR_RETURN(const long long per_timing, ctx.param_int("samples_per_timing"));
    PITFALL_ASSIGN_OR_RETURN(const long long check_steps, ctx.param_int("check_steps"));
    PITFALL_ASSIGN_OR_RETURN(const long long eval_rows, ctx.param_int("eval_rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long max_batch, ctx.param_int("crossover_max_batch"));
    PITFALL_ASSIGN_OR_RETURN(c.learning_rate, ctx.param_double("learning_rate"));
    c.rows = static_cast<std::size_t>(rows);
    c.seed = static_cast<std::uint64_t>(seed);
    c.samples_per_timing = static_cast<int>(per_timing);
    c.check_steps = static_cast<int>(check_steps);
    c.eval_rows = std::min(static_cast<std::size_t>(eval_rows), c.rows);
    c.crossover_max_batch = static_cast<int>(max_batch);
    c.batch = setup.batch;
    c.graph = setup.graph;
    c.crossover = setup.crossover;
    // A rule between parameters and the variant, which scenario.json's bounds cannot state.
    const int widest = std::max(c.batch, c.crossover_max_batch);
    if (c.rows < static_cast<std::size_t>(widest))
        return pitfall::bad_parameter("rows",
                                      "must hold at least one batch of " + std::to_string(widest));
    return c;
}

/// Steps per timed sample: enough steps to cover samples_per_timing samples (at least one).
int steps_per_timing(const config& cfg, int batch) {
    return std::max(1, (cfg.samples_per_timing + batch - 1) / batch);
}

/// The grid cuda_backend::for_each and the CUDA executor below launch for n elements: blocks
/// of 256 threads, at most 65535 blocks (grid-stride beyond). A pure function of n, so the CPU
/// run can say which grid each of its calls would have had.
constexpr unsigned block_threads = 256;
unsigned launch_grid(std::size_t n) {
    const std::size_t wanted = (n + block_threads - 1) / block_threads;
    return static_cast<unsigned>(wanted < 65535u ? wanted : 65535u);
}

double median(std::vector<double> v) {
    if (v.empty())
        return std::numeric_limits<double>::quiet_NaN();
    std::sort(v.begin(), v.end());
    const std::size_t mid = v.size() / 2;
    return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

std::string scientific(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return text;
}

// ---------------------------------------------------------------------------------------------
// The independent float64 reference: the same training written the plain way, sample by
// sample, with W1 stored row-major [h][f] and W2 [c][h] (the code under test is column-major).
// It shares only the inputs (data, initial weights) and the algorithm's definition:
//   forward   a = relu(W1 x + b1), z = W2 a + b2, p = softmax(z)
//   loss      -sum_c y_c log p_c, averaged over the batch
//   gradient  dz = (p - y) / n, back through W2 and the relu
//   Adam      m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
//             w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps), t = 1, 2, ...
//   data      step t (from 0) uses rows [t n, t n + n) modulo the rows that fill whole batches
// ---------------------------------------------------------------------------------------------
struct reference_weights {
    static constexpr std::size_t F = shape::features, H = shape::hidden, C = shape::classes;
    std::vector<double> w1 = std::vector<double>(H * F), b1 = std::vector<double>(H),
                        w2 = std::vector<double>(C * H), b2 = std::vector<double>(C);

    template <class T> static reference_weights from_flat(const std::vector<T>& flat) {
        reference_weights r;
        for (std::size_t h = 0; h < H; ++h) {
            for (std::size_t f = 0; f < F; ++f)
                r.w1[h * F + f] = static_cast<double>(flat[shape::w1_offset + h + f * H]);
            r.b1[h] = static_cast<double>(flat[shape::b1_offset + h]);
            for (std::size_t c = 0; c < C; ++c)
                r.w2[c * H + h] = static_cast<double>(flat[shape::w2_offset + c + h * C]);
        }
        for (std::size_t c = 0; c < C; ++c)
            r.b2[c] = static_cast<double>(flat[shape::b2_offset + c]);
        return r;
    }

    /// Probabilities of one sample; the hidden activations are left in `a`.
    void forward(const float* x, std::vector<double>& a, double* p) const {
        for (std::size_t h = 0; h < H; ++h) {
            double z = b1[h];
            for (std::size_t f = 0; f < F; ++f)
                z += w1[h * F + f] * static_cast<double>(x[f]);
            a[h] = z > 0.0 ? z : 0.0;
        }
        double z_max = -std::numeric_limits<double>::infinity();
        double z[C];
        for (std::size_t c = 0; c < C; ++c) {
            z[c] = b2[c];
            for (std::size_t h = 0; h < H; ++h)
                z[c] += w2[c * H + h] * a[h];
            z_max = std::max(z_max, z[c]);
        }
        double sum = 0.0;
        for (std::size_t c = 0; c < C; ++c)
            sum += std::exp(z[c] - z_max);
        for (std::size_t c = 0; c < C; ++c)
            p[c] = std::exp(z[c] - z_max) / sum;
    }
};

/// Mean cross-entropy and the probabilities (rows x 10) of `w` on the first `rows` rows.
struct evaluation {
    double loss = 0.0;
    std::vector<double> probabilities;
};

evaluation evaluate(const reference_weights& w, const dataset& data, std::size_t rows) {
    evaluation out;
    out.probabilities.resize(rows * shape::classes);
    std::vector<double> a(shape::hidden);
    for (std::size_t r = 0; r < rows; ++r) {
        double* p = out.probabilities.data() + r * shape::classes;
        w.forward(data.x.data() + r * shape::features, a, p);
        // The true class's probability, floored at the smallest normal so a confidently wrong
        // model gives a large finite loss, not inf.
        out.loss -= std::log(std::max(p[data.label[r]], std::numeric_limits<double>::min()));
    }
    out.loss /= static_cast<double>(rows);
    return out;
}

/// `steps` Adam steps of batch `batch` from `flat_initial`, in float64.
reference_weights reference_train(const dataset& data, int batch, int steps,
                                  const adam_config& adam,
                                  const std::vector<double>& flat_initial) {
    constexpr std::size_t F = shape::features, H = shape::hidden, C = shape::classes;
    reference_weights w = reference_weights::from_flat(flat_initial);
    const std::size_t n = static_cast<std::size_t>(batch);
    const std::size_t usable = (data.rows / n) * n;
    std::vector<double> m_w1(H * F, 0.0), v_w1(H * F, 0.0), m_b1(H, 0.0), v_b1(H, 0.0);
    std::vector<double> m_w2(C * H, 0.0), v_w2(C * H, 0.0), m_b2(C, 0.0), v_b2(C, 0.0);
    std::vector<double> g_w1(H * F), g_b1(H), g_w2(C * H), g_b2(C), a(H), dh(H);
    double p[C];
    auto adam_step = [&](double& x, double& m, double& v, double g, double alpha_t) {
        m = adam.beta1 * m + (1.0 - adam.beta1) * g;
        v = adam.beta2 * v + (1.0 - adam.beta2) * g * g;
        x -= alpha_t * m / (std::sqrt(v) + adam.epsilon);
    };
    for (int t = 0; t < steps; ++t) {
        std::fill(g_w1.begin(), g_w1.end(), 0.0);
        std::fill(g_b1.begin(), g_b1.end(), 0.0);
        std::fill(g_w2.begin(), g_w2.end(), 0.0);
        std::fill(g_b2.begin(), g_b2.end(), 0.0);
        const std::size_t start = (static_cast<std::size_t>(t) * n) % usable;
        // Gradients accumulate sample by sample from the weights as they were at the start of
        // the step; the update follows once per step.
        for (std::size_t r = start; r < start + n; ++r) {
            const float* x = data.x.data() + r * F;
            w.forward(x, a, p);
            std::fill(dh.begin(), dh.end(), 0.0);
            for (std::size_t c = 0; c < C; ++c) {
                const double dz = (p[c] - (data.label[r] == static_cast<int>(c) ? 1.0 : 0.0)) /
                                  static_cast<double>(n);
                g_b2[c] += dz;
                for (std::size_t h = 0; h < H; ++h) {
                    g_w2[c * H + h] += dz * a[h];
                    dh[h] += w.w2[c * H + h] * dz;
                }
            }
            for (std::size_t h = 0; h < H; ++h) {
                if (!(a[h] > 0.0)) // relu' = 0 where the unit did not fire
                    continue;
                g_b1[h] += dh[h];
                for (std::size_t f = 0; f < F; ++f)
                    g_w1[h * F + f] += dh[h] * static_cast<double>(x[f]);
            }
        }
        const double step = static_cast<double>(t + 1);
        const double alpha_t = adam.learning_rate * std::sqrt(1.0 - std::pow(adam.beta2, step)) /
                               (1.0 - std::pow(adam.beta1, step));
        for (std::size_t i = 0; i < H * F; ++i)
            adam_step(w.w1[i], m_w1[i], v_w1[i], g_w1[i], alpha_t);
        for (std::size_t i = 0; i < H; ++i)
            adam_step(w.b1[i], m_b1[i], v_b1[i], g_b1[i], alpha_t);
        for (std::size_t i = 0; i < C * H; ++i)
            adam_step(w.w2[i], m_w2[i], v_w2[i], g_w2[i], alpha_t);
        for (std::size_t i = 0; i < C; ++i)
            adam_step(w.b2[i], m_b2[i], v_b2[i], g_b2[i], alpha_t);
    }
    return w;
}

// Agreement of the trained model's predictions with the reference's, max |p - p_ref| over the
// evaluation rows and 10 classes, after check_steps steps. The model runs float32 (inputs are
// float32 already, as Keras feeds them; initial weights rounded once, 2^-24 relative), float32
// GEMMs and a float32 Adam: its weights differ from the reference's by ~1e-7 relative, and its
// probabilities by 1e-8..3e-8 (observed on the CPU at every batch size). One thing grows it: an
// Adam step normalises m / sqrt(v), so a gradient that is a near-cancelling sum over the batch
// (many of dW1's 100 352 entries at batch 256) can get its *sign* from rounding, and that weight
// then moves by up to 2 lr = 2e-3 the other way; a logit moves by that times a pixel (<= 1) times a
// W2 entry (~0.2). 1e-3 absorbs a handful of such weights per step while a wrong kernel (a
// missing bias, a wrong stride, a stale alpha_t replayed from a graph: 1e-3 per weight on
// every weight) moves probabilities by 1e-2 or more.
constexpr double probability_tolerance = 1e-3;

double max_abs_difference(const std::vector<double>& got, const std::vector<double>& ref) {
    double worst = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = std::fabs(got[i] - ref[i]);
        worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
    }
    return worst;
}

// ---------------------------------------------------------------------------------------------
// Timing helpers. time_samples (the SDK's) gives the samples the harness keeps; the crossover
// sweep uses a shorter loop of its own with the same clock.
// ---------------------------------------------------------------------------------------------
template <class Backend, class Fn>
pitfall::status_or<std::vector<double>> time_repeated(int warmup, int repetitions, Fn&& fn) {
    for (int i = 0; i < warmup; ++i) {
        PITFALL_TRY(fn());
        PITFALL_TRY(Backend::synchronize());
    }
    std::vector<double> seconds;
    typename Backend::timer clock;
    for (int i = 0; i < repetitions; ++i) {
        PITFALL_TRY(clock.start());
        PITFALL_TRY(fn());
        PITFALL_ASSIGN_OR_RETURN(const double s, clock.stop_seconds());
        seconds.push_back(s);
    }
    return seconds;
}

/// The case's own fit (`fit`) and a baseline it is compared with (`base`: batch 1, or eager
/// batch 1 for the graph) timed alternately, one chunk of each per sample, so that a change of
/// machine load while the case runs (this suite shares two cores with whatever else runs)
/// moves both series alike instead of biasing their ratio. Same warm-up and sample count as
/// time_samples; returns {fit seconds, base seconds} per chunk.
template <class Backend, class FitFn, class BaseFn>
pitfall::status_or<std::pair<std::vector<double>, std::vector<double>>>
time_interleaved(pitfall::context& ctx, FitFn&& fit, BaseFn&& base) {
    auto both = [&]() -> pitfall::status {
        PITFALL_TRY(fit());
        return base();
    };
    PITFALL_TRY(pitfall::warm_up<Backend>(ctx, both));
    std::pair<std::vector<double>, std::vector<double>> out;
    typename Backend::timer clock;
    // The SDK's calibration controls after each pair of chunks, as long as a chunk (both series
    // are normalised by them), and the disturbance record.
    pitfall::series_watch<Backend> watch(ctx);
    for (int i = 0; i < ctx.sample_count(); ++i) {
        PITFALL_TRY(clock.start());
        PITFALL_TRY(fit());
        PITFALL_ASSIGN_OR_RETURN(const double a, clock.stop_seconds());
        PITFALL_TRY(clock.start());
        PITFALL_TRY(base());
        PITFALL_ASSIGN_OR_RETURN(const double b, clock.stop_seconds());
        out.first.push_back(a);
        out.second.push_back(b);
        watch.after_sample(std::max(a, b));
    }
    watch.finish();
    return out;
}

/// `steps` training steps of `model`, as one timed chunk.
template <class Model> auto chunk_of(Model& model, int steps) {
    return [&model, steps]() -> status {
        for (int s = 0; s < steps; ++s)
            PITFALL_TRY(model.train_step());
        return status::ok();
    };
}

/// Seconds per sample of each timed chunk of `steps` steps of `batch` samples.
std::vector<double> per_sample(const std::vector<double>& chunk_seconds, int steps, int batch) {
    std::vector<double> out;
    for (double s : chunk_seconds)
        out.push_back(s / (static_cast<double>(steps) * batch));
    return out;
}

/// Eager training of a fresh model at `batch` on the executor: seconds per sample of `reps`
/// chunks (a comparison measured in the same process as the case's own fit).
template <class Exec>
pitfall::status_or<std::vector<double>>
eager_seconds_per_sample(Exec& exec, const config& cfg, int batch, const dataset& data,
                         const std::vector<double>& init, int warmup, int reps) {
    using model_t = pitfall::mlp::mlp_model<Exec>;
    using backend = typename Exec::backend;
    PITFALL_ASSIGN_OR_RETURN(
        auto model, model_t::create(exec, batch, adam_config{cfg.learning_rate}, init, data));
    const int steps = steps_per_timing(cfg, batch);
    PITFALL_ASSIGN_OR_RETURN(const auto seconds,
                             time_repeated<backend>(warmup, reps, [&]() -> status {
                                 for (int s = 0; s < steps; ++s)
                                     PITFALL_TRY(model.train_step());
                                 return status::ok();
                             }));
    return per_sample(seconds, steps, batch);
}

// ---------------------------------------------------------------------------------------------
// The CUDA executor: the model's functors as kernels on a stream of our own, cuBLAS on the same
// stream. Why not Backend::for_each: it launches on the legacy default stream, which
// cudaStreamBeginCapture refuses (and any legacy-stream launch during a capture invalidates
// it); one stream for every CUDA variant keeps eager and graph runs doing identical work.
// ---------------------------------------------------------------------------------------------
#if PITFALL_HAS_CUDA
/// The grid-stride loop of cuda_backend::for_each, as a kernel of this scenario so that its
/// register report and occupancy are this scenario's. One instantiation per functor.
template <class F> __global__ void mlp_kernel(std::size_t n, F f) {
    pitfall::count_this_kernel(); // the harness's evidence of GPU work (also in graph replays)
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(blockDim.x) * gridDim.x)
        f(i);
}

/// One elementwise launch as the census saw it.
struct launch_record {
    std::string name;
    std::size_t elements = 0;
    unsigned grid = 0;
    unsigned block = 0;
    const void* kernel = nullptr; ///< for the occupancy calculator
};

class stream_executor {
public:
    using backend = pitfall::cuda_backend;

    stream_executor() = default;
    stream_executor(const stream_executor&) = delete;
    stream_executor& operator=(const stream_executor&) = delete;
    ~stream_executor() {
        // Give the process-wide cuBLAS handle back as we found it (legacy stream, default
        // workspace pool) before our workspace buffer is freed.
        if (m_handle != nullptr)
            (void)cublasSetStream(m_handle, nullptr);
        if (m_stream != nullptr)
            (void)cudaStreamDestroy(m_stream);
    }

    /// A blocking stream (so the SDK's timer events on the legacy stream bracket its work),
    /// and the SDK's cuBLAS handle bound to it with a workspace of our own: cuBLAS's guide
    /// recommends a user workspace for graph capture (no allocation inside the capture), of
    /// 32 MiB on Hopper and 4 MiB elsewhere.
    status init() {
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaStreamCreate(&m_stream));
        PITFALL_ASSIGN_OR_RETURN(m_handle, backend::blas_handle());
        int device = 0;
        int major = 0;
        PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDevice(&device));
        PITFALL_CUDA_TRY(pitfall::stage::init,
                         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
        const std::size_t workspace_bytes = (major >= 9 ? 32u : 4u) << 20;
        PITFALL_ASSIGN_OR_RETURN(m_workspace, backend::allocate<unsigned char>(workspace_bytes));
        PITFALL_CUBLAS_TRY(cublasSetStream(m_handle, m_stream)); // resets the workspace, so:
        PITFALL_CUBLAS_TRY(cublasSetWorkspace(m_handle, m_workspace.data(), workspace_bytes));
        return status::ok();
    }

    template <class F> status for_each(const char* name, std::size_t n, F f) {
        ++m_log.for_each_calls;
        if (n == 0)
            return status::ok();
        const unsigned grid = launch_grid(n);
        mlp_kernel<F><<<grid, block_threads, 0, m_stream>>>(n, f);
        PITFALL_CUDA_TRY(pitfall::stage::launch, cudaGetLastError());
        if (m_log.keep_entries) {
            m_log.entries.push_back({name, n, false});
            m_launches.push_back(
                {name, n, grid, block_threads, reinterpret_cast<const void*>(&mlp_kernel<F>)});
        }
        return status::ok();
    }
    status gemm(const char* name, pitfall::transpose ta, pitfall::transpose tb, int m, int n, int k,
                const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
        ++m_log.gemm_calls;
        if (m_log.keep_entries)
            m_log.entries.push_back({name, 0, true});
        // The SDK's gemm uses the shared handle, now bound to our stream.
        return backend::gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    }

    pitfall::mlp::launch_log& log() { return m_log; }
    std::vector<launch_record>& launches() { return m_launches; }
    cudaStream_t stream() const { return m_stream; }

private:
    cudaStream_t m_stream = nullptr;
    cublasHandle_t m_handle = nullptr;
    pitfall::buffer<unsigned char, backend> m_workspace;
    pitfall::mlp::launch_log m_log;
    std::vector<launch_record> m_launches;
};

/// A captured step: the graph (for its node census) and, when replayed, its executable.
struct step_graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    step_graph() = default;
    step_graph(const step_graph&) = delete;
    step_graph& operator=(const step_graph&) = delete;
    ~step_graph() {
        if (exec != nullptr)
            (void)cudaGraphExecDestroy(exec);
        if (graph != nullptr)
            (void)cudaGraphDestroy(graph);
    }
};

/// Records one train_step on the executor's stream into `out.graph` without running it.
/// Thread-local capture mode: only this thread's unsafe calls (cudaMalloc, a sync) would
/// invalidate it. The capture always ends, also when the step failed half-way.
template <class Model> status capture_step(stream_executor& exec, Model& model, step_graph& out) {
    PITFALL_CUDA_TRY(pitfall::stage::launch,
                     cudaStreamBeginCapture(exec.stream(), cudaStreamCaptureModeThreadLocal));
    const status step = model.train_step();
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(exec.stream(), &graph);
    out.graph = graph;
    PITFALL_TRY(step);
    PITFALL_CUDA_TRY(pitfall::stage::launch, ended);
    return status::ok();
}

/// What the captured step contains: every kernel, ours and cuBLAS's, as the GPU will run it.
struct graph_census {
    std::size_t nodes = 0;
    std::size_t kernel_nodes = 0;
    std::size_t library_kernel_nodes = 0; ///< kernels not launched by for_each (cuBLAS)
    std::size_t library_kernels_below_sms = 0;
    std::size_t kernel_nodes_without_params = 0;
    unsigned library_max_grid = 0;
};

status census_of(const step_graph& g, const std::vector<launch_record>& ours, int sm_count,
                 graph_census& out) {
    std::size_t count = 0;
    PITFALL_CUDA_TRY(pitfall::stage::library_call, cudaGraphGetNodes(g.graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    if (count > 0)
        PITFALL_CUDA_TRY(pitfall::stage::library_call,
                         cudaGraphGetNodes(g.graph, nodes.data(), &count));
    out.nodes = count;
    for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType type{};
        PITFALL_CUDA_TRY(pitfall::stage::library_call, cudaGraphNodeGetType(node, &type));
        if (type != cudaGraphNodeTypeKernel)
            continue;
        ++out.kernel_nodes;
        cudaKernelNodeParams params{};
        if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess) {
            // Documented to fail (cudaErrorInvalidDeviceFunction) for kernels this runtime
            // cannot name, e.g. a library's own module: counted, the error cleared.
            (void)cudaGetLastError();
            ++out.kernel_nodes_without_params;
            ++out.library_kernel_nodes;
            continue;
        }
        const bool is_ours = std::any_of(ours.begin(), ours.end(), [&](const launch_record& r) {
            return r.kernel == params.func;
        });
        if (is_ours)
            continue;
        ++out.library_kernel_nodes;
        const unsigned blocks = params.gridDim.x * params.gridDim.y * params.gridDim.z;
        out.library_max_grid = std::max(out.library_max_grid, blocks);
        if (static_cast<int>(blocks) < sm_count)
            ++out.library_kernels_below_sms;
    }
    return status::ok();
}
#endif // PITFALL_HAS_CUDA

// ---------------------------------------------------------------------------------------------
// What every case records about the step it issues.
// ---------------------------------------------------------------------------------------------
void record_launch_counts(pitfall::context& ctx, const pitfall::mlp::launch_log& one_step,
                          int batch) {
    const double launches = static_cast<double>(one_step.for_each_calls + one_step.gemm_calls);
    ctx.record("for_each_calls_per_step", static_cast<double>(one_step.for_each_calls));
    ctx.record("gemm_calls_per_step", static_cast<double>(one_step.gemm_calls));
    ctx.record("kernel_launches_per_step", launches);
    ctx.record("kernel_launches_per_sample", launches / batch);
    // The grid each elementwise call gets from launch_grid (the GPU's launch; on the CPU the
    // one it would have had): at batch 1 most are a single block.
    unsigned max_grid = 0;
    int single_block = 0;
    for (const auto& e : one_step.entries) {
        if (e.is_gemm)
            continue;
        const unsigned grid = launch_grid(e.elements);
        ctx.record("grid_blocks." + e.name, grid);
        max_grid = std::max(max_grid, grid);
        single_block += grid == 1 ? 1 : 0;
    }
    ctx.record("max_for_each_grid_blocks", max_grid);
    ctx.record("single_block_launches_per_step", single_block);
}

/// The float64 check: the model's predictions after `steps` steps vs the reference's.
void record_check(pitfall::context& ctx, const config& cfg, const dataset& data,
                  const std::vector<double>& init, const std::vector<float>& h_params,
                  long long model_steps) {
    const reference_weights ref =
        reference_train(data, cfg.batch, cfg.check_steps, adam_config{cfg.learning_rate}, init);
    const evaluation got = evaluate(reference_weights::from_flat(h_params), data, cfg.eval_rows);
    const evaluation want = evaluate(ref, data, cfg.eval_rows);
    const double diff = max_abs_difference(got.probabilities, want.probabilities);
    ctx.record("check_steps", static_cast<double>(model_steps));
    ctx.record("max_abs_prob_diff_vs_fp64_reference", diff);
    ctx.check("same_steps_as_reference", model_steps == cfg.check_steps,
              std::to_string(model_steps) + " steps vs the reference's " +
                  std::to_string(cfg.check_steps));
    ctx.check("predictions_match_fp64_reference", diff <= probability_tolerance,
              "max |p - p_ref| = " + scientific(diff) + " over " + std::to_string(cfg.eval_rows) +
                  " rows x 10 classes after " + std::to_string(cfg.check_steps) +
                  " steps of batch " + std::to_string(cfg.batch) + "; tolerance " +
                  scientific(probability_tolerance));
}

/// The fit's outcome in numbers: samples/s, and whether the model learned, judged by the
/// float64 evaluation of the downloaded weights (not by the model's own loss).
template <class Model>
status record_fit(pitfall::context& ctx, const config& cfg, const dataset& data,
                  const std::vector<double>& init, Model& model,
                  const std::vector<double>& chunk_seconds, int steps) {
    const auto sps = per_sample(chunk_seconds, steps, cfg.batch);
    std::vector<double> step_seconds;
    for (double s : chunk_seconds)
        step_seconds.push_back(s / steps);
    ctx.record_samples("seconds_per_sample", sps, "s");
    ctx.record_samples("step_seconds", step_seconds, "s");
    ctx.record("samples_per_second", 1.0 / median(sps), "1/s");
    ctx.record("batch", cfg.batch);
    ctx.record("steps_per_timing", steps);

    std::vector<float> h_params;
    PITFALL_TRY(model.parameters_to_host(h_params));
    PITFALL_ASSIGN_OR_RETURN(const auto state, model.state_to_host());
    const double before = evaluate(reference_weights::from_flat(init), data, cfg.eval_rows).loss;
    const double after = evaluate(reference_weights::from_flat(h_params), data, cfg.eval_rows).loss;
    ctx.record("steps_trained", static_cast<double>(state.step));
    ctx.record("samples_trained", static_cast<double>(state.step) * cfg.batch);
    ctx.record("loss_before", before);
    ctx.record("loss_after", after);
    ctx.record("mean_training_loss", state.loss_sum / static_cast<double>(state.step));
    ctx.check("loss_decreased", std::isfinite(after) && after < before,
              "cross-entropy on " + std::to_string(cfg.eval_rows) + " rows: " + scientific(before) +
                  " before, " + scientific(after) + " after " + std::to_string(state.step) +
                  " steps");
    ctx.record("model_state_bytes", static_cast<double>(model.state_bytes()), "B");
    return status::ok();
}

// ---------------------------------------------------------------------------------------------
// The CPU cases.
// ---------------------------------------------------------------------------------------------
status run_cpu(pitfall::context& ctx, const config& cfg, const dataset& data,
               const std::vector<double>& init) {
    using exec_t = pitfall::mlp::counting_executor<pitfall::cpu_backend>;
    using model_t = pitfall::mlp::mlp_model<exec_t>;
    exec_t exec;
    const int steps = steps_per_timing(cfg, cfg.batch);
    {
        PITFALL_ASSIGN_OR_RETURN(
            auto model,
            model_t::create(exec, cfg.batch, adam_config{cfg.learning_rate}, init, data));
        // 1. census: one step with the names kept (it trains, like the warm-up does).
        exec.log().clear();
        exec.log().keep_entries = true;
        PITFALL_TRY(model.train_step());
        record_launch_counts(ctx, exec.log(), cfg.batch);
        exec.log().keep_entries = false;
        // 2. the timed fit; remedy_batch_* alternates its chunks with a batch-1 model's (3.),
        // for the gated ratio throughput(N) / throughput(1) measured under the same load.
        std::vector<double> seconds;
        if (cfg.batch == 1) {
            PITFALL_ASSIGN_OR_RETURN(
                seconds, pitfall::time_samples<pitfall::cpu_backend>(ctx, chunk_of(model, steps)));
        } else {
            PITFALL_ASSIGN_OR_RETURN(
                auto model_1, model_t::create(exec, 1, adam_config{cfg.learning_rate}, init, data));
            const int steps_1 = steps_per_timing(cfg, 1);
            PITFALL_ASSIGN_OR_RETURN(
                auto both, time_interleaved<pitfall::cpu_backend>(ctx, chunk_of(model, steps),
                                                                  chunk_of(model_1, steps_1)));
            seconds = std::move(both.first);
            const auto b1 = per_sample(both.second, steps_1, 1);
            ctx.record_samples("batch_1_seconds_per_sample", b1, "s");
            ctx.record("throughput_over_batch_1",
                       median(b1) / median(per_sample(seconds, steps, cfg.batch)));
        }
        PITFALL_TRY(record_fit(ctx, cfg, data, init, model, seconds, steps));
    }
    // The crossover needs the GPU's samples/s at each batch: only the CUDA cases can measure
    // both sides in one run (they time this same CPU model on their host).
    ctx.record_info("cpu_gpu_crossover",
                    "not measurable without a GPU: the CUDA cases record gpu_over_cpu_throughput "
                    "per batch and cuda.reproduce the crossover_batch");
    // 4. the check.
    PITFALL_ASSIGN_OR_RETURN(
        auto model, model_t::create(exec, cfg.batch, adam_config{cfg.learning_rate}, init, data));
    for (int s = 0; s < cfg.check_steps; ++s)
        PITFALL_TRY(model.train_step());
    std::vector<float> h_params;
    PITFALL_TRY(model.parameters_to_host(h_params));
    PITFALL_ASSIGN_OR_RETURN(const auto state, model.state_to_host());
    record_check(ctx, cfg, data, init, h_params, state.step);
    return status::ok();
}

// ---------------------------------------------------------------------------------------------
// The CUDA cases.
// ---------------------------------------------------------------------------------------------
#if PITFALL_HAS_CUDA
using cpu_exec_t = pitfall::mlp::counting_executor<pitfall::cpu_backend>;
using gpu_model_t = pitfall::mlp::mlp_model<stream_executor>;

/// Device facts and, per elementwise kernel of the step, the occupancy calculator's answer:
/// how many 256-thread blocks of it one SM can hold, and how much of the device's resident
/// block slots its grid fills (grid / (SMs x that)). Below 1 the device is partly idle.
status record_occupancy(pitfall::context& ctx, const std::vector<launch_record>& launches,
                        int& sm_count) {
    int device = 0;
    PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDevice(&device));
    PITFALL_CUDA_TRY(pitfall::stage::init,
                     cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    int threads_per_sm = 0;
    PITFALL_CUDA_TRY(
        pitfall::stage::init,
        cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    ctx.record("sm_count", sm_count);
    ctx.record("max_threads_per_sm", threads_per_sm);
    int below = 0;
    double fill_sum = 0.0;
    for (const auto& l : launches) {
        int blocks_per_sm = 0;
        PITFALL_CUDA_TRY(pitfall::stage::library_call,
                         cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                             &blocks_per_sm, l.kernel, static_cast<int>(l.block), 0));
        const double slots = static_cast<double>(sm_count) * blocks_per_sm;
        const double fill = slots > 0 ? std::min(1.0, l.grid / slots) : 0.0;
        ctx.record("active_blocks_per_sm." + l.name, blocks_per_sm);
        ctx.record("device_fill." + l.name, fill);
        fill_sum += fill;
        below += static_cast<int>(l.grid) < sm_count ? 1 : 0;
    }
    ctx.record("for_each_launches_below_sm_count", below);
    if (!launches.empty())
        ctx.record("mean_device_fill", fill_sum / static_cast<double>(launches.size()));
    return status::ok();
}

void record_graph_census(pitfall::context& ctx, const graph_census& g) {
    ctx.record("graph_nodes_per_step", static_cast<double>(g.nodes));
    ctx.record("kernel_nodes_per_step", static_cast<double>(g.kernel_nodes));
    ctx.record("library_kernel_nodes_per_step", static_cast<double>(g.library_kernel_nodes));
    ctx.record("library_kernels_below_sm_count", static_cast<double>(g.library_kernels_below_sms));
    ctx.record("library_max_grid_blocks", g.library_max_grid);
    if (g.kernel_nodes_without_params > 0)
        ctx.record("kernel_nodes_without_params",
                   static_cast<double>(g.kernel_nodes_without_params));
}

/// The crossover: both backends' samples/s at batch 1, 2, 4, .. crossover_max_batch, on this
/// host, in this run; the first batch at which the GPU is at least as fast.
status record_crossover(pitfall::context& ctx, const config& cfg, const dataset& data,
                        const std::vector<double>& init, stream_executor& gpu) {
    cpu_exec_t cpu;
    constexpr int warmup = 1, reps = 5;
    int crossover = 0;
    for (int b = 1; b <= cfg.crossover_max_batch; b *= 2) {
        PITFALL_ASSIGN_OR_RETURN(const auto g,
                                 eager_seconds_per_sample(gpu, cfg, b, data, init, warmup, reps));
        PITFALL_ASSIGN_OR_RETURN(const auto c,
                                 eager_seconds_per_sample(cpu, cfg, b, data, init, warmup, reps));
        const double gpu_rate = 1.0 / median(g), cpu_rate = 1.0 / median(c);
        const std::string at = ".b" + std::to_string(b);
        ctx.record("sweep_gpu_samples_per_second" + at, gpu_rate, "1/s");
        ctx.record("sweep_cpu_samples_per_second" + at, cpu_rate, "1/s");
        if (crossover == 0 && gpu_rate >= cpu_rate)
            crossover = b;
    }
    if (crossover > 0)
        ctx.record("crossover_batch", crossover);
    else
        ctx.record_info("crossover_batch", "none up to batch " +
                                               std::to_string(cfg.crossover_max_batch) +
                                               ": the CPU was faster at every batch size swept");
    ctx.record_info("cpu_for_crossover", pitfall::cpu_backend::describe_device());
    return status::ok();
}

status run_cuda(pitfall::context& ctx, const config& cfg, const dataset& data,
                const std::vector<double>& init) {
    stream_executor exec;
    PITFALL_TRY(exec.init());
    const int steps = steps_per_timing(cfg, cfg.batch);
    std::vector<double> own_seconds_per_sample;
    {
        PITFALL_ASSIGN_OR_RETURN(
            auto model,
            gpu_model_t::create(exec, cfg.batch, adam_config{cfg.learning_rate}, init, data));
        // An eager step first: it loads the kernels (lazy loading) and lets cuBLAS pick its
        // algorithms outside any capture.
        PITFALL_TRY(model.train_step());
        PITFALL_TRY(pitfall::cuda_backend::synchronize());

        // 1. census: one step captured (not run) with the launches recorded.
        exec.log().clear();
        exec.launches().clear();
        exec.log().keep_entries = true;
        step_graph graph;
        PITFALL_TRY(capture_step(exec, model, graph));
        exec.log().keep_entries = false;
        record_launch_counts(ctx, exec.log(), cfg.batch);
        int sm_count = 0;
        PITFALL_TRY(record_occupancy(ctx, exec.launches(), sm_count));
        graph_census census;
        PITFALL_TRY(census_of(graph, exec.launches(), sm_count, census));
        record_graph_census(ctx, census);

        // 2. the timed fit: eager steps, or the graph replayed once per step. The comparisons
        // the baselines gate on alternate with it chunk by chunk (time_interleaved):
        // remedy_batch_* against a batch-1 model, remedy_cuda_graph against eager batch 1.
        if (cfg.graph) {
            // ...WithFlags: cudaGraphInstantiate took five arguments before CUDA 12 and three
            // since; this one has one signature from 11.4 to 13 (the matrix's 11.8 cell).
            PITFALL_CUDA_TRY(pitfall::stage::init,
                             cudaGraphInstantiateWithFlags(&graph.exec, graph.graph, 0));
            ctx.record("graph_launches_per_step", 1);
            ctx.record("api_launches_per_sample", 1.0 / cfg.batch);
        } else {
            ctx.record("api_launches_per_sample",
                       static_cast<double>(exec.log().for_each_calls + exec.log().gemm_calls) /
                           cfg.batch);
        }
        const cudaGraphExec_t replay = graph.exec;
        const cudaStream_t stream = exec.stream();
        auto fit = [&]() -> status {
            if (!cfg.graph)
                return chunk_of(model, steps)();
            for (int s = 0; s < steps; ++s)
                PITFALL_CUDA_TRY(pitfall::stage::launch, cudaGraphLaunch(replay, stream));
            return status::ok();
        };
        std::vector<double> seconds;
        if (cfg.batch == 1 && !cfg.graph) {
            PITFALL_ASSIGN_OR_RETURN(seconds,
                                     pitfall::time_samples<pitfall::cuda_backend>(ctx, fit));
        } else {
            PITFALL_ASSIGN_OR_RETURN(
                auto model_1,
                gpu_model_t::create(exec, 1, adam_config{cfg.learning_rate}, init, data));
            const int steps_1 = steps_per_timing(cfg, 1);
            PITFALL_ASSIGN_OR_RETURN(auto both, time_interleaved<pitfall::cuda_backend>(
                                                    ctx, fit, chunk_of(model_1, steps_1)));
            seconds = std::move(both.first);
            const auto b1 = per_sample(both.second, steps_1, 1);
            const double own = median(per_sample(seconds, steps, cfg.batch));
            if (cfg.graph) {
                ctx.record_samples("eager_seconds_per_sample", b1, "s");
                ctx.record("graph_speedup_over_eager", median(b1) / own);
            } else {
                ctx.record_samples("batch_1_seconds_per_sample", b1, "s");
                ctx.record("throughput_over_batch_1", median(b1) / own);
            }
        }
        PITFALL_TRY(record_fit(ctx, cfg, data, init, model, seconds, steps));
        own_seconds_per_sample = per_sample(seconds, steps, cfg.batch);
    }

    // 3. the CPU on this host at the same batch, for the crossover (sequential: the CPU timing
    // must not share the host with the GPU run's launches).
    {
        cpu_exec_t cpu;
        PITFALL_ASSIGN_OR_RETURN(const auto c,
                                 eager_seconds_per_sample(cpu, cfg, cfg.batch, data, init,
                                                          ctx.warmup_count(), ctx.sample_count()));
        ctx.record_samples("cpu_seconds_per_sample", c, "s");
        ctx.record("gpu_over_cpu_throughput", median(c) / median(own_seconds_per_sample));
    }
    if (cfg.crossover)
        PITFALL_TRY(record_crossover(ctx, cfg, data, init, exec));

    // 4. the check: a fresh model, trained the way this variant trains (the graph variant: one
    // eager step, then replays of a step captured after it, which must carry on from the
    // device state rather than repeat the captured step's values).
    PITFALL_ASSIGN_OR_RETURN(
        auto model,
        gpu_model_t::create(exec, cfg.batch, adam_config{cfg.learning_rate}, init, data));
    PITFALL_TRY(model.train_step());
    if (cfg.graph && cfg.check_steps > 1) {
        step_graph graph;
        PITFALL_TRY(capture_step(exec, model, graph));
        PITFALL_CUDA_TRY(pitfall::stage::init,
                         cudaGraphInstantiateWithFlags(&graph.exec, graph.graph, 0));
        for (int s = 1; s < cfg.check_steps; ++s)
            PITFALL_CUDA_TRY(pitfall::stage::launch, cudaGraphLaunch(graph.exec, exec.stream()));
        PITFALL_TRY(pitfall::cuda_backend::synchronize());
    } else {
        for (int s = 1; s < cfg.check_steps; ++s)
            PITFALL_TRY(model.train_step());
    }
    std::vector<float> h_params;
    PITFALL_TRY(model.parameters_to_host(h_params)); // cudaMemcpy waits for the stream's work
    PITFALL_ASSIGN_OR_RETURN(const auto state, model.state_to_host());
    record_check(ctx, cfg, data, init, h_params, state.step);
    return status::ok();
}
#endif // PITFALL_HAS_CUDA

template <class Backend> status train(pitfall::context& ctx, const variant_setup& setup) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx, setup));
    // A CUDA Graph removes per-launch submission cost: the host-side driver work of ~12
    // cudaLaunchKernel/cuBLAS calls per step and the gaps between kernels. The CPU backend has
    // nothing of the kind to remove: its "launch" is a direct function call, and replaying a
    // recorded list of those calls would only add an indirection. No honest analog, so no
    // number that could be mistaken for one.
    if (cfg.graph)
        PITFALL_TRY(pitfall::cuda_only<Backend>(
            "a CUDA Graph amortises kernel-launch and driver submission cost, and the CPU "
            "backend's for_each/gemm are direct calls with no launch to remove"));
    // What model.fit receives: float32 pixels in [0, 1], one-hot labels, made on the host.
    const dataset data = pitfall::mlp::make_dataset(cfg.rows, cfg.seed);
    const std::vector<double> init = pitfall::mlp::initial_parameters(cfg.seed);
    ctx.record_info("model", "Dense(128, relu, input 784) -> Dense(10, softmax), categorical "
                             "cross-entropy, Adam; 101770 float32 parameters");
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        return run_cpu(ctx, cfg, data, init);
    } else { // only instantiated where the build has CUDA
#if PITFALL_HAS_CUDA
        return run_cuda(ctx, cfg, data, init);
#endif
    }
}

// The variants of scenario.json. A host allocation failure (the data set, the reference's
// buffers) is std::bad_alloc, an outcome like any other.
template <class Backend> status reproduce(pitfall::context& ctx) {
    return train<Backend>(ctx, {1, false, true}); // batch 1, eager, and the crossover sweep
}
template <class Backend> status remedy_batch_32(pitfall::context& ctx) {
    return train<Backend>(ctx, {32});
}
template <class Backend> status remedy_batch_64(pitfall::context& ctx) {
    return train<Backend>(ctx, {64});
}
template <class Backend> status remedy_batch_128(pitfall::context& ctx) {
    return train<Backend>(ctx, {128});
}
template <class Backend> status remedy_batch_256(pitfall::context& ctx) {
    return train<Backend>(ctx, {256});
}
template <class Backend> status remedy_cuda_graph(pitfall::context& ctx) {
    return train<Backend>(ctx, {1, true}); // batch 1, the step replayed from a graph
}

} // namespace

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce), PITFALL_VARIANT(remedy_batch_32),
                 PITFALL_VARIANT(remedy_batch_64), PITFALL_VARIANT(remedy_batch_128),
                 PITFALL_VARIANT(remedy_batch_256), PITFALL_VARIANT(remedy_cuda_graph))
