// fill_index: the kernel of the device images no_kernel_image builds apart from the program
// (scenario.json device_images) and loads at run time with cudaLibraryLoadData. extern "C":
// cudaLibraryGetKernel finds it by this exact name.
//
// pitfall: uncounted-kernel fill_index -- a module loaded at run time, outside the program's
// counter
extern "C" __global__ void fill_index(unsigned* out, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = 3u * i + 1u;
}
