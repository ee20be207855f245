#!/usr/bin/env python3
"""The timed CPU suite, judged as one run against the repository's expected/ (CTest:
pitfall.timing.cpu_suite).

Runs every CPU case of the scenarios whose scenario.json declares "timings" and whose CPU times
expected/host holds, in one `pitfall run`, so that all their timed series share the run's one false-alarm rate (Holm, level 0.05).
Passes when the run exits 0 AND every normalised series that expected/host holds for those
cases was judged (SAME, FASTER, AMBIGUOUS or PERF_REGRESSION): a series that went NOT_COMPARED,
or lost its control, is a check that quietly stopped checking, and fails here.

    check_timed_suite.py --pitfall build/ci/bin/pitfall --index build/ci/pitfall-index.json \\
        --out build/ci/timed-suite

Exit: 0 passed; 1 the run failed, or a series was not judged (each named); 2 bad usage;
77 nothing to judge with this build or machine (a build type other than the one blessed, or a
CPU of another generation, by OpenBLAS's kernel type: their times say nothing of the
baseline's).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
JUDGED = {"SAME", "FASTER", "AMBIGUOUS", "PERF_REGRESSION"}


def timed_scenarios():
    names = []
    for path in sorted(glob.glob(os.path.join(ROOT, "scenarios", "*", "scenario.json"))):
        with open(path) as f:
            doc = json.load(f)
        if doc.get("timings") and "cpu" in doc.get("backends", []):
            names.append(doc["name"])
    return names


def blessed_series(expected, scenarios):
    """{case key: {"<series>/<control>", ...}} of expected/host's CPU entries, and their build
    types."""
    series, builds = {}, set()
    for name in scenarios:
        path = os.path.join(expected, "host", name + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            doc = json.load(f)
        for entry_key, entry in doc.get("cases", {}).items():
            backend, variant = entry_key.split(".", 1)
            if backend != "cpu":
                continue
            for s, t in entry.get("timings", {}).items():
                if "normalised" in t:
                    series.setdefault(f"cpu.{name}.{variant}", set()).add(f"{s}/{t['normalised']['by']}")
                    builds.add(entry.get("provenance", {}).get("build_type", ""))
    return series, builds


def final_records(run_dir):
    records = {}
    with open(os.path.join(run_dir, "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("record") == "case":
                records[r["case"]] = r
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pitfall", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--expected", default=os.path.join(ROOT, "expected"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.index) as f:
        build_type = json.load(f).get("build_type", "")
    scenarios = timed_scenarios()
    expected_series, builds = blessed_series(args.expected, scenarios)
    if not expected_series:
        print("check_timed_suite: expected/host holds no normalised series: nothing is judged")
        return 1
    if build_type not in builds:
        print(f"SKIP: this is a {build_type or 'untyped'} build; expected/host's times were "
              f"blessed from {', '.join(sorted(builds))}: they say nothing of each other")
        return 77
    # The scenarios whose CPU times expected/host holds (a scenario whose CPU times are not
    # blessed, such as multi_gpu_distribution's, has nothing to judge here).
    judged_scenarios = sorted({key.split(".")[1] for key in expected_series})
    cmd = [args.pitfall, "run", "--index", args.index, "--expected", args.expected,
           "--backend", "cpu", "--scenario", ",".join(judged_scenarios), "--out", args.out,
           "--replace"]
    print("+", " ".join(cmd), flush=True)
    code = subprocess.run(cmd).returncode
    if code not in (0, 1):
        print(f"check_timed_suite: pitfall run exited {code}")
        return 1
    records = final_records(args.out)
    unjudged, counts = [], {}
    for key, names in sorted(expected_series.items()):
        timings = records.get(key, {}).get("timings", {})
        for name in sorted(names):
            verdict = timings.get(name, {}).get("verdict", "missing")
            counts[verdict] = counts.get(verdict, 0) + 1
            if verdict not in JUDGED:
                unjudged.append(f"{key} {name}: {verdict}: {timings.get(name, {}).get('reason', '')}")
    total = sum(len(v) for v in expected_series.values())
    print(f"\n{total} normalised series in expected/host: "
          + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    for line in unjudged:
        print(f"  not judged: {line}")
    if code != 0:
        for key, r in sorted(records.items()):
            if r.get("failing"):
                print(f"  failing: {key}: {r['verdict']}: {r.get('reason', '')[:300]}")
    # Every series set aside because this CPU is of another generation than the one blessed
    # (another OpenBLAS kernel type): nothing here can judge them, and the skip says so. One
    # series judged, or one set aside for any other reason, and the check runs as ever.
    generation = ("another kernel type runs other code", "across CPU generations")
    if code == 0 and unjudged and len(unjudged) == total and all(
            any(why in line for why in generation) for line in unjudged):
        print("SKIP: expected/host's times were blessed on another CPU generation (OpenBLAS "
              "kernel type) than this machine's: none can be judged here (bless on this one to "
              "judge it)")
        return 77
    if code != 0 or unjudged:
        return 1
    print("passed: every normalised series was judged, and the run exited 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
