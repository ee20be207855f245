"""docs/adding-a-scenario.md followed as written, after the README's Quick start, in a copy of
this tree: `ci/run-suite.sh` (the Quick start's first command), step 1's stamp, then step 4's
commands, each line of its marked block run as it stands. Before, step 4's `ctest -R` found
nothing after the Quick start (its build had the tests off) and exited 0.

Two things differ from a person's walkthrough, and only these: the copy keeps one scenario of
the catalog (KEPT: the same commands, two programs to build instead of 37), and the preset is
this build's own (PITFALL_PRESET, `ci` in CI), whose objects ccache already holds, for a copy of
the tree compiles to the same cache entries; `default` in the document is replaced by it on
every line. Run by CTest (ci/tests/CMakeLists.txt), which sets PITFALL_SOURCE_DIR and PITFALL_PRESET.
PITFALL_WALKTHROUGH_KEEP=1 keeps the copy and prints where it is.
"""
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

ENV = os.environ
NAME = "my_failure"
KEPT = "fma_contraction_parity"  # small, and its cases pass against the shipped baselines
MARK = "<!-- walkthrough: ci/tests/test_walkthrough.py runs these lines as written -->"


def walkthrough_lines(doc_text):
    """The command lines of the marked block (comments after a # dropped)."""
    at = doc_text.index(MARK)
    block = re.search(r"```bash\n(.*?)```", doc_text[at:], re.S)
    assert block, "the walkthrough mark is not followed by a ```bash block"
    lines = []
    for line in block.group(1).splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            lines.append(command)
    return lines


def copy_tree(source, dest):
    """The files git tracks, and the new ones it does not ignore, as they are now."""
    files = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, check=True).stdout
    for rel in files.decode().split("\0"):
        if not rel or not os.path.isfile(os.path.join(source, rel)):
            continue  # deleted in the working tree
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(source, rel), target, follow_symlinks=False)


class Walkthrough(unittest.TestCase):
    def test_the_walkthrough_works_as_written(self):
        source, preset = ENV.get("PITFALL_SOURCE_DIR"), ENV.get("PITFALL_PRESET")
        assert source and preset, "run through CTest: PITFALL_SOURCE_DIR, PITFALL_PRESET"
        with open(os.path.join(source, "docs", "adding-a-scenario.md"), encoding="utf-8") as f:
            doc = f.read()
        lines = walkthrough_lines(doc)
        # The document's own commands: what a reader types.
        self.assertIn("ctest --preset default -R my_failure", lines)
        self.assertIn(f"cmake -DNAME={NAME} -P cmake/NewScenario.cmake", doc)
        tmp = tempfile.mkdtemp(prefix="pitfall-walkthrough-")
        tree = os.path.join(tmp, "pitfall")
        try:
            copy_tree(source, tree)
            for entry in os.listdir(os.path.join(tree, "scenarios")):
                if entry != KEPT:
                    shutil.rmtree(os.path.join(tree, "scenarios", entry))
            env = dict(ENV, CI="true", PITFALL_PRESET=preset)
            steps = ["ci/run-suite.sh", f"cmake -DNAME={NAME} -P cmake/NewScenario.cmake"] + lines
            outputs = {}
            for line in steps:
                argv = [("" if w == "default" else w) or preset for w in shlex.split(line)]
                argv = [w.replace("build/default/", f"build/{preset}/") for w in argv]
                p = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True,
                                   timeout=900)
                outputs[line] = p
                self.assertEqual(p.returncode, 0, f"`{' '.join(argv)}` exit {p.returncode}:\n"
                                 f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
            suite = outputs["ci/run-suite.sh"].stdout
            self.assertRegex(suite, rf"cpu\.{KEPT}\.\w+ +PASS")
            tested = outputs["ctest --preset default -R my_failure"].stdout
            for case in ("cpu.my_failure.reproduce", "cpu.my_failure.remedy"):
                self.assertIn(f"pitfall.{case}", tested)
            self.assertIn(f"pitfall.{NAME}.variants", tested)
            self.assertRegex(tested, r"100% tests passed, 0 tests failed out of \d+")
            ran = outputs[f"build/default/bin/pitfall run --scenario {NAME}"].stdout
            self.assertRegex(ran, r"cpu\.my_failure\.reproduce +NO_BASELINE")
            # A -R that names no test is an error, not a silent pass.
            none = subprocess.run(["ctest", "--preset", preset, "-R", "no_such_scenario"],
                                  cwd=tree, capture_output=True, text=True, timeout=120)
            self.assertNotEqual(none.returncode, 0, none.stdout)
            self.assertIn("No tests were found", none.stdout + none.stderr)
        finally:
            if ENV.get("PITFALL_WALKTHROUGH_KEEP"):
                print(f"kept: {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
