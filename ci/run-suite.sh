#!/usr/bin/env bash
# README Quick start, command 1: set up, build, run every case, print the summary and write
# the run folder (reports/runs/<UTC timestamp>/). Extra arguments go to `pitfall run`.
# PITFALL_PRESET names the CMake preset (default: `default`); CI runs it on the `ci` build its
# tests made, so that this same script, not a copy of its steps, is what CI proves.
# Exit status: pitfall's (0 every case met its baseline, 1 some did not, 2 bad input).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${PITFALL_PRESET:-default}"
ci/setup.sh --run
# Only what a run needs: the `pitfall-suite` target (`pitfall`, its probe and the scenario
# programs); the unit tests and benchmarks, where they are configured, are left unbuilt.
started=$(date +%s)
echo "run-suite: building pitfall and the scenario programs (preset $preset; a first build takes" \
     "minutes, most of it nvcc where CUDA is here; a later one only what changed)"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target pitfall-suite
echo "run-suite: built in $(( $(date +%s) - started )) s"
exec "build/$preset/bin/pitfall" run "$@"
