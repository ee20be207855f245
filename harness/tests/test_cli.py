"""CLI tests: the real `pitfall` binary, real child processes, the fixture scenario.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN and the fixture paths.
"""
import json
import os
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
    with open(os.path.join(run_dir, "results.jsonl")) as f:
        return [r for r in (json.loads(line) for line in f if line.strip()) if r["record"] == kind]


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


def by_case(run_dir):
    return {r["case"]: r for r in records(run_dir)}


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
        prov = {"kind": "observed", "date": "2026-11-22", "fingerprint": "test"}
        doc = {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
               "cases": {k: dict(v, provenance=prov) for k, v in cases.items()}}
        self.write_json(os.path.join(self.expected, "any", "harness_fixture.json"), doc)

    def pitfall(self, *args, index=None, expected=None, **kw):
        cmd = [BIN, *args, "--index", index or INDEX, "--expected", expected or self.expected]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)

    def run_dir(self, name="run"):
        return os.path.join(self.tmp, name)


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
        self.assertRegex(p.stdout, r"\[ ?\d/\d\] pitfall\.cpu\.harness_fixture\.\w+ +\w+ +[\d.]+ s +ETA \d+:\d\d")
        # Peak RSS is measured for each child.
        self.assertGreater(cases["cpu.harness_fixture.ok"]["process"]["peak_rss_bytes"], 0)

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

    def test_a_record_cut_short_is_dropped_and_resume_can_repeat(self):
        out = self.run_dir()
        self.assertEqual(self.pitfall("run", "--variant", "ok,unsupported", "--backend", "cpu", "--out", out,
                                      "--samples", "1").returncode, 0)
        path = os.path.join(out, "results.jsonl")
        with open(path) as f:
            lines = f.readlines()
        self.assertEqual(json.loads(lines[-1])["case"], "cpu.harness_fixture.unsupported")
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
        p = self.pitfall("run", "--resume", out, "--variant", "segv")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--resume completes a run as it was started", p.stderr)

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
        self.assertBad(self.pitfall("run", "--out", self.run_dir()), path, "cases.cpu.ok.outcome.status")
        self.write_json(path, {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                               "cases": {"cpu.nope": {"outcome": {"status": "ok"},
                                                      "provenance": {"kind": "observed"}}}})
        self.assertBad(self.pitfall("run", "--out", self.run_dir()), path, "cases.cpu.nope")
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


if __name__ == "__main__":
    unittest.main()
