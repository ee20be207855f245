"""ci/lint-changed.sh on temporary git repositories carrying pitfall's .clang-format and
.clang-tidy: one commit has nothing to check; a badly formatted file and a clang-tidy finding
each fail it, naming the file; clean changes pass.

Run by CTest, which sets PITFALL_LINT_SCRIPT and PITFALL_SOURCE_DIR.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

SCRIPT = os.environ.get("PITFALL_LINT_SCRIPT", "")
SOURCE = os.environ.get("PITFALL_SOURCE_DIR", "")

CLEAN = """#include <vector>

int total(const std::vector<int>& values) {
    int sum = 0;
    for (const int v : values)
        sum += v;
    return sum;
}
"""
BADLY_FORMATTED = "int  twice( int x ){ return 2*x; }\n"
# Formatted, but readability-else-after-return (in the root .clang-tidy) objects.
TIDY_FINDING = """int sign(int x) {
    if (x < 0) {
        return -1;
    } else {
        return 1;
    }
}
"""


class LintChanged(unittest.TestCase):
    def setUp(self):
        self.assertTrue(SCRIPT and SOURCE, "run through CTest: PITFALL_LINT_SCRIPT unset")
        for tool in ("clang-format", "clang-tidy"):
            if not shutil.which(tool):
                print(f"SKIP: {tool} not installed (ci/setup.sh installs it)")
                self.skipTest(f"{tool} missing")
        self.repo = tempfile.mkdtemp(prefix="pitfall-lint-")
        for name in (".clang-format", ".clang-tidy"):
            shutil.copy(os.path.join(SOURCE, name), self.repo)
        self.write("src/clean.cpp", CLEAN)
        self.git("init", "-q")
        self.git("add", ".")
        self.commit("base")

    def tearDown(self):
        shutil.rmtree(self.repo, ignore_errors=True)

    def git(self, *args):
        env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@t")
        subprocess.run(["git", *args], cwd=self.repo, check=True, capture_output=True, env=env)

    def commit(self, message):
        self.git("add", ".")
        self.git("-c", "commit.gpgsign=false", "commit", "-q", "-m", message)

    def write(self, path, text):
        full = os.path.join(self.repo, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def lint(self, *args):
        # A compilation database for the repository's sources, as a configured preset has.
        build = os.path.join(self.repo, "build", "ci")
        os.makedirs(build, exist_ok=True)
        entries = [{"directory": self.repo, "file": os.path.join(self.repo, "src", name),
                    "command": f"c++ -std=c++17 -c src/{name} -o /dev/null"}
                   for name in os.listdir(os.path.join(self.repo, "src"))]
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump(entries, f)
        with open(os.path.join(self.repo, ".git", "info", "exclude"), "a") as f:
            f.write("/build/\n")
        env = {k: v for k, v in os.environ.items() if k not in ("PITFALL_LINT_BASE", "PITFALL_LINT_BUILD")}
        return subprocess.run([SCRIPT, *args], cwd=self.repo, capture_output=True, text=True, timeout=240,
                              env=env)

    def test_one_commit_has_nothing_to_check(self):
        p = self.lint()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("nothing to check", p.stdout)

    def test_badly_formatted_file_fails(self):
        self.write("src/bad.cpp", BADLY_FORMATTED)
        self.commit("bad")
        p = self.lint()
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("src/bad.cpp: not formatted as .clang-format says", p.stdout)
        self.assertNotIn("src/clean.cpp", p.stdout)  # unchanged since HEAD~1: not checked

    def test_clang_tidy_finding_fails(self):
        self.write("src/tidy.cpp", TIDY_FINDING)
        self.commit("tidy")
        p = self.lint()
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("readability-else-after-return", p.stdout + p.stderr)
        self.assertNotIn("not formatted", p.stdout)

    def test_clean_change_passes_and_an_explicit_base_widens_the_check(self):
        self.write("src/more.cpp", CLEAN.replace("total", "total_again"))
        self.commit("more")
        p = self.lint()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("1 C++ file(s) changed", p.stdout)
        # Untracked, not yet committed: still checked against BASE.
        self.write("src/new.cpp", BADLY_FORMATTED)
        p = self.lint("HEAD")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("src/new.cpp", p.stdout)
        self.assertEqual(self.lint("no-such-ref").returncode, 2)


if __name__ == "__main__":
    unittest.main()
