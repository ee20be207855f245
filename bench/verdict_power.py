#!/usr/bin/env python3
"""How much the verdicts can be trusted, measured on this machine.

Every trial runs the real pipeline on several real CPU cases at once (one `pitfall run` of all of
them per arm) and counts, per arm and case, how often the verdict says what it should:

  null      nothing changed, judged against a baseline blessed at the start of the trial's
            block (seconds to a few minutes before): any failing verdict is a false alarm
  drift     nothing changed, judged against the baseline blessed once at the very start, so the
            later trials run many minutes after their bless: any failing verdict is a false alarm
  injected  every timed sample read --slowdown times longer (PITFALL_INJECT slowdown): caught
            when the verdict is PERF_REGRESSION
  scaled    a real slowdown: the case's work made --slowdown times larger through one of its
            parameters (--scale; rows of float64_inputs and cpu_bound_preprocessing, train_steps
            of dtype_casting), judged against the same baseline with its size-dependent memory
            bounds left out, so that only time can tell: caught when PERF_REGRESSION. The
            slowdown it really made is measured and printed: trial by trial, the scaled run's
            ratio to the baseline over the injected run's (exactly --slowdown on the unscaled
            work, against the same baseline), times --slowdown
  outcome   the case ends with cudaErrorLaunchFailure: caught when FAIL   (once a block)
  memory    the tracked device peak 10% higher: caught when MEM_REGRESSION (once a block)

The arms run in a shuffled order within each trial (--seed). Each block of --block trials starts
with --reference-runs runs of every case, --reference-pause seconds apart, blessed together into
a scratch expected/ folder (bless keeps each case's least disturbed run), as a person blessing a
baseline would. As in any run, a case whose timing comes out AMBIGUOUS or PERF_REGRESSION is
measured again once, at the end of the run (after --remeasure-pause seconds), with three times
the samples, and the attempt kept is the one least disturbed by the series being judged.

For each arm and case the table gives trials n, events k, the rate, its exact two-sided 95%
Clopper-Pearson interval and the one-sided 95% bound (caught at least, false alarms at most),
then the same pooled over the cases (which share each run, and so its interference: the pooled
figures treat them as independent). 60 of 60 caught: [94.0%, 100%], at least 95.1%; 0 of 60
false alarms: [0%, 6.0%], at most 4.9%; pooled over three cases, 180 trials: at least 98.3% and
at most 1.7%. `--check` exits 1 unless the pooled rates meet the targets: injected and scaled
caught >= --min-caught, null and drift false alarms <= --max-false-alarms, outcome and memory
caught every time.

    bench/verdict_power.py --json power.json       # 60 trials an arm, 3 cases: ~23 min, 2 quiet cores
    bench/verdict_power.py --trials 5 --block 5    # a first look: 2-3 min
    bench/verdict_power.py --samples 9 --arms null,injected   # power and false alarms at 9 samples a side
    bench/verdict_power.py --cases cpu.dtype_casting.reproduce_fp16_training_no_loss_scaling \\
        --arms null,injected,scaled,outcome,memory --trials 3 --block 3 --samples 15 --slowdown 2.0 \\
        --timing-floor 0.5 --remeasure-pause 0.5 --check --min-caught 0.66 --max-false-alarms 0.34
                                                   # what CI runs (pitfall.verdicts.power_quick): ~30 s

The duration is estimated from the first reference run and printed before the trials start; each
trial prints a progress line (on stderr) with the time elapsed and an ETA.

Exit: 0 done (and, with --check, targets met); 1 a target missed; 2 bad usage or a run that
could not be made (the message names the flag or the command).
"""
import argparse
import json
import math
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The default cases: one timed series; two timed series (epoch_seconds, kernel_seconds) on two
# threads (a producer and a trainer); one timed series. Each with the parameters that keep one
# timed sample near 10 ms, and the parameter whose size the timed work follows: 1.2 x the rows
# is 1.2 x the batches of an epoch (whole batches of 256 either way).
DEFAULT_CASES = {
    "cpu.float64_inputs.remedy": {"params": {"rows": 30720, "check_rows": 1024}, "scale": "rows"},
    "cpu.cpu_bound_preprocessing.remedy_overlap": {"params": {"rows": 5120, "check_rows": 512},
                                                   "scale": "rows"},
    "cpu.dtype_casting.reproduce_fp16_training_no_loss_scaling": {"params": {"train_steps": 200},
                                                                  "scale": "train_steps"},
}
ARMS = ["null", "drift", "injected", "scaled", "outcome", "memory"]
TIMED_ARMS = ["null", "drift", "injected", "scaled"]  # once a trial; outcome and memory once a block
CAUGHT_BY = {"injected": "PERF_REGRESSION", "scaled": "PERF_REGRESSION", "outcome": "FAIL",
             "memory": "MEM_REGRESSION"}
FALSE_ALARM_ARMS = ("null", "drift")


def fail(message):
    print(f"verdict_power: error: {message}", file=sys.stderr)
    sys.exit(2)


# --- exact binomial intervals ------------------------------------------------------------------

def binomial_cdf(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p), summed in logs (exact to double precision)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
             for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def clopper_pearson(k, n, confidence=0.95):
    """The exact two-sided interval for a binomial rate: k events in n trials. Each end solved by
    bisection on the binomial tail (the beta quantile it equals): the lower end p with
    P(X >= k | p) = alpha/2, the upper end p with P(X <= k | p) = alpha/2."""
    if n <= 0:
        return (0.0, 1.0)
    alpha = 1.0 - confidence

    def solve(f, target):  # f increasing in p
        lo, hi = 0.0, 1.0
        for _ in range(200):
            mid = (lo + hi) / 2
            if f(mid) < target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    # P(X >= k | p) and P(X > k | p) both grow with p.
    low = 0.0 if k == 0 else solve(lambda p: 1.0 - binomial_cdf(k - 1, n, p), alpha / 2)
    high = 1.0 if k == n else solve(lambda p: 1.0 - binomial_cdf(k, n, p), 1.0 - alpha / 2)
    return (low, high)


# --- the cases and the scratch folders ---------------------------------------------------------

class Case:
    def __init__(self, key, manifest, program, params, scale, slowdown):
        self.key = key
        self.backend, self.scenario, self.variant = key.split(".", 2)
        self.manifest = manifest
        self.program = program
        self.params = params            # base parameters: every arm runs with them
        self.scale = scale              # the parameter the scaled arm multiplies, or None
        self.scaled_params = dict(params)
        self.scale_ratio = None
        if scale:
            base = params.get(scale, self.default_of(scale))
            scaled = base * slowdown if isinstance(base, float) else round(base * slowdown)
            self.scaled_params[scale] = scaled
            self.scale_ratio = scaled / base if base else None
        self.tracked_bytes = 0

    def default_of(self, name):
        for v in self.manifest.get("variants", []):
            if v.get("name") == self.variant and name in v.get("params", {}):
                return v["params"][name]
        return self.manifest["params"][name]["default"]


def read_cases(args):
    """The cases asked for, each checked against its scenario's manifest; exit 2 naming the flag."""
    with open(args.index) as f:
        index = json.load(f)
    index_dir = os.path.dirname(os.path.abspath(args.index))
    scenarios = {}
    for s in index.get("scenarios", []):
        program = s["program"] if os.path.isabs(s["program"]) else os.path.join(index_dir, s["program"])
        manifest_path = s["manifest"] if os.path.isabs(s["manifest"]) else os.path.join(index_dir, s["manifest"])
        with open(manifest_path) as f:
            scenarios[s["name"]] = (json.load(f), program)

    keys = [k.strip() for k in args.cases.split(",") if k.strip()]
    if not keys:
        fail("--cases: no case given")
    if len(set(keys)) != len(keys):
        fail(f"--cases {args.cases!r}: a case is named twice")
    params = {k: dict(DEFAULT_CASES.get(k, {}).get("params", {})) for k in keys}
    scales = {k: DEFAULT_CASES.get(k, {}).get("scale") for k in keys}
    for item in args.param:
        key, _, assignment = item.partition(":")
        name, eq, value = assignment.partition("=")
        if key not in params or not eq or not name:
            fail(f"--param {item!r}: expected CASE:NAME=VALUE with CASE one of --cases")
        params[key][name] = value
    for item in args.scale:
        key, colon, name = item.partition(":")
        if key not in scales or not colon:
            fail(f"--scale {item!r}: expected CASE:NAME (or CASE: for none) with CASE one of --cases")
        scales[key] = name or None

    cases = []
    for key in keys:
        if key.count(".") < 2 or not key.startswith("cpu."):
            fail(f"--cases: {key!r} is not a CPU case key, cpu.<scenario>.<variant>")
        _, scenario, variant = key.split(".", 2)
        if scenario not in scenarios:
            fail(f"--cases: {key}: no scenario {scenario!r} in {args.index}")
        manifest, program = scenarios[scenario]
        if variant not in [v.get("name") for v in manifest.get("variants", [])]:
            fail(f"--cases: {key}: scenario {scenario} has no variant {variant!r}")
        declared = manifest.get("params", {})
        typed = {}
        for name, value in params[key].items():
            if name not in declared:
                fail(f"--param {key}:{name}: {scenario} has no parameter {name!r} "
                     f"(it has {', '.join(sorted(declared))})")
            default = declared[name]["default"]
            try:
                typed[name] = (int(value) if isinstance(default, int) and not isinstance(default, bool)
                               else float(value) if isinstance(default, float) else value)
            except ValueError:
                fail(f"--param {key}:{name}={value}: not a number like its default {default}")
            low, high = declared[name].get("min"), declared[name].get("max")
            if isinstance(typed[name], (int, float)) and ((low is not None and typed[name] < low)
                                                          or (high is not None and typed[name] > high)):
                fail(f"--param {key}:{name}={value}: out of the parameter's bounds [{low}, {high}]")
        scale = scales[key]
        if scale is not None:
            if scale not in declared or not isinstance(declared[scale]["default"], (int, float)):
                fail(f"--scale {key}:{scale}: {scenario} has no numeric parameter {scale!r}")
        case = Case(key, manifest, program, typed, scale, args.slowdown)
        if scale and not case.scale_ratio:
            fail(f"--scale {key}:{scale}: its value is 0, nothing to scale")
        high = declared[scale].get("max") if scale else None
        if high is not None and case.scaled_params[scale] > high:
            fail(f"--scale {key}:{scale}: {case.scaled_params[scale]} (--slowdown x{args.slowdown}) is above the "
                 f"parameter's maximum {high}")
        cases.append(case)
    return cases, index


class Pipeline:
    """Scratch index, expected/ folders and run folders; every `pitfall` command goes through here."""

    def __init__(self, args, cases, index, scratch):
        self.args = args
        self.cases = cases
        self.scratch = scratch
        self.count = 0
        self.empty = self.profile_folder("expected-none")    # the reference runs: NO_BASELINE, nothing re-measured
        self.block_expected = self.profile_folder("expected")   # this block's bless
        self.drift_expected = self.profile_folder("expected-drift")  # the first block's bless, kept
        self.scaled_expected = self.profile_folder("expected-scaled")  # this block's, memory bounds left out
        self.index = self.write_index(index, "index.json", lambda c: c.params)
        self.scaled_index = self.write_index(index, "index-scaled.json", lambda c: c.scaled_params)
        self.filters = ["--backend", "cpu",
                        "--scenario", ",".join(sorted({c.scenario for c in cases})),
                        "--variant", ",".join(sorted({c.variant for c in cases}))]
        listed = self.pitfall("list", "--json", *self.filters, "--index", self.index, expected=self.empty)
        selected = sorted(f"{r['backend']}.{r['scenario']}.{r['variant']}" for r in json.loads(listed.stdout))
        if selected != sorted(c.key for c in cases):
            extra = sorted(set(selected) - {c.key for c in cases})
            fail(f"--cases: one run of these cases' scenarios and variants would also run {', '.join(extra)}: "
                 "give cases whose variant names do not cross (or measure them in separate invocations)")

    def profile_folder(self, name):
        folder = os.path.join(self.scratch, name)
        os.makedirs(os.path.join(folder, "bench"))
        with open(os.path.join(folder, "bench", "profile.json"), "w") as f:
            json.dump({"schema": "pitfall.profile/1", "name": "bench", "match": {},
                       "description": "scratch profile of bench/verdict_power.py"}, f)
        return folder

    def write_index(self, index, name, params_of):
        """A copy of the build's index whose programs for the measured scenarios are small wrappers
        that add each case's --param values (chosen by the --variant the harness passes): the real
        program under the real harness, at other sizes."""
        index_dir = os.path.dirname(os.path.abspath(self.args.index))
        doc = dict(index)
        doc["paths"] = {k: v if not isinstance(v, str) or os.path.isabs(v) else os.path.join(index_dir, v)
                        for k, v in index.get("paths", {}).items()}
        doc["scenarios"] = []
        for s in index["scenarios"]:
            s = dict(s)
            for field in ("program", "manifest"):
                if not os.path.isabs(s[field]):
                    s[field] = os.path.join(index_dir, s[field])
            mine = [c for c in self.cases if c.scenario == s["name"] and params_of(c)]
            if mine:
                program = shlex.quote(s["program"])
                lines = ["#!/bin/sh", "variant=", "previous=",
                         'for a in "$@"; do [ "$previous" = --variant ] && variant=$a; previous=$a; done',
                         'case "$variant" in']
                for c in mine:
                    extra = " ".join(f"--param {shlex.quote(f'{k}={v}')}" for k, v in sorted(params_of(c).items()))
                    lines.append(f'  {shlex.quote(c.variant)}) exec {program} "$@" {extra} ;;')
                lines += ["esac", f'exec {program} "$@"', ""]
                wrapper = os.path.join(self.scratch, f"{name}.{s['name']}.sh")
                with open(wrapper, "w") as f:
                    f.write("\n".join(lines))
                os.chmod(wrapper, 0o755)
                s["program"] = wrapper
            doc["scenarios"].append(s)
        path = os.path.join(self.scratch, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def pitfall(self, *argv, expected, index=None, env=None):
        cmd = [self.args.pitfall, *argv, "--expected", expected]
        if "--index" not in argv:
            cmd += ["--index", index or self.index]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if p.returncode not in (0, 1):
            fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        return p

    def run(self, expected, inject=None, scaled=False, keep=False):
        """One `pitfall run` of every case; returns {case key: judged record}."""
        self.count += 1
        out = os.path.join(self.scratch, f"run{self.count}")
        env = dict(os.environ)
        env.pop("PITFALL_INJECT", None)
        if inject:
            env["PITFALL_INJECT"] = inject
        self.pitfall("run", *self.filters, "--profile", "bench", "--samples", str(self.args.samples),
                     "--timing-floor", str(self.args.timing_floor),
                     "--remeasure-pause", str(self.args.remeasure_pause), "--out", out,
                     expected=expected, index=self.scaled_index if scaled else self.index, env=env)
        records = {}
        with open(os.path.join(out, "results.jsonl")) as f:
            for line in f:
                r = json.loads(line) if line.strip() else {}
                if r.get("record") == "case":
                    records[r["case"]] = r  # the last record of a case is the one that stands
        missing = [c.key for c in self.cases if c.key not in records]
        if missing:
            fail(f"pitfall run --out {out}: no record of {', '.join(missing)}")
        if keep:
            for r in records.values():
                r["_dir"] = out
        else:
            shutil.rmtree(out, ignore_errors=True)
        return records

    def bless_block(self, first):
        """The block's baseline: --reference-runs runs blessed together. Returns the seconds one
        reference run took (the first's), for the estimate."""
        refs, took = [], []
        for i in range(self.args.reference_runs):
            if i:  # as a person blesses: runs a little apart, not all inside one episode of interference
                time.sleep(self.args.reference_pause)
            started = time.monotonic()
            refs.append(self.run(self.empty, keep=True))
            took.append(time.monotonic() - started)
        for records in refs:
            for key, r in records.items():
                if r["verdict"] in ("CRASH", "TIMEOUT", "UNSUPPORTED") or r.get("failing"):
                    fail(f"{key}: a reference run is {r['verdict']}: {r.get('reason', '')}")
        for c in self.cases:
            c.tracked_bytes = (refs[0][c.key].get("result") or {}).get("memory", {}).get("tracked_peak_bytes", 0)
            c.reference_records = [r[c.key] for r in refs]
        dirs = sorted({r["_dir"] for records in refs for r in records.values()})
        p = self.pitfall("bless", *dirs, "--profile", "bench", expected=self.block_expected)
        if p.returncode != 0:
            fail(f"pitfall bless {' '.join(dirs)}: {p.stdout[-1000:]}{p.stderr[-2000:]}")
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        blessed = os.path.join(self.block_expected, "bench")
        if first:
            shutil.rmtree(os.path.join(self.drift_expected, "bench"))
            shutil.copytree(blessed, os.path.join(self.drift_expected, "bench"))
        # The scaled arm's baseline: the same entries without their memory bounds (a larger
        # workload allocates more, which would decide the verdict before its time could).
        target = os.path.join(self.scaled_expected, "bench")
        shutil.rmtree(target)
        shutil.copytree(blessed, target)
        for name in os.listdir(target):
            if name == "profile.json" or not name.endswith(".json"):
                continue
            path = os.path.join(target, name)
            with open(path) as f:
                doc = json.load(f)
            for entry in doc.get("cases", {}).values():
                entry.pop("memory", None)
            with open(path, "w") as f:
                json.dump(doc, f, indent=2)
        return took[0]


# --- the measurement ---------------------------------------------------------------------------

def injection(arm, cases, slowdown):
    if arm == "injected":
        return ",".join(f"slowdown:{c.key}:{slowdown}" for c in cases)
    if arm == "outcome":
        return ",".join(f"outcome:{c.key}:cudaErrorLaunchFailure" for c in cases)
    if arm == "memory":
        return ",".join(f"extra_device_bytes:{c.key}:{max(1, c.tracked_bytes // 10)}" for c in cases)
    return None


def timing_ratios(record):
    """{series: the median ratio new/baseline of the attempt kept}."""
    out = {}
    for name, t in (record.get("timings") or {}).items():
        point = (t.get("ratio") or {}).get("point")
        if isinstance(point, (int, float)):
            out[name] = point
    return out


def fmt_duration(seconds):
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def estimate(args, cases, reference_seconds, timed_arms):
    """Seconds the whole measurement should take, from one reference run: a run unchanged takes
    about as long; a run whose cases all come out slower adds the pause and one more process of
    each case with three times the samples (the timed part ~ the samples' share of the run)."""
    timed = sum(sum(sum(v["values"]) for v in (c.reference_records[0].get("result") or {}).get("samples", {}).values()
                    if v.get("unit") == "s") for c in cases)
    fixed = max(0.0, reference_seconds - timed)
    slow_run = reference_seconds + args.remeasure_pause + fixed + 3 * timed * args.slowdown
    per_trial = sum(slow_run if arm in ("injected", "scaled") else reference_seconds for arm in timed_arms)
    blocks = math.ceil(args.trials / args.block)
    planted = len([a for a in args.arm_list if a in ("outcome", "memory")])
    per_block = (args.reference_runs * reference_seconds + (args.reference_runs - 1) * args.reference_pause
                 + 0.5 + planted * reference_seconds)
    return blocks * per_block + args.trials * per_trial


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--pitfall",
                    default=os.environ.get("PITFALL_BIN", os.path.join(ROOT, "build/default/bin/pitfall")))
    ap.add_argument("--index",
                    default=os.environ.get("PITFALL_INDEX", os.path.join(ROOT, "build/default/pitfall-index.json")))
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES),
                    help="comma-separated CPU case keys, run together in each pitfall run (default: %(default)s)")
    ap.add_argument("--param", action="append", default=[], metavar="CASE:NAME=VALUE",
                    help="a parameter every arm runs the case with (repeatable; the default cases have theirs)")
    ap.add_argument("--scale", action="append", default=[], metavar="CASE:NAME",
                    help="the numeric parameter the scaled arm multiplies by --slowdown ('CASE:' for none: "
                         "the case sits the arm out; the default cases have theirs)")
    ap.add_argument("--arms", default=",".join(ARMS), help="which arms (default: %(default)s)")
    ap.add_argument("--trials", type=int, default=60,
                    help="trials an arm (default 60: 60 of 60 bounds the rate above 94%% with 95%% confidence)")
    ap.add_argument("--block", type=int, default=10,
                    help="trials between two blesses of the null arm's baseline (default %(default)s)")
    ap.add_argument("--samples", type=int, default=25,
                    help="samples a side (odd, >= 9; default 25: with 9 a side, noise on a shared machine leaves "
                         "too many verdicts AMBIGUOUS, and the re-measuring costs more than the samples)")
    ap.add_argument("--slowdown", type=float, default=1.2,
                    help="the injected factor and the scaled arm's workload factor (default %(default)s)")
    ap.add_argument("--timing-floor", type=float, default=0.10,
                    help="pitfall run --timing-floor: the smallest slowdown that can fail (default %(default)s)")
    ap.add_argument("--reference-runs", type=int, default=3,
                    help="runs blessed together as each block's baseline (bless keeps the least disturbed)")
    ap.add_argument("--reference-pause", type=float, default=1.0,
                    help="seconds between the reference runs (default 1)")
    ap.add_argument("--remeasure-pause", type=float, default=2.0,
                    help="passed to pitfall run: seconds before re-measuring an uncertain timing (default 2)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the arms' shuffled order (default 1)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the targets hold")
    ap.add_argument("--min-caught", type=float, default=0.95,
                    help="--check: the fraction of slowdowns (injected, scaled; pooled) that must be caught "
                         "(default %(default)s)")
    ap.add_argument("--max-false-alarms", type=float, default=0.05,
                    help="--check: the fraction of unchanged runs (null, drift; pooled) that may fail "
                         "(default %(default)s)")
    ap.add_argument("--verbose", action="store_true", help="every run's verdicts and ratios, on stderr")
    ap.add_argument("--json", help="also write the figures here (written whole, then renamed into place)")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # the table and the progress lines in order, in a log too

    for path, flag in ((args.pitfall, "--pitfall"), (args.index, "--index")):
        if not os.path.exists(path):
            fail(f"{flag} {path}: not found (build first: cmake --preset default && cmake --build --preset default)")
    if args.trials < 1:
        fail("--trials must be >= 1")
    if args.block < 1:
        fail("--block must be >= 1")
    if not 0 <= args.timing_floor < 1:
        fail("--timing-floor must be in [0, 1)")
    if not 1.0 < args.slowdown <= 100:
        fail("--slowdown must be a factor in (1, 100]")
    if args.reference_pause < 0 or args.remeasure_pause < 0:
        fail("--reference-pause and --remeasure-pause are seconds >= 0")
    if args.reference_runs < 1:
        fail("--reference-runs must be >= 1")
    if args.samples < 9 or args.samples % 2 == 0:
        fail("--samples must be odd and >= 9 (the timing statistics need that many a side)")
    for flag in ("min_caught", "max_false_alarms"):
        if not 0 <= getattr(args, flag) <= 1:
            fail(f"--{flag.replace('_', '-')} must be a fraction in [0, 1]")
    args.arm_list = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in args.arm_list if a not in ARMS]
    if unknown or not args.arm_list:
        fail(f"--arms {args.arms!r}: expected some of {','.join(ARMS)}")
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        fail(f"--json {args.json}: its folder does not exist")
    try:
        cases, index = read_cases(args)
    except (OSError, ValueError, KeyError) as e:
        fail(f"--index {args.index}: cannot read it or a manifest it names: {e}")
    if "scaled" in args.arm_list and not any(c.scale for c in cases):
        fail("--arms has scaled, but no case has a parameter to scale (--scale CASE:NAME)")

    scratch = tempfile.mkdtemp(prefix="pitfall-power-")
    try:
        return measure(args, cases, index, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args, cases, index, scratch):
    pipe = Pipeline(args, cases, index, scratch)
    arms = args.arm_list
    timed_arms = [a for a in TIMED_ARMS if a in arms]
    planted_arms = [a for a in ("outcome", "memory") if a in arms]
    tallies = {arm: {c.key: {"n": 0, "k": 0, "verdicts": {}, "remeasured": 0, "ratios": {}, "minutes": [],
                              "seconds": 0.0}
                     for c in cases if arm != "scaled" or c.scale} for arm in arms}
    rng = random.Random(args.seed)
    blocks = math.ceil(args.trials / args.block)

    print(f"verdict power: {len(cases)} case(s) x {args.trials} trials an arm ({', '.join(arms)}), "
          f"{args.samples} samples a side, slowdown x{args.slowdown}, timing floor {args.timing_floor:.0%}", flush=True)
    for c in cases:
        shown = " ".join(f"{k}={v}" for k, v in sorted(c.params.items())) or "defaults"
        scaled = (f"; scaled arm {c.scale}={c.scaled_params[c.scale]} (x{c.scale_ratio:.4f})" if c.scale
                  else "; no scaled arm")
        print(f"  {c.key}: {shown}{scaled}", flush=True)

    started = time.monotonic()
    drift_blessed = block_blessed = None
    done = 0
    trial_seconds = 0.0
    for b in range(blocks):
        reference_seconds = pipe.bless_block(first=b == 0)
        block_blessed = time.monotonic()
        if b == 0:
            drift_blessed = block_blessed
            guess = estimate(args, cases, reference_seconds, timed_arms)
            runs = blocks * (args.reference_runs + len(planted_arms)) + args.trials * len(timed_arms)
            print(f"one run of the cases took {reference_seconds:.1f} s: the whole measurement should take about "
                  f"{fmt_duration(guess)} ({runs} pitfall runs)", flush=True)
        for arm in planted_arms:  # deterministic: once a block
            run_started = time.monotonic()
            records = pipe.run(pipe.block_expected, injection(arm, cases, args.slowdown))
            for c in cases:
                tallies[arm][c.key]["seconds"] += time.monotonic() - run_started
            tally_run(args, tallies, arm, cases, records, block_blessed, trial=None)
        for t in range(min(args.block, args.trials - done)):
            trial_started = time.monotonic()
            order = list(timed_arms)
            rng.shuffle(order)
            for arm in order:
                expected = {"drift": pipe.drift_expected, "scaled": pipe.scaled_expected}.get(arm, pipe.block_expected)
                blessed = drift_blessed if arm == "drift" else block_blessed
                runnable = [c for c in cases if arm != "scaled" or c.scale]
                run_started = time.monotonic()
                records = pipe.run(expected, injection(arm, cases, args.slowdown), scaled=arm == "scaled")
                for c in runnable:
                    tallies[arm][c.key]["seconds"] += time.monotonic() - run_started
                tally_run(args, tallies, arm, runnable, records, blessed, trial=done)
            done += 1
            trial_seconds += time.monotonic() - trial_started
            elapsed = time.monotonic() - started
            left = (args.trials - done) * (elapsed / done)
            print(f"trial {done}/{args.trials} (block {b + 1}/{blocks}): {fmt_duration(elapsed)} elapsed, "
                  f"ETA {fmt_duration(left)}", file=sys.stderr, flush=True)

    total = time.monotonic() - started
    figures = summarize(args, cases, tallies, total, pipe.count)
    if args.json:
        tmp = f"{args.json}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(figures, f, indent=2)
        os.replace(tmp, args.json)
    if args.check and not figures["targets_met"]:
        print("verdict_power: a target was missed (see the table)", file=sys.stderr)
        return 1
    return 0


def tally_run(args, tallies, arm, cases, records, blessed, trial):
    for c in cases:
        r = records[c.key]
        t = tallies[arm][c.key]
        verdict = r["verdict"]
        t["n"] += 1
        t["k"] += bool(r.get("failing")) if arm in FALSE_ALARM_ARMS else verdict == CAUGHT_BY[arm]
        t["verdicts"][verdict] = t["verdicts"].get(verdict, 0) + 1
        t["remeasured"] += len(r.get("attempts") or []) > 1
        for name, ratio in timing_ratios(r).items():
            t["ratios"].setdefault(name, {})[trial if trial is not None else len(t["ratios"].get(name, {}))] = ratio
        t["minutes"].append((time.monotonic() - blessed) / 60)
        if args.verbose:
            shown = ", ".join(f"{n} x{x:.3f}" for n, x in timing_ratios(r).items())
            print(f"  {arm:8s} {c.key}: {verdict} {shown}  {r.get('reason', '')[:140]}", file=sys.stderr)


def one_sided(arm, k, n):
    """The one-sided 95% bound that says how good the arm's rate is: at most this many false
    alarms, at least this many caught (an end of the two-sided 90% interval)."""
    low, high = clopper_pearson(k, n, 0.90)
    return high if arm in FALSE_ALARM_ARMS else low


def show_bound(arm, bound):
    return f"{'<=' if arm in FALSE_ALARM_ARMS else '>='} {pct(bound)}"


def pct(x):
    return f"{100 * x:.1f}%"


def summarize(args, cases, tallies, total, runs):
    what = {"null": "false alarms (any failing verdict)", "drift": "false alarms (any failing verdict)",
            "injected": "caught (PERF_REGRESSION)", "scaled": "caught (PERF_REGRESSION)",
            "outcome": "caught (FAIL)", "memory": "caught (MEM_REGRESSION)"}
    figures = {"cases": {c.key: {"params": c.params, "scale": c.scale,
                                 "scaled_value": c.scaled_params.get(c.scale) if c.scale else None,
                                 "scale_ratio": c.scale_ratio} for c in cases},
               "trials": args.trials, "block": args.block, "samples": args.samples, "slowdown": args.slowdown,
               "timing_floor": args.timing_floor, "reference_runs": args.reference_runs,
               "remeasure_pause": args.remeasure_pause, "confidence": 0.95, "arms": {}}
    width = max(len(c.key) for c in cases)
    print(f"\n{'arm':9s} {'case':{width}s} {'n':>4s} {'k':>4s} {'rate':>7s}  {'95% interval':17s} {'95% bound':>9s} "
          f"{'ratio':>6s} {'again':>5s} {'s/run':>5s} {'min since bless':>15s}  verdicts")
    met = True
    for arm, by_case in tallies.items():
        arm_fig = {"events": what[arm], "cases": {}}
        pooled_n = pooled_k = 0
        for key, t in by_case.items():
            n, k = t["n"], t["k"]
            if n == 0:
                continue
            low, high = clopper_pearson(k, n)
            bound = one_sided(arm, k, n)
            medians = {name: statistics.median(v.values()) for name, v in t["ratios"].items()}
            worst = max(medians.values()) if medians else None
            minutes = t["minutes"]
            span = f"{min(minutes):.1f}-{max(minutes):.1f}"
            verdicts = ", ".join(f"{v} {c}" for v, c in sorted(t["verdicts"].items()))
            print(f"{arm:9s} {key:{width}s} {n:4d} {k:4d} {pct(k / n):>7s}  [{pct(low):>6s}, {pct(high):>6s}] "
                  f"{show_bound(arm, bound):>9s} {'' if worst is None else f'{worst:.3f}':>6s} {t['remeasured']:5d} "
                  f"{t['seconds'] / n:5.1f} {span:>15s}  {verdicts}")
            arm_fig["cases"][key] = {"n": n, "k": k, "rate": k / n, "low": low, "high": high, "one_sided": bound,
                                     "verdicts": t["verdicts"], "remeasured": t["remeasured"],
                                     "seconds_per_run": t["seconds"] / n,
                                     "median_ratio": medians,
                                     "minutes_since_bless": {"min": min(minutes), "median": statistics.median(minutes),
                                                             "max": max(minutes)}}
            pooled_n += n
            pooled_k += k
        if pooled_n == 0:
            continue
        low, high = clopper_pearson(pooled_k, pooled_n)
        bound = one_sided(arm, pooled_k, pooled_n)
        rate = pooled_k / pooled_n
        if arm in FALSE_ALARM_ARMS:
            ok, target = rate <= args.max_false_alarms, f"<= {pct(args.max_false_alarms)}"
        elif arm in ("injected", "scaled"):
            ok, target = rate >= args.min_caught, f">= {pct(args.min_caught)}"
        else:
            ok, target = pooled_k == pooled_n, "every time"
        met = met and ok
        print(f"{arm:9s} {'pooled':{width}s} {pooled_n:4d} {pooled_k:4d} {pct(rate):>7s}  "
              f"[{pct(low):>6s}, {pct(high):>6s}] {show_bound(arm, bound):>9s}  {what[arm]}: target {target}"
              f"{'' if ok else '  MISSED'}")
        arm_fig["pooled"] = {"n": pooled_n, "k": pooled_k, "rate": rate, "low": low, "high": high,
                             "one_sided": bound, "target": target, "met": ok}
        figures["arms"][arm] = arm_fig

    scaled = tallies.get("scaled", {})
    if scaled:
        figures["real_slowdown"] = {}
        print("\nthe scaled arm's real slowdown, measured: trial by trial, its kept run's median ratio to the "
              f"baseline\nover the injected arm's (x{args.slowdown} exactly, on the unscaled work), times "
              f"{args.slowdown}; the median over the trials\n(beside it: the scaled arm's ratio to the baseline alone)")
        for key, t in scaled.items():
            c = next(c for c in cases if c.key == key)
            injected = tallies.get("injected", {}).get(key, {}).get("ratios", {})
            shown, measured = [], {}
            for name, by_trial in sorted(t["ratios"].items()):
                paired = [args.slowdown * x / injected[name][i] for i, x in by_trial.items()
                          if i in injected.get(name, {}) and injected[name][i] > 0]
                raw = statistics.median(by_trial.values())
                measured[name] = {"paired": statistics.median(paired) if paired else None, "to_baseline": raw,
                                  "trials": len(paired)}
                shown.append(f"{name} x{statistics.median(paired):.3f} (to the baseline x{raw:.3f})" if paired
                             else f"{name} x{raw:.3f} to the baseline (no injected arm to pair with)")
            figures["real_slowdown"][key] = {"param": c.scale, "param_ratio": c.scale_ratio, "series": measured}
            print(f"  {key}: {c.scale} x{c.scale_ratio:.4f} -> {', '.join(shown)}")
    print("\n95% interval: exact two-sided (Clopper-Pearson); 95% bound: one-sided, the rate is at least (caught)\n"
          "or at most (false alarms) this with 95% confidence; ratio: median over the trials of the kept attempt's\n"
          "median ratio to the baseline (its slowest series); again: runs re-measured; s/run: seconds a pitfall run\n"
          "of the arm took (all the cases in it)")
    figures["targets_met"] = met
    figures["total_seconds"] = total
    figures["pitfall_runs"] = runs
    print(f"{runs} pitfall runs in {fmt_duration(total)}")
    return figures


if __name__ == "__main__":
    sys.exit(main())
