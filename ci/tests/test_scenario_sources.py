"""ci/check-scenario-sources.py: it passes this tree's scenarios and fails each kind of violation,
planted in a temporary scenarios folder (CTest: pitfall.static.scenario_sources_detects_violations).
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
CHECK = os.path.join(SOURCE_DIR, "ci", "check-scenario-sources.py")

CLEAN = textwrap.dedent('''\
    // A comment may name pitfall::detail::from_cuda and "../elsewhere.hpp": it is no code.
    #include "pitfall/cuda/status.hpp"
    #include "pitfall/scenario.hpp"

    #include "helpers.hpp"

    #include <vector>

    const char* const why = "a string may say detail::anything";
    const char* const ptx = R"ptx(
    // detail::inside_a_raw_string " with a quote
    )ptx";
    ''')


def run_check(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)


class ScenarioSources(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "scenarios")
        self.write("clean_one/scenario.cu", CLEAN)
        self.write("clean_one/helpers.hpp", "#pragma once\nint helper();\n")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, relative, text):
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_this_trees_scenarios_pass(self):
        out = run_check(os.path.join(SOURCE_DIR, "scenarios"))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_clean_tree_passes_comments_and_strings_are_not_code(self):
        out = run_check(self.root)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("OK: 2 scenario source files", out.stdout)

    def test_each_violation_fails_with_file_and_line(self):
        self.write("bad_one/scenario.cu", textwrap.dedent('''\
            #include "pitfall/scenario.hpp"
            #include "../clean_one/helpers.hpp"
            #include "pitfall/detail/fatbin.hpp"
            #include "/abs/elsewhere.hpp"

            pitfall::status f(cudaError_t e) {
                return pitfall::detail::from_cuda(e, pitfall::stage::init, "x", "", 0);
            }
            using namespace pitfall::detail;
            '''))
        self.write("bad_one/more.cuh", "auto n = ::pitfall::detail :: soname;\n"
                                       "auto m = detail::count_library_call;\n")
        out = run_check(self.root)
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        fails = [line for line in out.stdout.splitlines() if line.startswith("FAIL: ")]
        self.assertEqual(len(fails), 7, out.stdout)
        for expected in ['scenarios/bad_one/scenario.cu:2: #include "../clean_one/helpers.hpp"',
                         'scenarios/bad_one/scenario.cu:3: #include "pitfall/detail/fatbin.hpp"',
                         'scenarios/bad_one/scenario.cu:4: #include "/abs/elsewhere.hpp"',
                         "scenarios/bad_one/scenario.cu:7: names the SDK's internals",
                         "scenarios/bad_one/scenario.cu:9: names the SDK's internals",
                         "scenarios/bad_one/more.cuh:1: names the SDK's internals",
                         "scenarios/bad_one/more.cuh:2: names the SDK's internals"]:
            self.assertTrue(any(expected in line for line in fails), f"{expected}\n{out.stdout}")
        self.assertFalse(any("clean_one" in line.split(":")[1] for line in fails), out.stdout)

    def test_angle_bracket_include_of_internals_fails(self):
        self.write("bad_two/scenario.cu", "#include <pitfall/detail/inject.hpp>\n")
        out = run_check(self.root)
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("scenarios/bad_two/scenario.cu:1: #include <pitfall/detail/inject.hpp>",
                      out.stdout)

    def test_missing_folder_is_bad_usage(self):
        out = run_check(os.path.join(self.tmp.name, "no-such-folder"))
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
