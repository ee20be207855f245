#!/usr/bin/env python3
"""Static checks of CUDA binaries, with no GPU: which architectures are embedded, and each
kernel's registers, stack, spills and local memory.

For every binary: cuobjdump's listing of its fatbinary must show exactly the SASS and PTX that
CMAKE_CUDA_ARCHITECTURES asks for ("75-real" = SASS sm_75, "90-virtual" = PTX compute_90,
"90" = both), suffixes included: "90a-real" is SASS sm_90a (arch-specific: 9.0 only), "100f"
SASS sm_100f and PTX compute_100f (family-specific: 10.x only), neither the same as sm_90 or
sm_100. The architectures come from the entry headers cuobjdump prints ("arch = sm_100f"), not
from `--list-elf`, whose file names drop the family suffix (cuobjdump 13.2: "x.sm_100.cubin"
for an sm_100f cubin). `cuobjdump --dump-resource-usage` is written to the report folder. A kernel
with local memory (register spills, or a local array) fails the check unless its scenario
source says why, on a line `// pitfall: local-memory-ok <kernel-name-part> -- <reason>`.

Every kernel in the given sources must start with pitfall::count_this_kernel() (the counter the
harness reads back as evidence of GPU work; `// pitfall: uncounted-kernel <name> -- <reason>`
exempts one), and with --require-work-counter every binary with kernels must carry that counter in
its device code.

With --ptxas-logs, the ptxas reports the build kept (-Xptxas=-v, moved out of the build output
into <build>/logs/ptxas/<target>.log by cmake/ptxas-log.sh) are read too: a missing log fails,
and a kernel with spill stores or loads fails under the same rule. They need no cuobjdump.

Exit 0 all good; 1 a check failed; 2 bad usage; 77 nothing to check, or cuobjdump missing
(after the ptxas logs, when given, passed).
"""
import argparse
import os
import re
import subprocess
import sys


def arch_key(arch):
    """Sort key of "90a", "100f", "86": by number, then suffix (plain first)."""
    m = re.fullmatch(r"(\d+)([a-z]?)", arch)
    return (int(m.group(1)), m.group(2)) if m else (0, arch)


def expected_archs(spec):
    sass, ptx = set(), set()
    for item in filter(None, spec.split(";")):
        m = re.fullmatch(r"(\d+[a-z]?)(?:-(real|virtual))?", item)
        if not m:
            raise ValueError(f"CMAKE_CUDA_ARCHITECTURES entry '{item}' is not NN, NN-real or NN-virtual (NN: 90, 90a, 100f)")
        arch, kind = m.group(1), m.group(2)
        if kind in (None, "real"):
            sass.add(arch)
        if kind in (None, "virtual"):
            ptx.add(arch)
    return sass, ptx


def embedded_archs(cuobjdump, binary):
    """({"86", "90a", "100f"}, {"100f"}): the SASS and PTX architectures, suffixes kept, from
    the header cuobjdump prints per fatbin entry ("Fatbin elf code:" ... "arch = sm_90a")."""
    out = subprocess.run([cuobjdump, binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{binary}: cuobjdump failed: {out.stderr.strip() or out.stdout.strip()}")
    sass, ptx = set(), set()
    for kind, arch in re.findall(r"^Fatbin (elf|ptx) code:\s*\n=+\s*\narch = sm_(\d+[a-z]?)\s*$",
                                 out.stdout, re.MULTILINE):
        (sass if kind == "elf" else ptx).add(arch)
    return sass, ptx


def resource_usage(cuobjdump, binary):
    out = subprocess.run([cuobjdump, "--dump-resource-usage", binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{binary}: cuobjdump --dump-resource-usage failed: {out.stderr.strip()}")
    kernels, arch, function = [], None, None
    for line in out.stdout.splitlines():
        if m := re.match(r"arch = sm_(\d+[a-z]?)", line):
            arch = m.group(1)
        elif m := re.match(r"\s*Function (\S+):", line):
            function = m.group(1)
        elif function and (m := re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", line)):
            reg, stack, shared, local = map(int, m.groups())
            kernels.append({"arch": arch, "kernel": function, "registers": reg, "stack": stack,
                            "shared": shared, "local": local})
            function = None
    return out.stdout, kernels


def ptxas_report(path):
    """Kernels of one ptxas -v log: name, arch, registers, stack and spill bytes."""
    kernels, current, arch = {}, None, None
    with open(path, errors="replace") as f:
        for line in f:
            if m := re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+[a-z]?)'", line):
                current, arch = m.group(1), m.group(2)
                kernels.setdefault((current, arch), {"kernel": current, "arch": arch})
            elif m := re.search(r"Function properties for (\S+)", line):
                current = m.group(1)
            elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                                line):
                if current is not None:
                    k = kernels.setdefault((current, arch), {"kernel": current, "arch": arch})
                    k["stack"], k["spill_stores"], k["spill_loads"] = map(int, m.groups())
            elif (m := re.search(r"Used (\d+) registers", line)) and current is not None:
                kernels.setdefault((current, arch), {"kernel": current, "arch": arch})["registers"] = int(m.group(1))
    return list(kernels.values())


def check_ptxas_logs(logs, allowed):
    """(failures, summary lines) of the ptxas logs."""
    failures, lines = [], []
    for log in logs:
        name = os.path.basename(log)
        if not os.path.isfile(log):
            failures.append(f"{name}: no ptxas log at {log} (is the target built through cmake/ptxas-log.sh?)")
            continue
        kernels = ptxas_report(log)
        if not kernels:
            # ptxas -v reports each module it compiles ("ptxas info : 8 bytes gmem") even when the
            # module defines no kernel (a program that only loads device code at run time): such
            # lines prove -v was on. A log without them is a target built without it.
            with open(log, errors="replace") as f:
                ran_verbose = any(line.startswith("ptxas info") for line in f)
            if ran_verbose:
                lines.append(f"{name}: no kernels (ptxas -v ran: module lines only)")
            else:
                failures.append(f"{name}: no kernel in the ptxas log (was -Xptxas=-v dropped?)")
            continue
        spilling = [k for k in kernels if k.get("spill_stores", 0) + k.get("spill_loads", 0) > 0]
        for k in spilling:
            if not any(a in k["kernel"] for a in allowed):
                failures.append(f"{name}: kernel {k['kernel']} on sm_{k['arch']} spills "
                                f"({k['spill_stores']} bytes stored, {k['spill_loads']} loaded) without a "
                                f"'pitfall: local-memory-ok' comment saying why")
        worst = max(kernels, key=lambda k: k.get("registers", 0))
        lines.append(f"{name}: {len(kernels)} functions (ptxas); most registers: {worst.get('registers', 0)} "
                     f"(sm_{worst['arch']}); spilling: {len(spilling)}")
    return failures, lines


# `__global__ void k(...) {`, with `static`, `template <...>` or `__launch_bounds__(...)` around it.
KERNEL_DEFINITION = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    r"(\w+)\s*\([^)]*\)\s*\{", re.S)


def uncounted_kernels(sources):
    """Kernels whose body does not start by counting itself (pitfall::count_this_kernel()): the
    harness's evidence that a CUDA case did GPU work comes from that counter, so a kernel that
    skips it makes a case look idle. A source may exempt a kernel on a line
    `// pitfall: uncounted-kernel <kernel-name> -- <reason>` (a kernel that must not compile)."""
    missing = []
    for path in sources:
        with open(path, errors="replace") as f:
            text = f.read()
        exempt = set(re.findall(r"//\s*pitfall: uncounted-kernel (\w+) -- \S", text))
        for m in KERNEL_DEFINITION.finditer(text):
            if m.group(1) in exempt:
                continue
            body = text[m.end():]
            # The first statement, past comments and blank lines.
            statements = [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("//")]
            if not statements or "count_this_kernel()" not in statements[0]:
                missing.append(f"{os.path.basename(path)}: kernel {m.group(1)} does not start with "
                               f"pitfall::count_this_kernel() (the harness counts GPU work with it)")
    return missing


def carries_work_counter(cuobjdump, binary):
    """Whether the binary's device code holds the SDK's GPU work counter."""
    out = subprocess.run([cuobjdump, "-elf", binary], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{binary}: cuobjdump -elf failed: {out.stderr.strip() or out.stdout.strip()}")
    return "kernels_counted_here" in out.stdout


def local_memory_allowances(sources):
    allowed = []
    for path in sources:
        with open(path, errors="replace") as f:
            allowed += re.findall(r"//\s*pitfall: local-memory-ok (\S+) -- \S", f.read())
    return allowed


def check_binary(args, binary: str, want_sass: set, want_ptx: set, allowed: list) -> list:
    """One binary: the architectures it embeds against the configured ones, its GPU work counter
    (scenario programs), its kernels' local memory; its resource usage written to the report
    folder. The failures found."""
    failures = []
    name = os.path.basename(binary)
    sass, ptx = embedded_archs(args.cuobjdump, binary)
    sass_list, ptx_list = sorted(sass, key=arch_key), sorted(ptx, key=arch_key)
    print(f"{name}: SASS sm_{', sm_'.join(sass_list) or '-'}; PTX compute_{', compute_'.join(ptx_list) or '-'}")
    if sass != want_sass or ptx != want_ptx:
        failures.append(f"{name}: embeds SASS {sass_list} PTX {ptx_list}, configured SASS "
                        f"{sorted(want_sass, key=arch_key)} PTX {sorted(want_ptx, key=arch_key)}")
    text, kernels = resource_usage(args.cuobjdump, binary)
    if args.require_work_counter and kernels and not carries_work_counter(args.cuobjdump, binary):
        failures.append(f"{name}: its device code has no GPU work counter (kernels_counted_here): "
                        f"built without pitfall/cuda_backend.cuh's counting, its CUDA cases cannot "
                        f"show the GPU work they claim")
    with open(os.path.join(args.report_dir, f"{name}.resource-usage.txt"), "w") as f:
        f.write(text)
    for k in kernels:
        if k["local"] > 0 and not any(a in k["kernel"] for a in allowed):
            failures.append(f"{name}: kernel {k['kernel']} on sm_{k['arch']} uses {k['local']} bytes of "
                            f"local memory (spills or a local array) without a "
                            f"'pitfall: local-memory-ok' comment saying why")
    worst = max(kernels, key=lambda k: k["registers"], default=None)
    if worst:
        print(f"  {len(kernels)} kernel images; most registers: {worst['registers']} "
              f"(sm_{worst['arch']}); local memory: {sum(k['local'] > 0 for k in kernels)} images")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cuobjdump", required=True)
    ap.add_argument("--architectures", required=True, help="CMAKE_CUDA_ARCHITECTURES")
    ap.add_argument("--report-dir", required=True)
    ap.add_argument("--sources", nargs="*", default=[], help="scenario sources (for allowances)")
    ap.add_argument("--ptxas-logs", nargs="*", default=[], help="ptxas -v logs of the binaries' builds")
    ap.add_argument("--require-work-counter", action="store_true",
                    help="every binary with kernels must carry the SDK's GPU work counter (scenario programs)")
    ap.add_argument("binaries", nargs="*")
    args = ap.parse_args()
    try:
        want_sass, want_ptx = expected_archs(args.architectures)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    allowed = local_memory_allowances(args.sources)
    failures, summary = check_ptxas_logs(args.ptxas_logs, allowed)
    failures += uncounted_kernels(args.sources)
    for line in summary:
        print(line)
    if not args.cuobjdump or not os.access(args.cuobjdump, os.X_OK):
        for f in failures:
            print(f"FAIL: {f}")
        if failures:
            return 1
        print(f"SKIP: cuobjdump not found ('{args.cuobjdump}'); run ci/setup.sh to install it"
              + (" (the ptxas logs passed)" if args.ptxas_logs else ""))
        return 77
    if not args.binaries and not args.ptxas_logs:
        print("SKIP: no CUDA binaries to check")
        return 77
    os.makedirs(args.report_dir, exist_ok=True)
    for binary in args.binaries:
        failures += check_binary(args, binary, want_sass, want_ptx, allowed)
    for f in failures:
        print(f"FAIL: {f}")
    print(f"resource usage reports: {args.report_dir}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
