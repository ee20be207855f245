"""Hostile surroundings, round two: what pitfall opens, writes and prints when its descriptors,
its folders and its text are an attacker's. The real `pitfall`, the fixture scenario program,
real files, links and processes.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN and the fixture paths.
"""
import json
import os
import subprocess

from test_cli import BIN, INDEX, PROGRAM, FixtureTest, records


def closing(*fds):
    """A preexec_fn that closes `fds` in the child before it runs the program."""
    def close():
        for fd in fds:
            os.close(fd)
    return close


class StandardDescriptors(FixtureTest):
    """Started with 0, 1 and 2 closed, nothing pitfall opens may take their numbers."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}

    def run_closed(self, fds, out):
        cmd = [BIN, "run", "--variant", "ok", "--backend", "cpu", "--samples", "1", "--out", out,
               "--index", INDEX, "--expected", self.expected]
        return subprocess.run(cmd, preexec_fn=closing(*fds), timeout=60,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def test_a_run_started_without_them_keeps_its_records_clean(self):
        for fds in [(1,), (0, 1, 2), (2,)]:
            with self.subTest(closed=fds):
                out = self.run_dir("closed-" + "-".join(map(str, fds)))
                self.assertEqual(self.run_closed(fds, out).returncode, 0)
                # Every line of the record is JSON pitfall wrote: no progress line landed in it.
                with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
                    for line in f:
                        json.loads(line)
                self.assertEqual([r["verdict"] for r in records(out)], ["PASS"])
                # Nor in the lock, which holds the pid of the run that held it, and nothing else.
                lock = os.path.join(out, ".lock")
                if os.path.exists(lock):
                    with open(lock, encoding="utf-8") as f:
                        self.assertRegex(f.read(), r"^[0-9]*\n?$")
                # The folder stays a run: it can be reported and resumed.
                report = self.pitfall("report", out, "--format", "json")
                self.assertEqual(report.returncode, 0, report.stderr)
                resumed = self.pitfall("run", "--resume", out)
                self.assertEqual(resumed.returncode, 0, resumed.stderr)

    def test_the_scenario_program_writes_its_result_where_it_was_told(self):
        result = os.path.join(self.tmp, "result.json")
        p = subprocess.run([PROGRAM, "--backend", "cpu", "--variant", "ok", "--out", result],
                           preexec_fn=closing(0, 1, 2), timeout=60,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0)
        with open(result, encoding="utf-8") as f:
            self.assertEqual(json.load(f)["variant"], "ok")


class NamesFromData(FixtureTest):
    """A profile named by a run's records is data: bless takes it only as a profile's name."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}

    def test_bless_refuses_a_profile_the_records_name_as_a_path(self):
        out, path, lines = self.finished_two_case_run()
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "profile.json"), "w") as f:
            f.write('{"schema": "pitfall.profile/1", "name": "outside", "match": {}}')
        for forged in ["../../outside", "../outside", "any/../../outside", ".", ""]:
            with self.subTest(profile=forged):
                doctored = []
                for line in lines:
                    r = json.loads(line)
                    if r.get("record") == "case" and isinstance(r.get("baseline"), dict):
                        r["baseline"]["profile"] = forged
                    doctored.append(json.dumps(r) + "\n")
                with open(path, "w") as f:
                    f.writelines(doctored)
                b = self.pitfall("bless", out, "--case", "cpu.harness_fixture.ok")
                self.assertEqual(b.returncode, 2, b.stdout + b.stderr)
                if forged:
                    self.assertIn(f"profile '{forged}' (from the run's records): not a profile name", b.stderr)
                self.assertEqual(os.listdir(outside), ["profile.json"])
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "harness_fixture.json")))
