// host_call_from_kernel.cu: the compile-time face of host_only_custom_op. It MUST NOT compile.
//
// Not part of the scenario program (add_failure_scenario builds only scenario.cu): it is the
// source of the CTest test pitfall.compile.host_only_custom_op.host_function_in_kernel
// (scenario.json, "compile_checks"), which passes only when nvcc rejects it with
//   error: calling a __host__ function("host_only_square(float)") from a __global__
//          function("square_layer_kernel") is not allowed
// (observed with nvcc 13.0; docs/cuda-rules.md#host-function-in-kernel; it follows it with
// `identifier "host_only_square" is undefined in device code`).
//
// What: the seed's custom layer ported the naive way. The op is an ordinary C++ function, and a
//   function without an execution-space annotation is implicitly __host__: nvcc compiles it for
//   the CPU only. Calling it from a kernel is the "np.square inside a GPU graph" mistake caught
//   at build time, the best place to catch it.
// Remedy (scenario.cu, remedy_device_op): mark the op __host__ __device__ (PITFALL_HOST_DEVICE)
//   so one definition serves the CPU loop and the kernel.
// Test of the test: remove the call below, or annotate host_only_square with
//   __host__ __device__, and the compile check must FAIL ("compiled, but it must not").

/// The custom op as a host library ships it: no annotation, hence __host__ only.
inline float host_only_square(float x) {
    return x * x;
}

/// The custom layer as a kernel: one thread per element, calling the host-only op.
// pitfall: uncounted-kernel square_layer_kernel -- it must not compile, so it never runs
__global__ void square_layer_kernel(const float* in, float* out, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        out[i] = host_only_square(in[i]); // the error: a __host__ function in device code
}
