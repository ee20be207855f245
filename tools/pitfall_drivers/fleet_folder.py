"""A fleet's folder, whichever scheduler ran it: fleet.json (what was submitted), one folder per
node (nodes/<node>/: node.json, the node's outcome; doctor.json; run/), and the merged report
(fleet.md, fleet.html, fleet-report.json) that says which node differs. Also what the fleet
prints while it waits (counts, ETA, a line per node)."""
from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

from .cli import EXIT_DIFFERS, EXIT_OK, BadInput
from .files import read_json, write_atomically

FLEET_SCHEMA, NODE_SCHEMA = "pitfall.fleet/1", "pitfall.fleet-node/1"
# Node names as slurm.conf allows them in practice; anything else is refused before it reaches
# a command line or a folder name.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NODE_OUTCOMES = ("ran", "run_failed", "job_failed", "node_down", "timed_out", "cancelled", "pending", "running", "lost")
REPORT_JSON = "fleet-report.json"  # reports/schema/fleet-report.schema.json


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def human_seconds(s: float) -> str:
    s = int(round(max(s, 0)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def call(argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of a command run as a child process (never a shell); a
    missing program is 127 and one that does not answer in time 124, as a shell would say."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, errors="replace")
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]} did not answer in {timeout:.0f} s"
    return p.returncode, p.stdout, p.stderr.strip()


# ---- fleet.json and node.json ------------------------------------------------------------------


def load_fleet(out: Path) -> dict:
    """fleet.json of the folder `out`, checked: BadInput naming the file and the field."""
    path = out / "fleet.json"
    if not path.exists():
        raise BadInput(f"{out}: no fleet.json: not a fleet folder (made by `pitfall fleet run`)")
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != FLEET_SCHEMA:
        raise BadInput(f"{path}: not a fleet record (schema {FLEET_SCHEMA})")
    _node_names(doc, "nodes", path)
    if not isinstance(doc.get("job_id"), str) or not re.fullmatch(r"\d*", doc["job_id"]):
        raise BadInput(f"{path}: field 'job_id': expected the job id as a string of digits")
    for key in ("skipped", "node_down"):
        _node_states(doc, key, path)
    doc.setdefault("all_nodes", doc["nodes"])
    _node_names(doc, "all_nodes", path)
    if not isinstance(doc.setdefault("engine", "slurm"), str):
        raise BadInput(f"{path}: field 'engine': expected the scheduler's name (slurm)")
    return doc


def _node_names(doc: dict, key: str, path: Path) -> None:
    names = doc.get(key)
    if not isinstance(names, list) or not all(isinstance(n, str) and NODE_NAME.fullmatch(n) for n in names):
        raise BadInput(f"{path}: field '{key}': expected a list of node names")


def _node_states(doc: dict, key: str, path: Path) -> None:
    value = doc.setdefault(key, {})
    if not isinstance(value, dict) or not all(NODE_NAME.fullmatch(n) and _is_state(v) for n, v in value.items()):
        raise BadInput(f"{path}: field '{key}': expected an object of node name -> {{state, reason}}")


def _is_state(value) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(f, ""), str) for f in ("state", "reason"))


def write_records(out: Path, records: dict[str, dict]) -> None:
    for node, rec in records.items():
        (out / "nodes" / node).mkdir(parents=True, exist_ok=True)
        write_atomically(out / "nodes" / node / "node.json", json.dumps(rec, indent=2) + "\n")


# ---- progress ----------------------------------------------------------------------------------


def counts(records: dict[str, dict]) -> dict[str, int]:
    c = {"pending": 0, "running": 0, "done": 0, "failed": 0}
    for rec in records.values():
        o = rec["outcome"]
        key = o if o in ("pending", "running") else "done" if o == "ran" else "failed"
        c[key] += 1
    return c


def eta_text(records: dict[str, dict]) -> str:
    """Each pinned task waits only for its own node, so the fleet ends when its slowest node
    does: the mean time of the nodes done so far, less what each running node has had."""
    active = [r for r in records.values() if r["outcome"] in ("pending", "running")]
    done = [r["elapsed_s"] for r in records.values() if r["outcome"] == "ran" and r.get("elapsed_s") is not None]
    if not active:
        return ""
    if not done:
        return "ETA unknown until a node finishes"
    mean = sum(done) / len(done)
    left = max(mean - (r.get("elapsed_s") or 0.0) for r in active)
    return f"ETA {human_seconds(left)}" if left > 0 else "ETA any moment (slower than the nodes done)"


def describe(rec: dict) -> str:
    o = rec["outcome"]
    if o == "ran":
        text = f"ran (pitfall run exit {rec.get('run_exit', '?')}"
        if rec.get("elapsed_s") is not None:
            text += f", {human_seconds(rec['elapsed_s'])}"
        return text + ")"
    if o in ("pending", "running"):
        reason = rec.get("reason", "")
        return o + (f" ({reason})" if reason and reason != "None" else "")
    return f"{o}: {rec.get('message', '')}".rstrip(": ")


# ---- the merged report -------------------------------------------------------------------------


# Where `merge` records the nodes' runs (`pitfall history ingest`): set by the command line's
# --history DB / --no-history (fleet.py); None: pitfall's default database ($PITFALL_HISTORY,
# else the user's data folder).
HISTORY: dict = {"db": None, "off": False}


def record_history(out: Path, fleet: dict, pitfall: str) -> None:
    """Every node's run folder added to the results database, so that the fleet's runs join the
    cases' trends (docs/history.md). Ingesting twice changes nothing; a database that cannot take
    them is a warning: the run folders stay the source of truth."""
    if HISTORY["off"]:
        return
    runs = [str(out / "nodes" / n / "run") for n in fleet["all_nodes"]
            if (out / "nodes" / n / "run" / "results.jsonl").is_file()]
    if not runs:
        return
    argv = [pitfall, "history", "ingest", *runs] + (["--db", HISTORY["db"]] if HISTORY["db"] else [])
    rc, _, err = call(argv, timeout=600)
    if rc == 0:
        print(f"history: {len(runs)} node run(s) recorded" + (f" in {HISTORY['db']}" if HISTORY["db"] else ""))
    else:
        last = err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
        print(f"pitfall fleet: warning: the node runs were not all recorded in the history ({last}); "
              f"add them later with `pitfall history ingest {out}/nodes/*/run`", file=sys.stderr)


def merge(out: Path, fleet: dict, pitfall: str, records: dict[str, dict]) -> int:
    """fleet.md, fleet.html and fleet-report.json from `pitfall report --merge` over the node
    folders; the exit status the fleet's outcome deserves (from the JSON report: how many cases
    differ within a fingerprint group)."""
    dirs = [str(out / "nodes" / n) for n in fleet["all_nodes"]]
    problems = render_reports(out, dirs, pitfall)
    differing = None
    if (out / REPORT_JSON).exists():
        try:
            differing = differing_within_groups(out / REPORT_JSON)
        except BadInput as e:
            problems.append(str(e))
    if (out / "fleet.md").exists():
        text = (out / "fleet.md").read_text(errors="replace")
        # Which node differs in its cases, then in the libraries its cases loaded.
        for heading in ("Which node differs", "Loaded libraries"):
            section = re.search(rf"^### {heading}\n.*?(?=^### |\Z)", text, re.S | re.M)
            if section:
                print("\n" + section.group(0).rstrip())
        print(f"\nmerged report: {out / 'fleet.md'}, {out / 'fleet.html'}")
    record_history(out, fleet, pitfall)
    problems += node_problems(records)
    if differing:
        problems.append(f"{differing} case(s) differ between nodes of one fingerprint group")
    for p in problems:
        print(f"pitfall fleet: {p}", file=sys.stderr)
    if not problems:
        print(f"pitfall fleet: all {len(records)} nodes ran, met their baselines and agree within their groups")
    return EXIT_DIFFERS if problems else EXIT_OK


def render_reports(out: Path, dirs: list[str], pitfall: str) -> list[str]:
    problems = []
    for fmt, name in (("markdown", "fleet.md"), ("html", "fleet.html"), ("json", REPORT_JSON)):
        (out / name).unlink(missing_ok=True)  # a report of an earlier collect is not this one's
        rc, _, err = call([pitfall, "report", "--merge", *dirs, "--format", fmt, "--out", str(out / name)], timeout=600)
        if rc != 0:
            problems.append(f"the merged report ({name}) failed: {err.splitlines()[-1] if err else rc}")
    return problems


def differing_within_groups(path: Path) -> int:
    doc = read_json(path)
    count = doc.get("differing_within_groups") if isinstance(doc, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise BadInput(f"{path}: differing_within_groups is not a count")
    return count


def node_problems(records: dict[str, dict]) -> list[str]:
    not_ran = [n for n, r in records.items() if r["outcome"] != "ran"]
    failing = [n for n, r in records.items() if r["outcome"] == "ran" and r.get("run_exit") != 0]
    problems = []
    if not_ran:
        problems.append(f"{len(not_ran)} node(s) did not run the suite: " +
                        ", ".join(f"{n} ({records[n]['outcome']})" for n in not_ran))
    if failing:
        problems.append(f"{len(failing)} node(s) missed their baselines (pitfall run exit 1): {', '.join(failing)}")
    return problems
