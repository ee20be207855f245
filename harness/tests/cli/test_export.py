"""`pitfall export --openmetrics`: a real run folder and a gate document as Prometheus metrics,
checked by promtool and scraped from a real prometheus-node-exporter reading them with its
textfile collector; bad inputs, bad flags and full disks refused with nothing written.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_REAL_INDEX, PITFALL_REAL_EXPECTED). The
ExportScrape class exits 77 (CTest's SKIP_RETURN_CODE) saying why where promtool or
prometheus-node-exporter is missing (Debian: the prometheus and prometheus-node-exporter
packages, put by ci/setup.sh).
"""
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from test_cli import BIN

HERE = os.path.dirname(os.path.abspath(__file__))
GATE_FIXTURE = os.path.join(HERE, "..", "fixtures", "gate", "drain.json")
REAL_INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
REAL_EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")
PROMTOOL = shutil.which("promtool") or ""
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter") or ""
LABEL_MAX = 128  # metrics_label_max_bytes
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')


def unescape(value):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def samples(text):
    """(name, {label: value}, value) of every sample line of an exposition text. A series
    repeated fails: Prometheus scraping the file itself refuses it (promtool and node_exporter
    1.5 let it pass)."""
    out, seen = [], set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = {k: unescape(v) for k, v in LABEL.findall(m.group(2) or "")}
        series = (m.group(1), tuple(sorted(labels.items())))
        assert series not in seen, f"series repeated: {line!r}"
        seen.add(series)
        out.append((m.group(1), labels, m.group(3)))
    return out


def find(all_samples, name, **labels):
    """The values of the samples of `name` whose labels include `labels`."""
    return [v for n, l, v in all_samples
            if n == name and all(l.get(k) == w for k, w in labels.items())]


def export(*args, **kwargs):
    return subprocess.run([BIN, "export", *args], capture_output=True, text=True, timeout=60,
                          **kwargs)


def make_run(out):
    """A real run of the cpu-only build: one small scenario on the CPU backend."""
    subprocess.run([BIN, "run", "--index", REAL_INDEX, "--expected", REAL_EXPECTED,
                    "--backend", "cpu", "--scenario", "async_error_reporting", "--out", out],
                   capture_output=True, text=True, timeout=300)
    assert os.path.isfile(os.path.join(out, "results.jsonl")), f"no run made in {out}"


def read_gate():
    with open(GATE_FIXTURE) as f:
        return json.load(f)


def hostile_gate():
    """The gate fixture with label text that would break the format raw: quotes, backslashes,
    newlines, a forged sample, a bidirectional override, 10 kB names, and a case listed twice."""
    gate = read_gate()
    gate["node"] = 'node"7\\x\n# TYPE pitfall_gate_verdict counter\nforged 1'
    gate["gpus"][0]["name"] = "NVIDIA \u202eH100\u0007 " + "n" * 10000
    gate["gpus"][1]["cases"][0]["case"] = "c" * 10000
    gate["gpus"][1]["cases"][1]["case"] = "c" * 10000 + "-other"
    gate["facts"]["device_name"] = '\\"}\n'
    # Listed twice: one series, or node_exporter refuses the whole file.
    gate["gpus"][0]["cases"].append(gate["gpus"][0]["cases"][0])
    return gate


class ExportTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN and REAL_INDEX, "run through CTest: PITFALL_BIN or the index unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-export-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return path


class ExportInput(ExportTest):
    """What is refused (exit 2, naming the file or flag, nothing written) and how a file is
    written: whole, mode 0644, or not at all."""

    def assert_refused(self, args, says, out=None):
        out = out or os.path.join(self.tmp, "out", "pitfall.prom")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        before = sorted(os.listdir(os.path.dirname(out)))
        r = export(*args, "--out", out)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(says, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(sorted(os.listdir(os.path.dirname(out))), before, "something written")

    def test_bad_inputs_are_refused_naming_the_file(self):
        os.makedirs(os.path.join(self.tmp, "not-a-run"))
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        report = self.write("report.json", json.dumps({"schema": "pitfall.report/1"}))
        wrong_type = read_gate()
        wrong_type["gpus"][0]["cases"] = {"case": "x"}
        inputs = {
            os.path.join(self.tmp, "not-a-run"): "not a run folder",
            fifo: fifo,
            report: "report.json: neither a run folder nor a gate document",
            self.write("text.json", "admit\n"): "text.json",
            self.write("bytes.json", b'{"schema": "pitfall.gate/1", "node": "\xff\xfe"}'):
                "bytes.json",
            self.write("deep.json", "[" * 200000 + "]" * 200000): "deep.json",
            self.write("huge.json", '{"schema": "pitfall.gate/1", "seconds": 1e99999}'):
                "huge.json",
            self.write("wrong.json", json.dumps(wrong_type)): "wrong.json: /gpus/0/cases",
            os.path.join(self.tmp, "absent"): "absent",
        }
        for path, says in inputs.items():
            with self.subTest(path=os.path.basename(path)):
                self.assert_refused(["--openmetrics", path], says)

    def test_bad_flags_are_refused(self):
        self.assert_refused(["--openmetrics", GATE_FIXTURE, "--prometheus"], "--prometheus")
        self.assert_refused([GATE_FIXTURE], "--openmetrics")
        self.assert_refused(["--openmetrics"], "RUN_OR_GATE_JSON")
        self.assert_refused(["--openmetrics", GATE_FIXTURE, GATE_FIXTURE], GATE_FIXTURE)

    def test_written_whole_with_mode_0644_whatever_the_umask(self):
        out = os.path.join(self.tmp, "pitfall.prom")
        r = export("--openmetrics", GATE_FIXTURE, "--out", out,
                   preexec_fn=lambda: os.umask(0o077))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o644)
        self.assertEqual(os.listdir(self.tmp), ["pitfall.prom"])  # no temporary left
        with open(out) as f:
            self.assertEqual(f.read(), export("--openmetrics", GATE_FIXTURE).stdout)

    def test_a_full_disk_leaves_no_file(self):
        with open("/dev/full", "w") as full:
            r = subprocess.run([BIN, "export", "--openmetrics", GATE_FIXTURE], stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("No space left on device", r.stderr)
        mnt = os.path.join(self.tmp, "small")
        os.makedirs(mnt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", mnt],
                          capture_output=True).returncode != 0:
            self.skipTest("cannot mount a tmpfs here (needs root); /dev/full was tested")
        try:
            # Filled, so that the export's first page is the one that does not fit.
            with open(os.path.join(mnt, "filler"), "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 1024)
                except OSError:
                    pass
            out = os.path.join(mnt, "pitfall.prom")
            r = export("--openmetrics", GATE_FIXTURE, "--out", out)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("No space left on device", r.stderr)
            self.assertIn(out, r.stderr)
            self.assertEqual(os.listdir(mnt), ["filler"])
        finally:
            subprocess.run(["umount", "-l", mnt], capture_output=True)


class ExportScrape(ExportTest):
    """promtool reads every file; node_exporter's textfile collector serves them."""

    @classmethod
    def setUpClass(cls):
        missing = [name for name, path in (("promtool (Debian: prometheus)", PROMTOOL),
                                           ("prometheus-node-exporter", NODE_EXPORTER))
                   if not path]
        if missing:
            # CTest runs each class in a process of its own (CMakeLists.txt): 77 is its skip.
            sys.stderr.write("SKIP: not installed: " + ", ".join(missing) + "\n")
            sys.stderr.flush()
            os._exit(77)
        cls.run_tmp = tempfile.mkdtemp(prefix="pitfall-export-run-")
        cls.run_dir = os.path.join(cls.run_tmp, "run")
        make_run(cls.run_dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.run_tmp, ignore_errors=True)

    def promtool(self, path):
        with open(path) as f:
            r = subprocess.run([PROMTOOL, "check", "metrics"], stdin=f, capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(r.returncode, 0, f"promtool on {path}: {r.stdout}{r.stderr}")

    def exported(self, source, name):
        """`source` exported into the textfile folder as `name`, checked by promtool."""
        folder = os.path.join(self.tmp, "textfile")
        os.makedirs(folder, exist_ok=True)
        out = os.path.join(folder, name)
        r = export("--openmetrics", source, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.promtool(out)
        with open(out) as f:
            samples(f.read())
        return folder

    def scrape(self, folder):
        """Starts node_exporter on a free port of 127.0.0.1 reading `folder`, scrapes it, and
        stops it. A series repeated within or across files is no scrape error to it: it logs
        "error gathering metrics" and serves the first, so its log is read too."""
        for _ in range(5):  # the port may be taken between finding it free and the bind
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            daemon = subprocess.Popen(
                [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}",
                 "--collector.disable-defaults", "--collector.textfile",
                 f"--collector.textfile.directory={folder}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            body = None
            try:
                deadline = time.monotonic() + 20
                while body is None and time.monotonic() < deadline and daemon.poll() is None:
                    try:
                        url = f"http://127.0.0.1:{port}/metrics"
                        with urllib.request.urlopen(url, timeout=5) as response:
                            body = response.read().decode("utf-8")
                    except OSError:
                        time.sleep(0.1)
            finally:
                daemon.terminate()
                _, stderr = daemon.communicate(timeout=10)
            if body is not None:
                self.assertNotIn("error gathering metrics", stderr)
                return body
            if "address already in use" not in stderr:
                self.fail(f"node_exporter served nothing: {stderr[-2000:]}")
        self.fail("no free port for node_exporter")

    def test_a_run_and_a_gate_are_scraped_with_their_labels(self):
        self.exported(self.run_dir, "pitfall.prom")
        folder = self.exported(GATE_FIXTURE, "pitfall-gate.prom")
        scraped = samples(self.scrape(folder))
        self.assertEqual(find(scraped, "node_textfile_scrape_error"), ["0"])
        with open(os.path.join(self.run_dir, "results.jsonl")) as f:
            cases = [r for r in map(json.loads, f) if r["record"] == "case"]
        self.assertEqual(len(cases), 3)
        for r in cases:  # the run's own verdicts, read from its records
            self.assertEqual(find(scraped, "pitfall_case_verdict", case=r["case"],
                                  verdict=r["verdict"]), ["1"], r["case"])
            self.assertEqual(len(find(scraped, "pitfall_case_outcome", case=r["case"])), 1)
        passed = sum(r["verdict"] == "PASS" for r in cases)
        self.assertEqual(find(scraped, "pitfall_cases", source="run", verdict="PASS"),
                         [str(passed)])
        self.assertEqual(find(scraped, "pitfall_cases", source="gate", verdict="CRASH"), ["1"])
        with open(os.path.join(self.run_dir, "results.jsonl")) as f:
            header = json.loads(f.readline())
        self.assertEqual(find(scraped, "pitfall_fingerprint_info", source="run",
                              fingerprint_id=header["fingerprint_id"]), ["1"])
        self.assertEqual(len(find(scraped, "pitfall_run_timestamp_seconds")), 1)
        self.assertEqual(len(find(scraped, "pitfall_doctor_findings", source="run")), 2)
        self.assertEqual(find(scraped, "pitfall_gate_verdict", node="gpu-node-07", verdict="drain"),
                         ["1"])
        self.assertEqual(find(scraped, "pitfall_gate_verdict", node="gpu-node-07", verdict="admit"),
                         ["0"])
        self.assertEqual(find(scraped, "pitfall_gate_gpu_verdict", index="1", verdict="drain",
                              uuid="GPU-2b7c1d4f-9e30-4f62-8b8d-1c4e6f80ab22"), ["1"])
        self.assertEqual(find(scraped, "pitfall_fingerprint_info", source="gate",
                              device_name="NVIDIA H100 80GB HBM3", cuda_runtime_version="13000",
                              driver_branch="580"), ["1"])

    def test_hostile_label_values_survive_promtool_and_node_exporter(self):
        gate = hostile_gate()
        folder = self.exported(self.write("hostile.json", json.dumps(gate)), "pitfall-gate.prom")
        text = self.scrape(folder)
        scraped = samples(text)
        self.assertEqual(find(scraped, "node_textfile_scrape_error"), ["0"])
        self.assertNotIn("forged", [n for n, _, _ in scraped])
        self.assertEqual(find(scraped, "pitfall_gate_verdict", node=gate["node"], verdict="drain"),
                         ["1"])
        names = {l["name"] for n, l, _ in scraped if n == "pitfall_gate_gpu_verdict"}
        cut = [v for v in names if v.startswith("NVIDIA \ufffdH100\ufffd n")]
        self.assertEqual(len(cut), 1, names)
        self.assertLessEqual(len(cut[0].encode()), LABEL_MAX)
        long_cases = {l["case"] for n, l, _ in scraped
                      if n == "pitfall_gate_case_verdict" and l["case"].startswith("ccc")}
        self.assertEqual(len(long_cases), 2, "two long names cut alike must stay two series")
        self.assertEqual(find(scraped, "pitfall_fingerprint_info", source="gate",
                              device_name='\\"}\n'), ["1"])


if __name__ == "__main__":
    unittest.main()
