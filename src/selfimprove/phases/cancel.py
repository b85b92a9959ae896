"""`cancel` and the jobs part of `status`: this run's own training jobs, local and SLURM, by what job.json recorded.

A run dir is untrusted input (issue 41): a forged or copied job.json must never make `cancel` signal a process
or scancel a job that is not this run's. So a record counts only when:

- local job: its pid, pgid, start time and token all match the live process (engines/procs.py), it was
  launched on this host, and it writes into this run dir (a copy's record names the original's job);
- SLURM job: the record's name is this run dir's own (si-<run id>[-<copy tag>]-<arm>), its id is digits
  only, and the scheduler's JobName for that id is that name (scancel gets `--name=NAME -- ID`, so the
  scheduler checks it again).

Every record that does not count gets one line saying why, and nothing is done to it. A scheduler that does
not answer is not "nothing to cancel": cancel then exits 75 naming the jobs it could not judge.

Cancelling leaves the run resumable: the arm's job ends (CANCELLED on SLURM, killed locally), the phase that
watched it stops with that line, and re-running the phase (or `run --run-dir R`) with --resume (from the last
checkpoint) or --restart trains the arm again. The scratchpad records who cancelled what and why, unless
the run is already closed (finalized or aborted: nothing is appended to it).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from ..engines import procs, slurm, slurm_jobs
from ..engines.job_record import JobRecord, read_job
from ..engines.job_state import launched_output_dir
from ..errors import JobLive, RunDirError, UsageError
from ..rundir import ArmDir, RunDir
from ..scratchpad import utc_stamp
from .slurm_launch import place_tag


@dataclass
class RunJobs:
    """Every job record of a run dir, sorted: the ones that count, and a line for each one that does not."""

    local: list[tuple[ArmDir, JobRecord]] = field(default_factory=list)  # live, provably this run's
    slurm: list[tuple[ArmDir, JobRecord, slurm.JobInfo | None]] = field(default_factory=list)  # this run's
    unreachable: list[tuple[ArmDir, JobRecord]] = field(default_factory=list)  # the scheduler did not answer
    notes: list[str] = field(default_factory=list)  # records that do not count, one line each
    damaged: list[str] = field(default_factory=list)  # job.json files that do not read, one line each


def _expected_name(rd: RunDir, arm: ArmDir) -> str:
    cfg = rd.read_run()
    return slurm.job_name(cfg.run_id or cfg.dataset, arm.name, place_tag(rd, cfg))


def _arm_dirs(rd: RunDir) -> list[ArmDir]:
    return [ArmDir(rd.root, p.name, rd.layout) for p in sorted(rd.root.iterdir())
            if p.is_dir() and (p / "job.json").is_file()] if rd.root.is_dir() else []


def run_jobs(rd: RunDir, arm_name: str | None = None) -> RunJobs:
    """This run's job records judged against the process table and the scheduler (read-only)."""
    found = RunJobs()
    for arm in _arm_dirs(rd):
        if arm_name is not None and arm.name not in (arm_name, _arm_dir_name(rd, arm_name)):
            continue
        try:
            rec = read_job(arm)
        except RunDirError as e:
            found.damaged.append(f"{str(e).splitlines()[0]} (cancel and status skip it: if a job of {arm.name} may "
                                 f"still run, find it with `ps` or `squeue --me` and stop it yourself; then restore "
                                 f"{arm.job_file} or delete it and re-run the phase with --restart)")
            continue
        if rec is None:
            continue
        if rec.scheduler == "slurm":
            _judge_slurm(rd, arm, rec, found)
        else:
            _judge_local(arm, rec, found)
    return found


def _judge_slurm(rd: RunDir, arm: ArmDir, rec: JobRecord, found: RunJobs) -> None:
    name = _expected_name(rd, arm)
    why = slurm_jobs.foreign(arm, rec, name)
    if why:
        found.notes.append(why)
        return
    if rec.job_id is None:
        if rec.pid and procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token):
            found.notes.append(f"{arm.name}: its launcher (pid {rec.pid}) is still submitting job {name}; "
                               "re-run cancel once it has (`selfimprove status` shows the job)")
        return
    info = slurm.query(rec.job_id)
    if info is not None and not info.reachable:
        found.unreachable.append((arm, rec))
        return
    if info is not None and info.name is not None and info.name != name:
        found.notes.append(f"{arm.name}: {arm.job_file} names SLURM job {rec.job_id}, which the scheduler calls "
                           f"{slurm.printable(info.name)}, not {name}: not this run's job (a reused id or a forged record); left alone")
        return
    found.slurm.append((arm, rec, info))


def _judge_local(arm: ArmDir, rec: JobRecord, found: RunJobs) -> None:
    if rec.host != socket.gethostname():
        found.notes.append(f"{arm.name}: its job was launched on host {rec.host}; run `selfimprove status` or "
                           "`selfimprove cancel` there")
        return
    who = procs.identify(rec.pid, rec.pgid, rec.proc_start, rec.token)
    if who == "foreign":
        found.notes.append(f"{arm.name}: {arm.job_file} names pid {rec.pid}, which runs but is not this arm's job "
                           "(another process now, or a record this tool did not write); left alone")
    elif who == "ours" and (old := launched_output_dir(arm, rec)) is not None:
        found.notes.append(f"{arm.name}: its job (pid {rec.pid}) writes to {old}, not to this run dir (a copy keeps "
                           "the original's records); left alone: cancel it with `--run-dir` of the original")
    elif who == "ours":
        found.local.append((arm, rec))


def step_of(arm: ArmDir) -> int | None:
    steps = arm.rollout_steps()
    return steps[-1] if steps else None


def live_jobs(rd: RunDir) -> dict[str, Any]:
    """`status`: every live job of the run (local: pid; SLURM: id, state), and a line per record that does not count."""
    found = run_jobs(rd)
    jobs = [{"arm": arm.name, "kind": "local", "pid": rec.pid, "step": step_of(arm), "max_steps": rec.expect.max_steps,
             "log": rec.log, "live": True} for arm, rec in found.local]
    for arm, rec, info in found.slurm:
        jobs.append({"arm": arm.name, "kind": "slurm", "job_id": rec.job_id, "job_name": rec.job_name,
                     "state": info.state if info else "UNKNOWN (the scheduler no longer knows it)",
                     "reason": info.reason if info else None, "live": bool(info and info.live),
                     "step": step_of(arm), "max_steps": rec.expect.max_steps, "log": rec.job_log})
    for arm, rec in found.unreachable:
        jobs.append({"arm": arm.name, "kind": "slurm", "job_id": rec.job_id, "job_name": rec.job_name,
                     "state": slurm.UNREACHABLE, "reason": "cannot reach the scheduler: the job may still run",
                     "live": True, "step": step_of(arm), "max_steps": rec.expect.max_steps, "log": rec.job_log})
    return {"jobs": jobs, "notes": found.notes + found.damaged}


def cancel(rd: RunDir, arm_name: str | None, why: str) -> dict[str, Any]:
    """Stop this run's live jobs (all, or one arm's); record it in the scratchpad of an open run.
    Returns {"cancelled": [...], "notes": [lines for records left alone], "damaged": [...]}.
    Raises JobLive (exit 75) when the scheduler does not answer for a job it holds or may hold."""
    rd.require()
    if arm_name is not None and not any(a.name in (arm_name, _arm_dir_name(rd, arm_name)) for a in _arm_dirs(rd)):
        raise UsageError(f"--arm {arm_name}: no job recorded for that arm in {rd.root} (see `selfimprove status`)")
    found = run_jobs(rd, arm_name)
    done = []
    for arm, rec, info in found.slurm:
        if info is None or not info.live:
            continue
        slurm.cancel(rec.job_id, rec.job_name)
        done.append({"arm": arm.name, "job_id": rec.job_id, "state_before": info.state})
    for arm, rec in found.local:
        procs.terminate_group(rec.pgid, rec.pid)
        done.append({"arm": arm.name, "pid": rec.pid, "state_before": "RUNNING"})
    if done and rd.read_run().end_ts is None:  # a closed run's scratchpad is final: nothing is appended to it
        listed = ", ".join(f"{d['arm']} ({'job ' + d['job_id'] if 'job_id' in d else 'pid ' + str(d['pid'])}, "
                           f"was {d['state_before']})" for d in done)
        rd.append_scratchpad(f"\n_{utc_stamp()}: cancelled job(s) {listed}: {why}. The run stays resumable: "
                             "re-run the phase (or `selfimprove run --run-dir` of this run) with --resume or "
                             "--restart to train these arms again._\n")
    if found.unreachable:
        ids = ", ".join(f"{a.name} (job {r.job_id})" for a, r in found.unreachable)
        cancelled = f"cancelled {len(done)} other job(s); " if done else ""
        raise JobLive(f"cannot reach the SLURM scheduler (squeue and scontrol give no answer), so whether {ids} "
                      f"still run is not known; {cancelled}re-run `selfimprove cancel --run-dir {rd.root}"
                      f"{' --arm ' + arm_name if arm_name else ''}` once `squeue` answers")
    return {"cancelled": done, "notes": found.notes, "damaged": found.damaged}


def _arm_dir_name(rd: RunDir, key: str) -> str | None:
    try:
        return rd.arm(key).name
    except Exception:  # not a metrics key (iter_N, run_a, ...): only the dir name can match
        return None

