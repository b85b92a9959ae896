"""The detached job runner shared by baseline, iterate and compare.

    rec = launch(arm, cmd, expect)            # own session, stdout+stderr >> train.log, job.json
    res = watch(arm, progress=True)           # engines/watch.py: file + process signals, never tail | grep
    res = run_training(arm, cmd, expect, restart=False, resume=False, quiet=False)

A job is DONE when the final eval rollouts file has >= expect.num_examples complete
lines (counted, never parsed: eval rows are sealed), FAILED when its process
group is gone without that file, TIMED OUT past the cap (then it is killed);
engines/job_state.py says which, engines/watch.py waits for it. The job outlives the CLI (kill -9 of the CLI,
an agent's 10-minute shell budget): job.json holds everything needed to ATTACH
again, and `run_training` never launches a second copy of a live job.

The command runs under a tiny /bin/sh wrapper that writes the engine's exit code
to job.rc, so a CLI that attached later still learns the rc.

Known trade-off (accepted): a kill of the CLI in the few milliseconds between
the fork and the write of job.json leaves a job that nothing records.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

from ..errors import JobFailed
from ..faults import fault_point
from ..rundir import ArmDir
from ..ui import console
from . import procs, slurm, slurm_jobs
from .job_record import (  # noqa: F401  (re-exported: the job runner's public names)
    LOG_TAIL_LINES, TAIL_BYTES, JobExpectation, JobRecord, JobResult, _exit_code, _rc_path, last_lines, on_disk,
    read_job, read_result, rerun, rerun_same, result_path, resumable_step, tail, write_job,
)
from .job_state import JobState, describe_crash, job_state, launched_output_dir  # noqa: F401  (re-exported)
from .rollouts import LineCounter
from .watch import WatchGroup, watch, watch_together  # noqa: F401  (re-exported)

# $1 = rc file, then the engine's argv. Runs in the job's own session.
_WRAPPER = 'rc_file=$1; shift; "$@"; rc=$?; echo "$rc" > "$rc_file.tmp" && mv -f "$rc_file.tmp" "$rc_file"; exit "$rc"'


# ---------------------------------------------------------------- launch


def launch(arm: ArmDir, cmd: list[str], expect: JobExpectation, *, resume_step: int | None = None,
           job_name: str | None = None) -> JobRecord:
    """Start `cmd` detached (own session, stdin closed, output appended to train.log); write job.json.

    With `job_name` the command submits a SLURM job of that name: job.json then gets its id once
    the launcher has exited (engines/slurm_jobs.py)."""
    if not cmd:
        raise JobFailed(f"{arm.name}: empty engine command; nothing to launch")
    expect = expect.for_arm(arm)
    arm.dir.mkdir(parents=True, exist_ok=True)
    prev = read_job(arm)
    for stale in (_rc_path(arm), result_path(arm)):
        stale.unlink(missing_ok=True)
    n = (prev.launch + 1) if prev else 1
    token = procs.new_token()  # in the job's environment: what proves a live pid is this job (engines/procs.py)
    env = {**procs.token_env(token), "PYTHONUNBUFFERED": "1"}  # engine output reaches train.log as it happens
    if job_name:  # sbatch's own variable (it overrides the script's directives): a requeue appends to the
        env["SBATCH_OPEN_MODE"] = "append"  # job's log instead of wiping why it stopped, whatever the template
    with open(arm.train_log, "ab") as log:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"\n[selfimprove] {stamp} launch #{n}: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", _WRAPPER, "selfimprove-job", str(_rc_path(arm)), *cmd],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env=env,
        )
    procs.register_child(proc)
    if job_name:
        fault_point(f"submit:{arm.name}")  # launcher started, job.json not written: found by its argv, then by name
    rec = JobRecord(
        pid=proc.pid, pgid=proc.pid, proc_start=procs.start_time(proc.pid), token=token, cmd=list(cmd), cwd=os.getcwd(),
        host=socket.gethostname(), start_ts=time.time(), launch=n, resume_step=resume_step,
        log=str(arm.train_log), expect=expect, scheduler="slurm" if job_name else None, job_name=job_name,
    )
    write_job(arm, rec)
    if job_name:
        rec = slurm_jobs.record_submission(arm, rec)
    return rec


# ---------------------------------------------------------------- attach / relaunch


def archive_output(arm: ArmDir) -> Path | None:
    """Move a failed run's prime_out aside (never delete: it may hold the only evidence). A tree of
    empty dirs (a job that died at start) holds none: it is removed, leaving no prime_out.failed-* behind."""
    if not arm.prime_out.exists():
        return None
    if not any(not p.is_dir() for p in arm.prime_out.rglob("*")):  # only empty dirs: no evidence to keep
        shutil.rmtree(arm.prime_out)
        return None
    dest = arm.dir / f"prime_out.failed-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    os.rename(arm.prime_out, dest)
    return dest


def run_training(
    arm: ArmDir, cmd: list[str], expect: JobExpectation, *, restart: bool, resume: bool, quiet: bool,
    before_launch: Callable[[], None] | None = None, poll_s: float = 0.5, job_name: str | None = None,
) -> JobResult:
    """Attach to, launch, or relaunch the arm's training job and wait for it; raise JobFailed on failure.

    Live job -> attach (never relaunch; --restart/--resume ignored). Final eval present -> done.
    Crashed -> JobFailed describing the disk, unless `restart` (prime_out moved aside, fresh launch)
    or `resume` (relaunch from the last complete checkpoint: `resume_flags`). `before_launch` runs
    before every fresh launch (e.g. to pre-stage checkpoints into the new prime_out: --restart
    moves the whole prime_out aside, staged trees included). `expect.cap_hours` applies to an
    attached job too (it overrides the cap in job.json).

    `job_name`: the engine submits a SLURM job of that name (phases/slurm_launch.py). The job runner
    then tracks the scheduler's job; a live one refuses --restart/--resume (JobLive, naming scancel).
    """
    expect = expect.for_arm(arm)
    if restart and resume:
        raise JobFailed("--restart and --resume exclude each other; pick one")

    def note(msg: str) -> None:
        if not quiet:
            console.print(msg, highlight=False, markup=False)

    if job_name:  # job.json completed from the scheduler first: a kill -9 at any point leaves one job
        slurm_jobs.settle(arm, job_name, expect)
    rec = read_job(arm)
    not_ours = slurm_jobs.foreign(arm, rec, job_name) if job_name else None
    if not_ours:  # a copied run dir's record of the original's SLURM job: never attach to, judge or stop it
        if not (restart or resume):
            raise JobFailed(not_ours)
        note(not_ours.split(": not this run dir's")[0] + ": not this run dir's job; left alone")
    state = job_state(arm, expect)
    if not_ours and state == "running":
        state = "crashed"
    if state == "running" and rec is not None and launched_output_dir(arm, rec) is not None:
        state = "crashed"  # alive, but another run dir's job (this one is a copy): never attach to it or stop it
    if state == "running" and rec is not None and rec.scheduler == "slurm" and (restart or resume):
        slurm_jobs.refuse_relaunch(arm, rec)
    if state == "running":
        assert rec is not None
        # Re-invoking the same command (flags included) after a shell timeout must attach,
        # never start a second copy: the flags only act on a job that is gone.
        ignored = " (--restart/--resume ignored: the job is alive)" if (restart or resume) else ""
        if rec.scheduler == "slurm":  # PENDING is not running: say what the scheduler says
            info = slurm.query(rec.job_id) if rec.job_id else None
            said = f"the scheduler says {info.state}" if info is not None else "submitted"
            note(f"{arm.name}: following SLURM job {rec.job_id} ({said}; log {rec.job_log}){ignored}")
        else:
            note(f"{arm.name}: attaching to the running job (pid {rec.pid}, log {rec.log}){ignored}")
    elif state == "finished":
        if restart or resume:
            note(f"{arm.name}: the job already finished; --restart/--resume ignored (move {arm.prime_out} aside to retrain)")
        if rec is None:  # final artefacts without a job record (e.g. made by hand): nothing to wait for
            return JobResult(status="succeeded", log=str(arm.train_log), seconds=0.0, pid=0,
                             eval_rows=LineCounter(Path(str(expect.eval_file))).count(), finished_ts=time.time())
    elif state == "crashed" and not (restart or resume):
        assert rec is not None
        raise JobFailed(describe_crash(arm, rec))
    elif state == "crashed" and resume:
        step = resumable_step(arm, expect.max_steps)
        if step is None:
            raise JobFailed(f"{arm.name}: cannot --resume: no complete checkpoint below step {expect.max_steps} in "
                            f"{arm.prime_out}; {rerun()} with --restart")
        note(f"{arm.name}: resuming the crashed job from checkpoint step {step}")
        launch(arm, [*cmd, *resume_flags(cmd, arm, step)], expect, resume_step=step, job_name=job_name)
    else:  # none, or crashed + restart
        if state == "crashed":
            moved = archive_output(arm)
            note(f"{arm.name}: restarting; " + (f"the failed output was moved to {moved}" if moved
                                                 else "the failed job left no output to keep"))
        elif resume:
            note(f"{arm.name}: nothing to resume (never launched); launching")
        if before_launch is not None:
            before_launch()
        rec = launch(arm, cmd, expect, job_name=job_name)
        note(f"{arm.name}: submitted SLURM job {rec.job_id} ({rec.job_name}); log {rec.job_log}" if job_name
             else f"{arm.name}: launched pid {rec.pid}; log {rec.log}")
    try:
        cap_s = expect.cap_hours * 3600 if expect.cap_hours else None
        res = watch(arm, progress=not quiet, cap_s=cap_s, poll_s=poll_s)
    except KeyboardInterrupt:
        rec = read_job(arm)
        which = f"SLURM job {rec.job_id}" if rec and rec.scheduler == "slurm" else f"pid {rec.pid if rec else '?'}"
        console.print(f"{arm.name}: stopped watching; the job ({which}) keeps running. "
                      f"{rerun_same()[0].upper()}{rerun_same()[1:]} to attach.", markup=False)
        raise
    if res.status != "succeeded":
        raise JobFailed(res.error or f"{arm.name}: job {res.status}")
    if res.rc not in (0, None):
        note(f"{arm.name}: the final eval is complete but the engine exited with rc {res.rc}; see {res.log}")
    return res


def resume_flags(cmd: list[str], arm: ArmDir, step: int) -> list[str]:
    """The flags that resume `cmd` from the arm's own checkpoint `step`, in the dialect `cmd` is written in:
    the seed dialect's --ckpt.resume-step N, main's --resume.step N (or, for an arm that forks iter_0 with
    resume.dir, resume.dir pointed at its own checkpoint: `Dialect.resume_flags`)."""
    from ..stack.dialects import dialect_of_argv  # the stack's parser: imported on use (no import cycle)
    from ..stack.toml_paths import merge_argv_files

    dialect = dialect_of_argv(cmd)
    try:
        config = merge_argv_files(cmd)[0]
    except Exception:  # an unreadable config: the relaunch itself names it
        config = {}
    return dialect.resume_flags(config, step, arm.trainer_ckpt(step))


__all__ = [
    "JobExpectation", "JobRecord", "JobResult", "JobState", "archive_output", "describe_crash", "job_state",
    "launch", "on_disk", "read_job", "read_result", "result_path", "resumable_step", "run_training", "tail", "watch",
    "watch_together", "WatchGroup",
]
