"""`pitfall history`: real runs of the cpu-only build kept in a results database (SQLite), shown
as a case's trend, ingested by two processes at once and past another writer's lock, recorded by
`pitfall run --history`, and the databases it refuses (newer schema, another application's,
random bytes, truncated) with exit 2 naming the file.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_REAL_EXPECTED).
"""
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
import unittest

from test_cli import BIN

REAL_INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
REAL_EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")
CASE = "cpu.async_error_reporting.reproduce_reported_later"


def pitfall(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, env=env)


def make_run(out, *extra):
    r = pitfall("run", "--index", REAL_INDEX, "--expected", REAL_EXPECTED, "--backend", "cpu",
                "--scenario", "async_error_reporting", "--out", out, "--timings", "record",
                *extra)
    assert os.path.isfile(os.path.join(out, "summary.json")), f"no run made in {out}: {r.stderr}"
    return r


def count(db, table):
    with sqlite3.connect(db) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


class HistoryDatabase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert BIN and REAL_INDEX, "run through CTest: PITFALL_BIN or the index unset"
        cls.tmp = tempfile.mkdtemp(prefix="pitfall-history-")
        cls.runs = []
        for i in range(3):
            if i:
                time.sleep(1.05)  # the header's time has whole seconds: three distinct times
            out = os.path.join(cls.tmp, f"run{i}")
            make_run(out)
            cls.runs.append(out)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def db(self, name):
        return os.path.join(self.tmp, name)

    def test_ingest_is_idempotent_and_show_is_oldest_first(self):
        db = self.db("trend.sqlite")
        r = pitfall("history", "ingest", *reversed(self.runs), "--db", db)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count(": added (3 cases"), 3, r.stdout)
        r = pitfall("history", "ingest", *self.runs, "--db", db)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count(": already recorded"), 3, r.stdout)
        self.assertEqual((count(db, "runs"), count(db, "cases")), (3, 9))

        shown = pitfall("history", "show", "--case", CASE, "--db", db, "--json")
        self.assertEqual(shown.returncode, 0, shown.stderr)
        points = json.loads(shown.stdout)["points"]
        self.assertEqual([p["folder"] for p in points], [os.path.abspath(d) for d in self.runs])
        self.assertEqual({(p["verdict"], p["status"], p["error"]) for p in points},
                         {("PASS", "error", "std::out_of_range")})
        self.assertTrue(all(p["peak_rss_bytes"] > 0 for p in points))

        # The name `pitfall list` and CTest print is the same case.
        listed = pitfall("history", "show", "--case", "pitfall." + CASE, "--db", db, "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertEqual(json.loads(listed.stdout)["points"], points)

        table = pitfall("history", "show", "--case", CASE, "--db", db)
        self.assertEqual(table.returncode, 0, table.stderr)
        lines = table.stdout.splitlines()
        self.assertEqual(lines[0].split()[:5], ["time", "run", "host", "verdict", "outcome"])
        self.assertEqual(len(lines), 4, table.stdout)
        self.assertEqual([l.split()[0] for l in lines[1:]], sorted(p["at"] for p in points))

    def test_filters_and_unknown_case(self):
        db = self.db("filters.sqlite")
        self.assertEqual(pitfall("history", "ingest", *self.runs, "--db", db).returncode, 0)
        host = json.loads(pitfall("history", "show", "--case", CASE, "--db", db,
                                  "--json").stdout)["points"][0]["host_id"]
        on_host = json.loads(pitfall("history", "show", "--case", CASE, "--db", db, "--host",
                                     host, "--json").stdout)["points"]
        self.assertEqual(len(on_host), 3)
        elsewhere = pitfall("history", "show", "--case", CASE, "--db", db, "--host", "nowhere")
        self.assertEqual(elsewhere.returncode, 0, elsewhere.stderr)
        self.assertIn("no run of", elsewhere.stdout)
        later = json.loads(pitfall("history", "show", "--case", CASE, "--db", db, "--since",
                                   "2999-01-01", "--json").stdout)["points"]
        self.assertEqual(later, [])
        bad_since = pitfall("history", "show", "--case", CASE, "--db", db, "--since", "May")
        self.assertEqual(bad_since.returncode, 2)
        self.assertIn("--since May", bad_since.stderr)
        typo = pitfall("history", "show", "--case", CASE[:-1], "--db", db)
        self.assertEqual(typo.returncode, 2)
        self.assertIn(f"did you mean '{CASE}'", typo.stderr)
        self.assertEqual(pitfall("history", "show", "--db", db).returncode, 2)
        self.assertEqual(pitfall("history", "frobnicate", "--db", db).returncode, 2)

    def test_bad_run_folder_is_skipped_with_exit_1(self):
        db = self.db("skip.sqlite")
        missing = os.path.join(self.tmp, "not-a-run")
        r = pitfall("history", "ingest", self.runs[0], missing, self.runs[1], "--db", db)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"warning: skipped {missing}", r.stderr)
        self.assertEqual(count(db, "runs"), 2)

    def test_two_ingesting_processes_at_once(self):
        db = self.db("two-writers.sqlite")
        # Each process writes every run many times over (a write transaction each), both
        # starting on a database neither has made yet: they meet at creation and at every write.
        args = [BIN, "history", "ingest", "--db", db]
        procs = [subprocess.Popen(args + self.runs * 20, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True),
                 subprocess.Popen(args + list(reversed(self.runs)) * 20, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)]
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual(out.count("\n"), 60, out)
        self.assertEqual((count(db, "runs"), count(db, "cases")), (3, 9))

    def test_a_writer_waits_for_another_writers_lock(self):
        db = self.db("locked.sqlite")
        self.assertEqual(pitfall("history", "ingest", self.runs[0], "--db", db).returncode, 0)
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the write lock, held for a second and a half
        result = {}
        waiter = threading.Thread(
            target=lambda: result.update(r=pitfall("history", "ingest", self.runs[1], "--db",
                                                   db)))
        started = time.monotonic()
        waiter.start()
        time.sleep(1.5)
        self.assertTrue(waiter.is_alive(), "the second writer did not wait for the lock")
        holder.execute("COMMIT")
        holder.close()
        waiter.join(30)
        self.assertEqual(result["r"].returncode, 0, result["r"].stderr)
        self.assertGreater(time.monotonic() - started, 1.4)
        self.assertEqual(count(db, "runs"), 2)

    def test_run_records_itself_and_a_bad_database_never_fails_it(self):
        db = self.db("by-run.sqlite")
        out = os.path.join(self.tmp, "recorded")
        r = make_run(out, "--history", db)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"history: added 3 cases in {db}", r.stdout)
        self.assertEqual(count(db, "runs"), 1)
        again = pitfall("history", "ingest", out, "--db", db)
        self.assertIn("already recorded", again.stdout)

        folder_db = os.path.join(self.tmp, "a-folder")
        os.makedirs(folder_db, exist_ok=True)
        out = os.path.join(self.tmp, "unrecorded")
        r = make_run(out, "--history", folder_db)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"not recorded in the history database {folder_db}", r.stderr)
        self.assertTrue(os.path.isfile(os.path.join(out, "report.json")))

    def test_default_database_location(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("PITFALL_HISTORY", "XDG_DATA_HOME")}
        env["HOME"] = os.path.join(self.tmp, "home")
        self.assertEqual(pitfall("history", "ingest", self.runs[0], env=env).returncode, 0)
        self.assertTrue(os.path.isfile(
            os.path.join(env["HOME"], ".local", "share", "pitfall", "history.sqlite")))
        env["XDG_DATA_HOME"] = os.path.join(self.tmp, "xdg")
        self.assertEqual(pitfall("history", "ingest", self.runs[0], env=env).returncode, 0)
        self.assertTrue(os.path.isfile(os.path.join(env["XDG_DATA_HOME"], "pitfall",
                                                    "history.sqlite")))
        env["PITFALL_HISTORY"] = os.path.join(self.tmp, "named.sqlite")
        self.assertEqual(pitfall("history", "ingest", self.runs[0], env=env).returncode, 0)
        self.assertTrue(os.path.isfile(env["PITFALL_HISTORY"]))

    def refused(self, db, why):
        for args in (["ingest", self.runs[0]], ["show", "--case", CASE]):
            r = pitfall("history", *args, "--db", db)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout} {r.stderr}")
            self.assertIn(db, r.stderr)
            self.assertIn(why, r.stderr)

    def test_bad_databases_are_refused(self):
        newer = self.db("newer.sqlite")
        self.assertEqual(pitfall("history", "ingest", self.runs[0], "--db", newer).returncode, 0)
        with sqlite3.connect(newer) as c:
            c.execute("PRAGMA user_version = 99")
        self.refused(newer, "schema version 99 is newer")

        foreign = self.db("foreign.sqlite")
        with sqlite3.connect(foreign) as c:
            c.execute("CREATE TABLE notes (text TEXT)")
        self.refused(foreign, "another application")

        noise = self.db("noise.sqlite")
        with open(noise, "wb") as f:
            f.write(os.urandom(16384))
        self.refused(noise, "not an SQLite database")

        truncated = self.db("cut-short.sqlite")
        self.assertEqual(pitfall("history", "ingest", *self.runs, "--db",
                                 truncated).returncode, 0)
        size = os.path.getsize(truncated)
        self.assertGreater(size, 8192)
        os.truncate(truncated, size // 2)
        self.refused(truncated, "truncated")

    def test_a_database_with_objects_pitfall_did_not_make_is_refused_before_any_query(self):
        """A trigger that stores a crash as PASS, a view in a table's place that never ends, an
        extra table: refused by name before any of them runs; `run --history` stays quick and
        its exit code its own."""
        hostile = {
            "trigger": ("CREATE TRIGGER rewrite AFTER INSERT ON cases BEGIN "
                        "UPDATE cases SET verdict = 'PASS'; END", "a trigger 'rewrite' pitfall did not make"),
            "view": ("CREATE VIEW forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                     "SELECT x + 1 FROM c) SELECT x FROM c", "a view 'forever' pitfall did not make"),
            "meta-view": ("DROP TABLE meta; CREATE VIEW meta AS WITH RECURSIVE c(x) AS (SELECT 1 "
                          "UNION ALL SELECT x + 1 FROM c) SELECT 'application' AS key, "
                          "'pitfall history' AS value FROM c", "a view 'meta' pitfall did not make"),
            "table": ("CREATE TABLE extra (x)", "a table 'extra' pitfall did not make"),
        }
        for name, (sql, says) in hostile.items():
            with self.subTest(name=name):
                db = self.db(f"hostile-{name}.sqlite")
                self.assertEqual(pitfall("history", "ingest", self.runs[0], "--db", db).returncode, 0)
                with sqlite3.connect(db) as c:
                    c.executescript(sql)
                started = time.monotonic()
                self.refused(db, says)
                out = os.path.join(self.tmp, f"hostile-run-{name}")
                r = make_run(out, "--history", db)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(says, r.stderr)
                self.assertLess(time.monotonic() - started, 50, "a refusal must not wait on the file")

if __name__ == "__main__":
    unittest.main()
