// grid_dimension_limit: a launch whose grid or block is larger than the hardware allows.
//
// What
//   A per-sample affine step, y[b][j] = x[b][j] * w[j] + bias[b], over a batch of `batch`
//   samples of `features` values, launched four ways:
//     reproduce_grid_y_batch     one block row per sample: grid (ceil(features / block), batch),
//                                so gridDim.y = batch (70000 by default).
//     reproduce_block_over_1024  one block per sample and one thread per feature: blockDim.x =
//                                features (2048 in its parameter set).
//     remedy_batch_in_x          one flat index over batch x features, all of it in gridDim.x.
//     remedy_grid_stride         a grid of at most 1024 blocks whose threads stride over every
//                                element (any batch, any grid limit).
//
// Why it fails
//   The CUDA C++ Programming Guide, "Compute Capabilities", table "Technical Specifications
//   per Compute Capability" (every capability from 3.0 through 12.x): maximum x-dimension of a
//   grid 2^31-1, maximum y- or z-dimension of a grid 65535, maximum x- or y-dimension of a
//   block 1024, maximum number of threads per block 1024. A launch past any of them is refused
//   before anything runs. Which error says so depends on the runtime: the field reports (CUDA
//   10-12) show cudaErrorInvalidConfiguration (9, "invalid configuration argument"), while the
//   CUDA 13.0 runtime on an H200 (driver 580.159.04) answered cudaErrorInvalidValue (1) for
//   both launches below (observed, blessed in expected/hopper-cuda13). Either way it is not
//   sticky (docs/cuda-rules.md#sticky-errors lists the sticky ones; neither is among them): the
//   context is intact, which the reproduce cases prove by running the next launch (the grid-
//   stride remedy) and checking its result. Code tested with small batches meets it only in
//   production, at 65536 samples. The CPU has no such limit: a loop over blocks and threads
//   runs for any count.
//
// Expected per backend
//   cpu   every variant ok and checked against the float64 reference. The two reproduce cases
//         run the launch's own block/thread loops on the host: the control that shows the work
//         itself is fine and only the GPU's launch limits refuse it.
//   cuda  (GPU; observed with CUDA 13.0 on an H200; the CUDA 11/12 profiles keep the
//         documented cudaErrorInvalidConfiguration of the field reports until a run there)
//         reproduce_grid_y_batch     CUDA 13: cudaErrorInvalidValue (CUDA 11/12, documented:
//                                    cudaErrorInvalidConfiguration), stage launch, not sticky;
//                                    event next_launch_after_error ok and the check
//                                    next_launch_matches_reference passes; the measurements
//                                    max_grid_dim_y = 65535 and requested_grid_dim_y = batch.
//         reproduce_block_over_1024  the same error as above, stage launch, not sticky;
//                                    max_threads_per_block = 1024, requested 2048.
//         remedy_batch_in_x          ok, matches the reference.
//         remedy_grid_stride         ok, matches the reference.
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
//
// Remedy
//   Put the large dimension in x (2^31-1 blocks) and derive (sample, feature) from one flat
//   index, or cap the grid and let each thread stride over the elements (the grid-stride loop
//   the SDK's for_each uses). Size blocks from a constant (or cudaOccupancyMaxPotentialBlockSize),
//   never from a data dimension.
//
// Evidence
//   ml-explore/mlx#3858 (batched GEMV with the batch in gridDim.y: 65535 works, 65536 fails),
//   PaddlePaddle/Paddle#31144 (layer norm grad: batch in y, "invalid configuration argument"
//   at 128 * 512; fixed by moving it to x), ggml-org/llama.cpp#16744 (a block sized from the
//   batch dimensions past 1024 threads: cudaErrorInvalidConfiguration).
#include "pitfall/random.hpp"
#include "pitfall/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace grid_dimension_limit {

// The Programming Guide's limits (see the header); the CUDA cases also read the device's own.
constexpr long long documented_max_grid_y = 65535;
constexpr long long documented_max_block_threads = 1024;
// The grid-stride remedy's cap: enough blocks to fill any current GPU, far under every limit.
constexpr unsigned grid_stride_max_blocks = 1024;

/// One element of the step; shared by the host loops and the kernels.
struct affine_step {
    const float* x;
    const float* w;
    const float* bias;
    float* y;
    std::size_t features;
    PITFALL_HOST_DEVICE void operator()(std::size_t sample, std::size_t feature) const {
        const std::size_t i = sample * features + feature;
        y[i] = x[i] * w[feature] + bias[sample];
    }
};

/// The four ways of covering the batch.
enum class geometry { grid_y_per_sample, block_per_sample, flat_x, grid_stride };

struct config {
    std::size_t batch = 0;
    std::size_t features = 0;
    unsigned block_threads = 0;
    std::uint64_t seed = 0;
    std::size_t elements() const { return batch * features; }
};

pitfall::status_or<config> read_config(const pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long batch, ctx.param_int("batch"));
    PITFALL_ASSIGN_OR_RETURN(const long long features, ctx.param_int("features"));
    PITFALL_ASSIGN_OR_RETURN(const long long block, ctx.param_int("block_threads"));
    PITFALL_ASSIGN_OR_RETURN(const long long seed, ctx.param_int("seed"));
    if (batch * features > (1LL << 31) - 1)
        return pitfall::bad_parameter("batch", "batch x features must stay below 2^31 elements");
    config c;
    c.batch = static_cast<std::size_t>(batch);
    c.features = static_cast<std::size_t>(features);
    c.block_threads = static_cast<unsigned>(block);
    c.seed = static_cast<std::uint64_t>(seed);
    return c;
}

#if PITFALL_HAS_CUDA
// Each kernel covers the batch the way its variant's launch does; all compute affine_step.
__global__ void grid_y_per_sample_kernel(affine_step step) {
    pitfall::count_this_kernel();
    const std::size_t feature = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
    if (feature < step.features)
        step(blockIdx.y, feature); // one block row per sample: gridDim.y = batch
}

__global__ void block_per_sample_kernel(affine_step step) {
    pitfall::count_this_kernel();
    step(blockIdx.x, threadIdx.x); // one thread per feature: blockDim.x = features
}

__global__ void flat_x_kernel(affine_step step, std::size_t elements) {
    pitfall::count_this_kernel();
    const std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
    if (i < elements)
        step(i / step.features, i % step.features);
}

__global__ void grid_stride_kernel(affine_step step, std::size_t elements) {
    pitfall::count_this_kernel();
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < elements;
         i += stride)
        step(i / step.features, i % step.features);
}

/// The device's own limits, recorded next to what the case asks for.
pitfall::status record_device_limits(pitfall::context& ctx) {
    int device = 0, grid_y = 0, grid_x = 0, block_threads = 0;
    PITFALL_CUDA_TRY(pitfall::stage::init, cudaGetDevice(&device));
    PITFALL_CUDA_TRY(pitfall::stage::init,
                     cudaDeviceGetAttribute(&grid_x, cudaDevAttrMaxGridDimX, device));
    PITFALL_CUDA_TRY(pitfall::stage::init,
                     cudaDeviceGetAttribute(&grid_y, cudaDevAttrMaxGridDimY, device));
    PITFALL_CUDA_TRY(pitfall::stage::init,
                     cudaDeviceGetAttribute(&block_threads, cudaDevAttrMaxThreadsPerBlock, device));
    ctx.record("max_grid_dim_x", grid_x);
    ctx.record("max_grid_dim_y", grid_y);
    ctx.record("max_threads_per_block", block_threads);
    return pitfall::status::ok();
}

/// The launch of `shape` as its variant writes it; the launch's own error, if any.
pitfall::status launch_on_gpu(geometry shape, const config& cfg, const affine_step& step) {
    const auto blocks_for = [&](std::size_t n) {
        return static_cast<unsigned>((n + cfg.block_threads - 1) / cfg.block_threads);
    };
    switch (shape) {
    case geometry::grid_y_per_sample:
        grid_y_per_sample_kernel<<<dim3(blocks_for(cfg.features), static_cast<unsigned>(cfg.batch)),
                                   cfg.block_threads>>>(step);
        break;
    case geometry::block_per_sample:
        block_per_sample_kernel<<<static_cast<unsigned>(cfg.batch),
                                  static_cast<unsigned>(cfg.features)>>>(step);
        break;
    case geometry::flat_x:
        flat_x_kernel<<<blocks_for(cfg.elements()), cfg.block_threads>>>(step, cfg.elements());
        break;
    case geometry::grid_stride:
        grid_stride_kernel<<<std::min(blocks_for(cfg.elements()), grid_stride_max_blocks),
                             cfg.block_threads>>>(step, cfg.elements());
        break;
    }
    PITFALL_CUDA_TRY(pitfall::stage::launch, cudaGetLastError());
    PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaDeviceSynchronize());
    return pitfall::status::ok();
}
#endif

/// The same coverage as host loops over (block, thread): the CPU has no grid or block limit.
void run_on_host(geometry shape, const config& cfg, const affine_step& step) {
    const std::size_t block = cfg.block_threads;
    switch (shape) {
    case geometry::grid_y_per_sample:
        for (std::size_t by = 0; by < cfg.batch; ++by)
            for (std::size_t bx = 0; bx * block < cfg.features; ++bx)
                for (std::size_t t = 0; t < block && bx * block + t < cfg.features; ++t)
                    step(by, bx * block + t);
        break;
    case geometry::block_per_sample:
        for (std::size_t b = 0; b < cfg.batch; ++b)
            for (std::size_t t = 0; t < cfg.features; ++t)
                step(b, t);
        break;
    case geometry::flat_x:
    case geometry::grid_stride:
        for (std::size_t i = 0; i < cfg.elements(); ++i)
            step(i / cfg.features, i % cfg.features);
        break;
    }
}

template <class Backend>
pitfall::status run_step(geometry shape, const config& cfg, const affine_step& step) {
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda)
        return launch_on_gpu(shape, cfg, step);
#endif
    run_on_host(shape, cfg, step);
    return pitfall::status::ok();
}

struct inputs {
    std::vector<float> x, w, bias;
};

inputs make_inputs(const config& cfg) {
    pitfall::splitmix64 gen(cfg.seed);
    inputs in;
    in.x.resize(cfg.elements());
    for (float& v : in.x)
        v = static_cast<float>(gen.uniform(-1.0, 1.0));
    in.w.resize(cfg.features);
    for (float& v : in.w)
        v = static_cast<float>(gen.uniform(-2.0, 2.0));
    in.bias.resize(cfg.batch);
    for (float& v : in.bias)
        v = static_cast<float>(gen.uniform(-0.5, 0.5));
    return in;
}

/// Checks y against x * w + bias in float64. A float32 product and sum (or one fused
/// multiply-add) are each rounded once: within 2^-23 of |x w| + |bias|; 2^-22 leaves margin
/// and still fails any element that was skipped (y stays NaN) or written from the wrong sample.
void check_against_reference(pitfall::context& ctx, const std::string& name, const config& cfg,
                             const inputs& in, const std::vector<float>& y) {
    std::size_t wrong = 0;
    for (std::size_t b = 0; b < cfg.batch; ++b) {
        for (std::size_t j = 0; j < cfg.features; ++j) {
            const std::size_t i = b * cfg.features + j;
            const double product = static_cast<double>(in.x[i]) * in.w[j];
            const double want = product + in.bias[b];
            const double bound = 0x1p-22 * (std::fabs(product) + std::fabs(in.bias[b]));
            if (!(std::fabs(static_cast<double>(y[i]) - want) <= bound))
                ++wrong;
        }
    }
    ctx.record(name + "_wrong_elements", static_cast<double>(wrong));
    ctx.check(name + "_matches_reference", wrong == 0,
              std::to_string(wrong) + " of " + std::to_string(cfg.elements()) +
                  " elements differ from the float64 x * w + bias by more than 2^-22 of its terms");
}

/// Uploads the inputs, runs `shape`, reads y back and checks it. The launch's error is the
/// returned status (y is then not checked: nothing ran).
template <class Backend>
pitfall::status run_and_check(pitfall::context& ctx, const std::string& name, geometry shape,
                              const config& cfg, const inputs& in) {
    PITFALL_ASSIGN_OR_RETURN(auto d_x, Backend::template allocate<float>(in.x.size()));
    PITFALL_ASSIGN_OR_RETURN(auto d_w, Backend::template allocate<float>(in.w.size()));
    PITFALL_ASSIGN_OR_RETURN(auto d_bias, Backend::template allocate<float>(in.bias.size()));
    PITFALL_ASSIGN_OR_RETURN(auto d_y, Backend::template allocate<float>(in.x.size()));
    PITFALL_TRY(Backend::copy_to_device(d_x, in.x.data(), in.x.size()));
    PITFALL_TRY(Backend::copy_to_device(d_w, in.w.data(), in.w.size()));
    PITFALL_TRY(Backend::copy_to_device(d_bias, in.bias.data(), in.bias.size()));
    // y starts as NaN, so an element no thread wrote fails the check.
    std::vector<float> y(in.x.size(), std::nanf(""));
    PITFALL_TRY(Backend::copy_to_device(d_y, y.data(), y.size()));
    const affine_step step{d_x.data(), d_w.data(), d_bias.data(), d_y.data(), cfg.features};
    PITFALL_TRY(run_step<Backend>(shape, cfg, step));
    PITFALL_TRY(Backend::copy_to_host(y.data(), d_y, y.size()));
    check_against_reference(ctx, name, cfg, in, y);
    return pitfall::status::ok();
}

/// Every variant: the inputs, what the launch asks for, then the launch.
template <class Backend> pitfall::status run_variant(pitfall::context& ctx, geometry shape) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const inputs in = make_inputs(cfg);
    const bool per_sample_grid = shape == geometry::grid_y_per_sample;
    ctx.record("requested_grid_dim_y", per_sample_grid ? static_cast<double>(cfg.batch) : 1.0);
    ctx.record("requested_block_threads", shape == geometry::block_per_sample
                                              ? static_cast<double>(cfg.features)
                                              : static_cast<double>(cfg.block_threads));
    ctx.record("documented_max_grid_dim_y", documented_max_grid_y);
    ctx.record("documented_max_threads_per_block", documented_max_block_threads);
#if PITFALL_HAS_CUDA
    if constexpr (Backend::kind == pitfall::backend_kind::cuda)
        PITFALL_TRY(record_device_limits(ctx));
#endif
    ctx.ran_on(Backend::describe_device());
    const pitfall::status launched = run_and_check<Backend>(ctx, "result", shape, cfg, in);
    if (launched.is_ok() || launched.sticky())
        return launched;
    // Refused: is the context still usable? The next launch, one that respects the limits, must
    // run and be right (it is, for a non-sticky error).
    const pitfall::status next =
        run_and_check<Backend>(ctx, "next_launch", geometry::grid_stride, cfg, in);
    ctx.record_event("next_launch_after_error", next);
    return launched;
}

template <class Backend> pitfall::status reproduce_grid_y_batch(pitfall::context& ctx) {
    return run_variant<Backend>(ctx, geometry::grid_y_per_sample);
}
template <class Backend> pitfall::status reproduce_block_over_1024(pitfall::context& ctx) {
    return run_variant<Backend>(ctx, geometry::block_per_sample);
}
template <class Backend> pitfall::status remedy_batch_in_x(pitfall::context& ctx) {
    return run_variant<Backend>(ctx, geometry::flat_x);
}
template <class Backend> pitfall::status remedy_grid_stride(pitfall::context& ctx) {
    return run_variant<Backend>(ctx, geometry::grid_stride);
}

} // namespace grid_dimension_limit

using namespace grid_dimension_limit; // the variants by their own names
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_grid_y_batch),
                 PITFALL_VARIANT(reproduce_block_over_1024), PITFALL_VARIANT(remedy_batch_in_x),
                 PITFALL_VARIANT(remedy_grid_stride))
