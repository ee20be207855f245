"""Tests of tools/pitfall_drivers/schedulers/kubernetes_gate.py: `pitfall fleet manifest --engine
kubernetes --gate-init` (a Pod whose init container runs `pitfall gate`) and `--gate-npd`
(node-problem-detector running the gate as a custom plugin). Every object against Kubernetes'
API schemas (kubernetes-validate, offline), NPD's plugin config against
npd-custom-plugin.schema.json (the project's stdlib reader, and Python's jsonschema where it is
importable), the init container's and the plugin's scripts run for real by /bin/sh against a
stand-in `pitfall` that answers as the gate does, hostile and bad flags.

Environment: PITFALL_K8S_VALIDATE, as test_fleet_k8s.py (SKIP without it, a failure under CI=true).
"""
import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from test_fleet_k8s import GENERATOR, KUBERNETES_VERSIONS, ROOT, VALIDATOR, require_validator

sys.path.insert(0, str(ROOT / "tools"))
from pitfall_drivers.schedulers import kubernetes as fleet_k8s  # noqa: E402
from pitfall_drivers.schedulers import kubernetes_gate as gate  # noqa: E402
from pitfall_drivers.schema import Validator  # noqa: E402

NPD_SCHEMA = ROOT / "tools" / "pitfall_drivers" / "schedulers" / "npd-custom-plugin.schema.json"
BASE = ["--engine", "kubernetes", "--image", "registry.example/pitfall:0.1"]
INIT = [*BASE, "--gate-init", "--workload-image", "registry.example/train:3"]
NPD = [*BASE, "--gate-npd"]
# Every YAML metacharacter, a quote of each kind, and what a shell or Kubernetes would expand.
HOSTILE = [": # { } [ ] & * ! | > ' \" % @ `", "- leading dash", "$(HOME) $$ ${PATH} `id`",
           "--require=no-gpu", "key: value", "*alias", "&anchor", "!!python/object", "'", '"',
           "|", ">", "%YAML 1.2", "@x", "#"]


def generate(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = fleet_k8s.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def objects(argv):
    """The manifest's objects, from its JSON form."""
    rc, out, err = generate([*argv, "--format", "json"])
    assert rc == 0, err
    doc = json.loads(out)
    return doc["items"] if doc["kind"] == "List" else [doc]


def by_kind(argv):
    return {o["kind"]: o for o in objects(argv)}


def plugin_config(argv=NPD):
    data = by_kind(argv)["ConfigMap"]["data"]
    return json.loads(data[gate.MONITOR_FILE]), data


def npd_problems(config):
    """What NPD's own Validate() refuses beyond the fields (types/config.go): a permanent rule
    whose condition has no default, a rule timeout over the global one."""
    conditions = {c["type"] for c in config["conditions"]}
    problems = [f"permanent rule without condition {r.get('condition')!r}" for r in config["rules"]
                if r["type"] == "permanent" and r.get("condition") not in conditions]

    def seconds(text):
        return int(text.rstrip("s"))
    problems += [f"rule timeout {r['timeout']} over {config['pluginConfig']['timeout']}"
                 for r in config["rules"]
                 if seconds(r["timeout"]) > seconds(config["pluginConfig"]["timeout"])]
    return problems


class Schemas(unittest.TestCase):
    FLAG_SETS = (
        INIT,
        [*INIT, "--gpus", "4", "--require", "hopper-cuda13", "--nodelist", "gpu-a,gpu-b.rack2",
         "--runtime-class", "nvidia", "--namespace", "ml", "--name", "train-1",
         "--workload-command", "python3", "--workload-command", "train.py"],
        NPD,
        [*NPD, "--require", "no-gpu", "--npd-image", "reg.example/npd:v0.8.19@sha256:" + "a" * 64,
         "--interval", "30", "--time", "5:00", "--node-label", "example.com/pool=gpu-h100",
         "--nodelist", "gpu-a", "--runtime-class", "nvidia", "--namespace", "gate-ns"],
    )

    def test_every_object_validates_against_the_kubernetes_schemas_in_yaml_and_json(self):
        kv, yaml = require_validator(self)
        for flags in self.FLAG_SETS:
            rc, text, err = generate(flags)
            self.assertEqual(rc, 0, err)
            from_yaml = [d for d in yaml.safe_load_all(text)]
            self.assertEqual(from_yaml, objects(flags), "YAML and JSON say different things")
            for doc in from_yaml:
                for version in KUBERNETES_VERSIONS:
                    with self.subTest(flags=flags, kind=doc["kind"], version=version):
                        kv.validate(doc, version, strict=True)

    def test_the_kubernetes_validator_rejects_objects_that_are_wrong(self):
        kv, _ = require_validator(self)
        pod = objects(INIT)[0]
        pod["spec"]["initContainers"][0]["resource"] = {}
        with self.assertRaises(kv.ValidationError):
            kv.validate(pod, KUBERNETES_VERSIONS[0], strict=True)
        kinds = by_kind(NPD)
        kinds["ClusterRole"]["rules"][0]["verb"] = ["get"]
        with self.assertRaises(kv.ValidationError):
            kv.validate(kinds["ClusterRole"], KUBERNETES_VERSIONS[0], strict=True)
        kinds = by_kind(NPD)
        del kinds["DaemonSet"]["spec"]["selector"]
        with self.assertRaises(kv.ValidationError):
            kv.validate(kinds["DaemonSet"], KUBERNETES_VERSIONS[0], strict=True)

    def validators(self):
        schema = json.loads(NPD_SCHEMA.read_text())
        found = [("pitfall_drivers.schema", Validator(schema).is_valid)]
        if VALIDATOR is not None:
            import jsonschema
            found.append(("jsonschema", jsonschema.Draft202012Validator(schema).is_valid))
        return found

    def test_the_plugin_config_fits_npds_fields_and_npds_own_checks(self):
        for flags in (NPD, self.FLAG_SETS[3]):
            config, _ = plugin_config(flags)
            for name, is_valid in self.validators():
                with self.subTest(flags=flags, validator=name):
                    self.assertTrue(is_valid(config))
            self.assertEqual(npd_problems(config), [])
        # NPD's own example (config/custom-plugin-monitor.json, v0.8.19) fits the schema too.
        example = {"plugin": "custom", "pluginConfig": {"invoke_interval": "30s", "timeout": "5s",
                                                        "max_output_length": 80, "concurrency": 3},
                   "source": "ntp-custom-plugin-monitor",
                   "conditions": [{"type": "NTPProblem", "reason": "NTPIsUp",
                                   "message": "ntp service is up"}],
                   "rules": [{"type": "permanent", "condition": "NTPProblem", "reason": "NTPIsDown",
                              "path": "/config/plugin/check_ntp.sh", "timeout": "3s"}]}
        for name, is_valid in self.validators():
            self.assertTrue(is_valid(example), name)

    def test_the_plugin_schema_refuses_a_wrong_field(self):
        def broken(change):
            config, _ = plugin_config()
            change(config)
            return config
        wrong = {
            "a misspelt global field": lambda c: c["pluginConfig"].update(invokeInterval="30s"),
            "a length as a string": lambda c: c["pluginConfig"].update(max_output_length="256"),
            "a duration NPD cannot parse": lambda c: c["pluginConfig"].update(timeout="2 minutes"),
            "another plugin": lambda c: c.update(plugin="filelog"),
            "an unknown rule type": lambda c: c["rules"][0].update(type="perm"),
            "a permanent rule naming no condition": lambda c: c["rules"][0].pop("condition"),
            "a misspelt rule field": lambda c: c["rules"][0].update(argv=[]),
            "a condition without a reason": lambda c: c["conditions"][0].pop("reason"),
            "no source": lambda c: c.pop("source"),
            "a relative plugin path": lambda c: c["rules"][0].update(path="bin/sh"),
        }
        for what, change in wrong.items():
            for name, is_valid in self.validators():
                with self.subTest(what=what, validator=name):
                    self.assertFalse(is_valid(broken(change)), f"{what} passed {name}")
        config, _ = plugin_config()
        config["rules"][0]["condition"] = "OtherProblem"
        self.assertTrue(npd_problems(config))


class GateInitPod(unittest.TestCase):
    def test_the_init_container_gates_the_workload_on_the_same_gpus(self):
        pod = objects([*INIT, "--gpus", "2", "--require", "hopper-cuda13", "--workload-command",
                       "python3", "--workload-command", "train.py"])[0]
        self.assertEqual((pod["apiVersion"], pod["kind"]), ("v1", "Pod"))
        self.assertEqual(pod["metadata"]["name"], "pitfall-gated")
        spec = pod["spec"]
        # Never: a failed init container fails the pod, which then stays off this node.
        self.assertEqual(spec["restartPolicy"], "Never")
        [init] = spec["initContainers"]
        [work] = spec["containers"]
        self.assertEqual(init["image"], "registry.example/pitfall:0.1")
        self.assertEqual(init["command"][:2], ["/bin/sh", "-c"])
        self.assertEqual(init["command"][3:], ["pitfall-gate", "--require=hopper-cuda13"])
        self.assertEqual(init["resources"], {"limits": {"nvidia.com/gpu": 2}})
        self.assertEqual(work["resources"], init["resources"])
        self.assertEqual(work["image"], "registry.example/train:3")
        self.assertEqual(work["command"], ["python3", "train.py"])
        self.assertEqual(init["env"], [{"name": "NODE_NAME", "valueFrom": {
            "fieldRef": {"fieldPath": "spec.nodeName"}}}])
        # Kubernetes expands $(VAR) and reads $$ as $ in a command: the script has neither.
        self.assertNotIn("$(", init["command"][2])
        self.assertNotIn("$$", init["command"][2])
        self.assertNotIn("affinity", spec)
        self.assertNotIn("runtimeClassName", spec)

    def test_a_nodelist_and_a_runtime_class_place_the_pod(self):
        spec = objects([*INIT, "--nodelist", "gpu-a,gpu-b", "--runtime-class", "nvidia"])[0]["spec"]
        self.assertEqual(spec["runtimeClassName"], "nvidia")
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(terms["nodeSelectorTerms"], [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-a", "gpu-b"]}]}])

    def test_hostile_workload_arguments_reach_the_yaml_quoted_and_unexpanded(self):
        flags = [*INIT, "--workload-image", "reg.example/a:1@sha256:" + "b" * 64]
        for value in HOSTILE:
            flags.append(f"--workload-command={value}")
        pod = objects(flags)[0]
        # Kubernetes turns $$ into $ and leaves everything else: undoing that gives the values.
        command = pod["spec"]["containers"][0]["command"]
        self.assertEqual([arg.replace("$$", "$") for arg in command], HOSTILE)
        self.assertTrue(all("$" not in arg.replace("$$", "") for arg in command))
        if VALIDATOR is not None:
            _, yaml = VALIDATOR
            rc, text, err = generate(flags)
            self.assertEqual(rc, 0, err)
            self.assertEqual(list(yaml.safe_load_all(text)), [pod])


class NpdObjects(unittest.TestCase):
    def test_the_daemonset_runs_npd_in_the_pitfall_image_with_the_plugin_config(self):
        kinds = by_kind(NPD)
        self.assertEqual(list(kinds), ["ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                       "ConfigMap", "DaemonSet"])
        ds = kinds["DaemonSet"]
        spec = ds["spec"]["template"]["spec"]
        self.assertEqual(ds["metadata"]["namespace"], "kube-system")
        self.assertEqual(ds["spec"]["selector"]["matchLabels"],
                         ds["spec"]["template"]["metadata"]["labels"])
        [copy] = spec["initContainers"]
        [npd] = spec["containers"]
        self.assertEqual(copy["image"], gate.NPD_IMAGE)
        self.assertTrue(gate.NPD_IMAGE.endswith(":v0.8.19"))
        self.assertEqual(npd["image"], "registry.example/pitfall:0.1")
        # The binary the init container copies is the one the container runs, on one volume.
        copied_to = copy["command"][-1]
        self.assertEqual(npd["command"][0], copied_to)
        mounts = {m["name"]: m["mountPath"] for m in npd["volumeMounts"]}
        self.assertEqual(copy["volumeMounts"], [{"name": "npd", "mountPath": mounts["npd"]}])
        self.assertTrue(copied_to.startswith(mounts["npd"] + "/"))
        # The monitor config NPD is given is the ConfigMap's key, where the ConfigMap is mounted.
        config_flag = [a for a in npd["command"] if a.startswith("--config.custom-plugin-monitor=")]
        self.assertEqual(config_flag, [f"--config.custom-plugin-monitor={mounts['config']}/"
                                       f"{gate.MONITOR_FILE}"])
        volumes = {v["name"]: v for v in spec["volumes"]}
        self.assertEqual(volumes["config"]["configMap"]["name"],
                         kinds["ConfigMap"]["metadata"]["name"])
        self.assertEqual(volumes["npd"], {"name": "npd", "emptyDir": {}})
        config, data = plugin_config()
        [rule] = config["rules"]
        self.assertEqual((rule["path"], rule["args"]),
                         ("/bin/sh", [f"{mounts['config']}/{gate.PLUGIN_FILE}", "--require=gpu"]))
        self.assertIn(gate.PLUGIN_FILE, data)
        self.assertEqual(config["conditions"][0]["type"], "PitfallGateProblem")
        self.assertEqual((rule["type"], rule["condition"]), ("permanent", "PitfallGateProblem"))
        global_config = config["pluginConfig"]
        self.assertEqual((global_config["invoke_interval"], global_config["timeout"]),
                         ("600s", "120s"))
        # Every GPU visible, none taken from the scheduler.
        env = {e["name"]: e.get("value") for e in npd["env"]}
        self.assertEqual(env["NVIDIA_VISIBLE_DEVICES"], "all")
        self.assertIn("NODE_NAME", env)
        self.assertNotIn("nvidia.com/gpu", json.dumps(npd["resources"]))
        self.assertEqual(npd["securityContext"], {"privileged": True})
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(terms["nodeSelectorTerms"][0]["matchExpressions"],
                         [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}])

    def test_the_rbac_is_npds_and_binds_the_daemonsets_service_account(self):
        kinds = by_kind([*NPD, "--name", "gate", "--namespace", "ops"])
        account = kinds["ServiceAccount"]["metadata"]
        self.assertEqual((account["name"], account["namespace"]), ("gate", "ops"))
        pod = kinds["DaemonSet"]["spec"]["template"]["spec"]
        self.assertEqual(pod["serviceAccountName"], "gate")
        binding = kinds["ClusterRoleBinding"]
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": "gate",
                                                "namespace": "ops"}])
        self.assertEqual(binding["roleRef"]["name"], kinds["ClusterRole"]["metadata"]["name"])
        rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"])
                 for r in kinds["ClusterRole"]["rules"]}
        self.assertEqual(rules[(("",), ("nodes/status",))], {"patch"})
        self.assertEqual(rules[(("",), ("nodes",))], {"get"})
        self.assertEqual(rules[(("", "events.k8s.io"), ("events",))], {"create", "patch", "update"})

    def test_node_label_none_leaves_the_nodelist_or_every_node(self):
        spec = by_kind([*NPD, "--node-label", "none", "--nodelist", "gpu-a"])["DaemonSet"]
        terms = spec["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        self.assertEqual(terms, [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-a"]}]}])
        spec = by_kind([*NPD, "--node-label", "none"])["DaemonSet"]["spec"]["template"]["spec"]
        self.assertNotIn("affinity", spec)

    def test_time_and_interval_become_go_durations(self):
        config, _ = plugin_config([*NPD, "--interval", "1-00", "--time", "0:30"])
        self.assertEqual(config["pluginConfig"]["invoke_interval"], "86400s")
        self.assertEqual(config["pluginConfig"]["timeout"], "30s")
        self.assertEqual(config["rules"][0]["timeout"], "30s")


FAKE_PITFALL = """\
#!{python}
# Stands in for `pitfall gate`: records its arguments, prints FAKE_GATE_OUT, exits FAKE_GATE_EXIT.
import json, os, sys
with open(os.environ["FAKE_PITFALL_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
sys.stdout.write(os.environ.get("FAKE_GATE_OUT", ""))
sys.stderr.write("gate details on stderr\\n")
sys.exit(int(os.environ["FAKE_GATE_EXIT"]))
"""


class Scripts(unittest.TestCase):
    """The init container's script and NPD's plugin, run by /bin/sh as Kubernetes and NPD
    run them."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="pitfall-gate-k8s-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(self.tmp)], check=False)
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        fake = bin_dir / "pitfall"
        fake.write_text(FAKE_PITFALL.format(python=sys.executable))
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        self.path = f"{bin_dir}:/usr/bin:/bin"
        self.log = self.tmp / "argv.jsonl"

    def env(self, code, out, path=None):
        return {"PATH": path or self.path, "NODE_NAME": "gpu-a", "FAKE_PITFALL_LOG": str(self.log),
                "FAKE_GATE_EXIT": str(code), "FAKE_GATE_OUT": out}

    def run_init(self, code, out="", path=None):
        init = objects([*INIT, "--require", "hopper-cuda13"])[0]["spec"]["initContainers"][0]
        return subprocess.run(init["command"], env=self.env(code, out, path), capture_output=True,
                              text=True, timeout=30)

    def run_plugin(self, code, out="", path=None):
        """The rule as NPD runs it: path and args, no shell of its own; then NPD's reading of
        stdout (trimmed, cut at max_output_length) and of the exit status."""
        config, data = plugin_config([*NPD, "--require", "no-gpu"])
        [rule] = config["rules"]
        plugin = self.tmp / gate.PLUGIN_FILE
        plugin.write_text(data[gate.PLUGIN_FILE])
        self.assertEqual(rule["args"][0], f"{gate.CONFIG_DIR}/{gate.PLUGIN_FILE}")
        done = subprocess.run([rule["path"], str(plugin), *rule["args"][1:]],
                              env=self.env(code, out, path), capture_output=True, text=True,
                              timeout=30)
        message = done.stdout.strip()[:config["pluginConfig"]["max_output_length"]]
        status = {0: "OK", 1: "NonOK"}.get(done.returncode, "Unknown")
        return status, done.returncode, message

    def calls(self):
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def test_the_init_container_passes_the_gates_verdict_but_unjudged_admits(self):
        for code, expected in ((0, 0), (1, 1), (2, 2), (3, 0)):
            with self.subTest(gate_exit=code):
                done = self.run_init(code, f"line for {code}\n")
                self.assertEqual(done.returncode, expected, done.stderr)
                self.assertEqual(done.stdout, f"line for {code}\n")
                self.assertEqual("could not judge" in done.stderr, code == 3, done.stderr)
        self.assertEqual(self.calls()[0], ["gate", "--node=gpu-a", "--require=hopper-cuda13"])

    def test_the_plugin_maps_the_gate_to_npd_and_keeps_its_first_line(self):
        reason = "drain: GPU 1 (NVIDIA H100): case bf16_overflow judged otherwise " + "x" * 140
        cases = (
            (0, "admit: 2 GPUs, 6 cases\n", "OK", "admit: 2 GPUs, 6 cases"),
            (1, reason + "\nsecond line the gate may add\n", "NonOK", reason),
            (3, "unjudged: no index\n", "Unknown", "unjudged: no index"),
            (2, "", "Unknown", "unjudged: pitfall gate exited 2 and said nothing"),
        )
        for code, out, status, message in cases:
            with self.subTest(gate_exit=code):
                got_status, _, got_message = self.run_plugin(code, out)
                self.assertEqual((got_status, got_message), (status, message))
        # The gate's longest line is not cut by NPD.
        self.assertLessEqual(len(reason), gate.MAX_OUTPUT_LENGTH)
        self.assertEqual(self.calls()[0], ["gate", "--node=gpu-a", "--require=no-gpu"])

    def test_a_node_without_pitfall_is_unknown_never_a_problem(self):
        status, code, message = self.run_plugin(0, path="/usr/bin:/bin")
        self.assertEqual((status, code), ("Unknown", 2))
        self.assertEqual(message, "unjudged: pitfall gate exited 127 and said nothing")
        done = self.run_init(0, path="/usr/bin:/bin")
        self.assertEqual(done.returncode, 127)


class BadFlags(unittest.TestCase):
    def assert_refused(self, argv, flag):
        with tempfile.TemporaryDirectory() as tmp:
            out_file = Path(tmp) / "gate.yaml"
            rc, out, err = generate([*argv, "--out", str(out_file)])
            self.assertEqual(rc, 2, f"{argv} was accepted")
            self.assertIn(flag, err)
            self.assertEqual(out, "", "a manifest was printed all the same")
            self.assertEqual(list(Path(tmp).iterdir()), [], "a file was written")

    def test_each_bad_flag_is_exit_2_naming_it_and_writes_nothing(self):
        cases = [
            ([*BASE, "--gate-init"], "--workload-image"),
            ([*INIT, "--gate-npd"], "--gate-npd"),
            ([*INIT, "--claim", "c"], "--claim"),
            ([*INIT, "--nodes", "2"], "--nodes"),
            ([*INIT, "--time", "10"], "--time"),
            ([*INIT, "--scenario", "x"], "--scenario"),
            ([*INIT, "--npd-image", "npd:1"], "--npd-image"),
            ([*NPD, "--gpus", "1"], "--gpus"),
            ([*NPD, "--workload-image", "a:1"], "--workload-image"),
            ([*NPD, "--results-dir", "/r"], "--results-dir"),
            ([*NPD, "--interval", "1", "--time", "2"], "--time"),
            ([*BASE, "--nodes", "2", "--claim", "c", "--require", "gpu"], "--require"),
            ([*BASE, "--nodes", "2", "--claim", "c", "--interval", "5"], "--interval"),
        ]
        for value in [*HOSTILE, "", "a\nb", "hopper cuda13", "x" * 64, "é"]:
            cases.append(([*INIT, f"--require={value}"], "--require"))
        for value in ["gpu-a,gpu-b\n- x", "gpu-a: x", "'gpu-a'", "gpu-a,-x", "{gpu-a}", "GPU-A"]:
            cases.append(([*NPD, f"--nodelist={value}"], "--nodelist"))
            cases.append(([*INIT, f"--nodelist={value}"], "--nodelist"))
        for value in ["a b:1", "reg/app:1\nkind: Secret", ""]:
            cases.append(([*BASE, "--gate-init", f"--workload-image={value}"], "--workload-image"))
            cases.append(([*NPD, f"--npd-image={value}"], "--npd-image"))
        for value in ["a\nb", "\x00", ""]:
            cases.append(([*INIT, f"--workload-command={value}"], "--workload-command"))
        for value in ["nvidia.com/gpu.present", "a=b=c", "a b=c", "=x", "k=v: x", "-k=v",
                      "k=-v-", "k={v}", "a/b/c=d", "x" * 64 + "=v", ""]:
            cases.append(([*NPD, f"--node-label={value}"], "--node-label"))
        for value in ["0", "soon", "1:60", "99999999999", "٣", ""]:
            cases.append(([*NPD, f"--interval={value}"], "--interval"))
            cases.append(([*NPD, f"--time={value}"], "--time"))
        for value in ["Nvidia", "nv_idia", "-x", "a\nb"]:
            cases.append(([*NPD, f"--runtime-class={value}"], "--runtime-class"))
        for value in ["Gate", "-gate", "a: b"]:
            cases.append(([*NPD, f"--name={value}"], "--name"))
            cases.append(([*INIT, f"--namespace={value}"], "--namespace"))
        for argv, flag in cases:
            with self.subTest(argv=argv):
                self.assert_refused(argv, flag)

    def test_the_job_still_needs_its_nodes_and_volume(self):
        self.assert_refused([*BASE, "--claim", "c"], "--nodes")
        self.assert_refused([*BASE, "--nodes", "2"], "--claim")


class Output(unittest.TestCase):
    def test_out_writes_the_npd_manifest_atomically(self):
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "gate.yaml"
            target.write_text("old\n")
            _, printed, _ = generate(NPD)
            rc, stdout, err = generate([*NPD, "--out", str(target)])
            self.assertEqual((rc, stdout, err), (0, "", ""))
            self.assertEqual(target.read_text(), printed)
            self.assertEqual(printed.count("\n---\n"), 4)
            self.assertEqual([p.name for p in Path(tmp).iterdir()], ["gate.yaml"])

    def test_it_runs_as_a_script(self):
        done = subprocess.run([sys.executable, str(GENERATOR), "manifest", *INIT, "--format",
                               "json"], capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout)["kind"], "Pod")
        done = subprocess.run([sys.executable, str(GENERATOR), "manifest", *NPD, "--gpus", "2"],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual((done.returncode, done.stdout), (2, ""))
        self.assertIn("--gpus", done.stderr)


if __name__ == "__main__":
    unittest.main()
