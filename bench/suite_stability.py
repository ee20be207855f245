#!/usr/bin/env python3
"""Whether timing verdicts hold on unchanged code, measured on this machine.

The CPU suite (`pitfall run --backend cpu`) is run --bless-runs times (default 3) into a scratch
copy of expected/, blessed from those runs WITH timings (each case from its least disturbed run),
then run --runs times more (default 10) on the same, unchanged build, each judged against that
baseline. A run that exits 1 is a false alarm of the whole suite: nothing changed. Prints, per
run, the exit status, the wall time and the verdict counts, then the totals:

    runs exiting 1: 0 of 10    wall time median 24.1 s (min 22.0, max 29.8)

    bench/suite_stability.py                       # build/ci, 3 runs blessed, 10 judged
    bench/suite_stability.py --build build/default --runs 20 --json out.json
    bench/suite_stability.py --jobs 2              # the same with `pitfall run --jobs 2`

The scratch folder is removed unless --keep. The repository's expected/ is never written.
Exit: 0 measured (and, with --check, no run exited 1 and the median wall time is at most
--max-median seconds); 1 a --check target missed; 2 bad usage or a command that could not run.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print(f"suite_stability: error: {message}", file=sys.stderr)
    sys.exit(2)


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000, got {value}")
    return value


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def counts(run_dir):
    """The verdict counts of a finished run (its summary.json)."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            return json.load(f).get("counts", {})
    except (OSError, ValueError) as e:
        return {"(no summary)": str(e)}


def failing_lines(run_dir):
    """Each failing case of a run, with its reason (results.jsonl)."""
    lines = []
    try:
        with open(os.path.join(run_dir, "results.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("record") == "case" and r.get("failing"):
                    lines.append(f"{r['case']}: {r['verdict']}: {r.get('reason', '')[:160]}")
    except (OSError, ValueError):
        pass
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "ci"),
                    help="the build folder (bin/pitfall, pitfall-index.json); default build/ci")
    ap.add_argument("--bless-runs", type=positive_int, default=3, help="runs blessed from (3)")
    ap.add_argument("--runs", type=positive_int, default=10, help="judged runs (10)")
    ap.add_argument("--jobs", type=positive_int, default=1, help="pitfall run --jobs N (1)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the targets hold")
    ap.add_argument("--max-median", type=positive_float, default=30.0,
                    help="with --check: the largest median wall time, seconds (30)")
    args = ap.parse_args()

    pitfall = os.path.join(args.build, "bin", "pitfall")
    index = os.path.join(args.build, "pitfall-index.json")
    for path in (pitfall, index):
        if not os.path.exists(path):
            fail(f"--build {args.build}: no {os.path.basename(path)} (build it first)")
    scratch = tempfile.mkdtemp(prefix="pitfall-stability-")
    expected = os.path.join(scratch, "expected")
    shutil.copytree(os.path.join(ROOT, "expected"), expected)

    def run(name):
        out = os.path.join(scratch, name)
        cmd = [pitfall, "run", "--index", index, "--expected", expected, "--backend", "cpu",
               "--jobs", str(args.jobs), "--out", out]
        started = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        took = time.monotonic() - started
        if p.returncode not in (0, 1):
            fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
        return out, p.returncode, took

    figures = {"build": args.build, "jobs": args.jobs, "bless_runs": [], "runs": []}
    try:
        blessed = []
        for i in range(args.bless_runs):
            out, code, took = run(f"bless-{i}")
            blessed.append(out)
            figures["bless_runs"].append({"exit": code, "wall_seconds": round(took, 2)})
            print(f"bless run {i + 1}/{args.bless_runs}: exit {code}, {took:.1f} s", flush=True)
        p = subprocess.run([pitfall, "bless", *blessed, "--index", index, "--expected", expected],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            fail(f"pitfall bless exited {p.returncode}: {p.stderr.strip()[-400:]}")
        for i in range(args.runs):
            out, code, took = run(f"run-{i}")
            c = counts(out)
            row = {"exit": code, "wall_seconds": round(took, 2), "counts": c}
            if code != 0:
                row["failing"] = failing_lines(out)
            figures["runs"].append(row)
            summary = ", ".join(f"{n} {v}" for v, n in sorted(c.items()))
            print(f"run {i + 1}/{args.runs}: exit {code}, {took:.1f} s ({summary})", flush=True)
            for line in row.get("failing", []):
                print(f"    {line}")
    finally:
        if args.keep:
            print(f"scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    walls = [r["wall_seconds"] for r in figures["runs"]]
    exit_one = sum(1 for r in figures["runs"] if r["exit"] == 1)
    figures["runs_exiting_1"] = exit_one
    figures["wall_seconds_median"] = statistics.median(walls)
    print(f"\nruns exiting 1: {exit_one} of {len(walls)}    wall time median "
          f"{statistics.median(walls):.1f} s (min {min(walls):.1f}, max {max(walls):.1f})")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(figures, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.json)
    if args.check and (exit_one > 0 or statistics.median(walls) > args.max_median):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
