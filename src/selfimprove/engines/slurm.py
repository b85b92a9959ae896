"""SLURM as the job runner sees it: what the scheduler says about one job, found by id or by name.

    job_id = submitted_id(launcher_output)      # "Submitted batch job 123" -> "123"
    ids = live_jobs_named("si-<run id>-iter_0")  # the gap between sbatch and job.json
    info = query("123")                           # squeue, then scontrol show job, then sacct; None = forgotten
    cancel("123", "si-<run id>-iter_0")           # scancel --name NAME -- 123: only if the job still has that name

Only ever a job id this run recorded, or its own unique job name: never a user or a pattern.
The scheduler forgets an ended job after MinJobAge; without accounting (`sacct` fails) the
job is then judged by its files alone, as a local job is.

A scheduler that does not answer (slurmctld down or restarting, squeue missing, a timeout) is not a job
that ended (issue 41: a one-minute outage made the CLI finalize a run INCOMPLETE while its jobs ran on):
`query` then returns a JobInfo of state UNREACHABLE, which counts as live, so nothing is marked failed,
relaunched, or called "nothing to cancel" until the scheduler answers again.
"""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
from dataclasses import dataclass

from ..errors import ConfigError, JobFailed

SUBMITTED = re.compile(r"Submitted batch job (\d+)")
QUERY_TIMEOUT_S = 30.0

# The job holds (or will hold) an allocation: the arm must not get a second one.
# PREEMPTED / REQUEUED: the same job continues (requeued), so the tool waits for it.
LIVE_STATES = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "PREEMPTED", "SPECIAL_EXIT",
})
# What each ended state means for the arm, and the next step (the watcher adds the job id and log; {rerun} is
# job_record.rerun(): the phase command, or `run --run-dir R`, both of which take --restart / --resume).
ENDED_NEXT = {
    "COMPLETED": "the job exited 0 without the final eval file: read its log, fix the cause, then {rerun} with --restart",
    "FAILED": "the job exited non-zero: read its log, fix the cause, then {rerun} with --restart (or --resume)",
    "TIMEOUT": "the job hit its [slurm] time limit: raise it, then {rerun} with --resume (from the last "
               "checkpoint, where one exists) or --restart",
    "CANCELLED": "the job was cancelled (scancel): {rerun} with --resume (where a checkpoint allows) or --restart",
    "OUT_OF_MEMORY": "the job ran out of memory: ask for more (a template with --mem) or use smaller settings, "
                     "then {rerun} with --restart",
    "NODE_FAIL": "the job's node failed: {rerun} with --resume (where a checkpoint allows) or --restart",
    "BOOT_FAIL": "the job's node failed to boot: {rerun} with --restart",
    "DEADLINE": "the job passed its deadline: {rerun} with --resume or --restart",
}
REQUEUED_STATES = frozenset({"PREEMPTED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD"})
UNREACHABLE = "UNREACHABLE"  # not a SLURM state: squeue and scontrol gave no answer (see the module doc)
JOB_ID = re.compile(r"[0-9]+")  # what a job id this tool records looks like (no arrays, never an option)
# The controller answered, and it does not know the job: purged after MinJobAge (not an outage).
_UNKNOWN_JOB = re.compile(r"Invalid job id", re.I)


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str  # the base state, e.g. RUNNING, CANCELLED (the "by 0" of "CANCELLED by 0" dropped)
    reason: str | None  # the scheduler's reason (PENDING: Resources, Priority, JobHeldUser, ...)
    stdout: str | None  # the job's log as the scheduler has it (scontrol StdOut)
    exit_code: str | None  # "rc:signal"
    source: str  # squeue | scontrol | sacct | none (UNREACHABLE)
    name: str | None = None  # the scheduler's JobName: whose job it is (si-<run id>-...)
    restarts: int = 0  # scontrol's Restarts: > 0 once the job was requeued

    @property
    def live(self) -> bool:
        """Holds (or may hold) an allocation: an unreachable scheduler's job counts as live."""
        return self.state in LIVE_STATES or self.state == UNREACHABLE

    @property
    def reachable(self) -> bool:
        return self.state != UNREACHABLE


def available() -> bool:
    return shutil.which("squeue") is not None and shutil.which("sbatch") is not None


CHECK_ENV = "SELFIMPROVE_SLURM_CHECK"  # "0": prepare a run dir off the cluster (the checks below are skipped)


def check_overlay(slurm: dict, where: str) -> None:
    """The overlay's [slurm] values as the scheduler sees them, before a run dir is made (issue 41: a partition
    that does not exist, `time = "abc"` or no sbatch passed bootstrap and failed at iter_0): sbatch and squeue on
    PATH, the partition known to `sinfo`, and `sbatch --test-only` accepting partition, time and account.
    Raises ConfigError in one line naming the file, the key and the fix."""
    import os

    if os.environ.get(CHECK_ENV) == "0":
        return
    skip = f"(to prepare the run dir off the cluster, set {CHECK_ENV}=0)"
    if not available():
        raise ConfigError(f"{where}: sbatch/squeue are not on PATH: run this on a SLURM login node {skip}")
    partition = slurm.get("partition")
    if partition:
        r = _run(["sinfo", "-h", "-o", "%R"])
        if r is None or r.returncode != 0:
            raise ConfigError(f"{where}: cannot reach the scheduler to check slurm.partition (`sinfo`: "
                              f"{(r.stderr.strip().splitlines() or ['no answer'])[-1] if r else 'no answer'}); "
                              f"retry once `sinfo` answers {skip}")
        known = sorted({p.strip() for p in r.stdout.split()})
        if str(partition) not in known:
            raise ConfigError(f"{where}: slurm.partition {partition!r} is not a partition of this cluster (sinfo "
                              f"lists: {', '.join(known) or 'none'}); set one of those")
    argv = ["sbatch", "--test-only", "--job-name=si-check", "--wrap=true"]
    for key, flag in (("partition", "--partition"), ("time", "--time"), ("account", "--account")):
        if slurm.get(key):
            argv.append(f"{flag}={slurm[key]}")
    r = _run(argv)
    if r is None:
        raise ConfigError(f"{where}: `sbatch --test-only` gave no answer; retry once the scheduler answers {skip}")
    if r.returncode != 0:
        said = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ["(nothing)"])[-1]
        key = "slurm.time" if "time" in said.lower() else "slurm.account" if "account" in said.lower() else "[slurm]"
        raise ConfigError(f"{where}: the scheduler refuses {key} ({' '.join(argv[2:])}): {said}; fix {key}")


def _run(argv: list[str]) -> subprocess.CompletedProcess | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None


def submitted_id(text: str) -> str | None:
    """The job id of the last `Submitted batch job N` line in `text`."""
    found = SUBMITTED.findall(text)
    return found[-1] if found else None


def live_jobs_named(name: str) -> list[str] | None:
    """Ids of this user's jobs named exactly `name` that the scheduler still holds (pending, running, ...);
    None when the scheduler does not answer (never read as "no such job")."""
    r = _run(["squeue", "-h", "-n", name, "-u", getpass.getuser(), "-t", "all", "-o", "%i|%j|%T"])
    if r is None or r.returncode != 0:
        return None
    ids = []
    for line in r.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[1] == name and parts[2] in LIVE_STATES:
            ids.append(parts[0])
    return ids


_NO_ANSWER = object()  # a query the scheduler did not answer (see `query`)


def _answered(r: subprocess.CompletedProcess | None) -> bool:
    """The controller answered: rc 0, or its "Invalid job id" (it does not know the job)."""
    return r is not None and (r.returncode == 0 or bool(_UNKNOWN_JOB.search(r.stderr or "")))


def _scontrol(job_id: str):
    r = _run(["scontrol", "show", "job", "-o", job_id])
    if not _answered(r):
        return _NO_ANSWER
    if r.returncode != 0 or "JobId=" not in r.stdout:
        return None
    # JobName may hold spaces: it is read up to the next " Key=" (scontrol -o prints one line of Key=Value)
    name = re.search(r"\bJobName=(.*?)(?= \w+=|$)", r.stdout)
    fields = dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", r.stdout))
    reason = fields.get("Reason")
    return JobInfo(job_id, fields.get("JobState", "UNKNOWN"), None if reason in (None, "None") else reason,
                   fields.get("StdOut") or None, fields.get("ExitCode"), "scontrol", name.group(1) if name else None,
                   int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else 0)


def _squeue(job_id: str):
    r = _run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%i|%T|%r|%j"])
    if not _answered(r):
        return _NO_ANSWER
    for line in r.stdout.splitlines() if r.returncode == 0 else []:
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[0] == job_id:
            reason = parts[2] if parts[2] not in ("", "None", "(null)") else None
            return JobInfo(job_id, parts[1], reason, None, None, "squeue", parts[3])
    return None


def _sacct(job_id: str) -> JobInfo | None:
    r = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "JobID,State,ExitCode,JobName"])
    if r is None or r.returncode != 0:  # no accounting storage: the job is judged by its files
        return None
    for line in r.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[0] == job_id:
            return JobInfo(job_id, parts[1].split()[0], None, None, parts[2], "sacct", parts[3])
    return None


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str | None) -> str | None:
    """A scheduler-given string (another user's job name) as quoted to a terminal: control and bidi
    characters shown as '?'. (Stand-in for the terminal sanitiser of ui.py, issue 41 item 6.)"""
    return None if text is None else _CONTROL.sub("?", text)


def unreachable(job_id: str) -> JobInfo:
    return JobInfo(job_id, UNREACHABLE, "squeue and scontrol gave no answer", None, None, "none")


def query(job_id: str) -> JobInfo | None:
    """What the scheduler says of the job: squeue for its state, scontrol for its log and exit code,
    sacct once the controller has forgotten it; None when the controller answered and nothing knows it any
    more; state UNREACHABLE when the controller did not answer."""
    if not JOB_ID.fullmatch(job_id or ""):  # job.json's model refuses these; never pass one to a command
        raise JobFailed(f"job id {job_id!r}: not a SLURM job id (digits only)")
    queued = _squeue(job_id)
    if queued is _NO_ANSWER:  # a client facing a down controller retries for ~18 s: do not pay it twice
        return unreachable(job_id)
    detail = _scontrol(job_id)
    found = [i for i in (queued, detail) if isinstance(i, JobInfo)]
    if len(found) == 2:  # squeue's state and reason, scontrol's log, exit code and name
        return JobInfo(job_id, queued.state, queued.reason or detail.reason, detail.stdout, detail.exit_code,
                       "squeue", detail.name or queued.name, detail.restarts)
    if found:
        return found[0]
    if queued is _NO_ANSWER or detail is _NO_ANSWER:
        return unreachable(job_id)
    return _sacct(job_id)


def cancel(job_id: str, name: str) -> None:
    """scancel the job `job_id` if (the scheduler checks it too) it is still named `name`. The id goes after
    `--`, so nothing in it is ever read as an option (a job.json's `--user=alice` once was)."""
    if not JOB_ID.fullmatch(job_id or ""):
        raise JobFailed(f"job id {job_id!r}: not a SLURM job id (digits only); nothing was cancelled")
    argv = ["scancel", f"--name={name}", "--", job_id]
    r = _run(argv)
    if r is None:
        raise JobFailed(f"scancel {job_id}: scancel is not on PATH or did not answer; cancel the job on a machine "
                        "with the SLURM client")
    if r.returncode != 0:
        raise JobFailed(f"scancel {job_id} failed: {r.stderr.strip() or r.stdout.strip()}")


def job_name(run_id: str, arm: str, place: str | None = None) -> str:
    """The arm's unique job name, by which a person (squeue -n) and the tool find it. `place` tags a run
    dir that is not where it was made (a copy): si-<run id>-<place>-<arm>, never the original's name."""
    return f"si-{run_id}-{place}-{arm}" if place else f"si-{run_id}-{arm}"
