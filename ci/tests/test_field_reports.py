"""ci/field_reports.py: docs/field-reports.md's ledger of the seeds' claims, checked and its
"observed on" column generated.

The checks run on fixture text through the module's functions (a missing scenario or variant, a
verdict that is not one of the three, an empty why, a stale cell, an uncovered example), then
through the real ci/catalog.py on a scratch tree (a stale cell fails --check, a missing scenario
is refused), and last on this tree's own page, which must pass while every scenario it names
exists.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
import catalog  # noqa: E402  (puts tools/ on the path too)
import claims  # noqa: E402
import field_reports  # noqa: E402
from pitfall_drivers.files import BadInput  # noqa: E402

# The files ci/catalog.py generates blocks of, copied from this tree into the scratch one, so
# that their markers are always the ones the script expects.
GENERATED = ("README.md", "docs/timing.md", "docs/baselines.md", "reports/README.md")

COUNTS = f"{field_reports.COUNTS_BEGIN}\n{field_reports.COUNTS_END}\n"
HEADER = f"{field_reports.LEDGER_HEADER}\n|---|---|---|---|---|---|\n"
CPU = {"kind": "observed", "fingerprint": {"cpu_model": "AMD EPYC", "gpu_count": 0}}
GPU = {"kind": "observed", "fingerprint": {"gpu_count": 1, "device_name": "NVIDIA H200"}}
NO_DEVICE = {"kind": "observed", "fingerprint": {"gpu_count": 0}}
OK = {"status": "ok"}


def page(*rows, report="000"):
    return f"# f\n\n{COUNTS}\n## {report}: a report\n\n{HEADER}" + "".join(r + "\n" for r in rows)


def row(rid="`000.ex1`", verdict="reproduced", where="`alpha.reproduce`", why="", observed=""):
    return f"| {rid} | a claim | {verdict} | {where} | {why} | {observed} |"


SCENARIOS = [{"name": "alpha", "seeds": ["000 ex.1"],
              "variants_by_name": {"reproduce": {"kind": "reproduce", "prediction": {}},
                                   "rule": {"kind": "reproduce", "prediction": {"cuda": "a table applied"}},
                                   "remedy": {"kind": "remedy", "prediction": {}}}}]


def entry(profile, key, prov, outcome=OK):
    backend, variant = key.split(".", 1)
    return {"profile": profile, "backend": backend, "variant": variant,
            "entry": {"outcome": outcome, "provenance": prov}}


ENTRIES = {"alpha": [
    entry("host", "cpu.reproduce", CPU),
    entry("no-gpu", "cuda.reproduce", NO_DEVICE),  # ran without a GPU: a rule, not the failure seen
    entry("hopper-cuda13", "cuda.reproduce", GPU),
    entry("hopper-cuda11-12", "cuda.reproduce", {"kind": "documented"}),
    entry("host", "cpu.remedy", CPU, {"status": "unsupported"}),
    entry("hopper-cuda13", "cuda.rule", GPU),  # a prediction on cuda, wherever it ran
]}


def ledger(text, scenarios=SCENARIOS, entries=ENTRIES):
    return field_reports.ledger_text(text, "docs/field-reports.md", scenarios, entries)


class LedgerText(unittest.TestCase):
    def test_observed_on_is_made_from_the_entries_that_observed_the_case(self):
        text = page(row(), row("`000.c1`", "rebutted", "-", "a source"),
                    row("`000.c2`", "reproduced in part", "`alpha.reproduce`, `alpha.rule`", "differs"),
                    row("`000.c3`", where="`alpha.remedy`"))
        out = ledger(text)
        self.assertIn(row(observed="cpu host; cuda hopper-cuda13"), out)
        self.assertIn(row("`000.c1`", "rebutted", "-", "a source", "-"), out)
        self.assertIn("| `alpha.reproduce`: cpu host; cuda hopper-cuda13<br>`alpha.rule`: not observed yet |", out)
        self.assertIn(row("`000.c3`", where="`alpha.remedy`", observed="not observed yet"), out)
        self.assertIn("4 rows (3 claims, 1 code examples): 2 reproduced, 1 reproduced in part, 1 rebutted.", out)
        self.assertEqual(ledger(out), out)

    def test_a_stale_cell_is_rewritten(self):
        fresh = ledger(page(row()))
        stale = fresh.replace("cpu host; cuda hopper-cuda13", "cpu host")
        self.assertNotEqual(stale, fresh)
        self.assertEqual(ledger(stale), fresh)
        # Another blessing changes the cell: the page written before it is stale.
        blessed = dict(ENTRIES, alpha=ENTRIES["alpha"] + [entry("ada-ampere-cuda12", "cuda.reproduce", GPU)])
        self.assertIn("cuda hopper-cuda13, ada-ampere-cuda12", ledger(fresh, entries=blessed))

    def assertRefused(self, text, *messages, scenarios=SCENARIOS):
        with self.assertRaises(BadInput) as caught:
            ledger(text, scenarios)
        for message in messages:
            self.assertIn(message, str(caught.exception))

    def test_a_missing_scenario_or_variant_is_refused_naming_the_line(self):
        self.assertRefused(page(row(), row("`000.c1`", where="`gamma.reproduce`")),
                           "line 11: where names scenario 'gamma': there is no scenarios/gamma/scenario.json")
        self.assertRefused(page(row(where="`alpha.reproduce`, `alpha.gone`")),
                           "line 10: where names 'alpha.gone': alpha's scenario.json has no variant 'gone'")
        self.assertRefused(page(row(where="alpha.reproduce")), "expected '-' or backticked scenario.variant")

    def test_a_verdict_other_than_the_three_is_refused(self):
        for verdict in ("confirmed", "Reproduced", "reproduced partly", ""):
            with self.subTest(verdict):
                self.assertRefused(page(row(verdict=verdict)), f"line 10: verdict '{verdict}': expected one of")

    def test_a_partial_or_rebutting_row_says_why(self):
        for verdict in ("reproduced in part", "rebutted"):
            for why in ("", "-"):
                with self.subTest(verdict=verdict, why=why):
                    self.assertRefused(page(row(verdict=verdict, why=why)), f"line 10: a '{verdict}' row says why")
        self.assertRefused(page(row(where="-")), "a 'reproduced' row names the scenario.variant")

    def test_ids_belong_to_their_report_once(self):
        self.assertRefused(page(row(), row()), "line 11: id `000.ex1` is listed twice")
        self.assertRefused(page(row(), row("`001.c1`")), "id `001.c1` is not of report 000")
        self.assertRefused(page(row(), row("`000.claim1`")), "expected `NNN.cK`")
        self.assertRefused(page(row(), "| `000.c1` | too | few |"), "line 11: 3 cells, expected 6")

    def test_every_report_and_example_a_scenario_names_has_its_row(self):
        named = [dict(SCENARIOS[0], seeds=["000 ex.1", "000 ex.2", "004"])]
        self.assertRefused(page(row()), "000 ex.2 (named by alpha) has no ledger row `000.ex2`",
                           "report 004 (named by alpha) has no ledger table", scenarios=named)

    def test_a_page_with_rows_has_its_counts_block(self):
        self.assertRefused(page(row()).replace(COUNTS, ""), "expected one '<!-- ledger counts")


class CatalogOnAScratchTree(unittest.TestCase):
    """The real ci/catalog.py, as CTest runs it, over a tree with one scenario and its ledger."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        alpha = {"name": "alpha", "summary": "alpha summary", "failure_class": "numerics",
                 "seeds": ["000 ex.1"], "backends": ["cpu", "cuda"],
                 "variants": [{"name": "reproduce", "kind": "reproduce"}]}
        files = {path: (ROOT / path).read_text(encoding="utf-8") for path in GENERATED}
        files.update({"docs/field-reports.md": page(row()), "scenarios/alpha/scenario.json": json.dumps(alpha)})
        for path, text in files.items():
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_text(text)
        self.bless("host", "cpu.reproduce", CPU)

    def tearDown(self):
        self.tmp.cleanup()

    def bless(self, profile, key, prov):
        path = self.root / "expected" / profile / "alpha.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        cases = json.loads(path.read_text())["cases"] if path.exists() else {}
        cases[key] = {"outcome": OK, "provenance": prov}
        path.write_text(json.dumps({"schema": "pitfall.expected/1", "scenario": "alpha", "cases": cases}))

    def catalog(self, *args):
        return subprocess.run([sys.executable, str(HERE.parent / "catalog.py"), "--root", str(self.root), *args],
                              capture_output=True, text=True, timeout=60)

    def test_a_stale_cell_fails_the_check_and_is_rewritten(self):
        self.assertEqual(self.catalog().returncode, 0)
        ledger_path = self.root / "docs" / "field-reports.md"
        self.assertIn("| cpu host |", ledger_path.read_text())
        self.assertEqual(self.catalog("--check").returncode, 0)
        self.bless("hopper-cuda13", "cuda.reproduce", GPU)
        stale = self.catalog("--check")
        self.assertEqual(stale.returncode, 1)
        self.assertIn("docs/field-reports.md is out of date", stale.stderr)
        self.assertEqual(self.catalog().returncode, 0)
        self.assertIn("| cpu host; cuda hopper-cuda13 |", ledger_path.read_text())
        ledger_path.write_text(ledger_path.read_text().replace("cpu host; cuda hopper-cuda13", "cpu host"))
        self.assertEqual(self.catalog("--check").returncode, 1)

    def test_a_row_naming_a_missing_scenario_is_refused_and_nothing_written(self):
        ledger_path = self.root / "docs" / "field-reports.md"
        ledger_path.write_text(page(row(), row("`000.c1`", where="`type_promotion.reproduce`")))
        before = (self.root / "README.md").read_text()
        for args in ((), ("--check",)):
            out = self.catalog(*args)
            self.assertEqual(out.returncode, 2, out.stdout)
            self.assertIn("field-reports.md: the ledger: line 11: where names scenario 'type_promotion'", out.stderr)
        self.assertEqual((self.root / "README.md").read_text(), before)

    def test_a_hostile_page_is_refused_naming_it(self):
        ledger_path = self.root / "docs" / "field-reports.md"
        for what, make, message in [
                ("not UTF-8", lambda: ledger_path.write_bytes(b"# f\n\xff\xfe\n"), "not UTF-8"),
                ("a FIFO", lambda: os.mkfifo(ledger_path), "a FIFO"),
                ("missing", lambda: None, "cannot read")]:
            with self.subTest(what):
                ledger_path.unlink(missing_ok=True)
                make()
                out = self.catalog("--check")
                self.assertEqual(out.returncode, 2, out.stdout)
                self.assertIn(f"{ledger_path}: ", out.stderr)
                self.assertIn(message, out.stderr)


class ThisTreesLedger(unittest.TestCase):
    """docs/field-reports.md as it is: every row valid against scenarios/ as it is, and every
    example of the five reports listed. (Whether its generated cells are fresh is
    pitfall.static.catalog's to say.)"""

    def test_the_page_passes_and_accounts_for_every_example(self):
        folders = sorted(p.parent for p in (ROOT / "scenarios").glob("*/scenario.json"))
        scenarios = [catalog.read_scenario(f) for f in folders]
        profiles = claims.profile_order(ROOT / "expected", catalog.PROFILES)
        entries = {s["name"]: claims.scenario_entries(ROOT, s["name"], profiles) for s in scenarios}
        path = ROOT / "docs" / "field-reports.md"
        field_reports.with_observed(path, scenarios, entries)  # BadInput names each bad line
        rows, problems = field_reports.parse(path.read_text(encoding="utf-8"))
        self.assertEqual(problems, [])
        ids = {r["cells"][0].strip("`") for r in rows}
        for report in ("000", "001", "002", "003", "004"):
            for k in (1, 2, 3):
                self.assertIn(f"{report}.ex{k}", ids)
            self.assertIn(f"{report}.c1", ids)


if __name__ == "__main__":
    unittest.main()
