"""`pitfall run --build`: each scenario's program built in the index's build tree just before its
first case. A real CMake project (made here) builds the fixture program; the real `pitfall`.

Run by CTest (see CMakeLists.txt), which sets PITFALL_BIN, PITFALL_CMAKE and the fixture paths.
"""
import json
import os
import subprocess
import unittest

from test_cli import INDEX, PROGRAM, FixtureTest, records

CMAKE = os.environ.get("PITFALL_CMAKE", "cmake")
FATBIN_SAMPLE = os.environ.get("PITFALL_FATBIN_SAMPLE", "")

# The project: its target copies the fixture program into the build tree (as a link step would
# write it); a second target fails, as a compile error does.
PROJECT = """cmake_minimum_required(VERSION 3.25)
project(pitfall_build_test NONE)
add_custom_command(OUTPUT "${CMAKE_BINARY_DIR}/harness_fixture"
  COMMAND "${CMAKE_COMMAND}" -E copy "%s" "${CMAKE_BINARY_DIR}/harness_fixture" VERBATIM)
add_custom_target(pitfall.scenario.harness_fixture DEPENDS "${CMAKE_BINARY_DIR}/harness_fixture")
add_custom_command(OUTPUT "${CMAKE_BINARY_DIR}/second"
  COMMAND "${CMAKE_COMMAND}" -E copy "%s" "${CMAKE_BINARY_DIR}/second" VERBATIM)
add_custom_target(pitfall.scenario.second DEPENDS "${CMAKE_BINARY_DIR}/second")
add_custom_target(pitfall.scenario.broken COMMAND "${CMAKE_COMMAND}" -E echo "error: broken on purpose"
  COMMAND "${CMAKE_COMMAND}" -E false VERBATIM)
"""


def manifest_named(name):
    """The fixture's scenario.json under another scenario name."""
    with open(INDEX, encoding="utf-8") as f:
        path = json.load(f)["scenarios"][0]["manifest"]
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    doc["name"] = name
    return doc


class BuildAsYouGo(FixtureTest):
    baseline = {"cpu.ok": {"outcome": {"status": "ok"}}}

    def setUp(self):
        super().setUp()
        source = os.path.join(self.tmp, "project")
        self.tree = os.path.join(self.tmp, "tree")
        os.makedirs(source)
        with open(os.path.join(source, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT % (PROGRAM, PROGRAM))
        subprocess.run([CMAKE, "-S", source, "-B", self.tree], check=True, capture_output=True, timeout=120)
        self.program = os.path.join(self.tree, "harness_fixture")

    def index(self, target="pitfall.scenario.harness_fixture", tree=True, extra=(), name="index.json"):
        """The fixture's index, written as `name`: its program in the project's tree (not built
        yet) and `target` to build it (None: no target); `extra`: more scenario entries."""
        with open(INDEX, encoding="utf-8") as f:
            doc = json.load(f)
        doc["scenarios"][0]["program"] = self.program
        if target is not None:
            doc["scenarios"][0]["target"] = target
        doc["scenarios"].extend(extra)
        if tree:
            doc["paths"] = {"build": self.tree, "cmake": CMAKE}
        path = os.path.join(self.tmp, name)
        self.write_json(path, doc)
        return path

    def run_fixture(self, index, *flags):
        return self.pitfall("run", "--scenario", "harness_fixture", "--variant", "ok", "--backend", "cpu",
                            "--samples", "1", *flags, index=index, timeout=180)

    def test_the_program_is_built_before_its_first_case(self):
        index = self.index()
        self.assertFalse(os.path.exists(self.program))
        without = self.run_fixture(index, "--out", self.run_dir("plain"))
        self.assertEqual(without.returncode, 2, without.stdout + without.stderr)
        self.assertIn("is not built", without.stderr)
        self.assertIn("--build", without.stderr)  # the message names the way out

        out = self.run_dir()
        p = self.run_fixture(index, "--build", "--out", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("building harness_fixture (program 1 of 1) ... ", p.stdout)
        # Built before the header (the machine line) and so before the case.
        self.assertLess(p.stdout.index("building harness_fixture"), p.stdout.index("machine:"))
        self.assertTrue(os.access(self.program, os.X_OK))
        self.assertTrue(os.path.getsize(os.path.join(out, "logs", "build-harness_fixture.log")) > 0)
        self.assertEqual([r["verdict"] for r in records(out)], ["PASS"])
        self.assertIn("--build", records(out, "run")[0]["argv"])

    def test_the_header_predicts_the_images_of_programs_not_built_yet(self):
        later_manifest = os.path.join(self.tmp, "later.json")
        self.write_json(later_manifest, manifest_named("later"))
        # harness_fixture is built before the header (it runs first); `later` is not built
        # when the header is written (never, here: this run does not select it).
        index = self.index(extra=[{"name": "later", "program": os.path.join(self.tree, "later"),
                                   "manifest": later_manifest, "target": "pitfall.scenario.broken"}])
        out = self.run_dir()
        p = self.run_fixture(index, "--build", "--out", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        images = records(out, "run")[0]["fingerprint"]["build_images"]
        if not FATBIN_SAMPLE:  # a build without CUDA: the fixture has no images to predict from
            self.assertEqual(images, {})
            return
        built = images["harness_fixture"]
        self.assertNotIn("predicted_from", built)  # read from the program just built
        self.assertTrue(any(i["kind"] == "sass" for i in built["images"]), built)
        self.assertEqual(images["later"], {"images": built["images"], "predicted_from": "harness_fixture"})

    def test_a_failing_build_stops_the_run_and_resume_completes_it(self):
        out = self.run_dir()
        p = self.run_fixture(self.index(target="pitfall.scenario.broken"), "--build", "--out", out)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("building harness_fixture (program 1 of 1) ... FAILED", p.stdout)
        self.assertIn("building the program of scenario 'harness_fixture' failed (exit ", p.stderr)
        self.assertIn("error: broken on purpose", p.stderr)  # the log's tail
        self.assertIn(os.path.join(out, "logs", "build-harness_fixture.log"), p.stderr)
        self.assertIn("no case ran: fix the build, then run again", p.stderr)

    def test_a_build_failing_mid_run_stops_it_and_resume_completes_it(self):
        manifest = os.path.join(self.tmp, "second.json")
        self.write_json(manifest, manifest_named("second"))
        second = {"name": "second", "program": os.path.join(self.tree, "second"), "manifest": manifest,
                  "target": "pitfall.scenario.broken"}
        out = self.run_dir()
        select = ("--scenario", "harness_fixture,second", "--variant", "ok", "--backend", "cpu", "--samples", "1")
        p = self.pitfall("run", *select, "--build", "--out", out, index=self.index(extra=[second]), timeout=180)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("building second (program 2 of 2) ... FAILED", p.stdout)
        self.assertIn("the run stopped with 1 of 2 cases recorded", p.stderr)
        self.assertIn("`pitfall run --build --resume " + out + "`", p.stderr)
        self.assertEqual([r["case"] for r in records(out)], ["cpu.harness_fixture.ok"])

        second["target"] = "pitfall.scenario.second"  # the build fixed
        index = self.index(extra=[second])
        p = self.pitfall("run", "--build", "--resume", out, index=index, timeout=180)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        self.assertIn("building second (program 1 of 1) ... ", p.stdout)
        self.assertEqual([r["case"] for r in records(out)], ["cpu.harness_fixture.ok", "cpu.second.ok"])

    def test_an_index_that_cannot_build_is_refused_by_field(self):
        cases = [(self.index(tree=False, name="a.json"), "field 'paths.build': missing"),
                 (self.index(target="--help", name="b.json"), "field 'target': '--help' is not a target name"),
                 (self.index(target=None, name="c.json"), "field 'target': missing"),
                 # The schema's own check comes first for text no target can be.
                 (self.index(target="a b", name="d.json"), "/scenarios/0/target: \"a b\" does not match")]
        for index, message in cases:
            with self.subTest(message=message):
                out = self.run_dir("run-" + os.path.basename(index))
                p = self.run_fixture(index, "--build", "--out", out)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(message, p.stderr)
                self.assertFalse(os.path.exists(out))  # refused before a run folder is made
                self.assertFalse(os.path.exists(self.program))


if __name__ == "__main__":
    unittest.main()
