// float64_inputs: a dense network trained on float64 data, end to end, and the float32 remedy.
//
// What: the seed's Keras model, Dense(10, relu) -> Dense(1, sigmoid), binary cross-entropy,
//   Adam, fitted on a numpy array that is float64 because numpy made it so. `reproduce` keeps
//   float64 everywhere (OpenBLAS dgemm / cuBLAS DGEMM and float64 kernels); `remedy` casts the
//   inputs to float32 at the boundary and trains in float32 (sgemm / SGEMM, float32 kernels).
//   `reproduce_seed_size` and `remedy_seed_size` are the same two with the parameter set
//   seed_1000_features of scenario.json (features=1000 and Dense(1024) as in the seed's 2nd
//   example, batch 1024, 16384 rows): the size at which the GPU's FP64 rate shows. CUDA only.
// Why it fails: nothing crashes on the CPU, where float64 costs at most about twice float32
//   (half the SIMD lanes, twice the bytes). On a GPU float64 is a different machine: consumer parts
//   (sm_75, 86, 89) run FP64 at 1/32..1/64 of FP32, data-center parts (sm_80, 90) at about 1/2;
//   every byte moved is doubled; cuDNN supports CUDNN_DATA_DOUBLE only for some legacy ops and
//   many engines answer NOT_SUPPORTED, so frameworks fall back or fail. The seed's "might fail
//   on GPU due to float64" is, in practice, "runs many times slower or hits an unsupported
//   kernel".
// Expected per backend:
//   cpu  both variants ok; float64 agrees with an independent float64 reference to ~1e-15
//        (tolerance 1e-9), float32 to ~1e-6 (tolerance 1e-3). fp64/fp32 epoch time 1.1..1.5 at
//        the defaults (2 cores, OpenBLAS): GEMMs only 10 rows tall are bound by memory and
//        overhead, not by arithmetic; it grows with wider layers (~1.4 at hidden=128).
//   cuda (GPU; documented, the defaults seen once on an H100 (2026-11-22), not yet blessed)
//        every variant ok. At the defaults a step is a dozen small launches, so
//        fp64_over_fp32_epoch_time is launch-bound, may sit near 1 and is not bounded. The
//        seed_size variants make each step two 1024 x 1024 x 1000 GEMMs (4.2 GFLOP together) plus
//        an Adam update of 1.03 M parameters, and the ratio fp64_over_fp32_epoch_time_seed_size
//        heads for the device's FP64:FP32 throughput ratio
//        (docs/cuda-rules.md#fp64-vs-fp32-throughput-by-architecture):
//          sm_86/89 (1:64; A10, L4, RTX 30xx/40xx): DGEMM ~9 ms a step on an L4 (0.47 TFLOPS
//            FP64), SGEMM ~0.2 ms; Adam (memory-bound, twice the bytes in float64) and the
//            launches cost both variants alike, so the ratio lands near 20..35, not 64. Bounded
//            below at 8 (ada-ampere-cuda12): a margin of 2.5x or more under that estimate,
//            and still 4x above anything a 1:2 part or a CPU can show.
//          sm_90 (H100/H200): DGEMM runs on the FP64 tensor cores (67 TFLOPS SXM, 51 PCIe),
//            SGEMM without TF32 on the FP32 cores at the same rate, so the ratio sits near
//            1..1.5 (float64 still moves twice the bytes). Bounded above at 4 (hopper-cuda13).
//        An epoch is 16 steps: ~150 ms in float64 on an L4, a few ms on an H100. The cuDNN
//        float64 sigmoid is recorded as an event (ok, or the cuDNN status name).
//        Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init, before any of this.
// Remedy: cast once at the input boundary (x.astype(np.float32)): half the input bytes, float32
//   math throughout; the price is float32 rounding, measured against the float64 reference.
// Seed: 000 ex.1 (float64 numpy arrays into model.fit), 002 ex.3 (cast features to float32).
//
// Every case runs two trainings with the code under test (pitfall/models/dense.hpp) and one with
// the reference written below:
//   1. fit: the timed run. Each timed sample is one epoch over all `rows` rows; the warm-up
//      epochs train too, so the model sees warmup + samples epochs (10 by default, the seed's
//      epochs=10). It gives epoch_seconds, first_loss, final_loss.
//   2. check: the same model from the same initial weights trained `check_epochs` epochs on the
//      first `check_rows` rows, then its predictions on those rows. Small on purpose, so that
//   3. the float64 reference (plain nested loops, its own weight layout) can replay exactly the
//      same steps cheaply at any scale; it judges both backends.
#include "pitfall/models/dense.hpp"
#include "pitfall/scenario.hpp"

#if PITFALL_HAS_CUDA && PITFALL_HAS_CUDNN
#include "pitfall/cudnn.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using pitfall::dense::adam_config;
using pitfall::dense::dataset;
using pitfall::dense::model_shape;

// ---------------------------------------------------------------------------------------------
// Parameters (defaults and docs in scenario.json).
// ---------------------------------------------------------------------------------------------
struct config {
    std::size_t rows = 0;
    int features = 0;
    int hidden = 0;
    int batch = 0;
    double learning_rate = 0;
    std::uint64_t seed = 0;
    std::size_t check_rows = 0;
    int check_epochs = 0;
};

// Bounds live in scenario.json (BLAS takes int sizes: they keep every dimension and leading
// dimension representable); the SDK refuses a value outside them before the case starts.
pitfall::status_or<config> read_config(const pitfall::context& ctx) {
    config c;
    PITFALL_ASSIGN_OR_RETURN(const long long rows, ctx.param_int("rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long features, ctx.param_int("features"));
    PITFALL_ASSIGN_OR_RETURN(const long long hidden, ctx.param_int("hidden"));
    PITFALL_ASSIGN_OR_RETURN(const long long batch, ctx.param_int("batch"));
    PITFALL_ASSIGN_OR_RETURN(const long long seed, ctx.param_int("seed"));
    PITFALL_ASSIGN_OR_RETURN(const long long check_rows, ctx.param_int("check_rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long check_epochs, ctx.param_int("check_epochs"));
    PITFALL_ASSIGN_OR_RETURN(c.learning_rate, ctx.param_double("learning_rate"));
    c.rows = static_cast<std::size_t>(rows);
    c.features = static_cast<int>(features);
    c.hidden = static_cast<int>(hidden);
    c.batch = static_cast<int>(batch);
    c.seed = static_cast<std::uint64_t>(seed);
    c.check_rows = std::min(static_cast<std::size_t>(check_rows), c.rows);
    c.check_epochs = static_cast<int>(check_epochs);
    return c;
}

// ---------------------------------------------------------------------------------------------
// The independent float64 reference: the same training written the plain way, sample by
// sample, with W1 stored row-major (hidden x features) unlike the code under test. It shares
// only the inputs (data and initial weights) and the algorithm's definition:
//   forward   a1 = relu(W1 x + b1), p = sigmoid(w2 . a1 + b2)
//   gradient  of the batch-mean BCE: dz = (p - y) / n, back through w2 and the relu
//   Adam      m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2,
//             w -= lr sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps)
// ---------------------------------------------------------------------------------------------
struct reference_result {
    std::vector<double> predictions;     ///< on the trained rows
    std::vector<double> flat_parameters; ///< converted back to model_shape's flat layout
    long long steps = 0;                 ///< Adam steps taken
};

reference_result reference_train(const dataset& data, std::size_t rows, const model_shape& shape,
                                 int batch, int epochs, const adam_config& adam,
                                 const std::vector<double>& flat_initial) {
    const std::size_t F = static_cast<std::size_t>(shape.features);
    const std::size_t H = static_cast<std::size_t>(shape.hidden);
    // Unpack: w1[h][f] row-major here; the flat layout is column-major W1[h + f * H].
    std::vector<double> w1(H * F), b1(H), w2(H);
    for (std::size_t h = 0; h < H; ++h)
        for (std::size_t f = 0; f < F; ++f)
            w1[h * F + f] = flat_initial[shape.w1_offset() + h + f * H];
    for (std::size_t h = 0; h < H; ++h) {
        b1[h] = flat_initial[shape.b1_offset() + h];
        w2[h] = flat_initial[shape.w2_offset() + h];
    }
    double b2 = flat_initial[shape.b2_offset()];

    std::vector<double> m_w1(H * F, 0.0), v_w1(H * F, 0.0), m_b1(H, 0.0), v_b1(H, 0.0);
    std::vector<double> m_w2(H, 0.0), v_w2(H, 0.0);
    double m_b2 = 0.0, v_b2 = 0.0;
    std::vector<double> g_w1(H * F), g_b1(H), g_w2(H), a1(H);
    long long t = 0;

    // One sample forward; leaves the hidden activations in a1 for the backward pass.
    auto forward = [&](const double* x) {
        for (std::size_t h = 0; h < H; ++h) {
            double z = b1[h];
            for (std::size_t f = 0; f < F; ++f)
                z += w1[h * F + f] * x[f];
            a1[h] = z > 0.0 ? z : 0.0;
        }
        double z2 = b2;
        for (std::size_t h = 0; h < H; ++h)
            z2 += w2[h] * a1[h];
        return 1.0 / (1.0 + std::exp(-z2));
    };
    auto adam_step = [&](double& w, double& m, double& v, double g, double alpha_t) {
        m = adam.beta1 * m + (1.0 - adam.beta1) * g;
        v = adam.beta2 * v + (1.0 - adam.beta2) * g * g;
        w -= alpha_t * m / (std::sqrt(v) + adam.epsilon);
    };

    for (int epoch = 0; epoch < epochs; ++epoch) {
        for (std::size_t start = 0; start < rows; start += static_cast<std::size_t>(batch)) {
            const std::size_t n = std::min(static_cast<std::size_t>(batch), rows - start);
            std::fill(g_w1.begin(), g_w1.end(), 0.0);
            std::fill(g_b1.begin(), g_b1.end(), 0.0);
            std::fill(g_w2.begin(), g_w2.end(), 0.0);
            double g_b2 = 0.0;
            // Gradients accumulate sample by sample, all from the weights as they were at the
            // start of the batch; the update follows once per batch, as in the model.
            for (std::size_t r = start; r < start + n; ++r) {
                const double* x = data.x.data() + r * F;
                const double p = forward(x);
                const double dz = (p - data.y[r]) / static_cast<double>(n);
                g_b2 += dz;
                for (std::size_t h = 0; h < H; ++h) {
                    g_w2[h] += dz * a1[h];
                    if (a1[h] > 0.0) { // relu' = 1 where the unit fired, 0 elsewhere
                        const double dh = w2[h] * dz;
                        g_b1[h] += dh;
                        for (std::size_t f = 0; f < F; ++f)
                            g_w1[h * F + f] += dh * x[f];
                    }
                }
            }
            ++t;
            const double alpha_t = adam.learning_rate *
                                   std::sqrt(1.0 - std::pow(adam.beta2, static_cast<double>(t))) /
                                   (1.0 - std::pow(adam.beta1, static_cast<double>(t)));
            for (std::size_t i = 0; i < H * F; ++i)
                adam_step(w1[i], m_w1[i], v_w1[i], g_w1[i], alpha_t);
            for (std::size_t h = 0; h < H; ++h) {
                adam_step(b1[h], m_b1[h], v_b1[h], g_b1[h], alpha_t);
                adam_step(w2[h], m_w2[h], v_w2[h], g_w2[h], alpha_t);
            }
            adam_step(b2, m_b2, v_b2, g_b2, alpha_t);
        }
    }

    reference_result out;
    out.predictions.resize(rows);
    for (std::size_t r = 0; r < rows; ++r)
        out.predictions[r] = forward(data.x.data() + r * F);
    out.flat_parameters.assign(shape.parameter_count(), 0.0);
    for (std::size_t h = 0; h < H; ++h) {
        for (std::size_t f = 0; f < F; ++f)
            out.flat_parameters[shape.w1_offset() + h + f * H] = w1[h * F + f];
        out.flat_parameters[shape.b1_offset() + h] = b1[h];
        out.flat_parameters[shape.w2_offset() + h] = w2[h];
    }
    out.flat_parameters[shape.b2_offset()] = b2;
    out.steps = t;
    return out;
}

// Agreement tolerances on predictions, |p - p_ref| / p_ref over the checked rows.
//
// float64: the code under test and the reference do the same arithmetic in binary64; only the
// order of the sums differs (BLAS blocks the k loop, the reference adds sample by sample), so
// each GEMM output differs by at most ~k * 2^-53 ~ 3e-14 relative for k = 256, and Adam's
// normalised step m / sqrt(v) does not amplify relative errors. Observed: 2e-15. 1e-9 leaves
// room for longer runs and larger k, and is still ~60x below a single float32 rounding
// (2^-24 ~ 6e-8): any silent downcast in the pipeline (a float kernel, TF32 GEMMs) fails it.
constexpr double float64_tolerance = 1e-9;
// float32: inputs and initial weights rounded once (2^-24 relative), then float32 GEMMs (error
// ~sqrt(k) 2^-24 per output) and float32 Adam steps; over the default 48 steps the predictions
// move ~1e-6 relative (observed). 1e-3 says "the same model" (a decision at p = 0.5 moves
// by less than 0.1 %) with three decades of room for larger models and longer runs; TF32
// (10-bit mantissa, 2^-11 ~ 5e-4 per rounding) would come close to it, fp16 would not pass.
//
// Both bounds are for a short check run. Training amplifies any difference the longer and the
// harder it runs: with learning_rate=0.1 and 320 steps two float64 runs drift apart to ~1e-8
// and a float32 one leaves the reference entirely (seen). Hence the check replays a fixed,
// small run (check_rows, check_epochs: 48 steps by default) whatever the size of the fit.
constexpr double float32_tolerance = 1e-3;

double max_relative_difference(const std::vector<double>& got, const std::vector<double>& ref) {
    double worst = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double denom = std::max(std::fabs(ref[i]), std::numeric_limits<double>::min());
        const double d = std::fabs(got[i] - ref[i]) / denom;
        worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
    }
    return worst;
}

double max_absolute_difference(const std::vector<double>& got, const std::vector<double>& ref) {
    double worst = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = std::fabs(got[i] - ref[i]);
        worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
    }
    return worst;
}

std::string scientific(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return text;
}

// ---------------------------------------------------------------------------------------------
// cuDNN and float64 (reproduce on the GPU only): the one observation no CPU run can make.
// A sigmoid, the seed's output activation, through the legacy cudnnActivationForward on a
// CUDNN_DATA_DOUBLE tensor. Its status goes into the result as an event, not as the outcome:
// the training above does not depend on cuDNN, a framework would fall back or fail here.
// ---------------------------------------------------------------------------------------------
#if PITFALL_HAS_CUDA && PITFALL_HAS_CUDNN
/// The cuDNN objects of one attempt, released on every path (the TRY macros return early).
struct cudnn_session {
    cudnnHandle_t handle = nullptr;
    cudnnTensorDescriptor_t tensor = nullptr;
    cudnnActivationDescriptor_t activation = nullptr;
    cudnn_session() = default;
    cudnn_session(const cudnn_session&) = delete;
    cudnn_session& operator=(const cudnn_session&) = delete;
    ~cudnn_session() {
        if (activation != nullptr)
            (void)cudnnDestroyActivationDescriptor(activation);
        if (tensor != nullptr)
            (void)cudnnDestroyTensorDescriptor(tensor);
        if (handle != nullptr)
            (void)cudnnDestroy(handle);
    }
};

pitfall::status cudnn_double_sigmoid(cudnn_session& s, const double* d_in, double* d_out, int n) {
    PITFALL_CUDNN_TRY(cudnnCreate(&s.handle)); // no GPU: CUDNN_STATUS_NOT_INITIALIZED
    PITFALL_CUDNN_TRY(cudnnCreateTensorDescriptor(&s.tensor));
    PITFALL_CUDNN_TRY(
        cudnnSetTensor4dDescriptor(s.tensor, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, n, 1, 1, 1));
    PITFALL_CUDNN_TRY(cudnnCreateActivationDescriptor(&s.activation));
    PITFALL_CUDNN_TRY(cudnnSetActivationDescriptor(s.activation, CUDNN_ACTIVATION_SIGMOID,
                                                   CUDNN_PROPAGATE_NAN, 0.0));
    const double alpha = 1.0; // scaling factors are double for double tensors
    const double beta = 0.0;
    PITFALL_CUDNN_TRY(cudnnActivationForward(s.handle, s.activation, &alpha, s.tensor, d_in, &beta,
                                             s.tensor, d_out));
    PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaDeviceSynchronize());
    return pitfall::status::ok();
}

/// Records the event; returns an error only when the device itself failed (a CUDA error on
/// our own allocation or copy, or a sticky one surfacing at the synchronize after cuDNN's
/// kernel): that, not cuDNN's answer, would be the case's outcome.
pitfall::status observe_cudnn_double(pitfall::context& ctx, int n) {
    using backend = pitfall::cuda_backend;
    const std::size_t count = static_cast<std::size_t>(n);
    std::vector<double> h_in(count), h_out(count);
    for (std::size_t i = 0; i < count; ++i) // logits from -8 to 8
        h_in[i] =
            count > 1 ? -8.0 + 16.0 * static_cast<double>(i) / static_cast<double>(count - 1) : 0.0;
    PITFALL_ASSIGN_OR_RETURN(auto d_in, backend::allocate<double>(count));
    PITFALL_ASSIGN_OR_RETURN(auto d_out, backend::allocate<double>(count));
    PITFALL_TRY(backend::copy_to_device(d_in, h_in.data(), count));
    ctx.record_info("cudnn_version_loaded", std::to_string(cudnnGetVersion()));
    cudnn_session session;
    const pitfall::status observed = cudnn_double_sigmoid(session, d_in.data(), d_out.data(), n);
    ctx.record_event("cudnn_double_activation", observed);
    if (observed.sticky())
        return observed;
    if (!observed.is_ok())
        return pitfall::status::ok();
    PITFALL_TRY(backend::copy_to_host(h_out.data(), d_out, count));
    std::vector<double> h_expected(count);
    for (std::size_t i = 0; i < count; ++i)
        h_expected[i] = 1.0 / (1.0 + std::exp(-h_in[i]));
    // Recorded, not checked: no GPU run has yet told us cuDNN's float64 sigmoid accuracy.
    ctx.record("cudnn_double_sigmoid_max_rel_diff", max_relative_difference(h_out, h_expected));
    return pitfall::status::ok();
}
#endif

// ---------------------------------------------------------------------------------------------
// One variant: train in element type T on Backend (double = reproduce, float = remedy).
// ---------------------------------------------------------------------------------------------
template <class Backend, class T>
pitfall::status run_training(pitfall::context& ctx, const config& cfg, const dataset& data) {
    using model_t = pitfall::dense::dense_model<Backend, T>;
    constexpr bool is_float64 = std::is_same_v<T, double>;
    const model_shape shape{cfg.features, cfg.hidden};
    const adam_config adam{cfg.learning_rate};
    const std::size_t n_x = data.x.size();
    const std::size_t n_y = data.y.size();

    ctx.record_info("dtype", is_float64 ? "float64" : "float32");
    if (Backend::kind == pitfall::backend_kind::cuda)
        ctx.record_info("gemm", is_float64 ? "cublasDgemm" : "cublasSgemm");
    else
        ctx.record_info("gemm", is_float64 ? "cblas_dgemm (OpenBLAS)" : "cblas_sgemm (OpenBLAS)");

    // The boundary. reproduce hands numpy's float64 straight to the backend; remedy casts once
    // on the host (x.astype(np.float32)) and ships half the bytes.
    const T* h_x = nullptr;
    const T* h_y = nullptr;
    std::vector<T> h_x_cast, h_y_cast;
    if constexpr (is_float64) {
        h_x = data.x.data();
        h_y = data.y.data();
    } else {
        const auto cast_start = std::chrono::steady_clock::now();
        h_x_cast.assign(data.x.begin(), data.x.end()); // element-wise static_cast<float>
        h_y_cast.assign(data.y.begin(), data.y.end());
        ctx.record(
            "cast_seconds",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - cast_start).count(),
            "s");
        h_x = h_x_cast.data();
        h_y = h_y_cast.data();
    }
    const double input_bytes = static_cast<double>((n_x + n_y) * sizeof(T));
    ctx.record("input_bytes", input_bytes, "B");
    ctx.record("input_bytes_saved", static_cast<double>((n_x + n_y) * sizeof(double)) - input_bytes,
               "B");

    // On the CPU backend "device" memory is host memory counted by the tracker, so the memory
    // figure of the result (tracked_peak_bytes) shows the halving too.
    PITFALL_ASSIGN_OR_RETURN(auto d_x, Backend::template allocate<T>(n_x));
    PITFALL_ASSIGN_OR_RETURN(auto d_y, Backend::template allocate<T>(n_y));
    PITFALL_TRY(Backend::copy_to_device(d_x, h_x, n_x));
    PITFALL_TRY(Backend::copy_to_device(d_y, h_y, n_y));
    const std::vector<double> h_initial = pitfall::dense::initial_parameters(shape, cfg.seed);

    // 1. fit: one timed sample = one epoch over every row; warm-up epochs train as well.
    // first_loss is the mean loss of the first (warm-up) epoch, already learning as it goes;
    // final_loss that of the last timed one. The harness turns the two variants' samples into
    // fp64_over_fp32_epoch_time (scenario.json, "ratios").
    {
        PITFALL_ASSIGN_OR_RETURN(auto model, model_t::create(shape, cfg.batch, adam, h_initial));
        ctx.record("model_bytes", static_cast<double>(model.parameter_bytes()), "B");
        ctx.record("model_state_bytes", static_cast<double>(model.state_bytes()), "B");
        std::vector<double> epoch_losses;
        PITFALL_ASSIGN_OR_RETURN(
            const auto seconds, pitfall::time_samples<Backend>(ctx, [&]() -> pitfall::status {
                PITFALL_ASSIGN_OR_RETURN(const double loss,
                                         model.train_epoch(d_x.data(), d_y.data(), data.rows));
                epoch_losses.push_back(loss);
                return pitfall::status::ok();
            }));
        ctx.record_samples("epoch_seconds", seconds, "s");
        ctx.record("epochs_trained", static_cast<double>(epoch_losses.size()));
        ctx.record("steps_trained", static_cast<double>(model.steps()));
        ctx.record("first_loss", epoch_losses.front());
        ctx.record("final_loss", epoch_losses.back());
        // A model that learns: the mean BCE of the last epoch is below that of the first
        // (ln 2 = 0.693 is a coin flip). Needs two epochs to say anything.
        if (epoch_losses.size() >= 2)
            ctx.check("loss_decreased",
                      std::isfinite(epoch_losses.back()) &&
                          epoch_losses.back() < epoch_losses.front(),
                      "first epoch " + scientific(epoch_losses.front()) + ", last epoch " +
                          scientific(epoch_losses.back()));
        else
            ctx.record_info("loss_decreased", "not judged: warmup + samples < 2 epochs");
    }

    // 2. check: a fresh model from the same weights, check_epochs epochs on check_rows rows.
    // The predictions come back as T and are widened to double on the host: exact, so what
    // the comparison sees is what the model computed.
    std::vector<double> h_predictions(cfg.check_rows);
    std::vector<double> h_parameters;
    long long check_steps = 0;
    {
        PITFALL_ASSIGN_OR_RETURN(auto model, model_t::create(shape, cfg.batch, adam, h_initial));
        for (int epoch = 0; epoch < cfg.check_epochs; ++epoch)
            PITFALL_TRY(model.train_epoch(d_x.data(), d_y.data(), cfg.check_rows));
        PITFALL_ASSIGN_OR_RETURN(auto d_predictions, Backend::template allocate<T>(cfg.check_rows));
        PITFALL_TRY(model.predict(d_x.data(), cfg.check_rows, d_predictions.data()));
        std::vector<T> h_pred_t(cfg.check_rows);
        PITFALL_TRY(Backend::copy_to_host(h_pred_t.data(), d_predictions, cfg.check_rows));
        h_predictions.assign(h_pred_t.begin(), h_pred_t.end());
        std::vector<T> h_params_t;
        PITFALL_TRY(model.parameters_to_host(h_params_t));
        h_parameters.assign(h_params_t.begin(), h_params_t.end());
        check_steps = model.steps();
    }

    // 3. the float64 reference replays the check run on the float64 data, on the host.
    const auto reference_start = std::chrono::steady_clock::now();
    const reference_result reference =
        reference_train(data, cfg.check_rows, shape, cfg.batch, cfg.check_epochs, adam, h_initial);
    ctx.record(
        "reference_seconds",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - reference_start).count(),
        "s");
    // The relative error of a probability: for p = sigmoid(z) it is (1 - p) |dz|, i.e. about
    // the absolute error of the logit, so it stays meaningful for confident predictions.
    const double rel = max_relative_difference(h_predictions, reference.predictions);
    const double tolerance = is_float64 ? float64_tolerance : float32_tolerance;
    ctx.record("max_rel_diff_vs_fp64_reference", rel);
    ctx.record("max_abs_diff_vs_fp64_reference",
               max_absolute_difference(h_predictions, reference.predictions));
    ctx.record("check_steps", static_cast<double>(check_steps));
    // Like with like: the same number of Adam steps on both sides, or the comparison is moot.
    ctx.check("same_steps_as_reference", check_steps == reference.steps,
              std::to_string(check_steps) + " steps vs the reference's " +
                  std::to_string(reference.steps));
    ctx.record("max_abs_weight_diff_vs_fp64_reference",
               max_absolute_difference(h_parameters, reference.flat_parameters));
    ctx.check("predictions_match_fp64_reference", rel <= tolerance,
              "max |p - p_ref| / p_ref = " + scientific(rel) + " over " +
                  std::to_string(cfg.check_rows) + " rows after " +
                  std::to_string(cfg.check_epochs) + " epochs; tolerance " + scientific(tolerance));

#if PITFALL_HAS_CUDA && PITFALL_HAS_CUDNN
    if constexpr (Backend::kind == pitfall::backend_kind::cuda && is_float64)
        PITFALL_TRY(observe_cudnn_double(ctx, cfg.batch));
#endif
    return pitfall::status::ok();
}

// What numpy hands over: float64 features and labels, made on the host from a fixed seed.
// Element type T is what the training runs in.
template <class Backend, class T> pitfall::status train_on(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const dataset data = pitfall::dense::make_dataset(cfg.rows, cfg.features, cfg.seed);
    return run_training<Backend, T>(ctx, cfg, data);
}

/// float64 end to end. A host allocation failure (the data set is rows x features doubles on
/// the host first, 8 GB at the seed's size) is std::bad_alloc, an outcome like any other.
template <class Backend> pitfall::status reproduce(pitfall::context& ctx) {
    return train_on<Backend, double>(ctx);
}
/// Cast once at the boundary, float32 from there on.
template <class Backend> pitfall::status remedy(pitfall::context& ctx) {
    return train_on<Backend, float>(ctx);
}

} // namespace

// The seed_size variants are reproduce and remedy themselves: only their parameter set
// (scenario.json, "params" of each variant) differs, and the SDK applies it before the case.
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce), PITFALL_VARIANT(remedy),
                 PITFALL_NAMED_VARIANT("reproduce_seed_size", reproduce),
                 PITFALL_NAMED_VARIANT("remedy_seed_size", remedy))
