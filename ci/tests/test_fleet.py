"""The fleet driver (tools/pitfall_drivers/fleet.py, schedulers/slurm.py): its parsing of
Slurm's notations, the outcome it gives each node from Slurm's word and the task's own record,
its batch script run for real by bash, its refusals of bad input; then a real Slurm cluster on
this machine (ci/tests/slurm_cluster.py): three nodes, one whose driver is the toolkit's stub,
one taken down, a fleet run across them and the merged report asserted to name the node that
differs and the cases where it does.

Environment: PITFALL_BIN (the pitfall binary); CI=true turns the real cluster's missing
prerequisites into failures instead of skips.
"""
from __future__ import annotations

import io
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

CI_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(CI_DIR.parent / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from pitfall_drivers import fleet_folder  # noqa: E402
from pitfall_drivers.cli import BadInput  # noqa: E402
from pitfall_drivers.schedulers import slurm as fleet_slurm  # noqa: E402
from slurm_cluster import CUDA_STUB, LocalSlurm, missing_tools  # noqa: E402

PITFALL = os.environ.get("PITFALL_BIN", str(CI_DIR.parent / "build" / "ci" / "bin" / "pitfall"))
IN_CI = os.environ.get("CI") == "true"


def pitfall_fleet(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PITFALL, "fleet", *args], capture_output=True, text=True, env=env, timeout=timeout)


class Notations(unittest.TestCase):
    def test_host_lists_expand_as_slurm_does(self):
        self.assertEqual(fleet_slurm.expand_hostlist("gpu[01-03,07],cpu1"), ["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"])
        self.assertEqual(fleet_slurm.expand_hostlist("a[8-10]x"), ["a8x", "a9x", "a10x"])
        self.assertEqual(fleet_slurm.expand_hostlist("n1,n1,n2"), ["n1", "n2"])
        for bad in ("gpu[1-", "gpu]1[", "gpu[3-1]", "gpu[a-b]", "", ",", "bad name", "x;rm", "gpu[1-999999]"):
            with self.subTest(bad=bad), self.assertRaisesRegex(BadInput, "--nodelist"):
                fleet_slurm.expand_hostlist(bad)

    def test_time_limits_in_slurms_forms(self):
        for text, seconds in (("30", 1800), ("1:30", 90), ("02:00:00", 7200), ("1-0", 86400),
                              ("1-02:03", 93780), ("1-02:03:04", 93784)):
            with self.subTest(text=text):
                self.assertEqual(fleet_slurm.parse_time_limit(text), seconds)
        for bad in ("", "0", "1h", "-5", "1:2:3:4", "abc"):
            with self.subTest(bad=bad), self.assertRaisesRegex(BadInput, "--time"):
                fleet_slurm.parse_time_limit(bad)

    def test_gpu_counts_from_sinfo_gres(self):
        self.assertEqual(fleet_slurm.parse_gpu_gres("gpu:h100:4(S:0-1),mps:100"), 4)
        self.assertEqual(fleet_slurm.parse_gpu_gres("gpu:2,gpu:a10:1"), 3)
        self.assertEqual(fleet_slurm.parse_gpu_gres("(null)"), 0)
        self.assertEqual(fleet_slurm.parse_gpu_gres("gpu"), 1)

    def test_elapsed_times(self):
        self.assertEqual(fleet_slurm.slurm_duration("00:05"), 5.0)
        self.assertEqual(fleet_slurm.slurm_duration("1:02:03"), 3723.0)
        self.assertEqual(fleet_slurm.slurm_duration("2-00:00:01"), 172801.0)
        self.assertIsNone(fleet_slurm.slurm_duration("INVALID"))


class Outcomes(unittest.TestCase):
    """Slurm's state and the task's own record (task.json) make one outcome per node."""

    FLEET = {"job_id": "77", "nodes": ["n1"], "all_nodes": ["n1", "n2"], "skipped": {"n2": {"state": "drained", "reason": "bad fan"}},
             "node_down": {}}

    def outcome(self, slurm: dict | None, task: dict | None, node: str = "n1") -> dict:
        with tempfile.TemporaryDirectory() as d:
            if task is not None:
                Path(d, "task.json").write_text(json.dumps(task))
            index = 0 if node == "n1" else None
            return fleet_slurm.node_record(self.FLEET, node, index, slurm, Path(d))

    def test_each_slurm_state_gives_its_outcome(self):
        ran = {"run_exit": 1, "doctor_exit": 0}
        cases = [
            ({"state": "COMPLETED", "exit_code": "0:0"}, ran, "ran"),
            ({"state": "COMPLETED", "exit_code": "0:0"}, None, "run_failed"),
            ({"state": "FAILED", "exit_code": "2:0"}, {"run_exit": 2, "message": "pitfall run exited 2"}, "run_failed"),
            ({"state": "FAILED", "exit_code": "1:0", "reason": "NonZeroExitCode"}, None, "job_failed"),
            ({"state": "OUT_OF_MEMORY"}, None, "job_failed"),
            ({"state": "NODE_FAIL"}, None, "node_down"),
            ({"state": "TIMEOUT"}, None, "timed_out"),
            ({"state": "CANCELLED+"}, None, "cancelled"),
            ({"state": "CANCELLED by 0"}, None, "cancelled"),
            ({"state": "PENDING", "reason": "Resources"}, None, "pending"),
            ({"state": "RUNNING"}, None, "running"),
            (None, ran, "ran"),
            (None, None, "lost"),
        ]
        for slurm, task, want in cases:
            with self.subTest(slurm=slurm, task=task):
                rec = self.outcome(slurm, task)
                self.assertEqual(rec["outcome"], want)
                self.assertIn(rec["outcome"], fleet_folder.NODE_OUTCOMES)
                if want not in ("ran", "pending", "running"):
                    self.assertTrue(rec.get("message"), rec)

    def test_a_node_down_when_submitted_says_why(self):
        rec = self.outcome(None, None, node="n2")
        self.assertEqual(rec["outcome"], "node_down")
        self.assertEqual(rec["reason"], "bad fan")
        self.assertIn("drained", rec["message"])

    def test_a_hostile_task_record_is_no_crash(self):
        for payload in (b"[1, 2]", b'{"run_exit": "0"}', b'{"run_exit": true}', b"\xff\xfe{}", b"[" * 5000,
                        b'{"run_exit": 1e999}', b'{"run_exit": NaN}'):
            with self.subTest(payload=payload[:20]), tempfile.TemporaryDirectory() as d:
                Path(d, "task.json").write_bytes(payload)
                rec = fleet_slurm.node_record(self.FLEET, "n1", 0, {"state": "COMPLETED"}, Path(d))
                self.assertEqual(rec["outcome"], "run_failed")

    def test_slurm_not_answering_is_no_outcome(self):
        # An aged-out job is Slurm's answer (nothing to report); a controller that does not
        # answer is no answer at all, and must not turn running nodes into "lost" ones.
        self.assertTrue(fleet_slurm._answered(0, "", "squeue"))
        self.assertFalse(fleet_slurm._answered(1, "slurm_load_jobs error: Invalid job id specified", "squeue"))
        with self.assertRaisesRegex(fleet_slurm.SlurmUnavailable, "Unable to contact slurm controller"):
            fleet_slurm._answered(1, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)", "squeue")

    def test_a_fifo_task_record_does_not_hang(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkfifo(Path(d, "task.json"))
            rec = fleet_slurm.node_record(self.FLEET, "n1", 0, {"state": "COMPLETED"}, Path(d))
            self.assertEqual(rec["outcome"], "run_failed")


class BatchScript(unittest.TestCase):
    """The array task's script, run by bash as slurmstepd would, against a stand-in for pitfall
    (a shell script that records its arguments and exits as told)."""

    def run_task(self, task: int, node: str, run_exit: int, container_kind: str = "") -> tuple[int, Path]:
        d = Path(tempfile.mkdtemp(prefix="pitfall-fleet-script-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(d)])
        fake = d / "fake-pitfall"
        fake.write_text(f"""#!/bin/sh
echo "$@" >> {d}/argv
case "$1" in
  doctor) echo '{{"schema": "pitfall.doctor/1", "headline": "ok"}}'; exit 1 ;;
  run) mkdir -p "$3" && touch "$3/results.jsonl"; exit {run_exit} ;;
esac
""")
        fake.chmod(0o755)
        plan = fleet_slurm.Plan(out=d / "fleet", nodes=["gpu1", "gpu2"], skipped={}, pitfall=str(fake),
                          run_args=["--scenario", "float64_inputs", "--label", "it's $(quoted)"],
                          container="registry.example/pitfall:1 x", container_kind=container_kind)
        script = d / "fleet.sbatch"
        script.write_text(fleet_slurm.batch_script(plan))
        # srun as a container plugin's would be: it records its options, then runs the command.
        bin_dir = d / "bin"
        bin_dir.mkdir()
        (bin_dir / "srun").write_text(f"""#!/bin/bash
while [[ "$1" == --* ]]; do echo "$1" >> {d}/srun-options; shift; done
exec "$@"
""")
        (bin_dir / "srun").chmod(0o755)
        env = dict(os.environ, SLURM_ARRAY_TASK_ID=str(task), SLURMD_NODENAME=node, SLURM_ARRAY_JOB_ID="42",
                   PATH=f"{bin_dir}:{os.environ['PATH']}")
        rc = subprocess.run(["bash", str(script)], env=env, timeout=60).returncode
        return rc, d

    def test_a_judged_run_is_a_completed_task(self):
        for run_exit in (0, 1):
            with self.subTest(run_exit=run_exit):
                rc, d = self.run_task(1, "gpu2", run_exit)
                self.assertEqual(rc, 0)
                node = d / "fleet" / "nodes" / "gpu2"
                task = json.loads((node / "task.json").read_text())
                self.assertEqual((task["node"], task["run_exit"], task["doctor_exit"], task["job_id"]),
                                 ("gpu2", run_exit, 1, "42_1"))
                self.assertEqual(json.loads((node / "doctor.json").read_text())["headline"], "ok")
                self.assertTrue((node / "run" / "results.jsonl").exists())
                argv = (d / "argv").read_text().splitlines()
                self.assertEqual(argv[1], f"run --out {node}/run --replace --scenario float64_inputs "
                                          "--label it's $(quoted)")
                self.assertFalse(list(node.glob(".*.tmp")))

    def test_in_a_container_each_command_is_a_step_in_the_image(self):
        for kind, options in (("pyxis", ["--ntasks=1", "--container-image=registry.example/pitfall:1 x",
                                          "--container-mounts={out}:{out}", "--container-workdir=/tmp"]),
                              ("oci", ["--ntasks=1", "--container=registry.example/pitfall:1 x"])):
            with self.subTest(kind=kind):
                rc, d = self.run_task(0, "gpu1", 0, container_kind=kind)
                self.assertEqual(rc, 0)
                out = d / "fleet"
                want = [o.format(out=out) for o in options]
                self.assertEqual((d / "srun-options").read_text().splitlines(), want * 2)  # doctor, run
                self.assertEqual(json.loads((out / "nodes" / "gpu1" / "task.json").read_text())["run_exit"], 0)

    def test_a_run_that_could_not_judge_fails_the_task(self):
        rc, d = self.run_task(0, "gpu1", 2)
        self.assertEqual(rc, 2)
        task = json.loads((d / "fleet" / "nodes" / "gpu1" / "task.json").read_text())
        self.assertEqual(task["run_exit"], 2)
        self.assertIn("exited 2", task["message"])

    def test_a_task_on_the_wrong_node_says_so(self):
        rc, d = self.run_task(0, "gpu2", 0)
        self.assertEqual(rc, 3)
        task = json.loads((d / "fleet" / "nodes" / "gpu2" / "task.json").read_text())
        self.assertIn("meant for gpu1", task["message"])
        self.assertFalse((d / "argv").exists(), "pitfall ran on a node it was not meant for")


class BadFleetInput(unittest.TestCase):
    def test_flags_are_checked_before_anything_is_submitted(self):
        for args, word in ((["run", "--nodes", "2", "--nodelist", "a,b"], "--nodes and --nodelist"),
                           (["run", "--nodes", "0"], "--nodes 0"),
                           (["run", "--time", "soon"], "--time"),
                           (["run", "--engine", "kubernetes"], "fleet manifest"),
                           (["run", "--gres", "gpu;rm"], "--gres"),
                           (["run", "--poll", "0"], "--poll"),
                           (["run", "--frobnicate"], "--frobnicate"),
                           (["launch"], "unknown fleet command"),
                           (["status"], "needs the fleet folder")):
            with self.subTest(args=args):
                p = pitfall_fleet(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(word, p.stderr)
                self.assertNotIn("Traceback", p.stderr)

    def test_a_dry_run_with_its_nodes_named_needs_no_controller(self):
        # A Slurm client installed, its controller down: sinfo fails as it does then. The dry run
        # of named nodes still shows the script, says the nodes were not checked, and submits
        # nothing; a dry run that must ask Slurm for its nodes, or a real run, is refused.
        with tempfile.TemporaryDirectory() as d:
            bin_dir = Path(d, "bin")
            bin_dir.mkdir()
            for tool in ("sbatch", "squeue", "sinfo", "scontrol", "scancel"):
                (bin_dir / tool).write_text("#!/bin/sh\necho 'slurm_load_partitions: Unable to contact "
                                            "slurm controller (connect failure)' >&2\nexit 1\n")
                (bin_dir / tool).chmod(0o755)
            env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
            out = Path(d, "dry")
            p = pitfall_fleet("run", "--out", str(out), "--nodelist", "gpu[1-2]", "--dry-run", env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("#!/bin/bash", p.stdout)
            self.assertIn("ReqNodeList=gpu2", p.stdout)
            self.assertIn("Unable to contact slurm controller", p.stderr)
            self.assertIn("unchecked", p.stderr)
            self.assertFalse(out.exists())
            for args in (["run", "--dry-run"], ["run", "--out", str(out), "--nodelist", "gpu1"]):
                with self.subTest(args=args):
                    p = pitfall_fleet(*args, env=env)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn("is slurmctld up", p.stderr)
                    self.assertNotIn("Traceback", p.stderr)

    def test_a_hostile_fleet_folder_is_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            p = pitfall_fleet("status", d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("no fleet.json", p.stderr)
            path = Path(d, "fleet.json")
            for content, word in ((b"\xff\xfe", "not UTF-8"), (b"[" * 10000, "deeper"), (b"{}", "not a fleet record"),
                                  (json.dumps({"schema": fleet_folder.FLEET_SCHEMA, "job_id": "1", "nodes": ["a b"]}).encode(),
                                   "'nodes'"),
                                  (json.dumps({"schema": fleet_folder.FLEET_SCHEMA, "job_id": 7, "nodes": []}).encode(), "'job_id'"),
                                  (json.dumps({"schema": fleet_folder.FLEET_SCHEMA, "job_id": "7", "nodes": ["n1"],
                                               "skipped": {"n1": 5}}).encode(), "'skipped'"),
                                  (json.dumps({"schema": fleet_folder.FLEET_SCHEMA, "job_id": "7", "nodes": ["n1"],
                                               "node_down": {"n1": {"reason": []}}}).encode(), "'node_down'")):
                with self.subTest(content=content[:30]):
                    path.write_bytes(content)
                    p = pitfall_fleet("collect", d)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn(word, p.stderr)
                    self.assertNotIn("Traceback", p.stderr)
            path.unlink()
            os.mkfifo(path)
            p = pitfall_fleet("status", d, timeout=30)
            self.assertEqual(p.returncode, 2)
            self.assertIn("FIFO", p.stderr)

    def test_the_exit_status_comes_from_the_report_as_data(self):
        # A stand-in pitfall writes each merged report; what its JSON says decides the exit, and
        # a JSON that says nothing usable is a problem named with the file, never a pass.
        with tempfile.TemporaryDirectory() as d:
            out, stand_in = Path(d, "fleet"), Path(d, "pitfall")
            (out / "nodes" / "n1").mkdir(parents=True)
            stand_in.write_text("#!/bin/bash\n# report --merge DIRS... --format F --out FILE\n"
                                'out="${@: -1}"; fmt="${@: -3:1}"\n'
                                'if [[ $fmt == json ]]; then cat "$FLEET_REPORT_JSON" >"$out"; '
                                'else printf "## t\\n\\n### Which node differs\\n\\nx\\n" >"$out"; fi\n')
            stand_in.chmod(0o755)
            records = {"n1": {"outcome": "ran", "run_exit": 0}}
            src = Path(d, "report.json")
            os.environ["FLEET_REPORT_JSON"] = str(src)
            self.addCleanup(os.environ.pop, "FLEET_REPORT_JSON", None)
            for content, rc, said in (('{"differing_within_groups": 0}', 0, ""),
                                      ('{"differing_within_groups": 3}', 1, "3 case(s) differ"),
                                      ('{"differing_within_groups": "3"}', 1, "differing_within_groups is not a count"),
                                      ('{"differing_within_groups": true}', 1, "is not a count"),
                                      ("[1, 2]", 1, "is not a count"),
                                      ("\xff", 1, "not UTF-8"),
                                      ("[" * 10000, 1, "deeper")):
                with self.subTest(content=content[:30]):
                    src.write_bytes(content.encode("latin-1"))
                    err = io.StringIO()
                    with redirect_stdout(io.StringIO()), redirect_stderr(err):
                        got = fleet_folder.merge(out, {"all_nodes": ["n1"]}, str(stand_in), records)
                    self.assertEqual(got, rc, err.getvalue())
                    self.assertIn(said, err.getvalue())
                    if said and "differ" not in said:
                        self.assertIn(str(out / "fleet-report.json"), err.getvalue())

    def test_help_lists_the_commands_and_exit_codes(self):
        p = pitfall_fleet("--help")
        self.assertEqual(p.returncode, 0)
        for word in ("run --engine slurm", "status DIR", "collect DIR", "cancel DIR", "manifest --engine kubernetes",
                     "node outcomes", "130 interrupted"):
            self.assertIn(word, p.stdout)


def cluster_prerequisites() -> str:
    """Why the real cluster cannot run here, or ''."""
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root (mknod, a mount namespace per node, slurmd)"
    if missing_tools():
        return f"Slurm is not installed here ({', '.join(missing_tools())}): ci/setup.sh --slurm installs it"
    if not CUDA_STUB.exists():
        return f"no CUDA toolkit stub at {CUDA_STUB} (the node made to differ loads it as its driver)"
    return ""


class SlurmFleet(unittest.TestCase):
    """A fleet run on a real Slurm: gpu1 and gpu3 as this machine is, gpu2 whose libcuda.so.1 is
    the toolkit's stub, gpu4 taken down by its administrator before the run."""

    @classmethod
    def setUpClass(cls):
        why = cluster_prerequisites()
        if why:
            if IN_CI:
                raise AssertionError(f"CI must run the Slurm fleet test: {why}")
            raise unittest.SkipTest(why)
        cls.cluster = LocalSlurm(["gpu1", "gpu2", "gpu3", "gpu4"], stub_driver_nodes=("gpu2",))
        try:
            cls.cluster.start()
            cls.cluster.stop_node("gpu4", "fan failure (taken out for the fleet test)")
        except Exception:
            cls.cluster.stop()
            raise
        cls.out = Path(tempfile.mkdtemp(prefix="pitfall-fleet-"))
        # A collect without --history records into pitfall's default database: the test's own.
        cls.cluster.env["PITFALL_HISTORY"] = str(cls.out / "default-history.sqlite")
        started = time.monotonic()
        cls.fleet_run = pitfall_fleet("run", "--engine", "slurm", "--out", str(cls.out / "a"), "--poll", "0.5",
                                "--scenario", "float64_inputs,version_mismatch", "--backend", "cuda",
                                "--history", str(cls.out / "history.sqlite"), env=cls.cluster.env)
        cls.wall = time.monotonic() - started
        print(f"\nfleet run across the local cluster: {cls.wall:.1f} s\n{cls.fleet_run.stdout}\n{cls.fleet_run.stderr}",
              file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        subprocess.run(["rm", "-rf", str(cls.out)])

    def node(self, name: str) -> dict:
        return json.loads((self.out / "a" / "nodes" / name / "node.json").read_text())

    def test_the_run_reports_progress_and_fails_for_the_node_that_differs(self):
        out = self.fleet_run.stdout
        self.assertEqual(self.fleet_run.returncode, 1, out + self.fleet_run.stderr)
        self.assertRegex(out, r"submitted array job \d+ \(3 tasks, one per node\)")
        self.assertRegex(out, r"fleet \d+: 4 nodes: \d pending, \d running, \d done, 1 failed")
        self.assertRegex(out, r"fleet \d+: 4 nodes: 0 pending, 0 running, 3 done, 1 failed")
        self.assertIn("gpu4 (node_down)", self.fleet_run.stderr)
        self.assertIn("differ between nodes of one fingerprint group", self.fleet_run.stderr)

    def test_each_node_has_its_outcome(self):
        for name in ("gpu1", "gpu2", "gpu3"):
            rec = self.node(name)
            self.assertEqual((rec["outcome"], rec["slurm_state"]), ("ran", "COMPLETED"), rec)
            self.assertRegex(rec["job_id"], r"^\d+_[012]$")
        # The nodes as this machine is meet their baselines; the stub node's run is judged by
        # its own probe (never an answer another node's probe kept: they share /tmp here).
        self.assertEqual([self.node(n)["run_exit"] for n in ("gpu1", "gpu3")], [0, 0])
        self.assertIn(self.node("gpu2")["run_exit"], (0, 1))
        with open(self.out / "a" / "nodes" / "gpu2" / "run" / "fingerprint.json") as f:
            self.assertEqual(json.load(f)["libraries"]["cuda"]["device_error"]["error"], "cudaErrorStubLibrary")
        down = self.node("gpu4")
        self.assertEqual(down["outcome"], "node_down")
        self.assertEqual(down["reason"], "fan failure (taken out for the fleet test)")
        # Each task ran on the node it was pinned to, and the node's own doctor saw the stub.
        self.assertEqual(json.loads((self.out / "a" / "nodes" / "gpu2" / "task.json").read_text())["node"], "gpu2")
        findings = json.loads((self.out / "a" / "nodes" / "gpu2" / "doctor.json").read_text())["findings"]
        self.assertIn("stub-driver", [f.get("id") for f in findings])
        findings = json.loads((self.out / "a" / "nodes" / "gpu1" / "doctor.json").read_text())["findings"]
        self.assertNotIn("stub-driver", [f.get("id") for f in findings])

    def test_the_merged_report_names_the_node_and_the_cases_that_differ(self):
        md = (self.out / "a" / "fleet.md").read_text()
        self.assertTrue((self.out / "a" / "fleet.html").stat().st_size > 0)
        section = re.search(r"^### Which node differs\n(.*?)(?=^### |\Z)", md, re.S | re.M)
        self.assertIsNotNone(section, md)
        text = section.group(1)
        # One group (no GPU, no driver, the same CUDA and cuDNN), and gpu2 alone odd in it.
        self.assertIn("3 nodes (`gpu1`, `gpu2`, `gpu3`)", text)
        self.assertIn("`gpu2` differs from the other 2 nodes of its group", text)
        self.assertNotIn("`gpu1` differs", text)
        self.assertNotIn("`gpu3` differs", text)
        # Every CUDA case differs on gpu2: the stub answers cudaErrorStubLibrary where the
        # others, with no driver at all, answer cudaErrorInsufficientDriver; and two cases whose
        # baselines expect exactly that PASS elsewhere and not there.
        odd = text.split("`gpu2` differs", 1)[1].split("\n\n", 2)[1]
        for case in ("cuda.float64_inputs.reproduce", "cuda.float64_inputs.remedy",
                     "cuda.version_mismatch.runtime_vs_driver"):
            self.assertIn(f"`{case}`", odd)
        self.assertIn("cudaErrorStubLibrary", odd)
        self.assertIn("cudaErrorInsufficientDriver", odd)
        self.assertRegex(md, r"\| `gpu4` \| node\\_down \(down, reason: fan failure")  # the nodes table says why
        self.assertIn("fan failure", md)
        # The section the closing summary printed is the report's.
        self.assertIn("### Which node differs", self.fleet_run.stdout)
        # The report as data says the same, and the exit's count is its count.
        report = json.loads((self.out / "a" / "fleet-report.json").read_text())
        [group] = report["groups"]
        self.assertEqual([n["node"] for n in group["odd_nodes"]], ["gpu2"])
        self.assertIn(f"{report['differing_within_groups']} case(s) differ between nodes of one fingerprint group",
                      self.fleet_run.stderr)
        self.assertEqual({n["node"]: n["outcome"] for n in report["nodes"]},
                         {"gpu1": "ran", "gpu2": "ran", "gpu3": "ran", "gpu4": "node_down"})

    def test_every_node_run_is_recorded_in_the_history(self):
        self.assertIn("history: 3 node run(s) recorded", self.fleet_run.stdout)
        p = subprocess.run([PITFALL, "history", "show", "--db", str(self.out / "history.sqlite"),
                            "--case", "cuda.version_mismatch.runtime_vs_driver", "--json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        points = json.loads(p.stdout)["points"]
        self.assertEqual(len(points), 3, points)
        folders = sorted(Path(pt["folder"]).parent.name for pt in points)
        self.assertEqual(folders, ["gpu1", "gpu2", "gpu3"])

    def test_status_and_collect_read_the_finished_fleet(self):
        p = pitfall_fleet("status", str(self.out / "a"), env=self.cluster.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"4 nodes: 0 pending, 0 running, 3 done, 1 failed")
        p = pitfall_fleet("status", str(self.out / "a"), "--json", env=self.cluster.env)
        self.assertEqual(json.loads(p.stdout)["nodes"]["gpu4"]["outcome"], "node_down")
        before = (self.out / "a" / "fleet.md").read_text()
        p = pitfall_fleet("collect", str(self.out / "a"), env=self.cluster.env)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual((self.out / "a" / "fleet.md").read_text(), before)
        # Recorded in the default database ($PITFALL_HISTORY here); again, nothing changes.
        self.assertIn("history: 3 node run(s) recorded", p.stdout)
        self.assertTrue((self.out / "default-history.sqlite").is_file())
        p = pitfall_fleet("collect", str(self.out / "a"), "--no-history", env=self.cluster.env)
        self.assertNotIn("history:", p.stdout)

    def test_dry_run_prints_the_script_and_submits_nothing(self):
        p = pitfall_fleet("run", "--engine", "slurm", "--out", str(self.out / "dry"), "--nodelist", "gpu[1-2]",
                          "--dry-run", "--time", "10", env=self.cluster.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("#!/bin/bash", p.stdout)
        self.assertIn("--hold --array=0-1 --nodes=1 --exclusive", p.stdout)
        self.assertIn("--gres=gpu:1", p.stdout)
        self.assertIn("--time=10", p.stdout)
        self.assertIn("ReqNodeList=gpu2", p.stdout)
        self.assertFalse((self.out / "dry").exists())
        p = pitfall_fleet("run", "--nodelist", "gpu9", "--dry-run", env=self.cluster.env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("knows no node gpu9", p.stderr)

    def test_a_node_drained_while_its_task_waits_is_node_down(self):
        # gpu1 busy with another job; the fleet's task pinned to it waits. The administrator
        # drains gpu1: the other job may finish, the fleet's task would wait for ever. The driver
        # cancels it and records node_down with the drain's reason; the fleet still ends.
        env = self.cluster.env
        self.cluster.wait_idle(["gpu1"], 60)
        blocker = subprocess.run(["sbatch", "--parsable", "--exclusive", "--nodelist=gpu1", "--wrap", "sleep 60"],
                                 env=env, capture_output=True, text=True)
        self.assertEqual(blocker.returncode, 0, blocker.stderr)
        self.addCleanup(subprocess.run, ["scancel", blocker.stdout.strip()], env=env)
        self.addCleanup(self.cluster.scontrol, "update", "NodeName=gpu1", "State=RESUME", check=False)
        proc = subprocess.Popen([PITFALL, "fleet", "run", "--out", str(self.out / "c"), "--nodelist", "gpu1",
                                 "--poll", "0.5", "--backend", "cuda", "--scenario", "float64_inputs"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        node_json = self.out / "c" / "nodes" / "gpu1" / "node.json"
        deadline = time.monotonic() + 30
        while not (node_json.exists() and json.loads(node_json.read_text())["outcome"] == "pending"):
            self.assertLess(time.monotonic(), deadline, "the fleet's task never showed as pending")
            time.sleep(0.3)
        self.cluster.scontrol("update", "NodeName=gpu1", "State=DRAIN", "Reason=ECC errors (drained mid-run)")
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 1, out + err)
        rec = json.loads(node_json.read_text())
        self.assertEqual(rec["outcome"], "node_down", rec)
        self.assertEqual(rec["reason"], "ECC errors (drained mid-run)")
        self.assertIn("gpu1: node_down", out)

    def test_container_runs_each_step_in_the_image(self):
        # No pyxis here: an OCI bundle goes to Slurm's own --container (oci.conf with runc).
        bundle = self.cluster.host_bundle([PITFALL, CI_DIR, sys.executable, self.out])
        p = pitfall_fleet("run", "--out", str(self.out / "oci"), "--nodelist", "gpu1", "--poll", "0.5",
                          "--container", str(bundle), "--pitfall", PITFALL, "--backend", "cuda",
                          "--scenario", "float64_inputs", env=self.cluster.env)
        node = self.out / "oci" / "nodes" / "gpu1"
        # A failure here is in the step: what it printed inside the container says why.
        step_log = node / "slurm.out"
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr + "\n--- slurm.out of gpu1:\n"
                         + (step_log.read_text(errors="replace")[-4000:] if step_log.exists() else "(none)"))
        self.assertEqual(json.loads((node / "node.json").read_text())["outcome"], "ran")
        self.assertIn(f"srun --ntasks=1 --container={bundle}", (self.out / "oci" / "fleet.sbatch").read_text())
        # Both steps ran inside: the doctor and the run's fingerprint each saw the container.
        self.assertTrue(json.loads((node / "doctor.json").read_text())["facts"]["in_container"])
        with open(node / "run" / "results.jsonl") as f:
            header = json.loads(f.readline())
        self.assertTrue(header["fingerprint_summary"]["in_container"], header["fingerprint_summary"])
        p = pitfall_fleet("run", "--nodelist", "gpu1", "--container", str(self.out), "--dry-run", env=self.cluster.env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not an OCI bundle", p.stderr)

    def test_a_controller_restart_mid_fleet_is_waited_out(self):
        # slurmctld stopped while the task runs, then started again (it recovers its jobs from
        # StateSaveLocation): the fleet says Slurm is not answering, waits, and ends as usual.
        proc = subprocess.Popen([PITFALL, "fleet", "run", "--out", str(self.out / "d"), "--nodelist", "gpu3",
                                 "--poll", "0.5", "--backend", "cpu", "--scenario", "float64_inputs", "--samples", "61"],
                                env=self.cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        node_json = self.out / "d" / "nodes" / "gpu3" / "node.json"
        deadline = time.monotonic() + 60
        while not (node_json.exists() and json.loads(node_json.read_text())["outcome"] == "running"):
            self.assertLess(time.monotonic(), deadline, "the fleet's task never ran")
            time.sleep(0.3)
        # Down until the driver has said so (a client gives up after MessageTimeout, 5 s, and a
        # loaded machine adds its own delay: a fixed pause raced that), then back.
        self.cluster.stop_controller()
        lines = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
        reader.start()
        said, deadline = [], time.monotonic() + 60
        while not any("Slurm is not answering" in line for line in said):
            try:
                said.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                self.cluster.start_controller()
                self.fail("the fleet never said Slurm is not answering:\n" + "".join(said))
        self.cluster.start_controller()
        proc.wait(timeout=240)
        err = proc.stderr.read()  # a few lines: the pipe never filled while nobody read it
        reader.join(timeout=10)
        while not lines.empty():
            said.append(lines.get())
        out = "".join(said)
        self.assertIn(proc.returncode, (0, 1), out + err)  # 1 when a timing missed its baseline
        self.assertIn("Slurm answers again", out)
        self.assertEqual(json.loads(node_json.read_text())["outcome"], "ran")
        self.cluster.wait_idle(["gpu1", "gpu2", "gpu3"], 60)  # every node registered again

    def test_an_interrupted_fleet_cancels_its_job(self):
        # A task that would take minutes (the CPU cases with many samples), interrupted once
        # it runs: the job is cancelled, the nodes say so, the exit status is 130.
        proc = subprocess.Popen([PITFALL, "fleet", "run", "--out", str(self.out / "b"), "--nodelist", "gpu1",
                                 "--poll", "0.5", "--backend", "cpu", "--samples", "301"],
                                env=self.cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        node_json = self.out / "b" / "nodes" / "gpu1" / "node.json"
        while time.monotonic() < deadline:
            if node_json.exists() and json.loads(node_json.read_text())["outcome"] == "running":
                break
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, out + err)
        self.assertIn("cancelled", err)
        deadline = time.monotonic() + 30
        while json.loads(node_json.read_text())["outcome"] != "cancelled" and time.monotonic() < deadline:
            pitfall_fleet("collect", str(self.out / "b"), env=self.cluster.env)
            time.sleep(1)
        self.assertEqual(json.loads(node_json.read_text())["outcome"], "cancelled")
        self.cluster.wait_idle(["gpu1"], 60)


if __name__ == "__main__":
    unittest.main()
