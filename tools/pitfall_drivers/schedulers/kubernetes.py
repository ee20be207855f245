"""`pitfall fleet manifest --engine kubernetes`: a Kubernetes Indexed Job that runs pitfall once
on each of N GPU nodes and leaves, on a volume every node mounts, the same folders a Slurm fleet
run leaves on its shared file system:

  <results>/nodes/<node>/doctor.json   `pitfall doctor --json` on that node
  <results>/nodes/<node>/run/          that node's `pitfall run` folder
  <results>/nodes/<node>/node.json     the node's record ("schema": "pitfall.fleet-node/1")

so that `pitfall report --merge <results>/nodes/*` compares the nodes. With --gate-init or
--gate-npd it writes `pitfall gate` manifests instead (kubernetes_gate.py). docs/kubernetes.md
says what each part of each manifest does and why.

usage: pitfall fleet manifest --engine kubernetes --image IMAGE (--nodes N | --nodelist a,b,c)
         [--gpus G] [--namespace NS] [--name NAME] (--claim PVC | --host-path DIR)
         [--results-dir PATH] [--time T] [--format yaml|json] [--out FILE]
         [--scenario S] [--backend B] [--variant V] [--label L]
       pitfall fleet manifest --engine kubernetes --image IMAGE --gate-init
         --workload-image IMAGE [--workload-command ARG]... [--require gpu|PROFILE] [--gpus G]
         [--nodelist a,b,c] [--runtime-class RC] [--namespace NS] [--name NAME]
         [--format yaml|json] [--out FILE]
       pitfall fleet manifest --engine kubernetes --image IMAGE --gate-npd
         [--require gpu|PROFILE] [--npd-image IMAGE] [--interval T] [--time T]
         [--node-label KEY=VALUE] [--nodelist a,b,c] [--runtime-class RC] [--namespace NS]
         [--name NAME] [--format yaml|json] [--out FILE]

Exit status: 0 the manifest was printed (or written to --out); 2 a bad flag (the message names
it) or --out could not be written (the message names the file and the reason). The pitfall
binary reaches it as `pitfall fleet manifest` (fleet.py hands it the flags).

Standard library only: the YAML is written by hand, every string as a JSON string (a JSON string
is a valid YAML double-quoted scalar) but multi-line text (scripts, the plugin config), which is
a literal block ("|") so a person can read what will run; no YAML library is needed to make it.
Several objects are a YAML stream of documents ("---"), or in JSON one v1 List.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys

from ..cli import BadInput, Parser, guarded, parse
from ..files import write_atomically
from ..fleet_folder import NODE_SCHEMA
from .base import Scheduler

PROG = "pitfall fleet manifest"
CONTAINER_NAME = "pitfall"
VOLUME_NAME = "results"
# The resource the NVIDIA device plugin advertises, and the taint GPU node pools commonly carry
# so that pods asking for no GPU stay off them.
GPU_RESOURCE = "nvidia.com/gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# The API server refuses an Indexed Job whose parallelism exceeds 10^5.
MAX_NODES = 100_000
# More GPUs than any one node carries would leave every pod Pending; this only catches typos.
MAX_GPUS_PER_NODE = 64
# A time limit past a year is a typo; it also keeps every duration well inside Go's (NPD's).
MAX_TIME_S = 366 * 86400

# RFC 1123 label (names, namespaces) and subdomain (node names, claim names), as Kubernetes
# validates them: lower case alphanumerics and '-', starting and ending alphanumeric.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
FILTER_FLAGS = ("scenario", "backend", "variant", "label")
# The flags (argparse dests) the Indexed Job takes; kubernetes_gate.FLAGS_OF has the gate's.
JOB_FLAGS = {"engine", "image", "gate_init", "gate_npd", "mode", "nodes", "nodelist", "gpus",
             "namespace", "name", "claim", "host_path", "results_dir", "time", "format", "out",
             *FILTER_FLAGS}
BACKENDS = ("cpu", "cuda")


def _parser() -> Parser:
    p = Parser(prog=PROG, add_help=True, allow_abbrev=False,
                description="Print a Kubernetes Indexed Job that runs `pitfall doctor --json` and "
                            "`pitfall run` once on each of N GPU nodes; with --gate-init, a Pod "
                            "whose init container runs `pitfall gate` before its workload; with "
                            "--gate-npd, node-problem-detector running `pitfall gate` on every "
                            "GPU node (docs/kubernetes.md).")
    p.add_argument("--engine", required=True, choices=["kubernetes"],
                   help="the only engine this command writes a manifest for")
    p.add_argument("--image", required=True, help="a container image with `pitfall` on its PATH")
    # The Job's required groups are checked in parse_args: the gate's manifests take neither.
    count = p.add_mutually_exclusive_group()
    count.add_argument("--nodes", help="how many GPU nodes, any N of them")
    count.add_argument("--nodelist", help="exactly these nodes, by Kubernetes node name: a,b,c")
    p.add_argument("--gpus", help="GPUs each pod asks for (default 1)")
    p.add_argument("--namespace", help="(default default; kube-system with --gate-npd)")
    p.add_argument("--name", help="the object's name (default pitfall-fleet; pitfall-gated with "
                                  "--gate-init, pitfall-gate-npd with --gate-npd)")
    volume = p.add_mutually_exclusive_group()
    volume.add_argument("--claim", help="a ReadWriteMany PersistentVolumeClaim every node mounts")
    volume.add_argument("--host-path", help="a folder of a file system mounted on every node")
    p.add_argument("--results-dir",
                   help="where the volume is mounted in the container (default /results)")
    p.add_argument("--time", help="the Job's time limit (with --gate-npd: the gate's), as Slurm "
                                  "writes it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
    p.add_argument("--format", default="yaml", choices=["yaml", "json"], help="(default yaml)")
    p.add_argument("--out", help="write the manifest to FILE (atomically) instead of printing it")
    for flag in FILTER_FLAGS:
        p.add_argument(f"--{flag}", action="append", default=[],
                       help=f"passed to `pitfall run --{flag}` (repeatable)")
    kubernetes_gate().add_arguments(p)
    return p


def kubernetes_gate():
    # Imported when used: kubernetes_gate.py imports this module's checks.
    from . import kubernetes_gate as gate
    return gate


def check_text(flag: str, value: str) -> str:
    # One rule for every value that reaches the manifest or the script: present, and nothing
    # that is not printable (a newline would start a new shell command in an unquoted context,
    # and a control character is not allowed in a YAML stream).
    if value == "":
        raise BadInput(f"--{flag}: empty value")
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        raise BadInput(f"--{flag} {value!r}: contains the unprintable character {bad!r}")
    return value


def check_dns(flag: str, value: str, pattern: re.Pattern, limit: int, what: str) -> str:
    check_text(flag, value)
    if len(value) > limit or not pattern.fullmatch(value):
        raise BadInput(f"--{flag} {value!r}: not {what} (lower case letters, digits and '-'"
                         f"{', dots between parts' if pattern is DNS_SUBDOMAIN else ''}; starting "
                         f"and ending with a letter or digit; at most {limit} characters)")
    return value


def check_count(flag: str, value: str, limit: int) -> int:
    if not re.fullmatch(r"[0-9]+", value or "") or not 1 <= int(value) <= limit:
        raise BadInput(f"--{flag} {value!r}: expected a whole number in [1, {limit}]")
    return int(value)


def _check_abs_path(flag: str, value: str) -> str:
    check_text(flag, value)
    parts = value.split("/")
    if not value.startswith("/") or ".." in parts:
        raise BadInput(f"--{flag} {value!r}: expected an absolute path with no '..'")
    if value.rstrip("/") == "":
        raise BadInput(f"--{flag} {value!r}: the root folder cannot be the results folder")
    return value


def parse_time(value: str, flag: str = "time") -> int:
    """Slurm's --time forms, in seconds: "minutes", "minutes:seconds", "hours:minutes:seconds",
    "days-hours", "days-hours:minutes", "days-hours:minutes:seconds"; BadInput names --flag."""
    n = "([0-9]{1,9})"  # ASCII digits only (\d takes any script's), and no endless numbers
    forms = (
        (n, ("minutes",)),
        (f"{n}:{n}", ("minutes", "seconds")),
        (f"{n}:{n}:{n}", ("hours", "minutes", "seconds")),
        (f"{n}-{n}", ("days", "hours")),
        (f"{n}-{n}:{n}", ("days", "hours", "minutes")),
        (f"{n}-{n}:{n}:{n}", ("days", "hours", "minutes", "seconds")),
    )
    for pattern, names in forms:
        m = re.fullmatch(pattern, value)
        if m:
            break
    else:
        raise BadInput(f"--{flag} {value!r}: expected MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                         "D-HH:MM:SS")
    fields = dict(zip(names, (int(g) for g in m.groups())))
    # The first field may be as large as it likes (Slurm reads "90" as 90 minutes); the ones
    # after it are on a clock.
    for unit, limit in (("hours", 24), ("minutes", 60), ("seconds", 60)):
        if unit in fields and unit != names[0] and fields[unit] >= limit:
            raise BadInput(f"--{flag} {value!r}: {unit} after the first field must be below "
                           f"{limit}")
    scale = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
    total = sum(scale[unit] * n for unit, n in fields.items())
    if total <= 0:
        raise BadInput(f"--{flag} {value!r}: must be longer than 0 (leave --{flag} out for "
                       "the default)")
    if total > MAX_TIME_S:
        raise BadInput(f"--{flag} {value!r}: longer than a year")
    return total


def _check_filter(flag: str, value: str) -> str:
    check_text(flag, value)
    items = value.split(",")
    if any(item == "" for item in items):
        raise BadInput(f"--{flag} {value!r}: an empty item in the list")
    if flag == "backend":
        unknown = [item for item in items if item not in BACKENDS]
        if unknown:
            raise BadInput(f"--backend {value!r}: unknown backend {unknown[0]!r} "
                             f"(expected {' or '.join(BACKENDS)})")
    return value


def check_image(flag: str, value: str) -> str:
    check_text(flag, value)
    if any(c.isspace() for c in value):
        raise BadInput(f"--{flag} {value!r}: an image reference has no spaces")
    return value


def _check_nodelist(value: str) -> list[str]:
    check_text("nodelist", value)
    nodes = value.split(",")
    for node in nodes:
        if node == "":
            raise BadInput(f"--nodelist {value!r}: an empty node name in the list")
        check_dns("nodelist", node, DNS_SUBDOMAIN, 253, "a Kubernetes node name")
    seen = set()
    for node in nodes:
        if node in seen:
            raise BadInput(f"--nodelist: {node!r} is named twice (one pod runs per node)")
        seen.add(node)
    if len(nodes) > MAX_NODES:
        raise BadInput(f"--nodelist: {len(nodes)} nodes, more than an Indexed Job "
                       f"runs at once ({MAX_NODES})")
    return nodes


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The flags, checked: raises BadInput naming the flag that is wrong. opts.mode is `job`,
    `gate-init` or `gate-npd`."""
    opts = parse(_parser(), argv)
    gate = kubernetes_gate()
    opts.mode = "gate-init" if opts.gate_init else "gate-npd" if opts.gate_npd else "job"
    check_image("image", opts.image)
    if opts.name is None:
        opts.name = gate.DEFAULT_NAME.get(opts.mode, "pitfall-fleet")
    if opts.namespace is None:
        opts.namespace = gate.DEFAULT_NAMESPACE.get(opts.mode, "default")
    check_dns("name", opts.name, DNS_LABEL, 63, "a DNS-1123 label")
    check_dns("namespace", opts.namespace, DNS_LABEL, 63, "a DNS-1123 label")
    if opts.nodelist is not None:
        opts.nodelist = _check_nodelist(opts.nodelist)
    if opts.out is not None:
        check_text("out", opts.out)
    if opts.mode != "job":
        gate.check_args(opts)
        return opts
    gate.refuse_foreign_flags(opts, "job", JOB_FLAGS)
    if opts.nodelist is not None:
        opts.node_count = len(opts.nodelist)
    elif opts.nodes is not None:
        opts.node_count = check_count("nodes", opts.nodes, MAX_NODES)
    else:
        raise BadInput("the Job needs --nodes N or --nodelist a,b,c")
    opts.gpus = check_count("gpus", opts.gpus if opts.gpus is not None else "1", MAX_GPUS_PER_NODE)
    if opts.claim is not None:
        check_dns("claim", opts.claim, DNS_SUBDOMAIN, 253, "a PersistentVolumeClaim name")
    elif opts.host_path is not None:
        _check_abs_path("host-path", opts.host_path)
    else:
        raise BadInput("the Job needs a results volume: --claim PVC or --host-path DIR")
    opts.results_dir = opts.results_dir if opts.results_dir is not None else "/results"
    _check_abs_path("results-dir", opts.results_dir)
    opts.results_dir = opts.results_dir.rstrip("/")
    opts.deadline_s = parse_time(opts.time) if opts.time is not None else None
    for flag in FILTER_FLAGS:
        for value in getattr(opts, flag):
            _check_filter(flag, value)
    return opts


def node_script(opts: argparse.Namespace) -> str:
    """The container's /bin/sh script. Every value that came from a flag is a shlex-quoted
    literal; the only values from the environment are NODE_NAME and JOB_COMPLETION_INDEX, which
    Kubernetes sets and the script checks before it uses them in a path or in node.json."""
    run_args = [f"--{flag}={value}" for flag in FILTER_FLAGS for value in getattr(opts, flag)]
    quoted_run_args = " ".join(shlex.quote(a) for a in run_args)
    lines = [
        "set -u",
        f"results={shlex.quote(opts.results_dir)}",
        f"job_name={shlex.quote(opts.name)}",
        # The node name becomes a folder name and a JSON string: it must be a node name.
        'case "${NODE_NAME:-}" in',
        "  ''|.*|*..*|*[!abcdefghijklmnopqrstuvwxyz0123456789.-]*)",
        "    echo \"pitfall fleet: NODE_NAME '${NODE_NAME:-}' is not a node name\" >&2; exit 2 ;;",
        "esac",
        'case "${JOB_COMPLETION_INDEX:-}" in',
        "  ''|*[!0-9]*)",
        "    echo \"pitfall fleet: JOB_COMPLETION_INDEX '${JOB_COMPLETION_INDEX:-}' is not an"
        " index\" >&2; exit 2 ;;",
        "esac",
        'node_dir="$results/nodes/$NODE_NAME"',
        'if ! mkdir -p "$node_dir"; then',
        '  echo "pitfall fleet: cannot make $node_dir" >&2; exit 2',
        "fi",
        "started_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)",
        # doctor's verdict is recorded, not obeyed: a machine it finds broken is still run,
        # and its run shows how the cases fail there.
        'pitfall doctor --json > "$node_dir/.doctor.json.tmp"',
        "doctor_exit=$?",
        'if [ -s "$node_dir/.doctor.json.tmp" ]; then',
        '  mv -f "$node_dir/.doctor.json.tmp" "$node_dir/doctor.json"',
        "else",
        '  rm -f "$node_dir/.doctor.json.tmp"',
        "fi",
        f'pitfall run --out "$node_dir/run" {quoted_run_args}'.rstrip(),
        "run_exit=$?",
        "ended_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)",
        # pitfall run: 0 every case as expected, 1 some case judged otherwise; anything else
        # means it could not judge the cases.
        'case "$run_exit" in 0|1) outcome=ran ;; *) outcome=run_failed ;; esac',
        'printf \'{"schema":"%s","node":"%s","engine":"kubernetes","job_id":"%s-%s",'
        '"outcome":"%s","run_exit":%d,"doctor_exit":%d,"started_at":"%s","ended_at":"%s"}\\n\''
        f' {shlex.quote(NODE_SCHEMA)} "$NODE_NAME" "$job_name" "$JOB_COMPLETION_INDEX"'
        ' "$outcome" "$run_exit" "$doctor_exit" "$started_at" "$ended_at"'
        ' > "$node_dir/.node.json.tmp" && mv -f "$node_dir/.node.json.tmp" "$node_dir/node.json"'
        ' || echo "pitfall fleet: cannot write $node_dir/node.json" >&2',
        'exit "$run_exit"',
    ]
    return "\n".join(lines) + "\n"


def build_manifest(opts: argparse.Namespace) -> dict:
    """The Job as a dict, in the order a person reads it."""
    pod_labels = {"app.kubernetes.io/name": "pitfall-fleet", "app.kubernetes.io/instance": opts.name}
    affinity: dict = {
        # One pod per node: no two pods of this Job on the same hostname.
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": dict(pod_labels)}, "topologyKey": HOSTNAME_LABEL},
            ],
        },
    }
    if opts.nodelist is not None:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": HOSTNAME_LABEL, "operator": "In", "values": list(opts.nodelist)},
                    ]},
                ],
            },
        }
    if opts.claim is not None:
        volume = {"name": VOLUME_NAME, "persistentVolumeClaim": {"claimName": opts.claim}}
    else:
        # Directory, not DirectoryOrCreate: where the shared mount is missing on a node, the pod
        # fails to start instead of writing its results to that node's local disk.
        volume = {"name": VOLUME_NAME, "hostPath": {"path": opts.host_path, "type": "Directory"}}
    container = {
        "name": CONTAINER_NAME,
        "image": opts.image,
        "command": ["/bin/sh", "-c", node_script(opts)],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}},
        ],
        "resources": {"limits": {GPU_RESOURCE: opts.gpus}},
        "volumeMounts": [{"name": VOLUME_NAME, "mountPath": opts.results_dir}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    spec: dict = {
        "completionMode": "Indexed",
        "completions": opts.node_count,
        "parallelism": opts.node_count,
        # No retries, counted per index: a node whose cases fail (exit 1) fails its own index
        # only. A Job-wide backoffLimit of 0 would fail the whole Job on the first such node and
        # terminate the pods still running on the others.
        "backoffLimitPerIndex": 0,
    }
    if opts.deadline_s is not None:
        spec["activeDeadlineSeconds"] = opts.deadline_s
    spec["template"] = {
        "metadata": {"labels": dict(pod_labels)},
        "spec": {
            "restartPolicy": "Never",
            "affinity": affinity,
            "tolerations": [
                {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
            ],
            "containers": [container],
            "volumes": [volume],
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": opts.name, "namespace": opts.namespace, "labels": dict(pod_labels)},
        "spec": spec,
    }


_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")


def _yaml_scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # A JSON string is a YAML double-quoted scalar with the same meaning. The values were
        # checked printable, so ensure_ascii=False writes no escape a YAML reader lacks.
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"no YAML form for {type(value).__name__}")


def _is_block_text(value) -> bool:
    """A string a YAML literal block ("|", one final line break kept) holds exactly: lines of
    printable characters, the first not starting with a space (that would need an indentation
    indicator), none ending in white space, and one line break at the end."""
    if not isinstance(value, str) or "\n" not in value or not value.endswith("\n") \
            or value.endswith("\n\n") or value.startswith((" ", "\n")):
        return False
    return all(line.isprintable() and line == line.rstrip() for line in value[:-1].split("\n"))


def _yaml_key(key: str) -> str:
    return key if _PLAIN_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def _yaml_lines(value, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{_yaml_key(key)}:")
                lines.extend(_yaml_lines(item, indent + 2))
            elif _is_block_text(item):
                # The node script, readable in the manifest: a literal block takes every
                # character as it is, so nothing in it needs escaping.
                lines.append(f"{pad}{_yaml_key(key)}: |")
                lines.extend(f"{pad}  {line}" if line else "" for line in item[:-1].split("\n"))
            else:
                lines.append(f"{pad}{_yaml_key(key)}: {_yaml_inline(item)}")
    else:
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _yaml_lines(item, indent + 2)
                # The first line of the item goes after the dash.
                lines.append(f"{pad}- {nested[0][indent + 2:]}")
                lines.extend(nested[1:])
            elif _is_block_text(item):
                lines.append(f"{pad}- |")
                lines.extend(f"{pad}  {line}" if line else "" for line in item[:-1].split("\n"))
            else:
                lines.append(f"{pad}- {_yaml_inline(item)}")
    return lines


def _yaml_inline(value) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _yaml_scalar(value)


WHAT = {"job": "A Kubernetes Indexed Job",
        "gate-init": "A Pod whose init container runs `pitfall gate`",
        "gate-npd": "node-problem-detector running `pitfall gate` on every GPU node"}


def render(objects: dict | list[dict], fmt: str, mode: str = "job") -> str:
    """One object as itself; several as a v1 List (JSON) or a stream of YAML documents, in the
    order kubectl should create them."""
    objects = [objects] if isinstance(objects, dict) else objects
    if fmt == "json":
        doc = objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List",
                                                      "items": objects}
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    header = (f"# {WHAT[mode]}, written by `pitfall fleet manifest --engine kubernetes`;"
              " docs/kubernetes.md says what each part does.\n")
    return header + "---\n".join("\n".join(_yaml_lines(o, 0)) + "\n" for o in objects)


def build_objects(opts: argparse.Namespace) -> list[dict]:
    """What opts.mode asks for, in applying order."""
    if opts.mode == "gate-init":
        return [kubernetes_gate().gate_init_pod(opts)]
    if opts.mode == "gate-npd":
        return kubernetes_gate().npd_objects(opts)
    return [build_manifest(opts)]


def main(argv: list[str]) -> int:
    """`pitfall fleet manifest ARGS`: the exit status; a bad flag is said on stderr, exit 2."""
    try:
        return guarded(PROG, _manifest, argv)
    except SystemExit as e:  # --help: argparse printed it
        return int(e.code or 0)


def _manifest(argv: list[str]) -> int:
    opts = parse_args(argv)
    text = render(build_objects(opts), opts.format, opts.mode)
    if opts.out is None:
        sys.stdout.write(text)
        return 0
    try:
        write_atomically(opts.out, text)
    except OSError as e:
        raise BadInput(f"--out {opts.out!r}: cannot write: {e.strerror or e}") from e
    return 0


class KubernetesScheduler(Scheduler):
    """`pitfall fleet manifest --engine kubernetes`; kubectl applies and follows the Job."""

    name = "kubernetes"
    instead = {
        "run": "drives Slurm; for Kubernetes, `pitfall fleet manifest --engine kubernetes`",
        **{command: "follows no Kubernetes Job: `kubectl get pods -l app.kubernetes.io/name=pitfall-fleet` "
                    "says each pod's state; `pitfall report --merge <results>/nodes/*` merges"
           for command in ("status", "collect", "cancel")},
    }

    def manifest(self, argv: list[str]) -> int:
        return main(argv)
