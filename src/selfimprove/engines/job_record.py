"""The job record of an arm and reading it back: job.json, job_result.json, the engine's exit code, the end of
a log, and which checkpoints the arm's output holds. Shared by the job runner (`jobs`) and its SLURM part
(`slurm_jobs`), which both build on it."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

from ..models import FileModel
from ..rundir import ArmDir, read_model, sorted_steps, write_model
from . import procs

LOG_TAIL_LINES = 20

# How a person re-runs what runs now, for the lines that say so. The phase commands and `run --run-dir R`
# resume when re-run as they were, with --restart / --resume added; `run DATASET ...` does not (it makes a
# new run dir), so once it has made one, phases/run.py sets this to its `run --run-dir R` form.
_RERUN: str | None = None


def set_rerun(command: str | None) -> None:
    global _RERUN
    _RERUN = command


def rerun() -> str:
    """"re-run" (the same command), or "re-run `selfimprove run --run-dir R`" inside `run DATASET`."""
    return f"re-run `{_RERUN}`" if _RERUN else "re-run"


def rerun_same() -> str:
    return f"re-run `{_RERUN}`" if _RERUN else "re-run the same command"


class JobExpectation(BaseModel):
    """What a finished job leaves behind, and how long it may take."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int  # absolute final step
    start_step: int = 0  # the step a resumed arm starts from (its progress starts there, not at 0)
    num_examples: int  # final eval rows that mark the job done (eval rollouts_per_example = 1)
    cap_hours: float | None = None  # None = expected duration + 2 h
    expected_seconds: float | None = None  # None = projected from the observed step rate
    eval_file: str | None = None  # None = arm.eval_file(max_steps): one line per rollout in both dialects

    def for_arm(self, arm: ArmDir) -> "JobExpectation":
        """A copy with `eval_file` resolved for `arm` (what job.json stores)."""
        if self.eval_file:
            return self
        return self.model_copy(update={"eval_file": str(arm.eval_file(self.max_steps))})


class JobRecord(FileModel):
    """<arm>/job.json: the detached job, enough to attach to it from another process."""

    pid: int  # the wrapper shell; also the process-group and session leader
    pgid: int
    proc_start: int | None  # /proc/<pid>/stat starttime: tells our pid from a recycled one
    # SELFIMPROVE_JOB_TOKEN in the job's environment: what proves a live pid is this record's job (procs.py);
    # None (a record from before tokens, or a SLURM job adopted by name) never counts as a live local process
    token: str | None = None
    cmd: list[str]  # the engine command (without the wrapper)
    cwd: str
    host: Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f-\x9f]{1,300}$")]  # quoted in lines
    start_ts: float
    launch: int = 1  # how many launches this arm has had (restarts and resumes count)
    resume_step: int | None = None
    log: str
    expect: JobExpectation
    # On SLURM (engines/slurm_jobs.py) the command above is only the launcher: the job is the scheduler's.
    scheduler: Literal["slurm"] | None = None
    # from `Submitted batch job N`, or found by job_name; None until known. Digits only: it is passed to
    # squeue/scancel, and a forged `--user=alice` once became an option there
    job_id: Annotated[str, StringConstraints(pattern=r"^[0-9]{1,20}$")] | None = None
    # the arm's unique name (si-<run id>-<arm>), how squeue finds it; quoted in lines: no control characters
    job_name: Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f-\x9f]{1,300}$")] | None = None
    job_log: str | None = None  # the job's own log (scontrol StdOut, or <run dir>/job_<id>.log)


class JobResult(FileModel):
    """<arm>/job_result.json: how the job ended."""

    status: Literal["succeeded", "failed", "timed_out"]
    rc: int | None = None  # engine exit code when known
    timed_out: bool = False
    still_running: bool = False  # eval complete but the engine had not exited after the grace
    log: str
    seconds: float  # from launch to detection
    pid: int
    eval_rows: int
    error: str | None = None
    finished_ts: float


def result_path(arm: ArmDir) -> Path:
    return arm.dir / "job_result.json"


def _rc_path(arm: ArmDir) -> Path:
    return arm.dir / "job.rc"


def _arm_paths(arm: ArmDir, rec: JobRecord, convert) -> JobRecord:
    """rec with its log and eval file paths passed through `convert` (to or from arm-relative)."""
    expect = rec.expect.model_copy(update={"eval_file": convert(rec.expect.eval_file) if rec.expect.eval_file else None})
    return rec.model_copy(update={"log": convert(rec.log), "expect": expect,
                                  "job_log": convert(rec.job_log) if rec.job_log else None})


def _relative_to_arm(arm: ArmDir):
    def convert(path: str) -> str:
        try:
            return str(Path(path).relative_to(arm.dir))
        except ValueError:
            return path
    return convert


def read_job(arm: ArmDir) -> JobRecord | None:
    """job.json with its paths made absolute (they are stored relative to the arm dir, so a
    copied run dir reads its own files, not the original's)."""
    if not arm.job_file.is_file():
        return None
    return _arm_paths(arm, read_model(arm.job_file, JobRecord), lambda p: str(arm.dir / p))


def write_job(arm: ArmDir, rec: JobRecord) -> None:
    write_model(arm.job_file, _arm_paths(arm, rec, _relative_to_arm(arm)))


def read_result(arm: ArmDir) -> JobResult | None:
    p = result_path(arm)
    return read_model(p, JobResult) if p.is_file() else None


TAIL_BYTES = 64_000  # the end of a log is all a message quotes: never read a large log whole


def last_lines(path: Path, n: int, max_chars: int | None = None) -> list[str]:
    """The last `n` lines of a log from its last TAIL_BYTES, each cut at `max_chars` (with a note of how
    much the log holds beyond); raises OSError like open()."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - TAIL_BYTES))
        lines = deque(f.read().decode("utf-8", "replace").splitlines(), maxlen=n)
    if max_chars is None:
        return list(lines)
    return [ln if len(ln) <= max_chars else f"{ln[:max_chars]} ... [{len(ln) - max_chars} more characters in the log]"
            for ln in lines]


def tail(path: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        lines = last_lines(path, n)
    except FileNotFoundError:
        return f"(no {path.name})"
    return "\n".join("  | " + ln for ln in lines) or f"  | ({path.name} is empty)"


def _exit_code(arm: ArmDir, rec: JobRecord) -> int | None:
    rc = procs.reap(rec.pid)
    if rc is not None:
        return rc
    try:
        return int(_rc_path(arm).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def on_disk(arm: ArmDir) -> tuple[int | None, int | None]:
    """(highest checkpoint step, highest rollouts step) in the arm's prime_out."""
    ck = sorted_steps(arm.prime_out / "checkpoints")
    ro = arm.rollout_steps()
    return (ck[-1] if ck else None), (ro[-1] if ro else None)


def resumable_step(arm: ArmDir, max_steps: int) -> int | None:
    """Highest step < max_steps holding the three trees prime-rl needs to resume from it."""
    for s in reversed(sorted_steps(arm.prime_out / "checkpoints")):
        if s < max_steps and (arm.trainer_ckpt(s) / "trainer").is_dir() \
                and arm.orchestrator_ckpt(s).is_dir() and (arm.broadcast(s) / "STABLE").exists():
            return s
    return None


def launched_output_dir(arm: ArmDir, rec: JobRecord) -> Path | None:
    """The engine output dir the job was launched with, when it is not this arm's prime_out: the run dir
    was moved (or copied) while the job ran, so the job went on writing under the old path."""
    for arg in rec.cmd:
        path = Path(arg.split("=", 1)[-1])
        if path.is_absolute() and path.name == arm.prime_out.name and path.parent.name == arm.dir.name:
            return path if path != arm.prime_out else None
    return None
