#!/usr/bin/env python3
"""What a parent's resident set adds to a child's wall time: fork + exec + wait of /bin/true,
the median of 40, from this process as it starts and again with 200 MB more of it resident.
docs/running.md ("What a case's figures are") cites it: a case's wall_seconds includes the fork
of pitfall's image, so it grows (a little) with pitfall.

    python3 bench/spawn_cost.py
"""
import os
import statistics
import time


def spawn_seconds(n=40):
    taken = []
    for _ in range(n):
        began = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.execv("/bin/true", ["true"])
        os.waitpid(pid, 0)
        taken.append(time.perf_counter() - began)
    return statistics.median(taken)


def main():
    small = spawn_seconds()
    ballast = bytearray(200 << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    large = spawn_seconds()
    print(f"fork+exec+wait of /bin/true: {small * 1e3:.2f} ms from a small parent, "
          f"{large * 1e3:.2f} ms with 200 MB more resident "
          f"({(large - small) * 1e3 / 2:.1f} ms per 100 MB)")


if __name__ == "__main__":
    main()
