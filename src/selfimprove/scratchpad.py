"""Render scratchpad.md entries (plain functions from run-dir data to markdown).

Phases append what these return with `RunDir.append_scratchpad`. Each entry
starts with an HTML comment marker, so a phase that re-runs after a kill can
tell whether its entry is already there (`has_entry`) and never writes it twice.
Only aggregates of eval rows ever appear here (the scratchpad is the teacher's
reading, and eval rows are sealed); train trajectories come from train rollouts.
"""

from __future__ import annotations

from datetime import datetime, timezone

from .models import EvalSummary


def marker(key: str) -> str:
    """The invisible tag an entry carries, e.g. `<!-- selfimprove:iter_0 -->`."""
    return f"<!-- selfimprove:{key} -->"


def has_entry(text: str, key: str) -> bool:
    return marker(key) in text


def utc_stamp(ts: float | None = None) -> str:
    dt = datetime.fromtimestamp(ts, tz=timezone.utc) if ts is not None else datetime.now(timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_acc(summary: EvalSummary) -> str:
    """'0.415 (95% CI 0.348-0.485, n=200)'."""
    lo, hi = summary.acc_ci95
    return f"{summary.eval_acc:.3f} (95% CI {lo:.3f}-{hi:.3f}, n={summary.n_examples})"


def render_trajectory(trajectory: list[dict]) -> str:
    """A markdown table of mean train reward per step bucket (from `phases.evals.train_trajectory`)."""
    if not trajectory:
        return "_no train rollouts found_"
    rows = ["| steps | mean train reward | steps seen |", "|---|---|---|"]
    rows += [f"| {b['steps']} | {b['reward_mean']:.3f} | {b['n_steps']} |" for b in trajectory]
    return "\n".join(rows)


def render_iter0(summary: EvalSummary, *, trajectory: list[dict] | None, init_from: str | None = None,
                 ts: float | None = None) -> str:
    """The seed's iter_0 entry: source, eval_acc with interval and n, trajectory by 20-step buckets, checkpoint.

    For --init-from the source reads "Inherited via --init-from" and there is no trajectory (seed 2A.3).
    """
    lines = [marker("iter_0"), f"## Iteration 0 — baseline ({utc_stamp(ts)})", ""]
    if init_from:
        lines.append(f"- Source: Inherited via --init-from `{init_from}` (step {summary.final_step})")
    else:
        lines.append(f"- Source: trained here on the real environment ({summary.final_step} steps)")
    lines += [
        f"- eval_acc: {fmt_acc(summary)}; correctness rule: {summary.correct_rule}",
        f"- eval_reward_mean: {summary.eval_reward_mean:.3f} over {summary.n_eval} eval rollouts",
    ]
    if summary.train_reward_mean is not None:
        steps = summary.train_reward_steps
        span = f"steps {steps[0]}-{steps[-1]}" if steps else "last steps"
        lines.append(f"- train_reward_mean: {summary.train_reward_mean:.3f} ({span})")
    if summary.dropped_lines:
        lines.append(f"- note: {summary.dropped_lines} torn eval line(s) dropped")
    lines.append(f"- Checkpoint: `{summary.checkpoint or 'none'}`")
    if not init_from:
        lines += ["", "Train reward trajectory (20-step buckets):", "", render_trajectory(trajectory or [])]
    return "\n".join(lines) + "\n"
