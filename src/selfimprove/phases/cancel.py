"""`cancel` and the SLURM part of `status`: this run's own scheduler jobs, by the ids job.json recorded.

Never by a user or a name pattern: only the job ids this run's arms recorded are read or cancelled.
Cancelling leaves the run resumable: the arm's job ends CANCELLED, the phase that watched it stops
with that line, and re-running the phase with --resume (from the last checkpoint) or --restart
trains the arm again. The scratchpad records who cancelled what and why.
"""

from __future__ import annotations

from typing import Any

from ..engines import slurm
from ..engines.jobs import read_job
from ..errors import RunDirError, UsageError
from ..rundir import ArmDir, RunDir
from ..scratchpad import utc_stamp


def slurm_arms(rd: RunDir) -> list[tuple[ArmDir, Any]]:
    """(arm, job.json) of every arm whose job went to SLURM with a known id, in dir order."""
    found = []
    for p in sorted(rd.root.iterdir()) if rd.root.is_dir() else []:
        if (p / "job.json").is_file():
            arm = ArmDir(rd.root, p.name, rd.layout)
            try:
                rec = read_job(arm)
            except RunDirError:  # a damaged job.json: the phase that owns the arm reports it
                continue
            if rec is not None and rec.scheduler == "slurm" and rec.job_id:
                found.append((arm, rec))
    return found


def slurm_jobs(rd: RunDir) -> list[dict[str, Any]]:
    """Each SLURM arm's job as the scheduler sees it now (status: read-only, lock-free)."""
    jobs = []
    for arm, rec in slurm_arms(rd):
        info = slurm.query(rec.job_id)
        jobs.append({"arm": arm.name, "job_id": rec.job_id, "job_name": rec.job_name,
                     "state": info.state if info else "UNKNOWN (the scheduler no longer knows it)",
                     "reason": info.reason if info else None, "live": bool(info and info.live), "log": rec.job_log})
    return jobs


def cancel(rd: RunDir, arm_name: str | None, why: str) -> list[dict[str, Any]]:
    """scancel this run's live jobs (all, or one arm's); record it in the scratchpad; what was cancelled."""
    rd.require()
    arms = slurm_arms(rd)
    if arm_name is not None:
        arms = [(a, r) for a, r in arms if a.name == arm_name or a.name == _arm_dir_name(rd, arm_name)]
        if not arms:
            raise UsageError(f"--arm {arm_name}: no SLURM job recorded for that arm in {rd.root} (see `selfimprove status`)")
    done = []
    for arm, rec in arms:
        info = slurm.query(rec.job_id)
        if info is None or not info.live:
            continue
        slurm.cancel(rec.job_id)
        done.append({"arm": arm.name, "job_id": rec.job_id, "state_before": info.state})
    if done:
        listed = ", ".join(f"{d['arm']} (job {d['job_id']}, was {d['state_before']})" for d in done)
        rd.append_scratchpad(f"\n_{utc_stamp()}: cancelled SLURM job(s) {listed}: {why}. The run stays resumable: "
                             "re-run the phase with --resume or --restart to train these arms again._\n")
    return done


def _arm_dir_name(rd: RunDir, key: str) -> str | None:
    try:
        return rd.arm(key).name
    except Exception:  # not a metrics key (iter_N, run_a, ...): only the dir name can match
        return None
