#!/usr/bin/env python3
"""How long `pitfall gate` takes on this machine, against its 5 s goal: N runs (default 20) of
the real command, each a new process. The gate probes afresh every time by itself (its runtime
folder is its own and emptied); its cases run on every visible GPU in turn. Prints the median
and the slowest wall time, the gate's own `seconds`, and slowest / 5 s.

    bench/gate_time.py build/ci/bin/pitfall [N] [-- GATE-ARGS...]

GATE-ARGS default to `--require no-gpu` on a machine without a GPU (the gate then runs its
cases, as on an admitted node) and to none on one with a GPU.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

GOAL_SECONDS = 5.0


def main():
    argv = sys.argv[1:]
    gate_args = None
    if "--" in argv:
        cut = argv.index("--")
        argv, gate_args = argv[:cut], argv[cut + 1:]
    if len(argv) not in (1, 2):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    binary = argv[0]
    try:
        runs = int(argv[1]) if len(argv) == 2 else 20
    except ValueError:
        runs = 0
    if runs < 1:
        print(f"gate_time: error: N must be a positive integer, got '{argv[1]}'", file=sys.stderr)
        return 2
    if gate_args is None:
        has_gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True).returncode == 0
        gate_args = [] if has_gpu else ["--require", "no-gpu"]
    env = dict(os.environ)
    walls, own, verdicts = [], [], {}
    for _ in range(runs):
        start = time.monotonic()
        p = subprocess.run([binary, "gate", "--json", "-", *gate_args], capture_output=True, text=True, env=env)
        walls.append(time.monotonic() - start)
        if p.returncode not in (0, 1, 3):
            print(f"gate_time: error: {binary} gate exited {p.returncode}: {p.stderr.strip()}", file=sys.stderr)
            return 2
        doc = json.loads(p.stdout)
        own.append(doc["seconds"])
        verdicts[doc["verdict"]] = verdicts.get(doc["verdict"], 0) + 1
        gpus = len([g for g in doc["gpus"] if g["index"] is not None])
        cases = sum(len(g["cases"]) for g in doc["gpus"])
    print(f"pitfall gate {' '.join(gate_args)}: {runs} runs ({', '.join(f'{n} {v}' for v, n in verdicts.items())}; "
          f"{gpus} GPUs, {cases} case runs each), median {statistics.median(walls) * 1000:.0f} ms, "
          f"slowest {max(walls) * 1000:.0f} ms (gate's own: median {statistics.median(own) * 1000:.0f} ms); "
          f"slowest / {GOAL_SECONDS:.0f} s goal = {max(walls) / GOAL_SECONDS:.3f}")
    return 0 if max(walls) <= GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
