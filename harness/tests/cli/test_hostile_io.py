"""Hostile surroundings, round two: what pitfall opens, writes and prints when its descriptors,
its folders and its text are an attacker's. The real `pitfall`, the fixture scenario program,
real files, links and processes.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN and the fixture paths.
"""
import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import xml.dom.minidom

from test_cli import BIN, INDEX, OBSERVED, PROGRAM, FixtureTest, records


def chained(records):
    """The lines of results.jsonl for `records`, each naming the SHA-256 of the line before it
    ("prev"), as pitfall writes them."""
    previous, out = "", []
    for r in records:
        line = json.dumps(dict(r, prev=previous))
        previous = hashlib.sha256(line.encode()).hexdigest()
        out.append(line + "\n")
    return out


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
        # Without summary.json's seal (a run killed before its end), so that what is checked
        # here is the chain and the profile name, not the seal (ForgedRecords checks that).
        os.remove(os.path.join(out, "summary.json"))
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
                    doctored.append(r)
                # Not chained, the records are refused as not pitfall's; chained as pitfall
                # would chain them (anyone can), the profile they name is still only a name.
                with open(path, "w") as f:
                    f.writelines(json.dumps(r) + "\n" for r in doctored)
                b = self.pitfall("bless", out, "--case", "cpu.harness_fixture.ok")
                self.assertEqual(b.returncode, 2, b.stdout + b.stderr)
                self.assertIn("not a record pitfall wrote there", b.stderr)
                with open(path, "w") as f:
                    f.writelines(chained(doctored))
                b = self.pitfall("bless", out, "--case", "cpu.harness_fixture.ok")
                self.assertEqual(b.returncode, 2, b.stdout + b.stderr)
                if forged:
                    self.assertIn(f"profile '{forged}' (from the run's records): not a profile name", b.stderr)
                self.assertEqual(os.listdir(outside), ["profile.json"])
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "harness_fixture.json")))


HOSTILE_INDEX = os.environ.get("PITFALL_HOSTILE_INDEX", "")
# What the hostile_text case puts in its check's name and detail, its ran_on and its stderr
# (harness/tests/hostile/hostile.cpp), as the characters they decode to.
HOSTILE_STRINGS = ["\x1b[2J\x1b[Hcleared", "\x1b]0;retitled\x07", "\r[1/1] cpu.hostile.ok  PASS",
                   "\b\b\b\bPASS", "\u009b31mred", "\u202egnp.exe", "\x01\x0b\x1f", "\ufffe\uffff",
                   "</system-out></testcase><script>alert(1)</script>", "| cell | `code` **bold** [link](x)"]
# Raw, none of these may reach a terminal or a Markdown file: C0 controls but newline and tab,
# DEL, C1 controls, bidirectional overrides and isolates, U+FFFE and U+FFFF.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufffe\uffff]")
# XML 1.0's Char production, negated.
NOT_XML = re.compile(r"[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class HostileText(FixtureTest):
    """A case whose every string is hostile: each output keeps it as text of its own kind."""

    def setUp(self):
        super().setUp()
        self.assertTrue(HOSTILE_INDEX, "run through CTest: PITFALL_HOSTILE_INDEX unset")
        self.out = self.run_dir("hostile-text")
        self.run = self.pitfall("run", "--variant", "hostile_text,ok", "--out", self.out, index=HOSTILE_INDEX)

    def assert_no_raw_control(self, text, where):
        found = RAW_CONTROL.search(text)
        if found:
            self.fail(f"{where}: raw {found.group()!r} at {found.start()}: {text[max(0, found.start() - 60):found.end() + 20]!r}")

    def test_every_output_keeps_the_strings_as_text(self):
        self.assertEqual(self.run.returncode, 1, self.run.stdout + self.run.stderr)
        # The record keeps the truth: every string as the case wrote it.
        record = {r["case"]: r for r in records(self.out)}["cpu.hostile.hostile_text"]
        self.assertEqual(record["verdict"], "NUMERIC_MISMATCH")
        for s in HOSTILE_STRINGS:
            self.assertIn(s, record["reason"])
        # The terminal: every string shown, none acting.
        self.assert_no_raw_control(self.run.stdout + self.run.stderr, "pitfall's output")
        self.assertIn("check_\\x1b[2J\\x1b[Hcleared\\x1b]0;retitled\\x07\\x0d[1/1]", self.run.stdout)
        # JUnit: well-formed XML 1.0 for two parsers, the markup escaped.
        with open(os.path.join(self.out, "junit.xml"), encoding="utf-8") as f:
            junit = f.read()
        self.assertIsNone(NOT_XML.search(junit))
        xml.dom.minidom.parseString(junit.encode())
        lint = subprocess.run(["xmllint", "--noout", os.path.join(self.out, "junit.xml")],
                              capture_output=True, text=True)
        self.assertEqual(lint.returncode, 0, lint.stderr)
        self.assertNotIn("<script>", junit)
        # Markdown, in the folder and on standard output: controls visible, markup escaped.
        with open(os.path.join(self.out, "summary.md"), encoding="utf-8") as f:
            summary = f.read()
        self.assert_no_raw_control(summary, "summary.md")
        self.assertNotIn("<script>", summary)
        shown = self.pitfall("report", self.out, "--format", "markdown")
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assert_no_raw_control(shown.stdout, "report --format markdown")
        # HTML: escaped as before; JSON: the strings as data.
        with open(os.path.join(self.out, "report.html"), encoding="utf-8") as f:
            self.assertNotIn("<script>alert(1)", f.read())
        with open(os.path.join(self.out, "report.json"), encoding="utf-8") as f:
            cases = {c["case"]: c for c in json.load(f)["cases"]}
        self.assertIn(HOSTILE_STRINGS[0], cases["cpu.hostile.hostile_text"]["reason"])
        # And the JUnit and JSON renderings on standard output.
        for fmt in ("junit", "json", "html"):
            printed = self.pitfall("report", self.out, "--format", fmt)
            self.assertEqual(printed.returncode, 0, printed.stderr)
            self.assert_no_raw_control(printed.stdout, f"report --format {fmt}")


def snapshot(root):
    """Every file under root with its bytes and mtime: what an outside folder must keep."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            content = None
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    content = f.read()
            seen[os.path.relpath(path, root)] = (st.st_mode, st.st_mtime_ns, content)
    return seen


class Links(FixtureTest):
    """A link planted where pitfall writes is refused (exit 2, naming it) and nothing outside
    changes. The paths are every entry a finished run leaves in its folder, read from the
    folder itself, plus the ones a new run makes first."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}

    def setUp(self):
        super().setUp()
        self.template, _, _ = self.finished_two_case_run()
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(os.path.join(self.outside, "folder"))
        with open(os.path.join(self.outside, "file"), "w") as f:
            f.write("precious\nlast line without newline")
        with open(os.path.join(self.outside, "folder", "inside"), "w") as f:
            f.write("precious too\n")
        self.before = snapshot(self.outside)

    def plant(self, folder, rel):
        """Replaces folder/rel by a link to an outside file or folder of the same kind."""
        path = os.path.join(folder, rel)
        is_dir = os.path.isdir(path) and not os.path.islink(path)
        if is_dir:
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(os.path.join(self.outside, "folder" if is_dir or rel in ("cases", "logs") else "file"), path)
        return path

    def written_paths(self):
        paths = []
        for folder, dirs, files in os.walk(self.template):
            for name in dirs + files:
                paths.append(os.path.relpath(os.path.join(folder, name), self.template))
        return sorted(paths)

    def test_a_link_anywhere_in_a_run_folder_is_refused_and_nothing_outside_changes(self):
        paths = self.written_paths()
        # The run wrote its records, lock, reports, fingerprint, results and logs of each case.
        for must in (".lock", "results.jsonl", "summary.json", "fingerprint.json", "junit.xml", "cases",
                     "logs", "logs/probe.log", "logs/cpu.harness_fixture.ok.log"):
            self.assertIn(must, paths)
        print(f"\nlinks planted at {len(paths)} paths of a finished run folder, and 4 of a new one")
        for rel in paths:
            with self.subTest(path=rel):
                folder = os.path.join(self.tmp, "planted")
                shutil.rmtree(folder, ignore_errors=True)
                shutil.copytree(self.template, folder, symlinks=True)
                planted = self.plant(folder, rel)
                for argv in (("run", "--resume", folder), ("run", "--variant", "ok", "--backend", "cpu",
                                                           "--out", folder, "--replace"),
                             ("report", folder, "--format", "json"), ("bless", folder, "--dry-run")):
                    p = self.pitfall(*argv)
                    self.assertEqual(p.returncode, 2, (argv, p.stdout, p.stderr))
                    self.assertIn(planted, p.stderr)
                    self.assertIn("symbolic link", p.stderr)
                self.assertEqual(snapshot(self.outside), self.before)
        # A new run's folder with a link where it would make its first files.
        for rel in (".lock", "results.jsonl", "cases", "logs"):
            with self.subTest(new=rel):
                folder = os.path.join(self.tmp, "new-" + rel.strip("."))
                os.makedirs(folder)
                planted = self.plant(folder, rel)
                p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", folder)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(planted, p.stderr)
                self.assertEqual(snapshot(self.outside), self.before)

    def test_bless_makes_its_scratch_folder_new(self):
        # Folders another user could plant in a shared TMPDIR, with a link where bless writes.
        tmpdir = os.path.join(self.tmp, "shared-tmp")
        os.makedirs(tmpdir)
        for pid in range(os.getpid(), os.getpid() + 50):
            planted = os.path.join(tmpdir, f"pitfall-bless-{pid}")
            os.makedirs(planted)
            os.symlink(os.path.join(self.outside, "file"), os.path.join(planted, "diff.txt"))
            os.symlink(os.path.join(self.outside, "file"), os.path.join(planted, "0.json"))
        before = snapshot(tmpdir)
        b = self.pitfall("bless", self.template, "--dry-run", env=dict(os.environ, TMPDIR=tmpdir))
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertIn("+++ b/", b.stdout)
        self.assertEqual(snapshot(self.outside), self.before)
        self.assertEqual(snapshot(tmpdir), before)  # its own folder made and removed again


class UnmakeablePaths(FixtureTest):
    """A case's result or log that cannot be made is the run's bad input (exit 2, naming the
    path), found before any case starts; never a CRASH of a good case, never its output
    spilled onto pitfall's own."""

    def test_a_path_too_long_for_a_case_file_is_refused_before_any_case(self):
        # Components of 200 characters, the whole under PATH_MAX: the folder can be made, the
        # case files inside it could not.
        out = self.tmp
        while len(out) < 4050:
            out = os.path.join(out, "d" * min(200, 4050 - len(out) - 1))
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("too long for a case's file", p.stderr)
        self.assertNotIn("[1/1]", p.stdout)  # no case started

    def test_something_else_where_a_case_file_goes_is_refused(self):
        out = self.run_dir("occupied")
        os.makedirs(os.path.join(out, "logs", "cpu.harness_fixture.ok.log"))
        p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("logs/cpu.harness_fixture.ok.log: there, and not a regular file", p.stderr)

    def test_a_folder_the_cases_cannot_write_in_is_refused(self):
        if os.geteuid() == 0:
            self.skipTest("running as root: a folder's mode does not stop root from writing in it")
        out = self.run_dir("read-only")
        os.makedirs(os.path.join(out, "cases"))
        os.chmod(os.path.join(out, "cases"), 0o555)
        try:
            p = self.pitfall("run", "--variant", "ok", "--backend", "cpu", "--out", out)
        finally:
            os.chmod(os.path.join(out, "cases"), 0o755)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("cases: cannot create a file there", p.stderr)


class ForgedRecords(FixtureTest):
    """A case that changes its run's results.jsonl: appends a forged PASS, rewrites line 1
    without "prev" (turning the chain off) and appends one, renames a forged copy over the file,
    or flips a verdict in place without changing the length. pitfall keeps the bytes it wrote,
    finds each change (before its next record, or at the end), writes the file again from its
    own copy, says so, and the run is red. After the run, summary.json's seal names any line
    changed, for every reader."""

    def setUp(self):
        super().setUp()
        self.assertTrue(HOSTILE_INDEX, "run through CTest: PITFALL_HOSTILE_INDEX unset")
        # Baselines under which the attacking case and ok pass: the run's red comes from the
        # attack alone.
        cases = {f"cpu.{v}": {"outcome": {"status": "ok"}, "provenance": dict(OBSERVED), "ran_on": "cpu"}
                 for v in ("forge_record", "unchain_records", "replace_records", "flip_in_place", "ok")}
        self.write_json(os.path.join(self.expected, "any", "hostile.json"),
                        {"schema": "pitfall.expected/1", "scenario": "hostile", "cases": cases})

    def test_each_change_a_case_makes_is_undone_and_the_run_is_red(self):
        for variants, found in (("forge_record,ok", "changed in length ("),
                                ("unchain_records,ok", "changed in length ("),
                                ("replace_records,ok", "replaced by another file while"),
                                ("result_then_segv,flip_in_place,ok", "changed in place while")):
            with self.subTest(variants=variants):
                out = self.run_dir(variants.replace(",", "-"))
                p = self.pitfall("run", "--variant", variants, "--out", out, index=HOSTILE_INDEX)
                self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                self.assertIn(f"results.jsonl {found}", p.stderr)
                self.assertIn("while cases ran, found before", p.stderr)
                with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
                    text = f.read()
                self.assertNotIn("forged", text)
                previous = ""
                for line in text.splitlines():  # the chain holds from the first line on
                    self.assertEqual(json.loads(line)["prev"], previous, line)
                    previous = hashlib.sha256(line.encode()).hexdigest()
                verdicts = {r["case"]: r["verdict"] for r in records(out)}
                expected = {f"cpu.hostile.{v}": "PASS" for v in variants.split(",")}
                if "result_then_segv" in variants:
                    expected["cpu.hostile.result_then_segv"] = "CRASH"
                self.assertEqual(verdicts, expected)
                with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
                    summary = json.load(f)
                self.assertEqual(summary["exit_code"], 1)
                self.assertEqual(len(summary["records"]["restored"]), 1, summary["records"])
                self.assertIn(found, summary["records"]["restored"][0])
                # The restored file is the sealed one: every reader takes it.
                again = self.pitfall("report", out, "--format", "json", index=HOSTILE_INDEX)
                self.assertEqual(again.returncode, 0, again.stderr)

    def test_a_line_changed_after_the_run_is_named_by_every_reader(self):
        out = self.run_dir("sealed")
        p = self.pitfall("run", "--variant", "ok", "--out", out, index=HOSTILE_INDEX)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        path = os.path.join(out, "results.jsonl")
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(l) for l in f if l.strip()]
        # A forged line whose chain is right: only the seal can tell.
        lines[1]["reason"] = "forged after the run"
        written = []
        for i, record in enumerate(lines):
            if i > 0:
                record["prev"] = hashlib.sha256(written[-1].encode()).hexdigest()
            written.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(written) + "\n")
        db = os.path.join(self.tmp, "history.sqlite")
        for argv in (("report", out, "--format", "junit"), ("bless", out, "--dry-run"),
                     ("run", "--resume", out), ("history", "ingest", out, "--db", db),
                     ("export", "--openmetrics", out)):
            if argv[0] in ("history", "export"):  # these take no --index or --expected
                again = subprocess.run([BIN, *argv], capture_output=True, text=True, timeout=60)
            else:
                again = self.pitfall(*argv, index=HOSTILE_INDEX)
            self.assertNotEqual(again.returncode, 0, (argv, again.stdout, again.stderr))
            self.assertIn("results.jsonl: line 2: not the record pitfall wrote there", again.stderr, argv)
        # Lines cut off the end are named too.
        with open(path, "w", encoding="utf-8") as f:
            f.write(written[0] + "\n")
        cut = self.pitfall("report", out, index=HOSTILE_INDEX)
        self.assertEqual(cut.returncode, 2, cut.stderr)
        self.assertIn("records of summary.json's seal are missing after line 1", cut.stderr)


def become_subreaper():
    """This test process adopts every orphan of what it starts (PR_SET_CHILD_SUBREAPER): a
    process pitfall leaves behind, however it hid (no token, another session, a fork chain
    whose links live a millisecond), comes back here, where waitpid sees it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def left_behind(grace=3.0):
    """The live processes among this process's children after `grace` seconds (zombies reaped
    meanwhile): what escaped, once pitfall itself has ended."""
    deadline = time.monotonic() + grace
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return []
        if time.monotonic() > deadline:
            return end_children()
        time.sleep(0.05)


def end_children():
    """Kills and reaps every child of this process, again and again while any is left (a link
    of a fork chain can fork once more before its kill lands): none left for the next test.
    The live ones found first."""
    found, until = [], time.monotonic() + 5
    while time.monotonic() < until:
        alive = []
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                alive += f.read().split()
        found = found or alive
        for pid in alive:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return found
        time.sleep(0.01)
    return found


class Escapes(FixtureTest):
    """A case's descendants that drop the run's token (an empty environment), hide in a fork
    chain of millisecond links, or leave the case's cgroup are all ended: when the case ends,
    and when pitfall itself is SIGKILLed (the guardian), in each containment mode, beside a
    second case (--jobs 2) whose own processes must be left alone."""

    MODES = ("subreaper", "cgroup")

    def setUp(self):
        super().setUp()
        self.assertTrue(HOSTILE_INDEX, "run through CTest: PITFALL_HOSTILE_INDEX unset")
        become_subreaper()
        self.addCleanup(end_children)  # whatever a failed test left, it leaves nothing running

    def env(self, mode):
        env = dict(os.environ, PITFALL_CONTAINMENT=mode)
        if mode == "cgroup":
            probe = self.pitfall("run", "--variant", "ok", "--out", self.run_dir("cgroup-probe"),
                                 index=HOSTILE_INDEX, env=env)
            if probe.returncode == 2 and "PITFALL_CONTAINMENT=cgroup" in probe.stderr:
                return None
        return env

    def test_escapees_end_with_their_case(self):
        for mode in self.MODES:
            env = self.env(mode)
            if env is None:
                print(f"\n{mode}: no cgroup can be made here (cgroup v1): not run")
                continue
            for variant in ("env_cleared_grandchild", "fork_chain", "cgroup_move"):
                with self.subTest(mode=mode, variant=variant):
                    out = self.run_dir(f"{mode}-{variant}")
                    p = self.pitfall("run", "--variant", f"{variant},slow_ok", "--jobs", "2", "--out", out,
                                     index=HOSTILE_INDEX, env=env)
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    verdicts = {r["case"]: r["verdict"] for r in records(out)}
                    # The neighbour ran to its end: the escapee's clean-up did not touch it.
                    self.assertEqual(verdicts["cpu.hostile.slow_ok"], "NO_BASELINE", verdicts)
                    self.assertEqual(left_behind(), [])
                    moved = os.path.join(out, "cases", f"cpu.hostile.{variant}.json.moved")
                    if mode == "cgroup" and variant == "cgroup_move":
                        with open(moved, encoding="utf-8") as f:
                            self.assertTrue(f.read().startswith("moved to"), "the escapee did not leave its cgroup")
                    print(f"\n{mode}, {variant}: 0 processes left")

    def test_escapees_end_when_pitfall_is_killed(self):
        for mode in self.MODES:
            env = self.env(mode)
            if env is None:
                print(f"\n{mode}: no cgroup can be made here (cgroup v1): not run")
                continue
            for variant in ("env_cleared_then_hang", "chain_then_hang"):
                with self.subTest(mode=mode, variant=variant):
                    out = self.run_dir(f"killed-{mode}-{variant}")
                    proc = subprocess.Popen([BIN, "run", "--variant", f"{variant},slow_ok", "--jobs", "2",
                                             "--out", out, "--index", HOSTILE_INDEX, "--expected", self.expected],
                                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    # Until both cases have started and the escapees have had time to hide.
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline:
                        try:
                            started = [r for r in records(out, "started")]
                        except (FileNotFoundError, json.JSONDecodeError):
                            started = []
                        if len(started) >= 2:
                            break
                        time.sleep(0.05)
                    time.sleep(0.5)
                    proc.kill()
                    proc.wait()
                    self.assertEqual(left_behind(), [])
                    print(f"\n{mode}, {variant}, pitfall SIGKILLed: 0 processes left")
