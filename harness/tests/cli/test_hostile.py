"""Hostile scenario programs (harness/tests/hostile) against the real `pitfall`: each misbehaves
in one way; each must end in a verdict with its reason, the run must go on to the next case, no
process of the case may be left anywhere, and the reports must still match their schema. Then
the kill test: `pitfall` itself SIGKILLed at random moments, again and again.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN and PITFALL_HOSTILE_INDEX.
"""
import json
import os
import random
import signal
import subprocess
import time
import unittest

from test_cli import BIN, FixtureTest, alive, by_case, observed_entry, records

HOSTILE_INDEX = os.environ.get("PITFALL_HOSTILE_INDEX", "")
SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "reports", "schema")
TOKEN_VAR = b"PITFALL_CASE_TOKEN="


def marked(token_prefix, also_in_cmdline=None):
    """Live processes whose environment carries a PITFALL_CASE_TOKEN starting with
    token_prefix, or (also_in_cmdline) whose command line names that text."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        hit = any(e.startswith(TOKEN_VAR + token_prefix.encode()) for e in env)
        if also_in_cmdline and also_in_cmdline.encode() in cmdline and int(pid) != os.getpid():
            hit = True
        if hit and alive(int(pid)):
            found.append(int(pid))
    return found


def run_tokens(run_dir):
    """The containment token of each session of a run (a resumed run has one per session)."""
    try:
        return [r["fingerprint"]["containment"]["token"] for r in records(run_dir, "run")]
    except (FileNotFoundError, json.JSONDecodeError):
        return []


class HostileHelpers:
    """What the hostile test classes share (copied into each by @hostile, so that each derives
    from FixtureTest itself and so becomes a CTest test): a temporary expected/ tree with a
    baseline for the hostile cases that end well, and the checks every case must pass."""

    def setUp(self):
        FixtureTest.setUp(self)
        self.assertTrue(HOSTILE_INDEX, "run through CTest: PITFALL_HOSTILE_INDEX unset")
        ok = observed_entry("cpu.ok", {"outcome": {"status": "ok"}})
        self.write_json(os.path.join(self.expected, "any", "hostile.json"),
                        {"schema": "pitfall.expected/1", "scenario": "hostile",
                         "cases": {f"cpu.{v}": ok for v in ("ok", "setsid_grandchild", "big_output",
                                                            "helper_with_token", "helper_env_cleared")}})

    def hostile_run(self, variant, timeout=30, env=None, extra=(), name=None):
        """`pitfall run` of the variant then `ok`: (process, the run's cases by key, run folder
        named `name`, else the variant)."""
        out = self.run_dir(name or variant)
        p = self.pitfall("run", "--variant", f"{variant},ok", "--backend", "cpu", "--out", out, *extra,
                         index=HOSTILE_INDEX, timeout=timeout, env=env)
        return p, by_case(out), out

    def assert_contained(self, out):
        """No process of the run is left: none carrying its token, none naming its folder."""
        tokens = run_tokens(out)
        self.assertTrue(tokens, "the run header records no containment token")
        deadline = time.monotonic() + 2
        left = []
        while time.monotonic() < deadline:
            left = [pid for t in tokens for pid in marked(t + "/", also_in_cmdline=out + "/")]
            if not left:
                return
            time.sleep(0.05)
        self.fail(f"processes of the run left behind: {left}")

    def assert_reports_valid(self, out):
        import jsonschema  # python3-jsonschema, installed by ci/setup.sh
        with open(os.path.join(SCHEMA_DIR, "report.schema.json")) as f:
            schema = json.load(f)
        with open(os.path.join(out, "report.json")) as f:
            doc = json.load(f)
        errors = [f"{'.'.join(map(str, e.path))}: {e.message}"
                  for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
        self.assertEqual(errors, [])

    def check(self, variant, verdict, observed=None, reason=None, env=None, extra=(), timeout=30):
        """The variant's verdict (and observed outcome, and words of its reason); then `ok` ran
        and passed, nothing is left running, the reports validate. Returns the record."""
        p, cases, out = self.hostile_run(variant, env=env, extra=extra, timeout=timeout)
        rec = cases.get(f"cpu.hostile.{variant}")
        self.assertIsNotNone(rec, p.stdout + p.stderr)
        self.assertEqual(rec["verdict"], verdict, rec["reason"])
        for key, value in (observed or {}).items():
            self.assertEqual(rec["observed"].get(key), value, rec["observed"])
        if reason:
            self.assertIn(reason, rec["reason"])
        self.assertEqual(cases["cpu.hostile.ok"]["verdict"], "PASS", "the run did not go on")
        self.assertEqual(p.returncode, 0 if verdict in ("PASS", "UNSUPPORTED") else 1, p.stderr)
        self.assert_contained(out)
        self.assert_reports_valid(out)
        return rec


def hostile(cls):
    for name, member in vars(HostileHelpers).items():
        if callable(member) and not name.startswith("__"):
            setattr(cls, name, member)
    return cls


@hostile
class HostileProcesses(FixtureTest):
    """Programs that will not end, escape their group, flood or exhaust."""

    def test_hang_is_a_timeout(self):
        rec = self.check("hang", "TIMEOUT", {"status": "timeout"})
        self.assertTrue(rec["process"]["timed_out"])

    def test_ignoring_sigterm_is_killed(self):
        rec = self.check("ignore_term", "TIMEOUT", {"status": "timeout"})
        self.assertLess(rec["process"]["wall_seconds"], 3 + 2 + 2)  # timeout, grace, slack

    def test_stopped_process_is_a_timeout(self):
        rec = self.check("stop_self", "TIMEOUT", {"status": "timeout"})
        self.assertLess(rec["process"]["wall_seconds"], 3 + 2 + 2)
        self.assertIn("stopped by SIGSTOP at", rec["observed"]["detail"])

    def test_a_ptrace_stop_is_a_timeout_said_and_ended_at_once(self):
        # pitfall is the tracer: nothing else could ever resume it, so waiting out the timeout
        # would only cost time; the record says why it ended.
        rec = self.check("ptrace_stop", "TIMEOUT", {"status": "timeout"})
        self.assertTrue(rec["process"]["timed_out"])
        self.assertIn("in a ptrace stop (pitfall its tracer)", rec["observed"]["detail"])
        self.assertLess(rec["process"]["wall_seconds"], 2.5)  # ended at the stop, not the 3 s timeout

    def test_a_cases_helper_outlives_another_case_ending_beside_it(self):
        # With --jobs 2, `ok` ends while the helper's case still waits for it: `ok`'s clean-up
        # must leave the helper alone, in either containment mode, token kept or cleared.
        for mode in ("auto", "subreaper"):
            for variant in ("helper_with_token", "helper_env_cleared"):
                with self.subTest(mode=mode, variant=variant):
                    env = dict(os.environ, PITFALL_CONTAINMENT=mode)
                    p, cases, out = self.hostile_run(variant, env=env, extra=("--jobs", "2"),
                                                     name=f"{variant}-{mode}")
                    rec = cases.get(f"cpu.hostile.{variant}")
                    self.assertIsNotNone(rec, p.stdout + p.stderr)
                    self.assertEqual(rec["verdict"], "PASS", rec["reason"])
                    self.assertEqual(cases["cpu.hostile.ok"]["verdict"], "PASS")
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    # They ran side by side: `ok` ended before the helper's case did.
                    order = [(r["record"], r.get("case")) for r in records(out, None)]
                    self.assertLess(order.index(("case", "cpu.hostile.ok")),
                                    order.index(("case", f"cpu.hostile.{variant}")), order)
                    self.assert_contained(out)

    def test_setsid_grandchild_is_ended(self):
        out = self.run_dir("setsid_grandchild")
        self.check("setsid_grandchild", "PASS")
        with open(os.path.join(out, "logs", "cpu.hostile.setsid_grandchild.log")) as f:
            grandchild = int(f.read().split("grandchild ", 1)[1].split()[0])
        self.assertFalse(alive(grandchild), f"the setsid grandchild {grandchild} outlived its case")

    def test_one_gib_of_output(self):
        # Writing 1 GiB takes seconds on a busy machine: ten times the fixture's 3 s timeout.
        rec = self.check("big_output", "PASS", extra=("--timeout-scale", "10"), timeout=90)
        self.assertLessEqual(len(rec["output_tail"]), 2000)
        self.assertTrue(rec["output_tail"].endswith("x\n"))

    def test_unbounded_memory_meets_the_address_space_limit(self):
        # scenario.json "limits": {"address_space": "1G"}: a failed allocation (std::bad_alloc,
        # uncaught: SIGABRT), never the kernel's OOM killer (SIGKILL).
        rec = self.check("unbounded_memory", "CRASH", {"status": "signal", "signal": "SIGABRT"})
        self.assertLess(rec["process"]["peak_rss_bytes"], 1 << 30)

    def test_exit_77_without_a_result(self):
        self.check("exit77_no_result", "CRASH", {"status": "bad_result"}, "no result file")

    def test_good_result_then_segv(self):
        self.check("result_then_segv", "CRASH", {"status": "signal", "signal": "SIGSEGV"})

    def test_containment_is_recorded(self):
        _, _, out = self.hostile_run("setsid_grandchild")
        containment = records(out, "run")[0]["fingerprint"]["containment"]
        self.assertIn(containment["method"], ("cgroup", "subreaper"))
        self.assertRegex(containment["token"], r"^[0-9a-f]+$")

    def test_subreaper_alone_ends_the_grandchild(self):
        """PITFALL_CONTAINMENT=subreaper: no cgroup, the sweep of descendants and marked
        processes alone."""
        env = dict(os.environ, PITFALL_CONTAINMENT="subreaper")
        out = self.run_dir("setsid_grandchild")
        self.check("setsid_grandchild", "PASS", env=env)
        self.assertEqual(records(out, "run")[0]["fingerprint"]["containment"]["method"], "subreaper")

    def test_cgroup_path_where_one_can_be_made(self):
        env = dict(os.environ, PITFALL_CONTAINMENT="cgroup")
        probe = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir("probe"),
                             index=HOSTILE_INDEX, env=env)
        if probe.returncode == 2 and "PITFALL_CONTAINMENT=cgroup" in probe.stderr:
            self.skipTest("no cgroup can be made here: " + probe.stderr.strip())
        self.assertEqual(probe.returncode, 0, probe.stderr)
        out = self.run_dir("setsid_grandchild")
        self.check("setsid_grandchild", "PASS", env=env)
        containment = records(out, "run")[0]["fingerprint"]["containment"]
        self.assertEqual(containment["method"], "cgroup")
        self.assertFalse(os.path.exists(containment["detail"]), "the run's cgroup was not removed")

    def test_bad_containment_value_is_exit_2(self):
        env = dict(os.environ, PITFALL_CONTAINMENT="jail")
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir(),
                         index=HOSTILE_INDEX, env=env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("PITFALL_CONTAINMENT='jail'", p.stderr)


@hostile
class HostileResults(FixtureTest):
    """Result files that are broken, hostile or not files at all: a CRASH (bad_result) each."""

    def bad_result(self, variant, reason=None):
        try:
            return self.check(variant, "CRASH", {"status": "bad_result"}, reason)
        except subprocess.TimeoutExpired:
            self.fail(f"pitfall hung on the {variant} result")

    def test_truncated(self):
        self.bad_result("truncated_result", "malformed JSON")

    def test_deeply_nested(self):
        self.bad_result("deep_result")

    def test_not_utf8(self):
        self.bad_result("non_utf8_result")

    def test_wrong_types(self):
        self.bad_result("wrong_types")

    def test_samples_of_the_wrong_type(self):
        self.bad_result("wrong_samples")

    def test_result_path_made_a_fifo(self):
        self.bad_result("result_fifo")

    def test_result_path_made_a_directory(self):
        self.bad_result("result_dir")


class KillTest(FixtureTest):
    """`pitfall run` SIGKILLed at a random moment, KILLS times (seeded; the seed is printed):
    every case recorded before the kill stays recorded, `--resume` completes the run, and no
    process of the run is left, the setsid grandchildren of a hostile case included."""

    KILLS = 24
    VARIANTS = "setsid_grandchild,ok,exit77_no_result,result_then_segv,truncated_result"

    def start(self, out):
        return subprocess.Popen([BIN, "run", "--variant", self.VARIANTS, "--backend", "cpu", "--out", out,
                                 "--index", HOSTILE_INDEX, "--expected", self.expected],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def leftovers(self, out, limit=3.0):
        deadline = time.monotonic() + limit
        while True:
            left = [pid for t in run_tokens(out) for pid in marked(t + "/", also_in_cmdline=out + "/")]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.02)

    def test_random_sigkills(self):
        self.assertTrue(HOSTILE_INDEX, "run through CTest: PITFALL_HOSTILE_INDEX unset")
        seed = int(os.environ.get("PITFALL_KILL_SEED", time.time_ns() % 1_000_000))
        print(f"\nkill test seed {seed} (PITFALL_KILL_SEED={seed} repeats it)")
        rng = random.Random(seed)
        started = time.monotonic()
        full = self.start(self.run_dir("full"))
        full.wait(timeout=60)
        span = time.monotonic() - started  # a whole run: the kills land anywhere inside it
        kept = lost = left_total = before_start = 0
        for n in range(self.KILLS):
            out = self.run_dir(f"kill{n}")
            proc = self.start(out)
            time.sleep(rng.uniform(0, span))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            left = self.leftovers(out)
            left_total += len(left)
            self.assertEqual(left, [], f"kill {n}: processes of the run left after the SIGKILL")
            if not run_tokens(out):  # killed before the run's header was written
                before_start += 1
                continue
            finished = {r["case"]: r for r in records(out)}
            p = self.pitfall("run", "--resume", out, index=HOSTILE_INDEX)
            self.assertIn(p.returncode, (0, 1), f"kill {n}: {p.stdout}{p.stderr}")
            after = records(out)
            self.assertEqual(len(after), len({r["case"] for r in after}), f"kill {n}: a case twice")
            after_by_case = {r["case"]: r for r in after}
            for case, rec in finished.items():
                if after_by_case.get(case) != rec:
                    lost += 1
            kept += len(finished)
            with open(os.path.join(out, "summary.json")) as f:
                self.assertTrue(json.load(f)["complete"], f"kill {n}: resume did not complete the run")
            self.assertEqual(self.leftovers(out), [], f"kill {n}: processes left after the resume")
        print(f"kills {self.KILLS}, before the run began {before_start}, finished cases kept {kept}, "
              f"lost {lost}, processes left {left_total}, seed {seed}, {time.monotonic() - started:.1f} s")
        self.assertEqual(lost, 0)


if __name__ == "__main__":
    unittest.main()
