// graph_capture_illegal: a CUDA Graph stream capture broken by a call that is illegal during it.
//
// What
//   A step y = 2 x + 1 (the SDK's for_each kernel) is recorded into a CUDA Graph by stream
//   capture (cudaStreamBeginCapture, mode cudaStreamCaptureModeGlobal, the default people use)
//   so that it can be replayed with one launch. Five variants:
//     reproduce_sync_memcpy_in_capture         the result read back with a synchronous
//                                              cudaMemcpy inside the captured region.
//     reproduce_malloc_in_capture              a scratch buffer cudaMalloc'ed inside it (what a
//                                              library does when it allocates lazily).
//     reproduce_device_synchronize_in_capture  cudaDeviceSynchronize inside it.
//     remedy_async_on_capture_stream           everything allocated before capture (device and
//                                              pinned host memory), cudaMemcpyAsync on the
//                                              capturing stream; instantiate, replay, check.
//     remedy_malloc_async_in_capture           the scratch buffer from cudaMallocAsync /
//                                              cudaFreeAsync on the capturing stream.
//
// Why it fails
//   While a stream captures, its work is recorded, not run; nothing may wait for it or run
//   beside it unrecorded. The CUDA C++ Programming Guide, "CUDA Graphs" > "Stream Capture" >
//   "Prohibited and Unhandled Operations": it is invalid to synchronise or query a capturing
//   stream or the device, and "the legacy stream" may not be used while a blocking stream
//   captures (it would implicitly synchronise with it); an invalid operation fails and
//   invalidates the capture, whose cudaStreamEndCapture then returns
//   cudaErrorStreamCaptureInvalidated (901) and no graph. "Cross-thread" safety
//   (cudaStreamCaptureModeGlobal, Runtime API cudaStreamBeginCapture /
//   cudaThreadExchangeStreamCaptureMode): "potentially unsafe API calls", cudaMalloc among
//   them, are refused while any thread captures in global mode. The runtime's error numbers
//   (driver_types.h): 900 cudaErrorStreamCaptureUnsupported ("operation not permitted when
//   stream is capturing"), 901 cudaErrorStreamCaptureInvalidated, 906
//   cudaErrorStreamCaptureImplicit (the legacy stream's implicit dependency on a capturing
//   one). None is sticky: the context is fine once the capture is ended.
//
// Expected per backend
//   cpu   UNSUPPORTED in every variant (PITFALL_CUDA_VARIANT): there is no CPU analog of
//         recording GPU work into a graph; a host loop runs as it is called.
//   cuda  (from the rules above)
//         reproduce_sync_memcpy_in_capture         cudaErrorStreamCaptureImplicit at the copy;
//                                                  event end_capture:
//                                                  cudaErrorStreamCaptureInvalidated. (Which
//                                                  rule the runtime checks first, the legacy
//                                                  stream's or global mode's, is undocumented:
//                                                  900 instead of 906 is possible; a GPU run
//                                                  blessed settles it.)
//         reproduce_malloc_in_capture              cudaErrorStreamCaptureUnsupported at the
//                                                  allocation; event end_capture:
//                                                  cudaErrorStreamCaptureInvalidated.
//         reproduce_device_synchronize_in_capture  cudaErrorStreamCaptureUnsupported at the
//                                                  synchronize; end_capture: ...Invalidated.
//         Each reproduce records failed_call (which call failed) and, after the capture is
//         ended, runs the step without a graph and checks it (event step_after_capture ok:
//         not sticky).
//         remedy_async_on_capture_stream           ok; graph_nodes >= 3, every replay checked.
//         remedy_malloc_async_in_capture           ok; the same, with memory nodes.
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
//
// Remedy
//   Allocate before capture (or use cudaMallocAsync/cudaFreeAsync on the capturing stream),
//   move data with cudaMemcpyAsync on that stream (pinned host buffers), and synchronise only
//   after cudaGraphLaunch. Where a library call on another thread is what breaks the capture,
//   capture in cudaStreamCaptureModeThreadLocal (or exchange the mode to Relaxed around the
//   call with cudaThreadExchangeStreamCaptureMode).
//
// Evidence
//   microsoft/onnxruntime#15002 (cudaStreamSynchronize during capture: error 900),
//   google-deepmind/mujoco_warp#425 (error 900 during capture, then end capture:
//   CUDA_ERROR_STREAM_CAPTURE_INVALIDATED), NVIDIA/TensorRT#3011 (an engine that allocates or
//   copies during capture: "operation not permitted when stream is capturing").
// Baselines per backend and profile (generated by ci/catalog.py from expected/; do not edit):
//   cpu   host: observed on AMD EPYC: 3 UNSUPPORTED, 2 remedies
//   cuda  no-gpu: observed without a GPU: 3 UNSUPPORTED, 2 remedies
//   cuda  hopper-cuda13: observed on NVIDIA H200: 3 reproduced on the GPU, 2 remedies
//   cuda  hopper-cuda11-12: documented, never observed: 3 predicted, 2 remedies
//   cuda  ada-ampere-cuda12: documented, never observed: 3 predicted, 2 remedies
//   evidence threads: 3 gated (docs/evidence.md)
// (end of the generated baselines)
#include "pitfall/cuda/graph.hpp"
#include "pitfall/cuda/pinned_buffer.hpp"
#include "pitfall/cuda/status.hpp"
#include "pitfall/cuda/stream.hpp"
#include "pitfall/scenario.hpp"

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace graph_capture_illegal {

constexpr const char* why_cuda_only =
    "stream capture records GPU work into a CUDA Graph instead of running it; a host loop runs "
    "as it is called, so there is nothing to capture and no call that could break a capture";

/// The captured step: y = 2 x + 1.
struct affine {
    const float* x;
    float* y;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { y[i] = 2.0f * x[i] + 1.0f; }
};

/// The input of replay `round`: exact small integers and halves, so 2 x + 1 is exact in float
/// and the check can be equality (a stale or skipped replay shows as a wrong value).
float input_value(std::size_t i, long long round) {
    return static_cast<float>(static_cast<long long>(i % 4099) - 2049 + round) * 0.5f;
}

/// Counts elements of y that are not 2 x + 1 for replay `round`'s input, computed in double.
std::size_t wrong_elements(const float* y, std::size_t n, long long round) {
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = input_value(i, round);
        if (static_cast<double>(y[i]) != 2.0 * x + 1.0)
            ++wrong;
    }
    return wrong;
}

#if PITFALL_HAS_CUDA
/// Ends the capture on `stream` whatever happened in it (a stream left capturing refuses
/// everything after), keeps the graph if there is one and returns end capture's own answer.
pitfall::status end_capture(cudaStream_t stream, cudaGraph_t& graph) {
    PITFALL_CUDA_TRY(pitfall::stage::launch, cudaStreamEndCapture(stream, &graph));
    return pitfall::status::ok();
}

/// Device and pinned host memory for one step, freed on every path.
struct step_buffers {
    float* d_x = nullptr;
    float* d_y = nullptr;
    /// Pinned: a captured copy from pageable memory would be refused too.
    pitfall::cuda::pinned_buffer<float> h_x, h_y;
    step_buffers() = default;
    step_buffers(const step_buffers&) = delete;
    step_buffers& operator=(const step_buffers&) = delete;
    ~step_buffers() {
        (void)cudaFree(d_x);
        (void)cudaFree(d_y);
    }
    pitfall::status allocate(std::size_t n) {
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMalloc(&d_x, n * sizeof(float)));
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMalloc(&d_y, n * sizeof(float)));
        PITFALL_ASSIGN_OR_RETURN(h_x, pitfall::cuda::pinned_buffer<float>::allocate(n));
        PITFALL_ASSIGN_OR_RETURN(h_y, pitfall::cuda::pinned_buffer<float>::allocate(n));
        return pitfall::status::ok();
    }
    void fill_input(std::size_t n, long long round) {
        for (std::size_t i = 0; i < n; ++i)
            h_x.data()[i] = input_value(i, round);
    }
};

/// The three illegal calls, each made where people make it: after the captured kernel.
enum class illegal_call { sync_memcpy, malloc, device_synchronize };

const char* call_name(illegal_call call) {
    switch (call) {
    case illegal_call::sync_memcpy: return "cudaMemcpy (synchronous, legacy default stream)";
    case illegal_call::malloc: return "cudaMalloc";
    case illegal_call::device_synchronize: return "cudaDeviceSynchronize";
    }
    return "?";
}

pitfall::status make_illegal_call(illegal_call call, step_buffers& b, std::size_t n,
                                  float*& scratch) {
    switch (call) {
    case illegal_call::sync_memcpy:
        PITFALL_CUDA_TRY(pitfall::stage::copy, cudaMemcpy(b.h_y.data(), b.d_y, n * sizeof(float),
                                                          cudaMemcpyDeviceToHost));
        break;
    case illegal_call::malloc:
        PITFALL_CUDA_TRY(pitfall::stage::alloc, cudaMalloc(&scratch, n * sizeof(float)));
        break;
    case illegal_call::device_synchronize:
        PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaDeviceSynchronize());
        break;
    }
    return pitfall::status::ok();
}

/// After the capture: the step without a graph, on the same stream, checked. A non-sticky
/// capture error leaves the context usable; this shows it.
pitfall::status step_without_graph(pitfall::context& ctx, cudaStream_t stream, step_buffers& b,
                                   std::size_t n) {
    b.fill_input(n, 0);
    PITFALL_CUDA_TRY(pitfall::stage::copy, cudaMemcpyAsync(b.d_x, b.h_x.data(), n * sizeof(float),
                                                           cudaMemcpyHostToDevice, stream));
    PITFALL_TRY(pitfall::cuda_backend::for_each(stream, n, affine{b.d_x, b.d_y}));
    PITFALL_CUDA_TRY(pitfall::stage::copy, cudaMemcpyAsync(b.h_y.data(), b.d_y, n * sizeof(float),
                                                           cudaMemcpyDeviceToHost, stream));
    PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaStreamSynchronize(stream));
    const std::size_t wrong = wrong_elements(b.h_y.data(), n, 0);
    ctx.check("step_after_capture_matches", wrong == 0,
              std::to_string(wrong) + " of " + std::to_string(n) + " elements differ from 2 x + 1");
    return pitfall::status::ok();
}

/// The broken capture: kernel captured, then the illegal call; the capture is ended whatever
/// happened, end capture's answer is an event, and the step then runs without a graph.
pitfall::status broken_capture(pitfall::context& ctx, illegal_call call) {
    PITFALL_ASSIGN_OR_RETURN(const long long n_param, ctx.param_int("n"));
    const auto n = static_cast<std::size_t>(n_param);
    step_buffers b;
    PITFALL_TRY(b.allocate(n));
    // A blocking stream: it synchronises with the legacy default stream, which is what makes a
    // legacy-stream call during its capture illegal.
    PITFALL_ASSIGN_OR_RETURN(const auto stream, pitfall::cuda::stream::create(cudaStreamDefault));
    ctx.ran_on(pitfall::cuda_backend::describe_device());
    ctx.record_info("capture_mode", "cudaStreamCaptureModeGlobal");
    ctx.record_info("failed_call", call_name(call));

    PITFALL_CUDA_TRY(pitfall::stage::launch,
                     cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
    const pitfall::status captured_kernel =
        pitfall::cuda_backend::for_each(stream.get(), n, affine{b.d_x, b.d_y});
    float* scratch = nullptr;
    const pitfall::status illegal =
        captured_kernel.is_ok() ? make_illegal_call(call, b, n, scratch) : captured_kernel;
    if (scratch != nullptr) // the allocation was allowed after all: use it as people do
        (void)pitfall::cuda_backend::for_each(stream.get(), n, affine{b.d_y, scratch});
    cudaGraph_t graph = nullptr;
    const pitfall::status ended = end_capture(stream.get(), graph);
    ctx.record_event("end_capture", ended);
    ctx.record("end_capture_returned_graph", graph != nullptr ? 1.0 : 0.0);
    if (graph != nullptr)
        (void)cudaGraphDestroy(graph);
    (void)cudaFree(scratch);
    ctx.record_event("step_after_capture", step_without_graph(ctx, stream.get(), b, n));
    if (!illegal.is_ok())
        return illegal;
    return ended; // the call was accepted: the capture's end says what became of it
}

/// The remedies: capture (both copies and the kernel on the capturing stream), instantiate,
/// then `replays` launches, each with new input written into the pinned buffer, each checked.
pitfall::status captured_and_replayed(pitfall::context& ctx, bool scratch_from_malloc_async) {
    PITFALL_ASSIGN_OR_RETURN(const long long n_param, ctx.param_int("n"));
    PITFALL_ASSIGN_OR_RETURN(const long long replays, ctx.param_int("replays"));
    const auto n = static_cast<std::size_t>(n_param);
    const std::size_t bytes = n * sizeof(float);
    step_buffers b;
    PITFALL_TRY(b.allocate(n)); // before the capture: cudaMalloc is not captured
    PITFALL_ASSIGN_OR_RETURN(const auto stream, pitfall::cuda::stream::create(cudaStreamDefault));
    ctx.ran_on(pitfall::cuda_backend::describe_device());
    ctx.record_info("capture_mode", "cudaStreamCaptureModeGlobal");

    cudaStream_t s = stream.get();
    PITFALL_CUDA_TRY(pitfall::stage::launch,
                     cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    // Inside the capture nothing is checked with an early return: the capture must be ended
    // first. The first error is kept and returned after end capture.
    pitfall::status first_error;
    const auto keep = [&first_error](const pitfall::status& s_) {
        if (first_error.is_ok() && !s_.is_ok())
            first_error = s_;
    };
    float* scratch = nullptr;
    if (scratch_from_malloc_async) {
        // A graph memory node: the allocation is part of the graph, made on each launch.
        keep(PITFALL_CUDA_STATUS(pitfall::stage::alloc, cudaMallocAsync(&scratch, bytes, s),
                                 "cudaMallocAsync"));
    }
    float* in = scratch != nullptr ? scratch : b.d_x;
    keep(PITFALL_CUDA_STATUS(pitfall::stage::copy,
                             cudaMemcpyAsync(in, b.h_x.data(), bytes, cudaMemcpyHostToDevice, s),
                             "cudaMemcpyAsync H2D"));
    keep(pitfall::cuda_backend::for_each(s, n, affine{in, b.d_y}));
    keep(PITFALL_CUDA_STATUS(pitfall::stage::copy,
                             cudaMemcpyAsync(b.h_y.data(), b.d_y, bytes, cudaMemcpyDeviceToHost, s),
                             "cudaMemcpyAsync D2H"));
    if (scratch != nullptr)
        keep(
            PITFALL_CUDA_STATUS(pitfall::stage::alloc, cudaFreeAsync(scratch, s), "cudaFreeAsync"));
    cudaGraph_t captured = nullptr;
    const pitfall::status ended = end_capture(s, captured);
    ctx.record_event("end_capture", ended);
    pitfall::cuda::graph graph(captured);
    PITFALL_TRY(first_error);
    PITFALL_TRY(ended);

    std::size_t nodes = 0;
    PITFALL_CUDA_TRY(pitfall::stage::launch, cudaGraphGetNodes(graph.get(), nullptr, &nodes));
    ctx.record("graph_nodes", static_cast<double>(nodes));
    PITFALL_TRY(graph.instantiate(pitfall::stage::launch));
    std::size_t wrong = 0;
    for (long long round = 1; round <= replays; ++round) {
        b.fill_input(n, round); // the graph reads the pinned buffer at each launch
        PITFALL_CUDA_TRY(pitfall::stage::launch, cudaGraphLaunch(graph.exec(), s));
        PITFALL_CUDA_TRY(pitfall::stage::synchronize, cudaStreamSynchronize(s));
        wrong += wrong_elements(b.h_y.data(), n, round);
    }
    ctx.record("replays", static_cast<double>(replays));
    ctx.record("wrong_elements", static_cast<double>(wrong));
    ctx.check("every_replay_matches", wrong == 0,
              std::to_string(wrong) + " wrong elements over " + std::to_string(replays) +
                  " replays of " + std::to_string(n) + " (y = 2 x + 1, exact)");
    return pitfall::status::ok();
}

// The variants: CUDA only (PITFALL_CUDA_VARIANT answers for the CPU backend).
pitfall::status reproduce_sync_memcpy_in_capture(pitfall::context& ctx) {
    return broken_capture(ctx, illegal_call::sync_memcpy);
}
pitfall::status reproduce_malloc_in_capture(pitfall::context& ctx) {
    return broken_capture(ctx, illegal_call::malloc);
}
pitfall::status reproduce_device_synchronize_in_capture(pitfall::context& ctx) {
    return broken_capture(ctx, illegal_call::device_synchronize);
}
pitfall::status remedy_async_on_capture_stream(pitfall::context& ctx) {
    return captured_and_replayed(ctx, false);
}
pitfall::status remedy_malloc_async_in_capture(pitfall::context& ctx) {
    return captured_and_replayed(ctx, true);
}
#endif

} // namespace graph_capture_illegal

using namespace graph_capture_illegal; // the variants by their own names
PITFALL_SCENARIO(PITFALL_CUDA_VARIANT(reproduce_sync_memcpy_in_capture, why_cuda_only),
                 PITFALL_CUDA_VARIANT(reproduce_malloc_in_capture, why_cuda_only),
                 PITFALL_CUDA_VARIANT(reproduce_device_synchronize_in_capture, why_cuda_only),
                 PITFALL_CUDA_VARIANT(remedy_async_on_capture_stream, why_cuda_only),
                 PITFALL_CUDA_VARIANT(remedy_malloc_async_in_capture, why_cuda_only))
