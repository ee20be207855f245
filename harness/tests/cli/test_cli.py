"""CLI tests: the real `pitfall` binary, real child processes, the fixture scenario.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN and the fixture paths.
"""
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("PITFALL_BIN", "")
INDEX = os.environ.get("PITFALL_FIXTURE_INDEX", "")
MANIFEST = os.environ.get("PITFALL_FIXTURE_MANIFEST", "")
PROGRAM = os.environ.get("PITFALL_FIXTURE_PROGRAM", "")


def records(run_dir, kind="case"):
    """The lines of a run's results.jsonl of one record kind (None: every line)."""
    with open(os.path.join(run_dir, "results.jsonl")) as f:
        return [r for r in (json.loads(line) for line in f if line.strip())
                if kind is None or r["record"] == kind]


def alive(pid):
    """Running, not a zombie waiting to be reaped by whoever inherited it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def cases_running(run_dir):
    """Live processes whose command line names this run folder (scenario cases write there)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        if run_dir + "/cases/" in cmdline and alive(int(pid)):
            found.append(int(pid))
    return found


# The evidence an observed baseline entry carries (what `pitfall bless` writes; the harness
# refuses an observed entry without it). The id matches no machine: timings are never compared.
OBSERVED = {"kind": "observed", "date": "2026-11-22", "fingerprint": {"os": "test"},
            "fingerprint_id": "0000000000000000", "pitfall_version": "0.1.0"}
# A documented entry's provenance: a source a reader can check (a document and its anchor).
DOCUMENTED = {"kind": "documented", "source": "docs/cuda-rules.md#runtime-error-names"}


def observed_entry(key, entry):
    """`entry` for case `key` as an observed baseline: OBSERVED provenance and, for a success,
    where it ran (the case key's backend), as an observed success must say."""
    out = dict(entry, provenance=OBSERVED)
    if out["outcome"].get("status") == "ok":
        out.setdefault("ran_on", key.split(".")[0])
    return out


SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "reports", "schema")


def schema_validator(name):
    """Python's jsonschema for reports/schema/<name>: the second validator the harness agrees with."""
    import jsonschema  # python3-jsonschema, installed by ci/setup.sh
    with open(os.path.join(SCHEMA_DIR, name)) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def read_text(path):
    with open(path) as f:
        return f.read()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def by_case(run_dir):
    return {r["case"]: r for r in records(run_dir)}


def rec_fingerprint(run_dir):
    """The fingerprint id of a run folder's header."""
    with open(os.path.join(run_dir, "results.jsonl")) as f:
        return json.loads(f.readline())["fingerprint_id"]


class FixtureTest(unittest.TestCase):
    """A temporary folder with an expected/ tree (profile "any" matching everything)."""

    baseline = {}

    def setUp(self):
        self.assertTrue(BIN and INDEX, "run through CTest: PITFALL_BIN and fixture paths unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-cli-")
        self.expected = os.path.join(self.tmp, "expected")
        os.makedirs(os.path.join(self.expected, "any"))
        self.write_json(os.path.join(self.expected, "any", "profile.json"),
                        {"schema": "pitfall.profile/1", "name": "any", "match": {}})
        if self.baseline:
            self.write_baseline(self.baseline)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    @staticmethod
    def write_json(path, doc):
        with open(path, "w") as f:
            json.dump(doc, f)

    def write_baseline(self, cases):
        doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
               "cases": {k: observed_entry(k, v) for k, v in cases.items()}}
        self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)

    def pitfall(self, *args, index=None, expected=None, **kw):
        cmd = [BIN, *args, "--index", index or INDEX, "--expected", expected or self.expected]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)

    def run_dir(self, name="run"):
        return os.path.join(self.tmp, name)

    def finished_two_case_run(self, extra=()):
        """A finished run of cpu ok then unsupported (with `extra` flags): its folder, results.jsonl
        and that file's lines (the last one the unsupported case's record), for tests that damage it."""
        out = self.run_dir()
        self.assertEqual(self.pitfall("run", "--variant", "ok,unsupported", "--backend", "cpu", "--out", out,
                                      "--samples", "1", *extra).returncode, 0)
        path = os.path.join(out, "results.jsonl")
        with open(path) as f:
            lines = f.readlines()
        self.assertEqual(json.loads(lines[-1])["case"], "cpu.harness_fixture.unsupported")
        return out, path, lines


class ProbeAnswerKept(FixtureTest):
    """The probe's answer is kept per boot and reused by the next run, never trusted blindly."""

    def run_probe_case(self, name, *extra, cache=None, env=None):
        env = dict(env or os.environ, PITFALL_RUNTIME_DIR=os.path.join(self.tmp, "cache"))
        if cache == "off":
            env["PITFALL_PROBE_CACHE"] = "off"
        elif cache:
            env["PITFALL_RUNTIME_DIR"] = cache
        out = self.run_dir(name)
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out, "--samples", "1",
                         *extra, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(out, "fingerprint.json")) as f:
            return json.load(f)

    def kept_files(self):
        folder = os.path.join(self.tmp, "cache")
        return [os.path.join(folder, n) for n in os.listdir(folder) if n.startswith("probe-")]

    def test_the_second_run_reuses_the_answer(self):
        first = self.run_probe_case("a")
        self.assertFalse(first["probe"]["reused"])
        second = self.run_probe_case("b")
        self.assertTrue(second["probe"]["reused"], second["probe"])
        self.assertEqual(second["libraries"], first["libraries"])
        self.assertLess(second["probe"]["age_seconds"], 600)
        self.assertFalse(self.run_probe_case("c", "--fresh-probe")["probe"]["reused"])
        off = self.run_probe_case("d", cache="off")
        self.assertFalse(off["probe"]["reused"])
        self.assertEqual(off["probe"]["not_kept"], "PITFALL_PROBE_CACHE=off")

    def test_a_planted_answer_claiming_gpus_the_kernel_does_not_show_is_not_reused(self):
        """A case runs as this user and can write the kept answer: one that claims a GPU (the
        hopper-cuda13 profile's facts) where the kernel shows no device node for it is probed
        again, not trusted."""
        first = self.run_probe_case("a")
        (kept,) = self.kept_files()
        with open(kept) as f:
            doc = json.load(f)
        nodes = doc["libraries"]["driver"]["device_nodes"]
        gpus = [n for n in nodes if re.fullmatch(r"/dev/nvidia[0-9]+", n)]
        planted = json.loads(json.dumps(doc))
        planted["libraries"]["cuda"]["device_count"] = len(gpus) + 1
        planted["libraries"]["cuda"]["devices"] = [{"name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}]
        with open(kept, "w") as f:
            json.dump(planted, f)
        again = self.run_probe_case("b")
        self.assertFalse(again["probe"]["reused"], again["probe"])
        # The probe's own answer again (a build without CUDA records no device count at all).
        self.assertEqual(again["libraries"]["cuda"].get("device_count"),
                         first["libraries"]["cuda"].get("device_count"))
        # Device nodes or a module the kernel does not show: the same.
        for change in ("nodes", "module"):
            with open(kept) as f:
                doc = json.load(f)
            if change == "nodes":
                doc["libraries"]["driver"]["device_nodes"] = nodes + ["/dev/nvidia9"]
            else:
                module = doc["libraries"]["driver"]["kernel_module"]
                module["loaded"] = not module["loaded"]
            with open(kept, "w") as f:
                json.dump(doc, f)
            self.assertFalse(self.run_probe_case("c-" + change)["probe"]["reused"], change)
        # The answer as the probe wrote it is still reused.
        self.assertTrue(self.run_probe_case("d")["probe"]["reused"])

    def test_the_build_images_are_kept_while_the_programs_are_unchanged(self):
        """The build's SASS and PTX (every program read whole) are read once per build: the kept
        copy is what the next run records, until a program's stamp changes."""
        first = self.run_probe_case("a")
        folder = os.path.join(self.tmp, "cache")
        (kept,) = [os.path.join(folder, n) for n in os.listdir(folder) if n.startswith("build-images-")]
        with open(kept) as f:
            doc = json.load(f)
        self.assertEqual(doc["schema"], "pitfall.build-images/1")
        self.assertEqual(doc["images"], first["build_images"])
        self.assertIn("harness_fixture", doc["stamps"])
        # A planted answer with the right stamps is what the next run records: it is read.
        planted = {"harness_fixture": {"error": "planted: the kept answer was used"}}
        with open(kept, "w") as f:
            json.dump(dict(doc, images=planted), f)
        self.assertEqual(self.run_probe_case("b")["build_images"], planted)
        # A program rebuilt (its stamp changed) is read again.
        st = os.stat(PROGRAM)
        try:
            os.utime(PROGRAM, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            self.assertEqual(self.run_probe_case("c")["build_images"], first["build_images"])
        finally:
            os.utime(PROGRAM, ns=(st.st_atime_ns, st.st_mtime_ns))
        # Unreadable or foreign content is never used, and never stops the run.
        for i, text in enumerate([b"\xff\xfe", b"[" * 100000, b"{}", json.dumps(dict(doc, images=[])).encode()]):
            with open(kept, "wb") as f:
                f.write(text)
            self.assertEqual(self.run_probe_case(f"d{i}")["build_images"], first["build_images"])
        self.assertEqual(self.run_probe_case("off", cache="off")["build_images"], first["build_images"])

    def test_a_damaged_or_stale_answer_is_not_used(self):
        self.run_probe_case("a")
        (kept,) = self.kept_files()
        with open(kept) as f:
            good = json.load(f)
        damaged = [b"\xff\xfe not json", b"[" * 100000, b"{}", json.dumps(dict(good, boot_id="x")).encode(),
                   json.dumps(dict(good, taken_at_unix=good["taken_at_unix"] - 601)).encode(),
                   json.dumps(dict(good, taken_at_unix=1e308)).encode(),
                   json.dumps(dict(good, libraries=[])).encode(),
                   json.dumps(dict(good, files={"/bin/sh": "1:2:3"})).encode()]
        for i, text in enumerate(damaged):
            with open(kept, "wb") as f:
                f.write(text)
            fp = self.run_probe_case(f"d{i}")
            self.assertFalse(fp["probe"]["reused"], text[:60])
            self.assertIn("cuda", fp["libraries"])  # the probe ran and answered
        os.remove(kept)
        os.mkfifo(kept)  # a FIFO where the answer was: not waited on, not used
        self.assertFalse(self.run_probe_case("fifo")["probe"]["reused"])

    def test_a_library_added_to_a_loader_folder_makes_the_answer_stale(self):
        # A no-driver answer names no libcuda file to stamp: the folders the loader searches
        # are stamped instead, so a driver library appearing there (installed, or overlaid in
        # another mount namespace) is seen by the next run.
        libs = os.path.join(self.tmp, "libs")
        os.mkdir(libs)
        env = dict(os.environ, LD_LIBRARY_PATH=libs)
        self.assertFalse(self.run_probe_case("a", env=env)["probe"]["reused"])
        self.assertTrue(self.run_probe_case("b", env=env)["probe"]["reused"])
        with open(os.path.join(libs, "libexample.so.1"), "wb"):
            pass
        self.assertFalse(self.run_probe_case("c", env=env)["probe"]["reused"])
        missing = os.path.join(self.tmp, "not-yet")
        env = dict(os.environ, LD_LIBRARY_PATH=missing)
        self.run_probe_case("d", env=env)
        os.mkdir(missing)  # a folder on the path that did not exist when the answer was kept
        self.assertFalse(self.run_probe_case("e", env=env)["probe"]["reused"])

    def test_a_folder_others_can_write_is_not_used(self):
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        fp = self.run_probe_case("a", cache=shared)
        self.assertIn("closed to others", fp["probe"]["not_kept"])
        self.assertEqual(os.listdir(shared), [])  # neither an answer nor a lock


class Jobs(FixtureTest):
    """`pitfall run --jobs N`: cases side by side, a case whose time is judged alone."""

    SLOW = {"PITFALL_FIXTURE_SLEEP_MS": "1500"}

    def run_jobs(self, name, variants, *extra):
        out = self.run_dir(name)
        started = time.monotonic()
        # A folder of its own for the case lock: another run's timed case elsewhere on the
        # machine (holding the lock alone) would otherwise hold these cases back.
        env = dict(os.environ, PITFALL_RUNTIME_DIR=os.path.join(self.tmp, "own"), **self.SLOW)
        p = self.pitfall("run", "--variant", variants, "--backend", "cpu", "--out", out,
                         "--samples", "1", *extra, env=env)
        return p, time.monotonic() - started, by_case(out), records(out, kind=None)

    def test_untimed_cases_run_side_by_side(self):
        p, took, cases, lines = self.run_jobs("a", "exit3,bad_check,unsupported", "--jobs", "3")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # exit3 and bad_check fail
        self.assertEqual(sorted(cases), ["cpu.harness_fixture.bad_check", "cpu.harness_fixture.exit3",
                                         "cpu.harness_fixture.unsupported"])
        self.assertEqual(len([r for r in lines if r.get("record") == "case"]), 3)  # each once
        self.assertEqual(lines[0]["options"]["jobs"], 3)
        alone = sum(r["process"]["wall_seconds"] for r in cases.values())
        self.assertGreater(alone, 4.4)  # three processes of >= 1.5 s each
        self.assertLess(took, 0.8 * alone, "the three cases did not overlap")
        for r in cases.values():
            self.assertEqual(r["process"]["threads"], 1)

    def test_a_case_whose_time_is_judged_runs_alone(self):
        self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir("base"),
                     "--samples", "1")
        self.assertEqual(self.pitfall("bless", self.run_dir("base")).returncode, 0)
        p, took, cases, _ = self.run_jobs("b", "ok,unsupported,exit3", "--jobs", "3")
        self.assertEqual(len(cases), 3, p.stdout + p.stderr)
        # ok (timed) alone, then the other two together: at least two sleeps one after the other.
        self.assertGreaterEqual(took, 3.0, p.stdout)
        p, took, cases, _ = self.run_jobs("c", "ok,unsupported,exit3", "--jobs", "3",
                                          "--timed-in-parallel")
        self.assertEqual(len(cases), 3, p.stdout + p.stderr)
        alone = sum(r["process"]["wall_seconds"] for r in cases.values())
        self.assertLess(took, 0.8 * alone, "asked to, the timed case ran beside the others")

    def test_a_timed_case_waits_for_another_runs_case(self):
        # Two `pitfall run`s of one user, as `ctest -j` starts them: the timed case does not
        # start while the other run's case holds the machine (the shared case lock).
        env = dict(os.environ, PITFALL_RUNTIME_DIR=os.path.join(self.tmp, "shared"), **self.SLOW)
        self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir("base"),
                     "--samples", "1", env=env)
        self.assertEqual(self.pitfall("bless", self.run_dir("base")).returncode, 0)
        cmd = [BIN, "run", "--index", INDEX, "--expected", self.expected, "--backend", "cpu",
               "--samples", "1"]
        other = subprocess.Popen(cmd + ["--variant", "exit3", "--out", self.run_dir("other")], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)  # the other case is running
            started = time.monotonic()
            p = subprocess.run(cmd + ["--variant", "ok", "--out", self.run_dir("timed")], env=env,
                               capture_output=True, text=True, timeout=60)
            took = time.monotonic() - started
        finally:
            other.wait(timeout=60)
        self.assertEqual(by_case(self.run_dir("timed"))["cpu.harness_fixture.ok"]["verdict"] != "CRASH", True,
                         p.stdout)
        # It waited for the other case's remaining ~1 s, then slept its own 1.5 s.
        self.assertGreaterEqual(took, 2.3, p.stdout)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "shared", "cases.lock")))

    def test_bad_jobs_values_are_refused(self):
        for bad in ("0", "257", "two", "1.5", "-1"):
            p = self.pitfall("run", "--jobs", bad, "--out", self.run_dir("x"))
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn("--jobs " + bad, p.stderr)
            self.assertFalse(os.path.exists(self.run_dir("x")))


class Endings(FixtureTest):
    """Every way a case can end is recorded, and the run goes on after each."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"}},
                "cpu.oom": {"outcome": {"status": "error", "library": "host", "error": "std::bad_alloc",
                                        "stage": "alloc", "sticky": False}}}

    def test_crash_timeout_exit_then_going_on(self):
        pidfile = os.path.join(self.tmp, "grandchild.pid")
        env = dict(os.environ, PITFALL_FIXTURE_PIDFILE=pidfile, PITFALL_DEVICE_MEMORY_LIMIT="64M")
        out = self.run_dir()
        started = time.monotonic()
        p = self.pitfall("run", "--backend", "cpu", "--out", out, "--samples", "3", env=env)
        elapsed = time.monotonic() - started
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        cases = by_case(out)
        self.assertEqual(cases["cpu.harness_fixture.segv"]["verdict"], "CRASH")
        self.assertEqual(cases["cpu.harness_fixture.segv"]["observed"], {"status": "signal", "signal": "SIGSEGV"})
        self.assertEqual(cases["cpu.harness_fixture.hang"]["verdict"], "TIMEOUT")
        self.assertTrue(cases["cpu.harness_fixture.hang"]["process"]["timed_out"])
        self.assertEqual(cases["cpu.harness_fixture.exit3"]["verdict"], "CRASH")
        self.assertEqual(cases["cpu.harness_fixture.exit3"]["observed"]["exit_code"], 3)
        self.assertEqual(cases["cpu.harness_fixture.bad_check"]["verdict"], "NUMERIC_MISMATCH")
        self.assertIn("sum_matches_reference", cases["cpu.harness_fixture.bad_check"]["reason"])
        self.assertEqual(cases["cpu.harness_fixture.unsupported"]["verdict"], "UNSUPPORTED")
        self.assertIn("never runs", cases["cpu.harness_fixture.unsupported"]["reason"])
        # The cases after the crash, the hang and the exit still ran and passed.
        self.assertEqual(cases["cpu.harness_fixture.ok"]["verdict"], "PASS")
        self.assertEqual(len(cases["cpu.harness_fixture.ok"]["result"]["samples"]["step_seconds"]["values"]), 3)
        oom = cases["cpu.harness_fixture.oom"]
        self.assertEqual(oom["verdict"], "PASS", oom["reason"])
        self.assertEqual(oom["result"]["memory"]["limit_bytes"], 64 << 20)
        # The hang's whole group went at the timeout (3 s, TERM then KILL), grandchild included.
        self.assertLess(elapsed, 30)
        with open(pidfile) as f:
            grandchild = int(f.read())
        time.sleep(0.2)
        self.assertFalse(alive(grandchild), f"grandchild {grandchild} survived the timeout")
        summary = json.load(open(os.path.join(out, "summary.json")))
        self.assertTrue(summary["complete"])
        self.assertEqual(summary["counts"]["CRASH"], 2)
        self.assertEqual(summary["exit_code"], 1)
        self.assertEqual([r["name"] for r in summary["ratios"]], ["ok_over_ok"])
        self.assertAlmostEqual(summary["ratios"][0]["ratio"], 1.0)
        self.assertIn("CRASH", p.stdout)
        self.assertRegex(p.stdout, r"\[ ?\d/\d\] cpu\.harness_fixture\.\w+ +\w+ +[\d.]+ s +ETA \d+:\d\d")
        # Peak RSS is measured for each child: the case's own where it wrote its result (its
        # VmHWM, never above wait4's), wait4's where it died first, each saying which.
        ok_process = cases["cpu.harness_fixture.ok"]["process"]
        self.assertGreater(ok_process["peak_rss_bytes"], 0)
        self.assertEqual(ok_process["peak_rss_method"], "case")
        self.assertEqual(ok_process["peak_rss_bytes"],
                         cases["cpu.harness_fixture.ok"]["result"]["resident_memory"]["peak_rss_bytes"])
        self.assertEqual(cases["cpu.harness_fixture.segv"]["process"]["peak_rss_method"], "wait4")

    def test_skips_with_one_cause_are_said_once(self):
        """The real CUDA cases on a machine without a usable GPU: each skip's cause said once
        for its group ("7 CUDA cases UNSUPPORTED: <cause>"), not once a case."""
        out = self.run_dir()
        p = self.pitfall("run", "--backend", "cuda", "--out", out, "--samples", "1",
                         index=os.environ["PITFALL_REAL_INDEX"], expected=os.environ["PITFALL_REAL_EXPECTED"])
        skipped = [r for r in records(out) if r["verdict"] == "UNSUPPORTED"]
        if len(skipped) < 2:
            self.skipTest("fewer than two CUDA cases are skipped here (a GPU ran them)")
        section = p.stdout.split("skipped:\n", 1)[1].split("\nratio ")[0].split("\nresults: ")[0]
        lines = [line for line in section.splitlines() if line.startswith("  ")]
        groups = [re.match(r"  (\d+) CUDA cases UNSUPPORTED: (.+)$", line) for line in lines]
        counted = sum(int(g.group(1)) if g else 1 for g in groups)
        self.assertEqual(counted, len(skipped), section)
        causes = [g.group(2) for g in groups if g]
        self.assertTrue(causes, section)
        self.assertEqual(len(causes), len(set(causes)), section)  # each cause once
        self.assertLess(len(lines), len(skipped), section)
        for cause in causes:
            # The machine's diagnosis names a cause it explains ("no NVIDIA driver (...); CUDA
            # 13.0 needs driver >= 580 [cudaErrorInsufficientDriver]"), else the error's gloss.
            self.assertRegex(cause, r"cudaErrorInsufficientDriver \(no NVIDIA driver|no NVIDIA driver \(libcuda"
                                    r"\.so\.1 not found\).*\[cudaErrorInsufficientDriver\]$|cudaErrorNoDevice|"
                                    r"built without CUDA")

    def test_fingerprint_is_recorded_once(self):
        out = self.run_dir()
        self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out)
        header = records(out, "run")
        self.assertEqual(len(header), 1)
        fp = header[0]["fingerprint"]
        self.assertIn("cpu_model", fp["host"])
        self.assertIn("libraries", fp)
        self.assertIn("cuda", fp["libraries"])
        self.assertTrue(os.path.exists(os.path.join(out, "fingerprint.json")))


class Baselines(FixtureTest):
    def run_one(self, variant, backend="cpu", extra=()):
        out = self.run_dir(variant)
        p = self.pitfall("run", "--backend", backend, "--variant", variant, "--out", out, *extra)
        return p, by_case(out)[f"{backend}.harness_fixture.{variant}"]

    def test_expected_crash_passes(self):
        self.write_baseline({"cpu.segv": {"outcome": {"status": "signal", "signal": "SIGSEGV"}}})
        p, rec = self.run_one("segv")
        self.assertEqual(rec["verdict"], "PASS", rec["reason"])
        self.assertEqual(p.returncode, 0)

    def test_expected_failure_that_stops_happening_is_behaviour_changed(self):
        self.write_baseline({"cpu.ok": {"outcome": {"status": "error", "library": "host",
                                                    "error": "std::bad_alloc", "stage": "alloc"}}})
        p, rec = self.run_one("ok")
        self.assertEqual(rec["verdict"], "FAIL")
        self.assertIn("behaviour changed", rec["reason"])
        self.assertEqual(p.returncode, 1)

    def test_other_error_name_fails(self):
        self.write_baseline({"cpu.oom": {"outcome": {"status": "error", "error": "cudaErrorMemoryAllocation"}}})
        env = dict(os.environ, PITFALL_DEVICE_MEMORY_LIMIT="1G")
        p = self.pitfall("run", "--variant", "oom", "--out", self.run_dir(), env=env)
        rec = by_case(self.run_dir())["cpu.harness_fixture.oom"]
        self.assertEqual(rec["verdict"], "FAIL")
        self.assertIn("std::bad_alloc", rec["reason"])
        self.assertEqual(p.returncode, 1)

    def test_no_baseline_warns_without_failing(self):
        p, rec = self.run_one("ok")
        self.assertEqual(rec["verdict"], "NO_BASELINE")
        self.assertEqual(p.returncode, 0)

    def test_a_case_with_a_second_process(self):
        p, rec = self.run_one("two_processes")
        self.assertEqual(rec["verdict"], "NO_BASELINE", rec["reason"])  # every check passed
        checks = {c["name"]: c["passed"] for c in rec["result"]["checks"]}
        self.assertEqual(checks, {"child_ran": True, "child_saw_env_and_params": True})
        self.assertGreater(rec["result"]["measurements"]["child_peak_rss_bytes"]["value"], 0)

    def test_helper_variants_are_not_cases(self):
        p = self.pitfall("run", "--variant", "child_role", "--out", self.run_dir())
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown variant 'child_role'", p.stderr)

    def test_memory_bound(self):
        self.write_baseline({"cpu.ok": {"outcome": {"status": "ok"},
                                        "memory": {"tracked_peak_bytes": {"max": 100}}}})
        p, rec = self.run_one("ok")
        self.assertEqual(rec["verdict"], "MEM_REGRESSION")
        self.assertIn("tracked_peak_bytes = 8192 above max 100", rec["reason"])

    def test_skip_code_when_everything_is_unsupported(self):
        p, rec = self.run_one("unsupported", extra=("--skip-code", "77"))
        self.assertEqual(rec["verdict"], "UNSUPPORTED")
        self.assertEqual(p.returncode, 77)

    def test_a_case_that_did_not_run_predicted_nothing(self):
        # Both variants are marked predictions on the CPU; only the one that ran is counted so.
        p = self.pitfall("run", "--backend", "cpu", "--variant", "oom", "--variant", "unsupported",
                         "--out", self.run_dir("predicted"))
        self.assertIn(p.returncode, (0, 1), p.stderr)
        recs = {r["case"]: r for r in records(self.run_dir("predicted"), "case")}
        self.assertEqual(recs["cpu.harness_fixture.unsupported"]["verdict"], "UNSUPPORTED")
        self.assertNotIn("prediction", recs["cpu.harness_fixture.unsupported"])
        self.assertIn("rule applied", recs["cpu.harness_fixture.oom"]["prediction"])
        with open(os.path.join(self.run_dir("predicted"), "report.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["predictions"], 1)

    def test_cuda_case_is_never_a_pass_without_a_gpu(self):
        # On a machine with no driver (or a CPU-only build) the CUDA case is UNSUPPORTED with
        # the reason; on a GPU machine it runs for real and this test does not apply.
        p, rec = self.run_one("ok", backend="cuda")
        fp = records(self.run_dir("ok"), "run")[0]["fingerprint_summary"]
        if fp.get("gpu_count", 0) > 0:
            self.assertEqual(rec["verdict"], "NO_BASELINE")  # it ran, on the GPU
            self.assertTrue(rec["result"]["ran_on"].startswith("cuda:"), rec["result"]["ran_on"])
        else:
            self.assertEqual(rec["verdict"], "UNSUPPORTED")
            self.assertRegex(rec["reason"], r"cudaErrorInsufficientDriver|cudaErrorNoDevice|built without CUDA")
            self.assertEqual(p.returncode, 0)


class FullSizes(FixtureTest):
    """`pitfall run --full`: each scenario's "full" parameter values, judged on outcome only."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"},
                           "memory": {"tracked_peak_bytes": {"max": 100}}}}

    def test_full_runs_the_full_values_and_compares_only_outcomes(self):
        quick = self.run_dir("quick")
        p = self.pitfall("run", "--backend", "cpu", "--variant", "ok", "--out", quick, "--samples", "1")
        rec = by_case(quick)["cpu.harness_fixture.ok"]
        self.assertEqual(rec["verdict"], "MEM_REGRESSION", rec["reason"])  # the bounds bite at the defaults
        self.assertEqual(rec["result"]["params"]["sleep_ms"], 0)
        self.assertEqual(p.returncode, 1)

        full = self.run_dir("full")
        p = self.pitfall("run", "--backend", "cpu", "--variant", "ok", "--out", full, "--samples", "1", "--full")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rec = by_case(full)["cpu.harness_fixture.ok"]
        self.assertEqual(rec["result"]["params"]["sleep_ms"], 5)  # scenario.json's "full" value
        self.assertEqual(rec["result"]["info"]["size_set"], "full")
        self.assertEqual(rec["verdict"], "PASS", rec["reason"])
        self.assertIn("--full", rec["reason"])
        self.assertIs(records(full, "run")[0]["options"]["full"], True)

        # A --full run holds no observation for a baseline: bless refuses it, naming the run.
        b = self.pitfall("bless", full, "--dry-run")
        self.assertEqual(b.returncode, 2, b.stdout)
        self.assertIn("used --full", b.stderr)

    def test_the_program_lists_and_takes_full(self):
        listed = subprocess.run([PROGRAM, "--list"], capture_output=True, text=True, timeout=30)
        self.assertIn("sleep_ms = 0 (--full: 5)", listed.stdout)


class Verdicts(FixtureTest):
    """Bless a run, then break it on purpose with PITFALL_INJECT: each verdict must catch its fault."""

    # Steps of a synthetic 2 ms (+-1%): the pipeline (bless, run, inject, judge) is tested here
    # without the machine's timing noise; the verdicts' power under real noise is measured by
    # bench/verdict_power.py.
    STEP = {"PITFALL_FIXTURE_SYNTHETIC_MS": "2"}

    def run_ok(self, name, inject=None, extra=(), host_id=None, mutate=None):
        env = dict(os.environ, **self.STEP)
        env.pop("PITFALL_HOST_ID", None)
        if inject:
            env["PITFALL_INJECT"] = inject
        if mutate:
            env["PITFALL_MUTATE"] = mutate
        if host_id:
            env["PITFALL_HOST_ID"] = host_id
        out = self.run_dir(name)
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out, *extra, env=env)
        return p, by_case(out)["cpu.harness_fixture.ok"]

    def bless(self, run, *args):
        return self.pitfall("bless", self.run_dir(run), *args)

    def blessed_entry(self):
        with open(os.path.join(self.expected, "any", "harness_fixture.json")) as f:
            return json.load(f)["cases"]["cpu.ok"]

    def test_bless_writes_an_observed_entry_and_the_next_run_passes(self):
        p, rec = self.run_ok("a", extra=("--samples", "15"))
        self.assertEqual(rec["verdict"], "NO_BASELINE")
        b = self.bless("a")
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertIn("+++ b/", b.stdout)  # the reviewable diff
        entry = self.blessed_entry()
        self.assertEqual(entry["outcome"], {"status": "ok"})
        self.assertEqual(entry["provenance"]["kind"], "observed")
        self.assertRegex(entry["provenance"]["date"], r"^\d{4}-\d{2}-\d{2}$")
        self.assertRegex(entry["provenance"]["fingerprint_id"], r"^[0-9a-f]{16}$")
        self.assertEqual(len(entry["timings"]["step_seconds"]["samples"]), 15)
        self.assertEqual(entry["memory"]["tracked_peak_bytes"], {"equals": 8192})
        p, rec = self.run_ok("b", extra=("--samples", "15"))
        self.assertIn(rec["verdict"], ("PASS", "AMBIGUOUS"), rec["reason"])
        self.assertIn(rec["timings"]["step_seconds"]["verdict"], ("SAME", "FASTER", "AMBIGUOUS"))
        self.assertEqual(p.returncode, 0, p.stdout)
        # Blessing the same observations again changes nothing but dates and samples.
        d = self.bless("b", "--dry-run")
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertIn("dry run: nothing written", d.stdout)

    def test_a_peak_rss_is_judged_only_against_its_like_and_blessed_again_alone(self):
        p, rec = self.run_ok("a", extra=("--samples", "9"))
        self.assertEqual(self.bless("a").returncode, 0)
        path = os.path.join(self.expected, "any", "harness_fixture.json")
        with open(path) as f:
            doc = json.load(f)
        entry = doc["cases"]["cpu.ok"]
        self.assertEqual(entry["provenance"]["rss_method"], "case")
        # An entry blessed before the case's own figure existed (no rss_method: wait4's) with a
        # bound the case's own figure is far below: not compared, so not a MEM_REGRESSION.
        del entry["provenance"]["rss_method"]
        entry["memory"]["peak_rss_bytes"] = {"value": 1e9, "rel_tol": 0.25}
        self.write_json(path, doc)
        p, rec = self.run_ok("b", extra=("--samples", "9"))
        self.assertNotEqual(rec["verdict"], "MEM_REGRESSION", rec["reason"])
        # The same bound marked as the case's own is judged, and fails.
        entry["provenance"]["rss_method"] = "case"
        self.write_json(path, doc)
        p, rec = self.run_ok("c", extra=("--samples", "9"))
        self.assertEqual(rec["verdict"], "MEM_REGRESSION", rec["reason"])
        self.assertIn("peak_rss_bytes", rec["reason"])
        # --memory-only writes the peak RSS alone, naming the run it came from; the rest of the
        # entry (its timings, its run) stays as it was.
        del entry["provenance"]["rss_method"]
        self.write_json(path, doc)
        b = self.bless("c", "--memory-only")
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertIn("(their peak RSS only)", b.stdout)
        with open(path) as f:
            after = json.load(f)["cases"]["cpu.ok"]
        self.assertEqual(after["provenance"]["rss_method"], "case")
        self.assertEqual(after["provenance"]["rss_run"]["case"], "cpu.harness_fixture.ok")
        self.assertEqual(after["provenance"]["rss_run"]["fingerprint_id"], rec_fingerprint(self.run_dir("c")))
        self.assertEqual(after["memory"]["peak_rss_bytes"]["value"], rec["process"]["peak_rss_bytes"])
        self.assertEqual(after["timings"], entry["timings"])
        self.assertEqual(after["provenance"]["run"], entry["provenance"]["run"])
        kept = os.path.join(self.expected, "any", after["provenance"]["rss_run"]["archive"])
        self.assertTrue(os.path.isdir(kept), "the run the peak came from is kept")
        self.assertTrue(os.path.isdir(os.path.join(self.expected, "any", entry["provenance"]["run"]["archive"])))
        p, rec = self.run_ok("d", extra=("--samples", "9"))
        self.assertIn(rec["verdict"], ("PASS", "AMBIGUOUS"), rec["reason"])
        self.assertEqual(self.pitfall("bless", self.run_dir("d"), "--memory-only", "--ratios-only").returncode, 2)
        # A case that died before it reported its own peak gets no bound: wait4's figure
        # counts pitfall's image, and would judge where the case sat in its run.
        out = self.run_dir("segv")
        self.pitfall("run", "--variant", "segv", "--backend", "cpu", "--out", out)
        self.assertEqual(records(out)[0]["process"]["peak_rss_method"], "wait4")
        b = self.pitfall("bless", out, "--case", "cpu.harness_fixture.segv")
        self.assertEqual(b.returncode, 0, b.stderr)
        with open(path) as f:
            segv = json.load(f)["cases"]["cpu.segv"]
        self.assertEqual(segv["outcome"], {"status": "signal", "signal": "SIGSEGV"})
        self.assertNotIn("peak_rss_bytes", segv.get("memory", {}))
        self.assertNotIn("rss_method", segv["provenance"])

    def test_records_are_pinned_and_a_check_that_stops_running_fails(self):
        p, rec = self.run_ok("a", extra=("--samples", "9"))
        self.assertEqual(self.bless("a").returncode, 0)
        records = self.blessed_entry()["records"]
        self.assertEqual(records["checks"], ["doubling"])
        self.assertIn("step_seconds", records["samples"])
        key = "cpu.harness_fixture.ok"
        p, rec = self.run_ok("dropped", extra=("--samples", "9"), mutate=f"drop_check:{key}:doubling")
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertEqual(rec["verdict"], "FAIL", rec["reason"])
        self.assertIn("check `doubling` no longer runs", rec["reason"])
        self.assertIn("mutant drop_check doubling", rec["result"]["injected"])
        # Forced to pass, a check that passes anyway changes nothing: an equivalent mutant.
        p, rec = self.run_ok("forced", extra=("--samples", "9"), mutate=f"force_pass:{key}:doubling")
        self.assertIn(rec["verdict"], ("PASS", "AMBIGUOUS"), rec["reason"])
        p, rec = self.run_ok("series", extra=("--samples", "9"),
                             mutate=f"drop_check:{key}:no_such_check")
        self.assertIn("mutant drop_check no_such_check (not recorded)", rec["result"]["injected"])
        b = self.bless("dropped")
        self.assertEqual(b.returncode, 2)
        self.assertIn("PITFALL_MUTATE", b.stderr)
        typo = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir("typo"),
                            env=dict(os.environ, PITFALL_MUTATE="drop_check:cpu.harness_fixture.nope:x"))
        self.assertEqual(typo.returncode, 2)
        self.assertIn("PITFALL_MUTATE", typo.stderr)

    def test_bless_writes_the_evidence_of_the_run(self):
        # The budget makes the oom case the tracker's refusal, not a 1 TiB malloc (which
        # AddressSanitizer turns into an abort in the asan preset).
        env = dict(os.environ, PITFALL_DEVICE_MEMORY_LIMIT="64M", **self.STEP)
        out = self.run_dir("evidence")
        p = self.pitfall("run", "--variant", "ok,oom,unsupported", "--backend", "cpu", "--out", out,
                         "--samples", "9", env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        header = records(out, "run")[0]
        b = self.pitfall("bless", out)
        self.assertEqual(b.returncode, 0, b.stderr)
        path = os.path.join(self.expected, "any", "harness_fixture.json")
        with open(path) as f:
            doc = json.load(f)
        self.assertEqual(list(schema_validator("expected.schema.json").iter_errors(doc)), [])
        version = subprocess.run([BIN, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.split()[-1]  # "pitfall 0.1.0"
        self.assertEqual(header["pitfall_version"], version)
        cases = doc["cases"]
        self.assertEqual(set(cases), {"cpu.ok", "cpu.oom", "cpu.unsupported"})
        for key, entry in cases.items():
            prov = entry["provenance"]
            self.assertEqual(prov["kind"], "observed", key)
            self.assertEqual(prov["fingerprint"], header["fingerprint_summary"], key)
            self.assertEqual(prov["fingerprint_id"], header["fingerprint_id"], key)
            self.assertEqual(prov["pitfall_version"], version, key)
            self.assertRegex(prov["date"], r"^\d{4}-\d{2}-\d{2}$")
            archive = prov["run"].get("archive", "")
            self.assertRegex(archive, "^runs/" + "".join(c for c in header["at"] if c.isalnum()) +
                             "-" + header["fingerprint_id"] + "-[0-9a-f]{8}$")
            self.assertEqual(prov["run"], {"case": "cpu.harness_fixture." + key.split(".")[1],
                                           "folder": "evidence", "started": header["at"],
                                           "archive": archive}, key)
        # The run is kept beside the baseline, compressed: what every entry was blessed from.
        kept = os.path.join(self.expected, "any", archive)
        for name in ("results.jsonl", "fingerprint.json"):
            with gzip.open(os.path.join(kept, name + ".gz"), "rb") as f, \
                    open(os.path.join(out, name), "rb") as original:
                self.assertEqual(f.read(), original.read(), name)
        ok = cases["cpu.ok"]
        self.assertEqual(ok["outcome"], {"status": "ok"})
        self.assertEqual(ok["ran_on"], "cpu")  # the case's proof up to its ':'
        self.assertEqual(len(ok["timings"]["step_seconds"]["samples"]), 9)
        self.assertEqual(ok["memory"]["tracked_peak_bytes"], {"equals": 8192})
        self.assertIn("peak_rss_bytes", ok["memory"])
        self.assertEqual(ok["provenance"]["rss_method"], "case")  # compared only with its like
        self.assertEqual(cases["cpu.oom"]["outcome"]["error"], "std::bad_alloc")
        self.assertNotIn("timings", cases["cpu.unsupported"])  # nothing was timed
        # The harness loads what bless wrote and judges the same cases by it.
        again = self.pitfall("run", "--variant", "ok,oom,unsupported", "--backend", "cpu",
                             "--out", self.run_dir("again"), "--samples", "9", env=env)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertEqual(by_case(self.run_dir("again"))["cpu.harness_fixture.oom"]["verdict"], "PASS")
        # --no-timings: the same evidence without the timed series, the old ones dropped.
        b = self.pitfall("bless", out, "--no-timings")
        self.assertEqual(b.returncode, 0, b.stderr)
        with open(path) as f:
            untimed = json.load(f)["cases"]["cpu.ok"]
        self.assertNotIn("timings", untimed)
        self.assertEqual(untimed["provenance"]["fingerprint_id"], header["fingerprint_id"])
        self.assertEqual(untimed["ran_on"], "cpu")
        self.assertTrue(os.path.isdir(kept), "blessed again from the same run: still kept")
        # Blessed from another run, the first one is named by no entry: it goes, and a link
        # planted among the kept runs goes as a link, its target untouched.
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "keep.txt"), "w") as f:
            f.write("not the harness's")
        os.symlink(outside, os.path.join(self.expected, "any", "runs", "planted-0"))
        later = self.run_dir("later")
        p = self.pitfall("run", "--variant", "ok,oom,unsupported", "--backend", "cpu", "--out", later,
                         "--samples", "9", env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        b = self.pitfall("bless", later, "--no-timings")
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertIn("2 no entry names removed", b.stdout)
        self.assertFalse(os.path.exists(kept))
        with open(path) as f:
            later_archive = json.load(f)["cases"]["cpu.ok"]["provenance"]["run"]["archive"]
        self.assertNotEqual(later_archive, archive)  # even when both runs began in one second
        self.assertEqual(os.listdir(os.path.join(self.expected, "any", "runs")),
                         [later_archive[len("runs/"):]])
        self.assertTrue(os.path.isfile(os.path.join(outside, "keep.txt")))
        # --dry-run keeps nothing and removes nothing.
        before = sorted(os.listdir(os.path.join(self.expected, "any", "runs")))
        d = self.pitfall("bless", out, "--dry-run")
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(self.expected, "any", "runs"))), before)
        # Where the runs cannot be kept, no baseline is written: none names a run not there.
        shutil.rmtree(os.path.join(self.expected, "any", "runs"))
        with open(os.path.join(self.expected, "any", "runs"), "w") as f:
            f.write("not a folder")
        with open(path) as f:
            unchanged = f.read()
        refused = self.pitfall("bless", out)
        self.assertEqual(refused.returncode, 2, refused.stdout)
        self.assertIn("cannot keep runs in", refused.stderr)
        self.assertIn("no baseline was written", refused.stderr)
        with open(path) as f:
            self.assertEqual(f.read(), unchanged)

    def test_bless_replaces_an_entry_without_evidence(self):
        # An observed entry as an older pitfall wrote it (a fingerprint in words, no id, no
        # version): the harness refuses it; blessing that case replaces it with a run's
        # evidence and keeps what was written by hand. Another such entry, not blessed, still
        # makes the file one to fix first.
        old = {"outcome": {"status": "ok"}, "note": "written by hand",
               "provenance": {"kind": "observed", "date": "2026-11-22", "fingerprint": "Debian 12, 2 cores"}}
        oom = {"outcome": {"status": "error", "error": "std::bad_alloc"}, "provenance": DOCUMENTED}
        path = os.path.join(self.expected, "any", "harness_fixture.json")
        self.write_json(path, {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                               "cases": {"cpu.ok": old, "cpu.oom": dict(oom, provenance=old["provenance"])}})
        # Run without baselines: the harness refuses to load this file, as it should.
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir("a"),
                         "--samples", "3", expected=os.path.join(self.tmp, "none"),
                         env=dict(os.environ, **self.STEP))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        b = self.bless("a", "--profile", "any")
        self.assertEqual(b.returncode, 2, b.stdout)
        self.assertIn("/cases/cpu.oom/provenance", b.stderr)
        self.assertIn("fix it before blessing into it", b.stderr)
        self.write_json(path, {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                               "cases": {"cpu.ok": old, "cpu.oom": oom}})
        b = self.bless("a", "--profile", "any")
        self.assertEqual(b.returncode, 0, b.stderr)
        with open(path) as f:
            written = json.load(f)["cases"]
        self.assertEqual(written["cpu.ok"]["note"], "written by hand")
        self.assertIsInstance(written["cpu.ok"]["provenance"]["fingerprint"], dict)
        self.assertIn("pitfall_version", written["cpu.ok"]["provenance"])
        self.assertEqual(written["cpu.oom"], oom)

    def test_bless_keeps_the_key_order_of_the_file(self):
        # A baseline written by hand, its keys in no alphabetical order at any level.
        entry = {"outcome": {"status": "ok"}, "note": "kept as written", "ran_on": "cpu",
                 "memory": {"tracked_peak_bytes": {"equals": 8192}},
                 "provenance": {"kind": "observed", "fingerprint": {"os": "test"}, "date": "2026-11-22",
                                "fingerprint_id": "0000000000000000", "pitfall_version": "0.0.1"}}
        # A documented ratio bound, which bless keeps: the diff is then the case's alone.
        ratio = {"min": 0.1, "provenance": {"kind": "documented", "source": "docs/cuda-rules.md#numbers"}}
        doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture", "cases": {"cpu.ok": entry},
               "ratios": {"cpu.ok_over_ok": ratio}}
        path = os.path.join(self.expected, "any", "harness_fixture.json")
        with open(path, "w") as f:
            f.write(json.dumps(doc, indent=2) + "\n")
        before = read_text(path)
        self.run_ok("a", extra=("--samples", "9"))  # the fewest the judge compares: bless keeps them
        d = self.bless("a", "--dry-run")
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertEqual(read_text(path), before)  # a dry run writes nothing
        self.assertIn("its documented bound in any is kept", d.stdout + d.stderr)
        changed = [line for line in d.stdout.splitlines()
                   if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        removed = [line[1:].strip() for line in changed if line.startswith("-")]
        # Only what changed: the provenance's evidence (date, the fingerprint summary and id,
        # the version), and a brace that gains a comma where a key is added after it; nothing
        # moved.
        for line in removed:
            self.assertRegex(line, r'^("date"|"fingerprint"|"fingerprint_id"|"pitfall_version"|"os"|}$)', d.stdout)
        for key in ('"schema"', '"scenario"', '"outcome"', '"status"', '"note"', '"kind"', '"equals"', '"ran_on"'):
            self.assertFalse([line for line in changed if key in line], d.stdout)
        b = self.bless("a")
        self.assertEqual(b.returncode, 0, b.stderr)
        with open(path) as f:
            written = json.load(f)
        self.assertEqual(list(written), ["schema", "scenario", "cases", "ratios"])
        self.assertEqual(written["ratios"]["cpu.ok_over_ok"], ratio)
        self.assertEqual(list(written["cases"]["cpu.ok"]), ["outcome", "note", "ran_on", "memory", "provenance",
                                                                "records", "timings"])
        self.assertEqual(list(written["cases"]["cpu.ok"]["provenance"])[:5],
                         ["kind", "fingerprint", "date", "fingerprint_id", "pitfall_version"])

    def test_slowdown_is_a_perf_regression(self):
        self.run_ok("a", extra=("--samples", "15"))
        self.assertEqual(self.bless("a").returncode, 0)
        started = time.monotonic()
        p, rec = self.run_ok("slow", inject="slowdown:cpu.harness_fixture.ok:1.2",
                             extra=("--samples", "15", "--remeasure-pause", "0.5"))
        took = time.monotonic() - started
        self.assertEqual(rec["verdict"], "PERF_REGRESSION", rec["reason"])
        self.assertEqual(rec["result"]["injected"], ["slowdown x1.2"])
        self.assertGreater(rec["timings"]["step_seconds"]["ratio"]["low"], 1.15)
        # Measured in two processes before it stood: the second at the end of the run, after
        # the pause, with three times the samples (a lower bound on the time: no noise in it),
        # and chosen by the series that was judged.
        self.assertEqual([a["samples"] for a in rec["attempts"]], [15, 45])
        self.assertEqual(list(rec["attempts"][0]["median_seconds"]), ["step_seconds"])
        self.assertIn("least disturbed of 2 processes (by step_seconds)", rec["reason"])
        self.assertIn("measured again at the end of the run", p.stdout)
        self.assertIn("measuring again, one at a time after 0.5 s: 1 case", p.stdout)
        # Counted apart from the first pass, with an ETA of its own; the case once in each.
        self.assertRegex(p.stdout, r"\n\[again 1/1\] cpu\.harness_fixture\.ok +PERF_REGRESSION +"
                                   r"[\d.]+ s +ETA 0:00\n")
        self.assertEqual(p.stdout.count("] cpu.harness_fixture.ok "), 2, p.stdout)
        self.assertGreaterEqual(took, 0.5)
        self.assertEqual(p.returncode, 1)
        self.assertIn("PITFALL_INJECT", p.stdout)  # the run says it was injected
        # Unchanged, the same synthetic steps are SAME.
        p, rec = self.run_ok("same", extra=("--samples", "15"))
        self.assertEqual(rec["timings"]["step_seconds"]["verdict"], "SAME", rec["reason"])
        self.assertEqual(p.returncode, 0)

    def test_absolute_times_stay_on_their_host_and_the_normalised_twin_travels(self):
        # The fixture's step names host_scalar as its bound (scenario.json "timings"): bless
        # keeps it twice, as measured and divided by that control's median in the same process.
        self.run_ok("a", extra=("--samples", "9"))
        b = self.bless("a")
        self.assertEqual(b.returncode, 0, b.stderr)
        entry = self.blessed_entry()
        self.assertRegex(entry["provenance"]["host_id"], r"^[0-9a-f]{16}$")
        twin = entry["timings"]["step_seconds"]["normalised"]
        self.assertEqual(twin["by"], "host_scalar")
        self.assertEqual(len(twin["samples"]), 9)
        self.assertGreater(twin["control_median"], 0)
        # This host: both are judged.
        p, rec = self.run_ok("here", extra=("--samples", "9"))
        self.assertNotEqual(rec["timings"]["step_seconds"]["verdict"], "NOT_COMPARED", rec["timings"])
        self.assertNotEqual(rec["timings"]["step_seconds/host_scalar"]["verdict"], "NOT_COMPARED")
        # Another host of the same kind (the same fingerprint): the absolute series is not
        # compared, saying both hosts; its normalised twin is judged.
        p, rec = self.run_ok("there", extra=("--samples", "9"), host_id="0123456789abcdef")
        absolute = rec["timings"]["step_seconds"]
        self.assertEqual(absolute["verdict"], "NOT_COMPARED")
        self.assertIn(entry["provenance"]["host_id"], absolute["reason"])
        self.assertIn("0123456789abcdef", absolute["reason"])
        self.assertIn("normalised twin is judged", absolute["reason"])
        judged = ("SAME", "FASTER", "AMBIGUOUS", "PERF_REGRESSION")
        self.assertIn(rec["timings"]["step_seconds/host_scalar"]["verdict"], judged)
        self.assertIn("p_regression", rec["timings"]["step_seconds/host_scalar"])
        summary = read_json(os.path.join(self.run_dir("there"), "summary.json"))
        self.assertEqual(summary["timing_family"]["method"], "holm")
        # And there the twin still catches slower code: the step 1.5x, its control unchanged.
        p, rec = self.run_ok("slower", inject="slowdown:cpu.harness_fixture.ok:1.5",
                             extra=("--samples", "9", "--remeasure-pause", "0"),
                             host_id="0123456789abcdef")
        self.assertEqual(rec["timings"]["step_seconds/host_scalar"]["verdict"], "PERF_REGRESSION",
                         rec["timings"])
        self.assertEqual(rec["verdict"], "PERF_REGRESSION")
        self.assertEqual(p.returncode, 1)

    def test_injection_aimed_elsewhere_is_inert(self):
        self.run_ok("a")
        self.assertEqual(self.bless("a").returncode, 0)
        p, rec = self.run_ok("b", inject="outcome:cpu.harness_fixture.oom:std::bad_alloc")
        self.assertNotIn("injected", rec["result"])
        self.assertEqual(rec["result"]["outcome"]["status"], "ok")

    def test_outcome_and_memory_faults(self):
        self.run_ok("a")
        self.assertEqual(self.bless("a").returncode, 0)
        p, rec = self.run_ok("err", inject="outcome:cpu.harness_fixture.ok:cudaErrorLaunchFailure")
        self.assertEqual(rec["verdict"], "FAIL")
        self.assertIn("cudaErrorLaunchFailure", rec["reason"])
        self.assertEqual(rec["observed"]["library"], "cuda_runtime")
        self.assertEqual(p.returncode, 1)
        p, rec = self.run_ok("mem", inject="extra_device_bytes:cpu.harness_fixture.ok:819")  # +10%
        self.assertEqual(rec["verdict"], "MEM_REGRESSION", rec["reason"])
        self.assertIn("tracked_peak_bytes = 9011, expected exactly 8192", rec["reason"])
        self.assertEqual(p.returncode, 1)

    def test_malformed_injection_names_the_variable(self):
        # Refused by `pitfall run` before any case starts (test_durability.SaneValues has the
        # table); a scenario program started by hand still refuses it too.
        env = dict(os.environ, PITFALL_INJECT="slowdown:cpu.harness_fixture.ok:fast")
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir("bad"), env=env)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("PITFALL_INJECT", p.stderr)
        self.assertFalse(os.path.exists(self.run_dir("bad")))
        p = subprocess.run([PROGRAM, "--backend", "cpu", "--variant", "ok", "--out", os.path.join(self.tmp, "r.json")],
                           capture_output=True, text=True, env=env, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("PITFALL_INJECT", p.stdout + p.stderr)

    def test_documented_baseline_contradicted_says_so(self):
        doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
               "cases": {"cpu.ok": {"outcome": {"status": "error", "error": "cudaErrorNoDevice"},
                                    "provenance": {"kind": "documented",
                                                   "source": "docs/cuda-rules.md#runtime-error-names"}}}}
        self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)
        p, rec = self.run_ok("a")
        self.assertEqual(rec["verdict"], "FAIL")
        self.assertIn("documented, not observed: bless it if the hardware is right", rec["reason"])

    def test_bless_refuses_crashes_unless_named(self):
        out = self.run_dir("segv")
        self.pitfall("run", "--variant", "segv", "--out", out)
        b = self.pitfall("bless", out)
        self.assertEqual(b.returncode, 2)
        self.assertIn("refusing", b.stderr)
        self.assertIn("cpu.harness_fixture.segv", b.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.expected, "any", "harness_fixture.json")))
        b = self.pitfall("bless", out, "--case", "cpu.harness_fixture.segv")
        self.assertEqual(b.returncode, 0, b.stderr)
        with open(os.path.join(self.expected, "any", "harness_fixture.json")) as f:
            self.assertEqual(json.load(f)["cases"]["cpu.segv"]["outcome"], {"status": "signal", "signal": "SIGSEGV"})
        p = self.pitfall("run", "--variant", "segv", "--out", self.run_dir("again"))
        self.assertEqual(p.returncode, 0, p.stdout)

    def test_bless_refuses_injected_runs_and_unknown_profiles(self):
        self.run_ok("inj", inject="slowdown:*:1.1")
        b = self.bless("inj")
        self.assertEqual(b.returncode, 2)
        self.assertIn("PITFALL_INJECT", b.stderr)
        self.run_ok("a")
        b = self.bless("a", "--profile", "nonesuch")
        self.assertEqual(b.returncode, 2)
        self.assertIn("nonesuch", b.stderr)

    def test_ratio_bounds_gate_the_run(self):
        doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
               "cases": {"cpu.ok": {"outcome": {"status": "ok"}, "provenance": DOCUMENTED}},
               "ratios": {"cpu.ok_over_ok": {"min": 2, "provenance": {"kind": "documented",
                                                                       "source": "a guide, section 2"}}}}
        self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)
        p, rec = self.run_ok("a")
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("PERF_REGRESSION", p.stdout)
        with open(os.path.join(self.run_dir("a"), "summary.json")) as f:
            ratio = json.load(f)["ratios"][0]
        self.assertEqual((ratio["verdict"], ratio["failing"]), ("PERF_REGRESSION", True))
        # A documented bound with its source: judged on any machine, the source in the reason.
        doc["ratios"]["cpu.ok_over_ok"] = {
            "min": 2, "note": "the fixture's ratio is 1: this bound must fail",
            "provenance": {"kind": "documented", "source": "a guide, section 2"}}
        self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)
        p, rec = self.run_ok("b")
        self.assertEqual(p.returncode, 1, p.stdout)
        with open(os.path.join(self.run_dir("b"), "summary.json")) as f:
            ratio = json.load(f)["ratios"][0]
        self.assertEqual((ratio["verdict"], ratio["failing"]), ("PERF_REGRESSION", True))
        self.assertEqual(ratio["bound"], {"min": 2})  # the bound alone; its source beside it
        self.assertEqual(ratio["provenance"]["source"], "a guide, section 2")
        self.assertIn("ok_over_ok = 1 below min 2 (documented bound: a guide, section 2)", ratio["reason"])
        self.assertIn("ratio cpu.harness_fixture.ok_over_ok", p.stdout)

    def blessed_ratio(self):
        path = os.path.join(self.expected, "any", "harness_fixture.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f).get("ratios", {}).get("cpu.ok_over_ok")

    def summary_ratio(self, run):
        with open(os.path.join(self.run_dir(run), "summary.json")) as f:
            return json.load(f)["ratios"][0]

    def test_bless_writes_observed_ratio_bounds_judged_under_their_fingerprint(self):
        self.run_ok("a")
        b = self.bless("a", "--ratio-tolerance", "3")
        self.assertEqual(b.returncode, 0, b.stderr)
        ratio = self.blessed_ratio()
        # ok_over_ok divides the ok case's median by itself: exactly 1, so [1/3, 3].
        self.assertEqual({k: ratio[k] for k in ("min", "max", "observed")}, {"min": 0.333, "max": 3, "observed": 1})
        prov = ratio["provenance"]
        self.assertEqual(prov["kind"], "observed")
        self.assertRegex(prov["date"], r"^\d{4}-\d{2}-\d{2}$")
        self.assertRegex(prov["fingerprint_id"], r"^[0-9a-f]{16}$")
        self.assertIn("cpu_model", prov["fingerprint"])  # the summary object, not words
        with open(os.path.join(self.run_dir("a"), "results.jsonl")) as f:
            header = json.loads(f.readline())
        self.assertEqual(prov["pitfall_version"], header["pitfall_version"])
        v = subprocess.run([os.environ["PITFALL_VALIDATE"], "--schema", "expected",
                            os.path.join(self.expected, "any", "harness_fixture.json")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        # The next run of this machine is judged by it, and passes.
        p, rec = self.run_ok("b")
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertEqual(self.summary_ratio("b")["verdict"], "PASS")
        # Under another fingerprint the bound is not compared: one machine's ratio is no claim
        # about another's.
        path = os.path.join(self.expected, "any", "harness_fixture.json")
        with open(path) as f:
            doc = json.load(f)
        doc["ratios"]["cpu.ok_over_ok"].update(min=2, max=3)  # would fail here
        doc["ratios"]["cpu.ok_over_ok"]["provenance"]["fingerprint_id"] = "00000000000000ff"
        self.write_json(path, doc)
        p, rec = self.run_ok("c")
        self.assertEqual(p.returncode, 0, p.stdout)
        ratio = self.summary_ratio("c")
        self.assertEqual((ratio["verdict"], ratio["failing"]), ("NOT_COMPARED", False))
        self.assertIn("00000000000000ff", ratio["reason"])

    def test_bless_keeps_a_documented_ratio_bound(self):
        documented = {"max": 4, "note": "hand-written",
                      "provenance": {"kind": "documented", "source": "docs/cuda-rules.md#numbers"}}
        doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture", "cases": {},
               "ratios": {"cpu.ok_over_ok": documented}}
        self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)
        self.run_ok("a")
        b = self.bless("a")
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertIn("ratio cpu.ok_over_ok of harness_fixture = 1.000: its documented bound in any is kept", b.stdout)
        self.assertEqual(self.blessed_ratio(), documented)
        self.assertEqual(self.blessed_entry()["provenance"]["kind"], "observed")  # the case was blessed

    def test_ratio_tolerance_must_widen(self):
        self.run_ok("a")
        for bad in ("1", "0.5", "nan", "wide"):
            b = self.bless("a", "--ratio-tolerance", bad)
            self.assertEqual(b.returncode, 2, bad)
            self.assertIn("--ratio-tolerance", b.stderr)
        self.assertIsNone(self.blessed_ratio())

    def test_compare_two_runs(self):
        self.run_ok("a", extra=("--samples", "15"))
        self.run_ok("b", extra=("--samples", "15"))
        c = self.pitfall("compare", self.run_dir("a"), self.run_dir("b"))
        self.assertEqual(c.returncode, 0, c.stdout)
        self.assertIn("same fingerprint", c.stdout)
        self.run_ok("slow", inject="slowdown:*:1.5,outcome:*:std::bad_alloc", extra=("--samples", "15"))
        c = self.pitfall("compare", self.run_dir("a"), self.run_dir("slow"), "--json")
        self.assertEqual(c.returncode, 1, c.stdout)
        report = json.loads(c.stdout)
        row = {r["case"]: r for r in report["cases"]}["cpu.harness_fixture.ok"]
        self.assertEqual(row["verdict"], "FAIL")
        self.assertEqual(row["outcome"], {"a": "ok", "b": "std::bad_alloc@compute"})
        c = self.pitfall("compare", self.run_dir("a"), os.path.join(self.tmp, "nothing"))
        self.assertEqual(c.returncode, 2)
        self.assertIn("not a run folder", c.stderr)


class Schema(FixtureTest):
    """reports/schema/expected.schema.json and the harness agree: every real baseline passes
    both, and each broken copy is refused by both, the harness naming file and field."""

    SCHEMA_DIR = SCHEMA_DIR
    REAL_EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")

    def validator(self, name):
        return schema_validator(name)

    def test_every_real_baseline_matches_the_schema(self):
        expected, profile = self.validator("expected.schema.json"), self.validator("profile.schema.json")
        checked = 0
        for folder in sorted(os.listdir(self.REAL_EXPECTED)):
            for name in sorted(os.listdir(os.path.join(self.REAL_EXPECTED, folder))):
                if not name.endswith(".json"):  # runs/: the kept runs, not baselines
                    continue
                with open(os.path.join(self.REAL_EXPECTED, folder, name)) as f:
                    doc = json.load(f)
                errors = [f"{'.'.join(map(str, e.path))}: {e.message}"
                          for e in (profile if name == "profile.json" else expected).iter_errors(doc)]
                self.assertEqual(errors, [], f"{folder}/{name}")
                checked += 1
        self.assertGreater(checked, 20)

    def test_documented_sources_name_anchors_that_exist(self):
        """A source "docs/x.md#anchor" names a heading of that document (GitHub's anchors)."""
        root = os.path.join(self.REAL_EXPECTED, "..")
        anchors = {}

        def anchors_of(doc):
            if doc not in anchors:
                with open(os.path.join(root, doc)) as f:
                    headings = [line.lstrip("#").strip() for line in f if line.startswith("#")]
                anchors[doc] = {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in headings}
            return anchors[doc]

        cited = 0
        for folder in sorted(os.listdir(self.REAL_EXPECTED)):
            for name in sorted(os.listdir(os.path.join(self.REAL_EXPECTED, folder))):
                if not name.endswith(".json"):  # runs/: the kept runs, not baselines
                    continue
                with open(os.path.join(self.REAL_EXPECTED, folder, name)) as f:
                    doc = json.load(f)
                for key, entry in doc.get("cases", {}).items():
                    source = entry["provenance"].get("source", "")
                    for path, anchor in re.findall(r"(docs/[\w./-]+\.md)#([\w-]+)", source):
                        self.assertIn(anchor, anchors_of(path), f"{folder}/{name} {key}: {path}#{anchor}")
                        cited += 1
        self.assertGreater(cited, 20)

    def test_broken_baselines_are_refused_by_both(self):
        expected = self.validator("expected.schema.json")
        good = {"outcome": {"status": "ok"}, "provenance": DOCUMENTED}
        observed = {"outcome": {"status": "ok"}, "ran_on": "cpu", "provenance": OBSERVED}

        def without(name):
            return {k: v for k, v in OBSERVED.items() if k != name}

        broken = [
            ("/cases/cpu.ok/provenance: missing required property 'date'", dict(observed, provenance=without("date"))),
            ("/cases/cpu.ok/memory/tracked_peak_bytes", dict(good, memory={"tracked_peak_bytes": {"equals": 1, "max": 2}})),
            ("/cases/cpu.ok/colour", dict(good, colour="red")),
            # A bound set by hand says why in words; nothing else rides along with it.
            ("/cases/cpu.ok/measurements/wrong/why", dict(good, measurements={"wrong": {"equals": 0, "why": 7}})),
            ("/cases/cpu.ok/measurements/wrong/why", dict(good, measurements={"wrong": {"equals": 0, "why": ""}})),
            ("/cases/cpu.ok/measurements/wrong", dict(good, measurements={"wrong": {"equals": 0, "max": 1, "why": "x"}})),
            ("/cases/cpu.ok/provenance: missing required property 'fingerprint_id'", dict(good, timings={"step_seconds": {"samples": [1.0]}})),
            ("/cases/cpu.ok/outcome/status", dict(good, outcome={"status": "fine"})),
            # An observed entry carries the evidence of its run, never prose.
            ("/cases/cpu.ok/provenance: missing required property 'fingerprint_id'", dict(observed, provenance=without("fingerprint_id"))),
            ("/cases/cpu.ok/provenance/fingerprint: expected object, got string", dict(observed, provenance=dict(OBSERVED, fingerprint="an H100, driver 580"))),
            ("/cases/cpu.ok/provenance: missing required property 'fingerprint'", dict(observed, provenance=without("fingerprint"))),
            ("/cases/cpu.ok/provenance: missing required property 'pitfall_version'", dict(observed, provenance=without("pitfall_version"))),
            ("/cases/cpu.ok: missing required property 'ran_on'", {"outcome": {"status": "ok"}, "provenance": OBSERVED}),
            # A documented entry names a source a reader can check.
            ("/cases/cpu.ok/provenance: missing required property 'source'", dict(good, provenance={"kind": "documented"})),
            ("/cases/cpu.ok/provenance/source: \"the CUDA programming guide\" does not match", dict(good, provenance={"kind": "documented", "source": "the CUDA programming guide"})),
            ("/cases/cpu.ok/provenance/source: \"NVIDIA's guides, the part on streams\" does not match", dict(good, provenance={"kind": "documented", "source": "NVIDIA's guides, the part on streams"})),
            ("/cases/cpu.ok/provenance/source: expected at least 16 characters", dict(good, provenance={"kind": "documented", "source": "a.md#x"})),
        ]
        # What is neither: the rule's accepted forms, and an observed failure without ran_on.
        accepted = [dict(good, provenance={"kind": "documented", "source": s}) for s in (
            "https://docs.nvidia.com/cuda/", "docs/cuda-rules.md#stub-libcuda",
            "CUDA C++ Programming Guide, 'Arithmetic Instructions'",
            'CUDA C++ Programming Guide, "CUDA Graphs"', "the CUDA Runtime API, section Device Management")]
        accepted.append({"outcome": {"status": "error", "error": "std::bad_alloc"}, "provenance": OBSERVED})
        accepted.append(dict(good, measurements={"wrong": {"equals": 0, "why": "zero: the remedy is exact"}}))
        for entry in accepted:
            doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture", "cases": {"cpu.ok": entry}}
            self.assertEqual(list(expected.iter_errors(doc)), [], entry)
            self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)
            p = self.pitfall("run", "--variant", "unsupported", "--out", self.run_dir(), "--replace")
            self.assertNotEqual(p.returncode, 2, (entry, p.stderr))
        for field, entry in broken:
            doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture", "cases": {"cpu.ok": entry}}
            self.assertTrue(list(expected.iter_errors(doc)), f"the schema accepts a broken {field}")
            self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)
            p = self.pitfall("run", "--variant", "ok", "--out", self.run_dir(), "--replace")
            self.assertEqual(p.returncode, 2, field)
            self.assertIn("harness_fixture.json", p.stderr)
            self.assertIn(field, p.stderr)  # the JSON pointer of the field

    def test_ratio_entries_need_a_source_and_are_refused_by_both(self):
        expected = self.validator("expected.schema.json")
        observed = {"kind": "observed", "date": "2026-11-25", "fingerprint": {"gpu_count": 0},
                    "fingerprint_id": "0123456789abcdef", "pitfall_version": "0.1.0"}
        good = {
            "documented": {"min": 2, "note": "why", "provenance": {"kind": "documented", "source": "a guide, section 2"}},
            "observed": {"min": 0.5, "max": 2, "observed": 1.0, "provenance": observed},
        }
        broken = {
            "/ratios/cpu.ok_over_ok/provenance: missing required property 'source'":
                {"min": 2, "provenance": {"kind": "documented"}},
            "/ratios/cpu.ok_over_ok/provenance/source":
                {"min": 2, "provenance": {"kind": "documented", "source": ""}},
            "/ratios/cpu.ok_over_ok: missing required property 'observed'":
                {"min": 0.5, "provenance": observed},
            "/ratios/cpu.ok_over_ok/provenance: missing required property 'fingerprint_id'":
                {"min": 0.5, "observed": 1.0, "provenance": {k: v for k, v in observed.items() if k != "fingerprint_id"}},
            "/ratios/cpu.ok_over_ok/provenance/kind":
                {"min": 2, "observed": 2.5, "provenance": {"kind": "documented", "source": "a guide, section 2"}},
            "/ratios/cpu.ok_over_ok/colour":
                {"min": 2, "colour": "red", "provenance": {"kind": "documented", "source": "a guide, section 2"}},
            # Where a bound's numbers come from is part of it; a source names something checkable.
            "/ratios/cpu.ok_over_ok: missing required property 'provenance'": {"min": 2},
            "/ratios/cpu.ok_over_ok/provenance/source: ":
                {"min": 2, "provenance": {"kind": "documented", "source": "from a book I once read"}},
        }
        for name, entry in list(good.items()) + list(broken.items()):
            doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture", "cases": {},
                   "ratios": {"cpu.ok_over_ok": entry}}
            errors = list(expected.iter_errors(doc))
            self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)
            p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--samples", "1",
                             "--out", self.run_dir(), "--replace")
            if name in good:
                self.assertEqual(errors, [], name)
                self.assertNotEqual(p.returncode, 2, p.stderr)
                continue
            self.assertTrue(errors, f"the schema accepts a broken {name}")
            self.assertEqual(p.returncode, 2, name)
            self.assertIn(name, p.stderr)  # the JSON pointer of the field


class Reports(FixtureTest):
    """`pitfall run` ends by writing report.json, junit.xml, summary.md and report.html, each
    rendered from results.jsonl; each is checked by a real consumer."""

    SCHEMA_DIR = Schema.SCHEMA_DIR
    baseline = {"cpu.ok": {"outcome": {"status": "ok"}},
                "cpu.oom": {"outcome": {"status": "error", "library": "host", "error": "std::bad_alloc",
                                        "stage": "alloc", "sticky": False}}}
    REPORTS = ("report.json", "junit.xml", "summary.md", "report.html")

    def validate_report(self, run):
        import jsonschema  # python3-jsonschema, installed by ci/setup.sh
        with open(os.path.join(self.SCHEMA_DIR, "report.schema.json")) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        with open(os.path.join(run, "report.json")) as f:
            doc = json.load(f)
        errors = [f"{'.'.join(map(str, e.path))}: {e.message}"
                  for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
        self.assertEqual(errors, [])
        return doc

    def xmllint_junit(self, path):
        """xmllint (libxml2-utils) against reports/schema/junit.xsd: (exit status, its words)."""
        p = subprocess.run(["xmllint", "--noout", "--schema", os.path.join(self.SCHEMA_DIR, "junit.xsd"), path],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr

    def junit(self, run):
        import junitparser  # pip, into .tools/python by ci/setup.sh
        xml = junitparser.JUnitXml.fromfile(os.path.join(run, "junit.xml"))
        return {(case.classname, case.name): case for suite in xml for case in suite}, xml

    def test_run_writes_all_four_and_each_reads_back(self):
        out = self.run_dir()
        env = dict(os.environ, PITFALL_DEVICE_MEMORY_LIMIT="64M")
        p = self.pitfall("run", "--backend", "cpu", "--variant", "ok,oom,segv,bad_check,unsupported",
                         "--out", out, "--samples", "3", env=env)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(f"reports: {out}/report.html, junit.xml, summary.md, report.json", p.stdout)
        for name in self.REPORTS:
            self.assertGreater(os.path.getsize(os.path.join(out, name)), 100, name)
        doc = self.validate_report(out)
        summary = json.load(open(os.path.join(out, "summary.json")))
        self.assertEqual(doc["counts"], summary["counts"])
        self.assertTrue(doc["failing"])
        self.assertTrue(doc["run"]["complete"])
        verdicts = {c["case"]: c["verdict"] for c in doc["cases"]}
        self.assertEqual(verdicts["cpu.harness_fixture.segv"], "CRASH")
        self.assertEqual(verdicts["cpu.harness_fixture.unsupported"], "UNSUPPORTED")
        # The verdict table travels with the report: every verdict the schema knows, once, and
        # each case's "failing" is its verdict's.
        table = {v["name"]: v for v in doc["verdicts"]}
        with open(os.path.join(Schema.SCHEMA_DIR, "report.schema.json")) as f:
            known = json.load(f)["$defs"]["verdict"]["enum"]
        self.assertEqual(sorted(table), sorted(known))
        self.assertEqual(len(doc["verdicts"]), len(known))
        self.assertEqual({n for n, v in table.items() if v["failing"]},
                         {"FAIL", "NUMERIC_MISMATCH", "MEM_REGRESSION", "PERF_REGRESSION", "CRASH", "TIMEOUT"})
        for c in doc["cases"]:
            self.assertEqual(c["failing"], table[c["verdict"]]["failing"], c["case"])
        # The end of the terminal output: counts, each failure with its reason, a skip alone.
        self.assertIn("5 cases: 2 PASS, 1 NUMERIC_MISMATCH, 1 CRASH, 1 UNSUPPORTED", p.stdout)
        self.assertRegex(p.stdout, r"failing:\n  cpu\.harness_fixture\.segv +CRASH +signal SIGSEGV")
        self.assertRegex(p.stdout, r"  cpu\.harness_fixture\.bad_check +NUMERIC_MISMATCH +check sum_matches_reference")
        self.assertRegex(p.stdout, r"skipped:\n  cpu\.harness_fixture\.unsupported +UNSUPPORTED +.*never runs")
        self.assertEqual(p.stdout.count("cpu.harness_fixture.ok "), 1, p.stdout)  # each case printed once
        # JUnit: one testcase per case, classname = scenario, name = backend.variant.
        cases, xml = self.junit(out)
        self.assertEqual(set(cases), {("harness_fixture", "cpu." + v)
                                      for v in ("ok", "oom", "segv", "bad_check", "unsupported")})
        self.assertEqual(cases[("harness_fixture", "cpu.ok")].is_passed, True)
        segv = cases[("harness_fixture", "cpu.segv")].result
        self.assertEqual([type(r).__name__ for r in segv], ["Error"])
        self.assertIn("SIGSEGV", segv[0].message + (segv[0].text or ""))
        bad = cases[("harness_fixture", "cpu.bad_check")].result
        self.assertEqual([(type(r).__name__, r.type) for r in bad], [("Failure", "NUMERIC_MISMATCH")])
        skipped = cases[("harness_fixture", "cpu.unsupported")].result
        self.assertEqual([type(r).__name__ for r in skipped], ["Skipped"])
        self.assertIn("never runs", skipped[0].message)
        rc, words = self.xmllint_junit(os.path.join(out, "junit.xml"))
        self.assertEqual(rc, 0, words)
        # The schema can say no: a testcase without its classname is refused.
        broken = os.path.join(self.tmp, "broken-junit.xml")
        with open(broken, "w") as f:
            f.write(read_text(os.path.join(out, "junit.xml")).replace('classname="harness_fixture" ', "", 1))
        rc, words = self.xmllint_junit(broken)
        self.assertNotEqual(rc, 0)
        self.assertIn("classname", words)
        suite = next(iter(xml))
        props = {prop.name: prop.value for prop in suite.properties()}
        self.assertRegex(props["fingerprint_id"], r"^[0-9a-f]{16}$")
        self.assertIn("fingerprint.cpu_model", props)
        self.assertEqual((suite.tests, suite.failures, suite.errors, suite.skipped), (5, 1, 1, 1))
        # Markdown: the counts, then each failing case on one line.
        md = read_text(os.path.join(out, "summary.md"))
        self.assertTrue(md.startswith("## pitfall: failing"))
        failing_lines = [line for line in md.splitlines()
                         if line.startswith("- `pitfall.cpu.harness_fixture.") and "**" in line]
        self.assertEqual(len(failing_lines), 2, md)
        # The fixture's oom is marked a prediction: listed apart, after the failures.
        self.assertIn("### Predictions", md)
        self.assertIn("- `pitfall.cpu.harness_fixture.oom`", md.split("### Predictions", 1)[1])
        self.assertIn("**CRASH**", md)
        self.assertIn("**NUMERIC_MISMATCH**", md)
        # HTML: one file, nothing fetched from elsewhere, the parts a person looks for.
        html = read_text(os.path.join(out, "report.html"))
        for part in ('id="fingerprint"', 'id="verdict-grid"', 'id="chart-sample-times"', 'id="chart-process-times"',
                     'id="chart-ratios"', 'id="chart-memory"', "<svg",
                     '<details class="case" id="case-cpu-harness_fixture-segv"'):
            self.assertIn(part, html)
        for remote in ("<script", "<link", "@import", "src=\"http", "url("):
            self.assertNotIn(remote, html)
        # `pitfall report` renders the same run again, to a file or standard output.
        again = os.path.join(self.tmp, "again.md")
        r = self.pitfall("report", out, "--format", "markdown", "--out", again)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_text(again).splitlines()[:3], md.splitlines()[:3])

    def test_markup_from_a_library_renders_as_text(self):
        out = self.run_dir()
        hostile = "<script>alert(1)</script>&\"'"
        p = self.pitfall("run", "--backend", "cpu", "--variant", "ok", "--out", out,
                         env=dict(os.environ, PITFALL_INJECT="outcome:cpu.harness_fixture.ok:" + hostile))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        html = read_text(os.path.join(out, "report.html"))
        self.assertNotIn("<script", html)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;", html)
        cases, _ = self.junit(out)  # still well-formed XML, and still valid
        rc, words = self.xmllint_junit(os.path.join(out, "junit.xml"))
        self.assertEqual(rc, 0, words)
        failure = cases[("harness_fixture", "cpu.ok")].result[0]
        self.assertIn("<script>alert(1)</script>", failure.message)  # the parser gives the text back
        self.assertNotIn("<script", read_text(os.path.join(out, "summary.md")))

    def test_a_run_cut_short_then_resumed(self):
        out, path, lines = self.finished_two_case_run()
        os.remove(os.path.join(out, "summary.json"))  # a killed run writes none (nor its seal)
        with open(path, "w") as f:  # the run died while the last case ran: started, no result
            f.writelines(lines[:-1])
        r = self.pitfall("report", out, "--format", "json", "--out", os.path.join(out, "report.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = self.validate_report(out)
        self.assertFalse(doc["run"]["complete"])
        self.assertEqual(doc["crashed_mid_way"], ["cpu.harness_fixture.unsupported"])
        self.assertEqual(doc["counts"], {"PASS": 1, "NOT_RUN": 1})
        r = self.pitfall("report", out, "--format", "junit", "--out", os.path.join(out, "junit.xml"))
        cases, _ = self.junit(out)
        lost = cases[("harness_fixture", "cpu.unsupported")].result
        self.assertEqual([(type(x).__name__, x.type) for x in lost], [("Error", "NOT_RUN")])
        p = self.pitfall("run", "--resume", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        doc = self.validate_report(out)
        self.assertTrue(doc["run"]["complete"])
        self.assertEqual(doc["run"]["resumed"], 1)
        self.assertEqual(doc["crashed_mid_way"], [])

    def test_merge_puts_runs_side_by_side_and_says_what_differs(self):
        a, b = self.run_dir("a"), self.run_dir("b")
        for out, env in ((a, {}), (b, {"PITFALL_INJECT": "outcome:cpu.harness_fixture.ok:cudaErrorLaunchFailure"})):
            self.pitfall("run", "--variant", "ok,unsupported", "--backend", "cpu", "--out", out, "--samples", "1",
                         env=dict(os.environ, **env))
        md_path, html_path = os.path.join(self.tmp, "matrix.md"), os.path.join(self.tmp, "matrix.html")
        r = self.pitfall("report", "--merge", a, b, "--format", "markdown", "--out", md_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        md = read_text(md_path)
        self.assertIn("2 cells, 2 cases, 1 differ", md)
        differs = md.split("### What differs between cells")[1].strip().splitlines()
        self.assertEqual(len(differs), 1, md)
        self.assertTrue(differs[0].startswith("- `cpu.harness_fixture.ok`"), differs[0])
        self.assertIn("PASS (ok)", differs[0])
        self.assertIn("FAIL (cudaErrorLaunchFailure@compute)", differs[0])
        r = self.pitfall("report", "--merge", a, b, "--out", html_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        html = read_text(html_path)
        self.assertIn('id="matrix"', html)
        self.assertEqual(html.count('<tr class="differs">'), 1)
        self.assertNotIn("<script", html)
        # A merge needs two runs, and is HTML or Markdown.
        self.assertEqual(self.pitfall("report", "--merge", a).returncode, 2)
        r = self.pitfall("report", "--merge", a, b, "--format", "json")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--format json: a merged report is JSON for fleet node folders only", r.stderr)
        r = self.pitfall("report", "--merge", a, b, "--format", "junit")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--format junit: a merged report is html or markdown", r.stderr)

    def test_merge_of_fleet_node_folders_names_the_node_that_differs(self):
        """Node folders as `pitfall fleet run` lays them out (node.json, doctor.json, run/): three
        nodes ran on this machine (one fingerprint group), n3 with a planted failure; n4 never
        ran (its node went down)."""
        nodes = os.path.join(self.tmp, "fleet", "nodes")
        inject = {"PITFALL_INJECT": "outcome:cpu.harness_fixture.ok:cudaErrorLaunchFailure"}
        for name, env in (("n1", {}), ("n2", {}), ("n3", inject), ("n4", None)):
            folder = os.path.join(nodes, name)
            os.makedirs(folder)
            record = {"schema": "pitfall.fleet-node/1", "node": name, "outcome": "ran",
                      "engine": "slurm", "job_id": f"77_{name[1]}", "array_task": int(name[1]),
                      "run_exit": 0, "elapsed_s": 3.5, "a_field_from_later": [1, {"x": None}]}
            if env is None:
                record.update(outcome="node_down", slurm_state="NODE_FAIL", reason="Not responding",
                              message="the node went down before the task started")
            else:
                r = self.pitfall("run", "--variant", "ok,unsupported", "--backend", "cpu", "--samples", "1",
                                 "--out", os.path.join(folder, "run"), env=dict(os.environ, **env))
                self.assertIn(r.returncode, (0, 1), r.stderr)
            self.write_json(os.path.join(folder, "node.json"), record)
        doctor = subprocess.run([BIN, "doctor", "--json"], capture_output=True, text=True, timeout=60)
        headline = json.loads(doctor.stdout)["headline"]
        with open(os.path.join(nodes, "n1", "doctor.json"), "w") as f:
            f.write(doctor.stdout)
        folders = [os.path.join(nodes, n) for n in sorted(os.listdir(nodes))]
        md_path, html_path = os.path.join(self.tmp, "fleet.md"), os.path.join(self.tmp, "fleet.html")
        r = self.pitfall("report", "--merge", *folders, "--format", "markdown", "--out", md_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        md = read_text(md_path)
        lines = md.splitlines()
        self.assertEqual(lines[0], "## pitfall fleet: 4 nodes (3 ran), 1 fingerprint group, "
                                   "1 case differs within a group")
        which = md.split("### Which node differs")[1].split("### Nodes")[0]
        self.assertIn("`n3` differs from the other 2 nodes of its group in 1 case:\n\n"
                      "- `cpu.harness_fixture.ok`: **FAIL (cudaErrorLaunchFailure@compute)** here, "
                      "**PASS (ok)** on most of the group\n", which)
        self.assertEqual(which.count(" differs from "), 1, which)
        self.assertNotIn("n4", which)
        row = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| `n")}
        self.assertEqual(sorted(row), ["`n1`", "`n2`", "`n3`", "`n4`"])
        self.assertIn("node\\_down (NODE\\_FAIL, reason: Not responding)", row["`n4`"])
        # The headline as far as Markdown leaves it unescaped ("no NVIDIA driver " here).
        self.assertIn(re.split(r"[^A-Za-z0-9 ]", headline)[0] if headline else "CUDA work can run here",
                      row["`n1`"])
        self.assertIn("| 1 FAIL, 1 UNSUPPORTED |", row["`n3`"])
        self.assertNotIn("### Between groups", md)  # one group
        # The same report as data: what `pitfall fleet` takes its exit status from.
        json_path = os.path.join(self.tmp, "fleet-report.json")
        r = self.pitfall("report", "--merge", *folders, "--format", "json", "--out", json_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(json_path) as f:
            doc = json.load(f)
        import jsonschema  # python3-jsonschema, installed by ci/setup.sh
        with open(os.path.join(Schema.SCHEMA_DIR, "fleet-report.schema.json")) as f:
            jsonschema.Draft202012Validator(json.load(f)).validate(doc)
        self.assertEqual(doc["title"], lines[0].removeprefix("## pitfall fleet: "))
        self.assertEqual((doc["node_count"], doc["ran_count"], doc["differing_within_groups"]), (4, 3, 1))
        self.assertEqual([n["node"] for n in doc["nodes"]], ["n1", "n2", "n3", "n4"])
        self.assertEqual(doc["nodes"][3]["outcome"], "node_down")
        self.assertIsNone(doc["nodes"][3]["fingerprint"])
        self.assertEqual(doc["nodes"][2]["verdicts"], {"FAIL": 1, "UNSUPPORTED": 1})
        [group] = doc["groups"]
        self.assertEqual(group["nodes"], ["n1", "n2", "n3"])
        self.assertEqual(group["differing_cases"], ["cpu.harness_fixture.ok"])
        self.assertEqual(group["odd_nodes"], [{"node": "n3", "cases": [
            {"case": "cpu.harness_fixture.ok", "here": "FAIL (cudaErrorLaunchFailure@compute)",
             "majority": "PASS (ok)", "tied": []}]}])
        self.assertIsNone(doc["majority_fingerprint"])
        self.assertEqual((doc["fingerprint_outliers"], doc["between_groups"]), ([], []))
        by_case = {c["case"]: c["by_node"] for c in doc["cases"]}
        self.assertEqual(by_case["cpu.harness_fixture.ok"]["n3"], "FAIL (cudaErrorLaunchFailure@compute)")
        self.assertEqual(sorted(by_case["cpu.harness_fixture.ok"]), ["n1", "n2", "n3"])
        r = self.pitfall("report", "--merge", *folders, "--out", html_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        html = read_text(html_path)
        self.assertIn('<table class="grid" id="nodes">', html)
        self.assertEqual(html.count('<tr class="differs">'), 1)
        self.assertIn("<code>n3</code> differs from the other 2 nodes", html)
        # A node folder merged with a plain run folder is refused, naming both.
        plain = os.path.join(nodes, "n1", "run")
        r = self.pitfall("report", "--merge", folders[1], plain, "--format", "markdown")
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{folders[1]} is a fleet node folder (node.json) but {plain} is not", r.stderr)

    def chromium(self, *args, page):
        """Headless Chromium (Debian's package) on a local page: (exit status, stdout, console lines)."""
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        self.assertTrue(browser, "chromium is not installed: ci/setup.sh installs it")
        p = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--enable-logging=stderr", "--v=0", *args, "file://" + page],
                           capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, [line for line in p.stderr.splitlines() if ":CONSOLE" in line]

    def test_html_as_a_person_sees_it_in_headless_chromium(self):
        out = self.run_dir()
        hostile = "<script>document.title='owned'</script>"
        self.pitfall("run", "--backend", "cpu", "--variant", "ok,oom,segv,unsupported", "--out", out,
                     "--samples", "3", env=dict(os.environ, PITFALL_DEVICE_MEMORY_LIMIT="64M",
                                                PITFALL_INJECT="outcome:cpu.harness_fixture.oom:" + hostile))
        page = os.path.join(out, "report.html")
        rc, dom, console = self.chromium("--dump-dom", page=page)
        self.assertEqual(rc, 0)
        self.assertEqual(console, [])  # no console errors (nor any other message)
        self.assertIn('id="verdict-grid"', dom)
        # One folded block a case, and one a finding of the machine's diagnosis.
        self.assertEqual(dom.count("<details") - dom.count('<details class="finding'), 4)
        self.assertIn('<section id="machine">', dom)
        # Sample times, process times, the declared ratio (ok_over_ok) and memory, each its own chart.
        self.assertEqual(dom.count("<svg"), 4)
        for chart in ("chart-sample-times", "chart-process-times", "chart-ratios", "chart-memory"):
            self.assertIn(f'id="{chart}"', dom)
        self.assertIn("No GPU case ran. This run selected no CUDA case.", dom)  # and no GPU series drawn
        self.assertNotIn("GPU (CUDA)", dom)
        self.assertNotIn("<script", dom)  # the error name stayed text: no script element in the page
        self.assertIn("&lt;script&gt;document.title='owned'&lt;/script&gt;", dom)
        self.assertNotIn("<title>owned</title>", dom)
        # The console check can fail: a page that logs an error is caught.
        bad = os.path.join(self.tmp, "console-error.html")
        with open(bad, "w") as f:
            f.write("<!DOCTYPE html><html><body><script>console.error('seen')</script></body></html>")
        _, _, console = self.chromium("--dump-dom", page=bad)
        self.assertTrue(any("seen" in line for line in console), console)
        # A screenshot, kept where CTest's artifacts go.
        shots = os.environ.get("PITFALL_ARTIFACTS") or self.tmp
        os.makedirs(shots, exist_ok=True)
        shot = os.path.join(shots, "report-screenshot.png")
        if os.path.exists(shot):
            os.unlink(shot)
        rc, _, _ = self.chromium("--window-size=1280,1400", f"--screenshot={shot}", page=page)
        self.assertEqual(rc, 0)
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(shot), 10000)

    def test_bad_report_requests_exit_2_naming_what(self):
        missing = os.path.join(self.tmp, "no-such-run")
        r = self.pitfall("report", missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn(missing, r.stderr)
        r = self.pitfall("report", missing, "--format", "pdf")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--format pdf", r.stderr)


class BrokenBaseline(unittest.TestCase):
    """A baseline broken on purpose, in a temporary copy of expected/, turns the case's own
    CTest test red; the intact copy keeps it green. Run by CTest with PITFALL_CTEST and
    PITFALL_BUILD_DIR set."""

    CASE = "pitfall.cpu.float64_inputs.reproduce"

    def ctest(self, expected):
        env = dict(os.environ, PITFALL_EXPECTED=expected)
        return subprocess.run([os.environ["PITFALL_CTEST"], "--test-dir", os.environ["PITFALL_BUILD_DIR"],
                               "-R", "^" + self.CASE.replace(".", r"\.") + "$", "--output-on-failure"],
                              capture_output=True, text=True, env=env, timeout=280)

    def test_breaking_a_baseline_turns_the_test_red(self):
        self.assertTrue(os.environ.get("PITFALL_CTEST") and os.environ.get("PITFALL_BUILD_DIR"), "run through CTest")
        tmp = tempfile.mkdtemp(prefix="pitfall-broken-")
        try:
            expected = os.path.join(tmp, "expected")
            shutil.copytree(os.environ["PITFALL_REAL_EXPECTED"], expected)
            ok = self.ctest(expected)
            self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
            self.assertIn("100% tests passed, 0 tests failed out of 1", ok.stdout)
            path = os.path.join(expected, "host", "float64_inputs.json")
            with open(path) as f:
                doc = json.load(f)
            # The case trains in float64 and succeeds; the broken baseline says it runs out of memory.
            doc["cases"]["cpu.reproduce"]["outcome"] = {"status": "error", "library": "host",
                                                        "error": "std::bad_alloc", "stage": "alloc"}
            with open(path, "w") as f:
                json.dump(doc, f)
            red = self.ctest(expected)
            self.assertNotEqual(red.returncode, 0, red.stdout)
            self.assertIn("0% tests passed, 1 tests failed out of 1", red.stdout)
            self.assertRegex(red.stdout, r"failing:\n  cpu\.float64_inputs\.reproduce +FAIL +behaviour changed: "
                                         r"expected std::bad_alloc")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Interruption(FixtureTest):
    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}

    def wait_for_cases(self, out, n, limit=30):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                if len(records(out)) >= n:
                    return
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.05)
        self.fail(f"{n} cases did not finish in {limit} s")

    def test_sigkill_keeps_finished_cases_and_resume_completes(self):
        out = self.run_dir()
        # Two slow cases (each sleeping 1.5 s): kill during the second.
        env = dict(os.environ, PITFALL_FIXTURE_SLEEP_MS="1500")
        proc = subprocess.Popen([BIN, "run", "--variant", "ok,unsupported", "--out", out, "--index", INDEX,
                                 "--expected", self.expected, "--backend", "cpu", "--samples", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        self.wait_for_cases(out, 1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # The case in flight had its own process group; it must not run on as an orphan.
        time.sleep(0.3)
        self.assertEqual(cases_running(out), [], "a case outlived the harness killed with SIGKILL")
        finished = by_case(out)
        self.assertIn("cpu.harness_fixture.ok", finished)
        self.assertEqual(finished["cpu.harness_fixture.ok"]["verdict"], "PASS")
        p = self.pitfall("run", "--resume", out)  # the run's own selection, not all cases
        self.assertIn(p.returncode, (0,), p.stdout + p.stderr)
        self.assertIn("resuming: 1 cases already finished", p.stdout)
        after = records(out)
        self.assertEqual(sorted(r["case"] for r in after),
                         ["cpu.harness_fixture.ok", "cpu.harness_fixture.unsupported"])  # each once
        summary = json.load(open(os.path.join(out, "summary.json")))
        self.assertTrue(summary["complete"])
        self.assertEqual(summary["cases_finished"], 2)

    def test_replace_removes_the_old_runs_reports_before_the_first_case(self):
        out, _, _ = self.finished_two_case_run()
        reports = ["junit.xml", "report.html", "summary.md", "report.json", "summary.json"]
        for name in reports:
            self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        mine = os.path.join(out, "notes.txt")  # not pitfall's: kept
        with open(mine, "w") as f:
            f.write("mine\n")
        env = dict(os.environ, PITFALL_FIXTURE_SLEEP_MS="1500")
        proc = subprocess.Popen([BIN, "run", "--variant", "ok", "--out", out, "--replace", "--index", INDEX,
                                 "--expected", self.expected, "--backend", "cpu", "--samples", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        deadline = time.monotonic() + 30
        while not cases_running(out) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(cases_running(out), "the new run's case never started")
        os.killpg(proc.pid, signal.SIGKILL)  # killed before it wrote a report
        proc.wait()
        left = [name for name in reports if os.path.exists(os.path.join(out, name))]
        self.assertEqual(left, [], "the old run's reports sit beside the killed new run")
        self.assertEqual(records(out), [])  # the old records are gone too
        self.assertEqual(read_text(mine), "mine\n")

    def test_a_finished_run_cut_short_is_refused_by_its_seal(self):
        out, path, lines = self.finished_two_case_run()
        with open(path, "w") as f:  # its last record removed after it ended
            f.writelines(lines[:-1])
        for argv in (("run", "--resume", out), ("report", out)):
            p = self.pitfall(*argv)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("1 records of summary.json's seal are missing after line", p.stderr)

    def test_a_record_cut_short_is_dropped_and_resume_can_repeat(self):
        out, path, lines = self.finished_two_case_run()
        os.remove(os.path.join(out, "summary.json"))  # a killed run writes none (nor its seal)
        with open(path, "w") as f:  # a kill in the middle of writing the last record
            f.writelines(lines[:-1])
            f.write(lines[-1][: len(lines[-1]) // 2])
        for attempt in (1, 2):  # the second resume must read a clean file too
            p = self.pitfall("run", "--resume", out)
            self.assertEqual(p.returncode, 0, f"resume {attempt}: {p.stdout}{p.stderr}")
        self.assertEqual(sorted(by_case(out)), ["cpu.harness_fixture.ok", "cpu.harness_fixture.unsupported"])
        self.assertEqual(records(out, "run")[0]["options"]["samples"], 1)

    def test_resume_refuses_a_new_selection(self):
        out = self.run_dir()
        self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out)
        for flags in (("--variant", "segv"), ("--timing-correction", "none"), ("--timings", "record"),
                      ("--timing-level", "0.2")):
            p = self.pitfall("run", "--resume", out, *flags)
            self.assertEqual(p.returncode, 2, flags)
            self.assertIn("--resume completes a run as it was started", p.stderr)

    def test_resume_judges_times_as_the_run_was_started(self):
        out, path, lines = self.finished_two_case_run(extra=("--timings", "record", "--timing-correction", "bh",
                                                             "--timing-level", "0.01"))
        os.remove(os.path.join(out, "summary.json"))  # a killed run writes none (nor its seal)
        with open(path, "w") as f:  # the run died while the last case ran
            f.writelines(lines[:-1])
        p = self.pitfall("run", "--resume", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(path) as f:
            headers = [json.loads(x) for x in f if '"record":"resumed"' in x.replace(" ", "")]
        self.assertEqual(len(headers), 1)
        options = headers[0]["options"]
        self.assertEqual((options["timings"], options["timing_correction"], options["timing_level"]),
                         ("record", "bh", 0.01))

    def test_sigterm_also_exits_130(self):
        out = self.run_dir()
        proc = subprocess.Popen([BIN, "run", "--variant", "hang", "--backend", "cpu", "--out", out,
                                 "--index", INDEX, "--expected", self.expected, "--timeout-scale", "20"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(out, "logs", "cpu.harness_fixture.hang.log")):
            self.assertLess(time.monotonic(), deadline, "the hang case never started")
            time.sleep(0.05)
        time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 130)
        self.assertLess(time.monotonic() - started, 5)  # at once, not at the case's timeout

    def test_sigint_ends_the_running_case_and_exits_130(self):
        out = self.run_dir()
        proc = subprocess.Popen([BIN, "run", "--variant", "ok,hang", "--backend", "cpu", "--out", out,
                                 "--index", INDEX, "--expected", self.expected, "--timeout-scale", "20"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.wait_for_cases(out, 1)
        time.sleep(0.5)  # inside the hang case now
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 130, stdout)
        self.assertLess(time.monotonic() - started, 10)
        self.assertIn("interrupted", stdout)
        self.assertEqual(list(by_case(out)), ["cpu.harness_fixture.ok"])
        self.assertEqual([r["case"] for r in records(out, "interrupted")], ["cpu.harness_fixture.hang"])


class BadInput(FixtureTest):
    """Each bad input: exit 2 and one clear line that names the thing."""

    def assertBad(self, p, *needles):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        line = p.stderr.strip()
        self.assertEqual(len(line.splitlines()), 1, line)
        for n in needles:
            self.assertIn(n, line)

    def test_unknown_names(self):
        self.assertBad(self.pitfall("run", "--scenario", "nope"), "unknown scenario 'nope'")
        self.assertBad(self.pitfall("run", "--backend", "rocm"), "unknown backend 'rocm'")
        self.assertBad(self.pitfall("run", "--variant", "nope"), "unknown variant 'nope'")
        self.assertBad(self.pitfall("list", "--label", "nope"), "unknown label 'nope'")

    def test_unknown_flag_and_command(self):
        self.assertBad(self.pitfall("run", "--frobnicate"), "unknown option '--frobnicate'")
        self.assertBad(self.pitfall("frobnicate"), "unknown command 'frobnicate'")
        self.assertBad(self.pitfall("run", "--samples", "4"), "--samples 4")

    def test_malformed_scenario_json(self):
        broken = os.path.join(self.tmp, "scenario.json")
        with open(broken, "w") as f:
            f.write('{\n  "name": "harness_fixture",\n  "variants": [\n    {"name": "ok",}\n  ]\n}\n')
        index = os.path.join(self.tmp, "index.json")
        self.write_json(index, {"scenarios": [{"name": "x", "program": PROGRAM, "manifest": broken}]})
        self.assertBad(self.pitfall("list", index=index), broken, "line 4, column")

    def test_scenario_json_with_a_bad_field(self):
        manifest = json.load(open(MANIFEST))
        manifest["variants"][1]["kind"] = "sometimes"
        bad = os.path.join(self.tmp, "scenario.json")
        self.write_json(bad, manifest)
        index = os.path.join(self.tmp, "index.json")
        self.write_json(index, {"scenarios": [{"name": "x", "program": PROGRAM, "manifest": bad}]})
        self.assertBad(self.pitfall("list", index=index), bad, "variants[1].kind")

    def test_malformed_baseline(self):
        path = os.path.join(self.expected, "any", "harness_fixture.json")
        with open(path, "w") as f:
            f.write('{"schema": "pitfall.expected/1", "cases": {')
        self.assertBad(self.pitfall("run", "--out", self.run_dir()), path, "malformed JSON")
        self.write_json(path, {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                               "cases": {"cpu.ok": {"outcome": {"status": "maybe"},
                                                    "provenance": {"kind": "observed"}}}})
        self.assertBad(self.pitfall("run", "--out", self.run_dir()), path, "/cases/cpu.ok/outcome/status")
        self.write_json(path, {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                               "cases": {"cpu.nope": {"outcome": {"status": "ok"},
                                                      "provenance": {"kind": "observed"}}}})
        self.assertBad(self.pitfall("run", "--out", self.run_dir()), path, "/cases/cpu.nope")
        self.assertFalse(os.path.exists(self.run_dir()), "nothing is written for bad input")

    def test_unwritable_output_folder(self):
        blocker = os.path.join(self.tmp, "file")
        open(blocker, "w").close()
        self.assertBad(self.pitfall("run", "--out", os.path.join(blocker, "run")), "--out", blocker)

    def test_existing_run_is_not_overwritten(self):
        out = self.run_dir()
        self.assertEqual(self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out).returncode, 0)
        self.assertBad(self.pitfall("run", "--variant", "ok", "--out", out), "already holds a run")
        keep = os.path.join(out, "notes.txt")  # not the run's: --replace must leave it
        open(keep, "w").close()
        self.assertEqual(self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out,
                                      "--replace").returncode, 0)
        self.assertTrue(os.path.exists(keep))
        self.assertEqual(len(records(out, "run")), 1)

    def test_scenario_program_rejects_bad_params(self):
        for args, needle in ((["--param", "sleep_ms=soon"], "sleep_ms"), (["--param", "nope=1"], "nope"),
                             (["--param", "samples=2"], "samples"), (["--bogus"], "--bogus")):
            p = subprocess.run([PROGRAM, "--backend", "cpu", "--variant", "ok", "--out",
                                os.path.join(self.tmp, "r.json"), *args], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(needle, p.stderr)
        env = dict(os.environ, PITFALL_DEVICE_MEMORY_LIMIT="lots")
        p = subprocess.run([PROGRAM, "--backend", "cpu", "--variant", "ok", "--out",
                            os.path.join(self.tmp, "r.json")], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("PITFALL_DEVICE_MEMORY_LIMIT='lots'", p.stderr)


class Listing(FixtureTest):
    def test_list_text_and_json(self):
        p = self.pitfall("list")
        self.assertEqual(p.returncode, 0)
        self.assertIn("pitfall.cpu.harness_fixture.segv", p.stdout)
        self.assertIn("cpu,harness_fixture,harness,reproduce,fixture", p.stdout)
        cases = json.loads(self.pitfall("list", "--json").stdout)
        self.assertEqual(len(cases), 9)  # 8 cpu variants + ok on cuda; child_role is a helper
        self.assertNotIn("child_role", p.stdout)
        ok_cuda = next(c for c in cases if c["test"] == "pitfall.cuda.harness_fixture.ok")
        self.assertIn("gpu", ok_cuda["labels"])

    def test_program_lists_its_variants(self):
        p = subprocess.run([PROGRAM, "--list"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        for v in ("ok", "segv", "hang", "exit3", "sleep_ms"):
            self.assertIn(v, p.stdout)



class Cli(FixtureTest):
    """The command line itself: help per command, --opt=value, "did you mean", bad values."""

    COMMANDS = ("list", "run", "compare", "bless", "report", "matrix", "help", "version")
    RUN_OPTIONS = ("--out", "--resume", "--replace", "--profile", "--samples", "--timeout-scale",
                   "--timing-floor", "--remeasure-pause", "--skip-code", "--scenario", "--backend",
                   "--variant", "--label", "--index", "--expected")

    def bare(self, *args, **kw):
        """The binary with exactly these arguments (no --index/--expected added)."""
        return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, **kw)

    def assertBad(self, p, *needles):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        for n in needles:
            self.assertIn(n, p.stderr)

    def test_help_lists_the_commands(self):
        for args in (["help"], ["--help"], ["-h"]):
            p = self.bare(*args)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(p.stdout.startswith("usage: pitfall"), p.stdout[:200])
            for command in self.COMMANDS:
                self.assertRegex(p.stdout, rf"\n  {command} ")
            self.assertIn("exit status:", p.stdout)
        p = self.bare()  # no command at all: the same text, as an error
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage: pitfall", p.stderr)

    def test_help_per_command_with_examples(self):
        for command in ("list", "run", "compare", "bless", "report", "matrix"):
            by_help = self.bare("help", command)
            self.assertEqual(by_help.returncode, 0, by_help.stderr)
            self.assertTrue(by_help.stdout.startswith(f"usage: pitfall {command}"), by_help.stdout[:200])
            examples = by_help.stdout.split("examples:\n", 1)[1].splitlines()
            self.assertGreaterEqual(sum(line.startswith(f"  pitfall {command}") for line in examples), 2,
                                    by_help.stdout)
            if command != "matrix":  # `pitfall matrix --help` is the driver's own help
                by_flag = self.bare(command, "--help")
                self.assertEqual(by_flag.returncode, 0, by_flag.stderr)
                self.assertEqual(by_flag.stdout, by_help.stdout)
        run_help = self.bare("run", "--help").stdout
        for option in self.RUN_OPTIONS:
            self.assertRegex(run_help, rf"\n  {option}[ =]")
        self.assertBad(self.bare("help", "rn"), "unknown command 'rn'", "did you mean 'run'?")

    def test_version(self):
        for args in (["version"], ["--version"]):
            p = self.bare(*args)
            self.assertEqual(p.returncode, 0)
            self.assertRegex(p.stdout, r"^pitfall \d+\.\d+\.\d+\n$")

    def test_opt_equals_value_is_opt_space_value(self):
        spaced = self.pitfall("list", "--json", "--variant", "ok", "--backend", "cpu")
        joined = self.bare("list", "--json", "--variant=ok", "--backend=cpu", f"--index={INDEX}",
                           f"--expected={self.expected}")
        self.assertEqual(joined.returncode, 0, joined.stderr)
        self.assertEqual(joined.stdout, spaced.stdout)
        self.assertEqual([c["test"] for c in json.loads(joined.stdout)], ["pitfall.cpu.harness_fixture.ok"])
        # Filters are repeatable and comma-separated, in either spelling.
        p = self.pitfall("list", "--json", "--backend=cpu", "--variant=ok,segv", "--variant", "hang")
        self.assertEqual(sorted(c["variant"] for c in json.loads(p.stdout)), ["hang", "ok", "segv"])
        out = self.run_dir()
        p = self.pitfall("run", "--variant=ok", "--backend=cpu", f"--out={out}", "--samples=1")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(records(out, "run")[0]["options"]["samples"], 1)

    def test_did_you_mean(self):
        self.assertBad(self.pitfall("lst"), "unknown command 'lst'", "did you mean 'list'?")
        self.assertBad(self.pitfall("run", "--sample", "3"),
                       "unknown option '--sample' for `pitfall run`", "did you mean '--samples'?")
        self.assertBad(self.pitfall("list", "--jsn"), "unknown option '--jsn'", "did you mean '--json'?")
        self.assertBad(self.pitfall("bless", "r", "--dryrun"), "did you mean '--dry-run'?")
        self.assertBad(self.bare("--verison"), "unknown option '--verison'", "did you mean '--version'?")
        self.assertBad(self.pitfall("list", "--scenario", "harness_fixtur"),
                       "unknown scenario 'harness_fixtur'", "did you mean 'harness_fixture'?")
        self.assertBad(self.pitfall("list", "--variant", "hnag"), "unknown variant 'hnag'", "did you mean 'hang'?")
        self.assertBad(self.pitfall("list", "--label", "fixtur"), "unknown label 'fixtur'", "did you mean 'fixture'?")
        self.assertBad(self.pitfall("run", "--backend", "cdua"), "unknown backend 'cdua'", "did you mean 'cuda'?")
        # Nothing near: no guess, still the list of known names.
        p = self.pitfall("list", "--scenario", "zzzz")
        self.assertBad(p, "unknown scenario 'zzzz' (known: harness_fixture)")
        self.assertNotIn("did you mean", p.stderr)
        self.assertBad(self.pitfall("run", "stray"), "unexpected argument 'stray' for `pitfall run`")

    def test_bad_values_name_the_flag(self):
        for args, needle in ((["run", "--samples", "4"], "--samples 4: expected an odd number"),
                             (["run", "--samples=0"], "--samples 0"),
                             (["run", "--timeout-scale", "x"], "--timeout-scale x: expected a positive number"),
                             (["run", "--timeout-scale", "-1"], "--timeout-scale -1"),
                             (["run", "--timing-floor", "1.5"], "--timing-floor 1.5: expected a fraction"),
                             (["run", "--remeasure-pause", "601"], "--remeasure-pause 601"),
                             (["run", "--skip-code", "300"], "--skip-code 300: expected 0..255"),
                             (["compare", "a", "b", "--timing-floor", "lots"], "--timing-floor lots"),
                             (["report", "a", "--format=pdf"], "--format pdf"),
                             (["run", "--out"], "--out")):
            with self.subTest(args=args):
                self.assertBad(self.bare(args[0], "--index", INDEX, "--expected", self.expected, *args[1:]),
                               needle)
        self.assertFalse(os.path.exists(self.run_dir()))


class Locate(FixtureTest):
    """No paths compiled in: the index beside the binary (build tree or install), the paths it
    names relative to itself, the environment's overrides, and a clear error when none is found."""

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if k not in ("PITFALL_INDEX", "PITFALL_EXPECTED", "PITFALL_MATRIX_DRIVER", "PITFALL_FLEET_DRIVER")}
        env.update(extra)
        return env

    def copied_binary(self):
        """BIN copied into <tmp>/prefix/bin/, with nothing beside it."""
        bindir = os.path.join(self.tmp, "prefix", "bin")
        os.makedirs(bindir)
        shutil.copy2(BIN, bindir)
        return os.path.join(bindir, os.path.basename(BIN))

    def test_the_build_finds_its_own_index_beside_the_binary(self):
        real_index = os.environ.get("PITFALL_REAL_INDEX", "")
        self.assertTrue(real_index, "run through CTest: PITFALL_REAL_INDEX unset")
        # build/<preset>/bin/pitfall -> build/<preset>/pitfall-index.json
        self.assertEqual(os.path.realpath(os.path.join(os.path.dirname(BIN), "..", "pitfall-index.json")),
                         os.path.realpath(real_index))
        listed = subprocess.run([BIN, "list", "--json"], capture_output=True, text=True, env=self.env(),
                                cwd=self.tmp, timeout=60)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        cpu = [c for c in json.loads(listed.stdout) if c["backend"] == "cpu"]
        if not cpu:
            self.skipTest("this build has no scenario with a CPU case")
        out = self.run_dir()
        p = subprocess.run([BIN, "run", "--scenario", cpu[0]["scenario"], "--variant", cpu[0]["variant"],
                            "--backend", "cpu", "--samples", "1", "--out", out],
                           capture_output=True, text=True, env=self.env(), cwd=self.tmp, timeout=300)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        header = records(out, "run")[0]
        self.assertEqual(os.path.realpath(header["index"]), os.path.realpath(real_index))
        # The baselines came from the index's paths.expected (the source tree's expected/).
        self.assertIsNotNone(header["profile"]["name"], header["profile"])
        self.assertEqual([r["case"] for r in records(out)], [cpu[0]["test"][len("pitfall."):]])

    def test_a_copied_binary_without_an_index_says_where_it_looked(self):
        pitfall = self.copied_binary()
        for args in (["list"], ["run", "--variant", "ok"], ["bless", "somewhere"], ["matrix", "list"]):
            with self.subTest(args=args):
                p = subprocess.run([pitfall, *args], capture_output=True, text=True, env=self.env(),
                                   timeout=60)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                prefix = os.path.join(self.tmp, "prefix")
                for needle in ("no scenario index", "--index FILE", "$PITFALL_INDEX",
                               os.path.join(prefix, "pitfall-index.json"),
                               os.path.join(prefix, "share", "pitfall", "pitfall-index.json")):
                    self.assertIn(needle, p.stderr)
        # compare and report read only their run folders: no index needed.
        p = subprocess.run([pitfall, "report", self.run_dir()], capture_output=True, text=True,
                           env=self.env(), timeout=60)
        self.assertNotIn("no scenario index", p.stderr)

    def test_an_installed_layout_with_paths_relative_to_the_index(self):
        pitfall = self.copied_binary()
        share = os.path.join(self.tmp, "prefix", "share", "pitfall")
        os.makedirs(os.path.join(share, "scenarios"))
        shutil.copy2(MANIFEST, os.path.join(share, "scenarios", "harness_fixture.json"))
        shutil.copytree(self.expected, os.path.join(share, "baselines"))
        self.write_baseline({"cpu.ok": {"outcome": {"status": "ok"}}})
        shutil.copy2(os.path.join(self.expected, "any", "harness_fixture.json"),
                     os.path.join(share, "baselines", "any"))
        index = {"schema": "pitfall.index/1",
                 "paths": {"expected": "baselines", "runs": "../../runs"},
                 "scenarios": [{"name": "harness_fixture", "program": PROGRAM,
                                "manifest": "scenarios/harness_fixture.json"}]}
        self.write_json(os.path.join(share, "pitfall-index.json"), index)
        run = lambda *args, **env: subprocess.run([pitfall, *args], capture_output=True, text=True,
                                                  env=self.env(**env), cwd=self.tmp, timeout=60)
        listed = run("list", "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertEqual(len(json.loads(listed.stdout)), 9)
        # No probe named and none beside the copied binary: said, exit 2.
        p = run("run", "--variant", "ok", "--backend", "cpu")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("no environment probe", p.stderr)
        self.assertIn("paths.probe", p.stderr)
        index["paths"]["probe"] = os.path.join(os.path.dirname(BIN), "pitfall-probe")
        self.write_json(os.path.join(share, "pitfall-index.json"), index)
        p = run("run", "--variant", "ok", "--backend", "cpu", "--samples", "1")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        made = os.listdir(os.path.join(self.tmp, "prefix", "runs"))  # paths.runs, from the index's folder
        self.assertEqual(len(made), 1, made)
        self.assertEqual(by_case(os.path.join(self.tmp, "prefix", "runs", made[0]))
                         ["cpu.harness_fixture.ok"]["verdict"], "PASS")  # judged by baselines/
        # The environment overrides the index: an empty baselines folder judges nothing.
        empty = os.path.join(self.tmp, "empty-expected")
        shutil.copytree(os.path.join(share, "baselines"), empty)
        os.unlink(os.path.join(empty, "any", "harness_fixture.json"))
        out = self.run_dir()
        p = run("run", "--variant", "ok", "--backend", "cpu", "--samples", "1", "--out", out,
                PITFALL_EXPECTED=empty)
        self.assertEqual(by_case(out)["cpu.harness_fixture.ok"]["verdict"], "NO_BASELINE", p.stdout)
        # A malformed "paths" names the file and the field.
        index["paths"]["runs"] = 7
        self.write_json(os.path.join(share, "pitfall-index.json"), index)
        p = run("list")
        self.assertEqual(p.returncode, 2)
        self.assertIn("field 'paths.runs'", p.stderr)

    def test_matrix_passes_its_arguments_through(self):
        driver = os.path.join(self.tmp, "driver.py")
        with open(driver, "w") as f:
            f.write("import json, os, sys\n"
                    "print(json.dumps({'argv': sys.argv[1:], 'binary': os.environ.get('PITFALL_BINARY')}))\n"
                    "sys.exit(3)\n")
        args = ["run", "--cells", "a,b", "--help", "list", "--index", "x", "-j", "2"]
        p = subprocess.run([BIN, "matrix", *args], capture_output=True, text=True,
                           env=self.env(PITFALL_MATRIX_DRIVER=driver), timeout=60)
        self.assertEqual(p.returncode, 3, p.stderr)  # the driver's own exit status
        seen = json.loads(p.stdout)
        self.assertEqual(seen["argv"], args)
        self.assertEqual(os.path.realpath(seen["binary"]), os.path.realpath(BIN))
        # Without the variable: the build's index names tools/pitfall-matrix, whose help this is.
        p = subprocess.run([BIN, "matrix", "--help"], capture_output=True, text=True, env=self.env(),
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("usage: pitfall matrix", p.stdout)

    def test_fleet_passes_its_arguments_through(self):
        driver = os.path.join(self.tmp, "fleet-driver.py")
        with open(driver, "w") as f:
            f.write("import json, sys\nprint(json.dumps(sys.argv[1:]))\nsys.exit(4)\n")
        args = ["run", "--engine", "slurm", "--nodelist", "gpu[1-2]", "--help", "--index", "x"]
        p = subprocess.run([BIN, "fleet", *args], capture_output=True, text=True,
                           env=self.env(PITFALL_FLEET_DRIVER=driver), timeout=60)
        self.assertEqual(p.returncode, 4, p.stderr)
        self.assertEqual(json.loads(p.stdout), args)
        p = subprocess.run([BIN, "fleet", "--help"], capture_output=True, text=True, env=self.env(),
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("usage: pitfall fleet", p.stdout)


if __name__ == "__main__":
    unittest.main()
