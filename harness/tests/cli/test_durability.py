"""Nothing lost, sane values only: a full disk mid-run, two runs of one folder, bytes that are
not UTF-8, bad flags and variables, a GPU claimed where there is none.

Run by CTest like test_cli.py (PITFALL_BIN and the fixture paths in the environment).
"""
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time

from test_cli import BIN, INDEX, PROGRAM, FixtureTest, by_case, observed_entry, records

OK, UNSUPPORTED, TWO = ("cpu.harness_fixture." + v for v in ("ok", "unsupported", "two_processes"))


def lines_of(run_dir):
    with open(os.path.join(run_dir, "results.jsonl"), "rb") as f:
        return f.read()


def whole_records(test, data):
    """Every line of results.jsonl is a whole JSON record in UTF-8; the file ends a line."""
    test.assertTrue(data.endswith(b"\n"), data[-200:])
    return [json.loads(line.decode("utf-8")) for line in data.splitlines() if line.strip()]


def wait_for(predicate, what, limit=30):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {limit} s")


class DiskFull(FixtureTest):
    """A write to results.jsonl that fails ends the run with exit 2 and no partial line."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}
    ARGS = ("--variant", "ok,unsupported,two_processes", "--backend", "cpu", "--samples", "1")

    def run_limited(self, out, limit):
        def limit_file_size():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        return self.pitfall("run", *self.ARGS, "--out", out, preexec_fn=limit_file_size)

    def test_file_size_limit_mid_run_then_resume(self):
        # A run without the limit says how long each line is; the limit then falls in the middle
        # of the second case's record (same-length folder names: the same header length).
        ref, out = self.run_dir("ref0"), self.run_dir("run1")
        self.assertEqual(self.pitfall("run", *self.ARGS, "--out", ref).returncode, 0)
        lines = lines_of(ref).splitlines(keepends=True)
        kinds = [(r["record"], r.get("case")) for r in map(json.loads, lines)]
        second = kinds.index(("case", UNSUPPORTED))
        limit = sum(map(len, lines[:second])) + len(lines[second]) // 2

        p = self.run_limited(out, limit)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        results = os.path.join(out, "results.jsonl")
        self.assertIn("pitfall: error: cannot write " + results, p.stderr)
        self.assertIn("File too large (EFBIG)", p.stderr)
        self.assertIn(UNSUPPORTED + " is not recorded", p.stderr)
        self.assertIn("pitfall run --resume " + out, p.stderr)
        self.assertIn("NOT RECORDED", p.stdout)
        self.assertNotIn("UNSUPPORTED", p.stdout)  # never printed as finished
        data = lines_of(out)
        self.assertLessEqual(len(data), limit)
        kept = whole_records(self, data)
        self.assertEqual([r["case"] for r in kept if r["record"] == "case"], [OK])
        self.assertEqual(by_case(out)[OK]["verdict"], "PASS")
        self.assertFalse(os.path.exists(os.path.join(out, "summary.json")))

        p = self.pitfall("run", "--resume", out)  # room again
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(r["case"] for r in records(out)), sorted([OK, UNSUPPORTED, TWO]))
        whole_records(self, lines_of(out))
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertTrue(summary["complete"])
        self.assertEqual(summary["cases_finished"], 3)

    def test_a_full_tmpfs_is_enospc(self):
        mnt = os.path.join(self.tmp, "small")
        os.makedirs(mnt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt],
                          capture_output=True).returncode != 0:
            self.skipTest("cannot mount a tmpfs here (needs root); the RLIMIT_FSIZE test stands")
        try:
            self.fill_then_resume(mnt)
        finally:
            subprocess.run(["umount", "-l", mnt], capture_output=True)

    def fill_then_resume(self, mnt):
        out = os.path.join(mnt, "run")
        env = dict(os.environ, PITFALL_FIXTURE_SLEEP_MS="700")
        # Enough cases that the records left to write cannot all fit in the last page of
        # results.jsonl once every free page is taken.
        variants = "ok,unsupported,two_processes,bad_check,exit3"
        proc = subprocess.Popen([BIN, "run", "--variant", variants, "--backend", "cpu", "--samples", "1",
                                 "--out", out, "--index", INDEX, "--expected", self.expected],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        wait_for(lambda: len(records(out)) >= 1, "the first case")
        with open(os.path.join(mnt, "filler"), "wb", buffering=0) as f:  # every free page taken
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        stdout, stderr = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 2, stdout + stderr)
        self.assertIn("No space left on device", stderr)
        # Which write meets the full disk first depends on how much of results.jsonl's last
        # page is free: an append (the case is then "not recorded"), or summary.json.
        if "results.jsonl" in stderr:
            self.assertIn("is not recorded", stderr)
        else:
            self.assertIn("summary.json", stderr)
        kept = whole_records(self, lines_of(out))
        self.assertIn(OK, [r["case"] for r in kept if r["record"] == "case"])
        os.unlink(os.path.join(mnt, "filler"))
        p = self.pitfall("run", "--resume", out)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # bad_check and exit3 fail
        cases = [r["case"] for r in records(out)]
        self.assertEqual(sorted(cases), sorted("cpu.harness_fixture." + v for v in variants.split(",")))
        whole_records(self, lines_of(out))


class ConcurrentResume(FixtureTest):
    """One run at a time writes a run folder: a second run or resume of it is exit 2."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}

    def test_resume_of_a_folder_in_use_is_refused(self):
        out = self.run_dir()
        env = dict(os.environ, PITFALL_FIXTURE_SLEEP_MS="1500")
        proc = subprocess.Popen([BIN, "run", "--variant", "ok,unsupported", "--backend", "cpu", "--samples", "1",
                                 "--out", out, "--index", INDEX, "--expected", self.expected],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        wait_for(lambda: records(out, "started"), "the first case")
        for args in (("--resume", out), ("--out", out, "--replace", "--variant", "ok", "--backend", "cpu")):
            with self.subTest(args=args):
                p = self.pitfall("run", *args)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(f"{out} is in use by pitfall pid {proc.pid}", p.stderr)
        stdout, stderr = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, stdout + stderr)
        self.assertEqual(sorted(r["case"] for r in records(out)), [OK, UNSUPPORTED])  # each once
        self.assertEqual(len(records(out, "run")), 1)
        self.assertEqual(records(out, "resumed"), [])
        # Readers need no lock; once the run is over, a resume may go (nothing left to run).
        self.assertEqual(self.pitfall("report", out, "--format", "json").returncode, 0)
        p = self.pitfall("run", "--resume", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("resuming: 2 cases already finished", p.stdout)


def fake_scenario(test, name, backend, result, output=b"", probe_gpus=0):
    """An index of one scenario whose program is a script writing `result` (a fixture result
    document with this case's names), printing `output`, with a probe that reports
    `probe_gpus` CUDA devices. Returns the index path."""
    folder = os.path.join(test.tmp, name)
    os.makedirs(folder)
    doc = dict(result, scenario=name, variant="claim", backend=backend)
    test.write_json(os.path.join(folder, "result.json"), doc)
    test.write_json(os.path.join(folder, "scenario.json"), {
        "name": name, "summary": "A program that says what the test needs", "failure_class": "harness",
        "labels": ["fixture"], "backends": [backend], "timeout_seconds": 10,
        "variants": [{"name": "claim", "kind": "reproduce", "doc": "writes result.json as its result"}]})
    with open(os.path.join(folder, "output.bin"), "wb") as f:
        f.write(output)
    program = os.path.join(folder, "program")
    with open(program, "w") as f:
        f.write(f"""#!{sys.executable}
import shutil, sys
here = {folder!r}
sys.stdout.buffer.write(open(here + "/output.bin", "rb").read())
shutil.copy(here + "/result.json", sys.argv[sys.argv.index("--out") + 1])
""")
    probe = os.path.join(folder, "probe")
    facts = {"schema": "pitfall.probe/1", "built_with_cuda": True,
             "cuda": {"runtime_version": 12080, "driver_version": 12080 if probe_gpus else 0,
                      "device_count": probe_gpus},
             "cudnn": {"unavailable": "not here"}, "loaded_libraries": []}
    with open(probe, "w") as f:
        f.write(f"#!{sys.executable}\nprint({json.dumps(json.dumps(facts))})\n")
    for path in (program, probe):
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    index = os.path.join(folder, "index.json")
    test.write_json(index, {"schema": "pitfall.index/1", "built_with_cuda": True,
                            "paths": {"probe": "probe"},
                            "scenarios": [{"name": name, "program": "program", "manifest": "scenario.json"}]})
    return index


def fixture_result(test):
    """A real result document of the fixture's cpu ok case, as a template."""
    path = os.path.join(test.tmp, "template.json")
    subprocess.run([PROGRAM, "--backend", "cpu", "--variant", "ok", "--out", path, "--param", "samples=1"],
                   check=True, capture_output=True, timeout=30)
    with open(path) as f:
        return json.load(f)


class GpuClaim(FixtureTest):
    """A CUDA case that says it ran on a device, on a machine whose fingerprint has none."""

    RAN_ON = "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)"

    COUNTED = {"kernels": 7, "library_calls": 2, "required": True}  # as the SDK writes it

    def run_claim(self, gpus, gpu_work=COUNTED):
        name = f"gpu_claim_{gpus}"
        result = dict(fixture_result(self), ran_on=self.RAN_ON, outcome={"status": "ok"})
        if gpu_work is not None:
            result["gpu_work"] = gpu_work
        index = fake_scenario(self, name, "cuda", result, probe_gpus=gpus)
        self.write_json(os.path.join(self.expected, "any", name + ".json"),
                        {"schema": "pitfall.expected/1", "scenario": name,
                         "cases": {"cuda.claim": observed_entry("cuda.claim", {"outcome": {"status": "ok"}})}})
        out = self.run_dir(name)
        p = self.pitfall("run", "--out", out, index=index)
        return p, by_case(out)[f"cuda.{name}.claim"], records(out, "run")[0]["fingerprint_summary"]

    def test_a_device_claimed_without_a_gpu_fails(self):
        p, rec, fp = self.run_claim(0)
        self.assertEqual(fp["gpu_count"], 0)
        self.assertEqual(rec["verdict"], "FAIL", rec["reason"])
        self.assertIn("claims a GPU the machine does not have", rec["reason"])
        self.assertIn(self.RAN_ON, rec["reason"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)

    def test_the_same_claim_with_a_gpu_passes(self):
        p, rec, fp = self.run_claim(1)
        self.assertEqual(fp["gpu_count"], 1)
        self.assertEqual(rec["verdict"], "PASS", rec["reason"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_a_gpu_claim_with_zero_counted_launches_fails(self):
        # A GPU is there, the case says it ran on it, and the device counted nothing: its words
        # are all there is, and `pitfall run` judges the claim FAIL.
        p, rec, fp = self.run_claim(1, {"kernels": 0, "library_calls": 0, "required": True})
        self.assertEqual(fp["gpu_count"], 1)
        self.assertEqual(rec["verdict"], "FAIL", rec["reason"])
        self.assertIn("GPU asked for, no GPU work counted", rec["reason"])
        self.assertIn(self.RAN_ON, rec["reason"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)

    def test_a_gpu_claim_without_the_sdks_count_fails(self):
        p, rec, _ = self.run_claim(1, None)
        self.assertEqual(rec["verdict"], "FAIL", rec["reason"])
        self.assertIn("the result has no gpu_work", rec["reason"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)


class NotUtf8(FixtureTest):
    """Bytes that are not UTF-8 (a path, the environment, a case's output) are recorded with
    U+FFFD, never fatal; such a run is resumed and completed."""

    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}

    def test_path_and_environment_then_resume(self):
        out = os.fsencode(self.tmp) + b"/run-\xff\xfe"
        env = dict(os.environb, PITFALL_FIXTURE_SLEEP_MS=b"1500",
                   LD_LIBRARY_PATH=os.environb.get(b"LD_LIBRARY_PATH", b"/nowhere") + b":/opt/\xff\xc3",
                   CUDA_VISIBLE_DEVICES=b"\xfe0")
        cmd = [os.fsencode(BIN), b"run", b"--variant", b"ok,unsupported", b"--backend", b"cpu", b"--samples", b"1",
               b"--index", os.fsencode(INDEX), b"--expected", os.fsencode(self.expected)]
        proc = subprocess.Popen(cmd + [b"--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, start_new_session=True)
        text_out = os.fsdecode(out)
        wait_for(lambda: len(records(text_out)) >= 1, "the first case")
        os.killpg(proc.pid, signal.SIGKILL)  # cut short: the resume must read what it wrote
        proc.wait()
        p = subprocess.run(cmd[:2] + [b"--resume", out] + cmd[-4:], capture_output=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        kept = whole_records(self, lines_of(text_out))  # strict UTF-8 decode
        self.assertEqual(sorted(r["case"] for r in kept if r["record"] == "case"), [OK, UNSUPPORTED])
        header = kept[0]
        self.assertIn(self.tmp + "/run-\ufffd\ufffd", header["argv"])
        environment = header["fingerprint"]["environment"]
        self.assertTrue(environment["LD_LIBRARY_PATH"].endswith(":/opt/\ufffd\ufffd"), environment)
        self.assertEqual(environment["CUDA_VISIBLE_DEVICES"], "\ufffd0")
        for name in ("summary.json", "report.json", "fingerprint.json"):
            with open(os.path.join(out, os.fsencode(name)), encoding="utf-8") as f:
                json.load(f)

    def test_output_tail_starts_at_a_character_and_replaces_bad_bytes(self):
        # Two-byte characters after one "x", then bytes that are not UTF-8 and a character cut
        # at the end: lengths chosen so that the 2000-byte tail starts inside a character.
        output = b"x" + "\u00e9".encode() * 1500 + b"\n\xff\xfe bad byte\n\xe2\x82"
        result = dict(fixture_result(self), outcome={"status": "ok"})
        index = fake_scenario(self, "noisy", "cpu", result, output=output)
        out = self.run_dir("noisy-run")
        p = self.pitfall("run", "--out", out, index=index)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        tail = whole_records(self, lines_of(out))[-1]["output_tail"]
        self.assertTrue(tail.startswith("\u00e9"), tail[:10])
        self.assertTrue(tail.endswith("\n\ufffd\ufffd bad byte\n\ufffd\ufffd"), ascii(tail[-40:]))
        self.assertLessEqual(len(tail.encode()), 2000 + 2 * 4)


class SaneValues(FixtureTest):
    """Each bad flag or variable: exit 2 naming it, before any case starts (no run folder)."""

    FLAGS = [
        (["--timeout-scale", "nan"], "--timeout-scale nan"),
        (["--timeout-scale", "inf"], "--timeout-scale inf"),
        (["--timeout-scale", "-1"], "--timeout-scale -1"),
        (["--timeout-scale", "0"], "--timeout-scale 0"),
        (["--timeout-scale", "1e999"], "--timeout-scale 1e999"),
        (["--timeout-scale", "1001"], "--timeout-scale 1001"),
        (["--samples", "0"], "--samples 0"),
        (["--samples", "-1"], "--samples -1"),
        (["--samples", "100003"], "--samples 100003"),
        (["--samples", "99999999999"], "--samples 99999999999"),
        (["--samples", "3.0"], "--samples 3.0"),
        (["--timing-floor", "nan"], "--timing-floor nan"),
        (["--timing-floor", "-0.1"], "--timing-floor -0.1"),
        (["--remeasure-pause", "inf"], "--remeasure-pause inf"),
        (["--remeasure-pause", "nan"], "--remeasure-pause nan"),
        (["--skip-code", "-1"], "--skip-code -1"),
        (["--scenario", ""], "--scenario: an empty value"),
        (["--variant", ""], "--variant: an empty value"),
        (["--backend", ""], "--backend: an empty value"),
        (["--label", ""], "--label: an empty value"),
        (["--variant", "ok,,segv"], "--variant 'ok,,segv': an empty item"),
        (["--scenario", "harness_fixture,"], "--scenario 'harness_fixture,': an empty item"),
        (["--backend", ",cpu"], "--backend ',cpu': an empty item"),
        (["--label", "fixture,,fixture"], "--label 'fixture,,fixture': an empty item"),
        (["--out", ""], "--out: an empty value"),
        (["--resume", ""], "--resume: an empty value"),
        (["--profile", ""], "--profile: an empty value"),
    ]
    ENV = [
        ("PITFALL_INJECT", "bogus", "PITFALL_INJECT: 'bogus': expected kind:case:argument"),
        ("PITFALL_INJECT", "nope:*:1", "unknown kind 'nope'"),
        ("PITFALL_INJECT", "slowdown:cpu.harness_fixture.nope:1.2", "no case 'cpu.harness_fixture.nope'"),
        ("PITFALL_INJECT", "slowdown:cpu.float64_inputs.remedy:1.2", "no case 'cpu.float64_inputs.remedy'"),
        ("PITFALL_INJECT", "slowdown:*:fast", "PITFALL_INJECT: 'slowdown:*:fast'"),
        ("PITFALL_INJECT", "slowdown:*:inf", "PITFALL_INJECT: 'slowdown:*:inf'"),
        ("PITFALL_INJECT", "slowdown:*:0.5", "PITFALL_INJECT: 'slowdown:*:0.5'"),
        ("PITFALL_INJECT", "extra_device_bytes:*:lots", "PITFALL_INJECT: 'extra_device_bytes:*:lots'"),
        ("PITFALL_INJECT", "outcome:cpu.harness_fixture.ok:", "expected kind:case:argument"),
        ("PITFALL_INJECT", "slowdown:*:1.2,,outcome:*:x", "an empty item"),
        ("PITFALL_DEVICE_MEMORY_LIMIT", "lots", "PITFALL_DEVICE_MEMORY_LIMIT='lots'"),
        ("PITFALL_DEVICE_MEMORY_LIMIT", "-1", "PITFALL_DEVICE_MEMORY_LIMIT='-1'"),
        ("PITFALL_DEVICE_MEMORY_LIMIT", "4Q", "PITFALL_DEVICE_MEMORY_LIMIT='4Q'"),
        ("PITFALL_DEVICE_MEMORY_LIMIT", "99999999999T", "PITFALL_DEVICE_MEMORY_LIMIT='99999999999T'"),
        ("PITFALL_EXPECTED", "/nonexistent", "PITFALL_EXPECTED=/nonexistent"),
    ]

    def assertRefused(self, p, needle):
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(needle, p.stderr)
        self.assertNotIn("cases ->", p.stdout)  # no session started
        self.assertFalse(os.path.exists(self.run_dir()), "no run folder for bad input")

    def test_bad_flags(self):
        for args, needle in self.FLAGS:
            with self.subTest(args=args):
                out = [] if args[0] in ("--out", "--resume") else ["--out", self.run_dir()]
                self.assertRefused(self.pitfall("run", *out, *args), needle)

    def test_bad_environment(self):
        for name, value, needle in self.ENV:
            with self.subTest(name=name, value=value):
                env = dict(os.environ, **{name: value})
                cmd = [BIN, "run", "--out", self.run_dir(), "--index", INDEX]
                if name != "PITFALL_EXPECTED":
                    cmd += ["--expected", self.expected]
                p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
                self.assertRefused(p, needle)
        env = dict(os.environ, PITFALL_INDEX="/nonexistent")
        p = subprocess.run([BIN, "run", "--out", self.run_dir(), "--expected", self.expected],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertRefused(p, "PITFALL_INDEX=/nonexistent")

    def test_good_values_still_run(self):
        env = dict(os.environ, PITFALL_DEVICE_MEMORY_LIMIT="64M",
                   PITFALL_INJECT="slowdown:cpu.harness_fixture.child_role:1.5")  # a helper: valid
        p = self.pitfall("run", "--out", self.run_dir(), "--variant", "ok", "--backend", "cpu",
                         "--timeout-scale", "1000", "--samples", "1", env=env)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        self.assertEqual(list(by_case(self.run_dir())), [OK])
