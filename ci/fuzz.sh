#!/usr/bin/env bash
# Runs every libFuzzer target of the asan preset (harness/tests/fuzz) for SECONDS each (default
# 1800: half an hour per reader), one after another, each on a fresh copy of its seed corpus
# plus what earlier runs found (build/asan/fuzz-corpus/<reader>), and prints per target the
# executions, executions per second, new coverage units and findings (crash-*, leak-*,
# timeout-*, oom-* files under build/asan/fuzz-findings/). Exit 1 when anything was found.
#   ci/fuzz.sh            # 30 minutes per reader
#   ci/fuzz.sh 60         # a minute each
#   FUZZ_JOBS=4 ci/fuzz.sh  # four processes per target (libFuzzer -fork)
#   FUZZ_TARGETS="result index" ci/fuzz.sh 600   # only these readers (two such runs side by
#                                                 # side use both cores of a 2-core machine)
# Needs the asan preset built: cmake --preset asan && cmake --build --preset asan
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-1800}"
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || {
  echo "fuzz: error: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }
bin="$root/build/asan/fuzz"
[[ -d "$bin" ]] || { echo "fuzz: error: no $bin: build the asan preset first" >&2; exit 2; }
corpora="$root/build/asan/fuzz-corpus"
findings="$root/build/asan/fuzz-findings"
mkdir -p "$corpora" "$findings"
fork=()
[[ -n "${FUZZ_JOBS:-}" ]] && fork=(-fork="$FUZZ_JOBS" -ignore_crashes=1)
found_any=0
ran=0
printf '%-15s %12s %10s %8s %s\n' reader executions exec/s new findings
for target in "$bin"/fuzz-*; do
  reader="${target##*/fuzz-}"
  if [[ -n "${FUZZ_TARGETS:-}" && " $FUZZ_TARGETS " != *" $reader "* ]]; then continue; fi
  ran=$((ran + 1))
  mkdir -p "$corpora/$reader"
  cp -n "$root/harness/tests/fuzz/corpus/$reader"/* "$corpora/$reader/" 2>/dev/null || true
  dict="$root/harness/tests/fuzz/json.dict"
  [[ -f "$root/harness/tests/fuzz/$reader.dict" ]] && dict="$root/harness/tests/fuzz/$reader.dict"
  log="$findings/$reader.log"
  stamp="$findings/.$reader.started"
  touch "$stamp"
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$dict" -artifact_prefix="$findings/$reader-" \
    "${fork[@]}" "$corpora/$reader" >"$log" 2>&1 || true
  stat() { grep -m1 "stat::$1:" "$log" | awk '{print $2}'; }
  found=$(find "$findings" -maxdepth 1 -name "$reader-*" -newer "$stamp" -type f | wc -l)
  ((found == 0)) || found_any=1
  printf '%-15s %12s %10s %8s %s\n' "$reader" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "$(stat new_units_added)" "$found"
done
((ran > 0)) || { echo "fuzz: error: no target under $bin matches FUZZ_TARGETS='${FUZZ_TARGETS:-}'" >&2; exit 2; }
((found_any == 0)) || { echo "fuzz: findings under $findings (reproduce: build/asan/fuzz/fuzz-<reader> FILE)"; exit 1; }
