"""`pitfall run --history DB` names the flaky cases in its own reports: real runs of the cpu-only
build, one of them made to fail (PITFALL_INJECT outcome) between passing ones of the same build
and fingerprint. The failing run and the passing run after it list the case as flaky, with its
verdict counts and the flip, in the terminal, summary.md, report.json, report.html and
junit.xml; after --flaky-release-after 2 passing runs in a row it is released and listed no
more. Neither changes a run's exit status.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_REAL_EXPECTED).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import xml.etree.ElementTree as ElementTree

from test_cli import BIN, SCHEMA_DIR

REAL_INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
REAL_EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")
CASE = "cpu.float64_inputs.remedy"
STEADY = "cpu.float64_inputs.reproduce"
SECTION = "### Flaky cases (per the history database)"


def run(out, db, **env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("PITFALL_INJECT", "PITFALL_MUTATE")}
    env.update(env_changes)
    r = subprocess.run([BIN, "run", "--index", REAL_INDEX, "--expected", REAL_EXPECTED,
                        "--backend", "cpu", "--scenario", "float64_inputs", "--variant",
                        "reproduce,remedy", "--timings", "record", "--out", out, "--history", db,
                        "--flaky-release-after", "2"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert os.path.isfile(os.path.join(out, "summary.json")), f"no run made in {out}: {r.stderr}"
    return r


def read(run_dir, name):
    with open(os.path.join(run_dir, name), encoding="utf-8") as f:
        return f.read()


class RunReportsFlaky(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert BIN and REAL_INDEX, "run through CTest: PITFALL_BIN or the index unset"
        cls.tmp = tempfile.mkdtemp(prefix="pitfall-history-flaky-")
        cls.db = os.path.join(cls.tmp, "history.sqlite")
        fail = {"PITFALL_INJECT": f"outcome:{CASE}:cudaErrorLaunchFailure"}
        cls.runs, cls.results = {}, {}
        started = 0.0
        for name, env in (("pass0", {}), ("fail", fail), ("pass1", {}), ("pass2", {})):
            # The header's time has whole seconds: each run starts in a second of its own, so
            # that the database orders the runs as they were made.
            time.sleep(max(0.0, int(started) + 1.01 - time.time()))
            started = time.time()
            cls.runs[name] = os.path.join(cls.tmp, name)
            cls.results[name] = run(cls.runs[name], cls.db, **env)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_exit_status_is_the_verdicts_alone(self):
        self.assertEqual([self.results[n].returncode for n in ("pass0", "fail", "pass1", "pass2")],
                         [0, 1, 0, 0], {n: r.stderr for n, r in self.results.items()})
        self.assertFalse(os.path.exists(os.path.join(self.runs["pass0"], "flaky.json")) and
                         json.loads(read(self.runs["pass0"], "flaky.json"))["cases"])

    def test_the_run_after_the_flip_names_the_case_with_its_history(self):
        d = self.runs["pass1"]
        fail_folder = os.path.abspath(self.runs["fail"])
        doc = json.loads(read(d, "report.json"))
        import jsonschema  # python3-jsonschema, installed by ci/setup.sh
        with open(os.path.join(SCHEMA_DIR, "report.schema.json")) as f:
            self.assertEqual(list(jsonschema.Draft202012Validator(json.load(f)).iter_errors(doc)),
                             [])
        flaky = doc["flaky"]
        self.assertEqual((flaky["db"], flaky["release_after"]), (self.db, 2))
        [case] = flaky["cases"]  # the reproduce case kept its verdict: not flaky
        self.assertEqual(case["case"], CASE)
        self.assertEqual(case["runs"], 3)
        self.assertEqual(case["verdicts"]["PASS"], 2)
        self.assertEqual(sum(case["verdicts"].values()), 3)
        self.assertEqual(case["trailing_passes"], 1)
        self.assertEqual([(f["folder"], f["from"]) for f in case["flips"]],
                         [(fail_folder, "PASS"), (os.path.abspath(d), case["flips"][0]["to"])])
        failed_as = case["flips"][0]["to"]
        self.assertNotEqual(failed_as, "PASS")

        md = read(d, "summary.md")
        self.assertIn(SECTION, md)
        self.assertIn(f"- `{CASE}` (here PASS): {failed_as} x1, PASS x2 in 3 runs, 1 passing in "
                      f"a row; 2 flip(s), latest:", md)
        self.assertIn(f" PASS -> {failed_as} in `{fail_folder}`", md)
        self.assertNotIn(f"`{STEADY}` (here", md)

        html = read(d, "report.html")
        section = html[html.index('<section id="flaky">'):]
        section = section[:section.index("</section>")]
        self.assertIn(f"<code>{CASE}</code>", section)
        self.assertIn(f"PASS &rarr; {failed_as} <code>{fail_folder}</code>", section)
        self.assertNotIn(STEADY, section)

        suite = ElementTree.parse(os.path.join(d, "junit.xml")).getroot().find("testsuite")
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        self.assertEqual(props["flaky"], CASE)
        outs = {c.get("name"): c.findtext("system-out") for c in suite.iter("testcase")}
        self.assertIn(f"flaky per the history database: {failed_as} x1, PASS x2 in 3 runs",
                      outs["cpu.remedy"])
        self.assertNotIn("flaky", outs["cpu.reproduce"])
        p = subprocess.run(["xmllint", "--noout", "--schema", os.path.join(SCHEMA_DIR, "junit.xsd"),
                            os.path.join(d, "junit.xml")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)

        out = self.results["pass1"].stdout
        self.assertIn(f"flaky: (history database {self.db}, released after 2 passing runs in a "
                      "row)\n", out)
        self.assertRegex(out, rf"\n  {CASE} +{failed_as} x1, PASS x2 in 3 runs; latest flip "
                              r"\S+ " + rf"{failed_as} -> PASS\n")

    def test_the_failing_run_itself_counts_its_verdict(self):
        doc = json.loads(read(self.runs["fail"], "report.json"))
        [case] = doc["flaky"]["cases"]
        self.assertEqual((case["case"], case["runs"], case["trailing_passes"]), (CASE, 2, 0))
        self.assertIn("flaky:", self.results["fail"].stdout)

    def test_released_after_two_passing_runs(self):
        d = self.runs["pass2"]
        self.assertEqual(json.loads(read(d, "flaky.json"))["cases"], [])
        self.assertEqual(json.loads(read(d, "report.json"))["flaky"]["cases"], [])
        self.assertNotIn(SECTION, read(d, "summary.md"))
        self.assertNotIn('<section id="flaky">', read(d, "report.html"))
        self.assertNotIn("flaky:", self.results["pass2"].stdout)
        # `pitfall history flaky` still lists it, released: its history is kept.
        r = subprocess.run([BIN, "history", "flaky", "--db", self.db, "--json",
                            "--release-after", "2"], capture_output=True, text=True, timeout=60)
        [case] = json.loads(r.stdout)["cases"]
        self.assertTrue(case["released"])

    def test_a_bad_release_after_is_refused(self):
        for bad in ("0", "-1", "2x", ""):
            r = subprocess.run([BIN, "run", "--index", REAL_INDEX, "--flaky-release-after", bad,
                                "--backend", "cpu", "--scenario", "float64_inputs"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--flaky-release-after", r.stderr)


if __name__ == "__main__":
    unittest.main()
