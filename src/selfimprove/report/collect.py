"""What the run report page shows, gathered from a run dir as plain data (report/page.py renders it).

It reads what the run wrote and recomputes no statistic: the summary table, verdict and
recommendation are `phases.finalize.build_table`'s (what `finalize` prints, passed in), the learning curves
are the per-step means of the TRAIN rollouts (`engines.rollouts.train_rewards`, as the progress
bar and the scratchpad trajectory read them), the eval points are the arms' metrics.json records.
Eval rows are sealed: an eval figure is a number metrics.json or eval_summary.json already holds,
or one the sealed reader gives (`overlay`: ids and numbers only). The one exception is `flips`: the
text of the eval examples Run A and Run C disagree on, gathered only once the run is finalized,
when no teacher turn remains (report/flips.py says why that is safe).

It works on a run at any stage: each part is gathered on its own, and a part that does not
exist yet becomes a line in `missing` saying what is missing and which command makes it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..engines.rollouts import train_rewards, train_steps
from ..errors import RunDirError, SelfImproveError
from ..models import IterRecord, Metrics, RunConfig
from ..rundir import ArmDir, RunDir
from ..ui import fmt_duration
from .flips import flipped_examples
from .iterations import iteration_parts, weakness_parts
from .overlay import eval_overlay


def _metrics(rd: RunDir) -> Metrics:
    return rd.read_metrics() if rd.metrics_json.is_file() else Metrics()


def train_curve(arm: ArmDir) -> tuple[list[int], list[float]]:
    """(steps, mean train reward of each step) of one arm, from its TRAIN rollouts files."""
    steps, rewards = [], []
    for s in train_steps(arm):
        r = train_rewards(arm.train_file(s))
        if r:
            steps.append(s)
            rewards.append(sum(r) / len(r))
    return steps, rewards


def _curves(rd: RunDir, metrics: Metrics, table: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One chart per arm of the table: each training seed's train reward per step and its eval point."""
    charts = []
    for row in (table or {}).get("rows", []):
        members = []
        for m in row["members"]:
            steps, rewards = train_curve(rd.arm(m["arm"]))
            record = metrics.get(m["arm"])
            members.append({
                "arm": m["arm"], "seed": m["seed"], "steps": steps, "rewards": rewards,
                "eval": {"step": record.final_step if record else None, "acc": m["eval_acc"], "ci": m["acc_ci95"],
                         "n_eval": m["n_eval"]},
            })
        charts.append({"arm": row["arm"], "label": row["label"], "eval_split": row["eval_split"], "members": members})
    return charts


def _ts(record: IterRecord | None) -> float | None:
    return record.ts if record is not None else None


def hub_problem(rd: RunDir) -> str | None:
    """hub_env.json's one-line error when it exists and fails its model (None when fine or absent)."""
    if not rd.hub_env_json.is_file():
        return None
    try:
        rd.read_hub_env()
    except RunDirError as e:
        return str(e)
    return None


def timeline(rd: RunDir, cfg: RunConfig, metrics: Metrics) -> list[dict[str, Any]]:
    """The phases as spans of unix time, from the timestamps run.json, hub_env.json and metrics.json hold.

    A phase's span runs from the end of the one before (its start is not recorded) to the time
    its result was recorded; a phase under way has no end. A damaged hub_env.json leaves introspect
    out (the page says the timeline is partial, `hub_problem`)."""
    spans: list[dict[str, Any]] = []
    hub = rd.read_hub_env() if rd.hub_env_json.is_file() and hub_problem(rd) is None else None
    last = cfg.start_ts

    def add(label: str, end: float | None, note: str = "") -> None:
        nonlocal last
        spans.append({"label": label, "start": last, "end": end,
                      "note": note or (fmt_duration(end - last) if end is not None else "not finished")})
        if end is not None:
            last = max(last, end)

    if hub is not None and hub.introspected_at:
        add("introspect", hub.introspected_at)
    iter0 = metrics.get("iter_0")
    if iter0 is not None or cfg.phase3_start_ts is not None:
        add("baseline (iter_0)", _ts(iter0) or cfg.phase3_start_ts)
    elif hub is not None:
        add("baseline (iter_0)", None)
    if cfg.phase3_start_ts is not None:
        last = max(last, cfg.phase3_start_ts)
    iters = sorted((r for r in metrics.iters if r.iter and r.replicate_of is None), key=lambda r: r.iter)
    for r in iters:
        add(f"iteration {r.iter}", r.ts)
    phase4 = [r.ts for r in metrics.iters if r.iter is None or r.replicate_of is not None]
    if phase4 and all(t is not None for t in phase4):
        add("compare (Phase 4)", max(phase4))  # type: ignore[arg-type]
    if cfg.end_ts is not None:
        add("finalize" if cfg.status == "finalized" else f"end ({cfg.status})", cfg.end_ts)
    return spans


def _missing(rd: RunDir, cfg: RunConfig, metrics: Metrics, table: dict | None) -> list[str]:
    """What this run has not produced yet, each with the command that produces it. A closed run (finalized
    or aborted: run.json end_ts) refuses those commands (exit 5), so there each item is stated without one,
    and one line says why and what is possible instead (the page advised `introspect` on an aborted run)."""
    root = rd.root
    closed = cfg.end_ts is not None

    def run_it(command: str) -> str:
        return "" if closed else f" (`selfimprove {command} --run-dir {root}`)"

    out = []
    if not rd.hub_env_json.is_file():
        out.append(f"introspect has not run: no hub_env.json{run_it('introspect')}")
    if metrics.get("iter_0") is None:
        out.append(f"no baseline: iter_0 is not recorded in metrics.json{run_it('baseline')}")
    iters = [r.iter for r in metrics.iters if r.iter and r.replicate_of is None]
    if metrics.get("iter_0") is not None and not iters:
        out.append(f"no iteration has finished{run_it('iterate')}")
    arms = {r.arm for r in metrics.iters}
    absent = [a for a in ("run_a", "run_b", "run_c") if a not in arms]
    if iters and absent:
        out.append(f"Phase 4 has not trained {', '.join(absent)}, so there is no verdict on the targeted data yet"
                   f"{run_it('compare')}")
    if not closed:
        out.append(f"the run is not finalized (status {cfg.status}): the table below is provisional "
                   f"(`selfimprove finalize --run-dir {root}`)")
    if table and table.get("rows") and not table.get("verdict") and not absent:
        out.append("no verdict: Run A is missing from metrics.json")
    if closed and out:
        out.append(closed_line(cfg, root))
    return out


def closed_line(cfg: RunConfig, root: Path) -> str:
    """Why a closed run will not produce what it lacks, and what can be done instead."""
    if cfg.status == "aborted":
        return (f"the run was aborted ({cfg.reason or 'no reason recorded'}): it will not produce these, and its "
                "phase commands refuse it; start a new run with `selfimprove bootstrap` once the cause is fixed")
    return (f"the run is finalized: its phase commands refuse it; only `selfimprove compare --run-dir {root} "
            "--seeds N` reopens it on purpose, for more Phase 4 seeds")


def progress(rd: RunDir, cfg: RunConfig) -> dict[str, Any] | None:
    """Where an open run stands, as `selfimprove status` says it (phases.status.run_status: the phase
    reached, the live jobs with pid, arm, step and log, the next command); None for a closed run, or
    when the status cannot be read (the page then shows what the files say, without it)."""
    from ..phases.status import run_status  # the status logic is the command's; the page only shows it

    if cfg.end_ts is not None:
        return None
    try:
        s = run_status(rd)
    except (SelfImproveError, OSError) as e:
        return {"error": str(e)}
    return {"phase": s["phase_reached"], "next": s["next"], "jobs": [j for j in s["jobs"] if j["live"]],
            "notes": s["job_notes"]}


def collect(rd: RunDir, table: dict[str, Any] | None) -> dict[str, Any]:
    """Everything the page shows, as plain data. `table` is `phases.finalize.build_table`'s (None before
    any arm is recorded): the caller computes it, so this package never imports the phase that writes it."""
    cfg = rd.read_run()
    metrics = _metrics(rd)
    hub = hub_problem(rd)
    weakness = weakness_parts(rd, metrics, cfg.group_by)  # the run.json read above: one read per page
    iterations = iteration_parts(rd, cfg, metrics)
    problems = ([hub] if hub else []) + ([weakness["error"]] if weakness and weakness.get("error") else [])
    problems += [table["error"]] if table and table.get("error") else []
    problems += [p for it in iterations for p in it["problems"]]
    return {
        "run_dir": str(rd.root),
        "generated_at": time.time(),
        "run": {"dataset": cfg.dataset, "hub_id": cfg.hub_id, "model": cfg.model, "run_id": cfg.run_id,
                "status": cfg.status, "end_reason": cfg.end_reason, "reason": cfg.reason, "max_iters": cfg.max_iters,
                "budget_seconds": cfg.budget_seconds, "seeds": cfg.seeds, "steps_per_run": cfg.steps_per_run,
                "batch_size": cfg.batch_size, "rollouts_per_example": cfg.rollouts_per_example,
                "eval_examples": cfg.eval_examples, "engine": cfg.engine, "start_ts": cfg.start_ts,
                "end_ts": cfg.end_ts, "total_duration_s": cfg.total_duration_s, "finalized": cfg.finalized()},
        "table": table,
        "missing": _missing(rd, cfg, metrics, table),
        "curves": _curves(rd, metrics, table),
        "overlay": eval_overlay(rd, cfg, metrics, table),
        "flips": flipped_examples(rd, cfg),
        "progress": progress(rd, cfg),
        "weakness": weakness,
        "iterations": iterations,
        "timeline": timeline(rd, cfg, metrics),
        "timeline_note": f"The timeline is partial: {hub}" if hub else None,
        # the run dir's records that failed their model, one line each (`selfimprove report` prints them)
        "problems": list(dict.fromkeys(problems)),
        "teacher_tokens": dict(cfg.teacher_tokens),
    }
