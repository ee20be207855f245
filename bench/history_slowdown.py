#!/usr/bin/env python3
"""A real history with a known change: a timed CPU suite run N times into a results database
(`pitfall run --history`), one case slowed by PITFALL_INJECT from run K on; then `pitfall
history changes` on that case. Prints each series' change points, absolute and normalised
(SERIES/CONTROL), whether the injected one was found at run K (exactly, or within +-2 runs), and
the runs each series held.

    bench/history_slowdown.py --build build/cpu-only [--suite quick|timed] [--runs 30]
        [--from-run 18] [--case cpu.float64_inputs.remedy] [--factor 1.2] [--db FILE] [--keep DIR]

--suite quick (default): bench/cross_host.py's six cases, about 10 s a run here; timed: every CPU
case of every scenario that declares timed series (the suite `pitfall.timing.cpu_suite` judges).

Exit status: 0 the change point was found within +-2 runs of K; 1 not; 2 bad usage or a run
that failed to run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cross_host import QUICK_SCENARIOS, QUICK_VARIANTS  # noqa: E402  (one definition of the suite)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "harness", "tests", "cli"))
from check_timed_suite import timed_scenarios  # noqa: E402  (the suite CTest judges)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--build", required=True, help="a build folder (bin/pitfall, pitfall-index.json)")
    ap.add_argument("--suite", choices=["quick", "timed"], default="quick")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--from-run", type=int, default=18, help="the first slowed run (1-based)")
    ap.add_argument("--case", default="cpu.float64_inputs.remedy")
    ap.add_argument("--factor", type=float, default=1.2)
    ap.add_argument("--db", help="the database (default: a new one in a scratch folder)")
    ap.add_argument("--keep", help="keep the run folders here")
    args = ap.parse_args()
    if args.runs < 4 or not 2 <= args.from_run <= args.runs or args.factor <= 0:
        ap.error("need --runs >= 4, 2 <= --from-run <= --runs and a positive --factor")
    pitfall = os.path.join(args.build, "bin", "pitfall")
    index = os.path.join(args.build, "pitfall-index.json")
    scratch = args.keep or tempfile.mkdtemp(prefix="pitfall-history-slowdown-")
    db = args.db or os.path.join(scratch, "history.sqlite")
    if args.suite == "quick":
        selection = ["--scenario", ",".join(QUICK_SCENARIOS), "--variant", ",".join(QUICK_VARIANTS)]
    else:
        selection = ["--scenario", ",".join(timed_scenarios())]
    for i in range(1, args.runs + 1):
        env = dict(os.environ)
        env.pop("PITFALL_INJECT", None)
        if i >= args.from_run:
            env["PITFALL_INJECT"] = f"slowdown:{args.case}:{args.factor}"
        out = os.path.join(scratch, f"run-{i:03d}")
        r = subprocess.run([pitfall, "run", "--index", index, "--expected", os.path.join(ROOT, "expected"),
                            "--backend", "cpu", *selection, "--timings", "record",
                            "--out", out, "--replace", "--history", db],
                           capture_output=True, text=True, env=env)
        if r.returncode not in (0, 1) or "history:" not in r.stdout + r.stderr:
            print(f"history_slowdown: run {i} exited {r.returncode}: {r.stderr.strip()[-400:]}", file=sys.stderr)
            return 2
        print(f"run {i}/{args.runs}{' (slowed)' if i >= args.from_run else ''}: exit {r.returncode}", flush=True)
    r = subprocess.run([pitfall, "history", "changes", "--db", db, "--case", args.case, "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"history_slowdown: history changes exited {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
        return 2
    doc = json.loads(r.stdout)
    table = subprocess.run([pitfall, "history", "changes", "--db", db, "--case", args.case],
                           capture_output=True, text=True).stdout
    print(table, end="")
    slowed = f"run-{args.from_run:03d}"
    found_at = []
    for s in doc["series"]:
        if s["unit"] != "s" and "/" not in s["series"]:
            continue  # a time, or a time's normalised twin (SERIES/CONTROL)
        for cp in s["change_points"]:
            folder = os.path.basename(cp["folder"])
            found_at.append((s["series"], int(folder.split("-")[1]), cp["step"], cp["confidence"]))
    hits = [f for f in found_at if abs(f[1] - args.from_run) <= 2]
    exact = [f for f in hits if f[1] == args.from_run]
    print(f"injected: {args.case} x{args.factor} from run {args.from_run} of {args.runs} ({slowed}); "
          f"change points in its time series: "
          + (", ".join(f"{n} at run {k} ({100 * st:+.1f}%, confidence {c:.3f})" for n, k, st, c in found_at) or "none")
          + f"; within +-2 runs: {len(hits)}, exactly at it: {len(exact)}")
    if not args.keep and not args.db:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if hits else 1


if __name__ == "__main__":
    sys.exit(main())
