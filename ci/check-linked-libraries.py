#!/usr/bin/env python3
"""A binary links none of the named libraries, read from its dynamic section (`readelf -d`).

A forbidden library in DT_NEEDED fails the check; so does a forbidden folder in RUNPATH/RPATH,
because the linker drops an unused library from DT_NEEDED under --as-needed (the default of
Debian's and Ubuntu's g++, not under sanitizers) but keeps the folder the build put there: the
folder shows that the build linked the library even where the loader would not load it.

  check-linked-libraries.py --forbid libcudart libopenblas --forbid-dir /usr/local/cuda/lib -- BIN

Exit 0 all good; 1 a binary links a forbidden library; 2 bad usage; 77 readelf missing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys


def dynamic_section(readelf, binary):
    """(needed sonames, run path folders) of an ELF file."""
    out = subprocess.run([readelf, "-d", "-W", binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{binary}: readelf -d failed: {out.stderr.strip()}")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)
    paths = []
    for entry in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", out.stdout):
        paths += [p for p in entry.split(":") if p]
    return needed, paths


def soname_matches(soname, name):
    # "libcublas" forbids libcublas.so.13, not libcublasLt.so.13 (named on its own).
    return soname == name or soname.startswith(name + ".so")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forbid", nargs="+", required=True, help="library names (libcudart)")
    ap.add_argument("--forbid-dir", nargs="*", default=[], help="folders those libraries live in")
    ap.add_argument("--readelf", default=shutil.which("readelf") or "")
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    if not args.readelf or not os.access(args.readelf, os.X_OK):
        print("SKIP: readelf not found (binutils)")
        return 77
    forbidden_dirs = {os.path.normpath(d) for d in args.forbid_dir if d}
    failures = []
    for binary in args.binaries:
        name = os.path.basename(binary)
        try:
            needed, paths = dynamic_section(args.readelf, binary)
        except (OSError, RuntimeError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"{name}: NEEDED {', '.join(needed) or '-'}; RUNPATH {':'.join(paths) or '-'}")
        for soname in needed:
            for lib in args.forbid:
                if soname_matches(soname, lib):
                    failures.append(f"{name}: links {soname} (DT_NEEDED)")
        for path in paths:
            if os.path.normpath(path) in forbidden_dirs:
                failures.append(f"{name}: its run path names {path}, the folder of a library it "
                                f"must not link (the build linked one from there)")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
