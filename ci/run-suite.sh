#!/usr/bin/env bash
# README Quick start, command 1: set up, build, run every case, print the summary and write
# the run folder (reports/runs/<UTC timestamp>/). Extra arguments go to `pitfall run`.
# Exit status: pitfall's (0 every case met its baseline, 1 some did not, 2 bad input).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ci/setup.sh --run
# Only what a run needs: `pitfall`, its probe and the scenario programs; no unit tests or
# benchmarks (ci/run-tests.sh builds those, in presets of their own).
started=$(date +%s)
echo "run-suite: building pitfall and the scenario programs (a first build takes minutes, most" \
     "of it nvcc where CUDA is here; a later one only what changed)"
cmake --preset default -DPITFALL_BUILD_TESTS=OFF -DPITFALL_BUILD_BENCH=OFF >/dev/null
cmake --build --preset default
echo "run-suite: built in $(( $(date +%s) - started )) s"
exec build/default/bin/pitfall run "$@"
