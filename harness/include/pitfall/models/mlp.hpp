// pitfall/models/mlp.hpp: the seed's Keras MLP, Dense(128, relu) -> Dense(10, softmax),
// categorical cross-entropy and Adam, written once over an *executor* (who runs the elementwise
// functors and the GEMMs) so that the CPU run, the eager GPU run and the CUDA Graph replay
// execute the very same step.
//
//   auto data = pitfall::mlp::make_dataset(rows, seed);
//   pitfall::mlp::counting_executor<pitfall::cpu_backend> exec;
//   PITFALL_ASSIGN_OR_RETURN(auto model, (pitfall::mlp::mlp_model<decltype(exec)>::create(
//       exec, batch, adam, pitfall::mlp::initial_parameters(seed), data)));
//   PITFALL_TRY(model.train_step());
//
// An executor has `using backend = <cpu_backend|cuda_backend>`, `for_each(name, n, functor)` and
// `gemm(...)` (float, column-major). counting_executor below forwards to Backend::for_each and
// Backend::gemm and counts the calls of a step: the "launches" a step issues. The CUDA executor
// in scenarios/batch_size_one/scenario.cu launches the same functors on its own stream (a CUDA
// Graph cannot capture the legacy default stream) and records each launch's grid for the
// occupancy census.
//
// The step is a pure function of device state. Where the batch starts in the data set and Adam's
// bias correction both come from a step counter that lives on the device and is advanced by a
// kernel, never from host variables passed by value: a CUDA Graph bakes every kernel argument in
// at capture time, so a step that took `alpha_t` or a data offset from the host would replay
// step 1 forever. (That is the classic CUDA Graph pitfall; this layout avoids it for every
// variant, so all variants do identical work.)
//
// Layout (column-major, as BLAS wants it): a sample is one column of 784 floats, so a batch is
// one contiguous block; labels are one-hot columns of 10 floats (Keras' to_categorical).
// Trainable parameters live in one buffer [W1 (128 x 784) | b1 (128) | W2 (10 x 128) | b2 (10)],
// gradients and Adam moments in buffers of the same layout, so one Adam functor updates all.
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/models/adam.hpp"
#include "pitfall/random.hpp"
#include "pitfall/status.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pitfall::mlp {

/// The seed's shapes (MNIST: 28 x 28 pixels, 10 digits) and the flat parameter layout.
struct shape {
    static constexpr int features = 784;
    static constexpr int hidden = 128;
    static constexpr int classes = 10;
    static constexpr std::size_t w1_offset = 0;
    static constexpr std::size_t b1_offset = std::size_t(hidden) * features;
    static constexpr std::size_t w2_offset = b1_offset + hidden;
    static constexpr std::size_t b2_offset = w2_offset + std::size_t(classes) * hidden;
    static constexpr std::size_t parameter_count = b2_offset + classes; // 101770
};

using models::adam_config; ///< Keras' Adam defaults with the caller's learning rate

// ---------------------------------------------------------------------------------------------
// Host-side inputs, from the fixed-seed generator of pitfall/random.hpp: a synthetic
// MNIST-shaped data set and Glorot-uniform initial weights. They make the
// *inputs*; the code under test and the float64 reference in scenarios/batch_size_one/scenario.cu
// both start from them.
// ---------------------------------------------------------------------------------------------

/// What `(x_train, y_train)` looks like after the usual Keras preprocessing: pixels in [0, 1]
/// (float32), labels one-hot (to_categorical).
struct dataset {
    std::size_t rows = 0;
    std::vector<float> x;   ///< rows x 784, sample-major (column-major 784 x rows)
    std::vector<float> y;   ///< rows x 10 one-hot
    std::vector<int> label; ///< rows: the class index (for the reference's bookkeeping)
};

/// Ten random "digit" prototypes with about 20 % ink; a sample is its class's prototype plus
/// uniform noise of half-width 0.3, clamped to [0, 1] (so, like MNIST, many pixels are exactly
/// 0). Classes are separable but not trivially: the loss falls steadily from ln 10 = 2.30.
inline dataset make_dataset(std::size_t rows, std::uint64_t seed) {
    constexpr std::size_t F = shape::features;
    constexpr std::size_t C = shape::classes;
    dataset d;
    d.rows = rows;
    d.x.resize(rows * F);
    d.y.assign(rows * C, 0.0f);
    d.label.resize(rows);
    splitmix64 proto_rng(seed ^ 0xD161755ull);
    std::vector<double> prototypes(C * F);
    for (auto& p : prototypes)
        p = proto_rng.uniform(0.0, 1.0) < 0.2 ? proto_rng.uniform(0.5, 1.0) : 0.0;
    splitmix64 rng(seed);
    for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t c = static_cast<std::size_t>(rng.next() % C);
        d.label[r] = static_cast<int>(c);
        d.y[r * C + c] = 1.0f;
        for (std::size_t f = 0; f < F; ++f) {
            const double v = prototypes[c * F + f] + rng.uniform(-0.3, 0.3);
            d.x[r * F + f] = static_cast<float>(v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v);
        }
    }
    return d;
}

/// Keras' defaults: Glorot-uniform kernels (limit sqrt(6 / (fan_in + fan_out))), zero biases.
inline std::vector<double> initial_parameters(std::uint64_t seed) {
    std::vector<double> p(shape::parameter_count, 0.0);
    splitmix64 rng(seed ^ 0xC0FFEEull);
    const double limit1 = std::sqrt(6.0 / (shape::features + shape::hidden));
    for (std::size_t i = 0; i < shape::b1_offset; ++i)
        p[shape::w1_offset + i] = rng.uniform(-limit1, limit1);
    const double limit2 = std::sqrt(6.0 / (shape::hidden + shape::classes));
    for (std::size_t i = 0; i < std::size_t(shape::classes) * shape::hidden; ++i)
        p[shape::w2_offset + i] = rng.uniform(-limit2, limit2);
    return p;
}

// ---------------------------------------------------------------------------------------------
// Device-resident training state: what a replayed graph must read instead of host values.
// ---------------------------------------------------------------------------------------------
struct train_state {
    long long step;     ///< Adam steps completed; also the data cursor
    double beta1_power; ///< beta1^step, kept as a running product (double: exact enough)
    double beta2_power; ///< beta2^step
    /// lr sqrt(1 - beta2^t) / (1 - beta1^t) of the step being applied. A double on purpose,
    /// although Adam applies it in float: a float here could alias the float parameters the
    /// update writes, and the CPU loop would reload it for every one of the 101 770 elements
    /// and never vectorise; a double cannot (strict aliasing), so the load is hoisted.
    double alpha_t;
    float last_loss; ///< mean loss of the last step's batch
    double loss_sum; ///< sum of per-step mean losses since creation
};

// ---------------------------------------------------------------------------------------------
// Elementwise steps: one functor per step, the same code in a host loop and in a kernel.
// Float math goes through the float functions (expf, logf) so the device never drifts to
// double. Each functor is "one launch" of the step.
// ---------------------------------------------------------------------------------------------

/// Copies the step's batch (pixels and one-hot labels) from the data set into the model's
/// input buffers: what a framework's input pipeline does before each step. The start row comes
/// from the device step counter: batch t covers rows [t*batch, (t+1)*batch) modulo the rows
/// that fill whole batches (Keras without shuffle, drop_remainder).
struct gather_batch {
    const float* x_all;
    const float* y_all;
    float* x_batch;
    float* y_batch;
    const train_state* state;
    unsigned long long batch;
    unsigned long long usable_rows; ///< a multiple of batch
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const unsigned long long start =
            (static_cast<unsigned long long>(state->step) * batch) % usable_rows;
        const unsigned long long n_x = batch * shape::features;
        if (i < n_x)
            x_batch[i] = x_all[start * shape::features + i];
        else
            y_batch[i - n_x] = y_all[start * shape::classes + (i - n_x)];
    }
};

/// Hidden layer epilogue: a = relu(z + b1[h]) over a 128 x batch block (in place).
struct bias_relu {
    float* z;
    const float* b1;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const float v = z[i] + b1[i % shape::hidden];
        z[i] = v > 0.0f ? v : 0.0f;
    }
};

/// Output layer + loss, one sample per thread: logits z = W2 a + b2, p = softmax(z),
/// dL/dz = (p - y) / batch, loss = logsumexp(z) - sum(y z). This is the from-logits form that
/// tf.keras uses when the output layer is a softmax (it reads the logits off the Softmax op),
/// so log(0) never happens; the max is subtracted before exp so exp never overflows.
struct softmax_cross_entropy {
    const float* z2; ///< 10 x batch, before b2
    const float* b2;
    const float* y; ///< 10 x batch one-hot
    float* dz2;     ///< 10 x batch
    float* loss_terms;
    float inv_batch;
    PITFALL_HOST_DEVICE void operator()(std::size_t b) const {
        // No local array of logits: z is recomputed from z2 + b2 in each pass (three passes of
        // ten adds), which keeps everything in registers on the GPU.
        const std::size_t base = b * shape::classes;
        float z_max = z2[base] + b2[0];
        for (int c = 1; c < shape::classes; ++c) {
            const float z = z2[base + c] + b2[c];
            z_max = z > z_max ? z : z_max;
        }
        float sum = 0.0f;
        for (int c = 0; c < shape::classes; ++c)
            sum += expf(z2[base + c] + b2[c] - z_max);
        float yz = 0.0f;
        for (int c = 0; c < shape::classes; ++c) {
            const float z = z2[base + c] + b2[c];
            dz2[base + c] = (expf(z - z_max) / sum - y[base + c]) * inv_batch;
            yz += y[base + c] * z;
        }
        loss_terms[b] = z_max + logf(sum) - yz;
    }
};

/// One thread per class: db2[c] = sum over the batch of dL/dz[c, b].
struct output_bias_gradient {
    const float* dz2;
    float* grad_b2;
    int batch;
    PITFALL_HOST_DEVICE void operator()(std::size_t c) const {
        float g = 0.0f;
        for (int b = 0; b < batch; ++b)
            g += dz2[c + static_cast<std::size_t>(b) * shape::classes];
        grad_b2[c] = g;
    }
};

/// One thread of bookkeeping per step: the batch's mean loss, then step += 1 and Adam's bias
/// correction for the new step, all on the device (see train_state). A serial loop on purpose:
/// deterministic, and a batch is small next to the GEMMs.
struct loss_and_schedule {
    const float* loss_terms;
    train_state* state;
    int batch;
    double learning_rate;
    double beta1;
    double beta2;
    PITFALL_HOST_DEVICE void operator()(std::size_t) const {
        float l = 0.0f;
        for (int b = 0; b < batch; ++b)
            l += loss_terms[b];
        l /= static_cast<float>(batch);
        state->last_loss = l;
        state->loss_sum += l;
        state->step += 1;
        state->beta1_power *= beta1;
        state->beta2_power *= beta2;
        state->alpha_t =
            learning_rate * sqrt(1.0 - state->beta2_power) / (1.0 - state->beta1_power);
    }
};

/// Back through the output layer and the relu: dz1[h, b] = (W2^T dz2)[h, b] where a1 > 0.
/// The inner product has only 10 terms: one functor instead of a k=10 GEMM plus a mask.
struct hidden_gradient {
    const float* a1;
    const float* w2; ///< 10 x 128, column-major
    const float* dz2;
    float* dz1;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const std::size_t h = i % shape::hidden;
        const std::size_t b = i / shape::hidden;
        if (!(a1[i] > 0.0f)) {
            dz1[i] = 0.0f;
            return;
        }
        float g = 0.0f;
        for (int c = 0; c < shape::classes; ++c)
            g += w2[c + h * shape::classes] * dz2[c + b * shape::classes];
        dz1[i] = g;
    }
};

/// One thread per hidden unit: db1[h] = sum over the batch of dz1[h, b].
struct hidden_bias_gradient {
    const float* dz1;
    float* grad_b1;
    int batch;
    PITFALL_HOST_DEVICE void operator()(std::size_t h) const {
        float g = 0.0f;
        for (int b = 0; b < batch; ++b)
            g += dz1[h + static_cast<std::size_t>(b) * shape::hidden];
        grad_b1[h] = g;
    }
};

/// Adam as Keras writes it: m += (g - m)(1 - beta1); v += (g^2 - v)(1 - beta2);
/// w -= alpha_t m / (sqrt(v) + eps), alpha_t read from the device state (set this step).
struct adam_update {
    float* w;
    const float* g;
    float* m;
    float* v;
    const train_state* state;
    float one_minus_beta1;
    float one_minus_beta2;
    float epsilon;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const float gi = g[i];
        m[i] += (gi - m[i]) * one_minus_beta1;
        v[i] += (gi * gi - v[i]) * one_minus_beta2;
        const float alpha_t = static_cast<float>(state->alpha_t);
        w[i] -= alpha_t * m[i] / (sqrtf(v[i]) + epsilon);
    }
};

// ---------------------------------------------------------------------------------------------
// The plain executor: Backend::for_each and Backend::gemm, counted.
// ---------------------------------------------------------------------------------------------

/// What one step issued: calls of for_each (one kernel each on the GPU) and of gemm (one
/// cuBLAS call, one or more kernels), with each for_each's element count.
struct launch_log {
    struct entry {
        std::string name;
        std::size_t elements = 0; ///< 0 for a gemm
        bool is_gemm = false;
    };
    std::vector<entry> entries;
    long long for_each_calls = 0;
    long long gemm_calls = 0;
    bool keep_entries = false; ///< the names and sizes are kept only while a census is on
    void clear() { *this = launch_log{}; }
};

template <class Backend> class counting_executor {
public:
    using backend = Backend;

    template <class F> status for_each(const char* name, std::size_t n, F f) {
        ++m_log.for_each_calls;
        if (m_log.keep_entries)
            m_log.entries.push_back({name, n, false});
        return Backend::for_each(n, f);
    }
    status gemm(const char* name, transpose ta, transpose tb, int m, int n, int k, const float* a,
                int lda, const float* b, int ldb, float* c, int ldc) {
        ++m_log.gemm_calls;
        if (m_log.keep_entries)
            m_log.entries.push_back({name, 0, true});
        return Backend::gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    }
    launch_log& log() { return m_log; }

private:
    launch_log m_log;
};

// ---------------------------------------------------------------------------------------------
// The model: parameters, gradients, Adam moments, the batch buffers and the device state.
// ---------------------------------------------------------------------------------------------
template <class Executor> class mlp_model {
public:
    using backend = typename Executor::backend;
    template <class U> using device_buffer = buffer<U, backend>;

    /// Allocates everything for batches of `batch` samples, uploads the data set (it stays on
    /// the backend: the scenario isolates the cost of the batch size, not of transfers), and
    /// the float64 initial parameters rounded to float32.
    static status_or<mlp_model> create(Executor& exec, int batch, adam_config adam,
                                       const std::vector<double>& h_initial, const dataset& data) {
        mlp_model model;
        model.m_exec = &exec;
        model.m_batch = batch;
        model.m_adam = adam;
        model.m_usable_rows = (data.rows / static_cast<std::size_t>(batch)) * batch;
        if (model.m_usable_rows == 0)
            return status::error(pitfall_error::bad_parameter,
                                 "the data set has fewer rows than one batch", stage::init,
                                 __FILE__, __LINE__);
        const std::size_t n_params = shape::parameter_count;
        const std::size_t nb = static_cast<std::size_t>(batch);
        PITFALL_ASSIGN_OR_RETURN(model.m_x_all, backend::template allocate<float>(data.x.size()));
        PITFALL_ASSIGN_OR_RETURN(model.m_y_all, backend::template allocate<float>(data.y.size()));
        PITFALL_ASSIGN_OR_RETURN(model.m_params, backend::template allocate<float>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_grads, backend::template allocate<float>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_adam_m, backend::template allocate<float>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_adam_v, backend::template allocate<float>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_x,
                                 backend::template allocate<float>(nb * shape::features));
        PITFALL_ASSIGN_OR_RETURN(model.m_y, backend::template allocate<float>(nb * shape::classes));
        PITFALL_ASSIGN_OR_RETURN(model.m_a1, backend::template allocate<float>(nb * shape::hidden));
        PITFALL_ASSIGN_OR_RETURN(model.m_dz1,
                                 backend::template allocate<float>(nb * shape::hidden));
        PITFALL_ASSIGN_OR_RETURN(model.m_z2,
                                 backend::template allocate<float>(nb * shape::classes));
        PITFALL_ASSIGN_OR_RETURN(model.m_dz2,
                                 backend::template allocate<float>(nb * shape::classes));
        PITFALL_ASSIGN_OR_RETURN(model.m_loss_terms, backend::template allocate<float>(nb));
        PITFALL_ASSIGN_OR_RETURN(model.m_state, backend::template allocate<train_state>(1));

        PITFALL_TRY(backend::copy_to_device(model.m_x_all, data.x.data(), data.x.size()));
        PITFALL_TRY(backend::copy_to_device(model.m_y_all, data.y.data(), data.y.size()));
        std::vector<float> h_params(n_params);
        for (std::size_t i = 0; i < n_params; ++i)
            h_params[i] = static_cast<float>(h_initial[i]);
        PITFALL_TRY(backend::copy_to_device(model.m_params, h_params.data(), n_params));
        const std::vector<float> h_zeros(n_params, 0.0f);
        PITFALL_TRY(backend::copy_to_device(model.m_adam_m, h_zeros.data(), n_params));
        PITFALL_TRY(backend::copy_to_device(model.m_adam_v, h_zeros.data(), n_params));
        const train_state h_state{0, 1.0, 1.0, 0.0, 0.0f, 0.0};
        PITFALL_TRY(backend::copy_to_device(model.m_state, &h_state, 1));
        return status_or<mlp_model>(std::move(model));
    }

    /// One training step: 8 for_each calls and 4 GEMMs whatever the batch size, which is the
    /// whole point: at batch 1 every one of them carries one sample.
    status train_step() {
        Executor& ex = *m_exec;
        const std::size_t nb = static_cast<std::size_t>(m_batch);
        const int n = m_batch;
        float* p = m_params.data();
        float* g = m_grads.data();
        PITFALL_TRY(ex.for_each("gather_batch", nb * (shape::features + shape::classes),
                                gather_batch{m_x_all.data(), m_y_all.data(), m_x.data(), m_y.data(),
                                             m_state.data(), nb, m_usable_rows}));
        // Forward. A1 = relu(W1 X + b1) (128 x n); Z2 = W2 A1 (10 x n), b2 added by the loss.
        PITFALL_TRY(ex.gemm("gemm_w1_x", transpose::no, transpose::no, shape::hidden, n,
                            shape::features, p + shape::w1_offset, shape::hidden, m_x.data(),
                            shape::features, m_a1.data(), shape::hidden));
        PITFALL_TRY(ex.for_each("bias_relu", nb * shape::hidden,
                                bias_relu{m_a1.data(), p + shape::b1_offset}));
        PITFALL_TRY(ex.gemm("gemm_w2_a1", transpose::no, transpose::no, shape::classes, n,
                            shape::hidden, p + shape::w2_offset, shape::classes, m_a1.data(),
                            shape::hidden, m_z2.data(), shape::classes));
        // Loss and the output layer's gradients.
        PITFALL_TRY(ex.for_each("softmax_cross_entropy", nb,
                                softmax_cross_entropy{m_z2.data(), p + shape::b2_offset, m_y.data(),
                                                      m_dz2.data(), m_loss_terms.data(),
                                                      1.0f / static_cast<float>(n)}));
        PITFALL_TRY(ex.for_each("output_bias_gradient", shape::classes,
                                output_bias_gradient{m_dz2.data(), g + shape::b2_offset, n}));
        PITFALL_TRY(
            ex.for_each("loss_and_schedule", 1,
                        loss_and_schedule{m_loss_terms.data(), m_state.data(), n,
                                          m_adam.learning_rate, m_adam.beta1, m_adam.beta2}));
        // dW2 (10 x 128) = dZ2 (10 x n) A1^T (n x 128)
        PITFALL_TRY(ex.gemm("gemm_dw2", transpose::no, transpose::yes, shape::classes,
                            shape::hidden, n, m_dz2.data(), shape::classes, m_a1.data(),
                            shape::hidden, g + shape::w2_offset, shape::classes));
        // Back through W2 and the relu, then the hidden layer's gradients.
        PITFALL_TRY(ex.for_each(
            "hidden_gradient", nb * shape::hidden,
            hidden_gradient{m_a1.data(), p + shape::w2_offset, m_dz2.data(), m_dz1.data()}));
        PITFALL_TRY(ex.for_each("hidden_bias_gradient", shape::hidden,
                                hidden_bias_gradient{m_dz1.data(), g + shape::b1_offset, n}));
        // dW1 (128 x 784) = dZ1 (128 x n) X^T (n x 784): with the forward GEMM, the step's
        // arithmetic; 100 k multiply-adds per sample each.
        PITFALL_TRY(ex.gemm("gemm_dw1", transpose::no, transpose::yes, shape::hidden,
                            shape::features, n, m_dz1.data(), shape::hidden, m_x.data(),
                            shape::features, g + shape::w1_offset, shape::hidden));
        // Adam over all 101 770 parameters: the same work at every batch size, so at batch 1
        // it dominates the step on the CPU.
        return ex.for_each("adam_update", shape::parameter_count,
                           adam_update{p, g, m_adam_m.data(), m_adam_v.data(), m_state.data(),
                                       static_cast<float>(1.0 - m_adam.beta1),
                                       static_cast<float>(1.0 - m_adam.beta2),
                                       static_cast<float>(m_adam.epsilon)});
    }

    /// The current parameters (flat layout of `shape`) and the device state, on the host.
    status parameters_to_host(std::vector<float>& h_out) const {
        h_out.resize(shape::parameter_count);
        return backend::copy_to_host(h_out.data(), m_params, h_out.size());
    }
    status_or<train_state> state_to_host() const {
        train_state h{};
        PITFALL_TRY(backend::copy_to_host(&h, m_state, 1));
        return h;
    }

    int batch() const { return m_batch; }
    std::size_t usable_rows() const { return m_usable_rows; }
    /// Bytes the model holds on the backend (data set included).
    std::size_t state_bytes() const {
        return m_x_all.bytes() + m_y_all.bytes() + m_params.bytes() + m_grads.bytes() +
               m_adam_m.bytes() + m_adam_v.bytes() + m_x.bytes() + m_y.bytes() + m_a1.bytes() +
               m_dz1.bytes() + m_z2.bytes() + m_dz2.bytes() + m_loss_terms.bytes() +
               m_state.bytes();
    }

private:
    mlp_model() = default;

    Executor* m_exec = nullptr;
    int m_batch = 0;
    adam_config m_adam;
    unsigned long long m_usable_rows = 0;
    device_buffer<float> m_x_all; ///< 784 x rows: the whole data set
    device_buffer<float> m_y_all; ///< 10 x rows, one-hot
    device_buffer<float> m_params;
    device_buffer<float> m_grads;
    device_buffer<float> m_adam_m;
    device_buffer<float> m_adam_v;
    device_buffer<float> m_x;          ///< 784 x batch: this step's inputs
    device_buffer<float> m_y;          ///< 10 x batch
    device_buffer<float> m_a1;         ///< 128 x batch: W1 X, then relu(. + b1) in place
    device_buffer<float> m_dz1;        ///< 128 x batch
    device_buffer<float> m_z2;         ///< 10 x batch: W2 A1 (before b2)
    device_buffer<float> m_dz2;        ///< 10 x batch
    device_buffer<float> m_loss_terms; ///< batch
    device_buffer<train_state> m_state;
};

} // namespace pitfall::mlp
