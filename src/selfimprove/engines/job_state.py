"""What an arm's training job is, read from job.json, the process table or the scheduler, and the disk.

    job_state(arm)            # none | running | finished | crashed
    describe_crash(arm, rec)  # why a job ended without its final eval, and how to go on

Shared by the job runner (engines/jobs.py), its watcher (engines/watch.py) and `selfimprove status`.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from ..errors import RunDirError
from ..rundir import ArmDir
from . import procs, slurm_jobs
from .crash_cause import setup_failure, telling_log
from .job_record import (JobExpectation, JobRecord, _exit_code, launched_output_dir, on_disk, read_job, rerun,  # noqa: F401
                         rerun_same, resumable_step, tail)
from .rollouts import LineCounter

JobState = Literal["none", "running", "finished", "crashed"]


def job_alive(rec: JobRecord) -> bool:
    """The job still holds its process (here) or its allocation (SLURM)."""
    if rec.scheduler == "slurm":  # any host may ask the scheduler
        return slurm_jobs.alive(rec)
    if rec.host != socket.gethostname():
        raise RunDirError(f"job.json: the job was launched on host {rec.host}; re-run this command there")
    return procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token)


def job_state(arm: ArmDir, expect: JobExpectation | None = None) -> JobState:
    """none (never launched) | running | finished (final eval complete) | crashed."""
    rec = read_job(arm)
    exp = expect.for_arm(arm) if expect else (rec.expect if rec else None)
    if rec is not None and job_alive(rec):
        return "running"
    if exp is not None and LineCounter(Path(exp.eval_file)).count() >= exp.num_examples:
        return "finished"
    return "none" if rec is None else "crashed"


def resume_options(arm: ArmDir, max_steps: int) -> str:
    step = resumable_step(arm, max_steps)
    resume = f"--resume (continue from checkpoint step {step})" if step is not None \
        else "--resume is not possible (no complete checkpoint below the final step)"
    return f"{rerun()} with --restart (moves prime_out aside to prime_out.failed-<time>, trains from step 0) or {resume}"


def describe_elsewhere(arm: ArmDir, rec: JobRecord, old: Path) -> str:
    """The job of job.json writes to `old`, another run dir's arm. Copied or moved? A copy's original
    (old's run dir, with its run.json) still exists and its job may still train there: the original is
    healthy and its files stay where they are (issue 36: the advice to move them took a live run's output
    away). A moved run dir's old path is gone or holds only the job's late output."""
    orig = old.parent.parent
    alive = rec.host == socket.gethostname() and procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token)
    job = f"the job (pid {rec.pid}, {'still training' if alive else 'not running here'})"
    if (orig / "run.json").is_file() and orig.resolve() != arm.dir.parent.resolve():
        wait = (f"wait for it to end and go on with the original (`--run-dir {orig}`), or " if alive
                else f"go on with the original (`--run-dir {orig}`), or ")
        return (f"{arm.name}: this run dir is a copy of {orig}, which still exists: {job} belongs to the original "
                f"and writes to {old}, not to {arm.prime_out}; leave the original's files where they are; "
                f"{wait}train this arm in the copy with --restart (the copy's prime_out is moved aside; the "
                f"original and its job are not touched)")
    there = "it holds" if old.is_dir() else "it no longer exists, so it cannot hold"
    if not old.is_dir():
        return (f"{arm.name}: the run dir was moved while this job ran: {job} wrote to {old} ({there} its "
                f"output), not to {arm.prime_out}; {rerun()} with --restart to train this arm again")
    return (f"{arm.name}: the run dir was moved while this job ran: {job} wrote to {old} ({there} its output), "
            f"not to {arm.prime_out}; {'wait for it to end, then ' if alive else ''}move {old} to {arm.prime_out} "
            f"(replacing it) and {rerun_same()} to pick up its final eval, or {rerun()} with --restart to "
            "train this arm again")


def describe_crash(arm: ArmDir, rec: JobRecord) -> str:
    if rec.scheduler == "slurm" and rec.job_id:
        rows = LineCounter(Path(rec.expect.eval_file)).count()
        return slurm_jobs.describe_end(arm, rec, slurm_jobs.ask(rec), rows, resume_options(arm, rec.expect.max_steps))
    old = launched_output_dir(arm, rec)
    if old is not None:
        return describe_elsewhere(arm, rec, old)
    ck, ro = on_disk(arm)
    rc = _exit_code(arm, rec)
    rows = LineCounter(Path(rec.expect.eval_file)).count()
    if rec.host == socket.gethostname() and procs.identify(rec.pid, rec.pgid, rec.proc_start, rec.token) == "foreign":
        # never attached to, waited on or signalled: pid, pgid, start time and token must all match (procs.py)
        return (f"{arm.name}: {arm.job_file} names pid {rec.pid}, which runs but is not this arm's job (another "
                f"process now, or a record this tool did not write); it was not touched, and the job counts as "
                f"ended: {resume_options(arm, rec.expect.max_steps)}")
    cause = setup_failure(Path(rec.log), arm.prime_out)  # prime-rl main: also its logs/attempt_N/*.log
    told = telling_log(Path(rec.log), arm.prime_out)  # main's trainer traceback is not in train.log
    if cause:  # a relaunch dies the same way: the cause and its fix, not --restart/--resume
        return (f"{arm.name}: the training job (pid {rec.pid}, launch #{rec.launch}) exited"
                f"{f' with rc {rc}' if rc is not None else ''} before its final eval: {cause}; a --restart alone "
                f"fails the same way, so fix that first, then {rerun()} with --restart (log: {rec.log})")
    return (
        f"{arm.name}: the training job (pid {rec.pid}, launch #{rec.launch}) exited"
        f"{f' with rc {rc}' if rc is not None else ''} without its final eval "
        f"({rows}/{rec.expect.num_examples} rows in {rec.expect.eval_file}); on disk: highest checkpoint step "
        f"{ck if ck is not None else 'none'}, highest rollouts step {ro if ro is not None else 'none'}; "
        f"{resume_options(arm, rec.expect.max_steps)}. Last lines of {told}:\n{tail(told)}"
    )
