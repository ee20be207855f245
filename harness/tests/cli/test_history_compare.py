"""`pitfall history compare` and `pitfall history flaky` over real runs of the cpu-only build:
two runs with the host's own OpenBLAS kernels against two with OPENBLAS_CORETYPE=Sandybridge
(another blas_core in the fingerprint) and a 1.5x slowdown injected, which the upgrade report
must list; one run whose case is made to fail (PITFALL_INJECT outcome), which makes the case
flaky among the runs of the same build and fingerprint, and one passing run after it.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_REAL_EXPECTED).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from test_cli import BIN

REAL_INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
REAL_EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")
CASE = "cpu.float64_inputs.remedy"


def pitfall(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, env=env)


def make_run(out, **env_changes):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "PITFALL_INJECT", "PITFALL_MUTATE")}
    env.update(env_changes)
    r = pitfall("run", "--index", REAL_INDEX, "--expected", REAL_EXPECTED, "--backend", "cpu",
                "--scenario", "float64_inputs", "--variant", "remedy", "--timings", "record",
                "--out", out, env=env)
    assert os.path.isfile(os.path.join(out, "summary.json")), f"no run made in {out}: {r.stderr}"


class HistoryCompare(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert BIN and REAL_INDEX, "run through CTest: PITFALL_BIN or the index unset"
        cls.tmp = tempfile.mkdtemp(prefix="pitfall-history-compare-")
        sandybridge = {"OPENBLAS_CORETYPE": "Sandybridge",
                       "PITFALL_INJECT": f"slowdown:{CASE}:1.5"}
        plans = [("a0", {}), ("a1", {}), ("b0", sandybridge), ("b1", sandybridge),
                 ("fail", {"PITFALL_INJECT": f"outcome:{CASE}:cudaErrorLaunchFailure"}),
                 ("again", {})]
        cls.runs = {}
        started = 0.0
        for name, env in plans:
            # The header's time has whole seconds: each run starts in a second of its own, so
            # that the runs' order is their order here (a run usually takes longer anyway).
            time.sleep(max(0.0, int(started) + 1.01 - time.time()))
            started = time.time()
            cls.runs[name] = os.path.join(cls.tmp, name)
            make_run(cls.runs[name], **env)
        cls.db = os.path.join(cls.tmp, "history.sqlite")
        r = pitfall("history", "ingest", *cls.runs.values(), "--db", cls.db)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def host_core(self):
        with open(os.path.join(self.runs["a0"], "results.jsonl")) as f:
            return json.loads(f.readline())["fingerprint_summary"]["blas_core"]

    def test_the_upgrade_report_lists_the_slower_case(self):
        core = self.host_core()
        if core == "Sandybridge":
            self.skipTest("this host's own OpenBLAS kernels are Sandybridge's: no second value")
        by = f"blas_core={core},Sandybridge"
        r = pitfall("history", "compare", "--by", by, "--db", self.db)
        self.assertEqual(r.returncode, 0, r.stderr)
        # A: the two plain runs, the failed one and the one after it; B: the two slowed ones.
        # Across BLAS kernel types the host_blas control is another program: the absolute series
        # decides, not its normalised twin (which ingest keeps, and which decides elsewhere).
        self.assertIn(f"| {CASE} | 4 | 2 | time epoch_seconds (absolute) |", r.stdout)
        self.assertNotIn("epoch_seconds/host_blas", r.stdout)
        self.assertIn(f"| {CASE} | 4 | 2 | verdict | FAIL x1, PASS x3 | PASS x2 |", r.stdout)

        doc = json.loads(pitfall("history", "compare", "--by", by, "--db", self.db, "--format",
                                 "json").stdout)
        self.assertEqual((doc["a"]["runs"], doc["b"]["runs"]), (4, 2))
        [case] = doc["differing"]
        [time_difference] = case["differing"]
        self.assertGreater(time_difference["b"]["median"], 1.3 * time_difference["a"]["median"])

        page = os.path.join(self.tmp, "report", "upgrade.html")
        os.makedirs(os.path.dirname(page), exist_ok=True)
        r = pitfall("history", "compare", "--by", by, "--db", self.db, "--format", "html",
                    "--out", page)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "")
        with open(page) as f:
            html = f.read()
        self.assertTrue(html.startswith("<!DOCTYPE html>"))
        self.assertIn(f"<code>{CASE}</code>", html)
        for outside in ("src=", "href=", "http://", "https://"):
            self.assertNotIn(outside, html)
        self.assertEqual(os.listdir(os.path.dirname(page)), ["upgrade.html"])  # no temp left

    def test_the_same_value_on_both_sides_is_refused(self):
        host = json.loads(pitfall("history", "show", "--case", CASE, "--db", self.db,
                                  "--json").stdout)["points"][0]["host_id"]
        r = pitfall("history", "compare", "--by", f"host={host},{host}", "--db", self.db)
        self.assertEqual(r.returncode, 2)
        self.assertIn("the same value on both sides", r.stderr)

    def test_unknown_key_or_value_names_what_the_database_has(self):
        r = pitfall("history", "compare", "--by", "blas_cor=a,b", "--db", self.db)
        self.assertEqual(r.returncode, 2)
        self.assertIn("did you mean 'blas_core'", r.stderr)
        core = self.host_core()
        r = pitfall("history", "compare", "--by", f"blas_core={core},Pentium", "--db", self.db)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no run has blas_core = 'Pentium'", r.stderr)
        self.assertIn(f"'{core}'", r.stderr)
        for bad in (["--by", "blas_core"], ["--by", f"blas_core={core},Sandybridge",
                                             "--format", "pdf"], []):
            r = pitfall("history", "compare", "--db", self.db, *bad)
            self.assertEqual(r.returncode, 2, bad)

    def test_flaky_lists_the_flip_and_the_release_rule(self):
        r = pitfall("history", "flaky", "--db", self.db, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["release_after"], 10)
        [case] = doc["cases"]  # the Sandybridge runs have another fingerprint: not counted
        self.assertEqual(case["case"], CASE)
        self.assertEqual(case["runs"], 4)
        self.assertEqual(case["verdicts"]["PASS"], 3)
        self.assertEqual(len(case["verdicts"]), 2)
        self.assertEqual([(f["folder"], f["from"]) for f in case["flips"]],
                         [(self.runs["fail"], "PASS"), (self.runs["again"], case["flips"][0]["to"])])
        self.assertEqual(case["flips"][1]["to"], "PASS")
        self.assertNotEqual(case["flips"][0]["to"], "PASS")
        self.assertFalse(case["released"])
        released = json.loads(pitfall("history", "flaky", "--db", self.db, "--json",
                                      "--release-after", "1").stdout)["cases"][0]
        self.assertTrue(released["released"])
        table = pitfall("history", "flaky", "--db", self.db)
        self.assertEqual(table.returncode, 0)
        self.assertIn(f"{CASE}: 4 runs", table.stdout)
        self.assertIn("not released (1 of 10 passing runs in a row)", table.stdout)
        self.assertEqual(pitfall("history", "flaky", "--db", self.db,
                                 "--release-after", "0").returncode, 2)


if __name__ == "__main__":
    unittest.main()
