// spring_ptx: the kernels of type_promotion's PTX image (scenario.json device_images), built
// apart from the program as PTX text and embedded in it, so that the program can count the
// float64 instructions nvcc generated for each loop body without a GPU or a disassembler. Read,
// never launched: extern "C" keeps the entry names as written.
//
// pitfall: uncounted-kernel spring_untyped_kernel -- PTX read as text, never loaded or launched
// pitfall: uncounted-kernel spring_typed_kernel -- PTX read as text, never loaded or launched
// pitfall: uncounted-kernel scale_by_half_kernel -- PTX read as text, never loaded or launched
// pitfall: uncounted-kernel scale_by_tenth_kernel -- PTX read as text, never loaded or launched
#include "spring_step.cuh"

extern "C" __global__ void spring_untyped_kernel(float* pos, float* vel, int n, int steps) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n)
        return;
    float p = pos[i], v = vel[i];
    for (int s = 0; s < steps; ++s)
        type_promotion::spring_step_untyped(p, v);
    pos[i] = p;
    vel[i] = v;
}

extern "C" __global__ void spring_typed_kernel(float* pos, float* vel, int n, int steps) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n)
        return;
    float p = pos[i], v = vel[i];
    for (int s = 0; s < steps; ++s)
        type_promotion::spring_step_typed(p, v);
    pos[i] = p;
    vel[i] = v;
}

// The usual one-line example, x * 0.5: 0.5 is exact in float and one product rounded twice equals
// it rounded once, so the compiler may narrow it back to float32, and nvcc does.
extern "C" __global__ void scale_by_half_kernel(const float* x, float* y, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[i] = x[i] * 0.5;
}

// x * 0.1: 0.1 is not a float, so the product must be taken in float64, and is.
extern "C" __global__ void scale_by_tenth_kernel(const float* x, float* y, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[i] = x[i] * 0.1;
}
