#!/usr/bin/env python3
"""Scenario sources use the SDK's public headers only, and nothing of another scenario.

Every C++/CUDA file under a scenarios folder (scenarios/<name>/*.cu, .cuh, .hpp, .h, .cpp) is
read, and each of these is a failure:

  - naming the SDK's internals: `detail::` or `pitfall::detail` in code (the names a scenario
    needs have public ones: PITFALL_CUDA_STATUS for detail::from_cuda, pitfall/fatbin.hpp, ...);
  - including one of its headers: `#include "pitfall/detail/..."`;
  - including from outside the scenario's own folder: a path that climbs out (`../`) or is
    absolute. Code two scenarios share belongs in the SDK (harness/include/pitfall/).

Comments and string literals are not code: a comment may say where a rule comes from. The
check is textual and fast (CTest: pitfall.static.scenario_sources).

  check-scenario-sources.py scenarios

Exit 0 all good; 1 a file breaks a rule (each named: FAIL: path:line: ...); 2 bad usage.
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".cu", ".cuh", ".hpp", ".h", ".cpp", ".cc", ".cxx", ".hh")

# One token at a time: a raw string, a string or character literal, a comment, or anything
# else. Raw strings first: their text may hold quotes and `//` of its own.
_TOKENS = re.compile(
    r'(?P<raw>\bu?8?[uUL]?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)")'
    r'|(?P<string>"(?:\\.|[^"\\\n])*")'
    r"|(?P<char>'(?:\\.|[^'\\\n])*')"
    r"|(?P<line_comment>//[^\n]*)"
    r"|(?P<block_comment>/\*.*?\*/)",
    re.S,
)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?P<open>["<])(?P<path>[^">\n]*)[">]', re.M)
_DETAIL = re.compile(r"\bdetail\s*::|\bpitfall\s*::\s*detail\b")


def blank_out(match):
    """The token with every character but newlines made a space: line numbers survive."""
    return re.sub(r"[^\n]", " ", match.group(0))


def code_only(text):
    """`text` with comments and string and character literals blanked."""
    return _TOKENS.sub(blank_out, text)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def include_problem(path):
    """Why an included path breaks a rule, or None."""
    parts = path.replace("\\", "/").split("/")
    if path.startswith("/"):
        return "includes by absolute path: a scenario includes its own files and the SDK's"
    if ".." in parts:
        return ("includes from outside its own folder: code two scenarios share belongs in the "
                "SDK (harness/include/pitfall/)")
    if parts[:2] == ["pitfall", "detail"]:
        return ("includes an SDK internal header (pitfall/detail/): use the public header that "
                "exports what it needs")
    return None


def check_file(path, shown_as):
    """The violations of one file, as 'path:line: reason' strings."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = []
    for m in _INCLUDE.finditer(text):
        reason = include_problem(m.group("path"))
        if reason:
            close = '"' if m.group("open") == '"' else ">"
            found.append(f'{shown_as}:{line_of(text, m.start())}: #include '
                         f'{m.group("open")}{m.group("path")}{close}: {reason}')
    code = code_only(text)
    for m in _DETAIL.finditer(code):
        line = line_of(code, m.start())
        found.append(f"{shown_as}:{line}: names the SDK's internals ({m.group(0).strip()}): "
                     "use the public name (e.g. PITFALL_CUDA_STATUS for detail::from_cuda)")
    return found


def scenario_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.join(dirpath, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="the scenarios folder (one subfolder per scenario)")
    args = ap.parse_args()
    if not os.path.isdir(args.root):
        print(f"error: {args.root}: not a folder", file=sys.stderr)
        return 2
    # Paths as "scenarios/<name>/<file>": the folder's own name, then the file in it.
    above = os.path.dirname(os.path.abspath(args.root))
    failures = []
    count = 0
    for path in scenario_files(args.root):
        count += 1
        failures += check_file(path, os.path.relpath(path, above))
    for failure in failures:
        print(f"FAIL: {failure}")
    if failures:
        print(f"{len(failures)} violation(s) in {count} scenario source file(s)")
        return 1
    print(f"OK: {count} scenario source files name no SDK internals and include nothing of "
          "another folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
