"""`pitfall fleet manifest --engine kubernetes --gate-init | --gate-npd`: `pitfall gate` on
Kubernetes, beside the Indexed Job of kubernetes.py (which parses the flags and renders).

  --gate-init  a Pod whose init container runs `pitfall gate --require R` on the GPUs the pod
               is given; the workload container starts only where the gate admits the node.
  --gate-npd   node-problem-detector (NPD) running the gate as a custom plugin on every GPU node:
               a ServiceAccount, a ClusterRole and its binding, a ConfigMap (the plugin monitor
               config and the plugin) and a DaemonSet. The node then carries the NodeCondition
               PitfallGateProblem (True: the gate drains it, the message says why).

docs/kubernetes.md ("The gate before a workload", "The gate on every node") says why each
field is as it is. NPD's custom plugin contract (exit 0 OK, 1 NonOK, other Unknown; the message
is stdout cut to max_output_length) and config fields: docs/custom_plugin_monitor.md and
pkg/custompluginmonitor of https://github.com/kubernetes/node-problem-detector (v0.8.19);
reports/schema/npd-custom-plugin.schema.json holds those fields for the tests.
"""
from __future__ import annotations

import argparse
import json
import re

from ..cli import BadInput
from .kubernetes import (GPU_RESOURCE, HOSTNAME_LABEL, DNS_LABEL, DNS_SUBDOMAIN, check_dns,
                         check_image, check_text, check_count, parse_time, MAX_GPUS_PER_NODE)

GATE_CONTAINER = "pitfall-gate"
WORKLOAD_CONTAINER = "workload"
NPD_CONTAINER = "node-problem-detector"
# Tag documented by NPD's own deployment manifest and the docs cited above; pin it by digest
# (--npd-image ...@sha256:...) before use, as any image a cluster pulls should be.
NPD_IMAGE = "registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.19"
NPD_BINARY = "/node-problem-detector"           # where NPD's image keeps it (its Dockerfile)
NPD_DIR = "/opt/node-problem-detector"          # the emptyDir it is copied into
CONFIG_DIR = "/etc/pitfall-gate"                # the ConfigMap, mounted
MONITOR_FILE = "pitfall-gate-monitor.json"
PLUGIN_FILE = "pitfall-gate-plugin.sh"
CONDITION_TYPE = "PitfallGateProblem"
# The condition's reason while the gate does not drain (False; also Unknown: NPD puts the default
# reason back then, and an unjudged gate never drains) and when it does (True).
REASON_NO_DRAIN = "PitfallGateNoDrain"
REASON_DRAIN = "PitfallGateDrain"
MONITOR_SOURCE = "pitfall-gate-monitor"
# The gate's line is `unjudged: ` and at most 200 characters: 256 cuts nothing of it.
MAX_OUTPUT_LENGTH = 256
DEFAULT_INTERVAL = "10:00"   # NPD invoke_interval, Slurm's form (10 minutes)
DEFAULT_TIMEOUT = "2:00"     # the plugin's timeout (2 minutes)
# GPU nodes as NVIDIA's GPU Feature Discovery (and the GPU Operator) labels them.
DEFAULT_NODE_LABEL = "nvidia.com/gpu.present=true"
# pitfall's profile names (judge/bless.cpp a_profile_name): a letter or digit, then letters,
# digits, '.', '_', '-'. `gpu` is one too.
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
# A label key: an optional DNS subdomain prefix and '/', then a name; a value: empty or a name.
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")

# Which flags each kind of manifest takes (argparse dests); any other flag given is refused.
COMMON = {"engine", "image", "gate_init", "gate_npd", "mode", "namespace", "name", "format", "out"}
FLAGS_OF = {
    "gate-init": COMMON | {"nodelist", "gpus", "require", "workload_image", "workload_command",
                           "runtime_class"},
    "gate-npd": COMMON | {"nodelist", "require", "npd_image", "time", "interval", "node_label",
                          "runtime_class"},
}
DEFAULT_NAME = {"gate-init": "pitfall-gated", "gate-npd": "pitfall-gate-npd"}
DEFAULT_NAMESPACE = {"gate-init": "default", "gate-npd": "kube-system"}

# The init container's script; the arguments after it are `pitfall gate`'s. Unjudged (3) lets
# the workload start, as the gate's Slurm prolog does: the gate never blocks a node for its own
# failure. No `$(` and no `$$` in it: Kubernetes expands those in a container's command.
INIT_SCRIPT = """\
if [ -n "${NODE_NAME:-}" ]; then set -- --node="$NODE_NAME" "$@"; fi
pitfall gate "$@"
code=$?
if [ "$code" -eq 3 ]; then
  echo "pitfall gate: could not judge this node; the workload starts (unjudged never blocks)" >&2
  exit 0
fi
exit "$code"
"""

# NPD's plugin, run as `/bin/sh FILE --require=R`: the gate's first stdout line is the message
# (NPD would take all of stdout), its verdict the exit status NPD reads.
PLUGIN_SCRIPT = """\
# node-problem-detector custom plugin: exit 0 OK, 1 NonOK (the NodeCondition turns True),
# anything else Unknown; stdout is the condition's message.
if [ -n "${NODE_NAME:-}" ]; then set -- --node="$NODE_NAME" "$@"; fi
out=$(pitfall gate "$@")
code=$?
first=$(printf '%s\\n' "$out" | { IFS= read -r line; printf '%s' "$line"; })
case "$code" in
  0) printf '%s\\n' "$first"; exit 0 ;;
  1) printf '%s\\n' "$first"; exit 1 ;;
esac
if [ -n "$first" ]; then
  printf '%s\\n' "$first"
else
  echo "unjudged: pitfall gate exited $code and said nothing"
fi
exit 2
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--gate-init", action="store_true",
                      help="write a Pod whose init container runs `pitfall gate` before the "
                           "workload container (--workload-image) starts")
    kind.add_argument("--gate-npd", action="store_true",
                      help="write node-problem-detector running `pitfall gate` as a custom "
                           "plugin on every GPU node (DaemonSet, ConfigMap, RBAC)")
    p.add_argument("--require", help="passed to `pitfall gate --require`: gpu (default) or a "
                                     "baseline profile name")
    p.add_argument("--workload-image", help="--gate-init: the workload container's image")
    p.add_argument("--workload-command", action="append", default=[],
                   help="--gate-init: one argument of the workload's command (repeatable; "
                        "default: the image's entrypoint)")
    p.add_argument("--runtime-class", help="the pod's runtimeClassName (e.g. nvidia)")
    p.add_argument("--npd-image", help=f"--gate-npd: NPD's image (default {NPD_IMAGE})")
    p.add_argument("--interval", help="--gate-npd: how often NPD runs the gate, Slurm's time "
                                      f"forms (default {DEFAULT_INTERVAL})")
    p.add_argument("--node-label", help="--gate-npd: KEY=VALUE the GPU nodes carry (default "
                                        f"{DEFAULT_NODE_LABEL}; none: any node)")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def refuse_foreign_flags(opts: argparse.Namespace, mode: str, allowed: set[str]) -> None:
    """BadInput naming the first flag given that `mode`'s manifest has no use for."""
    for dest, value in vars(opts).items():
        if dest in allowed or value in (None, False, []):
            continue
        what = {"job": "the Indexed Job", "gate-init": "--gate-init", "gate-npd": "--gate-npd"}
        raise BadInput(f"{_flag(dest)}: not a flag of {what[mode]} "
                       "(docs/kubernetes.md lists each manifest's flags)")


def check_args(opts: argparse.Namespace) -> None:
    """The flags of --gate-init and --gate-npd, checked (opts.mode says which)."""
    refuse_foreign_flags(opts, opts.mode, FLAGS_OF[opts.mode])
    opts.require = opts.require if opts.require is not None else "gpu"
    check_text("require", opts.require)
    if not PROFILE_NAME.fullmatch(opts.require):
        raise BadInput(f"--require {opts.require!r}: expected gpu or a profile name (a letter or "
                       "digit, then letters, digits, '.', '_' or '-'; at most 63 characters)")
    if opts.runtime_class is not None:
        check_dns("runtime-class", opts.runtime_class, DNS_SUBDOMAIN, 253, "a RuntimeClass name")
    if opts.mode == "gate-init":
        if opts.workload_image is None:
            raise BadInput("--gate-init needs --workload-image: the container the gate guards")
        check_image("workload-image", opts.workload_image)
        for arg in opts.workload_command:
            check_text("workload-command", arg)
        opts.gpus = check_count("gpus", opts.gpus if opts.gpus is not None else "1",
                                MAX_GPUS_PER_NODE)
        return
    # An empty value is refused by the checks, never taken for the default.
    opts.npd_image = check_image("npd-image", _given(opts.npd_image, NPD_IMAGE))
    opts.interval_s = parse_time(_given(opts.interval, DEFAULT_INTERVAL), "interval")
    timeout = _given(opts.time, DEFAULT_TIMEOUT)
    opts.timeout_s = parse_time(timeout, "time")
    if opts.timeout_s > opts.interval_s:
        raise BadInput(f"--time {timeout!r}: the gate's timeout ({opts.timeout_s} s) is longer "
                       f"than --interval ({opts.interval_s} s)")
    # `none`: no label to go by (then every node, or --nodelist's); it has no '=' to be a label.
    label = _given(opts.node_label, DEFAULT_NODE_LABEL)
    opts.node_label = None if label == "none" else _check_label(label)


def _given(value, default):
    return default if value is None else value


def _check_label(value: str) -> tuple[str, str]:
    check_text("node-label", value)
    key, sep, label_value = value.partition("=")
    prefix, slash, name = key.rpartition("/")
    good = sep and LABEL_NAME.fullmatch(name) and len(name) <= 63 \
        and (not slash or (len(prefix) <= 253 and DNS_SUBDOMAIN.fullmatch(prefix))) \
        and (label_value == "" or LABEL_NAME.fullmatch(label_value))
    if not good:
        raise BadInput(f"--node-label {value!r}: expected KEY=VALUE as a Kubernetes label "
                       "([prefix/]name=value: letters, digits, '-', '_', '.'; at most 63 each)")
    return key, label_value


def _labels(opts, app: str) -> dict:
    return {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": opts.name}


def _node_env() -> dict:
    return {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def _nodelist_terms(opts) -> list:
    expressions = []
    if getattr(opts, "node_label", None) is not None:
        key, value = opts.node_label
        expressions.append({"key": key, "operator": "In", "values": [value]})
    if opts.nodelist is not None:
        expressions.append({"key": HOSTNAME_LABEL, "operator": "In", "values": list(opts.nodelist)})
    return expressions


def _pod_placement(opts, spec: dict) -> None:
    if opts.runtime_class is not None:
        spec["runtimeClassName"] = opts.runtime_class
    expressions = _nodelist_terms(opts)
    if expressions:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}
    spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]


def gate_args(opts) -> list[str]:
    # --flag=value: the value can never be read as another option.
    return [f"--require={opts.require}"]


def gate_init_pod(opts) -> dict:
    """The Pod: the gate as its init container, the workload after it."""
    gpus = {"limits": {GPU_RESOURCE: opts.gpus}}
    workload: dict = {"name": WORKLOAD_CONTAINER, "image": opts.workload_image}
    if opts.workload_command:
        # Kubernetes expands $(VAR) in a command and reads $$ as $: doubling every $ keeps
        # each argument as the user wrote it.
        workload["command"] = [arg.replace("$", "$$") for arg in opts.workload_command]
    workload["resources"] = gpus
    spec: dict = {"restartPolicy": "Never"}
    _pod_placement(opts, spec)
    spec["initContainers"] = [{
        "name": GATE_CONTAINER,
        "image": opts.image,
        "command": ["/bin/sh", "-c", INIT_SCRIPT, GATE_CONTAINER, *gate_args(opts)],
        "env": [_node_env()],
        "resources": {"limits": {GPU_RESOURCE: opts.gpus}},
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }]
    spec["containers"] = [workload]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": opts.name, "namespace": opts.namespace,
                     "labels": _labels(opts, "pitfall-gated")},
        "spec": spec,
    }


def plugin_config(opts) -> dict:
    """NPD's custom plugin monitor config (reports/schema/npd-custom-plugin.schema.json)."""
    timeout = f"{opts.timeout_s}s"
    return {
        "plugin": "custom",
        "pluginConfig": {
            "invoke_interval": f"{opts.interval_s}s",
            "timeout": timeout,
            "max_output_length": MAX_OUTPUT_LENGTH,
            # One gate at a time: it runs cases on the GPUs.
            "concurrency": 1,
            # A drain for another reason updates the condition's message.
            "enable_message_change_based_condition_update": True,
        },
        "source": MONITOR_SOURCE,
        "metricsReporting": True,
        "conditions": [{"type": CONDITION_TYPE, "reason": REASON_NO_DRAIN,
                        "message": "pitfall gate admits this node"}],
        "rules": [{
            "type": "permanent",
            "condition": CONDITION_TYPE,
            "reason": REASON_DRAIN,
            # /bin/sh reads the plugin from the ConfigMap, which needs no execute bit there.
            "path": "/bin/sh",
            "args": [f"{CONFIG_DIR}/{PLUGIN_FILE}", *gate_args(opts)],
            "timeout": timeout,
        }],
    }


def npd_objects(opts) -> list[dict]:
    """ServiceAccount, ClusterRole, ClusterRoleBinding, ConfigMap, DaemonSet, in applying order."""
    meta = {"name": opts.name, "namespace": opts.namespace,
            "labels": _labels(opts, "pitfall-gate-npd")}
    cluster_meta = {"name": opts.name, "labels": dict(meta["labels"])}
    config_name = f"{opts.name}-config"
    # The rules of Kubernetes' own system:node-problem-detector role: read its node, patch
    # the node's status (the condition), and write events.
    role_rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
         "verbs": ["create", "patch", "update"]},
    ]
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {**meta, "name": config_name},
        "data": {MONITOR_FILE: json.dumps(plugin_config(opts), indent=2) + "\n",
                 PLUGIN_FILE: PLUGIN_SCRIPT},
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": cluster_meta, "rules": role_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": dict(cluster_meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": opts.name},
         "subjects": [{"kind": "ServiceAccount", "name": opts.name,
                       "namespace": opts.namespace}]},
        config_map,
        _npd_daemonset(opts, meta, config_name),
    ]


def _npd_daemonset(opts, meta: dict, config_name: str) -> dict:
    spec: dict = {"serviceAccountName": opts.name}
    _pod_placement(opts, spec)
    spec["initContainers"] = [{
        # NPD is one Go binary; the gate's cases need the pitfall image's CUDA libraries, so
        # NPD moves into the pitfall image rather than pitfall into NPD's.
        "name": "copy-node-problem-detector",
        "image": opts.npd_image,
        "command": ["/bin/cp", NPD_BINARY, f"{NPD_DIR}/node-problem-detector"],
        "volumeMounts": [{"name": "npd", "mountPath": NPD_DIR}],
    }]
    spec["containers"] = [{
        "name": NPD_CONTAINER,
        "image": opts.image,
        "command": [f"{NPD_DIR}/node-problem-detector", "--logtostderr",
                    f"--config.custom-plugin-monitor={CONFIG_DIR}/{MONITOR_FILE}"],
        "env": [
            _node_env(),
            # Every GPU of the node, without taking any from the scheduler (no nvidia.com/gpu
            # request): NVIDIA's container runtime reads these.
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
        ],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                      "limits": {"memory": "2Gi"}},
        # NVIDIA's runtime may ignore NVIDIA_VISIBLE_DEVICES in an unprivileged container (its
        # accept-...-envvar-when-unprivileged setting; off on hardened nodes): the gate would
        # then see no GPU and drain every node. NPD's own DaemonSet is privileged too.
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "npd", "mountPath": NPD_DIR, "readOnly": True},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        ],
    }]
    spec["volumes"] = [
        {"name": "npd", "emptyDir": {}},
        {"name": "config", "configMap": {"name": config_name}},
    ]
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": dict(meta),
        "spec": {
            "selector": {"matchLabels": dict(meta["labels"])},
            "template": {"metadata": {"labels": dict(meta["labels"])}, "spec": spec},
        },
    }
