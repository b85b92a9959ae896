"""`status`: a read-only view of where a run stands. Never takes the lock,
never writes, so it is safe while another phase runs."""

from __future__ import annotations

import time
from typing import Any

from ..models import RunConfig
from ..rundir import RunDir
from .cancel import live_jobs
from .context import RunContext
from .phase4_state import missing_phase4_arms, phase4_arms
from .signal import not_a_result, signal_state

SHOWN_MISSING = 4  # missing arms named one by one in a line; the rest are counted (--seeds 32 has ~100)


def missing_text(missing: list[dict[str, Any]], *, why: bool = True) -> str:
    """The missing Phase 4 arms in one bounded phrase: the first few by name (and why), then counts."""
    shown = [f"{m['arm']} ({m['why']})" if why else m["arm"] for m in missing[:SHOWN_MISSING]]
    rest = missing[SHOWN_MISSING:]
    if rest:
        failed = sum(m["failed"] for m in rest)
        shown.append(f"and {len(rest)} more ({failed} failed, {len(rest) - failed} not trained yet)")
    return "; ".join(shown) if why else ", ".join(shown)


def next_step(ctx: RunContext) -> tuple[str, str]:
    """(phase reached, what to run next), derived from the artefacts on disk."""
    rd, cfg = ctx.rd, ctx.cfg
    root = rd.root
    missing = missing_phase4_arms(rd, cfg)
    if missing and any(m["failed"] for m in missing):  # a dead arm outranks "finished": recover it first
        return "compare", missing[0]["fix"]
    if missing and rd.best_iter_json.exists():  # compare started (or added seeds) and stopped before the end
        return "compare", missing[0]["fix"]
    if cfg.finalized():
        return "finalize", "nothing: the run is finished"
    if cfg.ended_as() == "aborted":
        return "aborted", f"selfimprove finalize --run-dir {root}"
    if not rd.hub_env_json.exists():
        return "bootstrap", f"selfimprove introspect --run-dir {root}"
    if not rd.iter(0).eval_summary.exists():
        return "introspect", f"selfimprove baseline --run-dir {root}"
    if signal_state(cfg.learning_signal) == "none":  # baseline stopped with exit 4: the user decides
        return "baseline", (f"your choice: iter_0 gets no reward signal, so RL cannot learn here; use a stronger "
                            f"student or another env (a new run: `selfimprove bootstrap`), or on request only: "
                            f"`selfimprove baseline --run-dir {root} --allow-no-signal` (then nothing is a result)")
    if cfg.status == "running":
        if failed := failed_iteration_job(rd):  # the failure and its fix while it stands, not a bare "iterate"
            return "iterate", failed
        done = [i for i in rd.iter_indices() if i > 0 and (rd.iter(i).dir / "record.json").exists()]
        return ("iterate" if done else "baseline"), f"selfimprove iterate --run-dir {root}"
    arms_done = {r.arm for r in rd.read_metrics().iters}
    if not rd.best_iter_json.exists() or not phase4_arms(rd, cfg, arms_done) <= arms_done:
        return "iterate", f"selfimprove compare --run-dir {root}"
    return "compare", f"selfimprove finalize --run-dir {root}"


def failed_iteration_job(rd: RunDir) -> str | None:
    """What to do about the current iteration's failed training job (its job.json says it crashed before its
    final eval), in one line: the failure's first line and the fix; None when there is no such job."""
    from ..engines.jobs import describe_crash, job_state, read_job
    from ..errors import SelfImproveError
    from .iteration_steps import launch_is_stale

    n = max((i for i in rd.iter_indices() if i > 0), default=None)
    if n is None:
        return None
    it = rd.iter(n)
    try:
        rec = read_job(it)
        if rec is None or it.eval_summary.is_file() or job_state(it) != "crashed":
            return None
        failure = describe_crash(it, rec).splitlines()[0]
    except (OSError, SelfImproveError):
        return None
    if launch_is_stale(it):
        return (f"`selfimprove iterate --run-dir {rd.root}`: it launches iter_{n} afresh on the regenerated "
                f"dataset (the failed launch trained the previous one: {failure})")
    return (f"iter_{n}'s training job failed: {failure}; fix that (for data the engine refused: gen_dataset.py, "
            f"then `selfimprove iterate --run-dir {rd.root}` regenerates and launches afresh), or re-run "
            f"`selfimprove iterate --run-dir {rd.root} --restart` to train it again as it is")


def budget_clock(cfg: RunConfig) -> tuple[str, float | None]:
    """("not_started" | "running" | "stopped", seconds charged so far or None).

    --budget caps Phase 3 only; its clock starts at the first `iterate`
    (phase3_start_ts). Before that nothing is charged; once Phase 3 has ended
    (status is no longer running) the clock is stopped and Phase 4/5 are not charged."""
    if cfg.phase3_start_ts is None:
        return ("not_started" if cfg.status == "running" else "stopped"), None
    if cfg.status != "running":
        return "stopped", None
    return "running", time.time() - cfg.phase3_start_ts


def run_status(rd: RunDir) -> dict[str, Any]:
    rd.require()
    ctx = RunContext.load(rd)  # no lock: status only reads, so it may run beside a phase
    cfg = ctx.cfg
    metrics = rd.read_metrics()
    elapsed = (cfg.end_ts or time.time()) - cfg.start_ts
    phase, nxt = next_step(ctx)
    clock, used = budget_clock(cfg)
    jobs = live_jobs(rd)
    return {
        "run_dir": str(rd.root),
        "dataset": cfg.dataset,
        "hub_id": cfg.hub_id,
        "model": cfg.model,
        "engine": cfg.engine,
        "status": cfg.status,
        "end_reason": None if cfg.status == "running" else cfg.ended_as(),
        "reason": cfg.reason,
        # iter_0's reward spread (phases/signal.py): unchecked / yes / none (baseline stopped, exit 4) /
        # none-allowed (--allow-no-signal: then not_a_result is set and every score is no result)
        "learning_signal": signal_state(cfg.learning_signal),
        "learning_signal_verdict": (cfg.learning_signal or {}).get("verdict"),
        "not_a_result": not_a_result(cfg.learning_signal),
        "phase_reached": phase,
        "next": nxt,
        "elapsed_s": round(elapsed, 1),  # wall time since bootstrap (not the budget)
        "budget_s": cfg.budget_seconds,  # caps Phase 3 only
        "budget_clock": clock,
        "phase3_start_ts": cfg.phase3_start_ts,
        "budget_used_s": None if used is None else round(used, 1),
        "budget_left_s": None if used is None else round(max(0.0, cfg.budget_seconds - used), 1),
        "max_iters": cfg.max_iters,
        "iterations_started": rd.iter_indices(),
        "arms": [r.model_dump(mode="json") for r in metrics.iters],
        "compact_warnings": cfg.compact_warnings,
        "teacher": (cfg.teacher or {}).get("spec"),  # an explicit `run --teacher`, as recorded (never a key)
        "teacher_tokens": cfg.teacher_tokens,  # --teacher llm:MODEL: tokens per iteration, paid requests only
        "phase4_errors": [e.model_dump(mode="json") for e in cfg.phase4_errors],
        "phase4_missing": missing_phase4_arms(rd, cfg),
        "plot": str(rd.plot_png) if rd.plot_png.exists() else None,
        # every job of the run: local (pid, step, log; live only) and SLURM (id, state, reason, step, log)
        "jobs": jobs["jobs"],
        "slurm_jobs": [j for j in jobs["jobs"] if j["kind"] == "slurm"],
        "job_notes": jobs["notes"],  # job records that do not count (a copy's, a forged one, a damaged one)
    }
