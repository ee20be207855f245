#!/usr/bin/env bash
# README Quick start, command 2 (and what .ci/run runs): set up, lint the C++ files changed
# (ci/lint-changed.sh: clang-format and clang-tidy; PITFALL_LINT_BASE names the base), then
# build and test three presets:
#   ci        - CUDA when a toolkit is here, warnings as errors: unit, CLI, static and scenario
#               tests, and the matrix tests with one cell run for real in a podman container
#               (PITFALL_MATRIX_SMOKE=off leaves that one out: CI jobs inside a container),
#               and the fleet test across a real Slurm cluster started here (PITFALL_SLURM_TEST=off
#               leaves it out: it needs root and a mount namespace per node)
#   cpu-only  - PITFALL_ENABLE_CUDA=OFF, the host compiler alone: the same tests
#   asan      - host only under AddressSanitizer + UBSan: the same tests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
setup_options=()
[[ "${PITFALL_MATRIX_SMOKE:-on}" == off ]] || setup_options+=(--matrix)
[[ "${PITFALL_SLURM_TEST:-on}" == off ]] || setup_options+=(--slurm)
ci/setup.sh "${setup_options[@]}"
for preset in ci cpu-only asan; do
  echo "== preset $preset: configure, build, test"
  extra=()
  [[ "${PITFALL_MATRIX_SMOKE:-on}" == off ]] && extra+=(-DPITFALL_MATRIX_SMOKE=OFF)
  [[ "${PITFALL_SLURM_TEST:-on}" == off ]] && extra+=(-DPITFALL_SLURM_TEST=OFF)
  cmake --preset "$preset" "${extra[@]}" >/dev/null
  if [[ "$preset" == ci ]]; then
    # clang-tidy reads the compile commands the configure just wrote.
    PITFALL_LINT_BUILD=build/ci ci/lint-changed.sh
  fi
  cmake --build --preset "$preset"
  ctest --preset "$preset"
done
