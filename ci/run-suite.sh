#!/usr/bin/env bash
# README Quick start, command 1: set up, build, run every case, print the summary and write
# the run folder (reports/runs/<UTC timestamp>/). Extra arguments go to `pitfall run`.
# Exit status: pitfall's (0 every case met its baseline, 1 some did not, 2 bad input).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ci/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
exec build/default/bin/pitfall run "$@"
