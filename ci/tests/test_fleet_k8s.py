"""Tests of tools/pitfall_drivers/schedulers/kubernetes.py, the Kubernetes Indexed Job of
`pitfall fleet manifest --engine kubernetes`: the manifest against Kubernetes' own API schemas
(kubernetes-validate, offline), what it asks for, its node script run for real by /bin/sh
against a stand-in `pitfall` that records its arguments, hostile flag values, and bad flags.

Environment: PITFALL_K8S_VALIDATE (the folder ci/setup.sh installs kubernetes-validate and its
dependencies into; default .tools/k8s-validate). Without it the schema tests say SKIP, except
under CI=true, where they fail.
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

ROOT = Path(__file__).resolve().parents[2]
# The manifest as a script: the fleet driver's launcher, `pitfall fleet manifest` without pitfall.
GENERATOR = ROOT / "tools" / "pitfall-fleet"
VALIDATOR_DIR = Path(os.environ.get("PITFALL_K8S_VALIDATE", ROOT / ".tools" / "k8s-validate"))
# The newest Kubernetes the validator has schemas for, and the oldest docs/kubernetes.md
# supports: backoffLimitPerIndex is stable from 1.33.
KUBERNETES_VERSIONS = ("1.37.0", "1.33.0")

sys.path.insert(0, str(ROOT / "tools"))
from pitfall_drivers.schedulers import kubernetes as fleet_k8s  # noqa: E402

BASE = ["--engine", "kubernetes", "--image", "registry.example/pitfall:0.1"]


def load_validator():
    """kubernetes_validate.utils and yaml from the folder ci/setup.sh fills, or None."""
    if VALIDATOR_DIR.is_dir() and str(VALIDATOR_DIR) not in sys.path:
        sys.path.insert(0, str(VALIDATOR_DIR))
    try:
        import kubernetes_validate.utils as kv
        import yaml
    except ImportError:
        return None
    return kv, yaml


VALIDATOR = load_validator()


def require_validator(test: unittest.TestCase):
    if VALIDATOR is not None:
        return VALIDATOR
    reason = f"kubernetes-validate not importable from {VALIDATOR_DIR} (ci/setup.sh installs it)"
    if os.environ.get("CI") == "true":
        test.fail(reason)
    print(f"SKIP: {reason}")
    test.skipTest(reason)


def generate(*flags):
    """(exit status, stdout, stderr) of main() over BASE + flags."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = fleet_k8s.main([*BASE, *flags])
    return rc, out.getvalue(), err.getvalue()


def manifest(*flags):
    rc, out, err = generate("--format", "json", *flags)
    assert rc == 0, err
    return json.loads(out)


def pod_spec(doc):
    return doc["spec"]["template"]["spec"]


def script_of(doc):
    command = pod_spec(doc)["containers"][0]["command"]
    assert command[:2] == ["/bin/sh", "-c"], command
    return command[2]


class ManifestSchema(unittest.TestCase):
    FLAG_SETS = (
        ("--nodes", "4", "--claim", "fleet-results"),
        ("--nodelist", "gpu-a,gpu-b.rack2,gpu-c", "--host-path", "/mnt/fleet", "--gpus", "8",
         "--namespace", "gpu-tests", "--name", "nightly-fleet", "--results-dir", "/data/out",
         "--time", "1-02:03:04", "--scenario", "version_mismatch", "--backend", "cuda",
         "--variant", "ok,segv", "--label", "quick"),
    )

    def test_the_manifest_validates_against_the_kubernetes_job_schema_in_yaml_and_json(self):
        kv, yaml = require_validator(self)
        for flags in self.FLAG_SETS:
            rc, text, err = generate(*flags)
            self.assertEqual(rc, 0, err)
            from_yaml = yaml.safe_load(text)
            self.assertEqual(from_yaml, manifest(*flags), "YAML and JSON say different things")
            for version in KUBERNETES_VERSIONS:
                with self.subTest(flags=flags, version=version):
                    # strict: a field the schema does not know is an error, as the API
                    # server's strict field validation makes it.
                    kv.validate(from_yaml, version, strict=True)

    def test_the_validator_rejects_a_manifest_that_is_wrong(self):
        # The check above means something only if this one can fail.
        kv, _ = require_validator(self)
        doc = manifest("--nodes", "2", "--claim", "fleet-results")
        doc["spec"]["completions"] = "2"
        with self.assertRaises(kv.ValidationError):
            kv.validate(doc, KUBERNETES_VERSIONS[0], strict=True)
        doc = manifest("--nodes", "2", "--claim", "fleet-results")
        pod_spec(doc)["containers"][0]["resource"] = {}
        with self.assertRaises(kv.ValidationError):
            kv.validate(doc, KUBERNETES_VERSIONS[0], strict=True)


class ManifestContent(unittest.TestCase):
    def test_any_n_nodes_one_pod_each_on_gpu_nodes_with_the_claim(self):
        doc = manifest("--nodes", "5", "--gpus", "2", "--claim", "fleet-results")
        self.assertEqual((doc["apiVersion"], doc["kind"]), ("batch/v1", "Job"))
        self.assertEqual(doc["metadata"], {"name": "pitfall-fleet", "namespace": "default",
                                           "labels": doc["spec"]["template"]["metadata"]["labels"]})
        job = doc["spec"]
        self.assertEqual((job["completionMode"], job["completions"], job["parallelism"]),
                         ("Indexed", 5, 5))
        self.assertEqual(job["backoffLimitPerIndex"], 0)
        self.assertNotIn("backoffLimit", job)
        self.assertNotIn("activeDeadlineSeconds", job)
        pod = pod_spec(doc)
        self.assertEqual(pod["restartPolicy"], "Never")
        # The anti-affinity selects this Job's own pods, by the labels the template gives them.
        anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(anti, [{"labelSelector": {"matchLabels": job["template"]["metadata"]["labels"]},
                                 "topologyKey": "kubernetes.io/hostname"}])
        self.assertEqual(job["template"]["metadata"]["labels"]["app.kubernetes.io/instance"],
                         "pitfall-fleet")
        self.assertNotIn("nodeAffinity", pod["affinity"])
        self.assertIn({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                      pod["tolerations"])
        container = pod["containers"][0]
        self.assertEqual(container["image"], "registry.example/pitfall:0.1")
        self.assertEqual(container["resources"], {"limits": {"nvidia.com/gpu": 2}})
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
        self.assertEqual(env, {"NODE_NAME": "spec.nodeName", "JOB_COMPLETION_INDEX":
                               "metadata.annotations['batch.kubernetes.io/job-completion-index']"})
        self.assertEqual(container["volumeMounts"], [{"name": "results", "mountPath": "/results"}])
        self.assertEqual(pod["volumes"], [{"name": "results",
                                           "persistentVolumeClaim": {"claimName": "fleet-results"}}])

    def test_a_nodelist_pins_the_pods_to_those_nodes_and_the_filters_reach_pitfall_run(self):
        doc = manifest("--nodelist", "gpu-a,gpu-b", "--host-path", "/mnt/fleet", "--name", "f1",
                       "--namespace", "lab", "--time", "90", "--results-dir", "/out/",
                       "--scenario", "tf32_matmul_precision", "--backend", "cuda", "--label", "quick",
                       "--label", "slow")
        self.assertEqual((doc["spec"]["completions"], doc["spec"]["parallelism"]), (2, 2))
        self.assertEqual(doc["spec"]["activeDeadlineSeconds"], 90 * 60)
        self.assertEqual(doc["metadata"]["namespace"], "lab")
        pod = pod_spec(doc)
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(terms["nodeSelectorTerms"], [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-a", "gpu-b"]}]}])
        self.assertEqual(pod["volumes"], [{"name": "results",
                                           "hostPath": {"path": "/mnt/fleet", "type": "Directory"}}])
        self.assertEqual(pod["containers"][0]["volumeMounts"][0]["mountPath"], "/out")
        self.assertIn("pitfall run --out \"$node_dir/run\" --scenario=tf32_matmul_precision "
                      "--backend=cuda --label=quick --label=slow\n", script_of(doc))

    def test_slurm_time_forms_become_seconds(self):
        for text, seconds in (("30", 1800), ("5:30", 330), ("02:00:00", 7200), ("1-0", 86400),
                              ("2-03", 2 * 86400 + 3 * 3600), ("1-02:03", 86400 + 7200 + 180),
                              ("0-00:00:01", 1), ("1-02:03:04", 93784)):
            with self.subTest(time=text):
                self.assertEqual(fleet_k8s.parse_time(text), seconds)


FAKE_PITFALL = """\
#!{python}
# Stands in for pitfall: records its arguments, answers doctor with a JSON object and makes the
# run folder with a marker in it; exit statuses from the environment.
import json, os, sys
with open(os.environ["FAKE_PITFALL_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "doctor":
    print(json.dumps({{"schema": "pitfall.doctor/1", "headline": "stand-in"}}))
    sys.exit(int(os.environ.get("FAKE_DOCTOR_EXIT", "0")))
if sys.argv[1] == "run":
    out = sys.argv[sys.argv.index("--out") + 1]
    os.makedirs(out)
    with open(os.path.join(out, "marker"), "w") as f:
        f.write("run folder\\n")
    sys.exit(int(os.environ.get("FAKE_RUN_EXIT", "0")))
sys.exit(99)
"""


class NodeScript(unittest.TestCase):
    """The container's script, run by /bin/sh in a temporary folder standing for the volume."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="pitfall-fleet-k8s-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(self.tmp)], check=False)
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        fake = bin_dir / "pitfall"
        fake.write_text(FAKE_PITFALL.format(python=sys.executable))
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        self.path = f"{bin_dir}:/usr/bin:/bin"
        self.log = self.tmp / "argv.jsonl"
        self.cwd = self.tmp / "cwd"
        self.cwd.mkdir()

    def run_script(self, doc, node="gpu-a", index="3", doctor_exit=0, run_exit=0):
        env = {"PATH": self.path, "NODE_NAME": node, "JOB_COMPLETION_INDEX": index,
               "FAKE_PITFALL_LOG": str(self.log), "FAKE_DOCTOR_EXIT": str(doctor_exit),
               "FAKE_RUN_EXIT": str(run_exit)}
        return subprocess.run(["/bin/sh", "-c", script_of(doc)], env=env, cwd=self.cwd,
                              capture_output=True, text=True, timeout=30)

    def calls(self):
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def test_a_node_gets_doctor_json_its_run_folder_and_node_json(self):
        results = self.tmp / "results"
        results.mkdir()
        doc = manifest("--nodes", "2", "--claim", "c", "--name", "night", "--results-dir",
                       str(results), "--scenario", "version_mismatch")
        done = self.run_script(doc)
        self.assertEqual(done.returncode, 0, done.stderr)
        node_dir = results / "nodes" / "gpu-a"
        self.assertEqual(json.loads((node_dir / "doctor.json").read_text())["headline"], "stand-in")
        self.assertTrue((node_dir / "run" / "marker").is_file())
        node = json.loads((node_dir / "node.json").read_text())
        self.assertEqual({k: node[k] for k in ("schema", "node", "engine", "job_id", "outcome",
                                               "run_exit", "doctor_exit")},
                         {"schema": "pitfall.fleet-node/1", "node": "gpu-a", "engine": "kubernetes",
                          "job_id": "night-3", "outcome": "ran", "run_exit": 0, "doctor_exit": 0})
        for stamp in ("started_at", "ended_at"):
            self.assertRegex(node[stamp], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertLessEqual(node["started_at"], node["ended_at"])
        # No temporary file is left beside the records.
        self.assertEqual(sorted(p.name for p in node_dir.iterdir()), ["doctor.json", "node.json", "run"])
        self.assertEqual(self.calls(), [["doctor", "--json"],
                                        ["run", "--out", str(node_dir / "run"),
                                         "--scenario=version_mismatch"]])

    def test_exit_statuses_are_recorded_and_the_pod_exits_with_the_runs(self):
        for doctor_exit, run_exit, outcome in ((1, 1, "ran"), (0, 2, "run_failed"), (2, 0, "ran")):
            with self.subTest(doctor_exit=doctor_exit, run_exit=run_exit):
                results = Path(tempfile.mkdtemp(dir=self.tmp))
                doc = manifest("--nodes", "1", "--claim", "c", "--results-dir", str(results))
                done = self.run_script(doc, doctor_exit=doctor_exit, run_exit=run_exit)
                self.assertEqual(done.returncode, run_exit, done.stderr)
                node = json.loads((results / "nodes" / "gpu-a" / "node.json").read_text())
                self.assertEqual((node["outcome"], node["run_exit"], node["doctor_exit"]),
                                 (outcome, run_exit, doctor_exit))

    def test_hostile_values_reach_pitfall_as_plain_arguments_and_run_nothing(self):
        # Every shell metacharacter that could end a quote, start a command or expand.
        hostile = ["x'; touch pwned-1; '", 'y"; touch pwned-2; "', "$(touch pwned-3)",
                   "`touch pwned-4`", "a b\\c;|&><*?~{}[]!#%^", "--out=/tmp/elsewhere"]
        results = self.tmp / "it's $(touch pwned-5) \"res\" `x`"
        results.mkdir()
        flags = ["--nodes", "1", "--host-path", "/mnt/x; touch pwned-6", "--results-dir", str(results)]
        for value in hostile:
            # --flag=value: argparse takes a value that starts with "--" only so.
            flags += [f"--scenario={value}", f"--label={value}"]
        doc = manifest(*flags)
        done = self.run_script(doc)
        self.assertEqual(done.returncode, 0, done.stderr)
        run_dir = results / "nodes" / "gpu-a" / "run"
        expected_run = ["run", "--out", str(run_dir)]
        for value in hostile:
            expected_run += [f"--scenario={value}"]
        for value in hostile:
            expected_run += [f"--label={value}"]
        self.assertEqual(self.calls()[1], expected_run)
        self.assertTrue((run_dir / "marker").is_file())
        self.assertEqual(list(self.tmp.rglob("pwned*")), [], "a value ran as a command")
        # The same values in YAML mean the same.
        if VALIDATOR is not None:
            _, yaml = VALIDATOR
            rc, text, err = generate(*flags)
            self.assertEqual(rc, 0, err)
            self.assertEqual(yaml.safe_load(text), doc)

    def test_a_node_name_that_is_no_node_name_is_refused_before_anything_is_written(self):
        results = self.tmp / "results"
        results.mkdir()
        doc = manifest("--nodes", "1", "--claim", "c", "--results-dir", str(results))
        for node in ("../escape", "", "a/b", "..", "UPPER", "x$(touch pwned)"):
            with self.subTest(node=node):
                done = self.run_script(doc, node=node)
                self.assertEqual(done.returncode, 2)
                self.assertIn("is not a node name", done.stderr)
        done = self.run_script(doc, index="1; touch pwned")
        self.assertEqual(done.returncode, 2)
        self.assertIn("is not an index", done.stderr)
        self.assertEqual(list(results.iterdir()), [])
        self.assertFalse(self.log.exists(), "pitfall ran")
        self.assertEqual(list(self.tmp.rglob("pwned*")), [])


class BadFlags(unittest.TestCase):
    GOOD = ["--nodes", "2", "--claim", "fleet-results"]

    def assert_refused(self, argv, flag):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = fleet_k8s.main(argv)
        self.assertEqual(rc, 2, f"{argv} was accepted")
        self.assertIn(flag, err.getvalue())
        self.assertEqual(out.getvalue(), "", "a manifest was printed all the same")

    def test_each_bad_flag_is_exit_2_naming_it(self):
        cases = [
            (["--engine", "slurm", "--image", "i", *self.GOOD], "--engine"),
            (["--image", "i", *self.GOOD], "--engine"),
            (["--engine", "kubernetes", *self.GOOD], "--image"),
            ([*BASE, "--claim", "c"], "--nodes"),
            ([*BASE, "--nodes", "2", "--nodelist", "a,b", "--claim", "c"], "--nodelist"),
            ([*BASE, "--nodes", "2"], "--claim"),
            ([*BASE, *self.GOOD, "--host-path", "/mnt"], "--host-path"),
            ([*BASE, *self.GOOD, "--format", "xml"], "--format"),
            ([*BASE, *self.GOOD, "--bogus"], "--bogus"),
        ]
        bad_values = [
            ("--image", ""), ("--image", "reg/pitfall:1\nrm -rf /"), ("--image", "a b"),
            ("--nodes", "0"), ("--nodes", "-1"), ("--nodes", "2.5"), ("--nodes", "100001"),
            ("--nodelist", "gpu-a,,gpu-b"), ("--nodelist", "GPU_A"), ("--nodelist", "gpu-a,gpu-a"),
            ("--nodelist", "gpu-a\ngpu-b"), ("--nodelist", "../x"),
            ("--gpus", "0"), ("--gpus", "x"),
            ("--name", "Pitfall"), ("--name", "a" * 64), ("--name", "fleet.1"), ("--name", "-x"),
            ("--namespace", "ns_1"), ("--namespace", ""),
            ("--results-dir", "results"), ("--results-dir", "/"), ("--results-dir", "/a/../b"),
            ("--results-dir", "/a\nb"),
            ("--time", "0"), ("--time", "1:2:3:4"), ("--time", "1-24"), ("--time", "1:60:00"),
            ("--time", "5:60"), ("--time", "soon"), ("--time", ""),
            ("--scenario", ""), ("--scenario", "a\nb"), ("--variant", "ok,,segv"),
            ("--label", "a\x00b"), ("--backend", "rocm"), ("--backend", "cpu,"),
            ("--out", ""),
        ]
        for flag, value in bad_values:
            argv = [*BASE, *self.GOOD, flag, value]
            if flag in ("--nodes", "--nodelist"):
                argv = [*BASE, "--claim", "c", flag, value]
            cases.append((argv, flag))
        cases.append(([*BASE, "--nodes", "1", "--host-path", "relative/dir"], "--host-path"))
        cases.append(([*BASE, "--nodes", "1", "--claim", "Claim_1"], "--claim"))
        for argv, flag in cases:
            with self.subTest(argv=argv):
                self.assert_refused(argv, flag)


class Output(unittest.TestCase):
    def test_out_writes_the_file_atomically_and_replaces_an_old_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "fleet.yaml"
            target.write_text("old\n")
            rc, printed, err = generate("--nodes", "3", "--claim", "c")
            self.assertEqual(rc, 0, err)
            rc, stdout, err = generate("--nodes", "3", "--claim", "c", "--out", str(target))
            self.assertEqual((rc, stdout, err), (0, "", ""))
            self.assertEqual(target.read_text(), printed)
            self.assertEqual([p.name for p in Path(tmp).iterdir()], ["fleet.yaml"])

    def test_an_out_that_cannot_be_written_is_exit_2_naming_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = Path(tmp) / "no-such-folder" / "fleet.yaml"
            rc, stdout, err = generate("--nodes", "3", "--claim", "c", "--out", str(missing))
            self.assertEqual(rc, 2)
            self.assertIn("--out", err)
            self.assertIn(str(missing), err)
            self.assertEqual(list(Path(tmp).iterdir()), [])

    def test_it_runs_as_a_script(self):
        done = subprocess.run([sys.executable, str(GENERATOR), "manifest", *BASE, "--nodes", "2", "--claim", "c",
                               "--format", "json"], capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout)["spec"]["completions"], 2)
        done = subprocess.run([sys.executable, str(GENERATOR), "manifest", "--engine", "slurm"],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 2)
        self.assertIn("--engine", done.stderr)


if __name__ == "__main__":
    unittest.main()
