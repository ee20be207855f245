"""Named parameter sets of a variant (scenario.json "params" / "param_set"), on the real
float64_inputs program and the real baselines: the set reaches the case, `--param` still wins,
the seed-size cases are CUDA only, and every profile that expects float64_inputs' CUDA cases
expects these too.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN and the real index.
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("PITFALL_BIN", "")
REAL_INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
REAL_EXPECTED = os.environ.get("PITFALL_REAL_EXPECTED", "")

SEED_SET = {"features": 1000, "hidden": 1024, "batch": 1024, "rows": 16384, "check_rows": 256,
            "check_epochs": 2}
SEED_VARIANTS = ("reproduce_seed_size", "remedy_seed_size")


class ParameterSets(unittest.TestCase):

    def setUp(self):
        self.assertTrue(BIN and REAL_INDEX, "run through CTest: PITFALL_BIN and PITFALL_REAL_INDEX unset")
        with open(REAL_INDEX) as f:
            index = json.load(f)
        programs = [s["program"] for s in index["scenarios"] if s["name"] == "float64_inputs"]
        if not programs:
            self.skipTest("float64_inputs is not in this build (PITFALL_SCENARIOS)")
        self.program = programs[0]
        self.built_with_cuda = index.get("built_with_cuda", False)
        self.tmp = tempfile.mkdtemp(prefix="pitfall-sets-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp], check=False)

    def test_list_shows_the_set_on_cuda_cases_only(self):
        p = subprocess.run([BIN, "list", "--json", "--scenario", "float64_inputs", "--index", REAL_INDEX],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {r["variant"]: r for r in json.loads(p.stdout) if r["variant"] in SEED_VARIANTS}
        self.assertEqual(sorted(rows), sorted(SEED_VARIANTS))
        for row in rows.values():
            self.assertEqual(row["backend"], "cuda")  # too slow, and pointless, on 2 CPU cores
            self.assertEqual(row["param_set"], "seed_1000_features")
            self.assertEqual(row["params"], SEED_SET)
        plain = [r for r in json.loads(p.stdout) if r["variant"] == "reproduce"]
        self.assertTrue(plain and all("params" not in r for r in plain))

    def test_the_case_runs_with_the_set_and_the_command_line_wins(self):
        out = os.path.join(self.tmp, "result.json")
        # rows=2048 and one sample keep it short where a GPU runs it for real.
        p = subprocess.run([self.program, "--backend", "cuda", "--variant", "reproduce_seed_size",
                            "--out", out, "--param", "rows=2048", "--param", "samples=1"],
                           capture_output=True, text=True, timeout=120)
        self.assertIn(p.returncode, (0, 77), p.stdout + p.stderr)  # ran, or no GPU here
        with open(out) as f:
            result = json.load(f)
        self.assertEqual(result["info"]["param_set"], "seed_1000_features")
        want = dict(SEED_SET, rows=2048, samples=1, learning_rate=0.001)
        self.assertEqual({k: result["params"][k] for k in want}, want)
        if p.returncode == 0:
            self.assertEqual(result["measurements"]["input_bytes"]["value"], (2048 * 1000 + 2048) * 8)

    def test_the_cpu_backend_is_refused(self):
        p = subprocess.run([self.program, "--backend", "cpu", "--variant", "remedy_seed_size",
                            "--out", os.path.join(self.tmp, "r.json")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("variant 'remedy_seed_size' does not run on backend 'cpu'", p.stderr)

    def test_every_profile_expecting_the_cuda_cases_expects_the_seed_size_ones(self):
        profiles = 0
        for profile in sorted(os.listdir(REAL_EXPECTED)):
            path = os.path.join(REAL_EXPECTED, profile, "float64_inputs.json")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                doc = json.load(f)
            if "cuda.reproduce" not in doc["cases"]:
                continue
            profiles += 1
            for variant in SEED_VARIANTS:
                self.assertIn("cuda." + variant, doc["cases"], profile)
            if doc["cases"]["cuda.reproduce"]["outcome"]["status"] == "ok":  # a GPU profile
                bound = doc.get("ratios", {}).get("cuda.fp64_over_fp32_epoch_time_seed_size")
                self.assertIsNotNone(bound, profile)
                self.assertEqual(bound["provenance"]["kind"], "documented", profile)
                self.assertIn("docs/cuda-rules.md#fp64-vs-fp32-throughput-by-architecture",
                              bound["provenance"]["source"])
        self.assertGreaterEqual(profiles, 3)  # no-gpu, ada-ampere-cuda12, hopper-cuda13


if __name__ == "__main__":
    unittest.main()
