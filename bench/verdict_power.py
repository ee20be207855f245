#!/usr/bin/env python3
"""How much the verdicts can be trusted, measured on this machine.

Each trial runs one real CPU case through the real pipeline: `pitfall run` three times (the
reference), `pitfall bless` of those runs into a scratch expected/ folder (each case from the
fastest run), then `pitfall run` again judged against that baseline, once unchanged and once for
each fault PITFALL_INJECT can plant:

  null        nothing changed: any failing verdict is a false alarm
  slowdown    every timed sample 20% slower: caught when the verdict is PERF_REGRESSION
  outcome     the case ends with cudaErrorLaunchFailure: caught when FAIL
  memory      the tracked device peak 10% higher: caught when MEM_REGRESSION

As in any run, a case whose timing comes out AMBIGUOUS or PERF_REGRESSION is measured in up to
two more processes (after pauses of --remeasure-pause and twice that, with three times the
samples), and the least disturbed one (lowest median) is judged. The reference runs are taken
--reference-pause seconds apart, as a person blessing a baseline would.
Then the same null/slowdown pair for other sample counts: how detection power and false alarms
trade against run time. Prints a table; `--check` exits 1 unless the targets hold: slowdown caught >= 95%, false
alarms <= 5% (both adjustable), outcome and memory caught every time.

    bench/verdict_power.py                          # 20 trials of 25 samples; 5 each of 9 and 15
    bench/verdict_power.py --trials 3 --sweep '' --slowdown 2.0 --timing-floor 0.5 --check \
        --min-caught 0.66 --max-false-alarms 0.34
                                                    # what CI runs (pitfall.verdicts.power_quick)

Exit: 0 done (and, with --check, targets met); 1 a target missed; 2 bad usage or a run that
could not be made (the message names the command).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print(f"verdict_power: error: {message}", file=sys.stderr)
    sys.exit(2)


class Pipeline:
    def __init__(self, args, scratch):
        self.args = args
        self.scratch = scratch
        self.expected = os.path.join(scratch, "expected")
        os.makedirs(os.path.join(self.expected, "bench"))
        with open(os.path.join(self.expected, "bench", "profile.json"), "w") as f:
            json.dump({"schema": "pitfall.profile/1", "name": "bench", "match": {},
                       "description": "scratch profile of bench/verdict_power.py"}, f)
        backend, scenario, variant = args.case.split(".", 2)
        self.filters = ["--backend", backend, "--scenario", scenario, "--variant", variant]
        self.count = 0

    def pitfall(self, *argv, env=None):
        cmd = [self.args.pitfall, *argv, "--index", self.args.index, "--expected", self.expected]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if p.returncode not in (0, 1):
            fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        return p

    def run(self, samples, inject=None):
        """One `pitfall run` of the case; returns its judged record."""
        self.count += 1
        out = os.path.join(self.scratch, f"run{self.count}")
        env = dict(os.environ)
        env.pop("PITFALL_INJECT", None)
        if inject:
            env["PITFALL_INJECT"] = inject
        self.pitfall("run", *self.filters, "--samples", str(samples), "--timing-floor", str(self.args.timing_floor),
                     "--remeasure-pause", str(self.args.remeasure_pause), "--out", out, env=env)
        with open(os.path.join(out, "results.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        case = [r for r in records if r.get("record") == "case"][-1]
        case["_dir"] = out
        return case

    def bless(self, records):
        dirs = [r["_dir"] for r in records]
        p = self.pitfall("bless", *dirs, "--profile", "bench")
        if p.returncode != 0:
            fail(f"bless {' '.join(dirs)}: {p.stderr}")
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def trial(pipe, samples, kinds):
    """One reference run, blessed, then each kind of change judged against it."""
    references = []
    for i in range(pipe.args.reference_runs):
        if i:  # as a person blesses: runs a little apart, not all inside one episode of interference
            time.sleep(pipe.args.reference_pause)
        references.append(pipe.run(samples))
    for reference in references:
        if reference["verdict"] in ("CRASH", "TIMEOUT", "UNSUPPORTED"):
            fail(f"{pipe.args.case}: the reference run is {reference['verdict']}: {reference['reason']}")
    tracked = references[0]["result"]["memory"]["tracked_peak_bytes"]
    if "memory" in kinds and tracked <= 0:
        fail(f"{pipe.args.case} tracks no device memory: pick a case that allocates")
    if pipe.args.verbose:
        for ref in references:
            series = (ref.get("result") or {}).get("samples", {})
            shown = {k: [round(x * 1e3, 2) for x in v["values"]] for k, v in series.items() if v.get("unit") == "s"}
            print(f"  reference ms: {shown}", file=sys.stderr)
    pipe.bless(references)
    case = pipe.args.case
    injections = {"null": None,
                  "slowdown": f"slowdown:{case}:{pipe.args.slowdown}",
                  "outcome": f"outcome:{case}:cudaErrorLaunchFailure",
                  "memory": f"extra_device_bytes:{case}:{max(1, tracked // 10)}"}
    verdicts = {}
    for kind in kinds:
        started = time.monotonic()
        r = pipe.run(samples, injections[kind])
        shutil.rmtree(r["_dir"], ignore_errors=True)
        verdicts[kind] = (r["verdict"], len(r.get("attempts") or []) > 1,
                          time.monotonic() - started, r.get("reason", ""), r["failing"])
        if pipe.args.verbose:
            series = (r.get("result") or {}).get("samples", {})
            shown = {k: [round(x * 1e3, 2) for x in v["values"]] for k, v in series.items() if v.get("unit") == "s"}
            print(f"  {kind:9s} {r['verdict']:16s} {r.get('reason', '')[:160]}\n            ms: {shown}", file=sys.stderr)
    return verdicts


CAUGHT_BY = {"slowdown": "PERF_REGRESSION", "outcome": "FAIL", "memory": "MEM_REGRESSION"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--pitfall", default=os.environ.get("PITFALL_BIN", os.path.join(ROOT, "build/default/bin/pitfall")))
    ap.add_argument("--index", default=os.environ.get("PITFALL_INDEX", os.path.join(ROOT, "build/default/pitfall-index.json")))
    ap.add_argument("--case", default="cpu.dtype_casting.reproduce_fp16_training_no_loss_scaling",
                    help="a CPU case with timed samples and tracked memory (default: %(default)s)")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--samples", type=int, default=25,
                    help="samples a side for the main table (odd, >= 9; default 25: with 9 a side, noise on a shared "
                         "machine leaves too many verdicts AMBIGUOUS, and the re-measuring costs more than the samples)")
    ap.add_argument("--sweep", default="9,15",
                    help="more sample counts for the power/time table, beside --samples ('' skips it)")
    ap.add_argument("--sweep-trials", type=int, default=5,
                    help="trials per sample count in that table (default 5: the whole script stays within 10 minutes)")
    ap.add_argument("--slowdown", type=float, default=1.2)
    ap.add_argument("--timing-floor", type=float, default=0.10,
                    help="pitfall run --timing-floor: the smallest slowdown that can fail (default %(default)s)")
    ap.add_argument("--reference-runs", type=int, default=3,
                    help="runs blessed together as each trial's baseline (bless keeps the fastest, the least disturbed)")
    ap.add_argument("--reference-pause", type=float, default=1.0,
                    help="seconds between the reference runs (default 1)")
    ap.add_argument("--remeasure-pause", type=float, default=2.0,
                    help="passed to pitfall run: seconds before re-measuring an uncertain timing (default 2)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the targets hold")
    ap.add_argument("--min-caught", type=float, default=0.95,
                    help="--check: the fraction of slowdowns that must be caught (default %(default)s)")
    ap.add_argument("--max-false-alarms", type=float, default=0.05,
                    help="--check: the fraction of unchanged runs that may fail (default %(default)s)")
    ap.add_argument("--verbose", action="store_true", help="every run's verdict and samples, on stderr")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    for path, flag in ((args.pitfall, "--pitfall"), (args.index, "--index")):
        if not os.path.exists(path):
            fail(f"{flag} {path}: not found (build first: cmake --preset default && cmake --build --preset default)")
    if args.trials < 1 or args.sweep_trials < 1:
        fail("--trials and --sweep-trials must be >= 1")
    if not 0 <= args.timing_floor < 1:
        fail("--timing-floor must be in [0, 1)")
    if args.reference_pause < 0 or args.remeasure_pause < 0:
        fail("--reference-pause and --remeasure-pause are seconds >= 0")
    if args.reference_runs < 1:
        fail("--reference-runs must be >= 1")
    if args.samples < 9 or args.samples % 2 == 0:
        fail("--samples must be odd and >= 9 (the timing statistics need that many a side)")
    try:
        sweep = [int(x) for x in args.sweep.split(",") if x.strip()]
    except ValueError:
        fail(f"--sweep {args.sweep!r}: expected comma-separated odd numbers")
    if any(n < 1 or n % 2 == 0 for n in sweep):
        fail(f"--sweep {args.sweep!r}: sample counts are odd")
    if args.case.count(".") < 2 or not args.case.startswith("cpu."):
        fail(f"--case {args.case!r}: expected a CPU case key, cpu.<scenario>.<variant>")

    scratch = tempfile.mkdtemp(prefix="pitfall-power-")
    figures = {"case": args.case, "trials": args.trials, "samples": args.samples, "slowdown": args.slowdown,
               "reference_runs": args.reference_runs}
    try:
        pipe = Pipeline(args, scratch)
        kinds = ["null", "slowdown", "outcome", "memory"]
        tallies = {k: {"caught": 0, "failing": 0, "ambiguous": 0, "remeasured": 0, "seconds": 0.0, "verdicts": {}}
                   for k in kinds}
        started = time.monotonic()
        for t in range(args.trials):
            for kind, (verdict, remeasured, seconds, reason, failing) in trial(pipe, args.samples, kinds).items():
                tally = tallies[kind]
                tally["caught"] += verdict == CAUGHT_BY.get(kind)
                tally["failing"] += failing  # the record's own "failing": pitfall's verdict table
                tally["ambiguous"] += verdict == "AMBIGUOUS"
                tally["remeasured"] += remeasured
                tally["seconds"] += seconds
                tally["verdicts"][verdict] = tally["verdicts"].get(verdict, 0) + 1
            print(f"\rtrial {t + 1}/{args.trials} ({time.monotonic() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        figures["kinds"] = tallies

        n = args.trials
        print(f"\nverdict power on {args.case}, {n} trials, {args.samples} samples a side, "
              f"slowdown x{args.slowdown}, timing floor {args.timing_floor:.0%}, "
              f"baseline blessed from {args.reference_runs} runs\n")
        print(f"{'change':10s} {'target':28s} {'result':>9s}  {'remeasured':>10s}  verdicts")
        alarms_pct, caught_pct = round(args.max_false_alarms * 100), round(args.min_caught * 100)
        rows = [("null", f"false alarms <= {alarms_pct}%", tallies["null"]["failing"],
                 lambda k: k <= args.max_false_alarms * n),
                ("slowdown", f"PERF_REGRESSION >= {caught_pct}%", tallies["slowdown"]["caught"],
                 lambda k: k >= args.min_caught * n),
                ("outcome", "FAIL every time", tallies["outcome"]["caught"], lambda k: k == n),
                ("memory", "MEM_REGRESSION every time", tallies["memory"]["caught"], lambda k: k == n)]
        met = True
        for kind, target, k, ok in rows:
            met = met and ok(k)
            verdicts = ", ".join(f"{v} {c}" for v, c in sorted(tallies[kind]["verdicts"].items()))
            print(f"{kind:10s} {target:28s} {k:3d}/{n:<3d}{'' if ok(k) else ' MISSED':7s} "
                  f"{tallies[kind]['remeasured']:4d}        {verdicts}")
        figures["targets_met"] = met

        if sweep:
            print(f"\nsamples vs detection: slowdown x{args.slowdown} and null "
                  f"({n} trials for {args.samples} samples, from the table above; {args.sweep_trials} for the others)")
            print(f"{'samples':>7s} {'caught':>9s} {'false alarms':>13s} {'ambiguous':>10s} {'s per run':>10s}")
            main_row = {"samples": args.samples, "caught": tallies["slowdown"]["caught"],
                        "false_alarms": tallies["null"]["failing"],
                        "ambiguous": tallies["null"]["ambiguous"] + tallies["slowdown"]["ambiguous"],
                        "seconds_per_run": (tallies["null"]["seconds"] + tallies["slowdown"]["seconds"]) / (2 * n)}
            figures["sweep"] = [main_row]
            print(f"{args.samples:7d} {main_row['caught']:4d}/{n:<4d} {main_row['false_alarms']:6d}/{n:<6d} "
                  f"{main_row['ambiguous']:10d} {main_row['seconds_per_run']:10.2f}")
            n = args.sweep_trials
            for samples in [x for x in sweep if x != args.samples]:
                caught = alarms = ambiguous = 0
                seconds = 0.0
                for t in range(n):
                    v = trial(pipe, samples, ["null", "slowdown"])
                    caught += v["slowdown"][0] == "PERF_REGRESSION"
                    alarms += v["null"][4]
                    ambiguous += (v["slowdown"][0] == "AMBIGUOUS") + (v["null"][0] == "AMBIGUOUS")
                    seconds += v["null"][2] + v["slowdown"][2]
                    print(f"\rsamples {samples}: trial {t + 1}/{n}", end="", file=sys.stderr, flush=True)
                print("\r" + " " * 40 + "\r", end="", file=sys.stderr)
                print(f"{samples:7d} {caught:4d}/{n:<4d} {alarms:6d}/{n:<6d} {ambiguous:10d} {seconds / (2 * n):10.2f}")
                figures["sweep"].append({"samples": samples, "caught": caught, "false_alarms": alarms,
                                         "ambiguous": ambiguous, "seconds_per_run": seconds / (2 * n)})
        figures["total_seconds"] = time.monotonic() - started
        print(f"\n{pipe.count} pitfall runs in {figures['total_seconds']:.0f} s")
        if args.json:
            tmp = args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(figures, f, indent=2)
            os.replace(tmp, args.json)
        if args.check and not met:
            print("verdict_power: a target was missed (see the table)", file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
