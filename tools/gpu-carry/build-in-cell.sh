#!/usr/bin/env bash
# Builds the suite inside the trixie-cuda12.4 matrix image (tools/pitfall-matrix images --cells
# cuda12.4-gcc13) for sm_90 with the CUDA runtime linked in (CMAKE_CUDA_RUNTIME_LIBRARY=Static),
# so the programs need no CUDA 12 library on a GPU machine that has only CUDA 13 installed
# (cuBLAS and cuDNN are still opened by name at run time). Run in that image with the source at
# /src (read-only), a build folder at /build and an output folder at /out (docs/matrix.md,
# "A CUDA 12 build carried to a GPU machine"); installs into /out/prefix.
set -euo pipefail
cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=g++-13 -DCMAKE_CUDA_COMPILER=/usr/bin/nvcc -DCMAKE_CUDA_HOST_COMPILER=g++-13 \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_RUNTIME_LIBRARY=Static \
  -DCUDNN_ROOT=/opt/pitfall/cudnn-9.10/nvidia/cudnn \
  -DPITFALL_ENABLE_CUDA=ON -DPITFALL_BUILD_TESTS=OFF -DPITFALL_BUILD_BENCH=OFF \
  -DPITFALL_NCCL_LIBRARY=/opt/pitfall/nccl/nvidia/nccl/lib/libnccl.so.2 \
  -DPITFALL_NCCL_INCLUDE_DIR=/opt/pitfall/nccl/nvidia/nccl/include \
  -DCMAKE_INSTALL_PREFIX=/out/prefix
time cmake --build /build --parallel 2 -- -k 0
rm -rf /out/prefix
cmake --install /build
