// pitfall/models/dense.hpp: the seed's Keras network, Dense(hidden, relu) -> Dense(1, sigmoid),
// trained with binary cross-entropy and Adam, written once over the backend and the element type
// (float64_inputs trains it; bench/kernels.cpp times it).
//
// The dense layers are Backend::gemm calls (OpenBLAS sgemm/dgemm on the CPU, cuBLAS SGEMM/DGEMM
// on the GPU); everything elementwise is a PITFALL_HOST_DEVICE functor run by Backend::for_each,
// so the CPU runs exercise the very functors a GPU run launches. Host-only helpers (the data
// generator, the initial weights) are plain C++ used by both the code under test and the
// independent reference in scenarios/float64_inputs/scenario.cu: they make the *inputs*, not the
// results.
//
//   auto data = pitfall::dense::make_dataset(rows, features, seed);
//   auto h_init = pitfall::dense::initial_parameters(shape, seed);
//   PITFALL_ASSIGN_OR_RETURN(auto model,
//       (pitfall::dense::dense_model<Backend, float>::create(shape, batch, lr, h_init)));
//   PITFALL_ASSIGN_OR_RETURN(const double loss, model.train_epoch(d_x.data(), d_y.data(), rows));
//
// Layout (column-major, as BLAS wants it): the inputs are row-major rows x features, i.e. a
// column-major features x rows matrix, so a mini-batch is one contiguous block. All trainable
// parameters live in one buffer [W1 (hidden x features) | b1 (hidden) | W2 (1 x hidden) | b2],
// their gradients and Adam moments in buffers of the same layout, so one Adam functor updates
// everything.
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/models/adam.hpp"
#include "pitfall/random.hpp"
#include "pitfall/status.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pitfall::dense {

/// Layer sizes and the offsets of each parameter block in the flat parameter vector.
struct model_shape {
    int features = 0;
    int hidden = 0;

    std::size_t w1_offset() const { return 0; }
    std::size_t b1_offset() const { return static_cast<std::size_t>(hidden) * features; }
    std::size_t w2_offset() const { return b1_offset() + static_cast<std::size_t>(hidden); }
    std::size_t b2_offset() const { return w2_offset() + static_cast<std::size_t>(hidden); }
    std::size_t parameter_count() const { return b2_offset() + 1; }
};

using models::adam_config; ///< Keras' Adam defaults with the caller's learning rate

// ---------------------------------------------------------------------------------------------
// Host-side inputs, from the fixed-seed generator of pitfall/random.hpp: the synthetic data set
// and Glorot-uniform initial weights.
// ---------------------------------------------------------------------------------------------

/// What numpy would hand to model.fit(): float64 features and float64 0/1 labels.
struct dataset {
    std::size_t rows = 0;
    int features = 0;
    std::vector<double> x; ///< rows x features, row-major
    std::vector<double> y; ///< rows
};

/// Features uniform in [-1, 1); label = [x . w_true / sd + noise > 0] with a hidden direction
/// w_true and uniform noise of half-width 0.3, so the target is linearly separable up to a few
/// percent of flipped labels near the boundary and the loss falls steadily.
inline dataset make_dataset(std::size_t rows, int features, std::uint64_t seed) {
    dataset d;
    d.rows = rows;
    d.features = features;
    d.x.resize(rows * static_cast<std::size_t>(features));
    d.y.resize(rows);
    splitmix64 direction_rng(seed ^ 0x5DEECE66Dull);
    std::vector<double> w_true(static_cast<std::size_t>(features));
    for (auto& w : w_true)
        w = direction_rng.uniform(-1.0, 1.0);
    // Var(x_f * w_f) = 1/9 for two independent U(-1, 1): this makes the margin unit-variance.
    const double margin_scale = 1.0 / std::sqrt(features / 9.0);
    splitmix64 rng(seed);
    for (std::size_t r = 0; r < rows; ++r) {
        double* row = d.x.data() + r * static_cast<std::size_t>(features);
        double margin = 0.0;
        for (int f = 0; f < features; ++f) {
            row[f] = rng.uniform(-1.0, 1.0);
            margin += row[f] * w_true[static_cast<std::size_t>(f)];
        }
        d.y[r] = margin * margin_scale + rng.uniform(-0.3, 0.3) > 0.0 ? 1.0 : 0.0;
    }
    return d;
}

/// Keras' defaults: Glorot-uniform kernels (limit sqrt(6 / (fan_in + fan_out))), zero biases.
inline std::vector<double> initial_parameters(const model_shape& shape, std::uint64_t seed) {
    std::vector<double> p(shape.parameter_count(), 0.0);
    splitmix64 rng(seed ^ 0xC0FFEEull);
    const double limit1 = std::sqrt(6.0 / (shape.features + shape.hidden));
    for (std::size_t i = 0; i < shape.b1_offset(); ++i)
        p[shape.w1_offset() + i] = rng.uniform(-limit1, limit1);
    const double limit2 = std::sqrt(6.0 / (shape.hidden + 1));
    for (int h = 0; h < shape.hidden; ++h)
        p[shape.w2_offset() + static_cast<std::size_t>(h)] = rng.uniform(-limit2, limit2);
    return p;
}

// ---------------------------------------------------------------------------------------------
// Elementwise steps: one functor per step, the same code in a host loop and in a kernel.
// Math goes through these overloads so float stays float on the device (expf, not exp).
// ---------------------------------------------------------------------------------------------
namespace detail {
PITFALL_HOST_DEVICE inline float exp_of(float x) {
    return expf(x);
}
PITFALL_HOST_DEVICE inline double exp_of(double x) {
    return exp(x);
}
PITFALL_HOST_DEVICE inline float log1p_of(float x) {
    return log1pf(x);
}
PITFALL_HOST_DEVICE inline double log1p_of(double x) {
    return log1p(x);
}
PITFALL_HOST_DEVICE inline float sqrt_of(float x) {
    return sqrtf(x);
}
PITFALL_HOST_DEVICE inline double sqrt_of(double x) {
    return sqrt(x);
}

/// sigmoid without overflow: exp() only ever sees a non-positive argument.
template <class T> PITFALL_HOST_DEVICE T sigmoid(T z) {
    if (z >= T(0))
        return T(1) / (T(1) + exp_of(-z));
    const T e = exp_of(z);
    return e / (T(1) + e);
}
} // namespace detail

/// Hidden layer epilogue: a = relu(z + b1[h]) over a hidden x batch block (in place).
template <class T> struct bias_relu {
    T* z;
    const T* bias;
    int hidden;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const T v = z[i] + bias[i % static_cast<std::size_t>(hidden)];
        z[i] = v > T(0) ? v : T(0);
    }
};

/// Output layer + loss, per sample: p = sigmoid(z + b2); dL/dz = (p - y) / batch; and the
/// binary cross-entropy in its logits form max(z, 0) - z y + log1p(exp(-|z|)), which is what
/// from_logits=True computes and never takes log(0).
template <class T> struct sigmoid_bce_gradient {
    const T* z2;
    const T* b2;
    const T* y;
    T* dz2;
    T* loss_terms;
    T inv_batch;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const T z = z2[i] + *b2;
        dz2[i] = (detail::sigmoid(z) - y[i]) * inv_batch;
        const T abs_z = z >= T(0) ? z : -z;
        loss_terms[i] = (z > T(0) ? z : T(0)) - z * y[i] + detail::log1p_of(detail::exp_of(-abs_z));
    }
};

/// Inference only: p = sigmoid(z + b2) into the caller's output.
template <class T> struct sigmoid_output {
    const T* z2;
    const T* b2;
    T* out;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        out[i] = detail::sigmoid(z2[i] + *b2);
    }
};

/// One thread: db2 = sum of dL/dz over the batch, and the batch's mean loss added to the epoch
/// total. A serial loop on purpose: deterministic, and a batch is small next to the GEMMs.
template <class T> struct output_bias_gradient_and_loss {
    const T* dz2;
    const T* loss_terms;
    T* grad_b2;
    T* loss_total;
    int batch;
    T inv_batch;
    PITFALL_HOST_DEVICE void operator()(std::size_t) const {
        T g = T(0);
        T l = T(0);
        for (int b = 0; b < batch; ++b) {
            g += dz2[b];
            l += loss_terms[b];
        }
        *grad_b2 = g;
        *loss_total += l * inv_batch;
    }
};

/// Back through the output layer and the relu: dz1[h, b] = w2[h] dz2[b] where a1 > 0. The
/// output layer has one unit, so W2^T dz2 is an outer product: one functor, not a k=1 GEMM.
template <class T> struct hidden_gradient {
    const T* a1;
    const T* w2;
    const T* dz2;
    T* dz1;
    int hidden;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const std::size_t h = i % static_cast<std::size_t>(hidden);
        const std::size_t b = i / static_cast<std::size_t>(hidden);
        dz1[i] = a1[i] > T(0) ? w2[h] * dz2[b] : T(0);
    }
};

/// One thread per hidden unit: db1[h] = sum over the batch of dz1[h, b].
template <class T> struct hidden_bias_gradient {
    const T* dz1;
    T* grad_b1;
    int hidden;
    int batch;
    PITFALL_HOST_DEVICE void operator()(std::size_t h) const {
        T g = T(0);
        for (int b = 0; b < batch; ++b)
            g += dz1[h + static_cast<std::size_t>(b) * static_cast<std::size_t>(hidden)];
        grad_b1[h] = g;
    }
};

/// Adam as Keras writes it: m += (g - m)(1 - beta1); v += (g^2 - v)(1 - beta2);
/// w -= alpha_t m / (sqrt(v) + eps), alpha_t = lr sqrt(1 - beta2^t) / (1 - beta1^t).
template <class T> struct adam_update {
    T* w;
    const T* g;
    T* m;
    T* v;
    T alpha_t;
    T one_minus_beta1;
    T one_minus_beta2;
    T epsilon;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const T gi = g[i];
        m[i] += (gi - m[i]) * one_minus_beta1;
        v[i] += (gi * gi - v[i]) * one_minus_beta2;
        w[i] -= alpha_t * m[i] / (detail::sqrt_of(v[i]) + epsilon);
    }
};

/// Sets one value (the epoch's loss accumulator) where it lives.
template <class T> struct assign_value {
    T* target;
    T value;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { target[i] = value; }
};

// ---------------------------------------------------------------------------------------------
// The model: parameters, gradients, Adam moments and per-batch activations on the backend.
// ---------------------------------------------------------------------------------------------

/// Dense(hidden, relu) -> Dense(1, sigmoid) with BCE + Adam, element type T, on Backend.
template <class Backend, class T> class dense_model {
public:
    template <class U> using device_buffer = buffer<U, Backend>;

    /// Allocates everything for mini-batches of up to `batch` rows and uploads `h_initial`
    /// (the float64 initial parameters, rounded to T here: the model's own dtype boundary).
    static status_or<dense_model> create(const model_shape& shape, int batch, adam_config adam,
                                         const std::vector<double>& h_initial) {
        dense_model model;
        model.m_shape = shape;
        model.m_batch = batch;
        model.m_adam = adam;
        const std::size_t n_params = shape.parameter_count();
        const std::size_t n_hidden = static_cast<std::size_t>(shape.hidden) * batch;
        const std::size_t n_batch = static_cast<std::size_t>(batch);
        PITFALL_ASSIGN_OR_RETURN(model.m_params, Backend::template allocate<T>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_grads, Backend::template allocate<T>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_adam_m, Backend::template allocate<T>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_adam_v, Backend::template allocate<T>(n_params));
        PITFALL_ASSIGN_OR_RETURN(model.m_a1, Backend::template allocate<T>(n_hidden));
        PITFALL_ASSIGN_OR_RETURN(model.m_dz1, Backend::template allocate<T>(n_hidden));
        PITFALL_ASSIGN_OR_RETURN(model.m_z2, Backend::template allocate<T>(n_batch));
        PITFALL_ASSIGN_OR_RETURN(model.m_dz2, Backend::template allocate<T>(n_batch));
        PITFALL_ASSIGN_OR_RETURN(model.m_loss_terms, Backend::template allocate<T>(n_batch));
        PITFALL_ASSIGN_OR_RETURN(model.m_loss_total, Backend::template allocate<T>(1));

        std::vector<T> h_params(n_params);
        for (std::size_t i = 0; i < n_params; ++i)
            h_params[i] = static_cast<T>(h_initial[i]);
        PITFALL_TRY(Backend::copy_to_device(model.m_params, h_params.data(), n_params));
        const std::vector<T> h_zeros(n_params, T(0));
        PITFALL_TRY(Backend::copy_to_device(model.m_adam_m, h_zeros.data(), n_params));
        PITFALL_TRY(Backend::copy_to_device(model.m_adam_v, h_zeros.data(), n_params));
        return status_or<dense_model>(std::move(model));
    }

    /// One epoch over `rows` rows in order (no shuffle, so a reference can replay it), one Adam
    /// step per mini-batch; returns the mean of the per-batch mean losses (what Keras prints).
    status_or<double> train_epoch(const T* d_x, const T* d_y, std::size_t rows) {
        PITFALL_TRY(Backend::for_each(1, assign_value<T>{m_loss_total.data(), T(0)}));
        std::size_t batches = 0;
        for (std::size_t start = 0; start < rows; start += static_cast<std::size_t>(m_batch)) {
            const int n = rows - start < static_cast<std::size_t>(m_batch)
                              ? static_cast<int>(rows - start)
                              : m_batch;
            PITFALL_TRY(train_step(d_x + start * static_cast<std::size_t>(m_shape.features),
                                   d_y + start, n));
            ++batches;
        }
        T h_total = T(0);
        PITFALL_TRY(Backend::copy_to_host(&h_total, m_loss_total, 1)); // also waits for the GPU
        return static_cast<double>(h_total) / static_cast<double>(batches);
    }

    /// Forward + backward + Adam on one mini-batch of n <= batch rows.
    status train_step(const T* d_xb, const T* d_yb, int n) {
        PITFALL_TRY(forward(d_xb, n));
        const T inv_n = T(1) / static_cast<T>(n);
        T* grads = m_grads.data();
        const T* params = m_params.data();
        PITFALL_TRY(Backend::for_each(
            static_cast<std::size_t>(n),
            sigmoid_bce_gradient<T>{m_z2.data(), params + m_shape.b2_offset(), d_yb, m_dz2.data(),
                                    m_loss_terms.data(), inv_n}));
        PITFALL_TRY(
            Backend::for_each(1, output_bias_gradient_and_loss<T>{m_dz2.data(), m_loss_terms.data(),
                                                                  grads + m_shape.b2_offset(),
                                                                  m_loss_total.data(), n, inv_n}));
        // dW2 (1 x hidden) = dz2 (1 x n) * A1^T (n x hidden)
        PITFALL_TRY(Backend::gemm(transpose::no, transpose::yes, 1, m_shape.hidden, n, T(1),
                                  m_dz2.data(), 1, m_a1.data(), m_shape.hidden, T(0),
                                  grads + m_shape.w2_offset(), 1));
        const std::size_t n_hidden = static_cast<std::size_t>(m_shape.hidden) * n;
        PITFALL_TRY(Backend::for_each(
            n_hidden, hidden_gradient<T>{m_a1.data(), params + m_shape.w2_offset(), m_dz2.data(),
                                         m_dz1.data(), m_shape.hidden}));
        PITFALL_TRY(Backend::for_each(
            static_cast<std::size_t>(m_shape.hidden),
            hidden_bias_gradient<T>{m_dz1.data(), grads + m_shape.b1_offset(), m_shape.hidden, n}));
        // dW1 (hidden x features) = dZ1 (hidden x n) * X^T (n x features): the big GEMM, with
        // the forward one the whole cost of a step.
        PITFALL_TRY(Backend::gemm(transpose::no, transpose::yes, m_shape.hidden, m_shape.features,
                                  n, T(1), m_dz1.data(), m_shape.hidden, d_xb, m_shape.features,
                                  T(0), grads + m_shape.w1_offset(), m_shape.hidden));
        return apply_adam();
    }

    /// Inference on `rows` rows, in mini-batches, into d_out (rows values).
    status predict(const T* d_x, std::size_t rows, T* d_out) {
        for (std::size_t start = 0; start < rows; start += static_cast<std::size_t>(m_batch)) {
            const int n = rows - start < static_cast<std::size_t>(m_batch)
                              ? static_cast<int>(rows - start)
                              : m_batch;
            PITFALL_TRY(forward(d_x + start * static_cast<std::size_t>(m_shape.features), n));
            const T* b2 = m_params.data() + m_shape.b2_offset();
            PITFALL_TRY(Backend::for_each(static_cast<std::size_t>(n),
                                          sigmoid_output<T>{m_z2.data(), b2, d_out + start}));
        }
        return Backend::synchronize();
    }

    /// The current parameters, in the flat layout of model_shape.
    status parameters_to_host(std::vector<T>& h_out) const {
        h_out.resize(m_shape.parameter_count());
        return Backend::copy_to_host(h_out.data(), m_params, h_out.size());
    }

    /// Bytes of the trainable parameters alone (what a saved model weighs).
    std::size_t parameter_bytes() const { return m_params.bytes(); }
    /// Bytes the model holds on the backend: parameters, gradients, Adam moments, activations.
    std::size_t state_bytes() const {
        return m_params.bytes() + m_grads.bytes() + m_adam_m.bytes() + m_adam_v.bytes() +
               m_a1.bytes() + m_dz1.bytes() + m_z2.bytes() + m_dz2.bytes() + m_loss_terms.bytes() +
               m_loss_total.bytes();
    }
    long long steps() const { return m_step; }

private:
    dense_model() = default;

    /// A1 = relu(W1 X + b1) (hidden x n), z2 = W2 A1 (1 x n, b2 is added by the consumer).
    status forward(const T* d_xb, int n) {
        const T* params = m_params.data();
        PITFALL_TRY(Backend::gemm(transpose::no, transpose::no, m_shape.hidden, n, m_shape.features,
                                  T(1), params + m_shape.w1_offset(), m_shape.hidden, d_xb,
                                  m_shape.features, T(0), m_a1.data(), m_shape.hidden));
        PITFALL_TRY(Backend::for_each(
            static_cast<std::size_t>(m_shape.hidden) * n,
            bias_relu<T>{m_a1.data(), params + m_shape.b1_offset(), m_shape.hidden}));
        return Backend::gemm(transpose::no, transpose::no, 1, n, m_shape.hidden, T(1),
                             params + m_shape.w2_offset(), 1, m_a1.data(), m_shape.hidden, T(0),
                             m_z2.data(), 1);
    }

    /// The bias corrections are computed once per step on the host in double, then rounded to T.
    status apply_adam() {
        ++m_step;
        const double t = static_cast<double>(m_step);
        const double alpha_t = m_adam.learning_rate * std::sqrt(1.0 - std::pow(m_adam.beta2, t)) /
                               (1.0 - std::pow(m_adam.beta1, t));
        return Backend::for_each(
            m_shape.parameter_count(),
            adam_update<T>{m_params.data(), m_grads.data(), m_adam_m.data(), m_adam_v.data(),
                           static_cast<T>(alpha_t), static_cast<T>(1.0 - m_adam.beta1),
                           static_cast<T>(1.0 - m_adam.beta2), static_cast<T>(m_adam.epsilon)});
    }

    model_shape m_shape;
    int m_batch = 0;
    adam_config m_adam;
    long long m_step = 0;
    device_buffer<T> m_params;
    device_buffer<T> m_grads;
    device_buffer<T> m_adam_m;
    device_buffer<T> m_adam_v;
    device_buffer<T> m_a1;         ///< hidden x batch: W1 X, then relu(. + b1) in place
    device_buffer<T> m_dz1;        ///< hidden x batch
    device_buffer<T> m_z2;         ///< batch: W2 A1 (before b2)
    device_buffer<T> m_dz2;        ///< batch
    device_buffer<T> m_loss_terms; ///< batch: per-sample BCE
    device_buffer<T> m_loss_total; ///< 1: sum over the epoch of per-batch mean losses
};

} // namespace pitfall::dense
