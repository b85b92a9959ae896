"""SLURM jobs in the job runner: track the scheduler's job, not the launcher process.

On SLURM the engine's command (prime-rl's `rl`, or `selfimprove-rl`) is a launcher: it writes an
sbatch script, submits it, prints `Submitted batch job N` and exits 0. So for an arm with a job
name (phases/slurm_launch.py):

    launch    the launcher starts detached as any job (job.json: its pid, scheduler "slurm", the name);
              once it exits, the id from its line (or, the line missing, the one live job of the
              arm's name in squeue) and the job's log go into job.json
    settle    before anything else, a job.json without an id, or none at all, is completed from the
              scheduler: a launcher still running (found by pid, or by the job name in its argv) is
              waited for, then the live job of that name is adopted. So a kill -9 of the CLI at any
              point leaves one job per arm: the next invocation attaches to it by id
    watch     (watch._watch_slurm) squeue -> scontrol -> sacct each poll, with the output files: done = the
              final eval complete AND the scheduler says the job ended (or forgot it); one line per state (below)

A job the scheduler no longer knows (past MinJobAge, no accounting) is judged by its files.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from ..errors import JobFailed, JobLive
from ..faults import fault_point
from ..rundir import ArmDir
from ..ui import console
from . import procs, slurm
from .job_record import JobRecord, _exit_code, last_lines, on_disk, read_job, rerun, rerun_same, tail, write_job

POLL_S = 2.0  # the output files (progress, the final eval) are read this often
# ... and the scheduler asked this often (squeue + scontrol per arm). slurmctld serves a whole cluster:
# nine Phase 4 watchers at 2 s would be 9 queries a second. A job's state changes slowly; its files say
# when it is done, and then the scheduler is asked at once. SELFIMPROVE_SLURM_QUERY_S overrides it.
QUERY_EVERY_S = 15.0
SUBMIT_TIMEOUT_S = 900.0  # the launcher (`uv run rl` may sync its venv first) has this long to submit
_PROC = Path("/proc")


def query_every_s() -> float:
    """Seconds between scheduler queries per job: QUERY_EVERY_S, or SELFIMPROVE_SLURM_QUERY_S (>= 0.5)."""
    try:
        return max(0.5, float(os.environ.get("SELFIMPROVE_SLURM_QUERY_S", QUERY_EVERY_S)))
    except ValueError:
        return QUERY_EVERY_S


# ---------------------------------------------------------------- submission


def job_log(arm: ArmDir, job_id: str, info: "slurm.JobInfo | None" = None) -> str:
    """The job's log: the scheduler's StdOut when it says, else `<run dir>/job_<id>.log` (both templates)."""
    if info is not None and info.stdout:
        return info.stdout.replace("%j", job_id)
    return str(arm.prime_out / f"job_{job_id}.log")


def launch_output(arm: ArmDir, launch_n: int) -> str:
    """train.log from the marker of launch #n on: what this launch's launcher printed."""
    try:
        lines = last_lines(arm.train_log, 400)
    except FileNotFoundError:
        return ""
    marker = f"launch #{launch_n}:"
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("[selfimprove]") and marker in lines[i]:
            return "\n".join(lines[i + 1:])
    return "\n".join(lines)


def launchers_running(name: str) -> list[int]:
    """Pids of live processes whose argv names this job (`--slurm.job-name NAME`): a launcher
    the CLI started but did not record before it was killed."""
    found = []
    if not _PROC.is_dir():
        return found
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if name.encode() in argv and any(a.startswith(b"--slurm.job") for a in argv):
            st = procs._stat(int(entry.name))
            if st and st[0] != "Z":
                found.append(int(entry.name))
    return found


def _wait_gone(alive, what: str, arm: ArmDir) -> None:
    deadline = time.monotonic() + SUBMIT_TIMEOUT_S
    while alive():
        if time.monotonic() > deadline:
            raise JobFailed(f"{arm.name}: {what} has not finished submitting after {SUBMIT_TIMEOUT_S:.0f} s; "
                            f"see {arm.train_log}, stop it, then {rerun_same()}")
        time.sleep(0.2)


def record_submission(arm: ArmDir, rec):
    """Wait for the launcher to exit, then record the job it submitted in job.json (None: it submitted none)."""
    _wait_gone(lambda: procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token), f"the engine's launcher (pid {rec.pid})", arm)
    job_id = slurm.submitted_id(launch_output(arm, rec.launch))
    fault_point(f"submitted:{arm.name}")  # submitted, job.json without its id: the name lookup finds it
    if job_id is None:  # the line is missing (a quiet launcher): the arm's unique name says which job
        named = named_jobs(arm, rec.job_name)
        job_id = named[0] if named else None
    if job_id is None:
        rc = _exit_code(arm, rec)
        arm.job_file.unlink(missing_ok=True)  # nothing was submitted: the next invocation launches afresh
        raise JobFailed(f"{arm.name}: the engine's launcher exited{f' with rc {rc}' if rc is not None else ''} without "
                        f"submitting a SLURM job (no 'Submitted batch job N' line, no job named {rec.job_name} in "
                        f"squeue); fix the cause it printed, then {rerun_same()}. Last lines of "
                        f"{arm.train_log}:\n{tail(arm.train_log)}")
    rec = rec.model_copy(update={"job_id": job_id, "job_log": job_log(arm, job_id, slurm.query(job_id))})
    write_job(arm, rec)
    return rec


def named_jobs(arm: ArmDir, name: str) -> list[str]:
    """slurm.live_jobs_named, waited for while the scheduler does not answer (never read as "no job": that
    would launch a second one, or drop the record of a queued one); JobLive after SUBMIT_TIMEOUT_S."""
    deadline = time.monotonic() + SUBMIT_TIMEOUT_S
    said = False
    while (named := slurm.live_jobs_named(name)) is None:
        if time.monotonic() > deadline:
            raise JobLive(f"{arm.name}: cannot reach the SLURM scheduler (`squeue -n {name}` gave no answer for "
                          f"{SUBMIT_TIMEOUT_S:.0f} s); nothing was submitted or dropped; {rerun_same()} once "
                          f"`squeue` answers")
        if not said:
            console.print(f"{arm.name}: cannot reach the SLURM scheduler (`squeue -n {name}` gave no answer); "
                          f"waiting for it before deciding whether job {name} exists", highlight=False, markup=False)
            said = True
        time.sleep(POLL_S)
    return named


def foreign(arm: ArmDir, rec, name: str | None) -> str | None:
    """Why job.json's SLURM job is not this run dir's, in one line (None: it is). A copied run dir keeps the
    original's job.json: its id and name are the original's, and acting on them (attach, cancel, judge the
    arm by them) would act on the original's job (issue 41: `cancel --run-dir COPY` cancelled it)."""
    from .job_record import launched_output_dir

    if rec is None or rec.scheduler != "slurm":
        return None
    old = launched_output_dir(arm, rec)
    if name is not None and rec.job_name != name or old is not None:
        where = f"writes to {old}" if old is not None else f"is named {rec.job_name}"
        return (f"{arm.name}: {arm.job_file} names SLURM job {rec.job_id or '(not yet known)'}, which {where}: not "
                f"this run dir's (its jobs are named {name}); a copy of another run dir keeps the original's records. "
                f"That job is left alone: go on with the original, or train this arm here with --restart")
    return None


def settle(arm: ArmDir, name: str, expect):
    """job.json completed from the scheduler before the arm's state is judged (see the module doc)."""
    rec = read_job(arm)
    if foreign(arm, rec, name):  # another run dir's job: never completed, adopted or waited for here
        return rec
    if rec is not None and rec.scheduler == "slurm" and rec.job_id is not None:
        return rec
    if rec is not None and rec.scheduler == "slurm":  # recorded launcher, id not yet: wait for it, then ask
        if rec.pid and procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token):
            return record_submission(arm, rec)
    else:  # no record (or one from before SLURM): a launcher that was never recorded may still be submitting
        _wait_gone(lambda: bool(launchers_running(name)), f"an unrecorded launcher of job {name}", arm)
    named = named_jobs(arm, name)
    if not named:
        if rec is not None and rec.scheduler == "slurm":
            arm.job_file.unlink(missing_ok=True)  # its launcher died before submitting: launch afresh
            return None
        return rec
    if len(named) > 1:
        console.print(f"{arm.name}: the scheduler holds {len(named)} jobs named {name} ({', '.join(named)}); attaching "
                      f"to {named[0]}: cancel the others with `scancel {' '.join(named[1:])}`", highlight=False,
                      markup=False)
    job_id = named[0]
    base = rec if rec is not None and rec.scheduler == "slurm" else None
    adopted = (base.model_copy(update={"job_id": job_id}) if base else JobRecord(
        pid=0, pgid=0, proc_start=None, cmd=[], cwd=os.getcwd(), host=socket.gethostname(), start_ts=time.time(),
        launch=(rec.launch + 1) if rec else 1, log=str(arm.train_log), expect=expect.for_arm(arm),
        scheduler="slurm", job_id=job_id, job_name=name))
    adopted = adopted.model_copy(update={"job_log": job_log(arm, job_id, slurm.query(job_id))})
    write_job(arm, adopted)
    console.print(f"{arm.name}: found SLURM job {job_id} ({name}) that job.json did not name; attaching to it",
                  highlight=False, markup=False)
    return adopted


# ---------------------------------------------------------------- state


def ask(rec) -> "slurm.JobInfo | None":
    """slurm.query for the record's job, None also when the scheduler names that id otherwise than the record:
    the id was reused (or the record forged), and the record's own job is gone."""
    info = slurm.query(rec.job_id)
    if info is not None and info.reachable and info.name and rec.job_name and info.name != rec.job_name:
        return None
    return info


def alive(rec) -> bool:
    """The scheduler holds the job (pending, running, requeued, ...); before the id is known, the launcher runs."""
    if rec.job_id is None:
        return bool(rec.pid) and procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token)
    info = ask(rec)
    return info is not None and info.live


HELD = ("JobHeldUser", "JobHeldAdmin")  # a held job never starts by itself


def state_line(arm: ArmDir, rec, info: "slurm.JobInfo | None", eval_complete: bool = False) -> str:
    """One line: the state, the job id, the log, the next step. An ended job whose final eval file is
    complete is done, whatever its exit code: the line says so instead of a next step. Printed with
    markup=False: "[slurm]" and a job's reason are text, not rich markup."""
    head = f"{arm.name}: SLURM job {rec.job_id}"
    log = rec.job_log or job_log(arm, rec.job_id or "?")
    if info is None:
        return (f"{head} is no longer known to the scheduler (ended over MinJobAge ago, no accounting); judged by "
                f"its files; log {log}")
    if not info.reachable:
        return (f"{head}: cannot reach the scheduler (squeue and scontrol give no answer); the job may still run, "
                f"so nothing is marked failed, relaunched or cancelled; next: wait (this line repeats when it "
                f"answers again; `sinfo` says whether slurmctld is up)")
    if info.state == "PENDING" and info.reason in HELD:
        return (f"{head} PENDING ({info.reason}): held, it never starts by itself; log {log}; next: "
                f"`scontrol release {rec.job_id}` to let it start, or `selfimprove cancel` to give up")
    if info.state in slurm.REQUEUED_STATES or (info.state == "PENDING" and info.restarts):
        why = f" ({info.reason})" if info.state == "PENDING" and info.reason else ""
        count = f" (restart {info.restarts})" if info.restarts else ""
        return (f"{head} {info.state}{why}: requeued{count}, the same job continues (its log {log} goes on); "
                f"next: wait")
    if info.state == "PENDING":
        return (f"{head} PENDING ({info.reason or 'no reason given'}); log {log}; next: wait, the scheduler starts it "
                f"(`selfimprove status` shows it; never resubmit; `selfimprove cancel` to give up)")
    if info.live:
        return (f"{head} {info.state}; log {log}; next: wait (Ctrl-C stops watching, the job keeps running; "
                f"{rerun_same()} to attach)")
    exit_code = f" (exit {info.exit_code})" if info.exit_code and info.exit_code != "0:0" else ""
    if eval_complete:
        return f"{head} {info.state}{exit_code}; final eval complete; log {log}"
    advice = slurm.ENDED_NEXT.get(info.state, "{rerun} with --restart").format(rerun=rerun())
    return f"{head} {info.state}{exit_code}; log {log}; next: {advice}"


def refuse_relaunch(arm: ArmDir, rec) -> None:
    """--restart / --resume while the scheduler holds the job (or cannot say it does not): refuse, naming why."""
    info = ask(rec)
    if info is not None and not info.reachable:
        raise JobLive(f"{arm.name}: cannot reach the SLURM scheduler, so whether job {rec.job_id} still runs is not "
                      f"known; --restart/--resume could start a second job into the same output: {rerun_same()} "
                      f"once `squeue` answers")
    raise JobLive(f"{arm.name}: SLURM job {rec.job_id} is still held by the scheduler; --restart/--resume would start a "
                  f"second job into the same output: wait for it, or cancel it first (`scancel {rec.job_id}` or "
                  f"`selfimprove cancel --run-dir {arm.dir.parent} --arm {arm.name}`), then re-run")


def describe_end(arm: ArmDir, rec, info: "slurm.JobInfo | None", rows: int, options: str) -> str:
    """Why the arm has no final eval, from the scheduler's last word and the disk; `options`: how to go on."""
    ck, ro = on_disk(arm)
    return (f"{state_line(arm, rec, info)}. Final eval {rows}/{rec.expect.num_examples} rows in "
            f"{rec.expect.eval_file}; on disk: highest checkpoint step {ck if ck is not None else 'none'}, highest "
            f"rollouts step {ro if ro is not None else 'none'}; {options}. Last lines of "
            f"{rec.job_log}:\n{_log_tail(rec.job_log)}")


def _log_tail(path: str | None) -> str:
    if not path or not Path(path).is_file():
        return "  | (the job wrote no log: it never started)"
    return tail(Path(path))


# The job's node wrote the final eval file; on a shared filesystem (NFS attribute caching) this host may
# see it some seconds after the scheduler says COMPLETED. Re-read it this long before calling it missing.
EVAL_FILE_LAG_S = 30.0


def await_rows(counter, expected: int, lag_s: float | None = None, poll_s: float = 1.0) -> int:
    """The final eval's row count, re-read for up to `lag_s` until it reaches `expected`."""
    deadline = time.monotonic() + (EVAL_FILE_LAG_S if lag_s is None else lag_s)
    rows = counter.count()
    while rows < expected and time.monotonic() < deadline:
        time.sleep(poll_s)
        rows = counter.count()
    return rows


def exit_rc(info: "slurm.JobInfo | None") -> int | None:
    if info is None or not info.exit_code or info.live:
        return None
    try:
        return int(info.exit_code.split(":")[0])
    except ValueError:
        return None
