"""A newcomer's path, as written: the messages that tell a person what to do next, and where bless
puts a new scenario's baselines. The real `pitfall` and the fixture scenario.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN and the fixture paths.
"""
import json
import os
import pty
import shutil
import subprocess

from test_cli import BIN, INDEX, FixtureTest, records


class NewcomerPath(FixtureTest):
    def test_a_scenario_not_built_says_to_build(self):
        with open(INDEX, encoding="utf-8") as f:
            index = json.load(f)
        program = os.path.join(self.tmp, "not-built", "harness_fixture")
        for s in index["scenarios"]:
            s["program"] = program
        doctored = os.path.join(self.tmp, "index.json")
        with open(doctored, "w", encoding="utf-8") as f:
            json.dump(index, f)
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", self.run_dir(), index=doctored)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(f"{program}: the program of scenario 'harness_fixture' is not built", p.stderr)
        self.assertIn("cmake --build --preset", p.stderr)

    def test_what_people_call_things_is_understood_or_corrected(self):
        p = self.pitfall("run", "--backend", "gpu", "--out", self.run_dir())
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean 'cuda'", p.stderr)
        # The names `pitfall list` prints are accepted where a case is named.
        out, _, _ = self.finished_two_case_run()
        b = self.pitfall("bless", out, "--case", "pitfall.cpu.harness_fixture.ok", "--dry-run")
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertIn("cpu.ok", b.stdout)

    def test_bless_puts_a_new_cpu_case_where_every_machine_falls_back(self):
        # Two profiles match this machine: a specific one and the general one. A case without
        # an entry anywhere is judged by neither; bless puts a CPU case into the general one.
        specific = os.path.join(self.expected, "specific")
        os.makedirs(specific)
        self.write_json(os.path.join(specific, "profile.json"),
                        {"schema": "pitfall.profile/1", "name": "specific", "match": {"gpu_count": 0}})
        out = self.run_dir("new")
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--samples", "1", "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(records(out)[0]["verdict"], "NO_BASELINE")
        b = self.pitfall("bless", out)
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.expected, "any", "harness_fixture.json")))
        self.assertFalse(os.path.exists(os.path.join(specific, "harness_fixture.json")))

    def test_html_is_not_poured_into_a_terminal(self):
        out, _, _ = self.finished_two_case_run()
        leader, follower = pty.openpty()
        try:
            p = subprocess.run([BIN, "report", out], stdout=follower, stderr=subprocess.PIPE, text=True, timeout=60)
        finally:
            os.close(follower)
            os.close(leader)
        self.assertEqual(p.returncode, 2)
        self.assertIn("the HTML report is not written to a terminal", p.stderr)
        self.assertIn(os.path.join(out, "report.html"), p.stderr)
        # To a pipe, or with --out -, it is written as before.
        piped = self.pitfall("report", out)
        self.assertEqual(piped.returncode, 0)
        self.assertTrue(piped.stdout.startswith("<!DOCTYPE html>"), piped.stdout[:80])
