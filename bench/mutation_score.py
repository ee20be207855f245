#!/usr/bin/env python3
"""Mutation score of the catalog: does each case's baseline notice when its records stop checking?

Runs the selected cases once as they are (timings recorded, not judged), then once per mutant,
with PITFALL_MUTATE (see harness/include/pitfall/detail/mutate.hpp) aimed at one check, measurement or event of a
case that passed:

  drop_check         the check is not recorded at all
  force_pass         the check is recorded as passed
  drop_measurement   the measurement is not recorded
  scale_measurement  the measurement reads --scale times its value
  drop_event         the library outcome is not recorded

A mutant is killed when its case no longer passes against its baseline. Only cases that
passed unmutated are scored: an UNSUPPORTED case (a CUDA case on a machine without a driver)
is judged by its outcome alone, whatever it recorded beside it. Some mutants leave the
record as it was and cannot be killed by any judge; they are counted apart as equivalent, not
run:
  - force_pass of a check that passed (every check of a passing case passed: a failed check is
    NUMERIC_MISMATCH before any baseline is read);
  - scale_measurement of a measurement whose value is 0.
A name with a comma cannot be given in PITFALL_MUTATE: it is counted apart as not run.

Each round runs every case that has a mutant left, one mutant a case, in one `pitfall run`; a
case's mutants never share a process. Prints per scenario and kind killed / total, and every
survivor with the mutant that survived. Progress goes to stderr, one line a round.

    bench/mutation_score.py                                   # the CPU cases of build/ci
    bench/mutation_score.py --pitfall build/cpu-only/bin/pitfall --kinds drop_check,force_pass
    bench/mutation_score.py --scenario float64_inputs --json score.json
    bench/mutation_score.py --report score.json              # the tables of a saved run again
    bench/mutation_score.py --fail-on drop_check,force_pass  # exit 1 on a survivor of those

Exit: 0 measured (and no survivor of a --fail-on kind); 1 a survivor of a --fail-on kind;
2 bad usage, a run that could not start, or a baseline run with nothing to score.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCORED = ("PASS",)  # an UNSUPPORTED case's records are not judged: nothing to score
KINDS = ["drop_check", "force_pass", "drop_measurement", "scale_measurement", "drop_event"]


def fail(message):
    print(f"mutation_score: {message}", file=sys.stderr)
    sys.exit(2)


def some_of(choices):
    def parse(text):
        items = [x for x in text.split(",") if x]
        bad = [x for x in items if x not in choices]
        if not items or bad:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {', '.join(choices)}; got {text!r}")
        return items
    return parse


def positive(text):
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not x > 0 or x == 1 or x != x or x == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite factor > 0 other than 1, got {text}")
    return x


def read_cases(run_dir):
    """The case records of a run folder's results.jsonl, by case key."""
    cases = {}
    path = os.path.join(run_dir, "results.jsonl")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a torn last line: that case did not finish
                if isinstance(r, dict) and isinstance(r.get("verdict"), str) and "case" in r:
                    cases[r["case"]] = r
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    return cases


def mutants_of(record, kinds, scale):
    """(to run, equivalent, unnameable): the mutants of one passing case, each (kind, argument)."""
    result = record.get("result") if isinstance(record.get("result"), dict) else {}
    run, equivalent, unnameable = [], [], []

    def add(kind, name, argument, same):
        if kind not in kinds:
            return
        if "," in name:
            unnameable.append((kind, argument))
        elif same:
            equivalent.append((kind, argument))
        else:
            run.append((kind, argument))

    for check in result.get("checks", []):
        if isinstance(check, dict) and isinstance(check.get("name"), str):
            add("drop_check", check["name"], check["name"], False)
            add("force_pass", check["name"], check["name"], check.get("passed") is True)
    measurements = result.get("measurements", {})
    for name, m in (measurements.items() if isinstance(measurements, dict) else []):
        add("drop_measurement", name, name, False)
        value = m.get("value") if isinstance(m, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            add("scale_measurement", name, f"{name}={scale:g}", value == 0)
    events = result.get("events", {})
    for name in (events if isinstance(events, dict) else []):
        add("drop_event", name, name, False)
    return run, equivalent, unnameable


def pitfall_run(args, out, filters, mutants=""):
    """One `pitfall run --timings record` into `out` with `filters` ({"backend": "cpu,cuda",
    ...}) and PITFALL_MUTATE set to `mutants` (unset when empty); its records by case key."""
    cmd = [args.pitfall, "run", "--out", out, "--timings", "record"]
    for flag in ("index", "expected", "profile"):
        if getattr(args, flag):
            cmd += [f"--{flag}", getattr(args, flag)]
    for flag, value in filters.items():
        if value:
            cmd += [f"--{flag}", value]
    env = {k: v for k, v in os.environ.items() if k not in ("PITFALL_MUTATE", "PITFALL_INJECT")}
    if mutants:
        env["PITFALL_MUTATE"] = mutants
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, errors="replace")
    if p.returncode not in (0, 1):
        fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-800:]}")
    return read_cases(out)


def run_mutants(args, out, mutants, cases):
    """One round: `cases` (case keys), each with its mutant in `mutants`; their records."""
    parts = [c.split(".", 2) for c in cases]
    filters = {flag: ",".join(sorted({p[i] for p in parts}))
               for i, flag in enumerate(("backend", "scenario", "variant"))}
    records = pitfall_run(args, out, filters, mutants)
    return {c: records.get(c) for c in cases}


def measure(args):
    scratch = args.out or tempfile.mkdtemp(prefix="pitfall-mutation-")
    os.makedirs(scratch, exist_ok=True)
    try:
        started = time.time()
        base = read_base(args, scratch)
        queues, score = {}, {"cases": {}, "not_scored": {}, "kinds": args.kinds,
                             "scale": args.scale, "pitfall": args.pitfall}
        for key, record in sorted(base.items()):
            if record["verdict"] not in SCORED:
                score["not_scored"][key] = record["verdict"]
                continue
            run, equivalent, unnameable = mutants_of(record, args.kinds, args.scale)
            score["cases"][key] = {"killed": [], "survived": [],
                                   "equivalent": [list(m) for m in equivalent],
                                   "unnameable": [list(m) for m in unnameable]}
            if run:
                queues[key] = list(run)
        if not score["cases"]:
            fail("no case passed unmutated: nothing to score (is the baseline of this machine?)")
        total = sum(len(q) for q in queues.values())
        done, rounds = 0, 0
        while queues:
            rounds += 1
            this_round = {key: q.pop(0) for key, q in queues.items()}
            queues = {k: q for k, q in queues.items() if q}
            value = ",".join(f"{kind}:{key}:{arg}" for key, (kind, arg) in this_round.items())
            out = os.path.join(scratch, f"round-{rounds}")
            records = run_mutants(args, out, value, list(this_round))
            for key, (kind, arg) in this_round.items():
                record = records.get(key)
                verdict = record["verdict"] if record else "NOT_FINISHED"
                reason = (record or {}).get("reason", "")
                injected = ((record or {}).get("result") or {}).get("injected", [])
                applied = any(isinstance(i, str) and i.startswith("mutant ")
                              and not i.endswith("(not recorded)") for i in injected)
                entry = {"kind": kind, "argument": arg, "verdict": verdict,
                         "unmutated": base[key]["verdict"],
                         "reason": reason[:300]}
                if record and not applied:
                    entry["note"] = "the mutant was not applied (not recorded)"
                killed = verdict != base[key]["verdict"]
                score["cases"][key]["killed" if killed else "survived"].append(entry)
            shutil.rmtree(out, ignore_errors=True)
            done += len(this_round)
            elapsed = time.time() - started
            eta = elapsed / done * (total - done) if done else 0
            print(f"round {rounds}: {len(this_round)} mutants, {done}/{total} done, "
                  f"{elapsed:.0f} s, ETA {eta:.0f} s", file=sys.stderr, flush=True)
        score["seconds"] = round(time.time() - started, 1)
        score["rounds"] = rounds
        return score
    finally:
        if not args.keep and not args.out:
            shutil.rmtree(scratch, ignore_errors=True)


def read_base(args, scratch):
    """The unmutated run of the selection: every case, as selected by the flags."""
    records = pitfall_run(args, os.path.join(scratch, "base"),
                          {flag: getattr(args, flag) for flag in ("backend", "scenario", "variant")})
    print(f"base run: {len(records)} cases", file=sys.stderr, flush=True)
    return records


def tally(score):
    """Per scenario and kind: [killed, run, equivalent, unnameable]."""
    table = {}
    for key, c in score["cases"].items():
        scenario = key.split(".", 2)[1]
        row = table.setdefault(scenario, {k: [0, 0, 0, 0] for k in score["kinds"]})
        for e in c["killed"]:
            row[e["kind"]][0] += 1
            row[e["kind"]][1] += 1
        for e in c["survived"]:
            row[e["kind"]][1] += 1
        for kind, _ in c["equivalent"]:
            row[kind][2] += 1
        for kind, _ in c["unnameable"]:
            row[kind][3] += 1
    return table


def print_report(score, listed):
    table = tally(score)
    kinds = score["kinds"]
    print(f"mutants killed / run, per scenario (scale_measurement x{score['scale']:g}); "
          "equivalent (+e) and unnameable (+u) mutants are not run")
    header = f"{'scenario':32}" + "".join(f"{k:>20}" for k in kinds)
    print(header)
    totals = {k: [0, 0, 0, 0] for k in kinds}
    for scenario in sorted(table):
        cells = []
        for k in kinds:
            killed, ran, equivalent, unnameable = table[scenario][k]
            for i, x in enumerate(table[scenario][k]):
                totals[k][i] += x
            cell = f"{killed}/{ran}" + (f" +{equivalent}e" if equivalent else "") + \
                (f" +{unnameable}u" if unnameable else "")
            cells.append(f"{cell:>20}")
        print(f"{scenario:32}" + "".join(cells))
    cells = []
    for k in kinds:
        killed, ran, equivalent, unnameable = totals[k]
        pct = f" {100 * killed / ran:.0f}%" if ran else ""
        cells.append(f"{f'{killed}/{ran}{pct}':>20}")
    print(f"{'all':32}" + "".join(cells))
    survivors = [(key, e) for key, c in sorted(score["cases"].items()) for e in c["survived"]
                 if e["kind"] in listed]
    if survivors:
        print(f"\nsurvivors of {', '.join(k for k in kinds if k in listed)} ({len(survivors)}):")
        for key, e in survivors:
            note = f"  [{e['note']}]" if e.get("note") else ""
            print(f"  {key}  {e['kind']}:{e['argument']}{note}")
    if score["not_scored"]:
        print("\nnot scored (not PASS unmutated): " +
              ", ".join(f"{k} {v}" for k, v in sorted(score["not_scored"].items())))
    if "seconds" in score:
        print(f"\n{score['rounds']} rounds, {score['seconds']:.0f} s")


def survivors_of(score, kinds):
    return [(k, e) for k, c in score["cases"].items() for e in c["survived"] if e["kind"] in kinds]


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing, not a traceback
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--pitfall", default=os.path.join(ROOT, "build", "ci", "bin", "pitfall"),
                    help="the pitfall program (default: build/ci/bin/pitfall)")
    ap.add_argument("--index", help="scenario index (default: the one beside the program)")
    ap.add_argument("--expected", help="baselines (default: the index's)")
    ap.add_argument("--profile", help="judge against expected/PROFILE")
    ap.add_argument("--backend", default="cpu", help="backends to score (default: cpu)")
    ap.add_argument("--scenario", help="only these scenarios (comma-separated)")
    ap.add_argument("--variant", help="only these variants (comma-separated)")
    ap.add_argument("--kinds", type=some_of(KINDS), default=KINDS,
                    help="mutant kinds (comma-separated; default: all)")
    ap.add_argument("--scale", type=positive, default=2.0,
                    help="scale_measurement's factor (default 2)")
    ap.add_argument("--fail-on", type=some_of(KINDS), default=[],
                    help="exit 1 when a mutant of these kinds survives")
    ap.add_argument("--survivors", type=some_of(KINDS),
                    default=["drop_check", "force_pass", "drop_measurement", "drop_event"],
                    help="list the survivors of these kinds (default: all but scale_measurement, "
                         "whose survivors are the measurements no baseline bounds)")
    ap.add_argument("--out", help="keep the rounds' run folders here (default: a scratch folder)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--json", help="also write the score here")
    ap.add_argument("--report", help="print the tables of a saved --json score; run nothing")
    args = ap.parse_args()

    if args.report:
        try:
            with open(args.report, encoding="utf-8") as f:
                score = json.load(f)
            print_report(score, args.survivors)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            fail(f"{args.report}: not a score written by --json ({e})")
        return 0
    if not os.access(args.pitfall, os.X_OK):
        fail(f"--pitfall {args.pitfall}: not an executable program (build it first)")
    score = measure(args)
    print_report(score, args.survivors)
    if args.json:
        tmp = f"{args.json}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(score, f, indent=1)
        os.replace(tmp, args.json)
    return 1 if survivors_of(score, args.fail_on) else 0


if __name__ == "__main__":
    sys.exit(main())
