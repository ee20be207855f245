"""Slurm: `pitfall fleet run --engine slurm` submits ONE array job with one task per node. The job
is submitted held, each task is pinned to its own node (`scontrol update JobId=<job>_<i>
ReqNodeList=<node>`, which splits the task out of the array's pending record), then released;
every task asks for its node whole (--exclusive). Each task runs `pitfall doctor --json` and
`pitfall run` into DIR/nodes/<node>/ on a shared file system. The driver follows the tasks with
squeue (pending, running) and sacct, or scontrol where the cluster keeps no accounting (done),
writes each node's outcome into DIR/nodes/<node>/node.json (ran, or why not: run_failed,
job_failed, node_down, timed_out, cancelled) and ends with the merged report (fleet_folder.py).
A node that fails is a result, never an abort. docs/fleet.md says which Slurm behaviour this
relies on.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import TREE
from ..cli import EXIT_INTERRUPTED, EXIT_OK, BadInput
from ..fleet_folder import (FLEET_SCHEMA, NODE_NAME, NODE_SCHEMA, call, counts, describe, eta_text, human_seconds,
                            merge, utc_now, write_records)
from ..files import read_json, write_atomically
from .base import Scheduler

TASK_SCHEMA = "pitfall.fleet-task/1"
# A node in one of these states takes no new job: its task would pend for ever.
# ("idle*", a node that missed a ping, is not one: Slurm marks it DOWN only after SlurmdTimeout.)
UNUSABLE_STATES = ("down", "drain", "fail", "maint", "inval", "unknown", "future", "power", "reboot")
LIVE_STATES = {"PENDING": "pending", "CONFIGURING": "running", "RUNNING": "running", "COMPLETING": "running",
               "SUSPENDED": "running", "REQUEUED": "pending", "REQUEUE_HOLD": "pending", "RESIZING": "running",
               "SIGNALING": "running", "STAGE_OUT": "running", "STOPPED": "running"}
# Slurm's final job states (squeue(1), "JOB STATE CODES") and the node outcome each means.
FINAL_STATES = {"COMPLETED": "ran", "FAILED": "job_failed", "OUT_OF_MEMORY": "job_failed", "BOOT_FAIL": "job_failed",
                "DEADLINE": "timed_out", "TIMEOUT": "timed_out", "NODE_FAIL": "node_down", "CANCELLED": "cancelled",
                "PREEMPTED": "job_failed", "REVOKED": "cancelled", "SPECIAL_EXIT": "job_failed"}
FILTER_FLAGS = ("scenario", "backend", "variant", "label")


# ---- Slurm's notations -------------------------------------------------------------------------


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list notation ("gpu[01-03,07],cpu1") as names, in order, without duplicates.
    Malformed text is BadInput naming it (scontrol would say less)."""
    names: list[str] = []
    i, n = 0, len(text)
    while i < n:
        j = i
        depth = 0
        while j < n and (text[j] != "," or depth):
            depth += text[j] == "["
            depth -= text[j] == "]"
            if depth < 0 or depth > 1:
                raise BadInput(f"--nodelist {text!r}: unbalanced brackets")
            j += 1
        if depth:
            raise BadInput(f"--nodelist {text!r}: unbalanced brackets")
        names += _expand_one(text[i:j], text)
        i = j + 1
    if not names:
        raise BadInput(f"--nodelist {text!r}: no node named")
    seen: set[str] = set()
    return [x for x in names if not (x in seen or seen.add(x))]


def _expand_one(item: str, whole: str) -> list[str]:
    m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", item)
    if not m:
        if not NODE_NAME.fullmatch(item):
            raise BadInput(f"--nodelist {whole!r}: {item!r} is not a node name")
        return [item]
    prefix, ranges, suffix = m.groups()
    out = []
    for part in ranges.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise BadInput(f"--nodelist {whole!r}: {part!r} is not a number or a range")
        hi = hi or lo
        if int(hi) < int(lo) or int(hi) - int(lo) > 100000:
            raise BadInput(f"--nodelist {whole!r}: range {part!r} runs backwards or is too long")
        width = len(lo) if lo.startswith("0") else 0
        out += [f"{prefix}{k:0{width}d}{suffix}" for k in range(int(lo), int(hi) + 1)]
    for name in out:
        if not NODE_NAME.fullmatch(name):
            raise BadInput(f"--nodelist {whole!r}: {name!r} is not a node name")
    return out


def parse_time_limit(text: str) -> int:
    """Slurm's --time forms (sbatch(1)) in seconds: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
    D-HH:MM:SS. BadInput naming --time otherwise."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not m:
        raise BadInput(f"--time {text!r}: expected MM, HH:MM:SS or D-HH:MM:SS")
    days, a, b, c = m.groups()
    a, b, c = int(a), int(b or 0), int(c or 0)
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = int(days) * 86400 + a * 3600 + b * 60 + c
    elif m.group(4) is not None:  # HH:MM:SS
        seconds = a * 3600 + b * 60 + c
    else:  # MM or MM:SS
        seconds = a * 60 + b
    if seconds <= 0:
        raise BadInput(f"--time {text!r}: must be more than zero")
    return seconds


def parse_gpu_gres(gres: str) -> int:
    """The number of GPUs in a node's GRES text as sinfo %G prints it ("gpu:h100:4(S:0-1),
    mps:100"), 0 without a gpu entry."""
    total = 0
    for item in gres.split(","):
        item = re.sub(r"\(.*?\)", "", item.strip())
        parts = item.split(":")
        if parts[0] == "gpu":
            count = parts[-1] if len(parts) > 1 else "1"
            total += int(count) if count.isdigit() else 1
    return total


# ---- talking to Slurm --------------------------------------------------------------------------


class SlurmUnavailable(Exception):
    """slurmctld did not answer a query (down, restarting, overloaded): not an outcome of any
    node, so the fleet keeps its last view and asks again."""


def _answered(rc: int, err: str, what: str) -> bool:
    """Whether a query got Slurm's answer: success, or Slurm saying it knows no such job (the
    job has aged out: that too is an answer). Anything else raises SlurmUnavailable."""
    if rc == 0:
        return True
    if "Invalid job id" in err:
        return False
    raise SlurmUnavailable(f"{what}: {err or f'exit {rc}'}")


class SlurmUnanswered(BadInput):
    """sinfo could not say which nodes there are: no controller answered, or it refused."""


class Slurm:
    """The Slurm commands, run as child processes (never a shell), with what they said."""

    TOOLS = ("sbatch", "squeue", "sinfo", "scontrol", "scancel")

    def __init__(self, check: bool = True):
        missing = [t for t in self.TOOLS if shutil.which(t) is None]
        if check and missing:
            raise BadInput(f"no Slurm client here: {', '.join(missing)} not on PATH (install slurm-client, "
                           f"or run on a login node)")
        self.accounting: bool | None = None  # found out on first use of sacct

    # Every Slurm command goes through fleet_folder.call: no shell, a timeout, (rc, out, err).
    call = staticmethod(call)

    def nodes(self, partition: str | None, names: list[str] | None) -> dict[str, dict]:
        """Node -> {state, gres, reason, partitions} from sinfo (one line per node and partition)."""
        argv = ["sinfo", "-h", "-N", "-o", "%N|%T|%G|%E|%P"]
        if partition:
            argv += ["-p", partition]
        if names:
            argv += ["-n", ",".join(names)]
        rc, out, err = self.call(argv)
        if rc != 0:
            last = err.splitlines()[-1] if err else f"exit {rc}"  # its last line says why
            raise SlurmUnanswered(f"sinfo failed ({last}): is slurmctld up, SLURM_CONF right, and the partition right?")
        found: dict[str, dict] = {}
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) < 5 or not NODE_NAME.fullmatch(parts[0]):
                continue
            node = found.setdefault(parts[0], {"state": parts[1], "gres": parts[2], "reason": parts[3],
                                               "partitions": []})
            node["partitions"].append(parts[4].rstrip("*"))
        return found

    def node_state(self, node: str) -> tuple[str, str]:
        rc, out, _ = self.call(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"])
        first = out.splitlines()[0] if rc == 0 and out.strip() else "unknown|"
        state, _, reason = first.partition("|")
        return state, reason

    def live(self, job_id: str) -> dict[int, dict]:
        """Array task -> {state, reason, node, elapsed} for the tasks squeue still lists."""
        rc, out, err = self.call(["squeue", "-h", "-r", "-j", job_id, "-o", "%K|%T|%r|%N|%M"])
        tasks: dict[int, dict] = {}
        if not _answered(rc, err, "squeue"):
            return tasks
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) == 5 and parts[0].isdigit():
                tasks[int(parts[0])] = {"state": parts[1], "reason": parts[2], "node": parts[3],
                                        "elapsed_s": slurm_duration(parts[4]), "source": "squeue"}
        return tasks

    def finished(self, job_id: str) -> dict[int, dict]:
        """Array task -> {state, reason, exit_code, node, elapsed} from sacct, or from scontrol
        where the cluster keeps no accounting (scontrol remembers a job MinJobAge seconds)."""
        tasks: dict[int, dict] = {}
        if self.accounting is not False:
            rc, out, _ = self.call(["sacct", "-n", "-P", "-X", "-j", job_id,
                                    "-o", "JobID,State,ExitCode,NodeList,ElapsedRaw,Reason"])
            self.accounting = rc == 0
            for line in out.splitlines() if rc == 0 else []:
                parts = line.split("|")
                m = re.fullmatch(r"\d+_(\d+)", parts[0]) if len(parts) == 6 else None
                if m:
                    tasks[int(m.group(1))] = {"state": parts[1].split()[0], "exit_code": parts[2], "node": parts[3],
                                              "elapsed_s": float(parts[4]) if parts[4].isdigit() else None,
                                              "reason": parts[5], "source": "sacct"}
        rc, out, err = self.call(["scontrol", "-o", "show", "job", job_id])
        for line in out.splitlines() if _answered(rc, err, "scontrol show job") else []:
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            task = fields.get("ArrayTaskId", "")
            if not task.isdigit() or int(task) in tasks:
                continue
            tasks[int(task)] = {"state": fields.get("JobState", "?"), "exit_code": fields.get("ExitCode", ""),
                                "node": fields.get("NodeList", ""), "reason": fields.get("Reason", ""),
                                "elapsed_s": slurm_duration(fields.get("RunTime", "")), "source": "scontrol"}
        return tasks


def slurm_duration(text: str) -> float | None:
    """Seconds of Slurm's elapsed-time text: [D-]HH:MM:SS, or MM:SS as squeue prints it."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not m:
        return None
    d, h, mi, s = (int(x or 0) for x in m.groups())
    return float(d * 86400 + h * 3600 + mi * 60 + s)


# ---- the batch script --------------------------------------------------------------------------


@dataclass
class Plan:
    out: Path
    nodes: list[str]                      # one array task each, in task order
    skipped: dict[str, dict]              # nodes left out when submitting: {state, reason}
    pitfall: str
    run_args: list[str]
    sbatch: list[str] = field(default_factory=list)
    container: str = ""
    container_kind: str = ""              # pyxis or oci


def batch_script(plan: Plan) -> str:
    """The array task: on node NODES[SLURM_ARRAY_TASK_ID], doctor then run into nodes/<node>/,
    then task.json (what the task saw) written atomically. It exits 0 whenever pitfall run judged
    its cases (exit 0 or 1), so Slurm's FAILED means the job itself went wrong."""
    q = shlex.quote
    # In a container, each of the two commands is a job step started inside the image.
    if plan.container_kind == "pyxis":
        step = (f"srun --ntasks=1 --container-image={q(plan.container)} "
                f"--container-mounts={q(str(plan.out))}:{q(str(plan.out))} --container-workdir=/tmp ")
    elif plan.container_kind == "oci":
        step = f"srun --ntasks=1 --container={q(plan.container)} "
    else:
        step = ""
    run_args = " ".join(q(a) for a in plan.run_args)
    return f"""#!/bin/bash
# pitfall fleet: one task of the fleet's array job, pinned to NODES[SLURM_ARRAY_TASK_ID].
# Written by `pitfall fleet run` (fleet.json beside this file says with what).
set -u
fleet={q(str(plan.out))}
pitfall={q(plan.pitfall)}
NODES=({" ".join(q(n) for n in plan.nodes)})
expected=${{NODES[${{SLURM_ARRAY_TASK_ID:-0}}]}}
node=${{SLURMD_NODENAME:-$(hostname -s)}}
node=${{node//[^A-Za-z0-9._-]/_}}
dir="$fleet/nodes/$node"
mkdir -p "$dir" || exit 3
exec >"$dir/slurm.out" 2>&1
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
task_record() {{  # doctor_exit run_exit message
  printf '{{"schema": "{TASK_SCHEMA}", "node": "%s", "expected_node": "%s", "job_id": "%s_%s", "array_task": %s, "started_at": "%s", "ended_at": "%s", "doctor_exit": %s, "run_exit": %s, "message": "%s"}}\\n' \\
    "$node" "$expected" "${{SLURM_ARRAY_JOB_ID:-0}}" "${{SLURM_ARRAY_TASK_ID:-0}}" "${{SLURM_ARRAY_TASK_ID:-0}}" \\
    "$started" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" "$2" "$3" >"$dir/.task.json.tmp" &&
    mv -f "$dir/.task.json.tmp" "$dir/task.json"
}}
if [ "$node" != "$expected" ]; then
  task_record null null "task ${{SLURM_ARRAY_TASK_ID:-0}} was meant for $expected and started on $node"
  exit 3
fi
echo "pitfall fleet: task ${{SLURM_ARRAY_TASK_ID:-0}} on $node, job ${{SLURM_ARRAY_JOB_ID:-?}}, $started"
{step}"$pitfall" doctor --json >"$dir/.doctor.json.tmp"
doctor_exit=$?
mv -f "$dir/.doctor.json.tmp" "$dir/doctor.json"
{step}"$pitfall" run --out "$dir/run" --replace {run_args}
run_exit=$?
case $run_exit in
  0|1) task_record "$doctor_exit" "$run_exit" ""; exit 0 ;;
  *) task_record "$doctor_exit" "$run_exit" "pitfall run exited $run_exit (see slurm.out)"; exit "$run_exit" ;;
esac
"""


def sbatch_argv(args, plan: Plan, gres: str) -> list[str]:
    argv = ["sbatch", "--parsable", "--hold", f"--array=0-{len(plan.nodes) - 1}", "--nodes=1", "--exclusive",
            "--job-name=pitfall-fleet", f"--output={plan.out / 'slurm' / 'task-%a.out'}", "--export=ALL",
            f"--chdir={plan.out}"]
    if args.partition:
        argv.append(f"--partition={args.partition}")
    if gres:
        argv.append(f"--gres={gres}")
    if args.time:
        argv.append(f"--time={args.time}")
    return argv + [str(plan.out / "fleet.sbatch")]


# ---- node outcomes -----------------------------------------------------------------------------


def read_task(node_dir: Path) -> dict | None:
    path = node_dir / "task.json"
    if not path.exists():
        return None
    try:
        doc = read_json(path)
    except BadInput as e:
        return {"message": f"unreadable task record: {e}"}
    return doc if isinstance(doc, dict) else {"message": f"{path}: not a JSON object"}


def node_record(fleet: dict, node: str, task: int | None, slurm: dict | None, node_dir: Path) -> dict:
    """node.json: Slurm's word on the node's task and the task's own record, as one outcome."""
    rec = {"schema": NODE_SCHEMA, "node": node, "engine": "slurm"}
    skipped = fleet.get("skipped", {}).get(node)
    if task is None or skipped:
        info = skipped or {}
        rec.update(outcome="node_down", slurm_state=str(info.get("state", "")), reason=str(info.get("reason", "")),
                   message=f"not submitted: the node was {info.get('state', '?')} "
                           f"({info.get('reason') or 'no reason given'}) when the fleet was submitted")
        return rec
    rec.update(job_id=f"{fleet['job_id']}_{task}", array_task=task)
    own = read_task(node_dir) or {}
    rec.update({k: own[k] for k in ("started_at", "ended_at") if isinstance(own.get(k), str)})
    rec.update({k: own[k] for k in ("run_exit", "doctor_exit") if _is_int(own.get(k))})
    if fleet.get("node_down", {}).get(node):  # cancelled by the driver: its node went down
        info = fleet["node_down"][node]
        rec.update(outcome="node_down", slurm_state=info.get("state", ""), reason=info.get("reason", ""),
                   message=f"the node went {info.get('state', 'down')} before the task started; the task was cancelled")
        return rec
    if slurm is None:
        if "run_exit" in rec:  # Slurm forgot it (MinJobAge, no accounting); the task's record remains
            rec.update(outcome="ran" if rec["run_exit"] in (0, 1) else "run_failed",
                       message="Slurm no longer knows the task; outcome from its own record")
        else:
            rec.update(outcome="lost", message="Slurm no longer knows the task and it left no record")
        return rec
    return _judged(rec, slurm, own)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _judged(rec: dict, slurm: dict, own: dict) -> dict:
    """The outcome from Slurm's state of the task, and from the task's record of what pitfall
    run did: a job that COMPLETED without running pitfall is run_failed, not ran."""
    state = slurm.get("state", "?").split()[0].rstrip("+")
    rec.update(slurm_state=state, reason=slurm.get("reason", ""))
    if slurm.get("exit_code"):
        rec["exit_code"] = slurm["exit_code"]
    if slurm.get("elapsed_s") is not None:
        rec["elapsed_s"] = slurm["elapsed_s"]
    if state in LIVE_STATES:
        rec["outcome"] = LIVE_STATES[state]
        return rec
    outcome = FINAL_STATES.get(state, "job_failed")
    if outcome == "ran" or (outcome == "job_failed" and "run_exit" in rec):
        outcome = "ran" if rec.get("run_exit") in (0, 1) else "run_failed"
        if outcome == "run_failed":
            rec["message"] = str(own.get("message") or "the task ended without running pitfall run (see slurm.out)")
    if outcome != "ran" and "message" not in rec:
        rec["message"] = f"Slurm: {state}" + (f" ({rec['reason']})" if rec["reason"] not in ("", "None") else "") + \
                         (f", exit code {rec['exit_code']}" if rec.get("exit_code") else "")
    rec["outcome"] = outcome
    return rec


def gather(fleet: dict, out: Path, slurm: Slurm) -> dict[str, dict]:
    """Every node's record now: node -> node.json content."""
    job = fleet["job_id"]
    live = slurm.live(job) if job else {}
    done = slurm.finished(job) if job else {}
    records = {}
    for node in fleet["all_nodes"]:
        task = fleet["nodes"].index(node) if node in fleet["nodes"] else None
        info = live.get(task) if task is not None else None
        if info is None and task is not None:
            info = done.get(task)
        records[node] = node_record(fleet, node, task, info, out / "nodes" / node)
    return records


# ---- following the job -------------------------------------------------------------------------


def cancel_down_nodes(fleet: dict, out: Path, slurm: Slurm, records: dict[str, dict]) -> bool:
    """A pinned task whose node went down or was drained before it started would pend for ever:
    cancel it and record node_down with the node's state and reason. True when one was."""
    changed = False
    for node, rec in records.items():
        if rec["outcome"] != "pending" or node in fleet["node_down"]:
            continue
        if not re.search(r"ReqNodeNotAvail|NodeDown|DRAIN|Unavailable", rec.get("reason", ""), re.I):
            continue
        state, reason = slurm.node_state(node)
        if any(word in state.lower() for word in UNUSABLE_STATES):
            slurm.call(["scancel", rec["job_id"]])
            fleet["node_down"][node] = {"state": state, "reason": reason}
            changed = True
    if changed:
        write_atomically(out / "fleet.json", json.dumps(fleet, indent=2) + "\n")
    return changed


def follow(fleet: dict, out: Path, slurm: Slurm, poll: float) -> dict[str, dict]:
    """Polls until no task is pending or running, printing each node's change and the counts."""
    last: dict[str, str] = {}
    last_line, last_print = "", 0.0
    unavailable_since = None
    while True:
        try:
            records = gather(fleet, out, slurm)
            if cancel_down_nodes(fleet, out, slurm, records):
                records = gather(fleet, out, slurm)
        except SlurmUnavailable as e:
            if unavailable_since is None:
                unavailable_since = time.monotonic()
                print(f"pitfall fleet: Slurm is not answering ({e}); asking again every {poll:g} s", flush=True)
            time.sleep(poll)
            continue
        if unavailable_since is not None:
            print(f"pitfall fleet: Slurm answers again after {human_seconds(time.monotonic() - unavailable_since)}",
                  flush=True)
            unavailable_since = None
        write_records(out, records)
        for node, rec in records.items():
            text = describe(rec)
            if rec["outcome"] == "running":
                text = "running"  # its elapsed time changes every poll: say it once
            if last.get(node) != text:
                print(f"  {node}: {text}", flush=True)
                last[node] = text
        c = counts(records)
        line = (f"fleet {fleet['job_id']}: {len(records)} nodes: {c['pending']} pending, {c['running']} running, "
                f"{c['done']} done, {c['failed']} failed")
        if line != last_line or time.monotonic() - last_print > 30:
            eta = eta_text(records)
            print(line + (f"  {eta}" if eta else ""), flush=True)
            last_line, last_print = line, time.monotonic()
        if c["pending"] == 0 and c["running"] == 0:
            return records
        time.sleep(poll)


# ---- submitting --------------------------------------------------------------------------------


def choose_nodes(args, slurm: Slurm | None) -> tuple[list[str], dict[str, dict], dict[str, dict]]:
    """(nodes to submit, nodes left out as down, sinfo's facts) for --nodes/--nodelist/partition."""
    wanted = expand_hostlist(args.nodelist) if args.nodelist else None
    info = None
    if slurm is not None:
        try:
            info = slurm.nodes(args.partition, wanted)
        except SlurmUnanswered as unanswered:
            # A dry run whose nodes are named needs no controller: it shows what would be
            # submitted, with the nodes unchecked, and says so.
            if not (args.dry_run and wanted):
                raise
            print(f"pitfall fleet: warning: {unanswered}; --dry-run shows the --nodelist nodes unchecked",
                  file=sys.stderr)
    if info is None:  # --dry-run without an answer from Slurm: only a --nodelist can say which nodes
        if not wanted:
            raise BadInput("--dry-run without a Slurm client here needs --nodelist")
        return wanted, {}, {}
    names = _named_nodes(args, wanted, info)
    skipped = {n: {"state": info[n]["state"], "reason": info[n]["reason"]} for n in names if _is_down(info[n])}
    usable = [n for n in names if n not in skipped]
    if args.nodes is not None:
        if args.nodes > len(usable):
            raise BadInput(f"--nodes {args.nodes}: only {len(usable)} node(s) are up"
                           f"{' in partition ' + args.partition if args.partition else ''}")
        usable, skipped = usable[:args.nodes], {}
    return usable, skipped, info


def _named_nodes(args, wanted: list[str] | None, info: dict[str, dict]) -> list[str]:
    """--nodelist's nodes, each known to Slurm; else the partition's (its GPU nodes, where some
    have a gpu GRES)."""
    if wanted:
        unknown = [n for n in wanted if n not in info]
        if unknown:
            where = f" in partition {args.partition}" if args.partition else ""
            raise BadInput(f"--nodelist: Slurm knows no node {', '.join(unknown)}{where}")
        return wanted
    names = sorted(info)
    if any(parse_gpu_gres(v["gres"]) for v in info.values()):
        names = [n for n in names if parse_gpu_gres(info[n]["gres"])]
    if not names:
        raise BadInput(f"no nodes in {'partition ' + args.partition if args.partition else 'the cluster'}")
    return names


def _is_down(node: dict) -> bool:
    return any(word in node["state"].lower() for word in UNUSABLE_STATES)


def resolve_gres(args, nodes: list[str], info: dict[str, dict]) -> str:
    if args.gres != "auto":
        return "" if args.gres == "none" else args.gres
    counts_ = [parse_gpu_gres(info[n]["gres"]) for n in nodes if n in info]
    if counts_ and all(counts_):
        return f"gpu:{min(counts_)}"
    return ""


def container_kind(image: str) -> str:
    """pyxis where srun offers --container-image, else Slurm's own OCI support for a bundle."""
    rc, out, err = Slurm.call(["srun", "--help"])
    if "--container-image" in out + err:
        return "pyxis"
    if (Path(image) / "config.json").is_file():
        return "oci"
    raise BadInput(f"--container {image}: this cluster's srun has no --container-image (the pyxis plugin), "
                   f"and {image} is not an OCI bundle folder (config.json) for srun --container")


def run_args(args) -> list[str]:
    out = []
    for flag in FILTER_FLAGS:
        for value in getattr(args, flag) or []:
            out += [f"--{flag}", value]
    for flag in ("profile", "samples", "timeout_scale"):
        value = getattr(args, flag)
        if value is not None:
            out += ["--" + flag.replace("_", "-"), str(value)]
    return out


def check_run_flags(args) -> None:
    """The flags of `fleet run`, checked before anything is asked of Slurm."""
    if args.nodes is not None and args.nodelist:
        raise BadInput("--nodes and --nodelist: give one of them")
    if args.nodes is not None and args.nodes < 1:
        raise BadInput(f"--nodes {args.nodes}: expected a number >= 1")
    if args.time:
        parse_time_limit(args.time)
    if args.poll <= 0:
        raise BadInput(f"--poll {args.poll}: expected seconds > 0")
    if args.gres not in ("auto", "none") and not re.fullmatch(r"[A-Za-z0-9_:.,-]+", args.gres):
        raise BadInput(f"--gres {args.gres!r}: expected Slurm's form, e.g. gpu:1 (or auto, none)")
    if args.partition and not NODE_NAME.fullmatch(args.partition):
        raise BadInput(f"--partition {args.partition!r}: not a partition name")


def new_fleet_folder(out_flag: str | None) -> Path:
    """--out, else reports/fleet/<UTC time>; refused when it holds a fleet run already."""
    out = Path(out_flag or TREE / "reports" / "fleet" / time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime())).absolute()
    if (out / "fleet.json").exists():
        raise BadInput(f"--out {out}: already holds a fleet run (fleet.json); give another folder")
    return out


def make_plan(args, out: Path, slurm: Slurm | None) -> tuple[Plan, str]:
    """The nodes, the pitfall each runs, its arguments and the sbatch command; and the GRES."""
    nodes, skipped, info = choose_nodes(args, slurm)
    if not nodes:
        raise BadInput("every node asked for is down or drained: " +
                       ", ".join(f"{n} ({v['state']}: {v['reason']})" for n, v in skipped.items()))
    gres = resolve_gres(args, nodes, info)
    pitfall = args.pitfall or ("pitfall" if args.container else os.environ.get("PITFALL_BINARY", "pitfall"))
    if "/" in pitfall and not args.container:  # the tasks start in the fleet folder, not here
        pitfall = str(Path(pitfall).absolute())
    plan = Plan(out=out, nodes=nodes, skipped=skipped, pitfall=pitfall, run_args=run_args(args),
                container=args.container or "")
    if args.container:
        plan.container_kind = container_kind(args.container)
    plan.sbatch = sbatch_argv(args, plan, gres)
    return plan, gres


def print_dry_run(plan: Plan) -> None:
    print(f"# fleet.sbatch (would be written to {plan.out / 'fleet.sbatch'})")
    print(batch_script(plan))
    print("# submitted held, each task pinned to its node, then released:")
    print(shlex.join(plan.sbatch))
    for i, node in enumerate(plan.nodes):
        print(shlex.join(["scontrol", "update", f"JobId=<job>_{i}", f"ReqNodeList={node}"]))
    print(shlex.join(["scontrol", "release", "<job>"]))
    for node, why in plan.skipped.items():
        print(f"# not submitted: {node} is {why['state']} ({why['reason'] or 'no reason given'})")


def start_fleet(plan: Plan, gres: str, slurm: Slurm) -> dict:
    """The fleet folder written (fleet.sbatch, fleet.json, a folder per node), the job submitted;
    fleet.json, with the job's id."""
    out, nodes, skipped = plan.out, plan.nodes, plan.skipped
    (out / "slurm").mkdir(parents=True, exist_ok=True)
    for node in nodes + list(skipped):
        (out / "nodes" / node).mkdir(parents=True, exist_ok=True)
    write_atomically(out / "fleet.sbatch", batch_script(plan))
    fleet = {"schema": FLEET_SCHEMA, "engine": "slurm", "job_id": "", "nodes": nodes,
             "all_nodes": nodes + sorted(skipped), "skipped": skipped, "node_down": {},
             "submitted_at": utc_now(), "sbatch": plan.sbatch, "pitfall": plan.pitfall,
             "run_args": plan.run_args, "gres": gres, "container": plan.container,
             "container_kind": plan.container_kind}
    write_atomically(out / "fleet.json", json.dumps(fleet, indent=2) + "\n")
    print(f"pitfall fleet: {len(nodes)} node(s): {', '.join(nodes)}" +
          (f"; gres {gres}" if gres else "; no GRES asked for") +
          (f"; left out (down): {', '.join(skipped)}" if skipped else ""), flush=True)
    fleet["job_id"] = submit(plan, slurm)
    write_atomically(out / "fleet.json", json.dumps(fleet, indent=2) + "\n")
    print(f"pitfall fleet: submitted array job {fleet['job_id']} ({len(nodes)} task{'s' if len(nodes) != 1 else ''}, "
          f"one per node); folder {out}", flush=True)
    return fleet


def follow_to_the_end(fleet: dict, out: Path, slurm: Slurm, poll: float) -> int:
    """Follows the job until every task is over, then merges; interrupted, cancels the job and
    merges what finished."""
    pitfall = os.environ.get("PITFALL_BINARY", "pitfall")
    try:
        records = follow(fleet, out, slurm, poll)
    except KeyboardInterrupt:
        slurm.call(["scancel", fleet["job_id"]])
        print(f"pitfall fleet: interrupted: job {fleet['job_id']} cancelled; finished nodes are kept", file=sys.stderr)
        time.sleep(1)
        try:
            records = gather(fleet, out, slurm)
        except SlurmUnavailable:
            return EXIT_INTERRUPTED  # `pitfall fleet collect` later records what Slurm says
        write_records(out, records)
        merge(out, fleet, pitfall, records)
        return EXIT_INTERRUPTED
    return merge(out, fleet, pitfall, records)


def submit(plan: Plan, slurm: Slurm) -> str:
    rc, out, err = slurm.call(plan.sbatch)
    job = out.strip().split(";")[0]
    if rc != 0 or not job.isdigit():
        raise BadInput(f"sbatch refused the fleet job: {err or out.strip() or rc}")
    try:
        for i, node in enumerate(plan.nodes):
            rc, _, err = slurm.call(["scontrol", "update", f"JobId={job}_{i}", f"ReqNodeList={node}"])
            if rc != 0:
                raise BadInput(f"could not pin task {i} of job {job} to {node} ({err}); the job is cancelled")
        rc, _, err = slurm.call(["scontrol", "release", job])
        if rc != 0:
            raise BadInput(f"could not release job {job} ({err}); the job is cancelled")
    except (BadInput, KeyboardInterrupt):
        slurm.call(["scancel", job])  # never a held job left behind, pinned or not
        raise
    return job


def gather_or_refuse(fleet: dict, out: Path, slurm: Slurm) -> dict[str, dict]:
    try:
        return gather(fleet, out, slurm)
    except SlurmUnavailable as e:
        raise BadInput(f"Slurm is not answering, so nothing about the fleet's job can be said now: {e}") from e


class SlurmScheduler(Scheduler):
    """`pitfall fleet run|status|collect|cancel` on Slurm."""

    name = "slurm"
    instead = {"manifest": "writes a Kubernetes Job; on Slurm, `pitfall fleet run --engine slurm` submits the fleet"}

    def run(self, args) -> int:
        check_run_flags(args)
        out = new_fleet_folder(args.out)
        have_slurm = all(shutil.which(t) for t in Slurm.TOOLS)
        slurm = Slurm() if (have_slurm or not args.dry_run) else None
        plan, gres = make_plan(args, out, slurm)
        if args.dry_run:
            print_dry_run(plan)
            return EXIT_OK
        fleet = start_fleet(plan, gres, slurm)
        if args.no_wait:
            print(f"follow it: pitfall fleet status {out}; end it: pitfall fleet collect {out}")
            return EXIT_OK
        return follow_to_the_end(fleet, out, slurm, args.poll)

    def status(self, out: Path, fleet: dict, as_json: bool) -> int:
        records = gather_or_refuse(fleet, out, Slurm())
        if as_json:
            print(json.dumps({"job_id": fleet["job_id"], "counts": counts(records), "nodes": records}, indent=2))
            return EXIT_OK
        c = counts(records)
        print(f"fleet {fleet['job_id']} ({out}): {len(records)} nodes: {c['pending']} pending, {c['running']} running, "
              f"{c['done']} done, {c['failed']} failed")
        for node, rec in records.items():
            print(f"  {node}: {describe(rec)}")
        return EXIT_OK

    def collect(self, out: Path, fleet: dict) -> int:
        records = gather_or_refuse(fleet, out, Slurm())
        write_records(out, records)
        for node, rec in records.items():
            print(f"  {node}: {describe(rec)}")
        code = merge(out, fleet, os.environ.get("PITFALL_BINARY", "pitfall"), records)
        active = [n for n, r in records.items() if r["outcome"] in ("pending", "running")]
        if active:
            print(f"pitfall fleet: not over: {', '.join(active)} still pending or running", file=sys.stderr)
        return code

    def cancel(self, out: Path, fleet: dict) -> int:
        slurm = Slurm()
        if fleet["job_id"]:
            rc, _, err = slurm.call(["scancel", fleet["job_id"]])
            if rc != 0:
                print(f"pitfall fleet: scancel {fleet['job_id']}: {err or rc}", file=sys.stderr)
            else:
                print(f"pitfall fleet: job {fleet['job_id']} cancelled")
            time.sleep(1)
        return self.collect(out, fleet)
