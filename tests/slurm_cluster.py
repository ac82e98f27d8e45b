"""A real one-node SLURM cluster for tests, with all its state in one directory.

Debian's `slurm-wlm` and `munge` run as root: munged with its own key and socket, then
slurmctld and slurmd, configured by a slurm.conf in the directory (SLURM_CONF), nothing
under /etc touched. The node fakes one GPU (`Gres=gpu:1`, gres.conf `File=/dev/null`) so
GPU requests (`--gpus=1`) are scheduled as on a cluster.

    with SlurmCluster(tmp_path / "slurm") as cluster:
        subprocess.run(["sbatch", "--wrap", "true"], env=cluster.env())

Points learnt the hard way:

- no accounting database, so `sacct` never sees a job end: status checks must use
  `squeue`, which sees finished jobs for MinJobAge seconds (the Snakemake plugin only
  uses squeue when MinJobAge >= 3 x its first status-check delay);
- DefMemPerCPU (with CR_CPU_Memory) or every job takes the whole node's memory and jobs
  run one at a time;
- the Snakemake plugin's job step strips every SLURM_* variable (SLURM_CONF included)
  before its inner `srun`, so `env()` puts an `srun` wrapper first on PATH that sets it;
- stopping: scancel, SIGTERM the daemons, then kill what is left of this cluster's
  processes (found by this cluster's SLURM_CONF in their environment), never by name.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("slurmctld", "slurmd", "munged")
FAKE_GPU_FILES = ("/dev/null", "/dev/zero")


class SlurmUnavailable(RuntimeError):
    """The SLURM / munge packages are missing and could not be installed."""


def ensure_installed(timeout: int = 600) -> None:
    """Install slurm-wlm and munge with apt-get when a daemon is missing."""
    if all(shutil.which(d) for d in DAEMONS):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SlurmUnavailable("slurmctld/slurmd/munged missing and no root apt-get to install them")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # the packages' own service start is refused in containers (policy-rc.d); it would
    # not matter anyway: nothing here uses the system daemons
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
        try:
            result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(f"{' '.join(cmd)} timed out after {timeout} s") from None
        if result.returncode != 0:
            raise SlurmUnavailable(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr[-2000:]}")
    missing = [d for d in DAEMONS if not shutil.which(d)]
    if missing:
        raise SlurmUnavailable(f"installed {PACKAGES} but {missing} still missing")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SlurmCluster:
    """One controller and one node on this machine, all files under `root`.

    cpus: CPUs the node advertises (may exceed the real count: slurmd takes the
    configured values, `SlurmdParameters=config_overrides`); mem_mb: its memory (not
    enforced: no cgroups); gpus: fake GPUs (device files /dev/null); min_job_age: seconds
    a finished job stays visible to squeue.
    """

    def __init__(
        self,
        root: Path,
        cpus: int = 4,
        mem_mb: int = 16000,
        gpus: int = 1,
        def_mem_per_cpu: int = 1000,
        min_job_age: int = 3600,
        partition: str = "debug",
    ):
        self.root = Path(root)
        self.cpus, self.mem_mb, self.gpus = cpus, mem_mb, gpus
        self.def_mem_per_cpu, self.min_job_age = def_mem_per_cpu, min_job_age
        self.partition = partition
        self.node = socket.gethostname().split(".")[0]
        self.conf = self.root / "etc" / "slurm.conf"
        self.bin = self.root / "bin"
        self.log = self.root / "log"
        self.munge_socket = self.root / "munge" / "munge.socket.2"
        self.procs: dict[str, subprocess.Popen] = {}

    # --- environment for clients -------------------------------------------------------

    def env(self, base: dict | None = None) -> dict:
        """An environment whose SLURM commands talk to this cluster."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        for var in [v for v in env if v.startswith(("SBATCH_", "SRUN_", "SQUEUE_"))]:
            del env[var]
        return env

    def run(self, *cmd: str, check: bool = True, timeout: int = 30) -> subprocess.CompletedProcess:
        result = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr}\n{self.logs()}")
        return result

    # --- set-up ------------------------------------------------------------------------

    def _write_files(self) -> None:
        for sub in ("etc", "bin", "log", "state", "spool", "munge", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses group/world-accessible key and socket directories
        for sub in ("munge", "etc", "state", "spool"):
            os.chmod(self.root / sub, 0o700)
        os.chmod(self.root, 0o755)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        ctld_port, d_port = free_port(), free_port()
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=mlmiatest",
                    f"SlurmctldHost={self.node}(127.0.0.1)",
                    f"SlurmctldPort={ctld_port}",
                    f"SlurmdPort={d_port}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    f"StateSaveLocation={r}/state",
                    f"SlurmdSpoolDir={r}/spool",
                    f"SlurmctldPidFile={r}/run/slurmctld.pid",
                    f"SlurmdPidFile={r}/run/slurmd.pid",
                    f"SlurmctldLogFile={self.log}/slurmctld.log",
                    f"SlurmdLogFile={self.log}/slurmd.log",
                    "SlurmctldDebug=info",
                    "SlurmdDebug=info",
                    f"PlugStackConfig={r}/etc/plugstack.conf",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SwitchType=switch/none",
                    "MpiDefault=none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "JobCompType=jobcomp/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_CPU_Memory",
                    f"DefMemPerCPU={self.def_mem_per_cpu}",
                    # throughput: backfill (every second) starts CPU jobs while GPU jobs
                    # wait for the one GPU (strict FIFO would hold them all back); keep
                    # finished jobs visible to squeue long enough for the status checks
                    "SchedulerType=sched/backfill",
                    "SchedulerParameters=bf_interval=1,bf_continue,bf_resolution=60",
                    f"MinJobAge={self.min_job_age}",
                    "MaxJobCount=100000",
                    "KillWait=5",
                    "CompleteWait=0",
                    "InactiveLimit=0",
                    "ReturnToService=2",
                    "SlurmdParameters=config_overrides",
                    "GresTypes=gpu",
                    f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.mem_mb}"
                    + (f" Gres=gpu:{self.gpus}" if self.gpus else "")
                    + " State=UNKNOWN",
                    f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        (r / "etc" / "plugstack.conf").write_text("")
        # gres.conf sits beside slurm.conf; character devices that exist everywhere stand
        # in for the GPU device files
        if self.gpus > len(FAKE_GPU_FILES):
            raise ValueError(f"at most {len(FAKE_GPU_FILES)} fake GPUs")
        (r / "etc" / "gres.conf").write_text(
            "".join(f"NodeName={self.node} Name=gpu File={f}\n" for f in FAKE_GPU_FILES[: self.gpus])
        )
        # SLURM_CONF is stripped from the plugin's inner srun: a wrapper restores it
        real_srun = shutil.which("srun", path="/usr/local/bin:/usr/bin:/bin")
        wrapper = self.bin / "srun"
        wrapper.write_text(f'#!/bin/sh\nSLURM_CONF="{self.conf}" exec {real_srun} "$@"\n')
        os.chmod(wrapper, 0o755)

    def _spawn(self, name: str, cmd: list[str]) -> None:
        out = open(self.log / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen(
            cmd,
            env=self.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _wait(self, what: str, ready, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}) while waiting for {what}\n{self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}\n{self.logs()}")

    def start(self, timeout: float = 60) -> SlurmCluster:
        self._write_files()
        r = self.root
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={r}/munge/munge.key",
                f"--pid-file={r}/run/munged.pid",
                f"--log-file={self.log}/munged.log",
                f"--seed-file={r}/munge/munged.seed",
                "--num-threads=2",
            ],
        )
        self._wait("munged", self.munge_socket.exists, timeout)
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).returncode == 0, timeout)
        self._spawn("slurmd", ["slurmd", "-D", "-N", self.node, "-f", str(self.conf)])
        self._wait("the node to be idle", self._node_idle, timeout)
        return self

    def dead(self) -> list[str]:
        """Daemons that have exited (something outside killed them, or they crashed)."""
        return [name for name, proc in self.procs.items() if proc.poll() is not None]

    def _node_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip()
        return out.startswith("idle")

    # --- tear-down -----------------------------------------------------------------------

    def _own_pids(self) -> list[int]:
        """Processes of this cluster: their environment names this cluster's SLURM_CONF."""
        marker = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
        return pids

    def stop(self) -> None:
        if not self.procs:
            return
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--full", "--user", "root", check=False)
            time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid in self._own_pids():  # job steps that outlived their daemons
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.procs.clear()

    def __enter__(self) -> SlurmCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- inspection ----------------------------------------------------------------------

    def jobs(self) -> list[dict]:
        """Every job slurmctld still knows (finished ones for MinJobAge seconds), as
        scontrol's fields: JobId, JobState, Comment, TresPerJob, NumCPUs, TimeLimit, ..."""
        out = self.run("scontrol", "show", "job", "--oneliner").stdout
        return [
            {key: value.strip() for key, value in re.findall(r"(\S+?)=(.*?)(?= \S+?=|\s*$)", line)}
            for line in out.splitlines()
            if line.startswith("JobId=")
        ]

    def logs(self, tail: int = 3000) -> str:
        parts = []
        for path in sorted(self.log.glob("*")):
            text = path.read_text(errors="replace")[-tail:]
            parts.append(f"--- {path.name}\n{text}")
        return "\n".join(parts)
