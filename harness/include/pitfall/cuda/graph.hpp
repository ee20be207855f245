// pitfall/cuda/graph.hpp: a CUDA Graph and its executable, destroyed with their owner.
//
//   PITFALL_CUDA_TRY(stage::launch, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
//   ... the captured work ...
//   cudaGraph_t captured = nullptr;
//   const cudaError_t ended = cudaStreamEndCapture(s, &captured);
//   pitfall::cuda::graph step(captured); // owned from here, whatever `ended` says
//   PITFALL_CUDA_TRY(stage::launch, ended);
//   PITFALL_TRY(step.instantiate(stage::init));
//   PITFALL_CUDA_TRY(stage::launch, cudaGraphLaunch(step.exec(), s));
//
// CUDA only: empty where the build has no CUDA (PITFALL_HAS_CUDA 0).
#pragma once

#include "pitfall/backend.hpp"
#include "pitfall/cuda/handle.hpp"
#include "pitfall/status.hpp"

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>

namespace pitfall::cuda {

struct graph_destroy {
    void operator()(cudaGraph_t g) const noexcept { (void)cudaGraphDestroy(g); }
};
struct graph_exec_destroy {
    void operator()(cudaGraphExec_t e) const noexcept { (void)cudaGraphExecDestroy(e); }
};

/// A graph (a capture's result, or none) and, once instantiated, its executable; the
/// executable is destroyed before the graph.
class graph {
public:
    graph() = default;
    /// Takes `captured` (cudaStreamEndCapture's graph; null when the capture made none).
    explicit graph(cudaGraph_t captured) noexcept : m_graph(captured) {}

    cudaGraph_t get() const noexcept { return m_graph.get(); }
    /// The executable; null until instantiate() succeeded.
    cudaGraphExec_t exec() const noexcept { return m_exec.get(); }

    /// The executable of the graph, its error reported at `where`. cudaGraphInstantiateWithFlags:
    /// one signature from CUDA 11.4 to 13 (cudaGraphInstantiate took five arguments before CUDA
    /// 12 and three since), so the CUDA 11.8 build compiles it too.
    status instantiate(stage where) {
        cudaGraphExec_t instantiated = nullptr;
        PITFALL_CUDA_TRY(where, cudaGraphInstantiateWithFlags(&instantiated, m_graph.get(), 0));
        m_exec = unique_handle<cudaGraphExec_t, graph_exec_destroy>(instantiated);
        return status::ok();
    }

private:
    // Declared in this order so that the executable goes first.
    unique_handle<cudaGraph_t, graph_destroy> m_graph;
    unique_handle<cudaGraphExec_t, graph_exec_destroy> m_exec;
};

} // namespace pitfall::cuda

#endif // PITFALL_HAS_CUDA
