"""A real Slurm cluster on this machine for the fleet tests: munged, slurmctld and one slurmd per
node, all Debian's packages (slurmctld, slurmd, munge, slurm-client), in a temporary folder with
their own ports, state and logs.

Slurm's own OCI container support is configured too (oci.conf with runc), so that `srun
--container=<bundle>` runs a job step in a real container: `host_bundle()` makes a bundle whose
root is read-only and whose folders are this machine's, bound in.

Several slurmd share the machine, each under its own node name (`slurmd -N`, with its own port
in slurm.conf). A node can be made to differ as a real node does: its slurmd (and so every job
it starts) runs in a mount namespace of its own where the system library folder has the CUDA
toolkit's stub libcuda.so as libcuda.so.1, as on a node whose image was built with the stubs
on its library path. Each node has one "gpu" GRES backed by a device file of its own (a copy of
/dev/null's device numbers), so --gres gpu:1 is asked for and granted as on a GPU cluster.

For `pitfall gate` (test_gate_slurm.py) a cluster can have a Prolog, a HealthCheckProgram with
its interval and node states, SchedulerParameters, node weights (which idle node a job lands on
first) and a short credential lifetime (how long a requeued job waits); a node's slurmd can be
started again with or without the stub (`restart_node`), as a node fixed and rebooted.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel", "runc")
# Where this machine's libcuda.so.1 would be (Debian's multiarch folder), and the toolkit's stub.
# A Slurm unpacked elsewhere than /usr (on a GPU host with no Slurm package) is told by
# PITFALL_SLURM_PLUGIN_DIR (its plugins) and PITFALL_SLURMSTEPD; a host whose driver lives in
# another folder by PITFALL_DRIVER_LIB_DIR; another stub by PITFALL_CUDA_STUB.
SYSTEM_LIBS = Path(os.environ.get("PITFALL_DRIVER_LIB_DIR", "/usr/lib/x86_64-linux-gnu"))
CUDA_STUB = Path(os.environ.get("PITFALL_CUDA_STUB", "/usr/local/cuda/lib64/stubs/libcuda.so"))
PLUGIN_DIR = os.environ.get("PITFALL_SLURM_PLUGIN_DIR", "")
SLURMSTEPD = os.environ.get("PITFALL_SLURMSTEPD", "")


def missing_tools() -> list[str]:
    return [t for t in DAEMONS if shutil.which(t) is None and not Path("/usr/sbin", t).exists()]


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on now (bound once by the kernel's choice, then released)."""
    socks, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class LocalSlurm:
    """`prolog`, `health_check_program` (with `health_check_interval` seconds and
    `health_check_node_state`) and `scheduler_parameters` become the slurm.conf lines of the same
    names; `weights` gives nodes a Weight= (Slurm allocates the lowest weight first), so a test can
    say which idle node a job lands on first; `cred_expire` (AuthInfo, 120 s by default) is also
    how long a requeued job waits before it may start again."""

    def __init__(self, nodes: list[str], stub_driver_nodes: tuple[str, ...] = (), *, prolog: str = "",
                 health_check_program: str = "", health_check_interval: int = 0,
                 health_check_node_state: str = "", scheduler_parameters: tuple[str, ...] = (),
                 weights: dict[str, int] | None = None, cred_expire: int = 0):
        self.nodes = nodes
        self.stub_driver_nodes = set(stub_driver_nodes)
        self.gate_conf = {
            "Prolog": prolog, "HealthCheckProgram": health_check_program,
            "HealthCheckInterval": str(health_check_interval) if health_check_program else "",
            "HealthCheckNodeState": health_check_node_state,
            "SchedulerParameters": ",".join(scheduler_parameters)}
        self.weights = weights or {}
        self.cred_expire = cred_expire
        self.root = Path(tempfile.mkdtemp(prefix="pitfall-slurm-"))
        self.env = dict(os.environ, SLURM_CONF=str(self.root / "slurm.conf"))
        self.started = False

    # -- life cycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 60, wait_for: list[str] | None = None) -> None:
        """Daemons started; then the nodes of `wait_for` (all by default) waited for until idle,
        resumed by hand where one registers down. A node a health check may drain at its slurmd's
        start is left out of `wait_for`: resuming it by hand would hide what the check did."""
        r = self.root
        for sub in ("munge", "state", "log", "dev", "stub"):
            (r / sub).mkdir(mode=0o755)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (r / "munge").chmod(0o700)
        self._run(["munged", "--force", f"--socket={r / 'munge' / 'socket'}", f"--key-file={key}",
                   f"--log-file={r / 'log' / 'munged.log'}", f"--pid-file={r / 'munge' / 'munged.pid'}",
                   f"--seed-file={r / 'munge' / 'seed'}"])
        ctld_port, *node_ports = free_ports(1 + len(self.nodes))
        conf = [
            "ClusterName=pitfalltest", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={ctld_port}",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={r / 'munge' / 'socket'}" + (f",cred_expire={self.cred_expire}" if self.cred_expire else ""),
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}/%n", f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'spool'}/slurmd-%n.pid", f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log'}/slurmd-%n.log",
            # No cgroups (the machine mixes v1 and v2) and no accounting daemon: the fleet falls
            # back from sacct to scontrol, which keeps finished jobs MinJobAge seconds.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "MpiDefault=none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
            "MinJobAge=600", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5", "GresTypes=gpu",
            # A client gives up on an absent controller after MessageTimeout: short, so that the
            # controller-restart test outlasts it in seconds, not minutes.
            "MessageTimeout=5",
            *([f"PluginDir={PLUGIN_DIR}"] if PLUGIN_DIR else []),
            *(f"{key}={value}" for key, value in self.gate_conf.items() if value),
        ]
        gres = []
        for name, port in zip(self.nodes, node_ports):
            (r / "spool" / name).mkdir(parents=True)
            device = r / "dev" / f"{name}-nvidia0"
            try:
                os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))
            except PermissionError:  # a container without CAP_MKNOD: its GPU's own device file
                device = Path("/dev/nvidia0")
            conf.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=2 "
                        f"RealMemory=1000 Gres=gpu:1 State=UNKNOWN"
                        + (f" Weight={self.weights[name]}" if name in self.weights else ""))
            gres.append(f"NodeName={name} Name=gpu File={device}")
        conf.append(f"PartitionName=gpu Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP "
                    "OverSubscribe=EXCLUSIVE")
        (r / "slurm.conf").write_text("\n".join(conf) + "\n")
        # oci.conf(5): how slurmstepd starts, queries and ends a step's container; the fields
        # name the container after node, user, job, step and task.
        runc = f"runc --root={r / 'runc'}"
        name = "%n.%u.%j.%s.%t"
        (r / "oci.conf").write_text(
            f'RunTimeQuery="{runc} state {name}"\nRunTimeKill="{runc} kill -a {name}"\n'
            f'RunTimeDelete="{runc} delete --force {name}"\nRunTimeRun="{runc} run {name} -b %b"\n')
        (r / "gres.conf").write_text("\n".join(gres) + "\n")
        # On a cgroup v2 host slurmd would ask systemd (over D-Bus) for a scope; a test cluster
        # has no systemd to ask (cgroup.conf(5), IgnoreSystemd). Hybrid v1 hosts ignore this.
        (r / "cgroup.conf").write_text("IgnoreSystemd=yes\n")
        shutil.copy(CUDA_STUB, r / "stub" / "libcuda.so.1")
        self._run(["slurmctld", "-i"])
        self.started = True
        for name in self.nodes:
            self.start_node(name)
        self.wait_idle(self.nodes if wait_for is None else wait_for, timeout)

    def start_node(self, name: str) -> None:
        if name in self.stub_driver_nodes:
            # The node's own view of the system library folder: an overlay with the stub on top.
            lower = f"{self.root / 'stub'}:{SYSTEM_LIBS}"
            self._run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       f"mount -t overlay overlay -o lowerdir={lower} {SYSTEM_LIBS} && exec "
                       + " ".join(self._slurmd(name))])
        else:
            self._run(self._slurmd(name))

    def restart_node(self, name: str, stub_driver: bool) -> None:
        """The node's slurmd ended and started again, with or without the stub driver: as a node
        whose image was fixed and rebooted. Its state in slurmctld is left as it was."""
        self._kill_pidfile(self.root / "spool" / f"slurmd-{name}.pid")
        if stub_driver:
            self.stub_driver_nodes.add(name)
        else:
            self.stub_driver_nodes.discard(name)
        self.start_node(name)

    @staticmethod
    def _slurmd(name: str) -> list[str]:
        return ["slurmd", "-N", name] + (["-d", SLURMSTEPD] if SLURMSTEPD else [])

    def stop_node(self, name: str, reason: str) -> None:
        """The node taken out as an administrator does: marked down with a reason, slurmd ended."""
        self.scontrol("update", f"NodeName={name}", "State=DOWN", f"Reason={reason}")
        self._kill_pidfile(self.root / "spool" / f"slurmd-{name}.pid")

    def stop_controller(self) -> None:
        """slurmctld stopped (its state saved in StateSaveLocation); start_controller brings it
        back with the jobs and nodes as they were."""
        self._kill_pidfile(self.root / "slurmctld.pid")

    def start_controller(self) -> None:
        self._run(["slurmctld"])

    def wait_idle(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = self.node_states()
            if all(states.get(n) == "idle" for n in names):
                return
            for n in names:  # a node registering for the first time may come up as unknown or down
                if states.get(n, "").rstrip("*") in ("down", "unknown", "drained", "inval"):
                    self.scontrol("update", f"NodeName={n}", "State=RESUME", check=False)
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not idle after {timeout:.0f} s: {states}\n{self.logs()}")
            time.sleep(0.5)

    def node_states(self) -> dict[str, str]:
        p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env, capture_output=True, text=True)
        return dict(line.split() for line in p.stdout.splitlines() if len(line.split()) == 2)

    def stop(self) -> None:
        if self.started:
            subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True)
            for pid_file in sorted((self.root / "spool").glob("slurmd-*.pid")):
                self._kill_pidfile(pid_file)
            self._kill_pidfile(self.root / "slurmctld.pid")
        self._kill_pidfile(self.root / "munge" / "munged.pid")
        shutil.rmtree(self.root, ignore_errors=True)

    def host_bundle(self, needed_paths=()) -> Path:
        """An OCI bundle (runtime-spec config.json + rootfs) whose root file system is empty and
        read-only, with this machine's system folders bound in, and the top folder of each of
        `needed_paths` (the checkout, the build, the results folder: a clone may live under any
        top folder, so none is assumed): a container that sees the same files, in namespaces of
        its own (pid 1 is the step's command). Nothing in it says "container" but
        what Slurm sets (SLURM_CONTAINER)."""
        bundle = self.root / "bundle"
        (bundle / "rootfs").mkdir(parents=True)
        subprocess.run(["runc", "spec"], cwd=bundle, check=True, capture_output=True)
        config = json.loads((bundle / "config.json").read_text())
        config["root"] = {"path": "rootfs", "readonly": True}
        config["process"]["terminal"] = False
        config["linux"]["namespaces"] = [n for n in config["linux"]["namespaces"]
                                         if n["type"] in ("pid", "mount", "ipc", "uts")]
        folders = ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/tmp", "/opt", "/root", "/var"]
        for path in needed_paths:
            parts = Path(path).resolve().parts
            if len(parts) > 1 and "/" + parts[1] not in folders:
                folders.append("/" + parts[1])
        for folder in folders:
            if Path(folder).exists():
                (bundle / "rootfs" / folder.lstrip("/")).mkdir(exist_ok=True)
                config["mounts"].append({"destination": folder, "type": "bind", "source": folder,
                                         "options": ["rbind", "rw"]})
        (bundle / "config.json").write_text(json.dumps(config, indent=1))
        return bundle

    # -- helpers ---------------------------------------------------------------------------------

    def scontrol(self, *args: str, check: bool = True) -> str:
        p = subprocess.run(["scontrol", *args], env=self.env, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"scontrol {' '.join(args)}: {p.stderr}")
        return p.stdout

    def logs(self) -> str:
        out = []
        for log in sorted((self.root / "log").glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-8:]
            out.append(f"== {log.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def _run(self, argv: list[str]) -> None:
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr}\n{self.logs()}")

    @staticmethod
    def _kill_pidfile(path: Path, wait: float = 10) -> None:
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
