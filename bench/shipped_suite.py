#!/usr/bin/env python3
"""Whether the shipped baselines hold: the whole suite (`pitfall run`, every case, both
backends) judged against this repository's expected/ as it is, with no bless, --runs times on
each emulated host of bench/cross_host.py:

  same     this machine as it is
  slower   the run limited to 3 ms of CPU in every 4 ms (a CFS quota; needs root)
  busier   a memory-bandwidth hog on the other core

A run that exits 1 is a false alarm: nothing changed. Prints a line a run (exit status, wall
time, the cases that failed) and per host the count of runs exiting 1 with its exact 95%
Clopper-Pearson interval, and which cases failed how often.

    bench/shipped_suite.py --runs 20 --json shipped.json
    bench/shipped_suite.py --hosts same --runs 5 --build build/default

The run folders go to a scratch folder, removed unless --keep; expected/ is never written.
Exit: 0 measured; 2 bad usage or a run that could not be made (exit 2 from pitfall).
"""
import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cross_host import Emulation, clopper_pearson  # noqa: E402  (one emulation, one interval)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTS = ["same", "slower", "busier"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "ci"))
    ap.add_argument("--hosts", default=",".join(HOSTS),
                    help="comma-separated, of " + ", ".join(HOSTS))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    hosts = [h for h in args.hosts.split(",") if h]
    if not hosts or any(h not in HOSTS for h in hosts) or args.runs < 1:
        ap.error(f"--hosts takes some of {', '.join(HOSTS)}; --runs a whole number >= 1")
    pitfall = os.path.join(args.build, "bin", "pitfall")
    if not os.access(pitfall, os.X_OK):
        ap.error(f"{pitfall}: not built (cmake --build --preset ci)")
    scratch = tempfile.mkdtemp(prefix="pitfall-shipped-")
    figures = {}
    try:
        for host in hosts:
            failed_runs, walls, failing = 0, [], collections.Counter()
            with Emulation(host, "") as emulation:
                for i in range(args.runs):
                    out = os.path.join(scratch, host, str(i))
                    began = time.monotonic()
                    p = subprocess.run([pitfall, "run", "--index",
                                        os.path.join(args.build, "pitfall-index.json"),
                                        "--expected", os.path.join(ROOT, "expected"), "--out", out],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                       env=emulation.env, preexec_fn=emulation.preexec())
                    walls.append(time.monotonic() - began)
                    if p.returncode not in (0, 1):
                        print(f"shipped_suite: pitfall run exited {p.returncode}: {p.stderr[-600:]}",
                              file=sys.stderr)
                        return 2
                    bad = []
                    with open(os.path.join(out, "results.jsonl"), encoding="utf-8") as f:
                        for line in f:
                            r = json.loads(line)
                            if r.get("record") == "case" and r.get("failing"):
                                bad.append(f"{r['case']} {r['verdict']}")
                    failed_runs += p.returncode == 1
                    failing.update(bad)
                    print(f"{host} run {i + 1}/{args.runs}: exit {p.returncode}, {walls[-1]:.0f} s"
                          + (": " + "; ".join(bad) if bad else ""), file=sys.stderr, flush=True)
            low, high = clopper_pearson(failed_runs, args.runs)
            figures[host] = {"runs": args.runs, "exited_1": failed_runs,
                             "interval95": [low, high], "wall_median_s": statistics.median(walls),
                             "failing": dict(failing)}
            print(f"{host}: {failed_runs} of {args.runs} runs exited 1 "
                  f"[{low * 100:.0f}%, {high * 100:.0f}%]; wall median "
                  f"{statistics.median(walls):.0f} s"
                  + "".join(f"\n  {n}x {case}" for case, n in failing.most_common()))
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
