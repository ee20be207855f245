"""Bad input of every kind, to every reader `pitfall` has: each must end as exit 2 naming the
file, field or flag (or, for a case's own result file, a CRASH verdict `bad_result` while the run
goes on); never a crash, a sanitizer report, a traceback or a hang.

Each test prints one line per kind tried, `KIND <reader> <kind>: <how it ended>`, and a count;
`ctest -R BadInputKinds -V | grep -c '^KIND '` counts them all.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

from test_cli import BIN, FixtureTest, INDEX, MANIFEST, OBSERVED, PROGRAM, by_case

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CRASH_MARKS = ("terminate called", "Traceback", "AddressSanitizer", "runtime error:",
               "Segmentation fault", "core dumped", "what():")
DEPTH = 100000  # levels of nesting in the deep-nesting kinds


def file_kinds(valid_text):
    """(kind, maker) pairs: maker(path) puts that kind of bad file at path. Shared by every
    reader of a JSON file."""
    half = valid_text[: len(valid_text) // 2]

    def text(content):
        def make(path):
            with open(path, "wb") as f:
                f.write(content if isinstance(content, bytes) else content.encode())
        return make

    def directory(path):
        os.makedirs(path)

    def fifo(path):
        os.mkfifo(path)

    def symlink_loop(path):
        os.symlink(path, path)

    def dangling(path):
        os.symlink(path + ".nowhere", path)

    def sparse_gib(path):
        with open(path, "wb") as f:
            f.truncate(1 << 30)

    def missing(path):
        pass

    latin1 = valid_text.replace('"', '"\xe9', 1).encode("latin-1", "replace")
    return [
        ("missing", missing),
        ("directory", directory),
        ("fifo", fifo),
        ("symlink loop", symlink_loop),
        ("dangling symlink", dangling),
        ("empty", text("")),
        ("whitespace only", text(" \n\t\n")),
        ("truncated", text(half)),
        ("not json", text("{ not json")),
        ("trailing garbage", text(valid_text + "}x")),
        ("non-utf8 bytes", text(latin1)),
        ("nul byte", text(valid_text[:1] + "\0" + valid_text[1:])),
        ("deep arrays", text("[" * DEPTH + "]" * DEPTH)),
        ("deep objects", text('{"a":' * DEPTH + "1" + "}" * DEPTH)),
        ("number past double", text('{"schema": 1e999}')),
        ("top-level number", text("5")),
        ("top-level string", text('"pitfall"')),
        ("top-level null", text("null")),
        ("top-level array", text("[" + valid_text + "]")),
        ("sparse 1 GiB file", sparse_gib),
        ("nan literal", text('{"schema": NaN}')),
    ]


class Kinds(FixtureTest):
    """A table of kinds tried, and the checks every ending gets."""

    def setUp(self):
        super().setUp()
        self.tried = []

    def tearDown(self):
        for reader, kind, ended in self.tried:
            print(f"KIND {reader} {kind}: {ended}")
        print(f"{len(self.tried)} kinds tried, none crashed or hung")
        super().tearDown()

    def pitfall_bounded(self, *args, timeout=30, **kw):
        try:
            return self.pitfall(*args, timeout=timeout, errors="replace", **kw)
        except subprocess.TimeoutExpired:
            self.fail(f"pitfall {' '.join(args)}: no answer in {timeout} s (a hang)")

    def assert_no_crash(self, what, r):
        self.assertGreaterEqual(r.returncode, 0, f"{what}: killed by signal {-r.returncode}\n{r.stderr[-2000:]}")
        self.assertLess(r.returncode, 128, f"{what}: exit {r.returncode}\n{r.stderr[-2000:]}")
        for mark in CRASH_MARKS:
            self.assertNotIn(mark, r.stderr, f"{what}: {mark}\n{r.stderr[-2000:]}")

    def assert_refused(self, reader, kind, r, *needles):
        """Exit 2, the message naming each needle (the file, the field or the flag)."""
        what = f"{reader} / {kind}"
        self.assert_no_crash(what, r)
        self.assertEqual(r.returncode, 2, f"{what}: exit {r.returncode}, expected 2\n{r.stderr[-2000:]}")
        for needle in needles:
            self.assertIn(needle, r.stderr, f"{what}: the message does not name {needle!r}")
        self.tried.append((reader, kind, "exit 2: " + r.stderr.strip().splitlines()[-1][:160]))

    def write_index(self, manifest=MANIFEST, program=PROGRAM, name="harness_fixture"):
        path = os.path.join(self.tmp, "index.json")
        self.write_json(path, {"schema": "pitfall.index/1", "built_with_cuda": False,
                               "scenarios": [{"name": name, "program": program, "manifest": manifest}]})
        return path

    def fresh_path(self, name):
        folder = tempfile.mkdtemp(dir=self.tmp)
        return os.path.join(folder, name)

    def finished_run(self):
        out = self.run_dir("finished")
        r = self.pitfall_bounded("run", "--variant", "ok,unsupported", "--backend", "cpu",
                                 "--samples", "1", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out


class IndexKinds(Kinds):
    def test_index_file(self):
        with open(INDEX) as f:
            valid = f.read()
        for kind, make in file_kinds(valid):
            path = self.fresh_path("index.json")
            make(path)
            self.assert_refused("index", kind, self.pitfall_bounded("list", index=path), path)

    def test_index_fields(self):
        good = json.loads(open(INDEX).read())
        entry = good["scenarios"][0]
        for kind, doc in [
            ("schema wrong", dict(good, schema="pitfall.index/9")),
            ("scenarios an object", dict(good, scenarios={})),
            ("scenarios a string", dict(good, scenarios="x")),
            ("entry a number", dict(good, scenarios=[5])),
            ("program a number", dict(good, scenarios=[dict(entry, program=5)])),
            ("program missing", dict(good, scenarios=[{k: v for k, v in entry.items() if k != "program"}])),
            ("manifest null", dict(good, scenarios=[dict(entry, manifest=None)])),
            ("name an array", dict(good, scenarios=[dict(entry, name=["a"])])),
            ("built_with_cuda a string", dict(good, built_with_cuda="yes")),
            ("paths a list", dict(good, paths=["expected"])),
        ]:
            path = self.fresh_path("index.json")
            self.write_json(path, doc)
            self.assert_refused("index", kind, self.pitfall_bounded("list", index=path), path)


class ManifestKinds(Kinds):
    def test_manifest_file(self):
        with open(MANIFEST) as f:
            valid = f.read()
        for kind, make in file_kinds(valid):
            path = self.fresh_path("scenario.json")
            make(path)
            index = self.write_index(manifest=path)
            self.assert_refused("scenario.json", kind, self.pitfall_bounded("list", index=index), path)

    def test_manifest_fields(self):
        good = json.loads(open(MANIFEST).read())
        variant = good["variants"][0]
        for kind, doc in [
            ("timeout a string", dict(good, timeout_seconds="3")),
            ("timeout negative", dict(good, timeout_seconds=-1)),
            ("timeout huge", dict(good, timeout_seconds=1e308)),
            ("variants an object", dict(good, variants={})),
            ("variant a number", dict(good, variants=[5] + good["variants"][1:])),
            ("variant name a list", dict(good, variants=[dict(variant, name=[1])] + good["variants"][1:])),
            ("backends unknown", dict(good, backends=["tpu"])),
            ("backends a string", dict(good, backends="cpu")),
            ("params a list", dict(good, params=[1])),
            ("param default an object", dict(good, params={"sleep_ms": {"default": {}, "doc": "x"}})),
            ("ratios a string", dict(good, ratios="x")),
            ("labels numbers", dict(good, labels=[1, 2])),
        ]:
            path = self.fresh_path("scenario.json")
            self.write_json(path, doc)
            index = self.write_index(manifest=path)
            self.assert_refused("scenario.json", kind, self.pitfall_bounded("list", index=index), path)


class BaselineKinds(Kinds):
    ENTRY = {"outcome": {"status": "ok"}, "ran_on": "cpu", "provenance": OBSERVED}

    def baseline_path(self):
        return os.path.join(self.expected, "any", "harness_fixture.json")

    def run_ok(self):
        return self.pitfall_bounded("run", "--variant", "ok", "--backend", "cpu", "--samples", "1",
                                    "--out", self.fresh_path("run"))

    def test_baseline_file(self):
        valid = json.dumps({"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                            "cases": {"cpu.ok": self.ENTRY}})
        for kind, make in file_kinds(valid):
            if kind == "missing":
                continue  # no baseline file: NO_BASELINE, not bad input
            path = self.baseline_path()
            if os.path.lexists(path):
                os.remove(path) if not os.path.isdir(path) or os.path.islink(path) else os.rmdir(path)
            make(path)
            self.assert_refused("baseline", kind, self.run_ok(), path)

    def test_baseline_fields(self):
        def with_entry(**changes):
            entry = json.loads(json.dumps(self.ENTRY))
            for dotted, value in changes.items():
                node = entry
                parts = dotted.split("__")
                for part in parts[:-1]:
                    node = node.setdefault(part, {})
                node[parts[-1]] = value
            return {"schema": "pitfall.expected/1", "scenario": "harness_fixture", "cases": {"cpu.ok": entry}}

        kinds = [
            ("error a number", with_entry(outcome={"status": "error", "error": 5})),
            ("note a list", with_entry(note=[1])),
            ("date not a date", with_entry(provenance__date="yesterday")),
            ("sticky a string", with_entry(outcome={"status": "error", "error": "x", "sticky": "yes"})),
            ("status unknown", with_entry(outcome={"status": "fine"})),
            ("outcome a list", with_entry(outcome=[])),
            ("provenance missing", {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                                    "cases": {"cpu.ok": {"outcome": {"status": "ok"}}}}),
            ("bound min over max", with_entry(measurements={"x": {"min": 2, "max": 1}})),
            ("bound a string", with_entry(measurements={"x": "1..2"})),
            ("samples strings", with_entry(timings={"s": {"samples": ["a"]}})),
            ("case key malformed", {"schema": "pitfall.expected/1", "scenario": "harness_fixture",
                                    "cases": {"gpu ok": self.ENTRY}}),
            ("cases a list", {"schema": "pitfall.expected/1", "scenario": "harness_fixture", "cases": []}),
            ("scenario another", {"schema": "pitfall.expected/1", "scenario": "other", "cases": {}}),
            ("unknown field", dict(with_entry(), colour="red")),
        ]
        for kind, doc in kinds:
            self.write_json(self.baseline_path(), doc)
            self.assert_refused("baseline", kind, self.run_ok(), self.baseline_path())


class ProfileKinds(Kinds):
    def profile_path(self):
        return os.path.join(self.expected, "any", "profile.json")

    def run_ok(self):
        return self.pitfall_bounded("run", "--variant", "ok", "--backend", "cpu", "--samples", "1",
                                    "--out", self.fresh_path("run"))

    def test_profile_file(self):
        valid = json.dumps({"schema": "pitfall.profile/1", "name": "any", "match": {}})
        for kind, make in file_kinds(valid):
            path = self.profile_path()
            if os.path.lexists(path):
                os.remove(path) if not os.path.isdir(path) or os.path.islink(path) else os.rmdir(path)
            make(path)
            if kind == "missing":
                continue  # a folder without profile.json is not a profile: nothing to refuse
            self.assert_refused("profile", kind, self.run_ok(), path)

    def test_profile_fields(self):
        for kind, doc in [
            ("match a list", {"schema": "pitfall.profile/1", "name": "any", "match": []}),
            ("name a number", {"schema": "pitfall.profile/1", "name": 5, "match": {}}),
            ("name another", {"schema": "pitfall.profile/1", "name": "other", "match": {}}),
            ("match value an object", {"schema": "pitfall.profile/1", "name": "any", "match": {"gpu_count": {}}}),
            ("schema wrong", {"schema": "pitfall.profile/2", "name": "any", "match": {}}),
            ("unknown field", {"schema": "pitfall.profile/1", "name": "any", "match": {}, "x": 1}),
            ("overlay a string", {"schema": "pitfall.profile/1", "name": "any", "match": {"mig": True}, "overlay": "yes"}),
            ("overlay without a condition", {"schema": "pitfall.profile/1", "name": "any", "match": {}, "overlay": True}),
        ]:
            self.write_json(self.profile_path(), doc)
            self.assert_refused("profile", kind, self.run_ok(), self.profile_path())


class RunFolderKinds(Kinds):
    def test_results_jsonl(self):
        out = self.finished_run()
        path = os.path.join(out, "results.jsonl")
        with open(path) as f:
            valid = f.read()
        for kind, make in file_kinds(valid):
            if kind in ("truncated", "trailing garbage"):
                continue  # a cut last line is a kill mid-write: skipped, by design
            target = os.path.join(self.fresh_run_copy(out), "results.jsonl")
            os.remove(target)
            make(target)
            self.assert_refused("results.jsonl", kind,
                                self.pitfall_bounded("report", os.path.dirname(target), "--format", "json"),
                                "results.jsonl")

    def fresh_run_copy(self, out):
        dest = self.fresh_path("run")
        subprocess.run(["cp", "-r", out, dest], check=True)
        return dest

    def test_results_jsonl_records(self):
        out = self.finished_run()
        with open(os.path.join(out, "results.jsonl")) as f:
            lines = f.read().splitlines()
        at = next(i for i, line in enumerate(lines) if json.loads(line).get("record") == "case")
        header, case = json.loads(lines[0]), json.loads(lines[at])
        for kind, bad_line in [
            ("case record verdict a number", dict(case, verdict=5)),
            ("case record case malformed", dict(case, case="not a key")),
            ("case record observed a string", dict(case, observed="ok")),
            ("case record process a list", dict(case, process=[1])),
            ("case record labels numbers", dict(case, labels=[1])),
            ("case record failing a string", dict(case, failing="no")),
            ("record kind unknown", dict(case, record="mystery")),
            ("header fingerprint a list", dict(header, fingerprint=[])),
            ("case record a list", [case]),
            ("record a number", 5),
        ]:
            dest = self.fresh_run_copy(out)
            path = os.path.join(dest, "results.jsonl")
            with open(path, "w") as f:
                f.write("\n".join(lines[:at] + [json.dumps(bad_line)] + lines[at + 1:]) + "\n")
            self.assert_refused("results.jsonl", kind, self.pitfall_bounded("report", dest, "--format", "json"), path)

    def test_summary_json(self):
        out = self.finished_run()
        with open(os.path.join(out, "summary.json")) as f:
            valid = f.read()
        for kind, make in file_kinds(valid):
            if kind == "missing":
                continue  # a run killed before its end has no summary: reported as interrupted
            dest = self.fresh_run_copy(out)
            path = os.path.join(dest, "summary.json")
            os.remove(path)
            make(path)
            r = self.pitfall_bounded("report", dest, "--format", "json")
            self.assert_refused("summary.json", kind, r, path)

    def test_matrix_cell_files(self):
        runs = [self.finished_run()]
        for kind, make in file_kinds(json.dumps({"id": "c", "outcome": "ran"})):
            if kind == "missing":
                continue  # a folder without cell.json is read as a plain run folder
            cell = self.fresh_path("cell")
            os.makedirs(cell)
            make(os.path.join(cell, "cell.json"))
            r = self.pitfall_bounded("report", "--merge", runs[0], cell, "--format", "markdown",
                                     "--out", self.fresh_path("merged.md"))
            self.assert_refused("matrix cell.json", kind, r, os.path.join(cell, "cell.json"))

    def test_fleet_node_files(self):
        """A fleet node folder's node.json (`pitfall fleet run` writes it): every bad file kind
        and fields of the wrong type or value, merged with a good node folder."""
        valid = {"schema": "pitfall.fleet-node/1", "node": "gpu1", "outcome": "ran"}
        good = self.fresh_path("good-node")
        os.makedirs(good)
        subprocess.run(["cp", "-r", self.finished_run(), os.path.join(good, "run")], check=True)
        self.write_json(os.path.join(good, "node.json"), valid)
        fields = [
            ("outcome unknown", json.dumps(dict(valid, outcome="exploded"))),
            ("outcome a number", json.dumps(dict(valid, outcome=0))),
            ("outcome missing", json.dumps({"schema": valid["schema"], "node": "gpu1"})),
            ("node a list", json.dumps(dict(valid, node=["gpu1"]))),
            ("node empty", json.dumps(dict(valid, node=""))),
            ("schema another", json.dumps(dict(valid, schema="pitfall.fleet-node/2"))),
            ("slurm_state a number", json.dumps(dict(valid, slurm_state=7))),
            ("reason an object", json.dumps(dict(valid, reason={"why": 1}))),
            ("message huge number", '{"schema": "pitfall.fleet-node/1", "node": "n", "outcome": "ran", '
                                    '"message": 1e400}'),
        ]
        for kind, make in file_kinds(json.dumps(valid)) + fields:
            if kind == "missing":
                continue  # a folder without node.json is read as a plain run folder (and refused mixed)
            node = self.fresh_path("gpu2")
            os.makedirs(node)
            path = os.path.join(node, "node.json")
            if isinstance(make, str):
                with open(path, "w") as f:
                    f.write(make)
            else:
                make(path)
            r = self.pitfall_bounded("report", "--merge", good, node, "--format", "markdown",
                                     "--out", self.fresh_path("fleet.md"))
            self.assert_refused("fleet node.json", kind, r, path)
        # Fields the report does not read, and unknown ones, are tolerated whatever they hold; a
        # FIFO as doctor.json is shown on the node's row, not waited on.
        self.write_json(os.path.join(good, "node.json"),
                        dict(valid, run_exit="zero", elapsed_s=1e308, array_task=[[[]]], later={"x": None}))
        os.mkfifo(os.path.join(good, "doctor.json"))
        out = self.fresh_path("fleet.md")
        r = self.pitfall_bounded("report", "--merge", good, "--format", "markdown", "--out", out)
        self.assert_no_crash("fleet node.json with extra fields", r)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            row = next(line for line in f if line.startswith("| `gpu1` |"))
        self.assertIn("| unreadable: ", row)
        self.assertIn("doctor.json: is a FIFO, not a file", row)


class ResultFileKinds(Kinds):
    """A scenario program that writes a bad result file: each case is CRASH `bad_result` with
    the reason, and the run goes on to the next case."""

    WRITER = r'''#!/usr/bin/env python3
import json, os, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
variant, out, backend = args["--variant"], args["--out"], args["--backend"]
good = {"schema": "pitfall.result/1", "scenario": "bad_results", "variant": variant,
        "backend": backend, "outcome": {"status": "ok"}}
def write(data):
    with open(out, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
KINDS = {KINDS}
kind = KINDS[variant]
if kind == "fifo":
    os.mkfifo(out)
elif kind == "directory":
    os.makedirs(out)
elif kind == "symlink_loop":
    os.symlink(out, out)
elif kind == "sparse":
    with open(out, "wb") as f:
        f.truncate(1 << 30)
elif isinstance(kind, dict):
    write(json.dumps(dict(good, **kind)))
else:
    write(kind.replace("@GOOD@", json.dumps(good)).encode("utf-8", "surrogateescape"))
sys.exit(0)
'''

    KINDS = {
        "truncated": '{"schema": "pitfall.result/1", "scen',
        "not_json": "{ not json",
        "empty": "",
        "deep_arrays": "[" * DEPTH + "]" * DEPTH,
        "deep_objects": '{"a":' * DEPTH + "1" + "}" * DEPTH,
        "non_utf8": '{"schema": "pitfall.result/1", "note": "\udce9"}',
        "number_past_double": '{"schema": 1e999}',
        "nan": '{"schema": NaN}',
        "top_level_array": "[@GOOD@]",
        "top_level_number": "5",
        "trailing_garbage": "@GOOD@}x",
        "nul_byte": "\0@GOOD@",
        "outcome_number": {"outcome": 5},
        "outcome_status_unknown": {"outcome": {"status": "fine"}},
        "samples_string": {"samples": "x"},
        "samples_values_strings": {"samples": {"s": {"unit": "s", "values": ["a"]}}},
        "measurements_list": {"measurements": [1]},
        "info_string": {"info": "x"},
        "schema_other": {"schema": "pitfall.result/9"},
        "scenario_other": {"scenario": "another"},
        "variant_number": {"variant": 5},
        "error_number": {"outcome": {"status": "error", "error": 5}},
        "sticky_string": {"outcome": {"status": "error", "error": "x", "sticky": "yes"}},
        "unknown_field": {"colour": "red"},
        "fifo": "fifo",
        "directory": "directory",
        "symlink_loop": "symlink_loop",
        "sparse": "sparse",
    }

    def test_result_files(self):
        folder = os.path.join(self.tmp, "bad_results")
        os.makedirs(folder)
        program = os.path.join(folder, "bad_results.py")
        with open(program, "w") as f:
            f.write(self.WRITER.replace("{KINDS}", repr(self.KINDS)))
        os.chmod(program, 0o755)
        manifest = os.path.join(folder, "scenario.json")
        self.write_json(manifest, {
            "name": "bad_results", "summary": "result files of every bad kind",
            "failure_class": "harness", "labels": ["fixture"], "backends": ["cpu"],
            "timeout_seconds": 20, "params": {},
            "variants": [{"name": v, "kind": "reproduce", "doc": v} for v in self.KINDS]})
        index = self.write_index(manifest=manifest, program=program, name="bad_results")
        out = self.run_dir("bad_results")
        r = self.pitfall_bounded("run", "--out", out, index=index, timeout=300)
        self.assert_no_crash("result files", r)
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        cases = by_case(out)
        for variant in self.KINDS:
            rec = cases.get(f"cpu.bad_results.{variant}")
            self.assertIsNotNone(rec, f"{variant}: no record; the run did not go on")
            self.assertEqual(rec["verdict"], "CRASH", f"{variant}: {rec}")
            self.assertEqual(rec["observed"].get("status"), "bad_result", f"{variant}: {rec['observed']}")
            self.tried.append(("result file", variant, "CRASH bad_result: " + rec["reason"][:160]))
        report = json.load(open(os.path.join(out, "report.json")))
        self.assertEqual(len(report["cases"]), len(self.KINDS))


class FlagKinds(Kinds):
    """Flag values that make no sense: exit 2 naming the flag, before any case starts (no run
    folder written)."""

    FLAGS = [
        ("--timeout-scale", "nan"), ("--timeout-scale", "inf"), ("--timeout-scale", "-1"),
        ("--timeout-scale", "0"), ("--timeout-scale", "1e999"), ("--timeout-scale", "x"),
        ("--samples", "0"), ("--samples", "-3"), ("--samples", "1e9"), ("--samples", "2"),
        ("--samples", "99999999999999999999"), ("--samples", "x"),
        ("--timing-floor", "nan"), ("--timing-floor", "-0.1"), ("--timing-floor", "inf"),
        ("--remeasure-pause", "nan"), ("--remeasure-pause", "-1"), ("--remeasure-pause", "1e999"),
        ("--skip-code", "-1"), ("--skip-code", "256"), ("--skip-code", "x"),
        ("--scenario", ""), ("--scenario", "harness_fixture,,x"), ("--variant", ""),
        ("--backend", ""), ("--backend", "tpu"), ("--label", ""), ("--variant", ","),
        ("--profile", ""), ("--out", ""),
    ]

    def test_flag_values(self):
        for flag, value in self.FLAGS:
            out = self.fresh_path("run")
            args = ["run", flag, value] + (["--out", out] if flag != "--out" else [])
            r = self.pitfall_bounded(*args)
            # The message names the flag, or the value with what it should be ("unknown backend 'tpu'").
            named = flag if flag in r.stderr or not value else f"'{value}'"
            self.assert_refused("flag", f"{flag} {value!r}", r, named)
            self.assertFalse(os.path.exists(os.path.join(out, "results.jsonl")), f"{flag} {value!r}: a case started")


class EnvKinds(Kinds):
    """Environment variables pitfall reads: a bad value is exit 2 naming it, before any case."""

    VALUES = [
        ("PITFALL_DEVICE_MEMORY_LIMIT", "lots"), ("PITFALL_DEVICE_MEMORY_LIMIT", "-5"),
        ("PITFALL_DEVICE_MEMORY_LIMIT", "1e999"), ("PITFALL_DEVICE_MEMORY_LIMIT", "99999999999999999999999"),
        ("PITFALL_DEVICE_MEMORY_LIMIT", "12Q"),
        ("PITFALL_INJECT", "nonsense"), ("PITFALL_INJECT", "slowdown:cpu.no_such.case:2"),
        ("PITFALL_INJECT", "no_such_kind:cpu.harness_fixture.ok:1"), ("PITFALL_INJECT", ",,"),
        ("PITFALL_INJECT", "slowdown:cpu.harness_fixture.ok:nan"),
        ("PITFALL_CONTAINMENT", "sandbox"), ("PITFALL_CONTAINMENT", "cgroup,subreaper"),
    ]

    def test_environment_values(self):
        for name, value in self.VALUES:
            out = self.fresh_path("run")
            r = self.pitfall_bounded("run", "--variant", "ok", "--backend", "cpu", "--out", out,
                                     env=dict(os.environ, **{name: value}))
            self.assert_refused("environment", f"{name}={value}", r, name)
            self.assertFalse(os.path.exists(os.path.join(out, "results.jsonl")), f"{name}={value}: a case started")

    def test_non_utf8_environment_is_recorded_not_fatal(self):
        for name in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"):
            out = self.fresh_path("run")
            env = dict(os.environb)
            env[name.encode()] = b"/opt/\xe9\xff"
            r = self.pitfall_bounded("run", "--variant", "ok", "--backend", "cpu", "--samples", "1",
                                     "--out", out, env=env)
            self.assert_no_crash(name, r)
            self.assertIn(r.returncode, (0, 1), r.stderr[-2000:])
            self.assertIn("cpu.harness_fixture.ok", by_case(out))
            self.tried.append(("environment", f"{name} not UTF-8", f"recorded, exit {r.returncode}"))


class MatrixFileKinds(Kinds):
    def test_matrix_file(self):
        with open(os.path.join(ROOT, "ci", "matrix.json")) as f:
            valid = f.read()
        for kind, make in file_kinds(valid):
            path = self.fresh_path("matrix.json")
            make(path)
            try:
                r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "pitfall-matrix"), "list",
                                    "--matrix", path], capture_output=True, text=True, timeout=30)
            except subprocess.TimeoutExpired:
                self.fail(f"matrix file / {kind}: a hang")
            self.assert_refused("matrix file", kind, r, path)


if __name__ == "__main__":
    unittest.main()
