"""`pitfall gate` in Slurm (tools/slurm/pitfall-gate-*, docs/clusters.md): the wrappers'
configuration and their refusals, a hostile reason reaching scontrol as one argument; then a real
Slurm cluster on this machine (ci/tests/slurm_cluster.py) where one node's libcuda.so.1 is the
CUDA toolkit's stub:
- Prolog: a job lands on the stub node first, its prolog's gate drains the node with pitfall's
  reason, the job is requeued and completes on the healthy node.
- HealthCheckProgram: the stub node is drained by the periodic check; once its slurmd runs
  without the stub, a later check resumes it; a node drained by its administrator stays drained.

The nodes here have no GPU driver at all, so the gate runs with `--require no-gpu`: the healthy
node passes (the doctor's no-driver error is what that profile expects), the stub node fails the
doctor's stub-driver error and the gate cases.

Environment: PITFALL_BIN (the pitfall binary); CI=true turns the real cluster's missing
prerequisites into failures instead of skips.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from datetime import datetime, timezone
from pathlib import Path

CI_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_cluster import CUDA_STUB, LocalSlurm, missing_tools  # noqa: E402

PITFALL = os.environ.get("PITFALL_BIN", str(CI_DIR.parent / "build" / "ci" / "bin" / "pitfall"))
WRAPPERS = CI_DIR.parent / "tools" / "slurm"
IN_CI = os.environ.get("CI") == "true"
# A folder name the doctor quotes in its stub-driver finding, so in the gate's reason: both
# quotes, a newline (which the gate folds into a space), command substitutions, a pipe and &&. No
# ';': the loader splits LD_LIBRARY_PATH at ';' as at ':' (ld.so(8)), so the stub would not load.
# {p} is a short absolute prefix, and what matters most comes first: the reason is cut at 200
# characters, sooner where the gate says more before the finding (a build without CUDA).
HOSTILE = "'\"\n$(touch {p}1)`touch {p}2`|touch {p}3&&"


def install_gate(folder: Path, conf: dict[str, str]) -> Path:
    """The wrappers copied into `folder` with a pitfall-gate.conf beside them, as an operator
    installs them; the folder's own state/ for the lock and the reports."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("pitfall-gate-slurm", "pitfall-gate-prolog", "pitfall-gate-health-check"):
        shutil.copy2(WRAPPERS / name, folder / name)
    conf = {"STATE_DIR": str(folder / "state"), **conf}
    (folder / "pitfall-gate.conf").write_text(
        "# written by test_gate_slurm.py\n" + "".join(f"{k}={v}\n" for k, v in conf.items()))
    return folder


def hostile_stub_folder(case: unittest.TestCase) -> tuple[Path, Path]:
    """A folder whose path ends in HOSTILE (its slashes make folders of their own) holding the
    toolkit's stub as libcuda.so.1: on LD_LIBRARY_PATH, the doctor names it in the stub-driver
    finding. And the prefix of the files a shell would create from it."""
    parent = Path(tempfile.mkdtemp(prefix="pg", dir="/tmp"))
    case.addCleanup(shutil.rmtree, parent, ignore_errors=True)
    planted = parent / "p"
    folder = Path(f"{parent}/{HOSTILE.format(p=planted)}")
    folder.mkdir(parents=True)
    shutil.copy(CUDA_STUB, folder / "libcuda.so.1")
    return folder, planted


def planted_files(planted: Path) -> list[Path]:
    return sorted(planted.parent.glob(planted.name + "*"))


class Wrappers(unittest.TestCase):
    """The wrappers against a stand-in pitfall that records its argv (no Slurm needed), and the
    real gate against a stand-in scontrol that records its own."""

    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="pitfall-gate-wrapper-"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.fake = self.dir / "fake-pitfall"
        self.fake.write_text(f"#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > {self.dir}/argv\n"
                             f"env > {self.dir}/env\nexit 1\n")
        self.fake.chmod(0o755)

    def run_wrapper(self, mode: str, conf: dict[str, str] | bytes) -> subprocess.CompletedProcess:
        gate = self.dir / "gate"
        if isinstance(conf, bytes):
            install_gate(gate, {})
            (gate / "pitfall-gate.conf").write_bytes(conf)
        else:
            install_gate(gate, conf)
        # slurmd's own environment for a health check: SLURMD_NODENAME and nothing else.
        return subprocess.run([str(gate / f"pitfall-gate-{mode}")], env={"SLURMD_NODENAME": "gpu7"},
                              capture_output=True, text=True, timeout=60)

    def argv(self) -> list[str]:
        return (self.dir / "argv").read_text().split("\0")[:-1]

    def test_each_mode_runs_the_gate_with_the_configured_options_as_single_arguments(self):
        odd = "no gpu $(touch x) `y`;'\""
        for mode, flag, extra in (("prolog", "--slurm-prolog", []), ("health-check", "--slurm-health-check", ["--resume-on-pass"])):
            with self.subTest(mode=mode):
                p = self.run_wrapper(mode, {"PITFALL": str(self.fake), "REQUIRE": odd, "INDEX": f"{self.dir}/i x.json",
                                            "SLURM_CONF": "/etc/slurm x/slurm.conf", "PATH": "/usr/bin:/bin"})
                self.assertEqual(p.returncode, 1, p.stderr)  # the gate's own exit status
                state = self.dir / "gate" / "state"
                self.assertEqual(self.argv(), ["gate", flag, "--require", odd, *extra,
                                               "--index", f"{self.dir}/i x.json", "--json", f"{state}/gpu7.{mode}.json"])
                env = (self.dir / "env").read_text().splitlines()
                self.assertIn("SLURMD_NODENAME=gpu7", env)  # the gate's own source of the name
                self.assertIn("SLURM_CONF=/etc/slurm x/slurm.conf", env)
                self.assertIn("PATH=/usr/bin:/bin", env)
                self.assertFalse(list(self.dir.glob("x")) + list(Path.cwd().glob("x")))
        self.run_wrapper("health-check", {"PITFALL": str(self.fake), "RESUME_ON_PASS": "no"})
        self.assertNotIn("--resume-on-pass", self.argv())

    def test_a_bad_configuration_never_drains(self):
        # A prolog's non-zero exit drains the node: the wrapper's own failure exits 0 there, and 3
        # as a health check (slurmd logs it), naming the file and what is wrong with it.
        cases = (({}, "PITFALL must be the absolute path"),
                 ({"PITFALL": "pitfall"}, "PITFALL must be the absolute path"),
                 ({"PITFALL": "/nonexistent/pitfall"}, "not an executable file"),
                 ({"PITFALL": str(self.fake), "RESUME_ON_PASS": "maybe"}, "RESUME_ON_PASS must be yes or no"),
                 ({"PITFALL": str(self.fake), "STATE_DIR": "/proc/nope"}, "STATE_DIR=/proc/nope cannot be made"),
                 (f"PITFALL={self.fake}\nFROB=1\n".encode(), "pitfall-gate.conf:2: unknown key FROB"),
                 (b"PITFALL /x\n", "pitfall-gate.conf:1: not KEY=VALUE"),
                 (b"\xff\xfe=\n", "not KEY=VALUE"))
        for conf, said in cases:
            for mode, rc in (("prolog", 0), ("health-check", 3)):
                with self.subTest(conf=conf, mode=mode):
                    p = self.run_wrapper(mode, conf)
                    self.assertEqual(p.returncode, rc, p.stderr)
                    self.assertIn(said, p.stderr)
                    self.assertFalse((self.dir / "argv").exists(), "the gate ran on a bad configuration")
        gate = self.dir / "gate"
        (gate / "pitfall-gate.conf").unlink()
        os.mkfifo(gate / "pitfall-gate.conf")  # a FIFO is no configuration, and no hang
        p = subprocess.run([str(gate / "pitfall-gate-prolog")], env={}, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertIn("no configuration file", p.stderr)

    def test_a_gate_that_fails_to_judge_never_drains_and_a_drain_never_admits(self):
        # What the wrapper makes of each exit of the gate (docs/gate.md, the prolog's table).
        cases = (("exit 0", None, 0), ("exit 1", None, 1), ("exit 2", None, 0), ("exit 3", None, 0),
                 ("kill -SEGV $$", None, 0),
                 # It drained the node (its report says so), then failed: never a job there.
                 ("exit 3", '{"verdict": "drain"}', 1), ("kill -KILL $$", '{"verdict": "drain"}', 1))
        for ending, report, expected in cases:
            with self.subTest(ending=ending, report=report):
                fake = self.dir / "ending-pitfall"
                write = ""
                if report is not None:  # where --json (the last argument) says, renamed in as the gate does
                    write = (f"for a in \"$@\"; do last=$a; done; printf '%s' '{report}' > \"$last.tmp\" && "
                             "mv \"$last.tmp\" \"$last\"\n")
                fake.write_text("#!/bin/sh\n" + write + ending + "\n")
                fake.chmod(0o755)
                p = self.run_wrapper("prolog", {"PITFALL": str(fake)})
                self.assertEqual(p.returncode, expected, p.stderr)
                if expected == 0 and ending != "exit 0":
                    self.assertIn("could not judge the node", p.stderr)
        # A report left by an earlier gate does not speak for this one.
        state = self.dir / "gate" / "state"
        (state / "gpu7.prolog.json").write_text('{"verdict": "drain"}')
        fake.write_text("#!/bin/sh\nexit 3\n")
        self.assertEqual(self.run_wrapper("prolog", {"PITFALL": str(fake)}).returncode, 0)

    def test_a_health_check_finding_one_running_leaves_it_the_verdict(self):
        slow = self.dir / "slow-pitfall"
        slow.write_text(f"#!/bin/sh\necho started >> {self.dir}/runs\nsleep 3\n")
        slow.chmod(0o755)
        install_gate(self.dir / "gate", {"PITFALL": str(slow)})
        env = {"SLURMD_NODENAME": "gpu7"}
        first = subprocess.Popen([str(self.dir / "gate" / "pitfall-gate-health-check")], env=env)
        deadline = time.monotonic() + 30
        while not (self.dir / "runs").exists():
            self.assertLess(time.monotonic(), deadline, "the first health check never ran")
            time.sleep(0.05)
        second = subprocess.run([str(self.dir / "gate" / "pitfall-gate-health-check")], env=env, timeout=30)
        self.assertEqual(second.returncode, 0)
        self.assertEqual(first.wait(timeout=30), 0)
        self.assertEqual((self.dir / "runs").read_text(), "started\n")

    def test_a_hostile_reason_reaches_scontrol_as_one_argument(self):
        # The real gate on a stub whose folder name is HOSTILE, a stand-in scontrol first on PATH
        # recording its argv: one Reason= argument holding the text as the gate printed it, and
        # nothing a shell would have done.
        if not CUDA_STUB.exists():
            self.skipTest(f"SKIP: no CUDA toolkit stub at {CUDA_STUB} to plant")
        folder, planted = hostile_stub_folder(self)
        bin_dir = self.dir / "bin"
        bin_dir.mkdir()
        (bin_dir / "scontrol").write_text(f"#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done "
                                          f">> {self.dir}/scontrol-argv\n")
        (bin_dir / "scontrol").chmod(0o755)
        # PATH names the stand-in's folder alone: the wrapper's own tools come from the system's.
        install_gate(self.dir / "gate", {"PITFALL": PITFALL, "REQUIRE": "no-gpu", "PATH": str(bin_dir)})
        p = subprocess.run([str(self.dir / "gate" / "pitfall-gate-health-check")], capture_output=True, text=True,
                           env={"SLURMD_NODENAME": "gpu7", "LD_LIBRARY_PATH": str(folder)}, timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        line = p.stdout.splitlines()[0]
        self.assertTrue(line.startswith("drain: pitfall: "), line)
        reason = line[len("drain: "):]
        self.assertEqual(planted_files(planted), [], "a shell ran the reason")
        recorded = self.dir / "scontrol-argv"
        argv = recorded.read_text().split("\0")[:-1] if recorded.exists() else []
        self.assertEqual(argv, ["update", "NodeName=gpu7", "State=DRAIN", f"Reason={reason}"])
        for text in ("'\" $(touch", "`touch") + (() if reason.endswith("...") else ("|touch", "&&")):
            self.assertIn(text, reason)
        self.assertLessEqual(len(reason), 200)
        self.assertTrue(all(32 <= ord(c) < 127 for c in reason), reason)
        report = json.loads((self.dir / "gate" / "state" / "gpu7.health-check.json").read_text())
        self.assertEqual(report["slurm"]["command"], ["scontrol", *argv])
        self.assertIn("stub-driver", [f["id"] for f in report["findings"] if not f["accepted"]])


def cluster_prerequisites() -> str:
    """Why the real cluster cannot run here, or ''."""
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root (mknod, a mount namespace per node, slurmd)"
    if missing_tools():
        return f"Slurm is not installed here ({', '.join(missing_tools())}): ci/setup.sh --slurm installs it"
    if not CUDA_STUB.exists():
        return f"no CUDA toolkit stub at {CUDA_STUB} (the node made to differ loads it as its driver)"
    return ""


def skip_without_cluster() -> None:
    why = cluster_prerequisites()
    if why:
        if IN_CI:
            raise AssertionError(f"CI must run the Slurm gate tests: {why}")
        raise unittest.SkipTest(why)


def node_record(cluster: LocalSlurm, name: str) -> dict[str, str]:
    """State and Reason of `scontrol show node` (the reason without Slurm's " [user@time]")."""
    shown = cluster.scontrol("show", "node", name)
    state = re.search(r"\bState=(\S+)", shown)
    reason = re.search(r"^\s*Reason=(.*?)(?: \[[^\]@]*@[^\]]*\])?$", shown, re.M)
    return {"state": state.group(1) if state else "", "reason": reason.group(1) if reason else ""}


def job_record(cluster: LocalSlurm, job: str) -> dict[str, str]:
    shown = cluster.scontrol("-o", "show", "job", job)
    return dict(re.findall(r"\b(JobState|NodeList|Restarts|ExitCode|BatchHost)=(\S*)", shown))


def finished_job(cluster: LocalSlurm, job: str) -> dict[str, str] | None:
    record = job_record(cluster, job)
    return record if record.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") else None


def node_when(cluster: LocalSlurm, name: str, wanted) -> dict[str, str] | None:
    node = node_record(cluster, name)
    return node if wanted(node) else None


def drained_by_pitfall(node: dict[str, str]) -> bool:
    return "DRAIN" in node["state"] and node["reason"].startswith("pitfall: ")


def wait_until(what: str, check, timeout: float, cluster: LocalSlurm):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f} s\n{cluster.logs()}")
        time.sleep(0.3)


class SlurmGateProlog(unittest.TestCase):
    """The gate as slurm.conf's Prolog: gpu1 (the stub, Weight=1: Slurm's first choice) and gpu2
    (healthy). slurmd gives the prolog SLURM_CONF and SLURMD_NODENAME: the configuration names
    no SLURM_CONF here."""

    @classmethod
    def setUpClass(cls):
        skip_without_cluster()
        cls.dir = Path(tempfile.mkdtemp(prefix="pitfall-gate-prolog-"))
        gate = install_gate(cls.dir / "gate", {"PITFALL": PITFALL, "REQUIRE": "no-gpu"})
        cls.state = gate / "state"
        # A requeued job may start again after cred_expire seconds (120 by default); the
        # scheduler then looks every second.
        cls.cluster = LocalSlurm(["gpu1", "gpu2"], stub_driver_nodes=("gpu1",), prolog=str(gate / "pitfall-gate-prolog"),
                                 scheduler_parameters=("nohold_on_prolog_fail", "sched_interval=1", "bf_interval=1"),
                                 weights={"gpu1": 1, "gpu2": 10}, cred_expire=5)
        try:
            cls.cluster.start()
            started = time.monotonic()
            p = subprocess.run(["sbatch", "--parsable", f"--output={cls.dir}/job-%j.out", "--wrap",
                                'echo "ran on $SLURMD_NODENAME"'], env=cls.cluster.env, capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            cls.job = p.stdout.strip().split(";")[0]
            cls.final = wait_until("the job finished", lambda: finished_job(cls.cluster, cls.job), 150, cls.cluster)
            cls.wall = time.monotonic() - started
            # As the job left them (a later test drains gpu2 by hand).
            cls.nodes = {n: node_record(cls.cluster, n) for n in ("gpu1", "gpu2")}
            cls.reports = {n: json.loads((cls.state / f"{n}.prolog.json").read_text()) for n in ("gpu1", "gpu2")}
            cls.sinfo = subprocess.run(["sinfo", "-R", "-o", "%N %9u %19H %E"], env=cls.cluster.env,
                                       capture_output=True, text=True).stdout
        except BaseException:
            cls.cluster.stop()
            shutil.rmtree(cls.dir, ignore_errors=True)
            raise
        log = (cls.cluster.root / "log" / "slurmctld.log").read_text(errors="replace").splitlines()
        story = "\n".join(line for line in log if re.search(rf"JobId={cls.job}\b|update_node: ", line))
        print(f"\nprolog path: job {cls.job} {cls.final} after {cls.wall:.1f} s\n"
              f"scontrol show node gpu1: {cls.nodes['gpu1']}\nsinfo -R:\n{cls.sinfo}\nslurmctld:\n{story}",
              file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def report(self, node: str) -> dict:
        return self.reports[node]

    def test_the_stub_node_is_drained_with_pitfalls_reason(self):
        node = self.nodes["gpu1"]
        self.assertIn("DRAIN", node["state"], node)
        # The gate drained the node before its prolog exited non-zero; slurmctld leaves a drained
        # node's reason as it is (its own would be "Prolog error").
        self.assertTrue(node["reason"].startswith("pitfall: "), node)
        report = self.report("gpu1")
        self.assertEqual((report["verdict"], report["exit_code"], report["require"]), ("drain", 1, "no-gpu"))
        self.assertEqual(report["slurm"]["command"],
                         ["scontrol", "update", "NodeName=gpu1", "State=DRAIN", f"Reason={node['reason']}"])
        self.assertEqual(report["slurm"]["exit_code"], 0)
        self.assertIn("stub-driver", [f["id"] for f in report["findings"] if f["severity"] == "error" and not f["accepted"]])
        self.assertRegex(self.sinfo, r"gpu1 +root +\S+ pitfall: ")

    def test_the_job_is_requeued_and_completes_on_the_healthy_node(self):
        self.assertEqual(self.final["JobState"], "COMPLETED", self.final)
        self.assertEqual((self.final["NodeList"], self.final["BatchHost"]), ("gpu2", "gpu2"), self.final)
        self.assertEqual(self.final["Restarts"], "1", self.final)
        self.assertEqual((self.dir / f"job-{self.job}.out").read_text(), "ran on gpu2\n")
        log = (self.cluster.root / "log" / "slurmctld.log").read_text()
        self.assertRegex(log, rf"Allocate JobId={self.job} NodeList=gpu1\b|Started JobId={self.job} in \S+ on gpu1\b")
        self.assertIn(f"Requeuing JobId={self.job}", log)

    def test_the_healthy_node_admits_without_a_driver(self):
        self.assertNotIn("DRAIN", self.nodes["gpu2"]["state"], self.nodes["gpu2"])
        report = self.report("gpu2")
        self.assertEqual((report["verdict"], report["exit_code"]), ("admit", 0), report)
        self.assertEqual(report["slurm"]["action"], "none")
        errors = [f for f in report["findings"] if f["severity"] == "error"]
        self.assertTrue(errors and all(f["accepted"] for f in errors), errors)  # no-driver, as no-gpu expects

    def test_a_hostile_reason_is_slurms_reason_literally(self):
        # The prolog wrapper run by hand on gpu2 with a stub whose folder name is HOSTILE: Slurm
        # keeps the reason the gate printed, character for character, and no shell ran any of it.
        folder, planted = hostile_stub_folder(self)
        self.addCleanup(self.cluster.scontrol, "update", "NodeName=gpu2", "State=RESUME", check=False)
        p = subprocess.run([str(self.dir / "gate" / "pitfall-gate-prolog")], capture_output=True, text=True, timeout=120,
                           env={"SLURMD_NODENAME": "gpu2", "SLURM_CONF": self.cluster.env["SLURM_CONF"],
                                "LD_LIBRARY_PATH": str(folder)})
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        reason = p.stdout.splitlines()[0][len("drain: "):]
        self.assertIn("'\" $(touch", reason)
        node = node_record(self.cluster, "gpu2")
        self.assertIn("DRAIN", node["state"])
        self.assertEqual(node["reason"], reason)
        self.assertEqual(planted_files(planted), [])
        print(f"\nthe hostile reason as Slurm keeps it: {node['reason']}", file=sys.stderr)


class SlurmGateHealthCheck(unittest.TestCase):
    """The gate as slurm.conf's HealthCheckProgram (--resume-on-pass), every second on gpu1
    (healthy) and gpu2 (the stub), on idle nodes only (HealthCheckNodeState=IDLE: never beside a
    job on its GPUs), drained ones included. slurmd gives a health check no SLURM_CONF: the
    configuration names it. Each gate's scontrol is the real one behind a shim that appends its
    arguments to scontrol.log: the history of what the gates told Slurm, where each report is
    only the last check's."""

    INTERVAL = 1

    @classmethod
    def setUpClass(cls):
        skip_without_cluster()
        cls.dir = Path(tempfile.mkdtemp(prefix="pitfall-gate-health-"))
        cls.gate = cls.dir / "gate"
        cls.cluster = LocalSlurm(["gpu1", "gpu2"], stub_driver_nodes=("gpu2",),
                                 health_check_program=str(cls.gate / "pitfall-gate-health-check"),
                                 health_check_interval=cls.INTERVAL, health_check_node_state="IDLE")
        real = shutil.which("scontrol") or "/usr/bin/scontrol"
        shim = cls.dir / "bin" / "scontrol"
        shim.parent.mkdir()
        shim.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$SLURMD_NODENAME: $*\" >> {cls.dir}/scontrol.log\n"
                        f"exec {real} \"$@\"\n")
        shim.chmod(0o755)
        install_gate(cls.gate, {"PITFALL": PITFALL, "REQUIRE": "no-gpu", "SLURM_CONF": cls.cluster.env["SLURM_CONF"],
                                "PATH": f"{shim.parent}:/usr/bin:/bin"})
        try:
            # gpu2 is not waited for: its first check may drain it before it registers, and
            # start() would resume a drained node by hand.
            cls.cluster.start(wait_for=["gpu1"])
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def report(self, node: str) -> dict:
        try:
            return json.loads((self.gate / "state" / f"{node}.health-check.json").read_text())
        except (OSError, ValueError):
            return {}

    def updates(self, node: str) -> list[str]:
        """The scontrol updates the gates on `node` ran, in order."""
        log = self.dir / "scontrol.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line.split(": update ", 1)[1] for line in lines if line.startswith(f"{node}: update ")]

    def report_after(self, node: str, since: datetime) -> dict:
        """The node's last report from a check that started after `since` (reports name their
        start to the second)."""
        report = self.report(node)
        started = report.get("time")
        if not started:
            return {}
        return report if datetime.fromisoformat(started.replace("Z", "+00:00")) > since else {}

    def test_the_stub_node_is_drained_then_resumed_once_fixed(self):
        started = time.monotonic()
        drained = wait_until("gpu2 drained by the health check",
                             lambda: node_when(self.cluster, "gpu2", drained_by_pitfall), 90, self.cluster)
        report = self.report("gpu2")
        self.assertEqual((report["verdict"], report["slurm"]["mode"]), ("drain", "health-check"), report)
        self.assertIn("stub-driver", [f["id"] for f in report["findings"] if not f["accepted"]])
        sinfo = subprocess.run(["sinfo", "-R", "-o", "%N %E"], env=self.cluster.env, capture_output=True, text=True).stdout
        print(f"\nhealth check: gpu2 {drained} after {time.monotonic() - started:.1f} s\nsinfo -R:\n{sinfo}",
              file=sys.stderr)
        self.assertRegex(sinfo, r"gpu2 +pitfall: ")
        # While the stub stays, passing checks elsewhere resume nothing and gpu2 stays drained.
        since = datetime.now(timezone.utc).replace(microsecond=0)
        wait_until("a later check on gpu2", lambda: self.report_after("gpu2", since), 60, self.cluster)
        self.assertIn("DRAIN", node_record(self.cluster, "gpu2")["state"])
        # The stub removed (its slurmd started again as this machine is): a later check passes
        # and resumes the node. Nobody types its state.
        fixed = time.monotonic()
        self.cluster.restart_node("gpu2", stub_driver=False)
        back = wait_until("gpu2 resumed by a passing check",
                          lambda: node_when(self.cluster, "gpu2", lambda n: n["state"] == "IDLE"), 90, self.cluster)
        updates = self.updates("gpu2")
        print(f"gpu2 after its stub was removed: {back} in {time.monotonic() - fixed:.1f} s; the gates' "
              f"updates of gpu2: {updates[0]} ({len(updates) - 1} times), then {updates[-1]}", file=sys.stderr)
        self.assertEqual(back["reason"], "")
        self.assertEqual(self.report("gpu2")["verdict"], "admit")
        # Drains while the stub was there, then one resume: a passing check, and nobody else.
        self.assertEqual(updates[-1], "NodeName=gpu2 State=RESUME")
        self.assertEqual(updates.count("NodeName=gpu2 State=RESUME"), 1, updates)
        self.assertTrue(all(u.startswith("NodeName=gpu2 State=DRAIN Reason=pitfall: ") for u in updates[:-1]), updates)
        log = (self.cluster.root / "log" / "slurmctld.log").read_text(errors="replace")
        story = [line for line in log.splitlines() if "update_node: node gpu2 " in line]
        print("slurmctld:\n" + "\n".join(story if len(story) <= 4 else story[:2] + ["..."] + story[-2:]),
              file=sys.stderr)
        self.assertRegex(log, r"update_node: node gpu2 state set to IDLE")

    def test_a_node_drained_by_its_administrator_stays_drained(self):
        self.cluster.scontrol("update", "NodeName=gpu1", "State=DRAIN", "Reason=fan failure (drained by hand)")
        self.addCleanup(self.cluster.scontrol, "update", "NodeName=gpu1", "State=RESUME", check=False)
        since = datetime.now(timezone.utc).replace(microsecond=0)
        report = wait_until("a check on gpu1 after its drain", lambda: self.report_after("gpu1", since), 60, self.cluster)
        self.assertEqual(report["verdict"], "admit", report)
        self.assertEqual(report["slurm"]["action"], "none", report)
        node = node_record(self.cluster, "gpu1")
        self.assertIn("DRAIN", node["state"])
        self.assertEqual(node["reason"], "fan failure (drained by hand)")
        self.assertEqual(self.updates("gpu1"), [])  # the gates on gpu1 never told Slurm anything


if __name__ == "__main__":
    unittest.main()
