"""`pitfall doctor` on this very machine, and with the toolkit's stub libcuda put on the loader's
path; the diagnosis in a run's terminal output and reports.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_CUDA_STUB where the
CUDA toolkit has a stub). What this machine has is learned independently of pitfall (ctypes,
/proc) so the expectations are not the doctor's own answers read back.
"""
import ctypes
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import jsonschema

from test_cli import BIN, records

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEMA = os.path.join(ROOT, "reports", "schema", "doctor.schema.json")
REAL_INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
REAL_EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")


def loads(library):
    try:
        ctypes.CDLL(library)
        return True
    except OSError:
        return False


def toolkit_stub():
    """The link-time stub libcuda.so of the toolkit the build used (CMake says where), else any
    installed toolkit's."""
    given = os.environ.get("PITFALL_CUDA_STUB", "")
    if given and os.path.exists(given):
        return given
    found = sorted(glob.glob("/usr/local/cuda*/lib*/stubs/libcuda.so") +
                   glob.glob("/usr/local/cuda*/targets/*/lib/stubs/libcuda.so"))
    return found[0] if found else ""


def github_anchors(markdown_path):
    """The anchors GitHub gives the headings of a Markdown file."""
    anchors = set()
    with open(markdown_path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#+ (.+)$", line.rstrip())
            if m:
                anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


class Doctor(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN, "run through CTest: PITFALL_BIN unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-doctor-")
        with open(SCHEMA) as f:
            self.schema = json.load(f)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def doctor(self, *args, env=None):
        return subprocess.run([BIN, "doctor", *args], capture_output=True, text=True, timeout=60,
                              env=env)

    def doctor_json(self, env=None):
        p = self.doctor("--json", env=env)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        out = json.loads(p.stdout)
        jsonschema.validate(out, self.schema)
        self.assertEqual(p.returncode, 0 if out["cuda_usable"] else 1, "exit status follows the verdict")
        self.assertEqual(out["cuda_usable"], not any(f["severity"] == "error" for f in out["findings"]))
        order = [("error", "warning", "ok").index(f["severity"]) for f in out["findings"]]
        self.assertEqual(order, sorted(order), "worst first")
        return out

    def stub_on_path(self):
        stub = toolkit_stub()
        if not stub:
            self.skipTest("no CUDA toolkit stub libcuda.so on this machine")
        folder = os.path.join(self.tmp, "stub-on-path")
        os.makedirs(folder)
        os.symlink(stub, os.path.join(folder, "libcuda.so.1"))
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = folder + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return folder, env

    def test_this_machine(self):
        out = self.doctor_json()
        ids = [f["id"] for f in out["findings"]]
        text = self.doctor()
        self.assertRegex(text.stdout.splitlines()[0],
                         r"^(CUDA work can run here|not ready for CUDA work) \(\d+ errors?, \d+ warnings?, \d+ ok\)$")
        if not loads("libcuda.so.1") and not os.path.exists("/proc/driver/nvidia/version"):
            # No driver at all here (seen independently): that is the finding, first, with the
            # loader's own words and, for a CUDA build, the branch the runtime needs.
            self.assertEqual(ids[0], "no-driver", out["findings"][0])
            self.assertIn("libcuda.so.1", out["findings"][0]["observed"])
            self.assertFalse(out["cuda_usable"])
            if out["facts"].get("built_with_cuda"):
                self.assertRegex(out["headline"], r"CUDA \d+\.\d+ needs driver >= \d{3}")
            self.assertIn("[no-driver]", text.stdout)
            self.assertEqual(text.returncode, 1)
        elif loads("libcuda.so.1"):
            self.assertNotIn("no-driver", ids)

    def test_stub_on_the_path_is_named_with_the_folder_to_remove(self):
        folder, env = self.stub_on_path()
        out = self.doctor_json(env=env)
        first = out["findings"][0]
        self.assertEqual(first["id"], "stub-driver", out["findings"])
        self.assertEqual(first["severity"], "error")
        self.assertIn(f"remove {folder} from LD_LIBRARY_PATH", first["fix"])
        self.assertIn("stubs/libcuda.so", first["observed"])
        self.assertEqual(first["reproduced_by"], "cuda.version_mismatch.stub_driver")
        self.assertNotIn("no-driver", [f["id"] for f in out["findings"]])

    def test_explain(self):
        p = self.doctor("--explain", "stub-driver")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^stub-driver\n  checks ")
        p = self.doctor("--explain", "stub-drivers")
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean 'stub-driver'", p.stderr)
        self.assertEqual(self.doctor("--explian", "x").returncode, 2)
        self.assertEqual(self.doctor("--explain", "").returncode, 2)

    def test_every_rule_links_a_section_that_exists_and_a_case_that_does(self):
        p = self.doctor("--explain", "all")
        self.assertEqual(p.returncode, 0, p.stderr)
        rules = re.findall(r"^  rule +docs/cuda-rules\.md#(\S+)$", p.stdout, re.M)
        ids = re.findall(r"^([a-z][a-z0-9-]*)$", p.stdout, re.M)
        self.assertGreaterEqual(len(ids), 25, p.stdout)
        self.assertEqual(len(rules), len(ids), "every finding names its rule")
        anchors = github_anchors(os.path.join(ROOT, "docs", "cuda-rules.md"))
        self.assertEqual([r for r in rules if r not in anchors], [])
        cases = set(re.findall(r"^  case +(\S+)$", p.stdout, re.M))
        listed = subprocess.run([BIN, "list", "--json", "--index", REAL_INDEX], capture_output=True,
                                text=True, timeout=60)
        if listed.returncode == 0 and json.loads(listed.stdout):
            known = {c["test"] for c in json.loads(listed.stdout)}
            if any(k.startswith("cuda.") for k in known):
                self.assertEqual(sorted(cases - known), [], "a finding names a case that is not in the index")


class DoctorInRuns(unittest.TestCase):
    """The diagnosis where a person looks: the run's first line, its skip groups, summary.md,
    report.html and report.json; a stub on the path is an environment verdict."""

    def setUp(self):
        self.assertTrue(BIN and REAL_INDEX, "run through CTest: PITFALL_BIN unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-doctor-run-")
        with open(REAL_INDEX) as f:
            if not json.load(f).get("built_with_cuda"):
                self.skipTest("this build has no CUDA cases to run (built without CUDA)")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_version_mismatch(self, env=None):
        out = os.path.join(self.tmp, "run")
        p = subprocess.run([BIN, "run", "--backend", "cuda", "--scenario", "version_mismatch", "--samples", "1",
                            "--out", out, "--index", REAL_INDEX, "--expected", REAL_EXPECTED],
                           capture_output=True, text=True, timeout=300, env=env)
        return p, out

    def test_stub_on_the_path_is_an_environment_verdict(self):
        folder, env = Doctor.stub_on_path(self)
        p, out = self.run_version_mismatch(env=env)
        self.assertRegex(p.stdout.splitlines()[0],
                         r"^machine: not ready for CUDA work: the CUDA toolkit's stub libcuda\.so is loaded")
        cases = {r["case"]: r for r in records(out)}
        for case in ("cuda.version_mismatch.runtime_vs_driver", "cuda.version_mismatch.arch_coverage"):
            self.assertNotIn(cases[case]["verdict"], ("NUMERIC_MISMATCH", "FAIL"), cases[case]["reason"])
        for r in cases.values():
            if r["verdict"] == "UNSUPPORTED" and r["reason"].startswith("environment: "):
                self.assertIn("cudaErrorStubLibrary", r["reason"])
        self.assertTrue(any(r["reason"].startswith("environment: the CUDA toolkit's stub")
                            for r in cases.values()), [r["reason"] for r in cases.values()])
        self.assertNotEqual(p.returncode, 1, p.stdout[-2000:])
        with open(os.path.join(out, "summary.md")) as f:
            summary = f.read()
        self.assertIn("### This machine", summary)
        self.assertIn("**Not ready for CUDA work: the CUDA toolkit's stub libcuda.so", summary)
        self.assertIn("| error | the CUDA toolkit's stub", summary)
        with open(os.path.join(out, "report.html")) as f:
            html = f.read()
        self.assertIn('<section id="machine">', html)
        self.assertIn("stub-driver", html)
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        self.assertFalse(report["machine"]["cuda_usable"])
        self.assertEqual(report["machine"]["findings"][0]["id"], "stub-driver")
        with open(SCHEMA) as f:
            jsonschema.validate(report["machine"], json.load(f))

    def test_the_run_says_the_machine_first(self):
        p, out = self.run_version_mismatch()
        first = p.stdout.splitlines()[0]
        self.assertRegex(first, r"^machine: (CUDA work can run here|not ready for CUDA work: .+) \(`pitfall doctor`")
        if not loads("libcuda.so.1") and not os.path.exists("/proc/driver/nvidia/version"):
            self.assertIn("no NVIDIA driver (libcuda.so.1 not found)", first)
            skipped = [r for r in records(out) if r["verdict"] == "UNSUPPORTED"]
            if len(skipped) >= 2:
                self.assertRegex(p.stdout, r"\n  \d+ CUDA cases UNSUPPORTED: no NVIDIA driver \(libcuda\.so\.1 not "
                                           r"found\).* \[cudaErrorInsufficientDriver\]\n")
