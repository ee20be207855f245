"""`pitfall gate` and `pitfall run --require` on this very machine: no GPU and no driver, and
with the toolkit's stub libcuda put on the loader's path (the broken node). Slurm is reached
through a stand-in scontrol on PATH that records its argv, so what the gate asks of Slurm is
checked argument by argument; ci/tests/test_gate_slurm.py runs the same gate on a real Slurm.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_REAL_EXPECTED,
PITFALL_CUDA_STUB where the toolkit has one).
"""
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

import jsonschema

from test_cli import BIN
from test_doctor import REAL_EXPECTED, REAL_INDEX, toolkit_stub

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEMA = os.path.join(ROOT, "reports", "schema", "gate.schema.json")
DOCS = os.path.join(ROOT, "docs", "gate.md")


def documented_gate_cases():
    """The cases docs/gate.md's table lists: checked against the index (GateCasesDocumented)."""
    with open(DOCS, encoding="utf-8") as f:
        return {m.group(1) for m in re.finditer(r"^\s*\| `(cuda\.[a-z0-9_]+\.[a-z0-9_]+)` \|", f.read(), re.M)}


GATE_CASES = documented_gate_cases()

# A stand-in scontrol: each call's argv, NUL-separated, one call per file; `show node` answers
# what $FAKE_SHOW holds.
FAKE_SCONTROL = """#!/bin/sh
n=$(ls "$FAKE_LOG" | wc -l)
for a in "$@"; do printf '%s\\0' "$a"; done > "$FAKE_LOG/call-$n"
if [ "$2" = "show" ]; then cat "$FAKE_SHOW"; fi
exit 0
"""


def built_with_cuda():
    with open(REAL_INDEX, encoding="utf-8") as f:
        return bool(json.load(f).get("built_with_cuda"))


class Gate(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN and REAL_INDEX and REAL_EXPECTED, "run through CTest: PITFALL_BIN unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-gate-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.log = os.path.join(self.tmp, "scontrol-calls")
        os.mkdir(self.log)
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        fake = os.path.join(bindir, "scontrol")
        with open(fake, "w", encoding="utf-8") as f:
            f.write(FAKE_SCONTROL)
        os.chmod(fake, stat.S_IRWXU)
        self.show = os.path.join(self.tmp, "show")
        with open(self.show, "w", encoding="utf-8") as f:
            f.write("NodeName=n1 Arch=x86_64 State=IDLE Reason=(null)\n")
        self.env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
                        FAKE_LOG=self.log, FAKE_SHOW=self.show, PITFALL_PROBE_CACHE="off")
        self.env.pop("SLURMD_NODENAME", None)
        self.env.pop("CUDA_VISIBLE_DEVICES", None)

    def gate(self, *args, env=None):
        return subprocess.run([BIN, "gate", "--index", REAL_INDEX, "--expected", REAL_EXPECTED, *args],
                              capture_output=True, text=True, env=env or self.env, timeout=120)

    def calls(self):
        out = []
        for name in sorted(os.listdir(self.log), key=lambda n: int(n.split("-")[1])):
            with open(os.path.join(self.log, name), "rb") as f:
                out.append(f.read().decode().split("\0")[:-1])
        return out

    def gate_json(self, *args, env=None):
        path = os.path.join(self.tmp, "gate.json")
        r = self.gate("--json", path, *args, env=env)
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        with open(SCHEMA, encoding="utf-8") as f:
            jsonschema.validate(doc, json.load(f))
        return r, doc

    def stub_env(self, folder_name="stub"):
        stub = toolkit_stub()
        if not stub or not built_with_cuda():
            self.skipTest("needs a CUDA build and the toolkit's stub libcuda.so")
        folder = os.path.join(self.tmp, folder_name)
        os.makedirs(folder)
        shutil.copy(stub, os.path.join(folder, "libcuda.so.1"))
        return dict(self.env, LD_LIBRARY_PATH=folder)

    def assert_reason_line(self, line, verdict):
        self.assertTrue(line.startswith(verdict + ": pitfall: "), line)
        reason = line[len(verdict) + 2:]
        self.assertLessEqual(len(reason), 200)
        self.assertTrue(all(32 <= ord(c) < 127 for c in reason), reason)
        return reason

    # -- this machine as it is: no driver ---------------------------------------------------------

    def test_a_gpu_node_without_a_gpu_is_drained_in_the_doctors_words(self):
        r, doc = self.gate_json()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        reason = self.assert_reason_line(r.stdout.splitlines()[0], "drain")
        self.assertIn("[no-driver]", reason)
        self.assertEqual(doc["verdict"], "drain")
        self.assertEqual(doc["reason"], reason)
        self.assertEqual([f["accepted"] for f in doc["findings"] if f["id"] == "no-driver"], [False])
        self.assertEqual(len(doc["gpus"]), 1)
        self.assertIsNone(doc["gpus"][0]["index"])
        self.assertEqual(self.calls(), [], "no Slurm mode: scontrol must not be asked")

    def test_a_node_expected_without_a_gpu_is_admitted(self):
        if not built_with_cuda():
            self.skipTest("a build without CUDA cannot run the gate cases (UNSUPPORTED: built without CUDA)")
        r, doc = self.gate_json("--require", "no-gpu")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(r.stdout.startswith("admit: pitfall: "), r.stdout)
        self.assertEqual(doc["profile"], "no-gpu")
        self.assertEqual([f["accepted"] for f in doc["findings"] if f["id"] == "no-driver"], [True])
        cases = {c["case"]: c["verdict"] for c in doc["gpus"][0]["cases"]}
        self.assertEqual(cases, {c: "PASS" for c in GATE_CASES})
        self.assertEqual(doc["counts"], {"PASS": len(GATE_CASES)})
        self.assertLess(doc["seconds"], 5)

    def test_keep_runs_deletes_nothing_of_the_folder_it_is_given(self):
        keep = os.path.join(self.tmp, "keep")
        os.makedirs(os.path.join(keep, "runtime"))
        mine = os.path.join(keep, "runtime", "mine.txt")  # the user's, in the name the gate once took
        with open(mine, "w", encoding="utf-8") as f:
            f.write("mine\n")
        tmp = os.path.join(self.tmp, "scratch")
        os.makedirs(tmp)
        r = self.gate("--keep-runs", keep, env=dict(self.env, TMPDIR=tmp))
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)
        with open(mine, encoding="utf-8") as f:
            self.assertEqual(f.read(), "mine\n")
        self.assertTrue(any(n.startswith("gpu-") for n in os.listdir(keep)), os.listdir(keep))
        self.assertEqual(os.listdir(tmp), [], "the gate's own runtime folder outlived it")

    def test_json_on_standard_output_instead_of_the_line(self):
        r = self.gate("--json", "-")
        self.assertEqual(r.returncode, 1)
        doc = json.loads(r.stdout)
        with open(SCHEMA, encoding="utf-8") as f:
            jsonschema.validate(doc, json.load(f))
        self.assertEqual(doc["exit_code"], 1)

    # -- the broken node: the stub libcuda ahead of the driver ------------------------------------

    def test_the_stub_driver_drains_with_its_finding_and_failing_cases(self):
        r, doc = self.gate_json("--require", "no-gpu", env=self.stub_env())
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        reason = self.assert_reason_line(r.stdout.splitlines()[0], "drain")
        self.assertIn("[stub-driver]", reason)
        failing = set(doc["gpus"][0]["failing_cases"])
        self.assertIn("cuda.version_mismatch.runtime_vs_driver", failing)
        self.assertTrue(failing <= GATE_CASES, failing)

    def test_health_check_drains_through_scontrol_with_one_argument_per_field(self):
        # The stub's folder name carries shell metacharacters into the finding's title, and so
        # into the reason: it must reach scontrol as one argument, never a shell.
        planted = os.path.join(self.tmp, "pwned")
        # (No ':' or ';': the loader splits LD_LIBRARY_PATH at both.)
        env = self.stub_env("x$(touch " + planted + ")`touch " + planted + "` 'q\" |&")
        r = self.gate("--slurm-health-check", "--node", "n1", "--require", "no-gpu", env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        reason = self.assert_reason_line(r.stdout.splitlines()[0], "drain")
        self.assertEqual(self.calls(), [["update", "NodeName=n1", "State=DRAIN", "Reason=" + reason]])
        self.assertIn("$(touch", reason)
        self.assertFalse(os.path.exists(planted))

    def test_the_prolog_takes_the_node_name_from_slurmd(self):
        env = dict(self.stub_env(), SLURMD_NODENAME="gpu-node-07")
        r = self.gate("--slurm-prolog", "--require", "no-gpu", env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(self.calls()[0][:3], ["update", "NodeName=gpu-node-07", "State=DRAIN"])

    # -- coming back: only a pitfall drain is undone, only after a pass ---------------------------

    def test_a_pass_resumes_a_node_pitfall_drained(self):
        if not built_with_cuda():
            self.skipTest("a build without CUDA cannot pass the gate")
        with open(self.show, "w", encoding="utf-8") as f:
            f.write("NodeName=n1 State=IDLE+DRAIN ThreadsPerCore=1 Reason=pitfall: stub [root@2026-11-28T06:00:00]\n")
        r = self.gate("--slurm-health-check", "--resume-on-pass", "--node", "n1", "--require", "no-gpu")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.calls(), [["-o", "show", "node", "n1"],
                                        ["update", "NodeName=n1", "State=RESUME"]])

    def test_a_pass_leaves_a_node_drained_for_another_reason(self):
        if not built_with_cuda():
            self.skipTest("a build without CUDA cannot pass the gate")
        with open(self.show, "w", encoding="utf-8") as f:
            f.write("NodeName=n1 State=IDLE+DRAIN Reason=memory test pitfall: [admin@2026-11-28T06:00:00]\n")
        r = self.gate("--slurm-health-check", "--resume-on-pass", "--node", "n1", "--require", "no-gpu")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.calls(), [["-o", "show", "node", "n1"]])

    def test_a_failing_gate_never_resumes(self):
        with open(self.show, "w", encoding="utf-8") as f:
            f.write("NodeName=n1 State=IDLE+DRAIN Reason=pitfall: old [root@2026-11-28T06:00:00]\n")
        r = self.gate("--slurm-health-check", "--resume-on-pass", "--node", "n1")
        self.assertEqual(r.returncode, 1)
        self.assertEqual([c[2] for c in self.calls()], ["State=DRAIN"])

    # -- a gate that cannot judge never drains ----------------------------------------------------

    def unjudging_expected(self):
        """Baselines without the gate cases' entries: every gate case is NO_BASELINE."""
        if not built_with_cuda():
            self.skipTest("a build without CUDA runs no gate case to leave unjudged")
        copy = os.path.join(self.tmp, "expected")
        shutil.copytree(REAL_EXPECTED, copy)
        for profile in os.listdir(copy):
            for scenario in ("version_mismatch", "no_kernel_image", "ptx_newer_than_driver", "fork_after_cuda_init"):
                path = os.path.join(copy, profile, scenario + ".json")
                if os.path.exists(path):
                    os.remove(path)
        return copy

    def test_no_baseline_is_unjudged_exit_3(self):
        expected = self.unjudging_expected()
        r = subprocess.run([BIN, "gate", "--index", REAL_INDEX, "--expected", expected, "--require", "no-gpu"],
                           capture_output=True, text=True, env=self.env, timeout=120)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assert_reason_line(r.stdout.splitlines()[0], "unjudged")

    def test_a_prolog_that_cannot_judge_lets_the_job_run(self):
        expected = self.unjudging_expected()
        r = subprocess.run([BIN, "gate", "--index", REAL_INDEX, "--expected", expected, "--require", "no-gpu",
                            "--slurm-prolog", "--node", "n1"], capture_output=True, text=True, env=self.env,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("could not judge", r.stderr)
        self.assertEqual(self.calls(), [])

    # -- bad usage ---------------------------------------------------------------------------------

    def test_bad_usage_is_exit_2_and_asks_nothing(self):
        for args, said in ((["--no-such-flag"], "--no-such-flag"),
                           (["--require", "hoper-cuda13"], "did you mean"),
                           (["--node", "a;b"], "--node"),
                           (["--node", "-x"], "--node"),
                           (["--resume-on-pass"], "--resume-on-pass"),
                           (["--json"], "--json")):
            r = self.gate(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(said, r.stderr.lower() if said == "did you mean" else r.stderr, args)
        self.assertEqual(self.calls(), [])

    def test_a_hostile_node_name_from_slurmd_is_unjudged_not_a_drain(self):
        env = dict(self.env, SLURMD_NODENAME="n1 State=RESUME")
        r = self.gate("--slurm-health-check", env=env)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertEqual(self.calls(), [])

    def test_an_unwritable_json_is_unjudged_and_leaves_no_file(self):
        unwritable = os.path.join(self.tmp, "no-such-folder", "gate.json")
        if built_with_cuda():  # the node passes as no-gpu: its record lost is "could not judge"
            r = self.gate("--json", unwritable, "--require", "no-gpu")
            self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
            self.assertIn("--json", r.stderr)
        # A drain stands whatever became of its record: exit 1, never 3 (nor 0 in a prolog).
        r = self.gate("--json", unwritable)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("--json", r.stderr)
        env = dict(self.env, SLURMD_NODENAME="n1")
        r = self.gate("--json", unwritable, "--slurm-prolog", env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual([c[:2] for c in self.calls()], [["update", "NodeName=n1"]])
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "no-such-folder")))

    def test_a_gpu_library_that_hangs_as_it_loads_is_a_drain_within_the_deadline(self):
        # A libcuda.so.1 whose constructor never returns: the probe hangs loading it. The gate
        # drains within its --deadline, saying why, instead of waiting out probes and cases.
        lib = os.path.join(self.tmp, "hanging-lib")
        os.makedirs(lib)
        source = os.path.join(lib, "hang.c")
        with open(source, "w", encoding="utf-8") as f:
            f.write("#include <unistd.h>\n__attribute__((constructor)) static void hang(void) "
                    "{ for (;;) pause(); }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(lib, "libcuda.so.1"), source],
                       check=True, capture_output=True)
        env = dict(self.env, LD_LIBRARY_PATH=lib)
        started = time.monotonic()
        r, doc = self.gate_json("--deadline", "10", env=env)
        took = time.monotonic() - started
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("[probe-failed]", doc["reason"])
        self.assertIn("timed out", doc["reason"])
        self.assertLess(doc["seconds"], 10, doc)
        self.assertLess(took, 10 + 3)  # the process, start-up and exit included
        # The same under a health check's budget: drained through scontrol within it.
        r = self.gate("--deadline", "10", "--slurm-health-check", "--node", "n1", env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual([c[:3] for c in self.calls()], [["update", "NodeName=n1", "State=DRAIN"]])

    def test_a_prolog_never_drains_for_the_gates_own_bad_input(self):
        env = dict(self.env, SLURMD_NODENAME="n1")
        for args in (["--require", "hoper-cuda13"], ["--node", "a;b"], ["--slurm-health-check"],
                     ["--resume-on-pass", "--slurm-health-check"]):
            r = self.gate("--slurm-prolog", *args, env=env)
            self.assertEqual(r.returncode, 0, (args, r.stdout, r.stderr))
            self.assertIn("letting the job run", r.stderr, args)
        r = subprocess.run([BIN, "gate", "--slurm-prolog", "--index", os.path.join(self.tmp, "no-index.json")],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("letting the job run", r.stderr)
        self.assertEqual(self.calls(), [], "the gate's own failure must not reach scontrol")


class GateCasesDocumented(unittest.TestCase):
    def test_the_docs_list_exactly_the_cases_scenario_json_marks(self):
        self.assertTrue(BIN and REAL_INDEX, "run through CTest: PITFALL_BIN unset")
        r = subprocess.run([BIN, "list", "--index", REAL_INDEX, "--label", "gate", "--json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        marked = {f"{c['backend']}.{c['scenario']}.{c['variant']}" for c in json.loads(r.stdout)}
        self.assertGreaterEqual(len(marked), 3)
        self.assertEqual(marked, GATE_CASES, "docs/gate.md's table of gate cases")


class RunRequire(unittest.TestCase):
    """`pitfall run --require`: a GPU job on a machine without its GPU exits 1 before any case."""

    def setUp(self):
        self.assertTrue(BIN and REAL_INDEX and REAL_EXPECTED, "run through CTest: PITFALL_BIN unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-require-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def run_pitfall(self, *args):
        return subprocess.run([BIN, "run", "--index", REAL_INDEX, "--expected", REAL_EXPECTED,
                               "--backend", "cuda", "--scenario", "version_mismatch", *args],
                              capture_output=True, text=True, timeout=300)

    def test_require_gpu_without_one_exits_1_before_any_case(self):
        out = os.path.join(self.tmp, "run")
        r = self.run_pitfall("--require", "gpu", "--skip-code", "77", "--out", out)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("not what --require gpu expects", r.stderr)
        self.assertIn("no NVIDIA driver", r.stderr)
        self.assertFalse(os.path.exists(out), "no case ran: no run folder")
        # Without --require the same job passes on the baselines of a machine without a GPU.
        r = self.run_pitfall("--skip-code", "77", "--out", out)
        self.assertIn(r.returncode, (0, 77), r.stdout + r.stderr)

    def test_require_the_profile_this_machine_picks(self):
        if not built_with_cuda():
            self.skipTest("a build without CUDA picks the host profile")
        r = self.run_pitfall("--require", "no-gpu", "--out", os.path.join(self.tmp, "run"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = self.run_pitfall("--require", "hopper-cuda13", "--out", os.path.join(self.tmp, "run2"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("picks profile no-gpu, not hopper-cuda13", r.stderr)

    def test_an_unknown_requirement_is_bad_usage(self):
        r = self.run_pitfall("--require", "gpus", "--out", os.path.join(self.tmp, "run"))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--require gpus", r.stderr)


if __name__ == "__main__":
    unittest.main()
