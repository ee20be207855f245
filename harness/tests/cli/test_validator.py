"""One validator: the harness's schema interpreter (json_schema.cpp, run by pitfall-validate)
and Python's jsonschema (Draft 2020-12) accept and refuse the same documents.

Valid documents of every schema under reports/schema/ (the real baselines and profiles, a
result and a report.json the fixture scenario writes, the fixture's index, a matrix cell, a
fleet node and a merged fleet report) are broken in every place they can be: each value replaced
by each of a set of wrong values, each property removed, an unknown property added. Both
validators judge every copy; any copy they disagree on fails the test, named with its change.
"""
import copy
import json
import os
import random
import shutil
import subprocess
import tempfile
import unittest

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_DIR = os.path.join(HERE, "..", "..", "..", "reports", "schema")
REAL_EXPECTED = os.path.join(HERE, "..", "..", "..", "expected")
VALIDATE = os.environ.get("PITFALL_VALIDATE", "")
BIN = os.environ.get("PITFALL_BIN", "")
INDEX = os.environ.get("PITFALL_FIXTURE_INDEX", "")
PROGRAM = os.environ.get("PITFALL_FIXTURE_PROGRAM", "")

# Wrong values of every JSON type, and strings that some patterns take and others refuse.
# No string ends in a newline: Python's re.search lets `$` match before one, ECMA-262 (and the
# harness) do not.
REPLACEMENTS = [5, -1, 0, 1.5, 1e300, -0.5, "x", "", "yesterday", "2026-01-01", "SIGSEGV",
                "cpu.ok", "0123456789abcdef", "ok", "error", "signal", "A", [], [1], ["x"], {},
                {"a": 1}, {"min": 1}, None, True, False]
# Copies judged per schema: every one for small documents, a fixed random sample for large.
MAX_COPIES = 4000


def paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, prefix + (i,))


def at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def broken_copies(doc):
    """(description, copy) for every change of one place of `doc`."""
    for path in paths(doc):
        where = "/" + "/".join(map(str, path))
        for r in REPLACEMENTS:
            if not path:
                yield f"{where} = {r!r}", r
                continue
            c = copy.deepcopy(doc)
            at(c, path[:-1])[path[-1]] = r
            yield f"{where} = {r!r}", c
        node = at(doc, path)
        if path and isinstance(at(doc, path[:-1]), dict):
            c = copy.deepcopy(doc)
            del at(c, path[:-1])[path[-1]]
            yield f"{where} removed", c
        if isinstance(node, dict):
            c = copy.deepcopy(doc)
            at(c, path)["zz_unknown"] = 1
            yield f"{where} + zz_unknown", c
        if isinstance(node, list) and node:
            c = copy.deepcopy(doc)
            at(c, path).append(copy.deepcopy(node[0]))
            yield f"{where} + a copy of its first item", c
            c = copy.deepcopy(doc)
            at(c, path).clear()
            yield f"{where} emptied", c


class ValidatorAgreement(unittest.TestCase):
    """Every broken copy of a valid document gets the same answer from both validators."""

    def setUp(self):
        self.assertTrue(VALIDATE and BIN and INDEX and PROGRAM,
                        "run through CTest: PITFALL_VALIDATE and the fixture paths unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-validator-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def schema(self, name):
        with open(os.path.join(SCHEMA_DIR, name + ".schema.json")) as f:
            return jsonschema.Draft202012Validator(json.load(f))

    def harness_says(self, name, docs):
        """The harness's answer (True: valid) for each document, and its messages."""
        folder = tempfile.mkdtemp(dir=self.tmp)
        files = []
        for i, doc in enumerate(docs):
            files.append(os.path.join(folder, f"{i}.json"))
            with open(files[-1], "w") as f:
                json.dump(doc, f)
        p = subprocess.run([VALIDATE, "--schema", name, "--each", *files], capture_output=True,
                           text=True, timeout=300)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), len(files), p.stderr)
        return [line == "valid" for line in lines], lines

    def agree(self, name, seeds):
        validator = self.schema(name)
        copies = {}
        for seed_name, seed in seeds:
            self.assertEqual(list(validator.iter_errors(seed)), [], f"{seed_name} is not valid")
            copies[f"{seed_name} as it is"] = seed
            for what, doc in broken_copies(seed):
                copies.setdefault(f"{seed_name}: {what}", doc)
        # One copy per distinct document.
        unique = {}
        for what, doc in copies.items():
            unique.setdefault(json.dumps(doc, sort_keys=True), (what, doc))
        items = sorted(unique.values(), key=lambda x: x[0])
        if len(items) > MAX_COPIES:
            items = random.Random(13).sample(items, MAX_COPIES)
        harness, lines = self.harness_says(name, [doc for _, doc in items])
        refused = 0
        for (what, doc), says, line in zip(items, harness, lines):
            python = validator.is_valid(doc)
            refused += not python
            self.assertEqual(says, python, f"{name}: {what}: jsonschema says "
                             f"{'valid' if python else 'invalid'}, the harness: {line}")
        # The copies must break the schema often, or the test proves little.
        self.assertGreater(refused, len(items) // 3, name)
        return len(items)

    def real_baselines(self, profile):
        seeds = []
        for folder in sorted(os.listdir(REAL_EXPECTED)):
            for name in sorted(os.listdir(os.path.join(REAL_EXPECTED, folder))):
                if name.endswith(".json") and (name == "profile.json") == profile:
                    with open(os.path.join(REAL_EXPECTED, folder, name)) as f:
                        seeds.append((f"{folder}/{name}", json.load(f)))
        return seeds

    def test_expected(self):
        self.assertGreater(self.agree("expected", self.real_baselines(False)[:6]), 1000)

    def test_expected_timed(self):
        # A baseline with timed series and their normalised twins (expected/host's): every
        # field of a normalised entry broken, both validators judge the copies alike.
        with open(os.path.join(REAL_EXPECTED, "host", "float64_inputs.json")) as f:
            doc = json.load(f)
        self.assertTrue(any("normalised" in t for c in doc["cases"].values()
                            for t in c.get("timings", {}).values()), "no normalised series to break")
        self.assertGreater(self.agree("expected", [("host/float64_inputs.json", doc)]), 1000)

    def test_profile(self):
        seeds = self.real_baselines(True)
        seeds.append(("a range", {"schema": "pitfall.profile/1", "name": "r",
                                  "match": {"cuda_runtime_version": {"min": 12000, "max": 12999},
                                            "gpu_count": [1, 2], "host_only": False}}))
        self.assertGreater(self.agree("profile", seeds), 100)

    def fixture_result(self, variant):
        out = os.path.join(self.tmp, f"{variant}.json")
        p = subprocess.run([PROGRAM, "--backend", "cpu", "--variant", variant, "--out", out,
                            "--param", "samples=1"], capture_output=True, text=True, timeout=60)
        self.assertTrue(os.path.exists(out), p.stdout + p.stderr)
        with open(out) as f:
            return json.load(f)

    def test_result(self):
        seeds = [(v, self.fixture_result(v)) for v in ("ok", "unsupported")]
        self.assertGreater(self.agree("result", seeds), 500)

    def test_report(self):
        expected = os.path.join(self.tmp, "expected", "any")
        os.makedirs(expected)
        with open(os.path.join(expected, "profile.json"), "w") as f:
            json.dump({"schema": "pitfall.profile/1", "name": "any", "match": {}}, f)
        out = os.path.join(self.tmp, "run")
        subprocess.run([BIN, "run", "--variant", "ok,unsupported", "--backend", "cpu", "--samples",
                        "1", "--out", out, "--index", INDEX, "--expected",
                        os.path.dirname(expected)], capture_output=True, timeout=120)
        with open(os.path.join(out, "report.json")) as f:
            report = json.load(f)
        self.assertGreater(self.agree("report", [("report.json", report)]), 1000)

    def test_index_cell_and_fleet_node(self):
        with open(INDEX) as f:
            index = json.load(f)
        index["paths"] = {"expected": "expected", "runs": "runs"}
        self.agree("index", [("fixture index", index)])
        self.agree("cell", [("cell", {"outcome": "ran", "id": "c",
                                      "architectures": {"probed": {"90": {"accepted": True}}}})])
        self.agree("fleet-node", [("node", {"schema": "pitfall.fleet-node/1", "node": "gpu2",
                                            "outcome": "node_down", "slurm_state": "NODE_FAIL",
                                            "reason": "Not responding", "message": "down",
                                            "job_id": "1234_1", "array_task": 1})])

    def test_fleet_report(self):
        # A real merged report: three nodes ran (n3 with a planted failure), n4 never did.
        expected = os.path.join(self.tmp, "expected")
        os.makedirs(os.path.join(expected, "any"))
        with open(os.path.join(expected, "any", "profile.json"), "w") as f:
            json.dump({"schema": "pitfall.profile/1", "name": "any", "match": {}}, f)
        nodes = []
        for name, inject in (("n1", None), ("n2", None), ("n3", "outcome:cpu.harness_fixture.ok:cudaErrorLaunchFailure"),
                             ("n4", "down")):
            folder = os.path.join(self.tmp, "nodes", name)
            os.makedirs(folder)
            record = {"schema": "pitfall.fleet-node/1", "node": name, "outcome": "ran"}
            if inject == "down":
                record.update(outcome="node_down", slurm_state="NODE_FAIL", reason="Not responding")
            else:
                env = dict(os.environ, **({"PITFALL_INJECT": inject} if inject else {}))
                subprocess.run([BIN, "run", "--variant", "ok,unsupported", "--backend", "cpu", "--samples", "1",
                                "--out", os.path.join(folder, "run"), "--index", INDEX, "--expected", expected],
                               capture_output=True, timeout=120, env=env)
            with open(os.path.join(folder, "node.json"), "w") as f:
                json.dump(record, f)
            nodes.append(folder)
        p = subprocess.run([BIN, "report", "--merge", *nodes, "--format", "json"], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        report = json.loads(p.stdout)
        self.assertEqual(report["differing_within_groups"], 1)
        self.assertGreater(self.agree("fleet-report", [("fleet-report.json", report)]), 500)


if __name__ == "__main__":
    unittest.main()
