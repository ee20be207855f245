"""cuBLAS and cuDNN opened on first call, seen by the dynamic loader on the real scenario programs.

A CPU case must not map libcublas, libcublasLt or libcudnn (they were ~200 MiB of its peak RSS
when the programs linked them); a CUDA case that calls cuDNN opens it then, with dlopen; and a
library kept off the loader's path is the error of the call that needed it, in the loader's
words. Evidence: LD_DEBUG=files, glibc's own trace of every object it loads and why ("needed
by" for DT_NEEDED, "dynamically loaded by" for dlopen).

Run by CTest with PITFALL_REAL_INDEX (this build's index of the scenario programs).
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

INDEX = os.environ.get("PITFALL_REAL_INDEX", "")
# "file=libcudnn.so.9 [0];  dynamically loaded by /path/version_mismatch [0]"
LOADED = re.compile(r"\bfile=(\S+) \[\d+\];\s+(needed by|dynamically loaded by) (\S+)")
CUDA_MATH = ("libcublas", "libcublasLt", "libcudnn")


def read_index():
    with open(INDEX) as f:
        return json.load(f)


def run_case(program, backend, variant, *params):
    """(result document, {soname: how it was loaded}) of one case, traced by the loader."""
    with tempfile.TemporaryDirectory(prefix="pitfall-lazy-") as tmp:
        out = os.path.join(tmp, "result.json")
        env = dict(os.environ, LD_DEBUG="files", LD_DEBUG_OUTPUT=os.path.join(tmp, "ld"), TMPDIR=tmp)
        argv = [program, "--backend", backend, "--variant", variant, "--out", out]
        for p in params:
            argv += ["--param", p]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if proc.returncode not in (0, 77):
            raise AssertionError(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        with open(out) as f:
            result = json.load(f)
        loaded = {}
        for name in os.listdir(tmp):
            if name.startswith("ld."):  # one file per process: ld.<pid>
                with open(os.path.join(tmp, name), errors="replace") as f:
                    for soname, how, _ in LOADED.findall(f.read()):
                        loaded.setdefault(soname, how)
        return result, loaded


def cuda_math_loaded(loaded):
    return sorted(s for s in loaded if s.split(".so")[0] in CUDA_MATH)


class OpenedOnFirstCall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not INDEX or not os.path.exists(INDEX):
            raise unittest.SkipTest("PITFALL_REAL_INDEX is not set (run through CTest)")
        index = read_index()
        if not index.get("built_with_cuda"):
            raise unittest.SkipTest("built without CUDA: no scenario program can map cuBLAS")
        cls.programs = {s["name"]: s["program"] for s in index["scenarios"]}

    def test_a_cpu_case_maps_no_cuda_math_library(self):
        # version_mismatch lists cuDNN in scenario.json; dtype_casting does not. Both linked
        # cuBLAS until it was opened on first call.
        for scenario, variant in (("version_mismatch", "runtime_vs_driver"),
                                  ("dtype_casting", "reproduce_index_and_labels")):
            with self.subTest(scenario=scenario):
                result, loaded = run_case(self.programs[scenario], "cpu", variant)
                self.assertEqual(result["outcome"]["status"], "ok", result["outcome"])
                # The trace is read: what the program does link is in it.
                self.assertEqual(loaded.get("libopenblas.so.0"), "needed by", sorted(loaded))
                self.assertTrue(any(s.startswith("libcudart.so") for s in loaded), sorted(loaded))
                self.assertEqual(cuda_math_loaded(loaded), [])

    def test_a_cuda_case_opens_cudnn_when_it_calls_it(self):
        result, loaded = run_case(self.programs["version_mismatch"], "cuda", "cudnn_compiled_vs_loaded")
        outcome = result["outcome"]
        if outcome["status"] == "unsupported":
            self.skipTest(f"cudnn_compiled_vs_loaded unsupported here: {outcome.get('reason')}")
        if outcome.get("error") == "library_not_loaded":  # no cuDNN on this machine
            self.assertRegex(outcome["message"], r"^libcudnn\.so\.\d+ could not be loaded: ")
            return
        opened = [s for s in loaded if re.fullmatch(r"libcudnn\.so\.\d+", s)]
        self.assertEqual(len(opened), 1, sorted(loaded))
        self.assertEqual(loaded[opened[0]], "dynamically loaded by")
        self.assertEqual([s for s in cuda_math_loaded(loaded) if s.startswith("libcublas")], [],
                         "the case calls no cuBLAS function")

    def test_a_missing_cublas_is_the_error_of_its_first_call(self):
        result, _ = run_case(self.programs["version_mismatch"], "cuda", "missing_library",
                             "hide_library=cublas")
        outcome = result["outcome"]
        if outcome["status"] == "unsupported":
            self.skipTest(f"cuBLAS cannot be hidden here: {outcome.get('reason')}")
        self.assertEqual({k: outcome.get(k) for k in ("status", "library", "error", "stage")},
                         {"status": "error", "library": "host", "error": "library_not_loaded",
                          "stage": "init"})
        self.assertRegex(outcome["message"], r"^libcublas\.so\.\d+ could not be loaded: libcublas\.so\.\d+: "
                                             r"cannot open shared object file")
        self.assertEqual(result["info"].get("hidden_library"), "libcublas")


if __name__ == "__main__":
    unittest.main()
