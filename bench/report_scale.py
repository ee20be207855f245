#!/usr/bin/env python3
"""How the reports hold up on a large run: a synthetic run folder of N cases (default 1,000),
rendered by `pitfall report` into each format; prints the time and size of each.

The run is synthetic but shaped like a real one: a `run` header with a fingerprint, `started`
and judged `case` records of every verdict (with samples, memory, checks, timings, baselines,
and error messages holding markup, as drivers' messages can), written as `pitfall run` writes
them. The time is the best of --repeat renders (the least disturbed, as for the verdicts).

    bench/report_scale.py --pitfall build/default/bin/pitfall            # 1,000 cases
    bench/report_scale.py --cases 1000 --check                           # exit 1 past 2 s or 5 MB (HTML)

Exit: 0 done (with --check: the HTML rendered in under --max-seconds and --max-mb); 1 a limit
passed; 2 bad usage or a render that failed (the message names the command).
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERDICTS = ["PASS"] * 12 + ["UNSUPPORTED"] * 5 + ["FAIL", "NUMERIC_MISMATCH", "MEM_REGRESSION", "CRASH",
                                                  "TIMEOUT", "PERF_REGRESSION", "AMBIGUOUS", "NO_BASELINE"]


def fail(message):
    print(f"report_scale: error: {message}", file=sys.stderr)
    sys.exit(2)


def synthetic_run(folder, n_cases, seed=7):
    rng = random.Random(seed)
    scenarios = [f"scenario_{i:03d}" for i in range(max(1, n_cases // 20))]
    keys = []
    for i in range(n_cases):
        backend = "cpu" if i % 2 == 0 else "cuda"
        kind = "reproduce" if (i // 2) % 3 == 0 else "remedy"
        keys.append((backend, scenarios[(i // 20) % len(scenarios)], f"{kind}_{(i // 2) % 10}", kind))
    header = {"record": "run", "schema": "pitfall.run/1", "at": "2026-11-23T12:00:00Z", "pitfall_version": "0.1.0",
              "argv": ["pitfall", "run"], "fingerprint_id": "0123456789abcdef",
              "fingerprint_summary": {"gpu_model": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                                      "cuda_driver_major": 580, "cuda_runtime_version": 13000,
                                      "cudnn_version": 91900, "cpu_model": "synthetic", "host_only": False},
              "profile": {"name": "synthetic", "reason": "bench/report_scale.py"},
              "selection": [f"{b}.{s}.{v}" for b, s, v, _ in keys]}
    lines = [json.dumps(header)]
    for b, s, v, kind in keys:
        key = f"{b}.{s}.{v}"
        verdict = rng.choice(VERDICTS)
        samples = [rng.uniform(0.009, 0.012) for _ in range(9)]
        observed = ({"status": "error", "library": "cuda_runtime", "error": "cudaErrorMemoryAllocation",
                     "stage": "alloc", "sticky": False, "message": "out of memory <b>at</b> cudaMalloc & co"}
                    if verdict in ("FAIL", "MEM_REGRESSION") else {"status": "ok"})
        # No "failing": pitfall derives it from the verdict, by its own table.
        record = {"record": "case", "case": key, "test": "pitfall." + key, "scenario": s, "backend": b,
                  "variant": v, "kind": kind, "labels": [b, s], "verdict": verdict,
                  "reason": f"synthetic {verdict.lower()} <script>alert('{key}')</script>",
                  "observed": observed,
                  "process": {"exit_code": 0, "signal": None, "timed_out": False,
                              "wall_seconds": rng.uniform(0.1, 2.0), "peak_rss_bytes": rng.randint(20, 900) << 20},
                  "result": {"schema": "pitfall.result/1", "scenario": s, "variant": v, "backend": b,
                             "outcome": observed, "ran_on": f"{b}: synthetic",
                             "measurements": {"max_abs_error": {"value": rng.random() * 1e-3, "unit": ""}},
                             "samples": {"step_seconds": {"unit": "s", "values": samples}},
                             "checks": [{"name": "matches_reference", "passed": verdict != "NUMERIC_MISMATCH",
                                         "detail": "max |a - b| = 1e-6 <= 1e-5"}],
                             "memory": {"tracked_peak_bytes": rng.randint(1, 4096) << 20, "tracked_current_bytes": 0,
                                        "limit_bytes": 0, "allocations": 4, "failed_allocations": 0}},
                  "timings": {"step_seconds": {"verdict": "SAME", "reason": "median 1.01x within tolerance"}},
                  "attempts": [],
                  "baseline": {"profile": "synthetic",
                               "entry": {"outcome": {"status": "ok"},
                                         "memory": {"tracked_peak_bytes": {"max": 4 << 30}}}},
                  "log": f"logs/{key}.log", "output_tail": "last lines of output\n", "finished_at": "2026-11-23T12:01:00Z"}
        lines.append(json.dumps({"record": "started", "case": key, "at": "2026-11-23T12:00:30Z"}))
        lines.append(json.dumps(record))
    os.makedirs(folder)
    with open(os.path.join(folder, "results.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pitfall", default=os.environ.get("PITFALL_BIN", os.path.join(ROOT, "build/default/bin/pitfall")))
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5, help="renders of each format; the fastest counts")
    ap.add_argument("--check", action="store_true", help="exit 1 when the HTML passes --max-seconds or --max-mb")
    ap.add_argument("--max-seconds", type=float, default=2.0)
    ap.add_argument("--max-mb", type=float, default=5.0)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if not os.path.exists(args.pitfall):
        fail(f"--pitfall {args.pitfall}: not found (build first: cmake --preset default && cmake --build --preset default)")
    if args.cases < 1 or args.repeat < 1:
        fail("--cases and --repeat must be >= 1")
    scratch = tempfile.mkdtemp(prefix="pitfall-report-scale-")
    try:
        run = os.path.join(scratch, "run")
        synthetic_run(run, args.cases)
        figures = {"cases": args.cases, "formats": {}}
        print(f"reports of a synthetic run of {args.cases} cases (best of {args.repeat})\n")
        print(f"{'format':10s} {'seconds':>8s} {'size':>10s}")
        for fmt in ("html", "junit", "markdown", "json"):
            out = os.path.join(scratch, "report." + fmt)
            best = float("inf")
            for _ in range(args.repeat):
                started = time.monotonic()
                p = subprocess.run([args.pitfall, "report", run, "--format", fmt, "--out", out],
                                   capture_output=True, text=True, timeout=300)
                took = time.monotonic() - started
                if p.returncode != 0:
                    fail(f"pitfall report {run} --format {fmt} exited {p.returncode}: {p.stderr.strip()}")
                best = min(best, took)
            size = os.path.getsize(out)
            figures["formats"][fmt] = {"seconds": best, "bytes": size}
            print(f"{fmt:10s} {best:8.3f} {size / 1e6:8.2f} MB")
        html = figures["formats"]["html"]
        ok = html["seconds"] < args.max_seconds and html["bytes"] < args.max_mb * 1e6
        figures["within_limits"] = ok
        print(f"\nHTML: {html['seconds']:.3f} s (limit {args.max_seconds} s), {html['bytes'] / 1e6:.2f} MB "
              f"(limit {args.max_mb} MB): {'within' if ok else 'PAST'} the limits")
        if args.json:
            with open(args.json + ".tmp", "w") as f:
                json.dump(figures, f, indent=2)
            os.replace(args.json + ".tmp", args.json)
        return 1 if args.check and not ok else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
