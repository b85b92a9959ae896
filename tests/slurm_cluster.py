"""A one-node SLURM cluster on this host, for the tests that go through a real scheduler.

    def test_x(slurm_cluster): ...      # session-scoped; skips with one line where it cannot start

Debian's slurm-wlm (slurmctld, slurmd) and munge, installed with apt-get when missing (root only;
`make test-deps` does it before `make test`). Everything else is private to the fixture: its own
slurm.conf (this host's name, `nproc` cores, RealMemory from /proc/meminfo; auth/munge,
proctrack/linuxproc, task/none, select/cons_tres, no accounting), its own munge key and socket,
free ports, state and logs under a temp dir, and SLURM_CONF pointing at it for this process and
every subprocess. So /etc/slurm is never touched and two pytest workers (or two engineers on one
machine) each get their own cluster. At the end it cancels its jobs and stops exactly the three
daemons it started.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from polling import wait_until

PACKAGES = ["slurm-wlm", "munge"]
PARTITION = "cluster"  # prime-rl's SlurmConfig default partition name
PARKED = "parked"  # a DOWN partition: its jobs wait
SELFTEST = "si-selftest-"  # jobs named so are the double-submission check's own test: not counted
START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _missing_tools() -> list[str]:
    return [t for t in ("slurmctld", "slurmd", "munged", "sbatch") if shutil.which(t) is None
            and not Path("/usr/sbin", t).exists()]


def _install() -> str | None:
    """apt-get install the packages when a tool is missing; the reason it could not, or None."""
    if not _missing_tools():
        return None
    if os.geteuid() != 0:
        return f"SLURM is not installed ({', '.join(_missing_tools())} missing) and installing it needs root"
    if shutil.which("apt-get") is None:
        return "SLURM is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *PACKAGES]):
        r = subprocess.run(argv, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            return f"`{' '.join(argv)}` failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
    return None if not _missing_tools() else f"still missing after apt-get: {', '.join(_missing_tools())}"


def _sbin(tool: str) -> str:
    return shutil.which(tool) or str(Path("/usr/sbin", tool))


def _real_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(int(line.split()[1]) / 1024 * 0.9)  # under the real size, or slurmd drains the node
    return 1024


def slurm_conf(root: Path, host: str, cpus: int, memory_mb: int, munge_socket: Path) -> str:
    return "\n".join([
        "ClusterName=selfimprove-test",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge",
        # cred_expire also sets how long a requeued job waits before it may start again (default 120 s):
        # the node-DOWN test's requeue then waits ~30 s, not ~2 min
        f"AuthInfo=socket={munge_socket},cred_expire=30",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none", "MpiDefault=none", "SchedulerType=sched/backfill",
        "ReturnToService=2", "MinJobAge=7200",  # every job of the suite stays known: the double-submission count
         "KillWait=5", "InactiveLimit=0", "SlurmctldTimeout=30",
        "SlurmdTimeout=60", "OverTimeLimit=0",
        f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/slurmctld.log", f"SlurmdLogFile={root}/slurmd.log",
        "SlurmctldDebug=info", "SlurmdDebug=info",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        # Jobs submitted here stay PENDING (reason PartitionDown) and cost no CPU: the kill-point tests
        # use it; `scontrol update partitionname=parked state=up` lets them run.
        f"PartitionName={PARKED} Nodes={host} Default=NO MaxTime=INFINITE State=DOWN",
        "",
    ])


class SlurmCluster:
    """The running cluster: its host (node) name, conf path, partition, and helpers the tests use."""

    def __init__(self, root: Path, host: str) -> None:
        self.root, self.host, self.partition, self.parked = root, host, PARTITION, PARKED
        self.conf = root / "slurm.conf"
        self.procs: list[subprocess.Popen] = []
        self.argv: list[list[str]] = []  # each daemon's command line, in start order (munged, slurmctld, slurmd)

    def _spawn(self, argv: list[str]) -> subprocess.Popen:
        out = open(self.root / f"{Path(argv[0]).name}.stdout", "ab")
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "SLURM_CONF": str(self.conf)}, start_new_session=True)

    def stop_controller(self) -> None:
        """Stop slurmctld (a controller outage): jobs go on running on slurmd; squeue and scontrol fail."""
        ctld = self.procs[1]
        ctld.terminate()
        ctld.wait(timeout=30)

    def start_controller(self, timeout: float = 60.0) -> None:
        """Start slurmctld again from its saved state (the jobs it knew come back), once squeue answers."""
        self.procs[1] = self._spawn(self.argv[1])
        ok = wait_until(lambda: subprocess.run(["squeue", "-h"], capture_output=True,
                                               env={**os.environ, "SLURM_CONF": str(self.conf)}).returncode == 0,
                        timeout, poll=0.5)
        assert ok, f"slurmctld did not answer within {timeout} s of its restart:\n{self.logs()}"

    def run(self, *argv: str, check: bool = True) -> str:
        r = subprocess.run(list(argv), capture_output=True, text=True, env={**os.environ, "SLURM_CONF": str(self.conf)})
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: rc {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-n", self.host, "-o", "%T", check=False).strip()

    def jobs(self, name: str | None = None) -> list[tuple[str, str, str]]:
        """(id, name, state) of every job the controller still knows, optionally one name only."""
        out = self.run("squeue", "-h", "-a", "-t", "all", "-o", "%i|%j|%T", *(["-n", name] if name else []))
        return [tuple(ln.split("|", 2)) for ln in out.splitlines() if ln.strip()]  # type: ignore[misc]

    def double_submissions(self, include_selftest: bool = False) -> list[str]:
        """Jobs submitted under a name while an earlier job of that name was still live (pending, running,
        requeued): what "never twice" forbids. Read from `scontrol show job` over every job of the session."""
        from selfimprove.engines import slurm

        jobs: dict[str, list[tuple[str, str, str, str]]] = {}
        for line in self.run("scontrol", "-o", "show", "job", check=False).splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "JobId" in f:
                state = f.get("JobState", "")
                end = "9999" if state in slurm.LIVE_STATES else f.get("EndTime", "9999")
                jobs.setdefault(f.get("JobName", ""), []).append((f.get("SubmitTime", ""), end, f["JobId"], state))
        doubles = []
        for name, runs in jobs.items():
            if name.startswith(SELFTEST) and not include_selftest:
                continue
            runs.sort()
            for (_s0, end0, id0, _st0), (sub1, _e1, id1, _st1) in zip(runs, runs[1:]):
                if sub1 < end0:  # ISO times compare as strings
                    doubles.append(f"{name}: job {id1} submitted while job {id0} was live")
        return doubles

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                         for p in (self.root / "slurmctld.log", self.root / "slurmd.log") if p.exists())

    def stop(self) -> None:
        if self.procs:
            for partition in (self.partition, self.parked):  # only this cluster's jobs (SLURM_CONF)
                self.run("scancel", "-p", partition, check=False)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and any(s in ("RUNNING", "COMPLETING") for _, _, s in self.jobs_safe()):
                time.sleep(0.5)
        for proc in reversed(self.procs):  # slurmd, slurmctld, munged: exactly what start() began
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    def jobs_safe(self) -> list[tuple[str, str, str]]:
        try:
            return self.jobs()
        except RuntimeError:
            return []


def start_cluster() -> tuple[SlurmCluster | None, str | None]:
    """(cluster, None) once `sinfo` shows the node idle, else (None, why it could not start)."""
    if os.geteuid() != 0:
        return None, "the one-node SLURM cluster needs root (slurmd runs jobs as their users)"
    why = _install()
    if why:
        return None, why
    host = socket.gethostname().split(".")[0]
    root = Path(tempfile.mkdtemp(prefix="si-slurm-"))
    for d in ("state", "spool", "munge"):
        (root / d).mkdir()
    os.chmod(root, 0o755)
    cluster = SlurmCluster(root, host)
    key, sock = root / "munge" / "munge.key", root / "munge" / "munge.sock"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    os.chmod(root / "munge", 0o700)
    cluster.conf.write_text(slurm_conf(root, host, os.cpu_count() or 1, _real_memory_mb(), sock))
    daemons = [
        [_sbin("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
         f"--pid-file={root}/munge/munged.pid", f"--log-file={root}/munge/munged.log", f"--seed-file={root}/munge/seed"],
        [_sbin("slurmctld"), "-D", "-i", "-f", str(cluster.conf)],
        [_sbin("slurmd"), "-D", "-f", str(cluster.conf), "-N", host],
    ]
    cluster.argv = daemons
    try:
        for argv in daemons:
            cluster.procs.append(cluster._spawn(argv))
            if argv[0].endswith("munged"):
                wait_until(lambda: sock.exists(), 10)
        if not wait_until(lambda: cluster.node_state() == "idle", START_TIMEOUT_S, poll=0.3):
            state = cluster.node_state() or "not known"
            cluster.stop()
            return None, f"the one-node SLURM cluster did not become idle in {START_TIMEOUT_S:.0f} s (node {state}; logs in {root})"
    except (OSError, RuntimeError) as e:
        cluster.stop()
        return None, f"the one-node SLURM cluster could not start: {e}"
    os.environ["SLURM_CONF"] = str(cluster.conf)  # this process and every subprocess talk to it
    return cluster, None


@pytest.fixture(scope="session")
def slurm_cluster():
    cluster, why = start_cluster()
    if cluster is None:
        pytest.skip(why or "the one-node SLURM cluster could not start")
    try:
        yield cluster
        doubles = cluster.double_submissions()  # across every test that used the cluster: the target is 0
        print(f"SLURM double submissions across the suite: {len(doubles)}")
        assert not doubles, doubles
    finally:
        cluster.stop()
        os.environ.pop("SLURM_CONF", None)
        shutil.rmtree(cluster.root, ignore_errors=True)
