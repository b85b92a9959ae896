"""Waiting for a training job: file and process (or scheduler) signals, never tail | grep.

    res = watch(arm, progress=True)            # until done, crashed or past its cap; writes job_result.json
    with watch_together(progress=True): ...    # several watchers (compare --parallel) share one display

DONE when the final eval rollouts file has >= expect.num_examples complete lines (counted, never
parsed: eval rows are sealed), FAILED when the job is gone without it, TIMED OUT past the cap (then
it is stopped). Detection takes one poll: 0.5 s locally; on SLURM the files are read every 2 s and
the scheduler asked every 15 s (engines/slurm_jobs.py).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import JobFailed, RunDirError
from ..faults import fault_point
from ..rundir import ArmDir, write_model
from ..ui import PlainProgress, console
from . import procs, slurm, slurm_jobs
from .job_record import JobRecord, JobResult, _exit_code, read_job, result_path, write_job
from .job_state import describe_crash, job_alive, resume_options
from .rollouts import LineCounter, TrainRewardTracker, student_build_note

CAP_MARGIN_S = 2 * 3600  # the 2 h poll cap of the skill's procedure, counted past the expected end
DEFAULT_EXPECTED_S = 2 * 3600  # until a step is seen, assume this long a run


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
        return
    # Counted in this arm's own steps: an iteration forked from iter_0's step 50 that trains 50 more
    # shows "step 10/50", not prime-rl's global "step 60/100" (the description names the fork point).
    name = arm.name + (f" (from step {rec.expect.start_step})" if rec.expect.start_step else "")
    fields = dict(total=rec.expect.max_steps - rec.expect.start_step, completed=_progress_step(rec, _first_step(rec)),
                  reward="-", note="")
    if _GROUP is not None and _GROUP.progress is not None:
        yield _GROUP.progress, _GROUP.progress.add_task(name, **fields)
    else:
        with _new_progress() as bar:
            yield bar, bar.add_task(name, **fields)


def _first_step(rec) -> int:
    """Where the progress starts: the arm's start step, or a resumed launch's resume step."""
    return max(rec.expect.start_step, getattr(rec, "resume_step", None) or 0)


def _progress_step(rec, step: int | None) -> int:
    """prime-rl's (global) step as a step of this arm's own run: 0 at its start step."""
    return max(step or 0, rec.expect.start_step) - rec.expect.start_step


def watch(arm: ArmDir, *, progress: bool, poll_s: float = 0.5, cap_s: float | None = None) -> JobResult:
    """Wait for the job in job.json to END; write and return job_result.json.

    Succeeded = the final eval file is complete AND the job has ended. The eval alone says nothing
    about the end: prime-rl main triggers the eval of max_steps right after batch max_steps-1 ships
    (orchestrator.py:690 and 759), and the last rollouts, the last train step and the final
    checkpoint come after it (trainer/rl/train.py:727-731); prime-rl at the seed commit evaluates at the end. So a live
    job is waited for (its time cap still applies), never given a grace and then left running on GPUs
    and ports the next arm needs. Whether its final checkpoint is whole is the caller's check
    (`ArmDir.checkpoint_missing`). `cap_s` (seconds since launch) overrides the cap in job.json.
    """
    rec = read_job(arm)
    if rec is None:
        raise RunDirError(f"{arm.job_file}: not found; nothing to watch (launch the job first)")
    if rec.scheduler == "slurm" and rec.job_id:
        return _watch_slurm(arm, rec, progress=progress, poll_s=poll_s, cap_s=cap_s)
    counter = LineCounter(Path(rec.expect.eval_file))
    rewards = TrainRewardTracker(arm)
    pace = _Pace()
    fault_point(f"train:{arm.name}")  # the job runs detached: a kill here leaves it training
    with _progress_bar(progress, arm, rec) as (bar, task):
        while True:
            if _GROUP is not None and _GROUP.stopped:  # another arm's watcher failed or was interrupted
                raise KeyboardInterrupt
            _still_here(arm, rec)
            # Liveness BEFORE the row count: a job that completes the file and exits
            # between the two reads is then seen as done, never as failed.
            is_alive = job_alive(rec)
            rows = counter.count()
            if rows >= rec.expect.num_examples and not is_alive:
                if bar is not None:
                    bar.update(task, completed=_progress_step(rec, rec.expect.max_steps), reward=_fmt(rewards.update()))
                return _finish(arm, rec, "succeeded", rows)
            if not is_alive:
                return _finish(arm, rec, "failed", rows, error=describe_crash(arm, rec))
            # alive: training, or past the final eval and finishing (the last step and the final checkpoint)
            step = _step_now(arm, rec)
            pace.see(step)
            if time.time() > _cap_deadline(rec, cap_s, pace):
                procs.terminate_group(rec.pgid, rec.pid)
                msg = (f"{arm.name}: the training job (pid {rec.pid}) passed its time cap and was stopped "
                       f"at rollouts step {step}; {resume_options(arm, rec.expect.max_steps)}, or raise --cap-hours")
                return _finish(arm, rec, "timed_out", counter.count(), error=msg)
            if bar is not None:
                # no rollouts yet may mean the engine is building the built-in student: say so, not `step 0/N`
                note = student_build_note(Path(rec.log)) if step is None else ""
                bar.update(task, completed=_progress_step(rec, step), reward=_fmt(rewards.update()),
                           note=note or "")
            time.sleep(poll_s)


# How often the scheduler is asked once the final eval is complete and only the job's end is awaited.
END_QUERY_S = 5.0


def _watch_slurm(arm: ArmDir, rec: JobRecord, *, progress: bool, poll_s: float, cap_s: float | None) -> JobResult:
    """`watch` for a SLURM job: the scheduler's state with the output files (engines/slurm_jobs.py).
    Done = the final eval complete AND the scheduler says the job ended; one line per state change."""
    counter = LineCounter(Path(rec.expect.eval_file))
    rewards = TrainRewardTracker(arm)
    poll_s = max(poll_s, slurm_jobs.POLL_S)
    every_s = max(poll_s, slurm_jobs.query_every_s())
    info: slurm.JobInfo | None = None
    asked_at: float | None = None
    seen: tuple[str, str | None] | None = None
    running_since: float | None = None  # the cap counts from the start of RUNNING, never the time queued
    fault_point(f"train:{arm.name}")  # the job is the scheduler's: a kill here leaves it queued or training
    with _progress_bar(progress, arm, rec) as (bar, task):
        while True:
            if _GROUP is not None and _GROUP.stopped:
                raise KeyboardInterrupt
            _still_here(arm, rec)
            # The scheduler BEFORE the rows (an ending job is then seen as done); its answer is reused for
            # query_every_s, as one asked before the rows were read it keeps that order.
            if asked_at is None or time.monotonic() - asked_at >= every_s:
                info, asked_at = slurm_jobs.ask(rec), time.monotonic()
            rows = counter.count()
            if rows >= rec.expect.num_examples and info is not None and info.live and every_s > END_QUERY_S:
                # The files say the eval is done: ask for the end at once, then every END_QUERY_S while the job
                # finishes its last step and checkpoint (the eval fires before them on prime-rl main).
                every_s = END_QUERY_S
                info, asked_at = slurm_jobs.ask(rec), time.monotonic()
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
                console.print(slurm_jobs.state_line(arm, rec, info, eval_complete=done), highlight=False, markup=False)
            if rows >= rec.expect.num_examples and not live:  # the scheduler says it ended: done (see `watch`)
                return _finish(arm, rec, "succeeded", rows, rc=slurm_jobs.exit_rc(info))
            if not live:
                error = slurm_jobs.describe_end(arm, rec, info, rows, resume_options(arm, rec.expect.max_steps))
                return _finish(arm, rec, "failed", rows, error=error, rc=slurm_jobs.exit_rc(info))
            if info.state == "RUNNING":
                running_since = running_since or time.time()
            cap = cap_s if cap_s is not None else (rec.expect.cap_hours * 3600 if rec.expect.cap_hours else None)
            if cap is not None and running_since is not None and time.time() > running_since + cap:
                slurm.cancel(rec.job_id, rec.job_name)
                msg = (f"{arm.name}: SLURM job {rec.job_id} passed its time cap ({cap / 3600:.2f} h of RUNNING) and "
                       f"was cancelled; {resume_options(arm, rec.expect.max_steps)}, or raise --cap-hours")
                return _finish(arm, rec, "timed_out", counter.count(), error=msg)
            if bar is not None:
                bar.update(task, completed=_progress_step(rec, _step_now(arm, rec)),
                           reward=_fmt(rewards.update()))
            time.sleep(poll_s)


def _still_here(arm: ArmDir, rec: JobRecord) -> None:
    """Stop watching once job.json is gone from where this watcher found it: the run dir was moved (or
    deleted) meanwhile. Every write of the tool creates its parent dirs, so writing on (job_result.json,
    job.json) would re-create the old path beside the moved run dir."""
    if not arm.job_file.exists():
        which = f"SLURM job {rec.job_id}" if rec.scheduler == "slurm" else f"pid {rec.pid}"
        raise JobFailed(f"{arm.dir}: gone while this command watched it (the run dir was moved or deleted); the job "
                        f"({which}) was left running; re-run the command with --run-dir at the run dir's new place "
                        "to attach to it")


def _step_now(arm: ArmDir, rec: JobRecord) -> int | None:
    """The job's latest rollouts step. A resumed launch starts at its resume step: the rollouts the crashed
    launch wrote past it are older than this launch and do not count (the first progress line after
    --resume showed the old launch's step)."""
    steps = arm.rollout_steps()
    if rec.resume_step is None:
        return steps[-1] if steps else None
    fresh = [s for s in steps if s <= rec.resume_step or _mtime(arm.rollout_step(s)) >= rec.start_ts]
    return max(fresh[-1] if fresh else rec.resume_step, rec.resume_step)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _fmt(mean: float | None) -> str:
    return "-" if mean is None else f"{mean:.3f}"


def _finish(arm: ArmDir, rec: JobRecord, status: str, rows: int, *, error: str | None = None,
            still_running: bool = False, rc: int | None = None) -> JobResult:
    res = JobResult(
        status=status, rc=rc if rec.scheduler == "slurm" else _exit_code(arm, rec), timed_out=status == "timed_out", still_running=still_running,
        log=rec.log, seconds=round(time.time() - rec.start_ts, 3), pid=rec.pid, eval_rows=rows, error=error,
        finished_ts=time.time(),
    )
    write_model(result_path(arm), res)
    return res
