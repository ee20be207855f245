"""The CMake package, as a team would use it: this build installed into a temporary prefix, a
new scenario stamped from the installed template into a project of its own, configured with
find_package(pitfall), built, its CTest tests run, and the installed `pitfall` run on it.

Run by CTest (ci/tests/CMakeLists.txt), which sets PITFALL_BUILD_DIR, PITFALL_CMAKE,
PITFALL_CTEST, PITFALL_GENERATOR, PITFALL_CXX, PITFALL_CMAKE_CXX_FLAGS and
PITFALL_CMAKE_EXE_LINKER_FLAGS. PITFALL_PACKAGE_KEEP=1 keeps
the temporary folder and prints where it is.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

ENV = os.environ
NAME = "my_failure"
CASES = [f"{b}.{NAME}.{v}" for b in ("cpu", "cuda") for v in ("reproduce", "remedy")]

PROJECT = """cmake_minimum_required(VERSION 3.25)
project(team_scenarios LANGUAGES C CXX)
find_package(pitfall 0.1 REQUIRED)
enable_testing()
add_failure_scenario(scenarios/{name})
"""


def run(cmd, timeout=600, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return p


class Package(unittest.TestCase):
    """One install and one out-of-tree build (setUpClass), then what each step must show."""

    @classmethod
    def setUpClass(cls):
        for var in ("PITFALL_BUILD_DIR", "PITFALL_CMAKE", "PITFALL_CTEST"):
            assert ENV.get(var), f"run through CTest: {var} unset"
        cls.started = time.monotonic()
        cls.tmp = tempfile.mkdtemp(prefix="pitfall-package-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        cls.project = os.path.join(cls.tmp, "team")
        cls.build = os.path.join(cls.project, "build")
        cls.steps = {}

        def step(name, cmd, **kw):
            began = time.monotonic()
            p = run(cmd, **kw)
            cls.steps[name] = (p, time.monotonic() - began)
            if p.returncode != 0:
                raise AssertionError(f"{name} failed (exit {p.returncode}): {' '.join(cmd)}\n"
                                     f"{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
            return p

        cmake = ENV["PITFALL_CMAKE"]
        step("install", [cmake, "--install", ENV["PITFALL_BUILD_DIR"], "--prefix", cls.prefix])
        cls.cmake_dir = os.path.join(cls.prefix, "lib", "cmake", "pitfall")
        if not os.path.isdir(cls.cmake_dir):  # a multiarch libdir (prefix /usr)
            found = [d for d, _, files in os.walk(cls.prefix) if "pitfallConfig.cmake" in files]
            cls.cmake_dir = found[0] if found else cls.cmake_dir
        os.makedirs(os.path.join(cls.project, "scenarios"))
        step("stamp", [cmake, f"-DNAME={NAME}", "-DDEST=scenarios", "-P",
                       os.path.join(cls.cmake_dir, "NewScenario.cmake")], cwd=cls.project)
        with open(os.path.join(cls.project, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT.format(name=NAME))
        configure = [cmake, "-S", cls.project, "-B", cls.build, f"-DCMAKE_PREFIX_PATH={cls.prefix}",
                     "-DCMAKE_BUILD_TYPE=Release", "-DPITFALL_WERROR=ON"]
        if ENV.get("PITFALL_GENERATOR"):
            configure += ["-G", ENV["PITFALL_GENERATOR"]]
        if ENV.get("PITFALL_CXX"):
            configure += [f"-DCMAKE_CXX_COMPILER={ENV['PITFALL_CXX']}"]
        # The flags pitfall was built with (a sanitizer's runtime must be linked here too).
        for var in ("CMAKE_CXX_FLAGS", "CMAKE_EXE_LINKER_FLAGS"):
            if ENV.get("PITFALL_" + var):
                configure += [f"-D{var}={ENV['PITFALL_' + var]}"]
        step("configure", configure)
        step("build", [cmake, "--build", cls.build])
        # Its own CTest tests (exit code checked by each test below).
        cls.ctest = run([ENV["PITFALL_CTEST"], "--test-dir", cls.build, "--output-on-failure"], timeout=600)
        cls.steps["ctest"] = (cls.ctest, 0.0)
        cls.pitfall = os.path.join(cls.prefix, "bin", "pitfall")
        cls.index = os.path.join(cls.build, "pitfall-index.json")
        cls.expected = os.path.join(cls.project, "expected")
        os.makedirs(os.path.join(cls.expected, "any"))
        with open(os.path.join(cls.expected, "any", "profile.json"), "w") as f:
            json.dump({"schema": "pitfall.profile/1", "name": "any", "match": {}}, f)

    @classmethod
    def tearDownClass(cls):
        print(f"package test: {time.monotonic() - cls.started:.1f} s in all; "
              + ", ".join(f"{k} {t:.1f} s" for k, (_, t) in cls.steps.items() if t))
        if ENV.get("PITFALL_PACKAGE_KEEP"):
            print(f"kept: {cls.tmp}")
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def pitfall_run(self, out, *args, env=None):
        p = run([self.pitfall, "run", "--index", self.index, "--expected", self.expected,
                 "--out", os.path.join(self.tmp, out), *args], env=env, timeout=300, cwd=self.tmp)
        with open(os.path.join(self.tmp, out, "results.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        return p, {r["case"]: r for r in records if r.get("record") == "case"}

    def assert_cuda_cases(self, cases, verdict_if_ran):
        # No GPU or a host-only build: UNSUPPORTED with its reason; on a GPU, as the CPU's.
        for key in (k for k in CASES if k.startswith("cuda.")):
            if cases[key]["verdict"] != "UNSUPPORTED":
                self.assertEqual(cases[key]["verdict"], verdict_if_ran, cases[key].get("reason"))
            else:
                self.assertTrue(cases[key].get("reason"), key)

    def test_installed_tree(self):
        for path in ("bin/pitfall", "bin/pitfall-probe", "include/pitfall/scenario.hpp",
                     "include/pitfall/status.hpp", "share/pitfall/pitfall-index.json",
                     "share/pitfall/expected/host/profile.json", "share/pitfall/schema/expected.schema.json"):
            self.assertTrue(os.path.exists(os.path.join(self.prefix, path)), path)
        for name in ("pitfall-gate-slurm", "pitfall-gate-prolog", "pitfall-gate-health-check"):  # Slurm's gate
            self.assertTrue(os.access(os.path.join(self.prefix, "share", "pitfall", "slurm", name), os.X_OK), name)
        for name in ("pitfallConfig.cmake", "pitfallConfigVersion.cmake", "pitfallTargets.cmake",
                     "PitfallScenario.cmake", "FindCUDNN.cmake", "NewScenario.cmake"):
            self.assertTrue(os.path.exists(os.path.join(self.cmake_dir, name)), name)
        # The installed index names programs relative to itself: it reads from anywhere.
        index = os.path.join(self.prefix, "share", "pitfall", "pitfall-index.json")
        with open(index) as f:
            doc = json.load(f)
        self.assertFalse(os.path.isabs(doc["paths"]["expected"]))
        for entry in doc["scenarios"]:
            self.assertFalse(os.path.isabs(entry["program"]), entry)
            program = os.path.normpath(os.path.join(os.path.dirname(index), entry["program"]))
            self.assertTrue(os.access(program, os.X_OK), program)
        listing = run([self.pitfall, "list", "--index", index], cwd="/")
        self.assertEqual(listing.returncode, 0, listing.stderr)
        for entry in doc["scenarios"]:
            self.assertIn(entry["name"], listing.stdout)
        # The fleet driver is installed (a cluster runs pitfall from a shared prefix): the
        # installed index names it, and both its Slurm and Kubernetes halves answer.
        self.assertEqual(doc["paths"]["fleet_driver"], "fleet/pitfall-fleet")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PITFALL_")}
        fleet = run([self.pitfall, "fleet", "--help"], cwd="/", env=env)
        self.assertEqual(fleet.returncode, 0, fleet.stderr)
        self.assertIn("usage: pitfall fleet", fleet.stdout)
        manifest = run([self.pitfall, "fleet", "manifest", "--engine", "kubernetes", "--nodes", "2",
                        "--image", "registry.example/pitfall:1", "--claim", "results", "--format", "json"],
                       cwd="/", env=env)
        self.assertEqual(manifest.returncode, 0, manifest.stderr)
        self.assertEqual(json.loads(manifest.stdout)["spec"]["completions"], 2)

    def test_stamped_scenario_builds_and_its_ctest_tests_pass(self):
        self.assertTrue(os.access(os.path.join(self.build, "scenarios", NAME), os.X_OK))
        out = self.ctest.stdout
        self.assertEqual(self.ctest.returncode, 0, out[-4000:] + self.ctest.stderr[-2000:])
        for case in CASES:
            backend, _, variant = case.split(".")
            self.assertIn(f"pitfall.{backend}.{NAME}.{variant}", out)
        self.assertIn(f"pitfall.{NAME}.variants", out)
        self.assertRegex(out, r"100% tests passed, 0 tests failed out of \d+")

    def test_installed_pitfall_judges_the_scenario(self):
        # No baseline yet: NO_BASELINE (a warning, exit 0).
        p, cases = self.pitfall_run("run1")
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr)
        self.assertEqual(sorted(cases), sorted(CASES))
        for key in ("cpu.my_failure.reproduce", "cpu.my_failure.remedy"):
            self.assertEqual(cases[key]["verdict"], "NO_BASELINE", cases[key].get("reason"))
            self.assertEqual(cases[key]["result"]["outcome"]["status"], "ok")
        self.assert_cuda_cases(cases, "NO_BASELINE")
        # Blessed into the project's expected/, the next run passes.
        b = run([self.pitfall, "bless", os.path.join(self.tmp, "run1"), "--index", self.index,
                 "--expected", self.expected, "--profile", "any"], cwd=self.tmp)
        self.assertEqual(b.returncode, 0, b.stdout[-3000:] + b.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.expected, "any", f"{NAME}.json")))
        p, cases = self.pitfall_run("run2")
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr)
        for key in ("cpu.my_failure.reproduce", "cpu.my_failure.remedy"):
            self.assertEqual(cases[key]["verdict"], "PASS", cases[key].get("reason"))
        self.assert_cuda_cases(cases, "PASS")
        # And the verdict bites: another outcome planted in one case fails the run.
        env = dict(os.environ, PITFALL_INJECT=f"outcome:cpu.{NAME}.reproduce:cudaErrorLaunchFailure")
        p, cases = self.pitfall_run("run3", "--backend", "cpu", env=env)
        self.assertEqual(p.returncode, 1, p.stdout[-3000:] + p.stderr)
        self.assertEqual(cases[f"cpu.{NAME}.reproduce"]["verdict"], "FAIL")
        self.assertEqual(cases[f"cpu.{NAME}.remedy"]["verdict"], "PASS")


if __name__ == "__main__":
    unittest.main()
