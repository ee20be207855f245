"""Tests of the matrix machinery: ci/matrix.json, its schema (reports/schema/matrix.schema.json)
and its checks, the driver's commands (tools/pitfall-matrix: dry run, spec, runner cells), the
merged report of cell folders (the real pitfall binary), the CI files (actionlint, hadolint,
GitLab in step with the matrix), and one real cell in a real container.

Environment: PITFALL_BIN (the pitfall binary), PITFALL_TOOLS (.tools/lint, where setup puts
actionlint and hadolint), PITFALL_MATRIX_OUT (the real cell's output folder).
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tools" / "pitfall-matrix"
MATRIX = json.loads((ROOT / "ci" / "matrix.json").read_text())
RUNNER_FIXTURES = ROOT / "ci" / "tests" / "fixtures" / "gpu-runner"

sys.path.insert(0, str(ROOT / "tools"))
from pitfall_drivers import containers, matrix, matrix_file  # noqa: E402


def drive(*args, env=None):
    return subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def write_matrix(doc) -> str:
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


class MatrixFile(unittest.TestCase):
    def test_the_real_matrix_is_valid_and_has_the_cells_the_issue_asks_for(self):
        doc = matrix.load_matrix(ROOT / "ci" / "matrix.json")
        by_id = {c["id"]: c for c in doc["cells"]}
        versions = {c["cuda"]["version"] for c in doc["cells"]}
        self.assertLessEqual({"11.8", "12.4", "13.0"}, versions)
        # Mismatch cells: a compiler too new for 11.8 and for 12.4, cuDNN built vs loaded,
        # sub-libraries mixed, and the driver library present vs hidden.
        self.assertEqual(by_id["cuda11.8-gcc12"]["expect"]["outcome"], "compile_failed")
        self.assertEqual(by_id["cuda12.4-gcc14"]["host_compiler"], "g++-14")
        self.assertIn("-allow-unsupported-compiler", by_id["cuda12.4-gcc14"]["cuda_flags"])
        loaded_older = by_id["cuda12.4-cudnn-loaded-older"]["cudnn"]
        self.assertNotEqual(loaded_older["build"].split("/")[3], loaded_older["run"].split("/")[3])
        self.assertIn("cudnn_mix", doc["images"][by_id["cuda12.4-cudnn-sublibraries-mixed"]["image"]])
        self.assertEqual(by_id["cuda12.4-no-driver-library"]["expect"]["cuda_error"], "cudaErrorInsufficientDriver")
        self.assertEqual(by_id["cuda12.4-gcc13"]["expect"]["cuda_error"], "cudaErrorNoDevice")
        # Each toolkit's architectures: sm_70 only before 13.x, sm_100 only from 13.x.
        for cell in doc["cells"]:
            archs = {matrix.re.match(r"\d+", a).group(0) for a in cell["cuda_architectures"]}
            major = int(cell["cuda"]["version"].split(".")[0])
            self.assertEqual("70" in archs, major < 13, cell["id"])
            self.assertEqual("100" in archs, major >= 13, cell["id"])

    def test_every_runner_profile_is_a_profile_under_expected_that_a_run_can_choose(self):
        # A runner that must match a profile no run can choose (missing, or an overlay, which is
        # never the chosen one) would be red on every GPU.
        for cell in MATRIX["cells"]:
            for label, gpu in cell.get("gpu_runner", {}).get("gpus", {}).items():
                where = f"{cell['id']} on {label}"
                profile_file = ROOT / "expected" / gpu["profile"] / "profile.json"
                self.assertTrue(profile_file.is_file(), f"{where}: no {profile_file}")
                profile = json.loads(profile_file.read_text())
                self.assertFalse(profile.get("overlay", False), f"{where}: {gpu['profile']} is an overlay")
                # The profile's own match must admit the cell's CUDA version.
                cuda = [int(x) for x in cell["cuda"]["version"].split(".")]
                runtime = cuda[0] * 1000 + cuda[1] * 10
                bounds = profile["match"].get("cuda_runtime_version", {})
                self.assertLessEqual(bounds.get("min", 0), runtime, where)
                self.assertGreaterEqual(bounds.get("max", 10**9), runtime, where)

    def assert_refused(self, doc, *needles):
        path = write_matrix(doc)
        try:
            r = drive("list", "--matrix", path)
        finally:
            os.unlink(path)
        self.assertEqual(r.returncode, 2, r.stderr)
        for needle in needles:
            self.assertIn(needle, r.stderr)
        return r

    def test_bad_matrix_files_are_refused_naming_the_file_and_field(self):
        self.assert_refused("{ not json", "not JSON", "line 1")
        broken = copy.deepcopy(MATRIX)
        del broken["cells"][0]["host_compiler"]
        self.assert_refused(broken, "cell 'cuda11.8-gcc11'", "missing field 'host_compiler'")
        broken = copy.deepcopy(MATRIX)
        broken["cells"][1]["image"] = "no-such-image"
        self.assert_refused(broken, "cell 'cuda11.8-gcc12'.image", "no-such-image")
        broken = copy.deepcopy(MATRIX)
        broken["cells"][0]["cuda_architectures"] = ["native"]
        self.assert_refused(broken, "cuda_architectures")
        broken = copy.deepcopy(MATRIX)
        broken["cells"][2]["id"] = broken["cells"][0]["id"]
        self.assert_refused(broken, "defined twice")
        broken = copy.deepcopy(MATRIX)
        broken["images"]["trixie-cuda12.4"]["wheels"]["cudnn-9.1"] = "nvidia-cudnn-cu12"
        self.assert_refused(broken, "images.trixie-cuda12.4.wheels", "pinned")
        broken = copy.deepcopy(MATRIX)
        broken["cells"][0]["gpu_runner"]["digest"] = "sha256:123"
        self.assert_refused(broken, "gpu_runner.digest")
        # A GPU runner declares, per runner label, the GPU model and the profile it must match.
        broken = copy.deepcopy(MATRIX)
        del broken["cells"][0]["gpu_runner"]["gpus"]
        self.assert_refused(broken, "cell 'cuda11.8-gcc11'.gpu_runner", "missing field 'gpus'")
        broken = copy.deepcopy(MATRIX)
        broken["cells"][0]["gpu_runner"]["gpus"] = {}
        self.assert_refused(broken, "cell 'cuda11.8-gcc11'.gpu_runner.gpus", "at least one runner label")
        broken = copy.deepcopy(MATRIX)
        del broken["cells"][0]["gpu_runner"]["gpus"]["h100"]["model"]
        self.assert_refused(broken, "cell 'cuda11.8-gcc11'.gpu_runner.gpus.h100", "missing field 'model'")
        broken = copy.deepcopy(MATRIX)
        broken["cells"][0]["gpu_runner"]["gpus"]["h100"]["profile"] = "../no-gpu"
        self.assert_refused(broken, "cell 'cuda11.8-gcc11'.gpu_runner.gpus.h100.profile", "profile name")
        broken = copy.deepcopy(MATRIX)
        broken["cells"][0]["gpu_runner"]["gpus"]["H100 PCIe"] = {"model": "H100", "profile": "hopper-cuda11-12"}
        self.assert_refused(broken, "cell 'cuda11.8-gcc11'.gpu_runner.gpus.H100 PCIe", "runner label")
        # Names that become folders: never ".", "..", a "/" or a name past 100 characters.
        for bad_id in (".", "..", "../x", "a/b", "-rf", "x" * 101):
            broken = copy.deepcopy(MATRIX)
            broken["cells"][0]["id"] = bad_id
            self.assert_refused(broken, f"cell '{bad_id}'.id", "folder name")
        for bad_image in ("../../x", ".", "a/b"):
            broken = copy.deepcopy(MATRIX)
            broken["images"][bad_image] = broken["images"]["trixie-cuda12.4"]
            self.assert_refused(broken, "images", "not an image name")
        broken = copy.deepcopy(MATRIX)
        name = next(n for n, i in broken["images"].items() if "debootstrap" in i["base"])
        broken["images"][name]["base"]["debootstrap"] = "../../etc"
        self.assert_refused(broken, f"images.{name}.base.debootstrap", "folder name")

    def test_a_removal_never_leaves_its_folder(self):
        with tempfile.TemporaryDirectory() as tmp:
            root, outside = Path(tmp) / "cache", Path(tmp) / "precious"
            (root / "contexts").mkdir(parents=True)
            outside.mkdir()
            (outside / "keep").write_text("x")
            with self.assertRaises(matrix.BadInput):
                matrix.remove_inside(root / "contexts" / ".." / ".." / "precious", root)
            with self.assertRaises(matrix.BadInput):
                matrix.remove_inside(root, root)
            (root / "contexts" / "link").symlink_to(outside)
            matrix.remove_inside(root / "contexts" / "link", root)  # the link, not what it names
            self.assertFalse((root / "contexts" / "link").is_symlink())
            self.assertTrue((outside / "keep").exists())
            (root / "contexts" / "mine").mkdir()
            matrix.remove_inside(root / "contexts" / "mine", root)
            self.assertFalse((root / "contexts" / "mine").exists())

    def test_scenario_names_are_checked_before_they_travel(self):
        r = drive("spec", "--cells", "cuda13.0-host", "--out", "/tmp/x", "--scenarios", "ok,$(reboot)")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--scenarios: '$(reboot)' is not a scenario name", r.stderr)

    def test_bad_flags_and_unknown_cells_exit_2(self):
        r = drive("run", "--out", "/tmp/x", "--cells", "cuda99")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no cell cuda99", r.stderr)
        r = drive("run", "--out", "/tmp/x", "--colour")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown option '--colour'", r.stderr)
        r = drive("spec", "--cells", "cuda13.0-host")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--out", r.stderr)
        self.assertEqual(drive("frobnicate").returncode, 2)
        self.assertEqual(drive("--help").returncode, 0)


class MatrixFileMutations(unittest.TestCase):
    """Every field of the real matrix file replaced by each wrong kind of value, and files that
    are not JSON documents at all: the reader refuses each with BadInput naming the file (exit
    2 at the command line), or accepts it; never a traceback or a hang."""

    WRONG_VALUES = [None, True, 0, -1, 1e308, "", "x", "\u00ff\ud7ff", [], [1, "a"], {}, {"k": None}]

    def paths(self, node, at=()):
        yield at
        if isinstance(node, dict):
            for key, value in node.items():
                yield from self.paths(value, at + (key,))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from self.paths(value, at + (i,))

    def test_every_field_with_every_wrong_value(self):
        tried = refused = 0
        for at in list(self.paths(MATRIX)):
            for wrong in self.WRONG_VALUES + ["delete"]:
                if wrong == "delete" and not at:
                    continue
                doc = copy.deepcopy(MATRIX)
                if not at:
                    doc = wrong
                else:
                    parent = doc
                    for step in at[:-1]:
                        parent = parent[step]
                    if wrong == "delete":
                        del parent[at[-1]]
                    else:
                        parent[at[-1]] = copy.deepcopy(wrong)
                path = Path(write_matrix(doc))
                try:
                    tried += 1
                    matrix.load_matrix(path)
                except matrix.BadInput as e:
                    refused += 1
                    self.assertIn(str(path), str(e))
                finally:
                    path.unlink()
        print(f"matrix file: {tried} mutations, {refused} refused with the file named, none crashed")
        self.assertGreater(refused, tried // 4)

    def test_files_that_are_not_json_documents(self):
        tmp = Path(tempfile.mkdtemp())
        fifo = tmp / "fifo.json"
        os.mkfifo(fifo)
        loop = tmp / "loop.json"
        os.symlink(loop, loop)
        cases = {
            fifo: "a FIFO",
            tmp: "a directory",
            loop: "cannot read",
            tmp / "missing.json": "cannot read",
        }
        for name, text in {"deep": "[" * 100000 + "]" * 100000, "latin1": b'{"schema": "\xff"}',
                           "nan": '{"schema": NaN}', "huge": '{"schema": 1e999}',
                           "scalar": "5", "truncated": '{"schema": "pitfall.matrix/1", "cells": ['}.items():
            path = tmp / f"{name}.json"
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
            cases[path] = {"deep": "nested deeper", "latin1": "not UTF-8", "nan": "not JSON",
                           "huge": "schema", "scalar": "schema", "truncated": "not JSON"}[name]
        for path, needle in cases.items():
            with self.subTest(path=path.name):
                r = subprocess.run([sys.executable, str(DRIVER), "list", "--matrix", str(path)],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(str(path), r.stderr)
                self.assertIn(needle, r.stderr)
                self.assertNotIn("Traceback", r.stderr)


class MatrixSchema(unittest.TestCase):
    """reports/schema/matrix.schema.json: a Draft 2020-12 schema the real matrix file meets, the
    driver's own reader of it (tools/pitfall_drivers/schema.py) judging every broken copy of the
    file as Python's jsonschema does, and the errors naming the file and the field."""

    SCHEMA = json.loads((ROOT / "reports" / "schema" / "matrix.schema.json").read_text())

    def refused(self, doc) -> str:
        path = Path(write_matrix(doc))
        try:
            with self.assertRaises(matrix.BadInput) as caught:
                matrix_file.load_matrix(path)
        finally:
            path.unlink()
        message = str(caught.exception)
        self.assertTrue(message.startswith(f"{path}: "), message)
        return message[len(f"{path}: "):]

    def test_the_schema_is_draft_2020_12_and_the_real_matrix_meets_it(self):
        jsonschema.Draft202012Validator.check_schema(self.SCHEMA)
        self.assertEqual(self.SCHEMA["$schema"], "https://json-schema.org/draft/2020-12/schema")
        jsonschema.validate(MATRIX, self.SCHEMA, cls=jsonschema.Draft202012Validator)
        self.assertIsNone(matrix_file.validator().first_problem(MATRIX))
        # The harness embeds every file of reports/schema/ between these delimiters.
        self.assertNotIn(')pitfall_schema"', (ROOT / "reports" / "schema" / "matrix.schema.json").read_text())

    def test_a_wrong_type_names_the_field(self):
        for where, change, said in (
                (("cells", 0, "cudnn", "build"), 5, "cell 'cuda11.8-gcc11'.cudnn.build: expected a non-empty string"),
                (("cells", 3, "stub_driver_on_path"), "yes", "cell 'cuda12.4-no-driver-library'.stub_driver_on_path: expected true or false"),
                (("cells", 0, "expect", "outcome"), "passed", "cell 'cuda11.8-gcc11'.expect.outcome: expected one of ran, "),
                (("cells", 0, "cuda_architectures", 1), 75, "cell 'cuda11.8-gcc11'.cuda_architectures[1]: expected a string"),
                (("images", "bookworm-cuda11.8", "apt_packages"), "g++-11", "images.bookworm-cuda11.8.apt_packages: expected a list"),
                (("images", "bookworm-cuda11.8", "cudnn_mix"), 7, "images.bookworm-cuda11.8.cudnn_mix: expected NAME=BASE:OTHER"),
                (("cells",), {}, "cells: expected a list of cells")):
            with self.subTest(where=where):
                doc = copy.deepcopy(MATRIX)
                parent = doc
                for step in where[:-1]:
                    parent = parent[step]
                parent[where[-1]] = change
                self.assertIn(said, self.refused(doc))
        # A cell without a usable id is named by its place in the list.
        doc = copy.deepcopy(MATRIX)
        doc["cells"][2]["id"] = 7
        self.assertTrue(self.refused(doc).startswith("cells[2].id: expected a cell id"))

    def test_what_a_schema_cannot_say_is_still_checked(self):
        doc = copy.deepcopy(MATRIX)
        doc["images"]["bookworm-cuda13.2-wheels"]["wheel_toolkit"] = "toolkit"
        self.assertEqual(self.refused(doc), "images.bookworm-cuda13.2-wheels.wheel_toolkit: "
                                            "'toolkit' is not one of its wheels' prefixes")
        doc = copy.deepcopy(MATRIX)
        doc["cells"][1]["id"] = doc["cells"][0]["id"]
        self.assertEqual(self.refused(doc), "cell 'cuda11.8-gcc11'.id: defined twice")

    def test_unknown_fields_are_allowed_as_before(self):
        # The reader never refused a field it does not know (doc, note: words for people), and
        # the schema keeps it so.
        doc = copy.deepcopy(MATRIX)
        doc["zz_unknown"] = 1
        doc["images"]["bookworm-cuda11.8"]["zz_unknown"] = [1]
        doc["cells"][0]["zz_unknown"] = {"a": None}
        doc["cells"][0]["expect"]["zz_unknown"] = "x"
        path = Path(write_matrix(doc))
        try:
            self.assertEqual(matrix_file.load_matrix(path)["zz_unknown"], 1)
        finally:
            path.unlink()

    def test_the_drivers_reader_judges_as_jsonschema_does(self):
        # Every field replaced by each wrong value, removed, or given an unknown field. No string
        # ends in a line break: Python's jsonschema lets `$` match before one, ECMA-262 (what
        # JSON Schema's patterns are, and the harness's validator) does not, nor does the driver.
        reference = jsonschema.Draft202012Validator(self.SCHEMA)
        ours = matrix_file.validator()
        judged = refused = 0
        for at in list(field_paths(MATRIX)):
            for wrong in MatrixFileMutations.WRONG_VALUES + ["../x", "a==1", 2.0, "delete", "unknown"]:
                doc = mutated(MATRIX, at, wrong)
                if doc is None:
                    continue
                judged += 1
                expected = reference.is_valid(doc)
                refused += not expected
                self.assertEqual(ours.first_problem(doc) is None, expected, f"{at} = {wrong!r}")
        print(f"matrix schema: {judged} copies, {refused} refused, the driver's reader agreeing on each")
        self.assertGreater(refused, judged // 2)


def field_paths(node, at=()):
    """The place of every value in a document, the root first, as tuples of keys and indices."""
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from field_paths(value, at + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from field_paths(value, at + (i,))


def mutated(doc, at: tuple, wrong):
    """A copy of doc with the value at `at` replaced by `wrong`, removed ("delete") or given a
    field it does not know ("unknown"); None where that change makes no sense."""
    doc = copy.deepcopy(doc)
    if not at:
        return None if wrong == "delete" else dict(doc, zz_unknown=1) if wrong == "unknown" else wrong
    parent = doc
    for step in at[:-1]:
        parent = parent[step]
    if wrong == "delete":
        del parent[at[-1]]
    elif wrong == "unknown":
        if not isinstance(parent[at[-1]], dict):
            return None
        parent[at[-1]]["zz_unknown"] = 1
    else:
        parent[at[-1]] = copy.deepcopy(wrong)
    return doc


class Driver(unittest.TestCase):
    def test_dry_run_prints_the_isolated_run_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "m"
            r = drive("run", "--dry-run", "--out", str(out), "--cells", "cuda12.4-no-driver-library",
                      "--cache", str(Path(tmp) / "cache"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(out.exists(), "a dry run wrote the output folder")
            self.assertFalse((Path(tmp) / "cache").exists(), "a dry run wrote the cache")
        run_line = next(l for l in r.stdout.splitlines() if " run " in l and "podman" in l)
        for needle in ("--network=none", "--read-only", "--memory", "--pids-limit", f"{ROOT}:/src:ro",
                       "/dev/null:/usr/lib/x86_64-linux-gnu/libcuda.so.1:ro", "--ulimit nofile=20000:20000"):
            self.assertIn(needle, run_line)
        self.assertIn("podman build", r.stdout)
        self.assertIn("--build-arg 'APT_COMPONENTS=main contrib non-free'", r.stdout)

    def test_dry_run_of_a_cell_whose_mount_is_missing_writes_nothing_either(self):
        doc = copy.deepcopy(MATRIX)
        cell = next(c for c in doc["cells"] if c["id"] == "cuda13.0-host")
        cell["mounts"] = ["/nonexistent/cuda"]
        path = write_matrix(doc)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "m"
            r = drive("run", "--dry-run", "--matrix", path, "--out", str(out), "--cells", "cuda13.0-host")
            os.unlink(path)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(out.exists())
        self.assertIn("-v /nonexistent/cuda:/nonexistent/cuda:ro", r.stdout)

    def test_judge_marks_a_gpu_runner_cell_and_fails_when_it_differs(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = drive("spec", "--cells", "cuda12.4-gcc13", "--gpu-runner", "--gpu", "l4", "--out", tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = drive("judge", "--cells", "cuda12.4-gcc13", "--gpu", "l4", "--cell-dir", tmp)
            self.assertEqual(r.returncode, 1)  # no cell.json: the job died before writing it
            judged = json.loads((Path(tmp) / "cell.json").read_text())
            self.assertEqual(judged["outcome"], "container_failed")
            self.assertIn("no run: pitfall run never started, so no GPU answered", judged["expectation_problems"])
            # "ran" alone no longer makes a GPU runner's cell green: without a run that saw the
            # GPU (here none was recorded) it is red, with or without --gpu (the spec has it).
            (Path(tmp) / "cell.json").write_text(json.dumps({"id": "cuda12.4-gcc13", "outcome": "ran", "cuda_error": None}))
            for gpu in (["--gpu", "l4"], []):
                r = drive("judge", "--cells", "cuda12.4-gcc13", *gpu, "--cell-dir", tmp)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn("NOT AS EXPECTED: no run", r.stdout)

    def test_cells_that_build_alike_share_a_build_folder(self):
        by_id = {c["id"]: c for c in MATRIX["cells"]}
        key = lambda cid: matrix.build_key(by_id[cid], "ref", [])
        self.assertEqual(key("cuda12.4-gcc13"), key("cuda12.4-no-driver-library"))
        self.assertEqual(key("cuda12.4-gcc13"), key("cuda12.4-cudnn-loaded-older"))
        self.assertNotEqual(key("cuda12.4-gcc13"), key("cuda12.4-gcc14"))
        self.assertNotEqual(matrix.build_key(by_id["cuda12.4-gcc13"], "ref", ["float64_inputs"]), key("cuda12.4-gcc13"))

    def test_image_tags_follow_their_inputs(self):
        image = MATRIX["images"]["trixie-cuda12.4"]
        changed = dict(image, apt_packages=image["apt_packages"] + ["g++-12"])
        self.assertEqual(containers.image_ref("trixie-cuda12.4", image), containers.image_ref("trixie-cuda12.4", dict(image)))
        self.assertNotEqual(containers.image_ref("trixie-cuda12.4", image), containers.image_ref("trixie-cuda12.4", changed))

    def test_a_cell_is_judged_against_its_expectation(self):
        cell = {"expect": {"outcome": "compile_failed", "stage": "host_compiler", "message_contains": "unsupported GNU"}}
        self.assertEqual(matrix.judge_cell(cell, {"outcome": "compile_failed", "stage": "host_compiler",
                                                  "message": "#error -- unsupported GNU version!"}), [])
        problems = matrix.judge_cell(cell, {"outcome": "ran", "stage": None, "message": ""})
        self.assertEqual(len(problems), 3, problems)
        cell = {"expect": {"outcome": "ran", "cuda_error": "cudaErrorNoDevice"}}
        self.assertEqual(matrix.judge_cell(cell, {"outcome": "ran", "cuda_error": "cudaErrorInsufficientDriver"}),
                         ["first CUDA call cudaErrorInsufficientDriver, expected cudaErrorNoDevice"])
        # The doctor's errors in the cell must include each expected finding.
        cell = {"expect": {"outcome": "ran", "doctor": ["no-device", "cudnn-version"]}}
        self.assertEqual(matrix.judge_cell(cell, {"outcome": "ran", "doctor": {"errors": ["no-device", "cudnn-version"]}}), [])
        self.assertEqual(matrix.judge_cell(cell, {"outcome": "ran", "doctor": {"errors": ["no-device"]}}),
                         ["pitfall doctor's errors ['no-device'], expected cudnn-version among them"])
        self.assertEqual(len(matrix.judge_cell(cell, {"outcome": "ran", "doctor": "broken"})), 1)

    def test_gpu_runner_spec_and_cells(self):
        r = drive("runner-cells")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.strip().splitlines()), 1)  # one line: a GitHub step output
        cells = json.loads(r.stdout)
        declared = [(c["id"], label, gpu["model"], gpu["profile"])
                    for c in MATRIX["cells"] if "gpu_runner" in c for label, gpu in c["gpu_runner"]["gpus"].items()]
        self.assertEqual([(c["id"], c["gpu"], c["model"], c["profile"]) for c in cells], declared)
        self.assertTrue(all(set(c) == {"id", "image", "gpu", "model", "profile"} for c in cells))
        self.assertTrue(all(c["image"].startswith("nvidia/cuda:") and "cudnn" in c["image"] for c in cells))
        # The pairs the issue names.
        self.assertLessEqual({("cuda13.0-host", "h100", "H100", "hopper-cuda13"),
                              ("cuda12.4-gcc13", "h100", "H100", "hopper-cuda11-12"),
                              ("cuda12.4-gcc13", "l4", "L4", "ada-ampere-cuda12"),
                              ("cuda11.8-gcc11", "h100", "H100", "hopper-cuda11-12")}, set(declared))
        only_l4 = json.loads(drive("runner-cells", "--gpus", "l4").stdout)
        self.assertEqual([(c["id"], c["gpu"]) for c in only_l4], [("cuda12.4-gcc13", "l4")])
        r = drive("runner-cells", "--gpus", "a100")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--gpus: no cell declares a GPU runner labelled a100", r.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            r = drive("spec", "--cells", "cuda12.4-gcc13", "--gpu-runner", "--gpu", "h100", "--out", tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            s = json.loads((Path(tmp) / "cell-spec.json").read_text())
        self.assertEqual(s["cell"]["cuda"]["nvcc"], "/usr/local/cuda/bin/nvcc")
        self.assertNotIn("hide_files", s["cell"])
        self.assertEqual(s["probe_architectures"], MATRIX["probe_architectures"])
        self.assertEqual(s["cell"]["expect"], {"outcome": "ran", "run_exit_code": 0, "gpu": "h100", "model": "H100",
                                               "profile": "hopper-cuda11-12"})
        r = drive("spec", "--cells", "cuda12.4-gcc14", "--gpu-runner", "--gpu", "h100", "--out", "/tmp/none")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no gpu_runner", r.stderr)
        # A runner's spec names its GPU: without one there would be nothing to judge it on.
        r = drive("spec", "--cells", "cuda12.4-gcc13", "--gpu-runner", "--out", "/tmp/none")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--gpu-runner needs --gpu LABEL", r.stderr)
        self.assertIn("h100, l4", r.stderr)
        r = drive("spec", "--cells", "cuda12.4-gcc13", "--gpu-runner", "--gpu", "a100", "--out", "/tmp/none")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--gpu a100: cell 'cuda12.4-gcc13' declares no GPU runner labelled 'a100'", r.stderr)


class RunnerJudgement(unittest.TestCase):
    """GPU-runner cell folders (ci/tests/fixtures/gpu-runner/: cell-spec.json as `pitfall matrix
    spec --gpu-runner --gpu` writes it, cell.json as containers/cell_entry.py writes it, run/summary.json
    as `pitfall run` writes it) judged through the real command line. broken-driver is a real
    cell run on a machine without a driver; the others carry the fingerprint of the H100 run the
    hopper-cuda13 notes describe, changed where the case needs it."""

    def judge(self, fixture: str, cell: str = "cuda13.0-host", gpu: str = "h100"):
        tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp)
        folder = tmp / fixture
        shutil.copytree(RUNNER_FIXTURES / fixture, folder)
        r = drive("judge", "--cells", cell, "--gpu", gpu, "--cell-dir", str(folder))
        print(r.stdout, end="")
        self.assertEqual(r.stderr, "")
        judged = json.loads((folder / "cell.json").read_text())
        line = r.stdout.strip()
        # The printed line and cell.json say the same problems.
        if judged["expectation_problems"]:
            self.assertTrue(line.endswith("NOT AS EXPECTED: " + "; ".join(judged["expectation_problems"])), line)
        else:
            self.assertTrue(line.endswith("; as expected"), line)
        return r.returncode, line, judged["expectation_problems"], folder

    def test_fixtures_are_in_the_shapes_their_writers_write(self):
        summary_keys = {"schema", "at", "complete", "cases_selected", "cases_finished", "counts", "profile",
                        "fingerprint_summary", "ratios", "cases", "exit_code"}  # runner.cpp write_summary
        with open(ROOT / "reports" / "schema" / "cell.schema.json") as f:
            cell_schema = json.load(f)
        fixtures = sorted(p.name for p in RUNNER_FIXTURES.iterdir() if p.is_dir())
        self.assertEqual(fixtures, ["all-good", "another-model", "another-profile", "broken-driver", "exited-1", "no-device"])
        for name in fixtures:
            with self.subTest(fixture=name):
                folder = RUNNER_FIXTURES / name
                spec = json.loads((folder / "cell-spec.json").read_text())
                cell = json.loads((folder / "cell.json").read_text())
                summary = json.loads((folder / "run" / "summary.json").read_text())
                with tempfile.TemporaryDirectory() as tmp:
                    r = drive("spec", "--cells", spec["id"], "--gpu-runner", "--gpu", spec["cell"]["expect"]["gpu"],
                              "--scenarios", ",".join(spec["scenarios"]), "--out", tmp)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    written = json.loads((Path(tmp) / "cell-spec.json").read_text())
                self.assertEqual(set(spec), set(written))
                self.assertEqual(spec["cell"]["expect"], written["cell"]["expect"])
                self.assertEqual(set(summary), summary_keys)
                self.assertEqual(summary["schema"], "pitfall.summary/1")
                jsonschema.validate(cell, cell_schema)
                self.assertEqual(cell["schema"], "pitfall.cell/1")
                self.assertNotIn("expectation_problems", cell)  # the judge adds it
                # What cell_entry.py copies from summary.json.
                self.assertEqual(cell["fingerprint"], summary["fingerprint_summary"])
                self.assertEqual(cell["profile"], summary["profile"])
                self.assertEqual(cell["run_exit_code"], summary["exit_code"])
                self.assertEqual(cell["verdicts"], summary["counts"])
                self.assertEqual(cell["cuda_error"], summary["fingerprint_summary"].get("cuda_error"))
                self.assertEqual(sum(summary["counts"].values()), summary["cases_finished"])

    def test_a_run_that_exited_1_is_red(self):
        code, line, problems, _ = self.judge("exited-1")
        self.assertEqual(code, 1)
        # A GPU answered and the profile is right: the exit status alone makes it red.
        self.assertEqual(problems, ["pitfall run exited 1 (some case did not meet its baseline), expected 0"])
        self.assertIn("cuda13.0-host on h100: ran (first CUDA call: none; 1 FAIL, 3 PASS)", line)

    def test_a_broken_driver_is_red_with_the_doctors_finding(self):
        code, line, problems, folder = self.judge("broken-driver")
        self.assertEqual(code, 1)
        self.assertEqual(problems[:2], [
            "no GPU answered (gpu_count 0, first CUDA call cudaErrorInsufficientDriver)",
            'profile no-gpu (matches {"gpu_count":0}; then host), expected hopper-cuda13'])
        self.assertEqual(problems[2:], ["pitfall doctor: no NVIDIA driver (libcuda.so.1 not found); "
                                        "CUDA 13.0 needs driver >= 580 [no-driver]"])
        self.assertIn("no NVIDIA driver (libcuda.so.1 not found)", line)
        judged = json.loads((folder / "cell.json").read_text())
        self.assertEqual(judged["gpu"], "h100")
        self.assertEqual(judged["cell"]["expect"]["profile"], "hopper-cuda13")

    def test_no_device_is_red(self):
        code, _, problems, _ = self.judge("no-device")
        self.assertEqual(code, 1)
        self.assertIn("no GPU answered (gpu_count 0, first CUDA call cudaErrorNoDevice)", problems)
        self.assertTrue(any(p.startswith("profile driver-no-device") for p in problems), problems)
        self.assertEqual(problems[-1], "pitfall doctor: the NVIDIA driver library is here but no GPU is "
                                       "(cudaErrorNoDevice) [no-device]")

    def test_another_gpu_model_is_red(self):
        # An H200 matches hopper-cuda13 as an H100 does: only the declared model tells them apart.
        code, _, problems, _ = self.judge("another-model")
        self.assertEqual(code, 1)
        self.assertEqual(problems, ["device 'NVIDIA H200', expected one containing 'H100'"])

    def test_a_model_is_a_word_of_the_device_name_not_a_substring(self):
        # An L40S is no L4 (both sm_89, both ada-ampere-cuda12): a substring test would pass it.
        self.assertTrue(matrix.names_model("NVIDIA L4", "L4"))
        self.assertFalse(matrix.names_model("NVIDIA L40S", "L4"))
        self.assertTrue(matrix.names_model("NVIDIA H100 80GB HBM3", "H100"))
        self.assertTrue(matrix.names_model("NVIDIA H100 PCIe", "H100"))
        self.assertFalse(matrix.names_model("NVIDIA H100 80GB HBM3", "H10"))
        self.assertFalse(matrix.names_model("NVIDIA A100-SXM4-40GB", "A10"))
        self.assertTrue(matrix.names_model("NVIDIA A100-SXM4-40GB", "A100"))

    def test_another_profile_is_red(self):
        # CUDA 12.4 on an H100 where no profile describes that pair: only `host` matches.
        code, _, problems, _ = self.judge("another-profile", cell="cuda12.4-gcc13")
        self.assertEqual(code, 1)
        self.assertEqual(problems, ["profile host (matches {}), expected hopper-cuda11-12"])

    def test_all_good_is_green(self):
        code, line, problems, _ = self.judge("all-good")
        self.assertEqual(code, 0, line)
        self.assertEqual(problems, [])
        self.assertEqual(line, "cuda13.0-host on h100: ran (first CUDA call: none; 4 PASS); as expected")

    def test_judge_refuses_a_folder_that_is_not_for_this_cell_or_gpu(self):
        # Bad input (exit 2), never a judgement; the fixture folders are left as they are.
        before = {p: p.read_bytes() for p in RUNNER_FIXTURES.rglob("*.json")}
        r = drive("judge", "--cells", "cuda12.4-gcc13", "--gpu", "l4", "--cell-dir", str(RUNNER_FIXTURES / "another-profile"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("cell-spec.json: written for GPU 'h100', judged as --gpu l4", r.stderr)
        r = drive("judge", "--cells", "cuda11.8-gcc11", "--gpu", "h100", "--cell-dir", str(RUNNER_FIXTURES / "all-good"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("written for cell 'cuda13.0-host', judged as --cells cuda11.8-gcc11", r.stderr)
        r = drive("judge", "--cells", "cuda13.0-host", "--gpu", "a100", "--cell-dir", str(RUNNER_FIXTURES / "all-good"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--gpu a100: cell 'cuda13.0-host' declares no GPU runner labelled 'a100'", r.stderr)
        self.assertEqual(before, {p: p.read_bytes() for p in RUNNER_FIXTURES.rglob("*.json")})

    def test_judged_runner_cells_merge_into_the_report(self):
        pitfall = os.environ.get("PITFALL_BIN")
        if not pitfall:
            self.fail("PITFALL_BIN is not set (run through ctest)")
        folders = [self.judge(name)[3] for name in ("broken-driver", "all-good")]
        r = subprocess.run([pitfall, "report", "--merge", "--format", "markdown", *map(str, folders)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no GPU answered (gpu\\_count 0, first CUDA call cudaErrorInsufficientDriver)", r.stdout)
        self.assertRegex(r.stdout, r"\| yes \|")


def run_folder(dir: Path, cuda_error: str, cudnn: int, verdict: str) -> None:
    """A minimal run folder as `pitfall run` writes it (header and one judged case)."""
    dir.mkdir(parents=True)
    header = {"record": "run", "at": "2026-11-24T00:00:00Z", "selection": ["cuda.version_mismatch.runtime_vs_driver"],
              "fingerprint_summary": {"gpu_count": 0, "cuda_error": cuda_error, "cuda_runtime_version": 12040,
                                      "cudnn_version": cudnn}}
    case = {"record": "case", "case": "cuda.version_mismatch.runtime_vs_driver", "verdict": verdict,
            "reason": "x", "observed": {"status": "error", "error": cuda_error, "stage": "init"},
            "process": {"wall_seconds": 0.1}}
    (dir / "results.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(case) + "\n")


class MergedReport(unittest.TestCase):
    def test_cell_folders_merge_with_their_own_outcomes_and_differences(self):
        pitfall = os.environ.get("PITFALL_BIN")
        if not pitfall:
            self.fail("PITFALL_BIN is not set (run through ctest)")
        by_id = {c["id"]: c for c in MATRIX["cells"]}
        with tempfile.TemporaryDirectory() as tmp:
            cells = Path(tmp)
            ran = cells / "cuda12.4-gcc13"
            run_folder(ran / "run", "cudaErrorNoDevice", 91002, "PASS")
            (ran / "cell.json").write_text(json.dumps({
                "id": "cuda12.4-gcc13", "outcome": "ran", "cell": by_id["cuda12.4-gcc13"], "cuda_error": "cudaErrorNoDevice",
                "toolkit": {"version": "12.4.131"}, "cudnn_compiled": "9.10.2",
                "architectures": {"probed": {"70": {"accepted": True}, "100": {"accepted": False, "message": "nvcc fatal"}}},
                "archs_built": {"sass": ["70", "75", "90"], "ptx": ["90"]}, "verdicts_text": "1 PASS", "expectation_problems": []}))
            failed = cells / "cuda11.8-gcc12"
            failed.mkdir()
            (failed / "cell.json").write_text(json.dumps({
                "id": "cuda11.8-gcc12", "outcome": "compile_failed", "stage": "host_compiler", "cell": by_id["cuda11.8-gcc12"],
                "message": "#error -- unsupported GNU version! gcc versions later than 11 are not supported!",
                "toolkit": {"version": "11.8.89"}, "expectation_problems": []}))
            md = subprocess.run([pitfall, "report", "--merge", "--format", "markdown", str(ran), str(failed)],
                                capture_output=True, text=True)
            self.assertEqual(md.returncode, 0, md.stderr)
            html = subprocess.run([pitfall, "report", "--merge", "--format", "html", str(ran), str(failed)],
                                  capture_output=True, text=True)
            self.assertEqual(html.returncode, 0, html.stderr)
            (failed / "cell.json").write_text("{ broken")
            bad = subprocess.run([pitfall, "report", "--merge", str(ran), str(failed)], capture_output=True, text=True)
        text = md.stdout
        self.assertIn("### Cells", text)
        # (Markdown text escapes '_'.)
        self.assertRegex(text, r"\| cuda11.8-gcc12 \| 11.8.89 .*compile\\_failed at host\\_compiler: #error -- unsupported GNU version")
        self.assertRegex(text, r"\| cuda12.4-gcc13 \| 12.4.131 .*\| 9.10.2 / 9.10.2 \|.*\| sm\\_100 \| sm\\_70 sm\\_75 sm\\_90; PTX sm\\_90 \| ran")
        self.assertIn("- toolkit refuses: **sm\\_100**: cuda12.4-gcc13; **not probed**: cuda11.8-gcc12", text)
        self.assertIn("- first CUDA call: **cudaErrorNoDevice**: cuda12.4-gcc13; **-**: cuda11.8-gcc12", text)
        # A case is not a difference because a cell that never ran has no result for it.
        self.assertIn("2 cells, 1 cases, 0 differ", text)
        self.assertNotIn("- `cuda.version_mismatch.runtime_vs_driver`", text)
        # The case grid: the failed cell has no result for the case.
        self.assertRegex(text, r"\| `cuda.version_mismatch.runtime_vs_driver` \| PASS \(cudaErrorNoDevice@init\) \| - \|")
        self.assertIn('id="cells"', html.stdout)
        self.assertIn("#error -- unsupported GNU version!", html.stdout)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("cell.json: malformed JSON", bad.stderr)


class CiFiles(unittest.TestCase):
    tools = Path(os.environ.get("PITFALL_TOOLS", ROOT / ".tools" / "lint")) / "bin"

    def tool(self, name):
        path = self.tools / name
        if not os.access(path, os.X_OK):
            self.fail(f"{path} is missing: ci/setup.sh installs it")
        return str(path)

    def test_workflows_pass_actionlint(self):
        r = subprocess.run([self.tool("actionlint"), "-no-color"], cwd=ROOT, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_actionlint_can_fail(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = Path(tmp) / "bad.yml"
            bad.write_text("on: push\njobs:\n  a:\n    runs-on: [self-hosted, gpu-model-x]\n    steps:\n      - run: echo ${{ matrix.nope }}\n")
            r = subprocess.run([self.tool("actionlint"), "-no-color", str(bad)], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)

    def test_containerfiles_pass_hadolint(self):
        files = sorted(str(p) for p in (ROOT / "containers").glob("*.Containerfile"))
        self.assertTrue(files)
        r = subprocess.run([self.tool("hadolint"), "--config", str(ROOT / ".hadolint.yaml"), *files],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_hadolint_can_fail(self):
        r = subprocess.run([self.tool("hadolint"), "--config", str(ROOT / ".hadolint.yaml"), "-"],
                           input="FROM debian\nRUN cd /tmp && apt-get install -y curl\n", capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)

    def test_gitlab_runs_the_same_gpu_cells_as_the_matrix(self):
        text = (ROOT / "ci" / "gitlab-ci.yml").read_text()
        jobs = re.findall(r"- CELL: (\S+)\n\s+IMAGE: (\S+)\n\s+GPU: (\S+)", text)
        self.assertEqual(len(jobs), text.count("- CELL: "), "a parallel matrix entry without IMAGE and GPU")
        expected = [(c["id"], c["image"], c["gpu"]) for c in matrix.runner_cells(MATRIX)]
        self.assertEqual(sorted(jobs), sorted(expected))
        # Each job hands its GPU label to the spec and to the judge.
        self.assertIn('spec --cells "$CELL" --gpu-runner --gpu "$GPU"', text)
        self.assertIn('judge --cells "$CELL" --gpu "$GPU"', text)

    def test_github_runs_one_job_per_cell_and_gpu(self):
        text = (ROOT / ".github" / "workflows" / "gpu-matrix.yml").read_text()
        self.assertIn("tools/pitfall-matrix runner-cells", text)
        self.assertIn("include: ${{ fromJSON(needs.cells.outputs.cells) }}", text)
        self.assertIn('judge --cells "$CELL" --gpu "$GPU"', text)
        self.assertIn('--gpu-runner --gpu "$GPU"', text)
        self.assertIn("CELL: ${{ matrix.id }}", text)

    def test_no_workflow_splices_an_expression_into_a_script(self):
        script = ROOT / "ci" / "check-workflows.py"
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            bad = Path(tmp) / "bad.yml"
            bad.write_text("on: workflow_dispatch\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
                           "      - env:\n          OK: ${{ inputs.x }}\n        run: echo \"$OK\"\n"
                           "      - run: |\n          echo start\n          echo ${{ inputs.scenarios }}\n"
                           "      - name: inline\n        run: make ${{ matrix.id }}\n")
            r = subprocess.run([sys.executable, str(script), str(bad)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.count("a workflow expression inside run:"), 2, r.stderr)
        self.assertIn("bad.yml:11:", r.stderr)
        self.assertIn("bad.yml:13:", r.stderr)


class PinImages(unittest.TestCase):
    """ci/pin-images.py against a registry served on loopback (the v2 manifest HEAD)."""

    def test_digests_are_pinned_and_used_by_the_runner_matrix(self):
        import http.server
        import threading
        digests = {}

        class Registry(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self):
                m = re.fullmatch(r"/v2/nvidia/cuda/manifests/(.+)", self.path)
                if not m or "manifest" not in self.headers.get("Accept", ""):
                    self.send_response(404)
                    self.end_headers()
                    return
                digests[m.group(1)] = "sha256:" + format(abs(hash(m.group(1))), "064x")[-64:]
                self.send_response(200)
                self.send_header("Docker-Content-Digest", digests[m.group(1)])
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Registry)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            # Unpinned as a start, whatever the repository's file holds today.
            unpinned_text = re.sub(r'"digest": "sha256:[0-9a-f]{64}"', '"digest": null', (ROOT / "ci" / "matrix.json").read_text())
            path = write_matrix(unpinned_text)
            pin = [sys.executable, str(ROOT / "ci" / "pin-images.py"), "--matrix", path]
            self.assertEqual(subprocess.run(pin + ["--check"], capture_output=True).returncode, 1)
            r = subprocess.run(pin + ["--registry", f"http://127.0.0.1:{server.server_port}"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(subprocess.run(pin + ["--check"], capture_output=True).returncode, 0)
            pinned = json.loads(drive("runner-cells", "--matrix", path).stdout)
            # Only the digests changed: the rest of the file is as it was, line for line.
            before, after = unpinned_text.splitlines(), Path(path).read_text().splitlines()
            self.assertEqual(len(before), len(after))
            changed = [a for a, b in zip(before, after) if a != b]
            self.assertEqual(len(changed), len({c["id"] for c in pinned}))  # a digest line per cell, not per GPU
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)
            r = subprocess.run(pin + ["--registry", "http://127.0.0.1:9"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("did not answer", r.stderr)
        finally:
            server.shutdown()
            os.unlink(path)
        for cell in pinned:
            tag = cell["image"].split(":", 1)[1].split("@")[0]
            self.assertEqual(cell["image"], f"nvidia/cuda:{tag}@{digests[tag]}")


class RealCell(unittest.TestCase):
    """One cell for real: its image built (or reused), pitfall built and run in the container."""

    def test_host_toolkit_cell_builds_runs_and_merges(self):
        out = Path(os.environ.get("PITFALL_MATRIX_OUT", tempfile.mkdtemp()))
        cell_id = "cuda13.0-host"
        r = subprocess.run([os.environ["PITFALL_BIN"], "matrix", "run", "--cells", cell_id, "--scenarios", "version_mismatch",
                            "--out", str(out)], capture_output=True, text=True)
        print(r.stdout[-4000:], r.stderr[-4000:])
        self.assertIn(r.returncode, (0, 1), r.stderr)
        cell = json.loads((out / "cells" / cell_id / "cell.json").read_text())
        self.assertEqual(cell["outcome"], "ran", cell.get("message"))
        self.assertEqual(cell["expectation_problems"], [])
        self.assertEqual(cell["cuda_error"], "cudaErrorInsufficientDriver")
        self.assertTrue(cell["toolkit"]["version"].startswith("13.0"))
        probed = cell["architectures"]["probed"]
        self.assertFalse(probed["70"]["accepted"], "CUDA 13 still targets sm_70?")
        self.assertTrue(probed["100"]["accepted"])
        definition = next(c for c in MATRIX["cells"] if c["id"] == cell_id)
        requested = {re.match(r"\d+[a-z]?", a).group(0) for a in definition["cuda_architectures"]}
        self.assertEqual(set(cell["archs_built"]["sass"]), requested)
        summary = json.loads((out / "cells" / cell_id / "run" / "summary.json").read_text())
        self.assertGreater(summary["cases_finished"], 0)
        # pitfall doctor in the cell: no driver library in the image, so no-driver first, with
        # the branch the cell's CUDA 13.0 runtime needs.
        self.assertEqual(cell["doctor"]["exit_code"], 1, cell["doctor"])
        self.assertEqual(cell["doctor"]["errors"][0], "no-driver", cell["doctor"])
        self.assertIn("CUDA 13.0 needs driver >= 580", cell["doctor"]["headline"])
        diagnosis = json.loads((out / "cells" / cell_id / "doctor.json").read_text())
        with open(ROOT / "reports" / "schema" / "doctor.schema.json") as f:
            jsonschema.validate(diagnosis, json.load(f))
        md = (out / "matrix.md").read_text()
        self.assertIn(cell_id, md)
        self.assertEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main()
