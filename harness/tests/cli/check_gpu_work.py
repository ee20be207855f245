#!/usr/bin/env python3
"""The SDK's count of GPU work, on a machine with a GPU: the fixture's CUDA `ok` case (a
for_each kernel, warmed up and then timed `samples` times) must come back with gpu_work
{required: true, kernels >= samples + warmup}, counted by the device. Where no GPU answers the
case is UNSUPPORTED (exit 77) and so is this test, saying why.

usage: check_gpu_work.py FIXTURE_PROGRAM"""
import json
import os
import subprocess
import sys
import tempfile

SAMPLES, WARMUP = 3, 1


def main() -> int:
    program = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        p = subprocess.run([program, "--backend", "cuda", "--variant", "ok", "--out", out,
                            "--param", f"samples={SAMPLES}", "--param", f"warmup={WARMUP}"],
                           capture_output=True, text=True, timeout=120)
        if p.returncode == 77:
            with open(out) as f:
                print("SKIP: the CUDA case is unsupported here:", json.load(f)["outcome"].get("reason"))
            return 77
        if p.returncode != 0:
            print(f"FAIL: the fixture exited {p.returncode}: {p.stderr[-2000:]}")
            return 1
        with open(out) as f:
            result = json.load(f)
    work = result.get("gpu_work")
    print("ran_on:", result.get("ran_on"), "gpu_work:", work)
    if result["outcome"].get("status") != "ok":
        print("FAIL: outcome", result["outcome"])
        return 1
    if not isinstance(work, dict) or work.get("required") is not True or "error" in work:
        print("FAIL: expected a required count without error")
        return 1
    if work.get("kernels", 0) < SAMPLES + WARMUP:
        print(f"FAIL: the device counted {work.get('kernels')} kernels, at least {SAMPLES + WARMUP} ran")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
