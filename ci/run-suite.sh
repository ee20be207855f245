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
# Only what a run needs, and the first case as soon as it can: the harness (`pitfall` and its
# probe) here, then each scenario's program by `pitfall run --build`, just before its first case
# and while no case runs (a compiler beside a case would be in its times). A fresh clone's first
# case starts after the harness and one program are built; a later run pays one no-op build per
# scenario. The unit tests and benchmarks, where they are configured, are left unbuilt.
started=$(date +%s)
echo "run-suite: building pitfall (preset $preset; a first build takes minutes, then each" \
     "scenario's program is built just before its cases)"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target pitfall pitfall_probe
echo "run-suite: pitfall built in $(( $(date +%s) - started )) s"
exec "build/$preset/bin/pitfall" run --build "$@"
