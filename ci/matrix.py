#!/usr/bin/env python3
"""pitfall matrix: the CUDA/cuDNN matrix (ci/matrix.json) run in containers, one cell at a time.

`pitfall matrix` runs this file. Each cell's image (a toolkit, host compilers, cuDNN; see
containers/cell.Containerfile) is built once and reused until its inputs change; each cell's
container builds pitfall from the source tree mounted read-only and runs `pitfall run` with no
network, a read-only root and resource limits (containers/cell_entry.py), writing into the
cell's folder. A cell that fails (image build, compiler, architecture, build, run) is an outcome
recorded in its cell.json, never an abort of the matrix. The merged report comes last.

Exit status: 0 every cell's outcome is the one ci/matrix.json expects of it, 1 some cell's is
not, 2 bad usage or bad input (a malformed matrix file, an unknown cell, no container engine),
130 interrupted (finished cells are kept).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent.parent
# The cell's in-container script holds the helpers both sides use (stdlib only, importable).
sys.path.insert(0, str(SOURCE_DIR / "containers"))
from cell_entry import first_error, write_atomically  # noqa: E402

sys.path.insert(0, str(SOURCE_DIR / "ci"))
from safe_json import BadInput, read_json  # noqa: E402,F401  (BadInput: the tests import it from here)
DEFAULT_MATRIX = SOURCE_DIR / "ci" / "matrix.json"
CONTAINERFILE = SOURCE_DIR / "containers" / "cell.Containerfile"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
OUTCOMES = ("ran", "image_build_failed", "compile_failed", "run_failed", "container_failed", "skipped")
EXIT_OK, EXIT_DIFFERS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
# A GPU runner's label (its GPU model, lower case: h100, l4) and a baseline profile's name.
RUNNER_LABEL = r"[a-z0-9][a-z0-9._-]*"
# A name that becomes a path under a folder of ours (an image's build context, a cell's run
# folder, a debootstrap'd suite): starts with a letter or digit, so never "." or "..", holds no
# "/", and is at most 100 characters.
PATH_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
SCENARIO_NAME = r"[a-z][a-z0-9_]{0,99}"
PROFILE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
# What `pitfall run`'s exit status says (pitfall help run), for a judgement's text.
RUN_EXIT_MEANING = {0: "every case met its baseline", 1: "some case did not meet its baseline",
                    2: "bad usage or bad input", 130: "interrupted"}

USAGE = """\
usage: pitfall matrix <command> [options]

The CUDA/cuDNN matrix of ci/matrix.json, each cell in its own container (podman or docker).

commands:
  list [--json]                 the cells: toolkit, cuDNN, host compiler, architectures, image
  images [--cells A,B]          build (or reuse) the cells' images only
  spec --cells ID --out DIR [--gpu-runner --gpu LABEL] [--scenarios S]
                                write DIR/cell-spec.json for containers/cell_entry.py; with
                                --gpu-runner, the cell as a GPU runner's nvidia/cuda image has it,
                                on the runner labelled LABEL (a key of its gpu_runner.gpus)
                                (--install-wheels: pip-installs the cell's cuDNN wheels there)
  runner-cells [--gpus A,B]     the GPU-runner matrix as one line of JSON, one entry per cell
                                and GPU: {"id", "image", "gpu", "model", "profile"} (--gpus:
                                only the runners with these labels)
  judge --cells ID --gpu LABEL --cell-dir DIR
                                a cell folder made by a GPU runner's job, judged against what
                                ci/matrix.json declares for that cell on that GPU: pitfall run
                                exited 0, a GPU answered, its name contains the model and the
                                run chose the profile (exit 1 when not; the printed line and
                                cell.json's expectation_problems say why, with pitfall doctor's
                                finding); without --gpu, against its cell-spec.json
  run [--out DIR] [options]     build or reuse each cell's image, run the cell, merge the report

run options:
  --out DIR          where the matrix goes (default: reports/matrix/<UTC timestamp>):
                     DIR/cells/<cell>/ (cell.json, run/, logs/), DIR/matrix.html, DIR/matrix.md,
                     DIR/matrix.json
  --cells A,B        only these cells (default: all)
  --scenarios S,T    build and run only these scenarios in every cell (default: all)
  --engine E         podman (default) or docker
  --gpu              attach the host's GPUs (podman: CDI nvidia.com/gpu=all; docker: --gpus all)
  --dry-run          print the commands, run nothing
  --jobs N           build jobs inside a cell (default: the machine's cores)
  --memory M         memory limit of a cell's container (default 12g)

common options:
  --matrix FILE      cell definitions (default: ci/matrix.json)
  --cache DIR        images, bases, wheels and build folders (default: $PITFALL_CACHE, else
                     $XDG_CACHE_HOME/pitfall/matrix, else ~/.cache/pitfall/matrix)
  --pitfall PATH     the pitfall binary that renders the merged report

cell outcomes: ran, image_build_failed, compile_failed (with the stage: host_compiler,
architecture sm_XX, configure, build), run_failed, container_failed, skipped (with the reason).

exit status: 0 every cell's outcome is the one expected of it, 1 some cell's is not,
2 bad usage or bad input, 130 interrupted.
"""


# ---- the matrix file ---------------------------------------------------------------------


def _need(obj: dict, key: str, kind: type, where: str):
    if key not in obj:
        raise BadInput(f"{where}: missing field '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or (kind is str and not value):
        raise BadInput(f"{where}.{key}: expected {'a non-empty string' if kind is str else kind.__name__}")
    return value


def load_matrix(path: Path) -> dict:
    """Reads and checks the matrix file; every problem names the file and the field."""
    doc = read_json(path)
    where = str(path)
    if not isinstance(doc, dict) or doc.get("schema") != "pitfall.matrix/1":
        raise BadInput(f"{where}: field 'schema' must be \"pitfall.matrix/1\"")
    images = _need(doc, "images", dict, where)
    for name, image in images.items():
        iw = f"{where}: images.{name}"
        if not re.fullmatch(PATH_NAME, name):
            raise BadInput(f"{where}: images: {name!r} is not an image name (a letter or digit, then "
                           "letters, digits, '.', '_' and '-', at most 100): it becomes a folder name")
        if not isinstance(image, dict):
            raise BadInput(f"{iw}: expected an object")
        base = _need(image, "base", dict, iw)
        if ("debootstrap" in base) == ("image" in base):
            raise BadInput(f"{iw}.base: give exactly one of 'debootstrap' (a Debian suite) or 'image'")
        if "debootstrap" in base and not (isinstance(base["debootstrap"], str) and
                                          re.fullmatch(PATH_NAME, base["debootstrap"])):
            raise BadInput(f"{iw}.base.debootstrap: expected a Debian suite's name (it becomes a folder name)")
        for key in ("apt_packages",):
            if not all(isinstance(p, str) for p in _need(image, key, list, iw)):
                raise BadInput(f"{iw}.{key}: expected a list of package names")
        wheels = image.get("wheels", {})
        if not isinstance(wheels, dict) or not all(isinstance(spec, str) and "==" in spec for _, spec in wheel_specs(image)):
            raise BadInput(f"{iw}.wheels: expected {{prefix: \"package==version\" or a list of them}} (versions pinned)")
        for key in ("cmake_args", "library_path"):
            if not isinstance(image.get(key, []), list) or not all(isinstance(v, str) for v in image.get(key, [])):
                raise BadInput(f"{iw}.{key}: expected a list of strings")
        if not isinstance(image.get("wheel_toolkit", ""), str):
            raise BadInput(f"{iw}.wheel_toolkit: expected a string")
        if image.get("wheel_toolkit", "") and image["wheel_toolkit"] not in wheels:
            raise BadInput(f"{iw}.wheel_toolkit: '{image['wheel_toolkit']}' is not one of its wheels' prefixes")
        if "cudnn_mix" in image and not isinstance(image["cudnn_mix"], str):
            raise BadInput(f"{iw}.cudnn_mix: expected NAME=BASE:OTHER:lib1,lib2")
        if "cudnn_mix" in image and not re.fullmatch(r"[\w.-]+=[\w.-]+:[\w.-]+:[\w,]+", image["cudnn_mix"]):
            raise BadInput(f"{iw}.cudnn_mix: expected NAME=BASE:OTHER:lib1,lib2")
    cells = _need(doc, "cells", list, where)
    seen = set()
    for i, cell in enumerate(cells):
        cw = f"{where}: cells[{i}]"
        if not isinstance(cell, dict):
            raise BadInput(f"{cw}: expected an object")
        cid = _need(cell, "id", str, cw)
        cw = f"{where}: cell '{cid}'"
        if not re.fullmatch(PATH_NAME, cid):
            raise BadInput(f"{cw}.id: a letter or digit, then letters, digits, '.', '_' and '-' "
                           "(at most 100): it becomes a folder name under --out")
        if cid in seen:
            raise BadInput(f"{cw}.id: defined twice")
        seen.add(cid)
        if _need(cell, "image", str, cw) not in images:
            raise BadInput(f"{cw}.image: no image '{cell['image']}' in images")
        cuda = _need(cell, "cuda", dict, cw)
        for key in ("version", "source", "nvcc"):
            _need(cuda, key, str, f"{cw}.cuda")
        cudnn = _need(cell, "cudnn", dict, cw)
        for key in ("version", "source", "build", "run"):
            _need(cudnn, key, str, f"{cw}.cudnn")
        _need(cell, "host_compiler", str, cw)
        archs = _need(cell, "cuda_architectures", list, cw)
        if not archs or not all(isinstance(a, str) and re.fullmatch(r"\d+[a-z]?(-real|-virtual)?", a) for a in archs):
            raise BadInput(f"{cw}.cuda_architectures: expected a non-empty list like [\"75-real\", \"90\"]")
        expect = _need(cell, "expect", dict, cw)
        if expect.get("outcome") not in OUTCOMES:
            raise BadInput(f"{cw}.expect.outcome: expected one of {', '.join(OUTCOMES)}")
        for key in ("stage", "message_contains", "cuda_error"):
            if key in expect and not isinstance(expect[key], str):
                raise BadInput(f"{cw}.expect.{key}: expected a string")
        for key in ("model", "profile"):
            if key in expect and not (isinstance(expect[key], str) and expect[key]):
                raise BadInput(f"{cw}.expect.{key}: expected a non-empty string")
        if "run_exit_code" in expect and (not isinstance(expect["run_exit_code"], int) or isinstance(expect["run_exit_code"], bool)):
            raise BadInput(f"{cw}.expect.run_exit_code: expected an integer")
        if "doctor" in expect and not (isinstance(expect["doctor"], list) and expect["doctor"]
                                       and all(isinstance(i, str) and re.fullmatch(r"[a-z][a-z0-9-]*", i)
                                               for i in expect["doctor"])):
            raise BadInput(f"{cw}.expect.doctor: expected a non-empty list of finding ids (pitfall doctor --explain all)")
        if "gpu_runner" in cell:
            gw = f"{cw}.gpu_runner"
            runner = _need(cell, "gpu_runner", dict, cw)
            for key in ("image", "host_compiler", "nvcc", "cudnn_build", "cudnn_run"):
                _need(runner, key, str, gw)
            if runner.get("digest") is not None and not re.fullmatch(r"sha256:[0-9a-f]{64}", str(runner["digest"])):
                raise BadInput(f"{gw}.digest: expected null or sha256:<64 hex digits> (ci/pin-images.py writes it)")
            gpus = _need(runner, "gpus", dict, gw)
            if not gpus:
                raise BadInput(f"{gw}.gpus: expected at least one runner label, e.g. "
                               "{\"h100\": {\"model\": \"H100\", \"profile\": \"hopper-cuda13\"}}")
            for label, gpu in gpus.items():
                if not re.fullmatch(RUNNER_LABEL, label):
                    raise BadInput(f"{gw}.gpus.{label}: a runner label is lower-case letters, digits, '.', '_' and '-'")
                if not isinstance(gpu, dict):
                    raise BadInput(f"{gw}.gpus.{label}: expected an object with 'model' and 'profile'")
                _need(gpu, "model", str, f"{gw}.gpus.{label}")
                if not re.fullmatch(PROFILE_NAME, _need(gpu, "profile", str, f"{gw}.gpus.{label}")):
                    raise BadInput(f"{gw}.gpus.{label}.profile: expected a profile name (a folder of expected/)")
        if "stub_driver_on_path" in cell and not isinstance(cell["stub_driver_on_path"], bool):
            raise BadInput(f"{cw}.stub_driver_on_path: expected true or false")
        for key in ("mounts", "hide_files", "cuda_flags"):
            if not isinstance(cell.get(key, []), list) or not all(isinstance(v, str) and v for v in cell.get(key, [])):
                raise BadInput(f"{cw}.{key}: expected a list of strings")
    return doc


def wheel_specs(image: dict) -> list[tuple[str, str]]:
    """(prefix, "package==version") for each wheel of an image; a prefix may take several."""
    pairs = []
    for prefix, specs in sorted(image.get("wheels", {}).items()):
        for spec in specs if isinstance(specs, list) else [specs]:
            pairs.append((prefix, spec))
    return pairs


def select_cells(doc: dict, wanted: list[str]) -> list[dict]:
    if not wanted:
        return list(doc["cells"])
    by_id = {c["id"]: c for c in doc["cells"]}
    unknown = [w for w in wanted if w not in by_id]
    if unknown:
        raise BadInput(f"--cells: no cell {', '.join(unknown)} (cells: {', '.join(by_id)})")
    return [by_id[w] for w in wanted]


# ---- the container engine ----------------------------------------------------------------


class Engine:
    """podman (runc, explicit ulimits, storage under the cache) or docker; --dry-run prints."""

    def __init__(self, name: str, cache: Path, dry_run: bool):
        self.name, self.cache, self.dry_run = name, cache, dry_run
        self.env = dict(os.environ)
        if shutil.which(name) is None:
            if dry_run:
                return

            raise BadInput(f"--engine {name}: '{name}' is not on PATH (`ci/setup.sh --matrix` installs podman)")
        if name == "podman":
            # crun refuses this VM's mixed cgroup v1/v2 hierarchy and root lacks CAP_SYS_RESOURCE
            # for podman's default ulimits: runc and explicit ulimits (containers/README.md).
            conf_dir = cache / "engine"
            conf = conf_dir / "containers.conf"
            storage = conf_dir / "storage.conf"
            self.env.update(CONTAINERS_CONF=str(conf), CONTAINERS_STORAGE_CONF=str(storage))
            if dry_run:
                return  # reads the images podman has; writes nothing
            _write_if_changed(conf, '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                              '[engine]\nruntime = "runc"\n')
            _write_if_changed(storage, f'[storage]\ndriver = "overlay"\ngraphroot = "{cache}/storage"\n'
                              f'runroot = "{cache}/run"\n')

    def cmd(self, *args: str) -> list[str]:
        return [self.name, *args]

    def has_image(self, ref: str) -> bool:
        if shutil.which(self.name) is None or not Path(self.env.get("CONTAINERS_CONF", "/")).exists():
            return False
        return subprocess.run(self.cmd("image", "inspect", ref), env=self.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0

    def image_id(self, ref: str) -> str:
        """The image's content id: the same for a rebuild whose every layer came from the cache
        (a comment changed in the Containerfile), unlike its tag."""
        if self.dry_run or shutil.which(self.name) is None:
            return ref
        r = subprocess.run(self.cmd("image", "inspect", "--format", "{{.Id}}", ref), env=self.env,
                           capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else ref

    def run_logged(self, argv: list[str], log: Path, stdin=None) -> int:
        """Runs argv with its output in `log`; --dry-run prints it instead and answers 0."""
        if self.dry_run:
            print("  $ " + " ".join(shlex.quote(a) for a in argv))
            return 0
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(("$ " + " ".join(shlex.quote(a) for a in argv) + "\n").encode())
            out.flush()
            return subprocess.run(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, stdin=stdin).returncode


def remove_inside(path: Path, root: Path) -> None:
    """shutil.rmtree(path), once path is confirmed to lie inside root (after resolving links):
    a name from data never deletes anything outside the folder it names a part of."""
    top = root.resolve()
    # A link is removed as a link (what it points at is left alone), where the link itself lies.
    resolved = path.parent.resolve() / path.name if path.is_symlink() else path.resolve()
    if resolved == top or top not in resolved.parents:
        raise BadInput(f"{path}: resolves to {resolved}, outside {top}: not removed")
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        _write_atomically(path, text)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)


def log_tail(log: Path, lines: int = 12) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---- images ------------------------------------------------------------------------------


def base_ref(image: dict) -> str:
    base = image["base"]
    return f"localhost/pitfall-base:{base['debootstrap']}" if "debootstrap" in base else base["image"]


def ensure_base(engine: Engine, image: dict, log: Path) -> str | None:
    """A debootstrap'd Debian suite imported as an image (no registry needed); None when it
    worked, else the error."""
    base = image["base"]
    if "debootstrap" not in base:
        return None  # pulled by the build from its registry
    ref = base_ref(image)
    if engine.has_image(ref):
        return None
    suite = base["debootstrap"]
    rootfs = engine.cache / "bases" / f"{suite}.rootfs"
    if not engine.dry_run and not (rootfs / "usr" / "bin" / "apt-get").exists():
        remove_inside(rootfs, engine.cache)
        if shutil.which("debootstrap") is None:
            return "debootstrap is not on PATH (`ci/setup.sh --matrix` installs it)"
    if engine.dry_run or not (rootfs / "usr" / "bin" / "apt-get").exists():
        print(f"  base {suite}: debootstrap --variant=minbase (about a minute)", flush=True)
        rc = engine.run_logged(["debootstrap", "--variant=minbase", suite, str(rootfs), DEBIAN_MIRROR], log)
        if rc != 0:
            return f"debootstrap {suite} failed (exit {rc}): {first_error(log_tail(log, 40))}"
    if engine.dry_run:
        print(f"  $ tar -C {rootfs} -c . | {engine.name} import - {ref}")
        return None
    for cache_dir in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for f in (rootfs / cache_dir).glob("*"):
            if f.is_file():
                f.unlink()
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    rc = engine.run_logged(engine.cmd("import", "-", ref), log, stdin=tar.stdout)
    tar.stdout.close()
    if tar.wait() != 0 or rc != 0:
        return f"importing {suite} failed: {first_error(log_tail(log))}"
    remove_inside(rootfs, engine.cache)  # the image holds it now
    return None


def image_inputs(name: str, image: dict) -> dict:
    """Everything an image is made from; its hash tags the image."""
    return {"name": name, "containerfile": CONTAINERFILE.read_text(), "base": base_ref(image),
            "apt_components": image.get("apt_components", "main"), "apt_packages": image["apt_packages"],
            "wheels": image.get("wheels", {}), "cudnn_mix": image.get("cudnn_mix", ""),
            "wheel_toolkit": image.get("wheel_toolkit", "")}


def image_ref(name: str, image: dict) -> str:
    digest = hashlib.sha256(json.dumps(image_inputs(name, image), sort_keys=True).encode()).hexdigest()[:16]
    return f"localhost/pitfall-cell-{name.lower()}:{digest}"


def fetch_wheels(engine: Engine, image: dict, context: Path, log: Path) -> str | None:
    """Downloads the image's wheels into the cache (once) and lays them out in the build context."""
    wheel_cache = engine.cache / "wheels"
    (context / "wheels").mkdir(parents=True, exist_ok=True)
    lines = []
    for prefix, spec in wheel_specs(image):
        package, version = spec.split("==", 1)
        stem = package.replace("-", "_") + "-" + version + "-"
        found = sorted(wheel_cache.glob(stem + "*.whl"))
        if not found:
            argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--platform", "manylinux_2_27_x86_64", "--platform", "manylinux_2_17_x86_64",
                    "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64",
                    "--python-version", "3.11", "-d", str(wheel_cache), spec]
            print(f"  wheel {spec}: downloading", flush=True)
            if engine.run_logged(argv, log) != 0:
                return f"pip download {spec} failed: {first_error(log_tail(log))}"
            found = sorted(wheel_cache.glob(stem + "*.whl"))
            if not found and not engine.dry_run:
                return f"pip download {spec} left no wheel named {stem}*.whl"
        if found:
            target = context / "wheels" / found[0].name
            if not target.exists():
                os.link(found[0], target) if found[0].stat().st_dev == context.stat().st_dev else shutil.copy(found[0], target)
            lines.append(f"{prefix} {found[0].name}")
    (context / "wheels" / "prefixes.txt").write_text("".join(l + "\n" for l in lines))
    return None


def ensure_image(engine: Engine, name: str, image: dict, log: Path) -> tuple[str, str | None, bool]:
    """(reference, error or None, built now)."""
    ref = image_ref(name, image)
    if engine.has_image(ref):
        return ref, None, False
    error = ensure_base(engine, image, log)
    if error:
        return ref, error, False
    context = engine.cache / "contexts" / name
    if not engine.dry_run:
        remove_inside(context, engine.cache)
        context.mkdir(parents=True)
        error = fetch_wheels(engine, image, context, log)
        if error:
            return ref, error, False
        shutil.copy(CONTAINERFILE, context / "Containerfile")
    base = image["base"]
    args = {"BASE_IMAGE": base_ref(image), "DEBIAN_SUITE": base.get("debootstrap", ""),
            "APT_COMPONENTS": image.get("apt_components", "main"), "APT_PACKAGES": " ".join(image["apt_packages"]),
            "CUDNN_MIX": image.get("cudnn_mix", ""), "WHEEL_TOOLKIT": image.get("wheel_toolkit", "")}
    argv = engine.cmd("build", "-f", str(context / "Containerfile"), "-t", ref)
    if engine.name == "podman":
        argv += ["--format", "docker"]  # an OCI image ignores SHELL, and the RUN steps need bash
    for k, v in args.items():
        argv += ["--build-arg", f"{k}={v}"]
    argv.append(str(context))
    print(f"  image {name}: building {ref} (a Debian toolkit image took 5-10 minutes here; log {log})", flush=True)
    rc = engine.run_logged(argv, log)
    if rc != 0:
        return ref, f"{engine.name} build failed (exit {rc}): {first_error(log_tail(log, 60))}", True
    return ref, None, True


# ---- cells -------------------------------------------------------------------------------


def build_key(cell: dict, image: str, scenarios: list[str]) -> str:
    """Cells that build alike (image content, compiler, flags, cuDNN headers, architectures,
    scenarios) share one build folder: the second one's build is a no-op."""
    facts = [image, cell["host_compiler"], cell.get("cuda_flags", []), cell["cudnn"]["build"],
             cell["cuda_architectures"], cell["cuda"]["nvcc"], scenarios]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]


def run_argv(engine: Engine, cell: dict, ref: str, cell_dir: Path, build_dir: Path, args) -> list[str]:
    argv = engine.cmd("run", "--rm", "--network=none", "--read-only", "--tmpfs", "/tmp:rw,exec,size=4g",
                      "--memory", args.memory, "--pids-limit", "4096", "--security-opt", "label=disable",
                      "-v", f"{SOURCE_DIR}:/src:ro", "-v", f"{cell_dir}:/out", "-v", f"{build_dir}:/build",
                      "-e", "HOME=/tmp", "-e", "PITFALL_CELL=/out/cell-spec.json")
    if engine.name == "podman":
        argv[2:2] = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"]
    for mount in cell.get("mounts", []):
        argv += ["-v", f"{mount}:{mount}:ro"]
    for hidden in cell.get("hide_files", []):
        # An empty file where the library was: the loader finds it and cannot load it, as on a
        # machine whose driver package is missing.
        argv += ["-v", f"/dev/null:{hidden}:ro"]
    if args.gpu:
        argv += ["--device", "nvidia.com/gpu=all"] if engine.name == "podman" else ["--gpus", "all"]
    argv += [ref, "python3", "/src/containers/cell_entry.py"]
    return argv


def judge_cell(cell: dict, outcome: dict) -> list[str]:
    """What differs from the cell's expectation in ci/matrix.json (empty: as expected)."""
    expect, problems = cell["expect"], []
    if outcome.get("outcome") != expect["outcome"]:
        problems.append(f"outcome {outcome.get('outcome')}, expected {expect['outcome']}")
    if "stage" in expect and outcome.get("stage") != expect["stage"]:
        problems.append(f"stage {outcome.get('stage')}, expected {expect['stage']}")
    if "message_contains" in expect and expect["message_contains"].lower() not in str(outcome.get("message", "")).lower():
        problems.append(f"message does not say '{expect['message_contains']}'")
    if "cuda_error" in expect and outcome.get("cuda_error") != expect["cuda_error"]:
        problems.append(f"first CUDA call {outcome.get('cuda_error')}, expected {expect['cuda_error']}")
    if "doctor" in expect:
        doctor = outcome.get("doctor") if isinstance(outcome.get("doctor"), dict) else {}
        errors = doctor.get("errors") if isinstance(doctor.get("errors"), list) else []
        missing = [i for i in expect["doctor"] if i not in errors]
        if missing:
            problems.append(f"pitfall doctor's errors {errors or doctor.get('error', 'none')}, "
                            f"expected {', '.join(missing)} among them")
    if "model" in expect or "profile" in expect or "run_exit_code" in expect:
        problems += judge_gpu_run(expect, outcome)
        if problems:
            problems += doctor_says(outcome)
    return problems


def judge_gpu_run(expect: dict, outcome: dict) -> list[str]:
    """A GPU runner's cell: `pitfall run` ran and exited as expected, a GPU answered, it is the
    declared model, and the run chose the declared profile. A broken driver ends in profile
    no-gpu with every CUDA case UNSUPPORTED and `pitfall run` exiting 0: that is red here."""
    if "run_exit_code" not in outcome:
        return ["no run: pitfall run never started, so no GPU answered"]
    problems = []
    code = outcome.get("run_exit_code")
    if "run_exit_code" in expect and code != expect["run_exit_code"]:
        meaning = RUN_EXIT_MEANING.get(code) or (f"killed by signal {-code}" if isinstance(code, int) and code < 0 else "")
        problems.append(f"pitfall run exited {code}" + (f" ({meaning})" if meaning else "") + f", expected {expect['run_exit_code']}")
    facts = outcome.get("fingerprint")
    if not isinstance(facts, dict):
        return problems + ["no fingerprint: the run left no summary.json, so no GPU answered"]
    gpu_count, cuda_error = facts.get("gpu_count"), facts.get("cuda_error")
    answered = isinstance(gpu_count, int) and not isinstance(gpu_count, bool) and gpu_count > 0 and not cuda_error
    if not answered:
        problems.append(f"no GPU answered (gpu_count {gpu_count if gpu_count is not None else 'unknown'}"
                        + (f", first CUDA call {cuda_error}" if cuda_error else "") + ")")
    if "model" in expect and answered:
        name = facts.get("device_name")
        if not isinstance(name, str) or not name:
            problems.append(f"no device name in the run's fingerprint, expected one containing '{expect['model']}'")
        elif not names_model(name, expect["model"]):
            problems.append(f"device '{name}', expected one containing '{expect['model']}'")
    if "profile" in expect:
        profile = outcome.get("profile") if isinstance(outcome.get("profile"), dict) else {}
        chosen = profile.get("name")
        if chosen != expect["profile"]:
            reason = profile.get("reason")
            problems.append(f"profile {chosen or 'none recorded'}" + (f" ({reason})" if reason else "")
                            + f", expected {expect['profile']}")
    return problems


def names_model(device_name: str, model: str) -> bool:
    """Whether the device name has the model as a word of its own: "NVIDIA L4" is an L4,
    "NVIDIA L40S" is not (both sm_89, both matched by ada-ampere-cuda12: the name is what tells
    them apart); "NVIDIA H100 80GB HBM3" is an H100. Case as the driver writes it."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(model)}(?![A-Za-z0-9])", device_name) is not None


def doctor_says(outcome: dict) -> list[str]:
    """What `pitfall doctor` found in the cell (cell_entry.py records it before the run), for a
    judgement that failed: why no GPU answered, in the doctor's words."""
    doctor = outcome.get("doctor")
    if not isinstance(doctor, dict):
        return []
    if doctor.get("error"):
        return [f"pitfall doctor gave no diagnosis (exit {doctor.get('exit_code')}): {doctor['error']}"]
    errors = [e for e in doctor.get("errors", []) if isinstance(e, str)] if isinstance(doctor.get("errors"), list) else []
    headline = doctor.get("headline") if isinstance(doctor.get("headline"), str) else ""
    if not headline and not errors:
        return []
    return ["pitfall doctor: " + (headline or "errors") + (f" [{', '.join(errors)}]" if errors else "")]


def run_cell(engine: Engine, doc: dict, cell: dict, ref: str, image_error: str | None, args, out: Path) -> dict:
    cell_dir = out / "cells" / cell["id"]
    if not args.dry_run:
        if cell_dir.exists() or cell_dir.is_symlink():
            remove_inside(cell_dir, out)
        (cell_dir / "logs").mkdir(parents=True, exist_ok=True)
        _write_atomically(cell_dir / "cell-spec.json", json.dumps(cell_spec(doc, cell, args.scenarios, args.jobs, ref), indent=2) + "\n")
    started = time.monotonic()

    def finish(outcome: dict) -> dict:
        outcome.setdefault("id", cell["id"])
        outcome["cell"] = cell
        outcome["image"] = {"name": cell["image"], "ref": ref}
        outcome["wall_seconds"] = round(time.monotonic() - started, 1)
        outcome["expectation_problems"] = judge_cell(cell, outcome)
        _write_atomically(cell_dir / "cell.json", json.dumps(outcome, indent=2) + "\n")
        return outcome

    if image_error and not args.dry_run:
        return finish({"outcome": "image_build_failed", "stage": "image", "message": image_error})
    missing = [m for m in cell.get("mounts", []) if not Path(m).exists()]
    if missing and not args.dry_run:
        return finish({"outcome": "skipped", "stage": "mounts", "message": f"{', '.join(missing)} is not on this host"})
    build_dir = engine.cache / "builds" / build_key(cell, engine.image_id(ref), args.scenarios)
    if not args.dry_run:
        build_dir.mkdir(parents=True, exist_ok=True)
    log = cell_dir / "logs" / "container.log"
    rc = engine.run_logged(run_argv(engine, cell, ref, cell_dir, build_dir, args), log)
    if args.dry_run:
        return {"id": cell["id"], "outcome": "dry-run"}
    try:
        outcome = read_json(cell_dir / "cell.json")
        if not isinstance(outcome, dict):
            raise BadInput(f"{cell_dir / 'cell.json'}: expected an object")
    except BadInput:
        return finish({"outcome": "container_failed", "stage": "container", "exit_code": rc,
                       "message": f"the container exited {rc} without writing cell.json: {first_error(log_tail(log, 20))}"})
    return finish(outcome)


def describe(outcome: dict) -> str:
    text = outcome.get("outcome", "?")
    if outcome.get("stage") and outcome.get("outcome") != "ran":
        text += f" at {outcome['stage']}"
    if outcome.get("outcome") == "ran":
        # A run where a device answered records no CUDA error (null): "none", not "None".
        cuda_error = outcome.get("cuda_error", "?") or "none"
        text += f" (first CUDA call: {cuda_error}; {outcome.get('verdicts_text', '')})"
    elif outcome.get("message"):
        text += f": {outcome['message'][:160]}"
    return text


# ---- commands ----------------------------------------------------------------------------


def lock_cache(cache: Path):
    """One matrix run (or image build) at a time per cache: they share images, build folders
    and build contexts. Returns the open lock file (held until the process ends)."""
    import fcntl
    cache.mkdir(parents=True, exist_ok=True)
    lock = open(cache / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"pitfall matrix: waiting for another matrix run that holds {cache}/.lock", file=sys.stderr, flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def cache_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    if os.environ.get("PITFALL_CACHE"):
        return Path(os.environ["PITFALL_CACHE"]).resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "pitfall" / "matrix"


def cell_spec(doc: dict, cell: dict, scenarios: list[str], jobs: int, ref: str, local_image: bool = True) -> dict:
    """What containers/cell_entry.py reads: the cell, its image's CMake arguments and library
    paths (a local image's wheels; a GPU runner's nvidia/cuda image needs none), the probe
    architectures and the selection."""
    image = doc["images"][cell["image"]] if local_image else {}
    return {"id": cell["id"], "cell": cell,
            "image": {"name": cell["image"], "ref": ref, "cmake_args": image.get("cmake_args", []),
                      "library_path": image.get("library_path", [])},
            "probe_architectures": doc.get("probe_architectures", []), "scenarios": scenarios, "jobs": jobs}


def gpu_runner_cell(cell: dict, gpu: str) -> dict:
    """The cell as a GPU runner labelled `gpu` runs it: in its nvidia/cuda image, with that
    image's toolkit, compiler and cuDNN (or the cell's cuDNN wheel), the GPU attached; nothing
    hidden or mounted. It is expected to see that GPU: `pitfall run` exits 0, a device of the
    declared model answers and the run chooses the declared profile (judge_cell)."""
    runner = cell.get("gpu_runner")
    if runner is None:
        raise BadInput(f"cell '{cell['id']}' has no gpu_runner entry (it runs only in a local container)")
    if gpu not in runner["gpus"]:
        raise BadInput(f"--gpu {gpu}: cell '{cell['id']}' declares no GPU runner labelled '{gpu}' "
                       f"(its gpu_runner.gpus: {', '.join(runner['gpus'])})")
    out = {k: v for k, v in cell.items()
           if k not in ("hide_files", "mounts", "expect", "stub_driver_on_path")}
    out["host_compiler"] = runner["host_compiler"]
    out["cuda"] = dict(cell["cuda"], nvcc=runner["nvcc"], source=f"{runner['image']} (GPU runner)")
    out["cudnn"] = dict(cell["cudnn"], build=runner["cudnn_build"], run=runner["cudnn_run"])
    declared = runner["gpus"][gpu]
    out["expect"] = {"outcome": "ran", "run_exit_code": 0, "gpu": gpu, "model": declared["model"],
                     "profile": declared["profile"]}
    return out


def runner_image(cell: dict) -> str:
    runner = cell["gpu_runner"]
    return runner["image"] + (f"@{runner['digest']}" if runner.get("digest") else "")


def runner_cells(doc: dict) -> list[dict]:
    """One entry per (cell, GPU runner label): what a CI job needs to run and judge it."""
    return [{"id": c["id"], "image": runner_image(c), "gpu": label, "model": gpu["model"], "profile": gpu["profile"]}
            for c in doc["cells"] if "gpu_runner" in c for label, gpu in c["gpu_runner"]["gpus"].items()]


def command_runner_cells(doc: dict, gpus: list[str]) -> int:
    """The GPU-runner matrix for CI, one line of JSON: [{"id", "image", "gpu", "model",
    "profile"}], images by digest once pinned; with --gpus, only the runners with those labels."""
    entries = runner_cells(doc)
    unknown = [g for g in gpus if g not in {e["gpu"] for e in entries}]
    if unknown:
        raise BadInput(f"--gpus: no cell declares a GPU runner labelled {', '.join(unknown)} "
                       f"(labels: {', '.join(sorted({e['gpu'] for e in entries}))})")
    print(json.dumps([e for e in entries if not gpus or e["gpu"] in gpus]))
    return EXIT_OK


def command_spec(doc: dict, cells: list[dict], args) -> int:
    if len(cells) != 1:
        raise BadInput("spec needs exactly one cell: --cells ID")
    if args.gpu_runner and not args.gpu:
        labels = ", ".join(cells[0].get("gpu_runner", {}).get("gpus", {})) or "none"
        raise BadInput(f"spec --gpu-runner needs --gpu LABEL, the runner's GPU label (cell '{cells[0]['id']}': {labels})")
    if args.gpu and not args.gpu_runner:
        raise BadInput("--gpu LABEL is for a GPU runner's cell: add --gpu-runner")
    cell = gpu_runner_cell(cells[0], args.gpu) if args.gpu_runner else cells[0]
    image = runner_image(cells[0]) if args.gpu_runner else cell["image"]
    if args.install_wheels:
        # On a GPU runner (whose pip reaches the package index): the cell's cuDNN wheels, each
        # into the prefix the cell's cudnn paths name.
        for prefix, spec in sorted(cells[0].get("gpu_runner", {}).get("wheels", {}).items()):
            argv = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", f"/opt/pitfall/{prefix}", spec]
            print("$ " + " ".join(argv), flush=True)
            if subprocess.run(argv).returncode != 0:
                raise BadInput(f"--install-wheels: pip install {spec} failed")
    out = Path(args.out)
    spec = cell_spec(doc, cell, args.scenarios, args.jobs, image, local_image=not args.gpu_runner)
    _write_atomically(out / "cell-spec.json", json.dumps(spec, indent=2) + "\n")
    print(out / "cell-spec.json")
    return EXIT_OK


def command_judge(cells: list[dict], args) -> int:
    """A cell folder made outside `matrix run` (a GPU runner's job): its cell.json judged
    against the expectation for that cell on that GPU in the matrix file (--gpu LABEL), else
    against the one in its cell-spec.json; exit 1 when it differs."""
    if len(cells) != 1 or not args.cell_dir:
        raise BadInput("judge needs one cell and its folder: judge --cells ID --gpu LABEL --cell-dir DIR")
    folder = Path(args.cell_dir)
    try:
        spec = read_json(folder / "cell-spec.json")
    except BadInput as e:
        raise BadInput(f"--cell-dir {folder}: no readable cell-spec.json ({e})") from e
    if not isinstance(spec, dict) or not isinstance(spec.get("id"), str) or not isinstance(spec.get("cell"), dict) \
            or not isinstance(spec["cell"].get("expect", {}), dict):
        raise BadInput(f"{folder / 'cell-spec.json'}: expected an object with 'id' (a string) and 'cell' (an object)")
    if spec["id"] != cells[0]["id"]:
        raise BadInput(f"{folder / 'cell-spec.json'}: written for cell '{spec['id']}', judged as --cells {cells[0]['id']}")
    expected_cell = spec["cell"]
    if args.gpu:
        # The matrix file is the expectation, not what the job wrote; a spec written for
        # another GPU is a mistake in the job, not a result.
        expected_cell = gpu_runner_cell(cells[0], args.gpu)
        written_for = spec["cell"].get("expect", {}).get("gpu")
        if written_for is not None and written_for != args.gpu:
            raise BadInput(f"{folder / 'cell-spec.json'}: written for GPU '{written_for}', judged as --gpu {args.gpu}")
    try:
        outcome = read_json(folder / "cell.json")
        if not isinstance(outcome, dict):
            raise BadInput(f"{folder / 'cell.json'}: expected an object")
    except BadInput as e:
        outcome = {"id": spec["id"], "outcome": "container_failed", "stage": "container",
                   "message": f"the cell wrote no readable cell.json ({e})"}
    outcome.setdefault("cell", spec["cell"])
    if args.gpu:
        outcome["gpu"] = args.gpu
    outcome["expectation_problems"] = judge_cell(expected_cell, outcome)
    _write_atomically(folder / "cell.json", json.dumps(outcome, indent=2) + "\n")
    print(f"{spec['id']}{f' on {args.gpu}' if args.gpu else ''}: {describe(outcome)}; "
          + ("as expected" if not outcome["expectation_problems"]
             else "NOT AS EXPECTED: " + "; ".join(outcome["expectation_problems"])))
    return EXIT_DIFFERS if outcome["expectation_problems"] else EXIT_OK


def command_list(doc: dict, as_json: bool) -> int:
    if as_json:
        print(json.dumps(doc["cells"], indent=2))
        return EXIT_OK
    for c in doc["cells"]:
        print(f"{c['id']:36} CUDA {c['cuda']['version']:5} cuDNN {c['cudnn']['version']:28} {c['host_compiler']:7} "
              f"{';'.join(c['cuda_architectures'])}  expect {c['expect']['outcome']}")
        print(f"{'':36} image {c['image']}; {c.get('doc', '')}")
    return EXIT_OK


def command_images(engine: Engine, doc: dict, cells: list[dict]) -> int:
    failed = 0
    for name in dict.fromkeys(c["image"] for c in cells):
        log = engine.cache / "logs" / f"image-{name}.log"
        ref, error, built = ensure_image(engine, name, doc["images"][name], log)
        print(f"image {name}: {ref} " + (f"FAILED: {error}" if error else "built" if built else "cached"), flush=True)
        failed += error is not None
    return EXIT_DIFFERS if failed else EXIT_OK


def command_run(engine: Engine, doc: dict, cells: list[dict], args) -> int:
    out = Path(args.out).resolve()
    if not args.dry_run:
        try:
            (out / "cells").mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BadInput(f"--out {args.out}: cannot create: {e.strerror}") from e
    images: dict[str, tuple[str, str | None]] = {}
    results = []
    t0 = time.monotonic()
    for i, cell in enumerate(cells, 1):
        name = cell["image"]
        if name not in images:
            log = out / "images" / f"{name}.log"
            t_img = time.monotonic()
            ref, error, built = ensure_image(engine, name, doc["images"][name], log)
            images[name] = (ref, error)
            state = "FAILED" if error else ("would be built" if engine.dry_run and built else "built" if built else "cached")
            print(f"  image {name}: {state} ({time.monotonic() - t_img:.0f} s)", flush=True)
        ref, error = images[name]
        print(f"[{i}/{len(cells)}] {cell['id']}: CUDA {cell['cuda']['version']}, cuDNN {cell['cudnn']['version']}, "
              f"{cell['host_compiler']} ... (stage logs: {out}/cells/{cell['id']}/logs/)", flush=True)
        outcome = run_cell(engine, doc, cell, ref, error, args, out)
        results.append(outcome)
        if not args.dry_run:
            mark = "as expected" if not outcome["expectation_problems"] else "NOT AS EXPECTED: " + "; ".join(outcome["expectation_problems"])
            print(f"[{i}/{len(cells)}] {cell['id']}: {describe(outcome)} in {outcome['wall_seconds']:.0f} s, {mark}", flush=True)
    if args.dry_run:
        print(f"  $ {args.pitfall} report --merge --format html --out {out}/matrix.html {out}/cells/<cell>...")
        return EXIT_OK
    summary = {"schema": "pitfall.matrix-run/1", "wall_seconds": round(time.monotonic() - t0, 1),
               "cells": [{k: r.get(k) for k in ("id", "outcome", "stage", "message", "cuda_error", "archs_built",
                                                 "expectation_problems", "wall_seconds")} for r in results]}
    _write_atomically(out / "matrix.json", json.dumps(summary, indent=2) + "\n")
    cell_dirs = [str(out / "cells" / c["id"]) for c in cells]
    for fmt, name in (("html", "matrix.html"), ("markdown", "matrix.md")):
        rc = subprocess.run([args.pitfall, "report", "--merge", "--format", fmt, "--out", str(out / name), *cell_dirs]).returncode
        if rc != 0:
            print(f"pitfall matrix: error: rendering {name} failed (exit {rc})", file=sys.stderr)
            return EXIT_DIFFERS
    differing = [r["id"] for r in results if r["expectation_problems"]]
    print(f"matrix: {len(results)} cells in {summary['wall_seconds']:.0f} s; "
          f"{len(results) - len(differing)} as expected, {len(differing)} not" + (f" ({', '.join(differing)})" if differing else ""))
    print(f"matrix report: {out}/matrix.html, {out}/matrix.md, {out}/matrix.json")
    return EXIT_DIFFERS if differing else EXIT_OK


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return EXIT_OK if argv else EXIT_BAD_INPUT
    command, rest = argv[0], argv[1:]
    if command not in ("list", "images", "run", "spec", "runner-cells", "judge"):
        raise BadInput(f"unknown matrix command '{command}' (list, images, run, spec, runner-cells, judge)")
    p = argparse.ArgumentParser(prog=f"pitfall matrix {command}", add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--matrix", default=str(DEFAULT_MATRIX))
    p.add_argument("--cache")
    p.add_argument("--engine", default="podman", choices=("podman", "docker"))
    p.add_argument("--cells", default="")
    p.add_argument("--pitfall", default=os.environ.get("PITFALL_BINARY", "pitfall"))
    if command == "list":
        p.add_argument("--json", action="store_true")
    if command == "judge":
        p.add_argument("--cell-dir")
    if command in ("judge", "spec"):
        p.add_argument("--gpu", default="", help="the GPU runner's label")
    if command == "runner-cells":
        p.add_argument("--gpus", default="")
    if command == "spec":
        p.add_argument("--gpu-runner", action="store_true")
        p.add_argument("--install-wheels", action="store_true")
    if command in ("run", "spec"):
        p.add_argument("--out")
        p.add_argument("--scenarios", default="")
        p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    if command == "run":
        p.add_argument("--gpu", action="store_true")
        p.add_argument("--dry-run", action="store_true")
        p.add_argument("--memory", default="12g")
    def refuse(message: str):
        raise BadInput(f"`pitfall matrix {command}`: {message}")

    p.error = refuse  # one line naming the flag, not argparse's usage block
    args, unknown = p.parse_known_args(rest)
    if unknown:
        raise BadInput(f"unknown option '{unknown[0]}' for `pitfall matrix {command}`")
    if args.help:
        sys.stdout.write(USAGE)
        return EXIT_OK
    doc = load_matrix(Path(args.matrix))
    cells = select_cells(doc, [c for c in args.cells.split(",") if c])
    if command == "list":
        return command_list(doc, args.json)
    if command == "runner-cells":
        return command_runner_cells(doc, [g.strip() for g in args.gpus.split(",") if g.strip()])
    if command == "judge":
        return command_judge(cells, args)
    if command == "images":
        lock = lock_cache(cache_dir(args.cache))  # noqa: F841 (held until exit)
        return command_images(Engine(args.engine, cache_dir(args.cache), False), doc, cells)
    if not args.out and command == "run":
        # Like `pitfall run`'s reports/runs/<UTC timestamp>: git-ignored, one folder a matrix.
        args.out = str(SOURCE_DIR / "reports" / "matrix" / time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime()))
    if not args.out:
        raise BadInput(f"{command} needs --out DIR")
    if args.jobs < 1:
        raise BadInput(f"--jobs {args.jobs}: expected a number >= 1")
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    for s in args.scenarios:
        if not re.fullmatch(SCENARIO_NAME, s):
            raise BadInput(f"--scenarios: {s!r} is not a scenario name ([a-z][a-z0-9_]*)")
    if command == "spec":
        return command_spec(doc, cells, args)
    if not args.dry_run:
        lock = lock_cache(cache_dir(args.cache))  # noqa: F841 (held until exit)
    engine = Engine(args.engine, cache_dir(args.cache), args.dry_run)
    return command_run(engine, doc, cells, args)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `pitfall matrix list | head` ends quietly
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"pitfall matrix: error: {e} (see `pitfall matrix --help`)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        print("pitfall matrix: interrupted; finished cells are kept", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
