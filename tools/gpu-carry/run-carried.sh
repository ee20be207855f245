#!/usr/bin/env bash
# Runs a carried CUDA 12.4 build (static CUDA runtime, sm_90) on a GPU machine: the folder
# holding this script must also hold pitfall12.tar.xz (the install prefix's bin/, libexec/ and
# share/) and libs12.tar.xz (pack-libraries.sh's lib/), as docs/matrix.md describes.
# From the repository root:  bash DIR/run-carried.sh OUTDIR [extra `pitfall run` arguments...]
#   e.g. bash DIR/run-carried.sh /tmp/o --samples 3
#        bash DIR/run-carried.sh /tmp/o --scenario float64_inputs
# Environment:
#   RUN12_TIMEOUT=150     seconds for `pitfall run` (SIGINT then, SIGKILL 20 s later; finished
#                         cases stay in the run folder)
#   RUN12_RESUME=1        continue the run already in /tmp/r12 (`pitfall run --resume`)
#   RUN12_CUDA13_LIBS=0   do not add the machine's CUDA 13 library folders to the loader path
# Writes OUTDIR/run12.txt (everything printed) and OUTDIR/run12.tar.gz (the run folder r12/).
set -uo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: bash DIR/run-carried.sh OUTDIR [pitfall run arguments...]" >&2
  exit 2
fi
out=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$PWD
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
log="$out/run12.txt"
: > "$log"
say() { printf '%s\n' "$*" | tee -a "$log"; }
# Every command's output goes to the console and to the log.
logged() {
  say "\$ $*"
  "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}

prefix=/tmp/pitfall12
libs=/tmp/pitfall12-libs
rm -rf "$prefix" "$libs"
mkdir -p "$prefix" "$libs"
# tar needs the xz program for .tar.xz; a minimal image may lack it, Python's lzma does not.
unpack() {
  if command -v xz >/dev/null; then
    tar -xJf "$1" -C "$2"
  elif command -v python3 >/dev/null; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
  else
    echo "neither xz nor python3 here to unpack $1" >&2
    return 1
  fi
}
unpack "$here/pitfall12.tar.xz" "$prefix" || { say "cannot unpack pitfall12.tar.xz"; exit 2; }
unpack "$here/libs12.tar.xz" "$libs" || { say "cannot unpack libs12.tar.xz"; exit 2; }

# The carried libraries first; then the folders where this machine keeps its CUDA 13
# libraries (cuBLAS 13, cuDNN 9): a CUDA 12 build opens libcublas.so.12, which none of them
# holds, and libcudnn.so.9, which any cuDNN 9 answers.
path="$libs/lib"
if [[ "${RUN12_CUDA13_LIBS:-1}" != 0 ]]; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
           /usr/lib/x86_64-linux-gnu/cudnn* /usr/local/cudnn*/lib*; do
    [[ -d "$d" ]] && path="$path:$d"
  done
fi
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

say "date: $(date -u +%FT%TZ)  host: $(hostname)"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
command -v nvidia-smi >/dev/null && logged nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
for so in libcuda.so.1 libcublas.so.12 libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
  found=$(ldconfig -p 2>/dev/null | awk -v s="$so" '$1 == s {print $NF; exit}')
  for d in ${LD_LIBRARY_PATH//:/ }; do
    [[ -z "$found" && -e "$d/$so" ]] && found="$d/$so"
  done
  say "library $so: ${found:-not found}"
done

logged "$prefix/bin/pitfall" --version
logged "$prefix/bin/pitfall" doctor

run_args=(--backend cuda --expected "$repo/expected" --profile hopper-cuda11-12)
if [[ "${RUN12_RESUME:-0}" == 1 ]]; then
  run_args=(--resume /tmp/r12)
else
  rm -rf /tmp/r12
  run_args+=(--out /tmp/r12)
fi
logged timeout -s INT -k 20 "${RUN12_TIMEOUT:-150}" "$prefix/bin/pitfall" run "${run_args[@]}" "$@"
rc=$?
say "pitfall run exit status: $rc"

if [[ -d /tmp/r12 ]]; then
  tar -czf "$out/run12.tar.gz" -C /tmp r12 && say "wrote $out/run12.tar.gz"
else
  say "no run folder /tmp/r12"
fi
exit "$rc"
