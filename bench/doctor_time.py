#!/usr/bin/env python3
"""How long `pitfall doctor` takes on this machine: N runs (default 20) of the real command,
each a new process (the probe is a child of it), median and slowest wall time.

    bench/doctor_time.py build/ci/bin/pitfall [N]
"""
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    binary = sys.argv[1]
    try:
        runs = int(sys.argv[2]) if len(sys.argv) == 3 else 20
    except ValueError:
        runs = 0
    if runs < 1:
        print(f"doctor_time: error: N must be a positive integer, got '{sys.argv[2]}'", file=sys.stderr)
        return 2
    walls = []
    for _ in range(runs):
        start = time.monotonic()
        p = subprocess.run([binary, "doctor", "--json"], capture_output=True, text=True)
        walls.append(time.monotonic() - start)
        if p.returncode not in (0, 1):
            print(f"doctor_time: error: {binary} doctor exited {p.returncode}: {p.stderr.strip()}", file=sys.stderr)
            return 2
    print(f"pitfall doctor: {runs} runs, median {statistics.median(walls) * 1000:.0f} ms, "
          f"slowest {max(walls) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
