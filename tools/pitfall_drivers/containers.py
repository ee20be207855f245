"""The container engine (podman, or docker) and the matrix cells' images: a debootstrap'd Debian
base imported as an image, NVIDIA's wheels downloaded on the host, and one image per entry of
ci/matrix.json's images built from containers/cell.Containerfile, tagged by a hash of its inputs
and reused until they change. Everything under the cache folder (--cache); every removal there
confirmed to lie inside it first."""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from . import TREE
from .cli import BadInput
from .files import write_atomically
from .matrix_file import wheel_specs

# The cell's in-container script holds the log reader both sides use (stdlib only, importable).
sys.path.insert(0, str(TREE / "containers"))
from cell_entry import first_error  # noqa: E402

CONTAINERFILE = TREE / "containers" / "cell.Containerfile"
DEBIAN_MIRROR = "http://deb.debian.org/debian"


class Engine:
    """podman (runc, explicit ulimits, storage under the cache) or docker; --dry-run prints."""

    def __init__(self, name: str, cache: Path, dry_run: bool):
        self.name, self.cache, self.dry_run = name, cache, dry_run
        self.env = dict(os.environ)
        if shutil.which(name) is None:
            if dry_run:
                return
            raise BadInput(f"--engine {name}: '{name}' is not on PATH (`ci/setup.sh --matrix` installs podman)")
        if name == "podman":
            # crun refuses this VM's mixed cgroup v1/v2 hierarchy and root lacks CAP_SYS_RESOURCE
            # for podman's default ulimits: runc and explicit ulimits (containers/README.md).
            conf_dir = cache / "engine"
            conf = conf_dir / "containers.conf"
            storage = conf_dir / "storage.conf"
            self.env.update(CONTAINERS_CONF=str(conf), CONTAINERS_STORAGE_CONF=str(storage))
            if dry_run:
                return  # reads the images podman has; writes nothing
            _write_if_changed(conf, '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                              '[engine]\nruntime = "runc"\n')
            _write_if_changed(storage, f'[storage]\ndriver = "overlay"\ngraphroot = "{cache}/storage"\n'
                              f'runroot = "{cache}/run"\n')

    def cmd(self, *args: str) -> list[str]:
        return [self.name, *args]

    def has_image(self, ref: str) -> bool:
        if shutil.which(self.name) is None or not Path(self.env.get("CONTAINERS_CONF", "/")).exists():
            return False
        return subprocess.run(self.cmd("image", "inspect", ref), env=self.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0

    def image_id(self, ref: str) -> str:
        """The image's content id: the same for a rebuild whose every layer came from the cache
        (a comment changed in the Containerfile), unlike its tag."""
        if self.dry_run or shutil.which(self.name) is None:
            return ref
        r = subprocess.run(self.cmd("image", "inspect", "--format", "{{.Id}}", ref), env=self.env,
                           capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else ref

    def run_logged(self, argv: list[str], log: Path, stdin=None) -> int:
        """Runs argv with its output in `log`; --dry-run prints it instead and answers 0."""
        if self.dry_run:
            print("  $ " + " ".join(shlex.quote(a) for a in argv))
            return 0
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(("$ " + " ".join(shlex.quote(a) for a in argv) + "\n").encode())
            out.flush()
            return subprocess.run(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, stdin=stdin).returncode


def remove_inside(path: Path, root: Path) -> None:
    """shutil.rmtree(path), once path is confirmed to lie inside root (after resolving links):
    a name from data never deletes anything outside the folder it names a part of."""
    top = root.resolve()
    # A link is removed as a link (what it points at is left alone), where the link itself lies.
    resolved = path.parent.resolve() / path.name if path.is_symlink() else path.resolve()
    if resolved == top or top not in resolved.parents:
        raise BadInput(f"{path}: resolves to {resolved}, outside {top}: not removed")
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)


def log_tail(log: Path, lines: int = 12) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---- images ------------------------------------------------------------------------------


def base_ref(image: dict) -> str:
    base = image["base"]
    return f"localhost/pitfall-base:{base['debootstrap']}" if "debootstrap" in base else base["image"]


def ensure_base(engine: Engine, image: dict, log: Path) -> str | None:
    """A debootstrap'd Debian suite imported as an image (no registry needed); None when it
    worked, else the error."""
    base = image["base"]
    if "debootstrap" not in base:
        return None  # pulled by the build from its registry
    ref = base_ref(image)
    if engine.has_image(ref):
        return None
    suite = base["debootstrap"]
    rootfs = engine.cache / "bases" / f"{suite}.rootfs"
    if not engine.dry_run and not (rootfs / "usr" / "bin" / "apt-get").exists():
        remove_inside(rootfs, engine.cache)
        if shutil.which("debootstrap") is None:
            return "debootstrap is not on PATH (`ci/setup.sh --matrix` installs it)"
    if engine.dry_run or not (rootfs / "usr" / "bin" / "apt-get").exists():
        print(f"  base {suite}: debootstrap --variant=minbase (about a minute)", flush=True)
        rc = engine.run_logged(["debootstrap", "--variant=minbase", suite, str(rootfs), DEBIAN_MIRROR], log)
        if rc != 0:
            return f"debootstrap {suite} failed (exit {rc}): {first_error(log_tail(log, 40))}"
    if engine.dry_run:
        print(f"  $ tar -C {rootfs} -c . | {engine.name} import - {ref}")
        return None
    for cache_dir in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for f in (rootfs / cache_dir).glob("*"):
            if f.is_file():
                f.unlink()
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    rc = engine.run_logged(engine.cmd("import", "-", ref), log, stdin=tar.stdout)
    tar.stdout.close()
    if tar.wait() != 0 or rc != 0:
        return f"importing {suite} failed: {first_error(log_tail(log))}"
    remove_inside(rootfs, engine.cache)  # the image holds it now
    return None


def image_inputs(name: str, image: dict) -> dict:
    """Everything an image is made from; its hash tags the image."""
    return {"name": name, "containerfile": CONTAINERFILE.read_text(), "base": base_ref(image),
            "apt_components": image.get("apt_components", "main"), "apt_packages": image["apt_packages"],
            "wheels": image.get("wheels", {}), "cudnn_mix": image.get("cudnn_mix", ""),
            "wheel_toolkit": image.get("wheel_toolkit", "")}


def image_ref(name: str, image: dict) -> str:
    digest = hashlib.sha256(json.dumps(image_inputs(name, image), sort_keys=True).encode()).hexdigest()[:16]
    return f"localhost/pitfall-cell-{name.lower()}:{digest}"


def fetch_wheels(engine: Engine, image: dict, context: Path, log: Path) -> str | None:
    """Downloads the image's wheels into the cache (once) and lays them out in the build context."""
    wheel_cache = engine.cache / "wheels"
    (context / "wheels").mkdir(parents=True, exist_ok=True)
    lines = []
    for prefix, spec in wheel_specs(image):
        package, version = spec.split("==", 1)
        stem = package.replace("-", "_") + "-" + version + "-"
        found = sorted(wheel_cache.glob(stem + "*.whl"))
        if not found:
            argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--platform", "manylinux_2_27_x86_64", "--platform", "manylinux_2_17_x86_64",
                    "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64",
                    "--python-version", "3.11", "-d", str(wheel_cache), spec]
            print(f"  wheel {spec}: downloading", flush=True)
            if engine.run_logged(argv, log) != 0:
                return f"pip download {spec} failed: {first_error(log_tail(log))}"
            found = sorted(wheel_cache.glob(stem + "*.whl"))
            if not found and not engine.dry_run:
                return f"pip download {spec} left no wheel named {stem}*.whl"
        if found:
            target = context / "wheels" / found[0].name
            if not target.exists():
                os.link(found[0], target) if found[0].stat().st_dev == context.stat().st_dev else shutil.copy(found[0], target)
            lines.append(f"{prefix} {found[0].name}")
    (context / "wheels" / "prefixes.txt").write_text("".join(l + "\n" for l in lines))
    return None


def ensure_image(engine: Engine, name: str, image: dict, log: Path) -> tuple[str, str | None, bool]:
    """(reference, error or None, built now)."""
    ref = image_ref(name, image)
    if engine.has_image(ref):
        return ref, None, False
    error = ensure_base(engine, image, log)
    if error:
        return ref, error, False
    context = engine.cache / "contexts" / name
    if not engine.dry_run:
        remove_inside(context, engine.cache)
        context.mkdir(parents=True)
        error = fetch_wheels(engine, image, context, log)
        if error:
            return ref, error, False
        shutil.copy(CONTAINERFILE, context / "Containerfile")
    base = image["base"]
    args = {"BASE_IMAGE": base_ref(image), "DEBIAN_SUITE": base.get("debootstrap", ""),
            "APT_COMPONENTS": image.get("apt_components", "main"), "APT_PACKAGES": " ".join(image["apt_packages"]),
            "CUDNN_MIX": image.get("cudnn_mix", ""), "WHEEL_TOOLKIT": image.get("wheel_toolkit", "")}
    argv = engine.cmd("build", "-f", str(context / "Containerfile"), "-t", ref)
    if engine.name == "podman":
        argv += ["--format", "docker"]  # an OCI image ignores SHELL, and the RUN steps need bash
    for k, v in args.items():
        argv += ["--build-arg", f"{k}={v}"]
    argv.append(str(context))
    print(f"  image {name}: building {ref} (a Debian toolkit image took 5-10 minutes here; log {log})", flush=True)
    rc = engine.run_logged(argv, log)
    if rc != 0:
        return ref, f"{engine.name} build failed (exit {rc}): {first_error(log_tail(log, 60))}", True
    return ref, None, True
