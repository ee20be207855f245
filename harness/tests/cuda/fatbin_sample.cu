// A CUDA program built for a plain, an arch-specific and a family-specific target
// (CUDA_ARCHITECTURES "86-real;90a-real;100f" in harness/tests/CMakeLists.txt): SASS sm_86,
// sm_90a and sm_100f, PTX compute_100f. cuda_fatbin_test.cpp reads them back from the file,
// and pitfall.static.cuda_binaries_keep_suffixes checks that cuobjdump reports the same.
// Nothing runs it: its kernel only has to exist.
__global__ void fill_lanes(int* out) {
    out[threadIdx.x] = static_cast<int>(threadIdx.x);
}

int main() {
    return 0;
}
