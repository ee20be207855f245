#!/usr/bin/env python3
"""One cell of the CUDA/cuDNN matrix, inside its container (started by `pitfall matrix run`,
tools/pitfall_drivers/matrix.py).

Mounted: the source tree read-only at /src, the cell's folder at /out, a build folder kept
between runs at /build ($PITFALL_CELL_SRC, _OUT, _BUILD move them). The cell's definition is
/out/cell-spec.json ($PITFALL_CELL), written by `pitfall matrix run` or `pitfall matrix spec`.

Stages, each a recorded outcome rather than an abort:
  toolkit        nvcc --version
  host_compiler  a CUDA file that includes the C++ standard headers, compiled with the cell's
                 host compiler and flags (nvcc's GCC version check, libstdc++ header errors)
  architecture   the probe architectures one by one (what this toolkit can target); a requested
                 one it refuses is "compile_failed at architecture sm_XX"
  configure, build   pitfall with CMAKE_CUDA_ARCHITECTURES = the cell's list, against the
                 cell's cuDNN headers
  embedded       the SASS and PTX architectures the scenario binaries really hold (cuobjdump)
  run            `pitfall run --out /out/run` with the cell's cuDNN on the loader's path
Writes /out/cell.json (whole, then renamed) and logs/<stage>.log. Python's standard library only:
the images carry python3 and nothing else of Python's.
"""
from __future__ import annotations

import concurrent.futures
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The drivers' package in the same tree (tools/pitfall_drivers/, standard library only), for the
# one way a file of ours is written: whole, then renamed into place.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from pitfall_drivers.files import write_atomically  # noqa: E402

# The container's mount points; a GPU runner job that runs this script in its own nvidia/cuda
# container (ci/, .github/workflows/gpu-matrix.yml) points them at its workspace instead.
OUT = Path(os.environ.get("PITFALL_CELL_OUT", "/out"))
BUILD = Path(os.environ.get("PITFALL_CELL_BUILD", "/build"))
SRC = Path(os.environ.get("PITFALL_CELL_SRC", "/src"))

# Enough of the standard library that a host compiler the toolkit cannot parse shows it.
PROBE_SOURCE = r"""
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>
#include <cuda_runtime.h>
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }
int main() {
    std::vector<float> host(32, 1.0f);
    static_assert(std::is_same_v<decltype(host)::value_type, float>);
    std::printf("%s\n", std::to_string(std::sqrt(host[0])).c_str());
    return 0;
}
"""


def run_logged(argv: list[str], log: Path, env: dict | None = None, cwd: Path | None = None) -> tuple[int, str]:
    """Runs argv (never a shell) with its output going to `log` as it comes (a long build can
    be followed there), returns (exit code, its output)."""
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(argv) + "\n").encode())
        f.flush()
        start = f.tell()
        try:
            rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd).returncode
        except OSError as e:  # the program is missing (a compiler the image lacks): an outcome too
            f.write(f"error: cannot run {argv[0]}: {e.strerror}\n".encode())
            rc = 127
        f.write(f"[exit {rc}]\n".encode())
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    return rc, text.rsplit(f"[exit {rc}]", 1)[0]


def first_error(text: str) -> str:
    """The line a person would quote from a failed log (compiler, CMake, apt, pip): the first
    error, else the last line. The matrix driver uses it too (tools/pitfall_drivers/containers.py)."""
    for line in text.splitlines():
        if re.search(r"#error|\berror\b|fatal|^E: |Unable to", line, re.IGNORECASE):
            return line.strip()[:400]
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip()[:400] if lines else ""


def arch_number(arch: str) -> str:
    return re.match(r"\d+[a-z]?", arch).group(0)


def embedded_architectures(cuobjdump: str | None, binary: str) -> dict:
    """The SASS and PTX a binary holds, read by the static check's own reader
    (ci/check-cuda-binaries.py, in the mounted source tree)."""
    if cuobjdump is None:
        return {"error": "no cuobjdump beside nvcc, on PATH or in /src/.tools"}
    spec = importlib.util.spec_from_file_location("check_cuda_binaries", SRC / "ci" / "check-cuda-binaries.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    try:
        sass, ptx = check.embedded_archs(cuobjdump, binary)
    except (RuntimeError, OSError) as e:
        return {"error": str(e)}
    return {"binary": os.path.relpath(binary, BUILD), "sass": sorted(sass, key=check.arch_key), "ptx": sorted(ptx, key=check.arch_key)}


def cudnn_header_version() -> str | None:
    """The cuDNN version the build compiles against: cudnn_version.h in the CUDNN_INCLUDE_DIR
    the build's CMake cache holds (configure prints "Found CUDNN" only when the result changes,
    and cells share build folders)."""
    try:
        cache = (BUILD / "CMakeCache.txt").read_text(errors="replace")
        include = re.search(r"^CUDNN_INCLUDE_DIR:PATH=(.+)$", cache, re.MULTILINE).group(1).strip()
        header = (Path(include) / "cudnn_version.h").read_text(errors="replace")
        parts = [re.search(rf"#define CUDNN_{k}\s+(\d+)", header).group(1) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
        return ".".join(parts)
    except (OSError, AttributeError):
        return None


def find_cuobjdump(nvcc: str) -> str | None:
    beside = Path(nvcc).parent / "cuobjdump"
    candidates = [str(beside), shutil.which("cuobjdump") or ""] + glob.glob(str(SRC / ".tools/cuda-tools/nvidia/*/bin/cuobjdump"))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def main() -> int:
    spec = json.loads(Path(os.environ.get("PITFALL_CELL", str(OUT / "cell-spec.json"))).read_text())
    cell = spec["cell"]
    logs = OUT / "logs"
    logs.mkdir(exist_ok=True)
    nvcc, host_cxx = cell["cuda"]["nvcc"], cell["host_compiler"]
    cuda_flags = cell.get("cuda_flags", [])
    jobs = str(spec.get("jobs") or os.cpu_count() or 2)
    result: dict = {"schema": "pitfall.cell/1", "id": spec["id"], "stages": []}
    t_cell = time.monotonic()

    def stage(name: str, ok: bool, started: float, **facts) -> None:
        result["stages"].append({"name": name, "ok": ok, "seconds": round(time.monotonic() - started, 1), **facts})

    def finish(outcome: str, stage_name: str | None = None, message: str = "") -> int:
        result.update(outcome=outcome, message=message, seconds_inside=round(time.monotonic() - t_cell, 1))
        if stage_name:
            result["stage"] = stage_name
        write_atomically(OUT / "cell.json", json.dumps(result, indent=2) + "\n")
        print(f"cell {spec['id']}: {outcome}" + (f" at {stage_name}" if stage_name else "") + (f": {message}" if message else ""))
        return 0

    work = Path(tempfile.mkdtemp())
    probe = work / "probe.cu"
    probe.write_text(PROBE_SOURCE)

    # toolkit
    t = time.monotonic()
    rc, text = run_logged([nvcc, "--version"], logs / "toolkit.log")
    m = re.search(r"release ([\d.]+), V([\d.]+)", text)
    result["toolkit"] = {"nvcc": nvcc, "version": m.group(2) if m else None}
    rc_cxx, text_cxx = run_logged([host_cxx, "--version"], logs / "toolkit.log")
    result["host_compiler"] = {"name": host_cxx, "version": text_cxx.splitlines()[0] if rc_cxx == 0 and text_cxx else None}
    stage("toolkit", rc == 0 and rc_cxx == 0, t)
    if rc != 0 or rc_cxx != 0:
        return finish("compile_failed", "toolkit", first_error(text if rc else text_cxx))

    # host compiler: nvcc's own version gate and the standard headers
    t = time.monotonic()
    base = [nvcc, "-ccbin", host_cxx, *cuda_flags, "-std=c++17"]
    rc, text = run_logged(base + ["-c", str(probe), "-o", str(work / "probe.o")], logs / "host_compiler.log")
    stage("host_compiler", rc == 0, t, errors=len(re.findall(r"\berror\b", text)))
    if rc != 0:
        return finish("compile_failed", "host_compiler", first_error(text))

    # architectures: what this toolkit can target, one compile each
    t = time.monotonic()

    def try_arch(arch: str) -> tuple[str, dict]:
        log = logs / f"arch-sm_{arch}.log"
        rc, text = run_logged(base + [f"-arch=sm_{arch}", "-c", str(probe), "-o", str(work / f"probe_{arch}.o")], log)
        return arch, ({"accepted": True} if rc == 0 else {"accepted": False, "message": first_error(text)})

    with concurrent.futures.ThreadPoolExecutor(max_workers=int(jobs)) as pool:
        probed = dict(pool.map(try_arch, spec.get("probe_architectures", [])))
    requested = cell["cuda_architectures"]
    for arch in requested:
        if arch_number(arch) not in probed:
            probed[arch_number(arch)] = try_arch(arch_number(arch))[1]
    result["architectures"] = {"requested": requested, "probed": probed}
    refused = [a for a in requested if not probed[arch_number(a)]["accepted"]]
    stage("architecture", not refused, t)
    if refused:
        result["arch"] = f"sm_{arch_number(refused[0])}"
        return finish("compile_failed", "architecture",
                      f"sm_{arch_number(refused[0])}: {probed[arch_number(refused[0])]['message']}")

    # configure and build pitfall
    t = time.monotonic()
    configure = ["cmake", "-S", str(SRC), "-B", str(BUILD), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                 f"-DCMAKE_CXX_COMPILER={host_cxx}", f"-DCMAKE_CUDA_COMPILER={nvcc}",
                 f"-DCMAKE_CUDA_HOST_COMPILER={host_cxx}", f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(requested)}",
                 f"-DCMAKE_CUDA_FLAGS={' '.join(cuda_flags)}", f"-DCUDNN_ROOT={cell['cudnn']['build']}",
                 "-DPITFALL_ENABLE_CUDA=ON", "-DPITFALL_BUILD_TESTS=OFF", "-DPITFALL_BUILD_BENCH=OFF",
                 f"-DPITFALL_SCENARIOS={';'.join(spec.get('scenarios') or [])}",
                 *spec.get("image", {}).get("cmake_args", [])]
    rc, text = run_logged(configure, logs / "configure.log")
    result["cudnn_compiled"] = cudnn_header_version()
    stage("configure", rc == 0, t)
    if rc != 0:
        return finish("compile_failed", "configure", first_error(text))
    t = time.monotonic()
    # -k 0: past a failing target, so that the log holds every error, not the first one.
    rc, text = run_logged(["cmake", "--build", str(BUILD), "--parallel", jobs, "--", "-k", "0"], logs / "build.log")
    stage("build", rc == 0, t, errors=len(set(re.findall(r"^.*\berror\b.*$", text, re.MULTILINE))))
    if rc != 0:
        return finish("compile_failed", "build", first_error(text))

    # what was really built
    t = time.monotonic()
    try:
        index = json.loads((BUILD / "pitfall-index.json").read_text())
        programs = [s["program"] for s in index.get("scenarios", []) if os.access(s.get("program", ""), os.X_OK)]
    except (OSError, json.JSONDecodeError):
        programs = []
    if programs:
        result["archs_built"] = embedded_architectures(find_cuobjdump(nvcc), programs[0])
    else:
        result["archs_built"] = {"error": "pitfall-index.json names no scenario program"}
    stage("embedded", "error" not in result["archs_built"], t)

    # run
    t = time.monotonic()
    env = dict(os.environ)
    search = [cell["cudnn"]["run"], *spec.get("image", {}).get("library_path", [])]
    env["LD_LIBRARY_PATH"] = ":".join(search + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
    if cell.get("stub_driver_on_path"):
        # The mistake people make: the toolkit's link-time stub put first on the run-time path
        # under the driver's name. Both doctor and the run see it.
        stubs = [p for p in (Path(nvcc).resolve().parent.parent / "lib64" / "stubs" / "libcuda.so",
                             *Path(nvcc).resolve().parent.parent.glob("targets/*/lib/stubs/libcuda.so"))
                 if p.exists()]
        if not stubs:
            return finish("run_failed", "run", f"stub_driver_on_path: no stubs/libcuda.so beside {nvcc}")
        stub_dir = work / "stub-on-path"
        stub_dir.mkdir()
        (stub_dir / "libcuda.so.1").symlink_to(stubs[0])
        env["LD_LIBRARY_PATH"] = f"{stub_dir}:{env['LD_LIBRARY_PATH']}"
        result["stub_driver_on_path"] = str(stubs[0])
    pitfall = str(BUILD / "bin" / "pitfall")
    # doctor: what `pitfall doctor` says of this cell's machine, with the same loader path as
    # the run (its findings are asserted per cell: expect.doctor in ci/matrix.json)
    t = time.monotonic()
    rc, text = run_logged([pitfall, "doctor", "--json"], logs / "doctor.log", env=env)
    try:
        diagnosis = json.loads(text[text.index("{"):]) if "{" in text else None
    except json.JSONDecodeError:
        diagnosis = None
    if isinstance(diagnosis, dict) and rc in (0, 1):
        write_atomically(OUT / "doctor.json", json.dumps(diagnosis, indent=2) + "\n")
        result["doctor"] = {"exit_code": rc, "headline": diagnosis.get("headline", ""),
                            "errors": [f.get("id") for f in diagnosis.get("findings", []) if f.get("severity") == "error"],
                            "warnings": [f.get("id") for f in diagnosis.get("findings", []) if f.get("severity") == "warning"]}
    else:
        result["doctor"] = {"exit_code": rc, "error": first_error(text)}
    stage("doctor", "errors" in result["doctor"], t, exit_code=rc)
    argv = [pitfall, "run", "--out", str(OUT / "run"), "--replace"]
    # A GPU runner's cell expects its GPU: without one, `pitfall run --require gpu` exits 1
    # before any case, in the doctor's words, instead of passing on the driver's errors.
    if (cell.get("expect") or {}).get("gpu"):
        argv += ["--require", "gpu"]
    for s in spec.get("scenarios") or []:
        argv += ["--scenario", s]
    rc, text = run_logged(argv, logs / "run.log", env=env)
    stage("run", rc in (0, 1), t, exit_code=rc)
    result["run_exit_code"] = rc
    try:
        summary = json.loads((OUT / "run" / "summary.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        return finish("run_failed", "run", f"pitfall run exited {rc} and left no summary.json ({e}): {first_error(text)}")
    facts = summary.get("fingerprint_summary", {})
    result["cuda_error"] = facts.get("cuda_error")
    # The machine as the run saw it (gpu_count, device_name, compute_capability, ...) and the
    # baseline profile it chose: a GPU runner's cell is judged on both (`pitfall matrix judge --gpu`).
    result["fingerprint"] = facts
    result["profile"] = summary.get("profile", {})
    result["verdicts"] = summary.get("counts", {})
    result["verdicts_text"] = ", ".join(f"{n} {v}" for v, n in sorted(result["verdicts"].items()))
    if rc not in (0, 1):
        return finish("run_failed", "run", f"pitfall run exited {rc}: {first_error(text)}")
    return finish("ran")


if __name__ == "__main__":
    sys.exit(main())
