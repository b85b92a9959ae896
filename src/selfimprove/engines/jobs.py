"""The detached job runner shared by baseline, iterate and compare.

    rec = launch(arm, cmd, expect)            # own session, stdout+stderr >> train.log, job.json
    res = watch(arm, progress=True)           # file + process signals, never tail | grep
    res = run_training(arm, cmd, expect, restart=False, resume=False, quiet=False)

A job is DONE when the final eval rollouts file has >= expect.num_examples complete
lines (counted, never parsed: eval rows are sealed), FAILED when its process
group is gone without that file, TIMED OUT past the cap (then it is killed).
Detection takes one poll (0.5 s). The job outlives the CLI (kill -9 of the CLI,
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
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Literal

from ..errors import JobFailed, RunDirError
from ..faults import fault_point
from ..rundir import ArmDir, write_model
from ..ui import PlainProgress, console
from . import procs, slurm, slurm_jobs
from .job_record import (  # noqa: F401  (re-exported: the job runner's public names)
    LOG_TAIL_LINES, TAIL_BYTES, JobExpectation, JobRecord, JobResult, _exit_code, _rc_path, last_lines, on_disk,
    read_job, read_result, result_path, resumable_step, tail, write_job,
)
from .crash_cause import setup_failure
from .rollouts import LineCounter, TrainRewardTracker, student_build_note

CAP_MARGIN_S = 2 * 3600  # the seed's 2 h poll cap, counted past the expected end
DEFAULT_EXPECTED_S = 2 * 3600  # until a step is seen, assume this long a run
EXIT_GRACE_S = 120.0  # after the final eval, wait this long for the engine to exit

JobState = Literal["none", "running", "finished", "crashed"]

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
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # engine output reaches train.log as it happens
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
        pid=proc.pid, pgid=proc.pid, proc_start=procs.start_time(proc.pid), cmd=list(cmd), cwd=os.getcwd(),
        host=socket.gethostname(), start_ts=time.time(), launch=n, resume_step=resume_step,
        log=str(arm.train_log), expect=expect, scheduler="slurm" if job_name else None, job_name=job_name,
    )
    write_job(arm, rec)
    if job_name:
        rec = slurm_jobs.record_submission(arm, rec)
    return rec


def _job_alive(rec: JobRecord) -> bool:
    if rec.scheduler == "slurm":  # any host may ask the scheduler
        return slurm_jobs.alive(rec)
    if rec.host != socket.gethostname():
        raise RunDirError(f"job.json: the job was launched on host {rec.host}; re-run this command there")
    return procs.alive(rec.pid, rec.pgid, rec.proc_start)


# ---------------------------------------------------------------- state


def job_state(arm: ArmDir, expect: JobExpectation | None = None) -> JobState:
    """none (never launched) | running | finished (final eval complete) | crashed."""
    rec = read_job(arm)
    exp = expect.for_arm(arm) if expect else (rec.expect if rec else None)
    if rec is not None and _job_alive(rec):
        return "running"
    if exp is not None and LineCounter(Path(exp.eval_file)).count() >= exp.num_examples:
        return "finished"
    return "none" if rec is None else "crashed"


def _options(arm: ArmDir, max_steps: int) -> str:
    step = resumable_step(arm, max_steps)
    resume = f"--resume (continue from checkpoint step {step})" if step is not None \
        else "--resume is not possible (no complete checkpoint below the final step)"
    return f"re-run with --restart (moves prime_out aside to prime_out.failed-<time>, trains from step 0) or {resume}"


def launched_output_dir(arm: ArmDir, rec: JobRecord) -> Path | None:
    """The engine output dir the job was launched with, when it is not this arm's prime_out: the run dir
    was moved (or copied) while the job ran, so the job went on writing under the old path."""
    for arg in rec.cmd:
        path = Path(arg.split("=", 1)[-1])
        if path.is_absolute() and path.name == arm.prime_out.name and path.parent.name == arm.dir.name:
            return path if path != arm.prime_out else None
    return None


def describe_elsewhere(arm: ArmDir, rec: JobRecord, old: Path) -> str:
    """The job of job.json writes to `old`, another run dir's arm. Copied or moved? A copy's original
    (old's run dir, with its run.json) still exists and its job may still train there: the original is
    healthy and its files stay where they are (issue 36: the advice to move them took a live run's output
    away). A moved run dir's old path is gone or holds only the job's late output."""
    orig = old.parent.parent
    alive = rec.host == socket.gethostname() and procs.alive(rec.pid, rec.pgid, rec.proc_start)
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
                f"output), not to {arm.prime_out}; re-run with --restart to train this arm again")
    return (f"{arm.name}: the run dir was moved while this job ran: {job} wrote to {old} ({there} its output), "
            f"not to {arm.prime_out}; {'wait for it to end, then ' if alive else ''}move {old} to {arm.prime_out} "
            "(replacing it) and re-run the same command to pick up its final eval, or re-run with --restart to "
            "train this arm again")


def describe_crash(arm: ArmDir, rec: JobRecord) -> str:
    if rec.scheduler == "slurm" and rec.job_id:
        rows = LineCounter(Path(rec.expect.eval_file)).count()
        return slurm_jobs.describe_end(arm, rec, slurm.query(rec.job_id), rows, _options(arm, rec.expect.max_steps))
    old = launched_output_dir(arm, rec)
    if old is not None:
        return describe_elsewhere(arm, rec, old)
    ck, ro = on_disk(arm)
    rc = _exit_code(arm, rec)
    rows = LineCounter(Path(rec.expect.eval_file)).count()
    cause = setup_failure(Path(rec.log))
    if cause:  # a relaunch dies the same way: the cause and its fix, not --restart/--resume
        return (f"{arm.name}: the training job (pid {rec.pid}, launch #{rec.launch}) exited"
                f"{f' with rc {rc}' if rc is not None else ''} before its final eval: {cause}; a --restart alone "
                f"fails the same way, so fix that first, then re-run with --restart (log: {rec.log})")
    return (
        f"{arm.name}: the training job (pid {rec.pid}, launch #{rec.launch}) exited"
        f"{f' with rc {rc}' if rc is not None else ''} without its final eval "
        f"({rows}/{rec.expect.num_examples} rows in {rec.expect.eval_file}); on disk: highest checkpoint step "
        f"{ck if ck is not None else 'none'}, highest rollouts step {ro if ro is not None else 'none'}; "
        f"{_options(arm, rec.expect.max_steps)}. Last lines of {rec.log}:\n{tail(Path(rec.log))}"
    )


# ---------------------------------------------------------------- watch


class _Pace:
    """Observed training pace: the first and the latest new rollouts step, with when they appeared."""

    def __init__(self) -> None:
        self.first: tuple[int, float] | None = None
        self.last: tuple[int, float] | None = None

    def see(self, step: int | None) -> None:
        if step is None or (self.last is not None and step == self.last[0]):
            return
        self.last = (step, time.time())
        self.first = self.first or self.last


def _cap_deadline(rec: JobRecord, cap_s: float | None, pace: _Pace) -> float:
    """Unix time past which the job counts as wedged: explicit cap, else expected end + 2 h.

    The expected end, unless given, is projected from the pace observed by this watcher (so it
    works for resumed runs and for a watcher that attached mid-run); until two steps were seen,
    DEFAULT_EXPECTED_S from launch. A stall freezes the projection, so the cap still fires.
    """
    cap = cap_s if cap_s is not None else (rec.expect.cap_hours * 3600 if rec.expect.cap_hours else None)
    if cap is not None:
        return rec.start_ts + cap
    if rec.expect.expected_seconds is not None:
        return rec.start_ts + rec.expect.expected_seconds + CAP_MARGIN_S
    if pace.first and pace.last and pace.last[0] > pace.first[0]:
        per_step = (pace.last[1] - pace.first[1]) / (pace.last[0] - pace.first[0])
        return pace.last[1] + max(0, rec.expect.max_steps - pace.last[0]) * per_step + CAP_MARGIN_S
    return rec.start_ts + DEFAULT_EXPECTED_S + CAP_MARGIN_S


def _new_progress():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not console.is_terminal:  # a bar would draw nothing until the job ends: print plain lines instead
        return PlainProgress(console)
    return Progress(
        TextColumn("[bold]{task.description}[/bold] step"), BarColumn(), MofNCompleteColumn(),
        TextColumn("train reward {task.fields[reward]}"), TimeElapsedColumn(), TextColumn("{task.fields[note]}"),
        console=console, refresh_per_second=2,
    )


class WatchGroup:
    """Several jobs watched at once by threads of one process (`compare --parallel N`).

    rich allows one live display per console, so the watchers share one progress display
    (a row per job); `stop()` makes every watcher stop watching as Ctrl-C does for one
    (its job keeps running; re-running the command attaches)."""

    def __init__(self, progress: bool) -> None:
        self.progress = _new_progress() if progress else None
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()


_GROUP: WatchGroup | None = None  # set only inside `watch_together`


@contextmanager
def watch_together(progress: bool) -> Iterator[WatchGroup]:
    """Scope in which `watch` calls from several threads share one display and one stop flag."""
    global _GROUP
    group = WatchGroup(progress)
    _GROUP = group
    try:
        if group.progress is None:
            yield group
        else:
            with group.progress:
                yield group
    finally:
        _GROUP = None


@contextmanager
def _progress_bar(show: bool, arm: ArmDir, rec: JobRecord):
    """(progress, task id) of this job's row, or (None, None) when nothing is shown."""
    if not show:
        yield None, None
    elif _GROUP is not None and _GROUP.progress is not None:
        yield _GROUP.progress, _GROUP.progress.add_task(arm.name, total=rec.expect.max_steps,
                                                         completed=rec.expect.start_step, reward="-", note="")
    else:
        with _new_progress() as bar:
            yield bar, bar.add_task(arm.name, total=rec.expect.max_steps, completed=rec.expect.start_step,
                                    reward="-", note="")


def watch(
    arm: ArmDir, *, progress: bool, poll_s: float = 0.5, cap_s: float | None = None,
    exit_grace_s: float = EXIT_GRACE_S,
) -> JobResult:
    """Wait for the job in job.json to finish; write and return job_result.json.

    `cap_s` (seconds since launch) overrides the cap recorded in job.json.
    """
    rec = read_job(arm)
    if rec is None:
        raise RunDirError(f"{arm.job_file}: not found; nothing to watch (launch the job first)")
    if rec.scheduler == "slurm" and rec.job_id:
        return _watch_slurm(arm, rec, progress=progress, poll_s=poll_s, cap_s=cap_s, exit_grace_s=exit_grace_s)
    counter = LineCounter(Path(rec.expect.eval_file))
    rewards = TrainRewardTracker(arm)
    pace = _Pace()
    fault_point(f"train:{arm.name}")  # the job runs detached: a kill here leaves it training
    with _progress_bar(progress, arm, rec) as (bar, task):
        while True:
            if _GROUP is not None and _GROUP.stopped:  # another arm's watcher failed or was interrupted
                raise KeyboardInterrupt
            # Liveness BEFORE the row count: a job that completes the file and exits
            # between the two reads is then seen as done, never as failed.
            is_alive = _job_alive(rec)
            rows = counter.count()
            if rows >= rec.expect.num_examples:
                if bar is not None:
                    bar.update(task, completed=rec.expect.max_steps, reward=_fmt(rewards.update()))
                still = _wait_exit(rec, exit_grace_s, poll_s) if is_alive else False
                return _finish(arm, rec, "succeeded", rows, still_running=still)
            if not is_alive:
                return _finish(arm, rec, "failed", rows, error=describe_crash(arm, rec))
            steps = arm.rollout_steps()
            step = steps[-1] if steps else None
            pace.see(step)
            if time.time() > _cap_deadline(rec, cap_s, pace):
                procs.terminate_group(rec.pgid, rec.pid)
                msg = (f"{arm.name}: the training job (pid {rec.pid}) passed its time cap and was stopped "
                       f"at rollouts step {step}; {_options(arm, rec.expect.max_steps)}, or raise --cap-hours")
                return _finish(arm, rec, "timed_out", counter.count(), error=msg)
            if bar is not None:
                # no rollouts yet may mean the engine is building the built-in student: say so, not `step 0/N`
                note = student_build_note(Path(rec.log)) if step is None else ""
                bar.update(task, completed=max(step or 0, rec.expect.start_step), reward=_fmt(rewards.update()),
                           note=note or "")
            time.sleep(poll_s)


def _watch_slurm(arm: ArmDir, rec: JobRecord, *, progress: bool, poll_s: float, cap_s: float | None,
                 exit_grace_s: float) -> JobResult:
    """`watch` for a SLURM job: the scheduler's state with the output files (engines/slurm_jobs.py).
    Done = the final eval complete AND the scheduler says the job ended; one line per state change."""
    counter = LineCounter(Path(rec.expect.eval_file))
    rewards = TrainRewardTracker(arm)
    poll_s = max(poll_s, slurm_jobs.POLL_S)
    seen: tuple[str, str | None] | None = None
    running_since: float | None = None  # the cap counts from the start of RUNNING, never the time queued
    fault_point(f"train:{arm.name}")  # the job is the scheduler's: a kill here leaves it queued or training
    with _progress_bar(progress, arm, rec) as (bar, task):
        while True:
            if _GROUP is not None and _GROUP.stopped:
                raise KeyboardInterrupt
            info = slurm.query(rec.job_id)  # the scheduler BEFORE the rows: an ending job is then seen as done
            rows = counter.count()
            if info is not None and info.stdout and not rec.job_log:
                rec = rec.model_copy(update={"job_log": slurm_jobs.job_log(arm, rec.job_id, info)})
                write_job(arm, rec)
            live = info is not None and info.live
            if not live and info is not None and info.state == "COMPLETED" and rows < rec.expect.num_examples:
                rows = slurm_jobs.await_rows(counter, rec.expect.num_examples)  # a shared FS shows it late
            key = (info.state, info.reason) if info else ("GONE", None)
            if key != seen:
                seen = key
                done = rows >= rec.expect.num_examples
                console.print(slurm_jobs.state_line(arm, rec, info, eval_complete=done), highlight=False)
            if rows >= rec.expect.num_examples:
                still = slurm_jobs.wait_end(rec, exit_grace_s, poll_s) if live else False
                end = slurm.query(rec.job_id) if live and not still else info  # its last word: one line
                if end is not None and (end.state, end.reason) != seen:
                    console.print(slurm_jobs.state_line(arm, rec, end, eval_complete=True), highlight=False)
                return _finish(arm, rec, "succeeded", rows, still_running=still, rc=slurm_jobs.exit_rc(end))
            if not live:
                error = slurm_jobs.describe_end(arm, rec, info, rows, _options(arm, rec.expect.max_steps))
                return _finish(arm, rec, "failed", rows, error=error, rc=slurm_jobs.exit_rc(info))
            if info.state == "RUNNING":
                running_since = running_since or time.time()
            cap = cap_s if cap_s is not None else (rec.expect.cap_hours * 3600 if rec.expect.cap_hours else None)
            if cap is not None and running_since is not None and time.time() > running_since + cap:
                slurm.cancel(rec.job_id)
                msg = (f"{arm.name}: SLURM job {rec.job_id} passed its time cap ({cap / 3600:.2f} h of RUNNING) and "
                       f"was cancelled; {_options(arm, rec.expect.max_steps)}, or raise --cap-hours")
                return _finish(arm, rec, "timed_out", counter.count(), error=msg)
            if bar is not None:
                steps = arm.rollout_steps()
                bar.update(task, completed=steps[-1] if steps else 0, reward=_fmt(rewards.update()))
            time.sleep(poll_s)


def _fmt(mean: float | None) -> str:
    return "-" if mean is None else f"{mean:.3f}"


def _wait_exit(rec: JobRecord, grace_s: float, poll_s: float) -> bool:
    """Wait up to grace_s for the engine to exit (so later phases don't race it); True if it still runs."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _job_alive(rec):
            return False
        time.sleep(min(poll_s, 0.2))
    return True


def _finish(arm: ArmDir, rec: JobRecord, status: str, rows: int, *, error: str | None = None,
            still_running: bool = False, rc: int | None = None) -> JobResult:
    res = JobResult(
        status=status, rc=rc if rec.scheduler == "slurm" else _exit_code(arm, rec), timed_out=status == "timed_out", still_running=still_running,
        log=rec.log, seconds=round(time.time() - rec.start_ts, 3), pid=rec.pid, eval_rows=rows, error=error,
        finished_ts=time.time(),
    )
    write_model(result_path(arm), res)
    return res


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
    or `resume` (relaunch with --ckpt.resume-step <last complete checkpoint>). `before_launch` runs
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
            console.print(msg, highlight=False)

    if job_name:  # job.json completed from the scheduler first: a kill -9 at any point leaves one job
        slurm_jobs.settle(arm, job_name, expect)
    state = job_state(arm, expect)
    rec = read_job(arm)
    if state == "running" and rec is not None and launched_output_dir(arm, rec) is not None:
        state = "crashed"  # alive, but another run dir's job (this one is a copy): never attach to it or stop it
    if state == "running" and rec is not None and rec.scheduler == "slurm" and (restart or resume):
        slurm_jobs.refuse_relaunch(arm, rec)
    if state == "running":
        assert rec is not None
        # Re-invoking the same command (flags included) after a shell timeout must attach,
        # never start a second copy: the flags only act on a job that is gone.
        ignored = " (--restart/--resume ignored: the job is alive)" if (restart or resume) else ""
        what = f"SLURM job {rec.job_id}, log {rec.job_log}" if rec.scheduler == "slurm" else f"pid {rec.pid}, log {rec.log}"
        note(f"{arm.name}: attaching to the running job ({what}){ignored}")
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
                            f"{arm.prime_out}; re-run with --restart")
        note(f"{arm.name}: resuming the crashed job from checkpoint step {step}")
        launch(arm, [*cmd, "--ckpt.resume-step", str(step)], expect, resume_step=step, job_name=job_name)
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
                      "Re-run the same command to attach.")
        raise
    if res.status != "succeeded":
        raise JobFailed(res.error or f"{arm.name}: job {res.status}")
    if res.rc not in (0, None):
        note(f"{arm.name}: the final eval is complete but the engine exited with rc {res.rc}; see {res.log}")
    return res


__all__ = [
    "JobExpectation", "JobRecord", "JobResult", "JobState", "archive_output", "describe_crash", "job_state",
    "launch", "on_disk", "read_job", "read_result", "result_path", "resumable_step", "run_training", "tail", "watch",
    "watch_together", "WatchGroup",
]
