"""The README and the manual under docs/: the README stays one a newcomer reads to the end (at
most 300 lines), its Quick start's two commands are the ones .ci/run runs, and every relative
link in README.md, docs/*.md and reports/README.md names a file that exists in this tree and,
where it names an anchor, a heading (or an <a id>) of that file.

Anchors are GitHub's: the heading's text, lower-cased, with everything but letters, digits,
spaces, hyphens and underscores dropped and each space made a hyphen; a repeated heading gets
-1, -2, ... Headings and links inside code blocks and code spans do not count.
"""
import re
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
README_MAX_LINES = 300
FENCE = re.compile(r"^\s*(```+|~~~+)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(text):
    """(line number, line) of a Markdown text outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is None:
            yield number, line


def anchors_of(path):
    seen, anchors = {}, set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        anchors.update(HTML_ANCHOR.findall(line))
        m = HEADING.match(line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def broken_links(root, files):
    """Each relative link of `files` (paths under `root`) that names no file of the tree, a file
    outside it, or an anchor its file does not have: "file:line: target: why"."""
    root = root.resolve()
    problems, cache = [], {}
    for path in files:
        for number, line in prose_lines(path.read_text(encoding="utf-8")):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (path.parent / file_part).resolve() if file_part else path.resolve()
                where = f"{path.relative_to(root)}:{number}: {target}"
                if dest != root and root not in dest.parents:
                    problems.append(f"{where}: outside the repository")
                elif not dest.exists():
                    problems.append(f"{where}: no such file")
                elif anchor and dest.suffix == ".md":
                    if dest not in cache:
                        cache[dest] = anchors_of(dest)
                    if anchor not in cache[dest]:
                        problems.append(f"{where}: no heading or <a id> '{anchor}' in {dest.relative_to(root)}")
    return problems


def manual(root):
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "reports" / "README.md"]


class Docs(unittest.TestCase):
    def test_the_readme_is_read_to_the_end(self):
        lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
        self.assertLessEqual(lines, README_MAX_LINES,
                             f"README.md has {lines} lines; at most {README_MAX_LINES}: move a topic into docs/")

    def test_every_relative_link_and_anchor_exists(self):
        files = manual(ROOT)
        self.assertGreater(len(files), 10)
        self.assertEqual(broken_links(ROOT, files), [])

    def test_every_docs_page_is_linked_from_the_readme(self):
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        for page in sorted((ROOT / "docs").glob("*.md")):
            self.assertIn(f"](docs/{page.name})", readme, f"docs/{page.name} is not in the README's list")

    def test_the_quick_start_test_command_is_what_ci_runs(self):
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        quick = readme.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
        commands = [line.split("#", 1)[0].strip() for line in quick.splitlines() if line.strip()]
        self.assertEqual(commands, ["ci/run-suite.sh", "ci/run-tests.sh"])
        ci_run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        lines = [l.strip() for l in ci_run.splitlines() if l.strip() and not l.startswith("#")]
        # Both commands, as written: the tests, then the suite on the build they made.
        self.assertIn(commands[1], lines)
        self.assertIn(f"PITFALL_PRESET=ci {commands[0]}", lines)
        self.assertLess(lines.index(commands[1]), lines.index(f"PITFALL_PRESET=ci {commands[0]}"))
        self.assertIn("set -euo pipefail", lines)  # either one failing fails CI


class LinkChecker(unittest.TestCase):
    """The checker itself, on a scratch tree: it finds what is broken and nothing else."""

    def test_broken_files_and_anchors_are_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "docs").mkdir()
            (root / "README.md").write_text(
                "# x\n\n[a](docs/a.md) [b](docs/a.md#the-cudacudnn-matrix) [c](docs/a.md#gone)\n"
                "[d](docs/missing.md) [e](#x) [f](https://example.org/y) `[g](docs/nothing.md)`\n"
                "[h](../outside.md)\n\n```\n[i](docs/in-code.md)\n```\n")
            (root / "docs" / "a.md").write_text(
                "# A\n\n## The CUDA/cuDNN matrix\n\n## Twice\n\n## Twice\n\n<a id=\"kept\"></a>text\n\n"
                "[j](a.md#twice-1) [k](#kept) [l](../README.md#x) [m](#twice-2)\n\n```\n## Not a heading\n```\n"
                "[n](#not-a-heading)\n")
            problems = broken_links(root, [root / "README.md", root / "docs" / "a.md"])
        self.assertEqual(len(problems), 5, problems)
        self.assertIn("README.md:3: docs/a.md#gone: no heading or <a id> 'gone' in docs/a.md", problems)
        self.assertIn("README.md:4: docs/missing.md: no such file", problems)
        self.assertIn("README.md:5: ../outside.md: outside the repository", problems)
        self.assertIn("docs/a.md:11: #twice-2: no heading or <a id> 'twice-2' in docs/a.md", problems)
        self.assertIn("docs/a.md:16: #not-a-heading: no heading or <a id> 'not-a-heading' in docs/a.md", problems)


if __name__ == "__main__":
    unittest.main()
