#!/usr/bin/env bash
# ci/lint-changed.sh [BASE]: clang-format and clang-tidy on the C++ files changed since BASE.
#
#   clang-format --dry-run -Werror (the root .clang-format) on changed .cpp .hpp .cu .cuh
#   clang-tidy -p <build> (the root .clang-tidy, warnings as errors) on changed host .cpp .hpp
#
# BASE: the argument, else $PITFALL_LINT_BASE, else the merge-base with the branch's upstream,
# else HEAD~1; a clone with one commit has nothing to compare, and says so. "Changed" is BASE
# against the working tree, with untracked files not ignored by git. <build>: $PITFALL_LINT_BUILD,
# else the first of build/ci, build/default, build/cpu-only with a compile_commands.json. A .cpp
# that build does not compile (cuda_backend.cpp in a host-only build) is left to clang-format.
# Runs in the git repository of the current folder. Exit 0 clean; 1 findings; 2 bad usage.
set -euo pipefail

die() { echo "lint-changed: error: $*" >&2; exit 2; }
(($# <= 1)) || die "usage: ci/lint-changed.sh [BASE]"
root=$(git rev-parse --show-toplevel 2>/dev/null) || die "not inside a git repository"
cd "$root"

base=${1:-${PITFALL_LINT_BASE:-}}
# CI's "commit before the push" is all zeros for a new branch: no such commit, use the default.
[[ "$base" =~ ^0+$ ]] && base=""
if [[ -z "$base" ]]; then
  if upstream=$(git rev-parse --abbrev-ref --symbolic-full-name '@{upstream}' 2>/dev/null); then
    base=$(git merge-base HEAD "$upstream")
  elif git rev-parse --verify -q HEAD~1 >/dev/null; then
    base=HEAD~1
  else
    echo "lint-changed: one commit and no upstream: nothing to compare, nothing to check"
    exit 0
  fi
fi
git rev-parse --verify -q "$base^{commit}" >/dev/null || die "BASE '$base' is not a commit here"

patterns=('*.cpp' '*.hpp' '*.cu' '*.cuh')
mapfile -t files < <({ git diff --name-only --diff-filter=ACMR "$base" -- "${patterns[@]}"
                       git ls-files --others --exclude-standard -- "${patterns[@]}"; } | sort -u)
if ((${#files[@]} == 0)); then
  echo "lint-changed: no C++ file changed since $(git rev-parse --short "$base"): nothing to check"
  exit 0
fi
echo "lint-changed: ${#files[@]} C++ file(s) changed since $(git rev-parse --short "$base")"

for tool in clang-format clang-tidy; do
  command -v "$tool" >/dev/null || die "$tool not found (ci/setup.sh installs it)"
done

failed=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f"; then
    echo "lint-changed: $f: not formatted as .clang-format says (clang-format -i $f)"
    failed=1
  fi
done

build=${PITFALL_LINT_BUILD:-}
if [[ -z "$build" ]]; then
  for candidate in build/ci build/default build/cpu-only; do
    if [[ -f "$candidate/compile_commands.json" ]]; then build=$candidate; break; fi
  done
fi
[[ -n "$build" && -f "$build/compile_commands.json" ]] ||
  die "no compile_commands.json in ${build:-build/ci, build/default or build/cpu-only}: configure a preset first"

host=()
for f in "${files[@]}"; do
  case "$f" in
    *.hpp) host+=("$f") ;;
    *.cpp)
      if grep -q -F "\"$root/$f\"" "$build/compile_commands.json" ||
         grep -q -F "\"file\": \"$f\"" "$build/compile_commands.json"; then
        host+=("$f")
      else
        echo "lint-changed: $f: not compiled in $build: clang-tidy skipped"
      fi ;;
  esac
done
if ((${#host[@]})); then
  # Findings in the changed files only: a header is reported when it changed itself, not each
  # time a changed file includes it.
  header_filter='^$'
  for f in "${host[@]}"; do
    if [[ "$f" == *.hpp ]]; then
      header_filter+="|^$(printf '%s' "$root/$f" | sed 's/[][\.^$*+?(){}|]/\\&/g')\$"
    fi
  done
  echo "lint-changed: clang-tidy -p $build on ${#host[@]} file(s)"
  # The build's commands are g++'s: a warning flag only g++ knows (report_test.cpp's
  # -Wno-maybe-uninitialized) is no finding of the file's.
  if ! clang-tidy -p "$build" --quiet --warnings-as-errors='*' --header-filter="$header_filter" \
      --extra-arg=-Wno-unknown-warning-option "${host[@]}"; then
    echo "lint-changed: clang-tidy found problems (above)"
    failed=1
  fi
fi
if ((failed)); then
  exit 1
fi
echo "lint-changed: clean"
