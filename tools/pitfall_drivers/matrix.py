"""pitfall matrix: the CUDA/cuDNN matrix (ci/matrix.json) run in containers, one cell at a time.

`pitfall matrix` runs this module (through tools/pitfall-matrix). Each cell's image (a toolkit,
host compilers, cuDNN; see containers/cell.Containerfile and containers.py) is built once and
reused until its inputs change; each cell's container builds pitfall from the source tree
mounted read-only and runs `pitfall run` with no network, a read-only root and resource limits
(containers/cell_entry.py), writing into the cell's folder. A cell that fails (image build,
compiler, architecture, build, run) is an outcome recorded in its cell.json, never an abort of
the matrix. The merged report comes last.

Exit status: 0 every cell's outcome is the one ci/matrix.json expects of it, 1 some cell's is
not, 2 bad usage or bad input (a malformed matrix file, an unknown cell, no container engine),
130 interrupted (finished cells are kept).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from . import TREE
from .cli import EXIT_DIFFERS, EXIT_OK, EXIT_USAGE, BadInput, Parser, parse, run_main
from .containers import Engine, ensure_image, first_error, log_tail, remove_inside
from .files import read_json, write_atomically
from .matrix_file import DEFAULT_MATRIX, load_matrix, runner_cells, runner_image, select_cells

SCENARIO_NAME = r"[a-z][a-z0-9_]{0,99}"
# What `pitfall run`'s exit status says (pitfall help run), for a judgement's text.
RUN_EXIT_MEANING = {0: "every case met its baseline", 1: "some case did not meet its baseline",
                    2: "bad usage or bad input", 130: "interrupted"}
COMMANDS = ("list", "images", "run", "spec", "runner-cells", "judge")
# Each command's own flags beyond the common ones: (flag, argparse options, the commands).
FLAGS = [
    ("--json", {"action": "store_true"}, ("list",)),
    ("--cell-dir", {}, ("judge",)),
    ("--gpu", {"default": "", "help": "the GPU runner's label"}, ("judge", "spec")),
    ("--gpus", {"default": ""}, ("runner-cells",)),
    ("--gpu-runner", {"action": "store_true"}, ("spec",)),
    ("--install-wheels", {"action": "store_true"}, ("spec",)),
    ("--out", {}, ("run", "spec")),
    ("--scenarios", {"default": ""}, ("run", "spec")),
    ("--jobs", {"type": int, "default": os.cpu_count() or 2}, ("run", "spec")),
    ("--gpu", {"action": "store_true"}, ("run",)),
    ("--dry-run", {"action": "store_true"}, ("run",)),
    ("--memory", {"default": "12g"}, ("run",)),
]

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
                      "-v", f"{TREE}:/src:ro", "-v", f"{cell_dir}:/out", "-v", f"{build_dir}:/build",
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


def run_cell(engine: Engine, doc: dict, cell: dict, ref: str, image_error: str | None, args, out: Path) -> dict:
    cell_dir = out / "cells" / cell["id"]
    if not args.dry_run:
        if cell_dir.exists() or cell_dir.is_symlink():
            remove_inside(cell_dir, out)
        (cell_dir / "logs").mkdir(parents=True, exist_ok=True)
        write_atomically(cell_dir / "cell-spec.json", json.dumps(cell_spec(doc, cell, args.scenarios, args.jobs, ref), indent=2) + "\n")
    started = time.monotonic()

    def finish(outcome: dict) -> dict:
        outcome.setdefault("id", cell["id"])
        outcome["cell"] = cell
        outcome["image"] = {"name": cell["image"], "ref": ref}
        outcome["wall_seconds"] = round(time.monotonic() - started, 1)
        outcome["expectation_problems"] = judge_cell(cell, outcome)
        write_atomically(cell_dir / "cell.json", json.dumps(outcome, indent=2) + "\n")
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


# ---- judging a cell ----------------------------------------------------------------------


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
    problems = _run_exit_problems(expect, outcome.get("run_exit_code"))
    facts = outcome.get("fingerprint")
    if not isinstance(facts, dict):
        return problems + ["no fingerprint: the run left no summary.json, so no GPU answered"]
    return problems + _device_problems(expect, facts) + _profile_problems(expect, outcome)


def _run_exit_problems(expect: dict, code) -> list[str]:
    if "run_exit_code" not in expect or code == expect["run_exit_code"]:
        return []
    meaning = RUN_EXIT_MEANING.get(code) or (f"killed by signal {-code}" if isinstance(code, int) and code < 0 else "")
    return [f"pitfall run exited {code}" + (f" ({meaning})" if meaning else "") + f", expected {expect['run_exit_code']}"]


def _device_problems(expect: dict, facts: dict) -> list[str]:
    """A GPU answered (a device counted, no CUDA error) and, where declared, it is the model."""
    gpu_count, cuda_error = facts.get("gpu_count"), facts.get("cuda_error")
    answered = isinstance(gpu_count, int) and not isinstance(gpu_count, bool) and gpu_count > 0 and not cuda_error
    if not answered:
        return [f"no GPU answered (gpu_count {gpu_count if gpu_count is not None else 'unknown'}"
                + (f", first CUDA call {cuda_error}" if cuda_error else "") + ")"]
    if "model" not in expect:
        return []
    name = facts.get("device_name")
    if not isinstance(name, str) or not name:
        return [f"no device name in the run's fingerprint, expected one containing '{expect['model']}'"]
    if not names_model(name, expect["model"]):
        return [f"device '{name}', expected one containing '{expect['model']}'"]
    return []


def _profile_problems(expect: dict, outcome: dict) -> list[str]:
    if "profile" not in expect:
        return []
    profile = outcome.get("profile") if isinstance(outcome.get("profile"), dict) else {}
    chosen = profile.get("name")
    if chosen == expect["profile"]:
        return []
    reason = profile.get("reason")
    return [f"profile {chosen or 'none recorded'}" + (f" ({reason})" if reason else "") + f", expected {expect['profile']}"]


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


# ---- commands ----------------------------------------------------------------------------


def lock_cache(cache: Path):
    """One matrix run (or image build) at a time per cache: they share images, build folders
    and build contexts. Returns the open lock file (held until the process ends)."""
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


def make_folder(folder: Path, out_flag: str | None = None) -> Path:
    """`folder` made where missing (--out of `spec` and `run`); BadInput naming --out if it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"--out {out_flag or folder}: cannot create: {e.strerror}") from e
    return folder


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
    out = make_folder(Path(args.out))
    spec = cell_spec(doc, cell, args.scenarios, args.jobs, image, local_image=not args.gpu_runner)
    write_atomically(out / "cell-spec.json", json.dumps(spec, indent=2) + "\n")
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
    write_atomically(folder / "cell.json", json.dumps(outcome, indent=2) + "\n")
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


def command_images(args, doc: dict, cells: list[dict]) -> int:
    lock = lock_cache(cache_dir(args.cache))  # noqa: F841 (held until the command ends)
    engine = Engine(args.engine, cache_dir(args.cache), False)
    failed = 0
    for name in dict.fromkeys(c["image"] for c in cells):
        log = engine.cache / "logs" / f"image-{name}.log"
        ref, error, built = ensure_image(engine, name, doc["images"][name], log)
        print(f"image {name}: {ref} " + (f"FAILED: {error}" if error else "built" if built else "cached"), flush=True)
        failed += error is not None
    return EXIT_DIFFERS if failed else EXIT_OK


def command_run(args, doc: dict, cells: list[dict]) -> int:
    lock = None if args.dry_run else lock_cache(cache_dir(args.cache))  # noqa: F841 (held until the run ends)
    engine = Engine(args.engine, cache_dir(args.cache), args.dry_run)
    out = Path(args.out).resolve()
    if not args.dry_run:
        make_folder(out / "cells", args.out)
    images: dict[str, tuple[str, str | None]] = {}
    t0 = time.monotonic()
    results = [run_one(engine, doc, cell, f"[{i}/{len(cells)}]", images, args, out) for i, cell in enumerate(cells, 1)]
    if args.dry_run:
        print(f"  $ {args.pitfall} report --merge --format html --out {out}/matrix.html {out}/cells/<cell>...")
        return EXIT_OK
    return merge_cells(out, cells, results, round(time.monotonic() - t0, 1), args.pitfall)


def run_one(engine: Engine, doc: dict, cell: dict, counter: str, images: dict, args, out: Path) -> dict:
    """One cell of `matrix run`: its image (built once for all the cells that use it), its
    container, its line."""
    name = cell["image"]
    if name not in images:
        t_img = time.monotonic()
        ref, error, built = ensure_image(engine, name, doc["images"][name], out / "images" / f"{name}.log")
        images[name] = (ref, error)
        state = "FAILED" if error else ("would be built" if engine.dry_run and built else "built" if built else "cached")
        print(f"  image {name}: {state} ({time.monotonic() - t_img:.0f} s)", flush=True)
    ref, error = images[name]
    print(f"{counter} {cell['id']}: CUDA {cell['cuda']['version']}, cuDNN {cell['cudnn']['version']}, "
          f"{cell['host_compiler']} ... (stage logs: {out}/cells/{cell['id']}/logs/)", flush=True)
    outcome = run_cell(engine, doc, cell, ref, error, args, out)
    if not args.dry_run:
        problems = outcome["expectation_problems"]
        mark = "as expected" if not problems else "NOT AS EXPECTED: " + "; ".join(problems)
        print(f"{counter} {cell['id']}: {describe(outcome)} in {outcome['wall_seconds']:.0f} s, {mark}", flush=True)
    return outcome


def merge_cells(out: Path, cells: list[dict], results: list[dict], wall_seconds: float, pitfall: str) -> int:
    """DIR/matrix.json, then the merged report of the cell folders (matrix.html, matrix.md)."""
    summary = {"schema": "pitfall.matrix-run/1", "wall_seconds": wall_seconds,
               "cells": [{k: r.get(k) for k in ("id", "outcome", "stage", "message", "cuda_error", "archs_built",
                                                 "expectation_problems", "wall_seconds")} for r in results]}
    write_atomically(out / "matrix.json", json.dumps(summary, indent=2) + "\n")
    cell_dirs = [str(out / "cells" / c["id"]) for c in cells]
    for fmt, name in (("html", "matrix.html"), ("markdown", "matrix.md")):
        rc = subprocess.run([pitfall, "report", "--merge", "--format", fmt, "--out", str(out / name), *cell_dirs]).returncode
        if rc != 0:
            print(f"pitfall matrix: error: rendering {name} failed (exit {rc})", file=sys.stderr)
            return EXIT_DIFFERS
    differing = [r["id"] for r in results if r["expectation_problems"]]
    print(f"matrix: {len(results)} cells in {wall_seconds:.0f} s; "
          f"{len(results) - len(differing)} as expected, {len(differing)} not" + (f" ({', '.join(differing)})" if differing else ""))
    print(f"matrix report: {out}/matrix.html, {out}/matrix.md, {out}/matrix.json")
    return EXIT_DIFFERS if differing else EXIT_OK


def parser_for(command: str) -> Parser:
    p = Parser(prog=f"pitfall matrix {command}", add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--matrix", default=str(DEFAULT_MATRIX))
    p.add_argument("--cache")
    p.add_argument("--engine", default="podman", choices=("podman", "docker"))
    p.add_argument("--cells", default="")
    p.add_argument("--pitfall", default=os.environ.get("PITFALL_BINARY", "pitfall"))
    for flag, options, commands in FLAGS:
        if command in commands:
            p.add_argument(flag, **options)
    return p


def settle_build_flags(command: str, args) -> None:
    """--out (run: a new folder under reports/matrix/ by default), --jobs and --scenarios of the
    commands that build cells, checked before anything is built."""
    if not args.out and command == "run":
        # Like `pitfall run`'s reports/runs/<UTC timestamp>: git-ignored, one folder a matrix.
        args.out = str(TREE / "reports" / "matrix" / time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime()))
    if not args.out:
        raise BadInput(f"{command} needs --out DIR")
    if args.jobs < 1:
        raise BadInput(f"--jobs {args.jobs}: expected a number >= 1")
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    for s in args.scenarios:
        if not re.fullmatch(SCENARIO_NAME, s):
            raise BadInput(f"--scenarios: {s!r} is not a scenario name ([a-z][a-z0-9_]*)")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return EXIT_OK if argv else EXIT_USAGE
    command = argv[0]
    if command not in COMMANDS:
        raise BadInput(f"unknown matrix command '{command}' ({', '.join(COMMANDS)})")
    args = parse(parser_for(command), argv[1:])
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
        return command_images(args, doc, cells)
    settle_build_flags(command, args)
    if command == "spec":
        return command_spec(doc, cells, args)
    return command_run(args, doc, cells)


def run() -> None:
    """The script: tools/pitfall-matrix."""
    run_main("pitfall matrix", main, "interrupted; finished cells are kept")
