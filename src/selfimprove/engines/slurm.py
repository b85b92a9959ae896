"""SLURM as the job runner sees it: what the scheduler says about one job, found by id or by name.

    job_id = submitted_id(launcher_output)      # "Submitted batch job 123" -> "123"
    ids = live_jobs_named("si-<run id>-iter_0")  # the gap between sbatch and job.json
    info = query("123")                           # squeue, then scontrol show job, then sacct; None = forgotten
    cancel("123")

Only ever a job id this run recorded, or its own unique job name: never a user or a pattern.
The scheduler forgets an ended job after MinJobAge; without accounting (`sacct` fails) the
job is then judged by its files alone, as a local job is.
"""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
from dataclasses import dataclass

from ..errors import JobFailed

SUBMITTED = re.compile(r"Submitted batch job (\d+)")
QUERY_TIMEOUT_S = 30.0

# The job holds (or will hold) an allocation: the arm must not get a second one.
# PREEMPTED / REQUEUED: the same job continues (requeued), so the tool waits for it.
LIVE_STATES = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "PREEMPTED", "SPECIAL_EXIT",
})
# What each ended state means for the arm, and the next step (the watcher adds the job id and log).
ENDED_NEXT = {
    "COMPLETED": "the job exited 0 without the final eval file: read its log, fix the cause, then re-run with --restart",
    "FAILED": "the job exited non-zero: read its log, fix the cause, then re-run with --restart (or --resume)",
    "TIMEOUT": "the job hit its [slurm] time limit: raise it, then re-run with --resume (from the last "
               "checkpoint, where one exists) or --restart",
    "CANCELLED": "the job was cancelled (scancel): re-run with --resume (where a checkpoint allows) or --restart",
    "OUT_OF_MEMORY": "the job ran out of memory: ask for more (a template with --mem) or use smaller settings, "
                     "then re-run with --restart",
    "NODE_FAIL": "the job's node failed: re-run with --resume (where a checkpoint allows) or --restart",
    "BOOT_FAIL": "the job's node failed to boot: re-run with --restart",
    "DEADLINE": "the job passed its deadline: re-run with --resume or --restart",
}
REQUEUED_STATES = frozenset({"PREEMPTED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD"})


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str  # the base state, e.g. RUNNING, CANCELLED (the "by 0" of "CANCELLED by 0" dropped)
    reason: str | None  # the scheduler's reason (PENDING: Resources, Priority, JobHeldUser, ...)
    stdout: str | None  # the job's log as the scheduler has it (scontrol StdOut)
    exit_code: str | None  # "rc:signal"
    source: str  # squeue | scontrol | sacct

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES


def available() -> bool:
    return shutil.which("squeue") is not None and shutil.which("sbatch") is not None


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


def live_jobs_named(name: str) -> list[str]:
    """Ids of this user's jobs named exactly `name` that the scheduler still holds (pending, running, ...)."""
    r = _run(["squeue", "-h", "-n", name, "-u", getpass.getuser(), "-t", "all", "-o", "%i|%j|%T"])
    if r is None or r.returncode != 0:
        return []
    ids = []
    for line in r.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[1] == name and parts[2] in LIVE_STATES:
            ids.append(parts[0])
    return ids


def _scontrol(job_id: str) -> JobInfo | None:
    r = _run(["scontrol", "show", "job", "-o", job_id])
    if r is None or r.returncode != 0 or "JobId=" not in r.stdout:
        return None
    fields = dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", r.stdout))
    reason = fields.get("Reason")
    return JobInfo(job_id, fields.get("JobState", "UNKNOWN"), None if reason in (None, "None") else reason,
                   fields.get("StdOut") or None, fields.get("ExitCode"), "scontrol")


def _squeue(job_id: str) -> JobInfo | None:
    r = _run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%i|%T|%r"])
    if r is None or r.returncode != 0:
        return None
    for line in r.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] == job_id:
            reason = parts[2] if parts[2] not in ("", "None", "(null)") else None
            return JobInfo(job_id, parts[1], reason, None, None, "squeue")
    return None


def _sacct(job_id: str) -> JobInfo | None:
    r = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "JobID,State,ExitCode"])
    if r is None or r.returncode != 0:  # no accounting storage: the job is judged by its files
        return None
    for line in r.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] == job_id:
            return JobInfo(job_id, parts[1].split()[0], None, None, parts[2], "sacct")
    return None


def query(job_id: str) -> JobInfo | None:
    """What the scheduler says of the job: squeue for its state, scontrol for its log and exit code,
    sacct once the controller has forgotten it; None when nothing knows it any more."""
    queued = _squeue(job_id)
    detail = _scontrol(job_id)
    if queued is not None and detail is not None:  # squeue's state and reason, scontrol's log and exit code
        return JobInfo(job_id, queued.state, queued.reason or detail.reason, detail.stdout, detail.exit_code, "squeue")
    return queued or detail or _sacct(job_id)


def cancel(job_id: str) -> None:
    r = _run(["scancel", job_id])
    if r is None:
        raise JobFailed(f"scancel {job_id}: scancel is not on PATH; cancel the job on a machine with the SLURM client")
    if r.returncode != 0:
        raise JobFailed(f"scancel {job_id} failed: {r.stderr.strip() or r.stdout.strip()}")


def job_name(run_id: str, arm: str, place: str | None = None) -> str:
    """The arm's unique job name, by which a person (squeue -n) and the tool find it. `place` tags a run
    dir that is not where it was made (a copy): si-<run id>-<place>-<arm>, never the original's name."""
    return f"si-{run_id}-{place}-{arm}" if place else f"si-{run_id}-{arm}"
