"""Every arm's eval accuracy over training steps, for the page's one overlay chart.

Each arm's points are its eval files, step by step (an arm evaluated only at its end has one),
each reduced to its accuracy by the sealed reader (`phases.evals.read_sealed`: example ids and
numbers only, no row's text leaves it), with a Wilson interval over its examples. The base
model's eval (the engine's eval at `layout.base_eval_step`, before any update) starts the chart:
read from iter_0's eval file at that step when it is there, else the step-0 eval reward mean
run.json `learning_signal` recorded (a reward mean, the accuracy only for a 0/1 reward: the chart
says which).

Where each arm starts (docs/how-to/report.md): iter_0 and run_b train from the base model;
the iterations, run_a and run_c resume from iter_0's final checkpoint, so their line starts at
iter_0's final eval. An arm's line joins its start to its own evals.
"""

from __future__ import annotations

from typing import Any

from ..errors import SelfImproveError
from ..models import Metrics, RunConfig
from ..phases.evals import read_sealed
from ..rundir import ArmDir, RunDir
from ..stats import wilson_interval

FROM_BASE = ("iter_0", "run_b")  # arms trained from the base model; the others resume from iter_0's end


def _accuracy(arm: ArmDir, step: int) -> dict[str, Any] | None:
    """{"step", "acc", "ci", "n"} of one eval file (per example, as eval_summary counts), None when unreadable."""
    try:
        rows, _dropped, _rule = read_sealed(arm.eval_file(step))
    except (SelfImproveError, OSError, ValueError):
        return None
    by_example: dict[Any, list[float]] = {}
    for ex, _reward, correct in rows:
        by_example.setdefault(ex, []).append(correct)
    if not by_example:
        return None
    solved = sum(sum(c) / len(c) for c in by_example.values())
    n = len(by_example)
    return {"step": step, "acc": solved / n, "ci": list(wilson_interval(solved, n)), "n": n}


def _eval_points(arm: ArmDir, final_step: int | None) -> list[dict[str, Any]]:
    steps = [s for s in arm.rollout_steps() if arm.eval_file(s).is_file()]
    if final_step is not None:
        steps = [s for s in steps if s <= final_step]  # a step past the recorded end: a relaunch's leftovers
    return [p for s in steps if (p := _accuracy(arm, s)) is not None]


def base_point(rd: RunDir, cfg: RunConfig) -> dict[str, Any] | None:
    """The base model's eval: {"step", "acc", "ci", "n", "source"} or None when neither record holds it."""
    step = rd.layout.base_eval_step
    point = _accuracy(rd.iter(0), step) if rd.iter(0).eval_file(step).is_file() else None
    if point is not None:
        return {**point, "source": f"iter_0's eval at step {step}"}
    signal = cfg.learning_signal or {}
    mean, n = signal.get("eval_step0_reward_mean"), signal.get("eval_step0_examples")
    if isinstance(mean, (int, float)) and isinstance(n, int) and n > 0:
        return {"step": step, "acc": float(mean), "ci": None, "n": n,
                "source": "run.json learning_signal: the step-0 eval's reward mean (the accuracy for a 0/1 reward)"}
    return None


def eval_overlay(rd: RunDir, cfg: RunConfig, metrics: Metrics, table: dict | None) -> dict[str, Any]:
    """{"base": base_point, "arms": [{"arm", "label", "points": [...], "start": point or None}]}, one per
    table row (seed 0 of an arm with several: the row's own record), in the table's order."""
    base = base_point(rd, cfg)
    arms = []
    iter0_end = None
    for row in (table or {}).get("rows", []):
        key = row["arm"]
        record = metrics.get(key)
        if record is None:
            continue
        points = [p for p in _eval_points(rd.arm(key), record.final_step)
                  if not (key == "iter_0" and base is not None and p["step"] == base["step"])]
        if not points or points[-1]["step"] != record.final_step:  # the record's figure when no file is left
            points.append({"step": record.final_step, "acc": record.eval_acc, "ci": list(record.acc_ci95),
                           "n": record.n_eval})
        if key == "iter_0":
            iter0_end = points[-1]
        arms.append({"arm": key, "label": row["label"], "points": points})
    for arm in arms:
        arm["start"] = base if arm["arm"] in FROM_BASE else iter0_end
    return {"base": base, "arms": arms}
