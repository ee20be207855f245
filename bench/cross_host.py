#!/usr/bin/env python3
"""Whether timing verdicts blessed on one host hold on another host of the same kind.

Blesses the timed CPU suite (every CPU case of a scenario whose scenario.json declares
"timings") on this machine as it is, from --bless-runs runs, into a scratch copy of expected/.
Then, on each emulated host, it runs that suite:

  same     this machine as blessed (the host id and fingerprint of the bless)
  slower   the run limited to 75% of a core by CFS bandwidth: 3 ms of every 4 ms (cgroup v1
           cpu.cfs_quota_us / cpu.cfs_period_us, or cgroup v2 cpu.max)
  busier   a memory-bandwidth hog on the other core (dd from /dev/zero in 64 MiB blocks,
           pinned with taskset to the last CPU)
  kernels  OPENBLAS_CORETYPE set to another kernel type than the bless ran with

Each emulated host but `same` runs under its own PITFALL_HOST_ID, as another machine would.
Per host:

  before   --runs unchanged-code runs judged on the absolute series alone, as if every host
           were the one that blessed them (a scratch copy of the baseline with the normalised
           series left out and the host id and fingerprint id set to this host's), each series
           at its own level (--timing-correction none): what judging absolute times across
           hosts would do. The judge still reads the evidence recorded beside them: a series
           whose samples waited for a CPU (a quota) is AMBIGUOUS, not slower, so each run also
           counts its series' verdicts
  after    --runs unchanged-code runs judged as pitfall judges them: absolute series only on
           the blessing host, normalised series everywhere, all series of a run together
           (Holm, level 0.05)
  trials   --trials runs with two cases slowed by PITFALL_INJECT: one by --slowdown (20%),
           another by --small-slowdown (10%), rotating through --inject-cases; caught when that
           case is PERF_REGRESSION at the end of its run

A run that exits 1 is a false alarm of the whole suite (nothing changed). The catch rates come
with exact 95% Clopper-Pearson intervals. The cross-host spread of each series is the median
over a host's `after` runs of (that run's median / the blessed median), absolute and
normalised (with each sample's CPU wait taken out, as the judge does): how far hosts differ
before and after normalising.

    bench/cross_host.py --json cross-host.json               # 3 blessed; 20 + 20 + 60 runs a host
    bench/cross_host.py --suite quick --hosts slower,busier,kernels --json cross-host.json
    bench/cross_host.py --hosts same,slower --runs 3 --trials 4   # a first look: ~4 min
    bench/cross_host.py --arms after,trials            # the judge as it is, without `before`
    bench/cross_host.py --build build/cpu-only
    bench/cross_host.py --report cross-host.json             # the tables of a saved run again

Needs root for the `slower` host (a cgroup of its own). The scratch folder is removed unless
--keep; the repository's expected/ is never written. Progress goes to stderr, one line a run,
with an ETA.
Exit: 0 measured; 2 bad usage, a command that could not run, or a host that cannot be emulated
here (the message says which and why).
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verdict_power import clopper_pearson  # noqa: E402  (the same exact interval)
sys.path.insert(0, os.path.join(ROOT, "harness", "tests", "cli"))
from check_timed_suite import timed_scenarios  # noqa: E402  (the suite CTest judges)

HOSTS = ["same", "slower", "busier", "kernels"]
HOST_IDS = {"slower": "5105e55105e55105", "busier": "b05b05b05b05b05b", "kernels": "ce5ce5ce5ce5ce5c"}
# The quick suite (--suite quick): one or two timed CPU cases per scenario, among them every
# case a trial slows; the full suite is every CPU case of the scenarios that declare timings.
QUICK_SCENARIOS = ["batch_size_one", "cpu_bound_preprocessing", "device_visibility", "dtype_casting",
                   "float64_inputs", "host_only_custom_op"]
QUICK_VARIANTS = ["remedy_batch_32", "remedy_overlap", "remedy_explicit_device",
                  "reproduce_fp16_training_no_loss_scaling", "remedy", "fallback_copy_to_host"]
INJECT_CASES = [
    "cpu.float64_inputs.remedy",
    "cpu.dtype_casting.reproduce_fp16_training_no_loss_scaling",
    "cpu.batch_size_one.remedy_batch_32",
    "cpu.host_only_custom_op.fallback_copy_to_host",
    "cpu.cpu_bound_preprocessing.remedy_overlap",
]
CGROUP_NAME = "pitfall-cross-host-slower"


def fail(message):
    print(f"cross_host: error: {message}", file=sys.stderr)
    sys.exit(2)


def whole(lo, hi):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected {lo} to {hi}, got {value}")
        return value
    return parse


def slowdown(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a factor such as 1.2, got {text!r}")
    if not 1.0 < value <= 10.0:
        raise argparse.ArgumentTypeError(f"expected a factor in (1, 10], got {value}")
    return value


ARMS = ["before", "after", "trials"]


def some_of(choices):
    """An argparse type: a comma-separated list of some of `choices`."""
    def parse(text):
        picked = [c for c in text.split(",") if c]
        if not picked or any(c not in choices for c in picked):
            raise argparse.ArgumentTypeError(f"expected some of {','.join(choices)}, got {text!r}")
        return picked
    return parse


def read_records(run_dir):
    """The newest record of each case (a later line replaces an earlier one), and the header."""
    records, header = {}, {}
    with open(os.path.join(run_dir, "results.jsonl")) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("record") == "run":
                header = r
            elif r.get("record") == "case":
                records[r["case"]] = r
    return records, header


class Emulation:
    """How a host is emulated: environment, a process to run beside, a cgroup to run in."""

    def __init__(self, name, blessed_core):
        self.name = name
        self.env = dict(os.environ)
        self.hog = None
        self.cgroup_procs = None
        if name != "same":
            self.env["PITFALL_HOST_ID"] = HOST_IDS[name]
        if name == "kernels":
            self.env["OPENBLAS_CORETYPE"] = "Sandybridge" if blessed_core != "Sandybridge" else "Haswell"
        if name == "slower":
            self.cgroup_procs = make_slow_cgroup()

    def __enter__(self):
        if self.name == "busier":
            cpus = os.cpu_count() or 1
            if cpus < 2:
                fail("busier: a hog on another core needs two CPUs")
            self.hog = subprocess.Popen(["taskset", "-c", str(cpus - 1), "dd", "if=/dev/zero",
                                         "of=/dev/null", "bs=64M"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        if self.hog is not None:
            self.hog.terminate()
            self.hog.wait()
        return False

    def preexec(self):
        procs = self.cgroup_procs
        if procs is None:
            return None

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        return enter


def make_slow_cgroup():
    """A cgroup that gives its processes 3 ms of CPU in every 4 ms; the path of its procs file."""
    v1 = "/sys/fs/cgroup/cpu"
    try:
        if os.path.isfile(os.path.join(v1, "cpu.cfs_quota_us")):
            path = os.path.join(v1, CGROUP_NAME)
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
                f.write("4000")
            with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
                f.write("3000")
            return os.path.join(path, "cgroup.procs")
        v2 = "/sys/fs/cgroup"
        if os.path.isfile(os.path.join(v2, "cgroup.controllers")):
            path = os.path.join(v2, CGROUP_NAME)
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "cpu.max"), "w") as f:
                f.write("3000 4000")
            return os.path.join(path, "cgroup.procs")
    except OSError as e:
        fail(f"slower: cannot make a CPU-bandwidth cgroup ({e}); run as root, or leave out slower")
    fail("slower: no cgroup CPU controller here (neither cgroup v1 cpu nor v2 cpu.max)")
    return None


class Bench:
    def __init__(self, args, scratch):
        self.args = args
        self.scratch = scratch
        self.pitfall = os.path.join(args.build, "bin", "pitfall")
        self.index = os.path.join(args.build, "pitfall-index.json")
        self.scenarios = ",".join(timed_scenarios())
        self.variant_filter = []
        if args.suite == "quick":
            self.scenarios = ",".join(QUICK_SCENARIOS)
            self.variant_filter = ["--variant", ",".join(QUICK_VARIANTS)]
        self.count = 0

    def run(self, name, expected, emulation, extra=(), inject=None):
        out = os.path.join(self.scratch, "runs", name)
        cmd = [self.pitfall, "run", "--index", self.index, "--expected", expected,
               "--backend", "cpu", "--scenario", self.scenarios, "--out", out, "--replace",
               *self.variant_filter, *extra]
        env = dict(emulation.env)
        if inject:
            env["PITFALL_INJECT"] = inject
        started = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env=env, preexec_fn=emulation.preexec())
        took = time.monotonic() - started
        if p.returncode not in (0, 1):
            fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-600:]}")
        self.count += 1
        return out, p.returncode, took


def strip_to_absolute(src, dst, host_id, fingerprint_id):
    """The baseline as judging absolute times across hosts would use it: no normalised series,
    and every timed entry claimed by this host and fingerprint."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for path in glob.glob(os.path.join(dst, "*", "*.json")):
        with open(path) as f:
            doc = json.load(f)
        changed = False
        for entry in doc.get("cases", {}).values() if isinstance(doc.get("cases"), dict) else []:
            if "timings" not in entry:
                continue
            for series in entry["timings"].values():
                series.pop("normalised", None)
            entry["provenance"]["host_id"] = host_id
            entry["provenance"]["fingerprint_id"] = fingerprint_id
            changed = True
        if changed:
            with open(path, "w") as f:
                json.dump(doc, f, indent=2)


def series_medians(run_dir, blessed):
    """{case/series: (absolute ratio, normalised ratio)} of a run's kept results against the
    blessed medians."""
    out = {}
    for key, entry in blessed.items():
        path = os.path.join(run_dir, "cases", key + ".json")
        try:
            with open(path) as f:
                result = json.load(f)
        except (OSError, ValueError):
            continue
        for name, series in entry.items():
            seen = result.get("samples", {}).get(name)
            if not seen or not seen.get("values"):
                continue
            absolute = statistics.median(seen["values"]) / series["absolute"]
            normalised = None
            if series.get("by") and seen.get("controls", {}).get(series["by"]):
                values, control = without_cpu_wait(seen, series["by"])
                normalised = statistics.median(values) / statistics.median(control) / series["normalised"]
            out[f"{key}:{name}"] = (absolute, normalised)
    return out


def without_cpu_wait(seen, by):
    """A result series' samples and its control's, with each sample's CPU wait taken out where
    both say it (as pitfall's judge normalises: x * (1 - share)); as timed otherwise."""
    values, control = seen["values"], seen["controls"][by]
    shares = seen.get("cpu_wait_share")
    control_shares = seen.get("control_cpu_wait_share", {}).get(by)
    if (isinstance(shares, list) and len(shares) == len(values) and isinstance(control_shares, list)
            and len(control_shares) == len(control)):
        values = [x * (1 - w) for x, w in zip(values, shares)]
        control = [x * (1 - w) for x, w in zip(control, control_shares)]
    return values, control


def verdict_counts(records):
    """How many absolute and normalised series of a run's records came out each verdict."""
    counts = {"absolute": {}, "normalised": {}}
    for r in records.values():
        for name, t in (r.get("timings") or {}).items():
            kind = "normalised" if "/" in name else "absolute"
            v = t.get("verdict", "?")
            counts[kind][v] = counts[kind].get(v, 0) + 1
    return counts


def blessed_medians(expected):
    """{case key: {series: {absolute, normalised, by}}} of the scratch host profile."""
    out = {}
    for path in glob.glob(os.path.join(expected, "host", "*.json")):
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc.get("cases"), dict):
            continue
        for entry_key, entry in doc["cases"].items():
            backend, variant = entry_key.split(".", 1)
            for name, t in entry.get("timings", {}).items():
                m = {"absolute": statistics.median(t["samples"])}
                if "normalised" in t:
                    m["by"] = t["normalised"]["by"]
                    m["normalised"] = statistics.median(t["normalised"]["samples"])
                out.setdefault(f"{backend}.{doc['scenario']}.{variant}", {})[name] = m
    return out


def progress(bench, total, started, line):
    done = bench.count
    elapsed = time.monotonic() - started
    eta = elapsed / done * (total - done) if done else 0
    print(f"[{done}/{total}] {line}  (elapsed {elapsed / 60:.1f} min, ETA {eta / 60:.1f} min)",
          file=sys.stderr, flush=True)


def rate(k, n):
    low, high = clopper_pearson(k, n)
    return {"k": k, "n": n, "rate": k / n if n else None, "ci95": [low, high]}


def measure_host(bench, host, args, expected_after, blessed, blessed_core, total, started):
    figures = {"before": [], "after": [], "trials": []}
    with Emulation(host, blessed_core) as emu:
        # This host's fingerprint id, learned from one short run under the emulation.
        probe, _, _ = bench.run(f"{host}-probe", expected_after, emu, ("--timings", "record"))
        _, header = read_records(probe)
        expected_before = os.path.join(bench.scratch, f"expected-before-{host}")
        host_id = header["fingerprint"]["host"]["identity"]["id"]
        strip_to_absolute(expected_after, expected_before, host_id, header["fingerprint_id"])
        for arm, expected, extra in (("before", expected_before, ("--timing-correction", "none")),
                                     ("after", expected_after, ())):
            if arm not in args.arms:
                continue
            for i in range(args.runs):
                out, code, took = bench.run(f"{host}-{arm}-{i}", expected, emu, extra)
                records, _ = read_records(out)
                failing = sorted(f"{k}: {r['verdict']}" for k, r in records.items() if r.get("failing"))
                row = {"exit": code, "wall_seconds": round(took, 1), "failing": failing,
                       "series": verdict_counts(records)}
                if arm == "after":
                    row["spread"] = series_medians(out, blessed)
                figures[arm].append(row)
                progress(bench, total, started, f"{host} {arm} {i + 1}/{args.runs}: exit {code}"
                         + (f" ({len(failing)} failing)" if failing else ""))
        for i in range(args.trials if "trials" in args.arms else 0):
            big = INJECT_CASES[i % len(INJECT_CASES)]
            small = INJECT_CASES[(i + 2) % len(INJECT_CASES)]
            inject = f"slowdown:{big}:{args.slowdown},slowdown:{small}:{args.small_slowdown}"
            out, code, took = bench.run(f"{host}-trial-{i}", expected_after, emu, inject=inject)
            records, _ = read_records(out)
            others = sorted(k for k, r in records.items() if r.get("failing") and k not in (big, small))
            row = {"big": big, "small": small,
                   "big_verdict": records.get(big, {}).get("verdict"),
                   "small_verdict": records.get(small, {}).get("verdict"),
                   "other_failing": others}
            figures["trials"].append(row)
            progress(bench, total, started,
                     f"{host} trial {i + 1}/{args.trials}: {row['big_verdict']} ({args.slowdown}x), "
                     f"{row['small_verdict']} ({args.small_slowdown}x)")
    return figures


def summarize(host, f, args):
    s = {"host": host}
    for arm in ("before", "after"):
        runs = f[arm]
        s[f"{arm}_exit_1"] = rate(sum(1 for r in runs if r["exit"] == 1), len(runs))
    trials = f["trials"]
    s["caught_big"] = rate(sum(1 for t in trials if t["big_verdict"] == "PERF_REGRESSION"), len(trials))
    s["caught_small"] = rate(sum(1 for t in trials if t["small_verdict"] == "PERF_REGRESSION"),
                             len(trials))
    for arm in ("before", "after"):
        totals = {}
        for r in f[arm]:
            for kind, counts in r.get("series", {}).items():
                for v, n in counts.items():
                    totals.setdefault(kind, {}).setdefault(v, 0)
                    totals[kind][v] += n
        s[f"{arm}_series"] = totals
    s["trials_other_failing"] = rate(sum(1 for t in trials if t["other_failing"]), len(trials))
    by_case = {}
    for t in trials:
        for arm in ("big", "small"):
            c = by_case.setdefault(t[arm], {"big": [0, 0], "small": [0, 0]})
            c[arm][1] += 1
            c[arm][0] += t[f"{arm}_verdict"] == "PERF_REGRESSION"
    s["caught_by_case"] = by_case
    spread = {}
    for row in f["after"]:
        for key, (a, n) in row.get("spread", {}).items():
            spread.setdefault(key, {"absolute": [], "normalised": []})
            spread[key]["absolute"].append(a)
            if n is not None:
                spread[key]["normalised"].append(n)
    s["spread"] = {k: {"absolute": statistics.median(v["absolute"]),
                       "normalised": statistics.median(v["normalised"]) if v["normalised"] else None}
                   for k, v in sorted(spread.items())}
    return s


def pct(r):
    if r["n"] == 0:
        return "n/a"
    lo, hi = r["ci95"]
    return f"{r['k']}/{r['n']} = {100 * r['rate']:.0f}% [{100 * lo:.0f}%, {100 * hi:.0f}%]"


def print_summary(summaries, args):
    print(f"\nruns exiting 1 (false alarms of the whole suite; goal at most 5%), and catch rates"
          f" of a {args.slowdown}x and a {args.small_slowdown}x slowdown of one case, with exact"
          f" 95% intervals:")
    print(f"{'host':<8} {'before (absolute)':<24} {'after (normalised)':<24} "
          f"{'caught ' + str(args.slowdown) + 'x':<24} {'caught ' + str(args.small_slowdown) + 'x':<24}")
    for s in summaries:
        print(f"{s['host']:<8} {pct(s['before_exit_1']):<24} {pct(s['after_exit_1']):<24} "
              f"{pct(s['caught_big']):<24} {pct(s['caught_small']):<24}")
    print("\nseries verdicts over all unchanged-code runs of an arm (absolute | normalised):")
    for s in summaries:
        for arm in ("before", "after"):
            cells = []
            for kind in ("absolute", "normalised"):
                counts = s.get(f"{arm}_series", {}).get(kind, {})
                cells.append(", ".join(f"{v} {n}" for v, n in sorted(counts.items())) or "none")
            print(f"{s['host']:<8} {arm:<7} {cells[0]} | {cells[1]}")
    print(f"\ncaught per slowed case ({args.slowdown}x, {args.small_slowdown}x), caught/trials:")
    cases = sorted({c for s in summaries for c in s["caught_by_case"]})
    print(f"{'case':<60} " + " ".join(f"{s['host']:>16}" for s in summaries))
    for c in cases:
        cells = []
        for s in summaries:
            v = s["caught_by_case"].get(c)
            cells.append(f"{v['big'][0]}/{v['big'][1]}, {v['small'][0]}/{v['small'][1]}".rjust(16)
                         if v else f"{'-':>16}")
        print(f"{c:<60} " + " ".join(cells))
    print("\ncross-host spread per series: median over the host's runs of run median / blessed "
          "median, absolute -> normalised")
    keys = sorted({k for s in summaries for k in s["spread"]})
    print(f"{'series':<72} " + " ".join(f"{s['host']:>17}" for s in summaries))
    for key in keys:
        cells = []
        for s in summaries:
            v = s["spread"].get(key)
            if not v:
                cells.append(f"{'-':>17}")
            else:
                n = f"{v['normalised']:.2f}" if v["normalised"] is not None else "-"
                cells.append(f"{v['absolute']:>8.2f} -> {n:>5}")
        print(f"{key:<72} " + " ".join(cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "ci"),
                    help="the build folder (bin/pitfall, pitfall-index.json); default build/ci")
    ap.add_argument("--hosts", type=some_of(HOSTS), default=HOSTS,
                    help="emulated hosts, comma-separated (default: same,slower,busier,kernels)")
    ap.add_argument("--suite", choices=["full", "quick"], default="full",
                    help="full: every CPU case of the scenarios that declare timings (default); "
                         "quick: one or two a scenario, every case the trials slow among them")
    ap.add_argument("--bless-runs", type=whole(1, 100), default=3, help="runs blessed from (3)")
    ap.add_argument("--runs", type=whole(1, 1000), default=20,
                    help="unchanged-code runs per host and arm (20)")
    ap.add_argument("--trials", type=whole(0, 1000), default=60,
                    help="runs with injected slowdowns per host (60)")
    ap.add_argument("--slowdown", type=slowdown, default=1.2, help="the larger slowdown (1.2)")
    ap.add_argument("--small-slowdown", type=slowdown, default=1.1,
                    help="the smaller slowdown (1.1)")
    ap.add_argument("--arms", type=some_of(ARMS), default=ARMS,
                    help="which arms to run, comma-separated (before,after,trials: all)")
    ap.add_argument("--json", metavar="FILE", help="also write every figure here")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--report", metavar="FILE",
                    help="measure nothing: print the tables of a --json FILE written earlier")
    args = ap.parse_args()
    if args.report:
        try:
            with open(args.report) as f:
                saved = json.load(f)
            hosts = saved["hosts"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            fail(f"--report {args.report}: not a cross_host.py --json file ({e})")
        print_summary([summarize(h, f, args) for h, f in hosts.items()], args)
        return 0

    bench_pitfall = os.path.join(args.build, "bin", "pitfall")
    for path in (bench_pitfall, os.path.join(args.build, "pitfall-index.json")):
        if not os.path.exists(path):
            fail(f"--build {args.build}: no {os.path.basename(path)} (build it first)")
    scratch = tempfile.mkdtemp(prefix="pitfall-cross-host-")
    os.makedirs(os.path.join(scratch, "runs"))
    expected = os.path.join(scratch, "expected")
    shutil.copytree(os.path.join(ROOT, "expected"), expected)
    bench = Bench(args, scratch)
    runs_a_host = args.runs * len([a for a in ("before", "after") if a in args.arms])
    trials = args.trials if "trials" in args.arms else 0
    total = args.bless_runs + len(args.hosts) * (1 + runs_a_host + trials)
    started = time.monotonic()
    figures = {"build": args.build, "suite": args.suite, "scenarios": bench.scenarios,
               "variants": bench.variant_filter[1:], "hosts": {}}
    try:
        blessed_runs = []
        same = Emulation("same", "")
        for i in range(args.bless_runs):
            out, code, _ = bench.run(f"bless-{i}", expected, same)
            blessed_runs.append(out)
            progress(bench, total, started, f"bless run {i + 1}/{args.bless_runs}: exit {code}")
        p = subprocess.run([bench.pitfall, "bless", *blessed_runs, "--index", bench.index,
                            "--expected", expected, "--profile", "host"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            fail(f"pitfall bless exited {p.returncode}: {p.stderr.strip()[-600:]}")
        _, header = read_records(blessed_runs[0])
        blessed_core = header.get("fingerprint_summary", {}).get("blas_core", "")
        blessed = blessed_medians(expected)
        # Judged from here on: the scenarios with a CPU case whose times were blessed (a
        # scenario whose CPU times bless refused has nothing to judge, and only costs time).
        kept = sorted({key.split(".")[1] for key in blessed} & set(bench.scenarios.split(",")))
        bench.scenarios = ",".join(kept)
        figures["scenarios"] = bench.scenarios
        summaries = []
        for host in args.hosts:
            f = measure_host(bench, host, args, expected, blessed, blessed_core, total, started)
            figures["hosts"][host] = f
            summaries.append(summarize(host, f, args))
        figures["summary"] = summaries
        print_summary(summaries, args)
    finally:
        if args.keep:
            print(f"scratch kept: {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(figures, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
