"""pitfall fleet: the suite on every GPU node of a cluster, and which node differs.

`pitfall fleet` runs this module (through tools/pitfall-fleet). It schedules nothing itself:
each command goes to the scheduler's module behind schedulers.Scheduler. On Slurm (schedulers/
slurm.py) `fleet run` submits one array job, a task pinned to each node, follows it and merges
the node runs into one report that groups the nodes by fingerprint and puts first the cases
whose verdict or outcome differs between nodes of one group (fleet_folder.py); `fleet status`,
`collect` and `cancel` act on a fleet folder. On Kubernetes (schedulers/kubernetes.py) `fleet
manifest` writes an Indexed Job for kubectl, or with --gate-init / --gate-npd the manifests that
run `pitfall gate` before a workload or on every node (schedulers/kubernetes_gate.py). A node that fails is a result, never an abort.

Exit status: 0 every node ran and met its baselines, and no case differs within a fingerprint
group; 1 not; 2 bad usage or bad input (no Slurm client, unknown node, malformed fleet folder);
130 interrupted (the job is cancelled, what finished is kept and merged).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .cli import EXIT_OK, EXIT_USAGE, BadInput, Parser, parse, run_main
from . import fleet_folder
from .fleet_folder import load_fleet
from .schedulers import scheduler
from .schedulers.slurm import FILTER_FLAGS

COMMANDS = ("run", "status", "collect", "cancel", "manifest")

USAGE = """\
usage: pitfall fleet <command> [options]

The suite on every GPU node of a cluster, one Slurm array job with one task per node, and the
merged report that says which node differs.

commands:
  run --engine slurm [--out DIR] [options] [filters]
                      submit the array job, follow it, collect, merge (see run options)
  status DIR [--json] each node's state now (from squeue, sacct or scontrol); changes nothing
  collect DIR         write each node's node.json from Slurm's states and merge the report
                      (DIR/fleet.md, DIR/fleet.html, DIR/fleet-report.json); safe to repeat
  cancel DIR          scancel the fleet's job, then collect
  manifest --engine kubernetes ...
                      a Kubernetes Indexed Job doing the same, one pod per GPU node
                      (`pitfall fleet manifest --help`; docs/kubernetes.md)
  manifest --engine kubernetes --gate-init --workload-image IMAGE ...
                      a Pod whose init container runs `pitfall gate --require R` on its GPUs:
                      the workload starts only on a node the gate admits
  manifest --engine kubernetes --gate-npd ...
                      node-problem-detector running `pitfall gate` on every GPU node: the
                      NodeCondition PitfallGateProblem is True where the gate drains

run options:
  --engine slurm      the scheduler (Slurm is the one there is; Kubernetes: `fleet manifest`)
  --out DIR           the fleet folder, on a file system every node mounts at the same path
                      (default: reports/fleet/<UTC time>): fleet.json, fleet.sbatch,
                      nodes/<node>/{node.json,task.json,doctor.json,slurm.out,run/}, fleet.md,
                      fleet.html, fleet-report.json (the report as data)
  --partition P       the partition (default: the cluster's default partition)
  --nodes N           N nodes of the partition that are up (the first N by name)
  --nodelist LIST     these nodes (Slurm's form: gpu[01-04],gpu07); default: every node of the
                      partition (the GPU nodes, where some have a gpu GRES)
  --gres G            each task's generic resources (gpu:1); auto (default): gpu:<count> when
                      the chosen nodes have a gpu GRES, none otherwise; none: ask for none
  --time T            each task's time limit (Slurm's forms: MM, HH:MM:SS, D-HH:MM:SS)
  --container IMAGE   run doctor and run inside IMAGE through the cluster's container plugin:
                      pyxis (srun --container-image) where srun offers it, else Slurm's own OCI
                      support (srun --container, IMAGE an OCI bundle folder)
  --pitfall PATH      the pitfall binary every node runs (default: this one; in a container:
                      `pitfall` on the image's PATH)
  --profile P, --samples N, --timeout-scale X
                      passed to `pitfall run` on every node
  --poll S            seconds between looks at the queue (default 5)
  --no-wait           submit and return: follow with `fleet status`, end with `fleet collect`
  --dry-run           print the batch script and the sbatch and scontrol commands; submit nothing
  --history DB        record every node's run in this results database (run, collect, cancel;
                      default: pitfall's, $PITFALL_HISTORY or the user's data folder;
                      docs/history.md); --no-history: record none

filters (passed to `pitfall run`): --scenario S, --backend B, --variant V, --label L (repeatable,
or comma-separated)

node outcomes: ran (pitfall run judged its cases), run_failed (the job ran, pitfall could not:
its exit status and the reason), job_failed (Slurm's state and reason), node_down (down or drained
when submitted, failed while running), timed_out, cancelled, pending or running (not over yet),
lost (Slurm no longer knows the task and it left no record).

exit status: 0 every node ran and met its baselines, and no case differs between nodes of one
fingerprint group; 1 not (or not over yet); 2 bad usage or bad input; 130 interrupted (the job is
cancelled, finished nodes are kept and merged).
"""


def parser_for(command: str) -> argparse.ArgumentParser:
    p = Parser(prog=f"pitfall fleet {command}", add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    if command == "run":
        p.add_argument("--engine", default="slurm")
        p.add_argument("--out")
        p.add_argument("--partition")
        p.add_argument("--nodes", type=int)
        p.add_argument("--nodelist")
        p.add_argument("--gres", default="auto")
        p.add_argument("--time")
        p.add_argument("--container")
        p.add_argument("--pitfall")
        p.add_argument("--profile")
        p.add_argument("--samples", type=int)
        p.add_argument("--timeout-scale", type=float)
        p.add_argument("--poll", type=float, default=5.0)
        p.add_argument("--no-wait", action="store_true")
        p.add_argument("--dry-run", action="store_true")
        for flag in FILTER_FLAGS:
            p.add_argument(f"--{flag}", action="append", type=lambda v: [x for x in v.split(",") if x])
    else:
        p.add_argument("dir", nargs="?")
        if command == "status":
            p.add_argument("--json", action="store_true")
    if command in ("run", "collect", "cancel"):
        p.add_argument("--history", metavar="DB")
        p.add_argument("--no-history", action="store_true")
    return p


def engine_flag(argv: list[str], default: str) -> str:
    """The value of --engine in argv (--engine X or --engine=X), else `default`; the command's
    own parser checks the flags in full."""
    for i, arg in enumerate(argv):
        if arg.startswith("--engine="):
            return arg.split("=", 1)[1]
        if arg == "--engine" and i + 1 < len(argv):
            return argv[i + 1]
    return default


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return EXIT_OK if argv else EXIT_USAGE
    command, rest = argv[0], argv[1:]
    if command == "manifest":
        return scheduler(engine_flag(rest, "kubernetes")).manifest(rest)
    if command not in COMMANDS:
        raise BadInput(f"unknown fleet command '{command}' ({', '.join(COMMANDS)})")
    args = parse(parser_for(command), rest)
    if args.help:
        sys.stdout.write(USAGE)
        return EXIT_OK
    if command in ("run", "collect", "cancel"):
        if args.history is not None and (args.no_history or not args.history):
            raise BadInput("--history needs a database file, and excludes --no-history")
        fleet_folder.HISTORY.update(db=args.history, off=args.no_history)
    if command == "run":
        for flag in FILTER_FLAGS:  # --scenario a,b --scenario c -> [a, b, c]
            setattr(args, flag, [v for group in getattr(args, flag) or [] for v in group])
        return scheduler(args.engine).run(args)
    if not args.dir:
        raise BadInput(f"`pitfall fleet {command}` needs the fleet folder (DIR)")
    out = Path(args.dir).absolute()
    fleet = load_fleet(out)
    engine = scheduler(fleet["engine"], f"{out / 'fleet.json'}: field 'engine':")
    if command == "status":
        return engine.status(out, fleet, args.json)
    if command == "collect":
        return engine.collect(out, fleet)
    return engine.cancel(out, fleet)


def run() -> None:
    """The script: tools/pitfall-fleet."""
    run_main("pitfall fleet", main, "interrupted", sigterm_interrupts=True)
