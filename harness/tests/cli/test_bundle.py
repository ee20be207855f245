"""`pitfall bundle RUN [--out FILE]`: a real run folder (the fixture scenario, run with a secret
in its environment and a library named like cuDNN preloaded) bundled, listed with `tar -tzf`,
extracted and read: every item there or said missing, the secret nowhere in any file (binary
included), the run folder's copy still a run `pitfall report` reads. Bad input: no such run, a
file instead of a run, a run folder holding a symbolic link (which pitfall never makes), an
unwritable --out, an unknown flag, a tar that fails: exit 2 and nothing left behind.

Run by CTest like test_cli.py (PITFALL_BIN, PITFALL_FIXTURE_INDEX).
"""
import hashlib
import json
import re
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import unittest
import urllib.parse

from test_cli import BIN, INDEX, schema_validator

SECRET = "planted-secret-4711"
HOSTILE_NAME = "-rf --checkpoint-action=exec=touch PWNED\nx.log"


def real_libz():
    """A real shared library to copy under a cuDNN-like name (any system has zlib)."""
    for path in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1",
                 "/lib/aarch64-linux-gnu/libz.so.1", "/usr/lib64/libz.so.1", "/lib64/libz.so.1"):
        if os.path.exists(path):
            return os.path.realpath(path)
    return ""


class BundleCommand(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN, "run through CTest: PITFALL_BIN unset")
        self.tmp = tempfile.mkdtemp(prefix="pitfall-bundle-test-")
        self.scratch = os.path.join(self.tmp, "scratch")  # TMPDIR: the staging must go
        os.mkdir(self.scratch)
        self.work = os.path.join(self.tmp, "work")  # the working folder: default bundles go here
        os.mkdir(self.work)
        self.env = dict(os.environ, MY_API_TOKEN=SECRET, TMPDIR=self.scratch,
                        PITFALL_PROBE_CACHE="off")
        self.fake_cudnn = ""
        libz = real_libz()
        if libz:
            libs = os.path.join(self.tmp, "libs")
            os.mkdir(libs)
            shutil.copy(libz, os.path.join(libs, "libcudnn.so.9.1.0"))
            os.symlink("libcudnn.so.9.1.0", os.path.join(libs, "libcudnn.so.9"))
            self.fake_cudnn = os.path.join(libs, "libcudnn.so.9")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def pitfall(self, *args, env=None, cwd=None):
        return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120,
                              env=env or self.env, cwd=cwd or self.work)

    def make_run(self):
        """A run of two fixture cases, every process with the secret in its environment and the
        fake cuDNN preloaded; then the secret planted where a run folder may hold it."""
        expected = os.path.join(self.tmp, "expected")
        os.makedirs(expected, exist_ok=True)
        run = os.path.join(self.tmp, "run")
        env = dict(self.env)
        if self.fake_cudnn:
            env["LD_PRELOAD"] = self.fake_cudnn
        p = self.pitfall("run", "--index", INDEX, "--expected", expected, "--backend", "cpu",
                         "--variant", "ok,unsupported", "--samples", "1", "--out", run, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # A case that printed its environment, and a fingerprint that recorded the variable.
        with open(os.path.join(run, "logs", "cpu.harness_fixture.ok.log"), "a") as f:
            f.write(f"MY_API_TOKEN={SECRET}\n")
        with open(os.path.join(run, "fingerprint.json")) as f:
            fingerprint = json.load(f)
        fingerprint["environment"]["MY_API_TOKEN"] = SECRET
        with open(os.path.join(run, "fingerprint.json"), "w") as f:
            json.dump(fingerprint, f)
        # Names and kinds a run folder should not hold but may: each must not break the bundle.
        with open(os.path.join(run, "logs", HOSTILE_NAME), "wb") as f:
            f.write(b"\xff\xfe binary " + SECRET.encode() + b"\x00 end")
        os.mkfifo(os.path.join(run, "logs", "a-fifo"))
        return run

    def extract(self, archive):
        out = os.path.join(self.tmp, "extracted")
        shutil.rmtree(out, ignore_errors=True)
        os.mkdir(out)
        subprocess.run(["tar", "-xzf", archive, "-C", out], check=True)
        (root,) = os.listdir(out)
        return os.path.join(out, root)

    def assert_nothing_left(self, folder):
        self.assertEqual([n for n in os.listdir(folder) if ".tmp." in n or n.endswith(".tar.gz")],
                         [], "no partial archive")
        self.assertEqual(os.listdir(self.scratch), [], "no staging folder left")

    def test_bundle_holds_the_run_and_the_machine_and_no_secret(self):
        run = self.make_run()
        p = self.pitfall("bundle", run)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        archive = os.path.join(self.work, "run-bundle.tar.gz")  # the working folder, not the runs'
        self.assertIn("bundle: run-bundle.tar.gz", p.stdout)
        listed = subprocess.run(["tar", "-tzf", archive], capture_output=True, text=True,
                                check=True).stdout.splitlines()
        for member in ("run-bundle/bundle.json", "run-bundle/README.txt",
                       "run-bundle/doctor.json", "run-bundle/fingerprint.json",
                       "run-bundle/loaded_libraries.json", "run-bundle/environment.txt",
                       "run-bundle/run/results.jsonl", "run-bundle/run/fingerprint.json",
                       "run-bundle/run/logs/cpu.harness_fixture.ok.log"):
            self.assertIn(member, listed)
        self.assertEqual([m for m in listed if "a-fifo" in m], [],
                         "a FIFO is listed as missing, never opened")
        root = self.extract(archive)
        self.assertTrue(os.path.isfile(os.path.join(root, "run", "logs", HOSTILE_NAME)))
        for where in (self.tmp, run, os.getcwd()):
            self.assertFalse(os.path.exists(os.path.join(where, "PWNED")))

        # The secret is nowhere: every file's bytes, whatever it holds.
        for folder, _, files in os.walk(root):
            for name in files:
                with open(os.path.join(folder, name), "rb") as f:
                    self.assertNotIn(SECRET.encode(), f.read(), os.path.join(folder, name))
        with open(os.path.join(root, "environment.txt")) as f:
            self.assertNotIn("MY_API_TOKEN", f.read())  # not on the allow-list: not carried

        with open(os.path.join(root, "bundle.json")) as f:
            index = json.load(f)
        self.assertEqual(index["schema"], "pitfall.bundle/1")
        schema_validator("bundle.schema.json").validate(index)
        states = {i["file"]: i for i in index["items"]}
        for item in ("doctor.json", "fingerprint.json", "loaded_libraries.json",
                     "environment.txt"):
            self.assertEqual(states[item]["state"], "included", states[item])
        for item in ("kernel-messages.txt", "nvidia-smi-q.txt", "nvidia-bug-report.log.gz"):
            self.assertIn(states[item]["state"], ("included", "truncated", "missing", "failed"))
            if states[item]["state"] != "included":
                self.assertTrue(states[item]["why"], states[item])
        self.assertEqual(states["run/logs/a-fifo"]["state"], "missing")
        self.assertIn("run/logs/cpu.harness_fixture.ok.log", index["redaction"]["files_changed"])
        with open(os.path.join(root, "README.txt")) as f:
            self.assertIn("What is not here, and why:", f.read())
        with open(os.path.join(root, "doctor.json")) as f:
            self.assertIn("headline", json.load(f))

        # The copy is still a run: its results.jsonl chain reads.
        r = self.pitfall("report", os.path.join(root, "run"), "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        if self.fake_cudnn:
            with open(os.path.join(root, "loaded_libraries.json")) as f:
                libraries = json.load(f)
            cudnn = [l for l in libraries["libraries"] if l["name"] == "libcudnn"]
            self.assertEqual(len(cudnn), 1, libraries)
            self.assertEqual(cudnn[0]["version"], "9.1.0")
            self.assertEqual(cudnn[0]["cases"], 2)
            # A CUDA build's fixture maps libcudart too: the report's own list, by name.
            reported = [l for l in json.loads(r.stdout)["loaded_libraries"] if l["name"] == "libcudnn"]
            self.assertEqual([l["version"] for l in reported], ["9.1.0"])
        self.assertEqual(os.listdir(self.scratch), [], "the staging folder is removed")

    def test_out_names_the_archive(self):
        run = self.make_run()
        out = os.path.join(self.tmp, "issue-1234.tar.gz")
        p = self.pitfall("bundle", run, "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(tarfile.is_tarfile(out))
        self.assertFalse(os.path.exists(os.path.join(self.work, "run-bundle.tar.gz")))
        # A run folder whose name tar could take for an option: the archive's top folder, and
        # the default archive's name, are a name pitfall made of it.
        odd = os.path.join(self.tmp, "-odd name\tx")
        shutil.copytree(run, odd, ignore=shutil.ignore_patterns("a-fifo"))
        p = self.pitfall("bundle", odd)
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = subprocess.run(["tar", "-tzf", os.path.join(self.work, "run-odd_name_x-bundle.tar.gz")],
                                capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertIn("run-odd_name_x-bundle/run/results.jsonl", listed)

    def test_secrets_of_every_kind_and_form_are_nowhere_in_the_bundle(self):
        # In the environment: a secret-named variable whose value HTML, JSON and URLs escape,
        # and variables named like nothing secret that hold secrets of well-known shapes.
        tricky = "s3cr&t\"<val>'42/x y"
        planted_env = {
            "MY_API_TOKEN": tricky,
            "GITHUB_PAT": "ghp_" + "a1B2c3D4e5" * 4,
            "HF_AUTH": "hf_" + "Zy9Xw8Vu7T" * 3,
            "PIP_INDEX_URL": "https://builder:pip-pass-0001@pypi.example.com/simple",
            "https_proxy": "http://proxyuser:proxy-pass-0002@proxy.example.com:3128",
            "DATABASE_URL": "postgres://svc:db-pass-0003@db.example.com:5432/app",
            "AWS_ACCESS_KEY_ID": "AKIA" + "QWERTYUIOPASDFGH",
            "SLACK_HOOK": "xoxb-" + "1234567890-abcdefghij",
            "GITLAB": "glpat-" + "Abcdefghij0123456789",
        }
        self.env.update(planted_env)
        self.env["PITFALL_TEST_TOKEN"] = "short"  # under 6 bytes: redacted by name only
        run = self.make_run()
        raw = [tricky, planted_env["GITHUB_PAT"], planted_env["HF_AUTH"], "pip-pass-0001",
               "proxy-pass-0002", "db-pass-0003", planted_env["AWS_ACCESS_KEY_ID"],
               planted_env["SLACK_HOOK"], planted_env["GITLAB"], "MIIEpAIBAAKCAQEA0planted"]
        html = tricky.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
        forms = {"raw": tricky, "html": html.replace("'", "&#39;"), "xml": html.replace("'", "&apos;"),
                 "json": json.dumps(tricky)[1:-1], "url": urllib.parse.quote(tricky, safe=""),
                 "url-lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                                     urllib.parse.quote(tricky, safe=""))}
        key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0planted\n-----END RSA PRIVATE KEY-----\n"
        headers = "Authorization: Bearer hdr-secret-0004\nCookie: sid=cookie-secret-0005\n"
        raw += ["hdr-secret-0004", "cookie-secret-0005"]
        # In a case's output and log, in the reports (as they escape it) and in a reason.
        with open(os.path.join(run, "logs", "cpu.harness_fixture.ok.log"), "a") as f:
            f.write("".join(f"{name}={value}\n" for name, value in planted_env.items()))
            f.write(key + headers + " ".join(forms.values()) + "\n")
        # Each secret as a file would carry it: the tricky value in every form, each other
        # one whole (a URL with its password, a header, a key block), never a bare password.
        carried = " ".join(v for k, v in planted_env.items() if k != "MY_API_TOKEN")
        for report in ("report.html", "junit.xml", "summary.md", "report.json"):
            with open(os.path.join(run, report), "a") as f:
                f.write(" ".join(forms.values()) + " " + carried + "\n" + key + headers)
        results = os.path.join(run, "results.jsonl")
        with open(results, encoding="utf-8") as f:
            lines = [json.loads(l) for l in f if l.strip()]
        lines[-1]["reason"] = f"failed with {tricky} at {planted_env['PIP_INDEX_URL']}"
        written = []
        for i, record in enumerate(lines):  # chained again, as pitfall would have written it
            if i > 0:
                record["prev"] = hashlib.sha256(written[-1].encode()).hexdigest()
            written.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
        with open(results, "w", encoding="utf-8") as f:
            f.write("\n".join(written) + "\n")

        p = self.pitfall("bundle", run, "--out", os.path.join(self.tmp, "b.tar.gz"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        root = self.extract(os.path.join(self.tmp, "b.tar.gz"))
        needles = {f"raw {v}": v for v in raw}
        needles.update({f"{k} form": v for k, v in forms.items()})
        for folder, _, files in os.walk(root):
            for name in files:
                with open(os.path.join(folder, name), "rb") as f:
                    data = f.read()
                for what, needle in needles.items():
                    self.assertNotIn(needle.encode(), data, f"{what} in {os.path.join(folder, name)}")
        with open(os.path.join(root, "environment.txt"), encoding="utf-8") as f:
            environment = f.read()
        for name in planted_env:
            if name != "MY_API_TOKEN":
                self.assertNotIn(name + "=", environment)  # not on the allow-list: not carried
        self.assertNotIn("MY_API_TOKEN", environment)
        self.assertIn("more variables not carried", environment)
        # A secret-named variable that is carried (a PITFALL_ one) is redacted whatever it holds.
        self.assertIn("PITFALL_TEST_TOKEN=[redacted]\n", environment)
        self.assertIn("PITFALL_PROBE_CACHE=off\n", environment)  # an allowed one, as it is
        # What surrounds a shape is kept: the host of each URL, the header's name.
        with open(os.path.join(root, "run", "logs", "cpu.harness_fixture.ok.log"), encoding="utf-8") as f:
            log = f.read()
        self.assertIn("https://[redacted]@pypi.example.com/simple", log)
        self.assertIn("Authorization: [redacted]", log)
        r = self.pitfall("report", os.path.join(root, "run"), "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_default_never_puts_a_bundle_among_the_runs(self):
        run = self.make_run()
        runs = os.path.dirname(run)
        for cwd in (runs, run, os.path.join(run, "logs")):
            before = sorted(os.listdir(runs))
            p = self.pitfall("bundle", run, cwd=cwd)
            self.assertEqual(p.returncode, 2, f"{cwd}: {p.stdout} {p.stderr}")
            self.assertIn("among the runs", p.stderr)
            self.assertEqual(sorted(os.listdir(runs)), before)
        # Named with --out, it goes where it is told, even there.
        p = self.pitfall("bundle", run, "--out", "b.tar.gz", cwd=runs)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(tarfile.is_tarfile(os.path.join(runs, "b.tar.gz")))

    def test_bad_input_is_exit_2_with_nothing_written(self):
        run = self.make_run()
        plain_file = os.path.join(self.tmp, "plain.txt")
        with open(plain_file, "w") as f:
            f.write("not a run\n")
        not_a_run = os.path.join(self.tmp, "empty-folder")
        os.mkdir(not_a_run)
        linked = os.path.join(self.tmp, "linked-run")
        shutil.copytree(run, linked, ignore=shutil.ignore_patterns("a-fifo"))
        os.symlink("/etc/passwd", os.path.join(linked, "logs", "passwd-link"))
        for args, says in (
                (["bundle", linked], "a symbolic link inside a run folder"),
                (["bundle", os.path.join(self.tmp, "no-such-run")], "no such run folder"),
                (["bundle", plain_file], "not a run folder"),
                (["bundle", not_a_run], "not a run folder"),
                (["bundle", run, "--out", "/proc/pitfall-bundle.tar.gz"], "--out"),
                (["bundle", run, "--out", os.path.join(self.tmp, "no-dir", "b.tar.gz")], "--out"),
                (["bundle", run, "--out", self.tmp], "a folder"),
                (["bundle", run, "--frobnicate"], "--frobnicate"),
                (["bundle", run, "--out", ""], "an empty value"),
                (["bundle"], "one run folder"),
                (["bundle", run, run], "one run folder")):
            p = self.pitfall(*args)
            self.assertEqual(p.returncode, 2, f"{args}: {p.stdout} {p.stderr}")
            self.assertIn(says, p.stderr, args)
            self.assert_nothing_left(self.tmp)

    def test_a_failing_tar_leaves_no_partial_file(self):
        # A read-only folder (for a user other than root) or a full one: here, tar itself fails
        # on a --out in a folder that stops being writable after the checks, emulated by a
        # PATH whose tar always fails.
        run = self.make_run()
        bin_dir = os.path.join(self.tmp, "bin")
        os.mkdir(bin_dir)
        fake_tar = os.path.join(bin_dir, "tar")
        with open(fake_tar, "w") as f:
            f.write("#!/bin/sh\necho 'tar: write error: No space left on device' >&2\nexit 2\n")
        os.chmod(fake_tar, stat.S_IRWXU)
        env = dict(self.env, PATH=bin_dir + ":" + os.environ.get("PATH", ""))
        p = self.pitfall("bundle", run, env=env)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("No space left on device", p.stderr)
        self.assert_nothing_left(self.tmp)


if __name__ == "__main__":
    unittest.main()
