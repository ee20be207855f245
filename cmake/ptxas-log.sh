#!/bin/sh
# CUDA compiler launcher: ptxas-log.sh LOG COMPILER ARGS...
#
# Runs the compile and moves ptxas's per-kernel report (-Xptxas=-v: registers, stack, spills;
# a thousand lines for the suite) from the build output into LOG, where the static checks read
# it (ci/check-cuda-binaries.py --ptxas-logs). Everything else the compiler prints (warnings,
# errors, ptxas warnings) still reaches the terminal, and its exit status is the compile's.
log=$1
shift
mkdir -p "$(dirname "$log")" || exit 1
out=$(mktemp "${TMPDIR:-/tmp}/pitfall-ptxas.XXXXXX") || exit 1
"$@" >"$out" 2>&1
rc=$?
# "ptxas info : ..." lines and the indented "N bytes stack frame, ..." line after each
# "Function properties for ..." line.
grep -E '^ptxas info|^ +[0-9]+ bytes stack frame' "$out" >"$log.tmp"
mv -f "$log.tmp" "$log"
grep -v -E '^ptxas info|^ +[0-9]+ bytes stack frame' "$out" >&2
rm -f "$out"
exit "$rc"
