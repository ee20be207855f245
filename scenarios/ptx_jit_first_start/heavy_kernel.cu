// heavy: the kernel of ptx_jit_first_start's device images, built apart from the program
// (scenario.json device_images) as PTX only and as SASS only. Its body is unrolled into
// thousands of instructions on purpose: JIT compilation of its PTX then takes a time a start-up
// can be seen to pay. extern "C": cudaLibraryGetKernel finds it by this exact name.
//
// pitfall: uncounted-kernel heavy -- a module loaded at run time, outside the program's counter
extern "C" __global__ void heavy(float* out, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float x = static_cast<float>(i) * 1e-3f;
#pragma unroll
    for (int k = 0; k < 96; ++k)
        x = sinf(x) * 0.75f + cosf(x * static_cast<float>(k + 1)) * 0.25f;
    out[i] = x;
}
