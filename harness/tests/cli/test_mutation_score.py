"""bench/mutation_score.py on real cases: a dropped check is killed where the baseline pins the
case's records, and survives (exit 1 with --fail-on, named in the listing) where it does not.

Run by CTest (pitfall.cli.MutationScore), which sets PITFALL_BIN, PITFALL_REAL_INDEX and
PITFALL_REAL_EXPECTED.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "mutation_score.py")
BIN = os.environ.get("PITFALL_BIN", "")
INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")
SCENARIO = "int32_offset_overflow"  # two CPU cases, one check each, quick


class MutationScore(unittest.TestCase):
    def setUp(self):
        if not (BIN and INDEX and EXPECTED and os.path.exists(INDEX)):
            self.skipTest("run through CTest: PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_REAL_EXPECTED")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-mutation-test-")
        self.expected = os.path.join(self.tmp, "expected")
        shutil.copytree(EXPECTED, self.expected)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def score(self):
        out = os.path.join(self.tmp, "score.json")
        p = subprocess.run([sys.executable, SCRIPT, "--pitfall", BIN, "--index", INDEX,
                            "--expected", self.expected, "--backend", "cpu", "--scenario", SCENARIO,
                            "--kinds", "drop_check,force_pass", "--fail-on", "drop_check",
                            "--json", out],
                           capture_output=True, text=True, timeout=300)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        with open(out, encoding="utf-8") as f:
            return p, json.load(f)

    def test_a_dropped_check_is_killed_by_the_pinned_records(self):
        p, score = self.score()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        cases = score["cases"]
        self.assertEqual(sorted(cases), [f"cpu.{SCENARIO}.remedy_int64_offsets",
                                         f"cpu.{SCENARIO}.reproduce_int32_offsets"])
        for key, c in cases.items():
            self.assertEqual([e["kind"] for e in c["killed"]], ["drop_check"], key)
            self.assertEqual(c["survived"], [], key)
            self.assertIn("no longer runs", c["killed"][0]["reason"])
            # Every check of a passing case passed: forcing it to pass changes nothing.
            self.assertEqual([k for k, _ in c["equivalent"]], ["force_pass"], key)
        self.assertRegex(p.stdout, rf"\n{SCENARIO} +2/2 +0/0 \+2e")

    def test_without_pinned_records_a_dropped_check_survives_and_is_named(self):
        path = os.path.join(self.expected, "host", f"{SCENARIO}.json")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        for entry in doc["cases"].values():
            entry.pop("records", None)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        p, score = self.score()
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        survived = [e for c in score["cases"].values() for e in c["survived"]]
        self.assertEqual(len(survived), 2)
        self.assertTrue(all(e["kind"] == "drop_check" and e["verdict"] == "PASS" for e in survived))
        self.assertIn(f"cpu.{SCENARIO}.reproduce_int32_offsets  drop_check:", p.stdout)


if __name__ == "__main__":
    unittest.main()
