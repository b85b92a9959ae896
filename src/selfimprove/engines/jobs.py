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
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import JobFailed, RunDirError
from ..faults import fault_point
from ..models import FileModel
from ..rundir import ArmDir, read_model, sorted_steps, write_model
from ..ui import PlainProgress, console
from . import procs
from .crash_cause import setup_failure
from .rollouts import LineCounter, TrainRewardTracker, student_build_note

CAP_MARGIN_S = 2 * 3600  # the seed's 2 h poll cap, counted past the expected end
DEFAULT_EXPECTED_S = 2 * 3600  # until a step is seen, assume this long a run
EXIT_GRACE_S = 120.0  # after the final eval, wait this long for the engine to exit
LOG_TAIL_LINES = 20

JobState = Literal["none", "running", "finished", "crashed"]

# $1 = rc file, then the engine's argv. Runs in the job's own session.
_WRAPPER = 'rc_file=$1; shift; "$@"; rc=$?; echo "$rc" > "$rc_file.tmp" && mv -f "$rc_file.tmp" "$rc_file"; exit "$rc"'


class JobExpectation(BaseModel):
    """What a finished job leaves behind, and how long it may take."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int  # absolute final step
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
    cmd: list[str]  # the engine command (without the wrapper)
    cwd: str
    host: str
    start_ts: float
    launch: int = 1  # how many launches this arm has had (restarts and resumes count)
    resume_step: int | None = None
    log: str
    expect: JobExpectation


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
    return rec.model_copy(update={"log": convert(rec.log), "expect": expect})


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
        return "(no train.log)"
    return "\n".join("  | " + ln for ln in lines) or "  | (train.log is empty)"


# ---------------------------------------------------------------- launch


def launch(arm: ArmDir, cmd: list[str], expect: JobExpectation, *, resume_step: int | None = None) -> JobRecord:
    """Start `cmd` detached (own session, stdin closed, output appended to train.log); write job.json."""
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
    rec = JobRecord(
        pid=proc.pid, pgid=proc.pid, proc_start=procs.start_time(proc.pid), cmd=list(cmd), cwd=os.getcwd(),
        host=socket.gethostname(), start_ts=time.time(), launch=n, resume_step=resume_step,
        log=str(arm.train_log), expect=expect,
    )
    write_job(arm, rec)
    return rec


def _job_alive(rec: JobRecord) -> bool:
    if rec.host != socket.gethostname():
        raise RunDirError(f"job.json: the job was launched on host {rec.host}; re-run this command there")
    return procs.alive(rec.pid, rec.pgid, rec.proc_start)


def _exit_code(arm: ArmDir, rec: JobRecord) -> int | None:
    rc = procs.reap(rec.pid)
    if rc is not None:
        return rc
    try:
        return int(_rc_path(arm).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


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
        yield _GROUP.progress, _GROUP.progress.add_task(arm.name, total=rec.expect.max_steps, reward="-", note="")
    else:
        with _new_progress() as bar:
            yield bar, bar.add_task(arm.name, total=rec.expect.max_steps, reward="-", note="")


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
                bar.update(task, completed=step or 0, reward=_fmt(rewards.update()), note=note or "")
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
            still_running: bool = False) -> JobResult:
    res = JobResult(
        status=status, rc=_exit_code(arm, rec), timed_out=status == "timed_out", still_running=still_running,
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
    before_launch: Callable[[], None] | None = None, poll_s: float = 0.5,
) -> JobResult:
    """Attach to, launch, or relaunch the arm's training job and wait for it; raise JobFailed on failure.

    Live job -> attach (never relaunch; --restart/--resume ignored). Final eval present -> done.
    Crashed -> JobFailed describing the disk, unless `restart` (prime_out moved aside, fresh launch)
    or `resume` (relaunch with --ckpt.resume-step <last complete checkpoint>). `before_launch` runs
    before every fresh launch (e.g. to pre-stage checkpoints into the new prime_out: --restart
    moves the whole prime_out aside, staged trees included). `expect.cap_hours` applies to an
    attached job too (it overrides the cap in job.json).
    """
    expect = expect.for_arm(arm)
    if restart and resume:
        raise JobFailed("--restart and --resume exclude each other; pick one")

    def note(msg: str) -> None:
        if not quiet:
            console.print(msg, highlight=False)

    state = job_state(arm, expect)
    rec = read_job(arm)
    if state == "running" and rec is not None and launched_output_dir(arm, rec) is not None:
        state = "crashed"  # alive, but another run dir's job (this one is a copy): never attach to it or stop it
    if state == "running":
        assert rec is not None
        # Re-invoking the same command (flags included) after a shell timeout must attach,
        # never start a second copy: the flags only act on a job that is gone.
        ignored = " (--restart/--resume ignored: the job is alive)" if (restart or resume) else ""
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
                            f"{arm.prime_out}; re-run with --restart")
        note(f"{arm.name}: resuming the crashed job from checkpoint step {step}")
        launch(arm, [*cmd, "--ckpt.resume-step", str(step)], expect, resume_step=step)
    else:  # none, or crashed + restart
        if state == "crashed":
            moved = archive_output(arm)
            note(f"{arm.name}: restarting; " + (f"the failed output was moved to {moved}" if moved
                                                 else "the failed job left no output to keep"))
        elif resume:
            note(f"{arm.name}: nothing to resume (never launched); launching")
        if before_launch is not None:
            before_launch()
        rec = launch(arm, cmd, expect)
        note(f"{arm.name}: launched pid {rec.pid}; log {rec.log}")
    try:
        cap_s = expect.cap_hours * 3600 if expect.cap_hours else None
        res = watch(arm, progress=not quiet, cap_s=cap_s, poll_s=poll_s)
    except KeyboardInterrupt:
        rec = read_job(arm)
        console.print(f"{arm.name}: stopped watching; the job (pid {rec.pid if rec else '?'}) keeps running. "
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
