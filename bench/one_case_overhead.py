#!/usr/bin/env python3
"""What one CTest test costs beyond its scenario program: `pitfall run` of one case, as
cmake/PitfallScenario.cmake registers it, against the same program started directly with the
same arguments and thread settings. The two are run in interleaved pairs (the order alternating
pair by pair) so that the machine's load moves both sides alike; it prints the median of each
side and the median of the pairwise differences, the figure the target is set on.

  bench/one_case_overhead.py --pitfall build/cpu-only/bin/pitfall \\
      --index build/cpu-only/pitfall-index.json [--case cpu.float64_inputs.remedy] [--pairs 15]

Exit status: 0 measured (the target met or not: the line says which); 2 bad usage or a case that
did not run; it never judges a machine by its speed alone.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def usage_error(message):
    print(f"one_case_overhead: error: {message}", file=sys.stderr)
    sys.exit(2)


def the_case(pitfall, index, case):
    """The case's program, arguments and thread count, as `pitfall list --json` gives them."""
    backend, scenario, variant = (case.split(".", 2) + ["", ""])[:3]
    if not (backend and scenario and variant):
        usage_error(f"--case {case}: expected BACKEND.SCENARIO.VARIANT")
    listed = subprocess.run([pitfall, "list", "--json", "--index", index, "--scenario", scenario,
                             "--backend", backend, "--variant", variant],
                            capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        usage_error(f"--case {case}: pitfall list: {listed.stderr.strip()}")
    rows = json.loads(listed.stdout)
    if len(rows) != 1:
        usage_error(f"--case {case}: {len(rows)} cases match")
    with open(index, encoding="utf-8") as f:
        programs = {s["name"]: s["program"] for s in json.load(f)["scenarios"]}
    return backend, scenario, variant, programs[scenario], rows[0]["threads"]


def seconds(argv, env):
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          check=False)
    took = time.perf_counter() - start
    if done.returncode not in (0, 77):
        usage_error(f"{argv[0]} exited {done.returncode}: {done.stderr.decode(errors='replace')[-400:]}")
    return took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pitfall", required=True)
    parser.add_argument("--index", required=True)
    parser.add_argument("--case", default="cpu.float64_inputs.remedy")
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--target-ms", type=float, default=20.0)
    args = parser.parse_args()
    if args.pairs < 3:
        usage_error("--pairs: at least 3")
    backend, scenario, variant, program, threads = the_case(args.pitfall, args.index, args.case)
    with tempfile.TemporaryDirectory(prefix="pitfall-overhead-") as scratch:
        # A runtime folder of the benchmark's own: the machine-wide case lock (and the kept probe
        # answer) live there, so that another run of this user holding the lock is not counted
        # as the harness's cost. The first run below fills it, as the first test of a ctest run.
        runtime = os.path.join(scratch, "runtime")
        os.mkdir(runtime, 0o700)
        harness_env = dict(os.environ, PITFALL_RUNTIME_DIR=runtime)
        env = dict(os.environ)
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
            env[name] = str(threads)
        direct = [program, "--backend", backend, "--variant", variant,
                  "--out", os.path.join(scratch, "direct.json")]
        harness = [args.pitfall, "run", "--index", args.index, "--scenario", scenario,
                   "--backend", backend, "--variant", variant,
                   "--out", os.path.join(scratch, "run"), "--replace", "--skip-code", "77",
                   "--timings", "record"]
        seconds(harness, harness_env)  # the probe's answer kept, as in a ctest run
        program_s, harness_s = [], []
        for i in range(args.pairs):
            if i % 2 == 0:
                program_s.append(seconds(direct, env))
                harness_s.append(seconds(harness, harness_env))
            else:
                harness_s.append(seconds(harness, harness_env))
                program_s.append(seconds(direct, env))
    extra = statistics.median(h - p for h, p in zip(harness_s, program_s)) * 1e3
    print(f"{args.case}: {args.pairs} interleaved pairs")
    print(f"  program alone       median {statistics.median(program_s) * 1e3:7.1f} ms")
    print(f"  pitfall run (1 case) median {statistics.median(harness_s) * 1e3:7.1f} ms")
    print(f"  harness over program: median of the pairs' differences {extra:.1f} ms "
          f"(target <= {args.target_ms:g} ms: {'met' if extra <= args.target_ms else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
