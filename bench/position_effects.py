#!/usr/bin/env python3
"""Whether a case's figures depend on where it sits in a run: over the cases of one run folder
that do the same work wherever they run (the CUDA cases that end UNSUPPORTED at their first CUDA
call, on a machine without a driver), the least-squares slope of each per-case figure against the
case's position, and the first and last tenth's medians. A slope that moves the figure by more
than its spread across the run is a position effect.

    python3 bench/position_effects.py reports/runs/<run>     # a whole-suite run folder

Figures: process.peak_rss_bytes (and how it was measured), process.wall_seconds.
"""
import json
import statistics
import sys


def slope(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    records = []
    with open(f"{argv[1]}/results.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("record") == "case":
                records.append(r)
    position = {r["case"]: i for i, r in enumerate(records)}
    alike = [r for r in records if r["backend"] == "cuda" and r["verdict"] == "UNSUPPORTED"
             and r["observed"].get("status") == "unsupported"]
    if len(alike) < 10:
        print(f"{argv[1]}: {len(alike)} CUDA cases ended UNSUPPORTED: too few to fit", file=sys.stderr)
        return 1
    print(f"{argv[1]}: {len(records)} cases; {len(alike)} alike (CUDA, UNSUPPORTED at their first call)")
    methods = sorted({r["process"].get("peak_rss_method") or "wait4" for r in alike})
    print(f"peak_rss_method: {', '.join(methods)}")
    tenth = max(1, len(alike) // 10)
    for name in ("peak_rss_bytes", "wall_seconds"):
        pts = [(position[r["case"]], r["process"][name]) for r in alike
               if isinstance(r["process"].get(name), (int, float))]
        xs, ys = [p for p, _ in pts], [y for _, y in pts]
        s = slope(xs, ys)
        first, last = statistics.median(ys[:tenth]), statistics.median(ys[-tenth:])
        spread = statistics.pstdev(ys)
        print(f"{name}: slope {s * 100:+.4g} per 100 cases; first tenth median {first:.6g}, "
              f"last tenth {last:.6g} ({(last / first - 1) * 100:+.1f}%); spread (sd) {spread:.4g}; "
              f"change over the run {abs(s) * (xs[-1] - xs[0]) / spread if spread else 0:.2f} sd")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
