"""`pitfall history show --html`: the trend page of a real run's case, as headless Chromium loads
it: no console message, one SVG chart per timed series plus the memory chart, the change point
and the verdict change marked, and a hostile case key or reason kept as text.

The database is made by `pitfall history ingest` of one real run; 29 more runs of the case are
rows copied from it with a timed series that steps up by 30% halfway (change points need runs on
either side) and a verdict change whose reason is markup.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_REAL_EXPECTED).
"""
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

from test_history import CASE, make_run, pitfall

HOSTILE = "<script>alert(1)</script>"
RUNS = 30


def chromium(page):
    """Headless Chromium's DOM of a local page: (exit status, DOM, console lines)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "chromium is not installed: ci/setup.sh installs it"
    p = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                        "--v=0", "--dump-dom", "file://" + page], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, [line for line in p.stderr.splitlines() if ":CONSOLE" in line]


def add_synthetic_runs(db):
    """Copies of the real run, an hour apart: the case's series, verdict and memory per run; the
    same rows again under the hostile case key."""
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        run = dict(c.execute("SELECT * FROM runs").fetchone())
        real = {r["case_key"]: dict(r) for r in c.execute("SELECT * FROM cases")}
        c.execute("DELETE FROM cases WHERE case_key = ?", (CASE,))
        for i in range(RUNS):
            at = f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00Z"
            run_id = f"synthetic{i:03d}" if i else run["id"]
            if i:
                c.execute(f"INSERT INTO runs ({', '.join(run)}) VALUES ({', '.join('?' * len(run))})",
                          [{"id": run_id, "at": at, "folder": f"{run['folder']}-{i}"}.get(k, v)
                           for k, v in run.items()])
            else:
                c.execute("UPDATE runs SET at = ? WHERE id = ?", (at, run_id))
            level = 0.010 * (1.3 if i >= RUNS // 2 else 1.0) * (1 + 0.01 * ((i * 7) % 5 - 2))
            series = {"epoch_seconds": {"unit": "s", "median": level, "samples": [level] * 3},
                      "setup_seconds": {"unit": "s", "median": 0.002, "samples": [0.002] * 3}}
            failing = i >= 25
            for key in (CASE, HOSTILE):
                row = dict(real[CASE], run_id=run_id, case_key=key, run_at=at, series=json.dumps(series),
                           verdict="FAIL" if failing else "PASS", reason=HOSTILE if failing else "",
                           peak_rss_bytes=12_000_000 + 100_000 * i)
                c.execute(f"INSERT INTO cases ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                          list(row.values()))


class HistoryHtml(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pitfall-history-html-")
        cls.db = os.path.join(cls.tmp, "history.sqlite")
        run = os.path.join(cls.tmp, "run0")
        make_run(run)
        r = pitfall("history", "ingest", run, "--db", cls.db)
        assert r.returncode == 0, r.stderr
        add_synthetic_runs(cls.db)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def show(self, case, page):
        r = pitfall("history", "show", "--case", case, "--db", self.db, "--html", page)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), RUNS + 1)  # the table too: a head, a line a run
        self.assertEqual([f for f in os.listdir(os.path.dirname(page)) if f.startswith(".")], [])
        rc, dom, console = chromium(page)
        self.assertEqual(rc, 0)
        self.assertEqual(console, [])  # no console message of any kind
        return dom

    def test_charts_and_marks_in_headless_chromium(self):
        dom = self.show(CASE, os.path.join(self.tmp, "trend.html"))
        # One chart per series (epoch_seconds, setup_seconds) and the memory chart.
        self.assertEqual(dom.count("<svg"), 3)
        for chart in ("chart-series-0", "chart-series-1", "chart-memory"):
            self.assertIn(f'id="{chart}"', dom)
        self.assertIn("epoch_seconds (median per run)", dom)
        # The 30% step is a change point of epoch_seconds, drawn with its step at the first
        # run after it; setup_seconds has none.
        epoch = dom[dom.index('id="chart-series-0"'):dom.index('id="chart-series-1"')]
        self.assertEqual(epoch.count('<line class="cp"'), 1)
        self.assertIn('class="m-cp"', epoch)
        self.assertRegex(epoch, r">\+3\d\.\d%</text>")
        self.assertIn("2026-11-01T15:00:00Z", epoch)  # run 15, the first after the step
        # The verdict change (run 25) on every chart, with its reason kept as text.
        self.assertEqual(dom.count('<line class="verdict"'), 3)
        self.assertNotIn("<script", dom)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", dom)
        self.assertIn('<table id="change-points">', dom)
        # The memory chart's axis does not start at zero (12.0-14.9 MB): it says so in words
        # and with a break on the axis, so a small change is not read as a cliff.
        memory = dom[dom.index('id="chart-memory"'):]
        memory = memory[:memory.index("</figure>")]
        self.assertRegex(memory, r'class="scale-note">\(vertical axis from [\d.]+ MiB, not zero: '
                                 r'its whole height is [\d.]+% of the top value\)')
        self.assertIn('class="axis-break"', memory)

    def test_a_hostile_case_key_stays_text(self):
        dom = self.show(HOSTILE, os.path.join(self.tmp, "hostile.html"))
        self.assertNotIn("<script", dom)
        self.assertIn("<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>", dom)
        self.assertEqual(dom.count("<svg"), 3)

    def test_html_is_for_show_and_an_unwritable_page_exits_2(self):
        r = pitfall("history", "changes", "--case", CASE, "--db", self.db, "--html",
                    os.path.join(self.tmp, "x.html"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--html is for history show", r.stderr)
        missing = os.path.join(self.tmp, "no-such-folder", "trend.html")
        r = pitfall("history", "show", "--case", CASE, "--db", self.db, "--html", missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn(missing, r.stderr)


if __name__ == "__main__":
    unittest.main()
