"""Step 3e's bookkeeping: fill section 5 of the iteration's scratchpad entry.

The verdict has two parts. The skill's procedure's rule on the raw delta vs iter_{N-1}
(improved >= +0.01, flat, regressed <= -0.01, collapsed when accuracy falls
below half of iter_0's), and whether the change vs iter_0 is distinguishable
from noise at all: an exact McNemar test on the eval examples both arms share.
Only numeric eval fields are used (eval_summary.per_example).
"""

from __future__ import annotations

from ..rundir import RunDir, atomic_write_text, read_json_object
from ..scratchpad import WORKED_PLACEHOLDER
from ..stats import compare_arms, seed_verdict
from .context import RunContext
from .evals import NO_EVAL_SPLIT, evaluated_split, train_trajectory
from .signal import not_a_result

RESULTS_MARKER = "<!-- results:iter_{n} -->"  # where section 5 of iteration n's entry goes
RESULTS_PLACEHOLDER = "_to be filled at the end of training._"


def _trajectory_line(rd: RunDir, n: int) -> str:
    buckets = train_trajectory(rd.iter(n))
    if not buckets:
        return "n/a"
    return ", ".join(f"steps {b['first_step']}-{b['last_step']}: {b['reward_mean']:.3f}" for b in buckets)


def record_iteration(ctx: RunContext, n: int) -> dict:
    """Write the results of iter_n into the scratchpad; return the record (for record.json)."""
    rd = ctx.rd
    cur = rd.read_eval_summary(rd.iter(n))
    prev = rd.read_eval_summary(rd.iter(n - 1))
    base = rd.read_eval_summary(rd.iter(0))
    delta_prev = cur.eval_acc - prev.eval_acc
    verdict = seed_verdict(delta_prev, base.eval_acc, cur.eval_acc)
    vs_base = compare_arms(cur, base)
    lo, hi = cur.acc_ci95
    gen = read_json_object(rd.iter(n).dir / "generate.json") or {}
    p = vs_base.get("mcnemar_p")
    noise = (
        f"vs iter_0 on {vs_base['n_paired']} shared eval examples: delta {vs_base['delta']:+.3f}, "
        f"exact McNemar p = {p:.3g} -> {vs_base['verdict']}"
        if p is not None
        else "vs iter_0: no shared example ids to pair"
    )
    split = evaluated_split(ctx.hub)
    measured_on = f"examples: {NO_EVAL_SPLIT}" if split == NO_EVAL_SPLIT else "examples of the real eval split"
    warning = not_a_result(ctx.cfg.learning_signal)
    lines = [f"- **{warning}**"] if warning else []  # the score below is no evidence of learning
    lines += [
        f"- eval_acc {cur.eval_acc:.3f} (95% Wilson [{lo:.3f}, {hi:.3f}], n={cur.n_eval} rollouts on "
        f"{cur.n_examples} {measured_on}), reward mean {cur.eval_reward_mean:.3f}",
        f"- train reward by 20-step bucket: {_trajectory_line(rd, n)}",
        f"- delta vs iter_{n - 1}: {delta_prev:+.3f} -> verdict by the skill's procedure's rule: **{verdict}**",
        f"- noise check: {noise}",
        f"- checkpoint: `{cur.checkpoint}`",
    ]
    text = "\n".join(lines) + "\n" + f"{_rows_line(gen)}- what worked / what didn't / carry over: {WORKED_PLACEHOLDER}"
    marker = RESULTS_MARKER.format(n=n)
    pad = rd.read_scratchpad()
    if marker in pad:
        start = pad.rfind(RESULTS_PLACEHOLDER, 0, pad.index(marker))
        start = start if start >= 0 else pad.index(marker)
        pad = pad[:start] + text + pad[pad.index(marker) + len(marker):]
        atomic_write_text(rd.scratchpad, pad)
    elif f"eval_acc {cur.eval_acc:.3f} (95% Wilson" not in pad:
        rd.append_scratchpad(f"### iter_{n} results\n{text}\n")
    return {
        "iteration": n,
        "eval_acc": cur.eval_acc,
        "acc_ci95": list(cur.acc_ci95),
        "delta_vs_prev": delta_prev,
        "verdict": verdict,
        "vs_iter0": vs_base,
        "rows": gen.get("rows"),
        "rows_dropped_eval_overlap": gen.get("rows_dropped_eval_overlap"),
        "not_a_result": warning,
    }


def _rows_line(gen: dict) -> str:
    """The rows trained on, and how many the tool dropped for overlapping the evaluated questions (a count:
    which ones is never shown, gates/decontam.py)."""
    if gen.get("rows") is None:
        return ""
    dropped = gen.get("rows_dropped_eval_overlap") or 0
    return f"- rows: {gen['rows']}" + (f" ({dropped} dropped by the tool: they overlap the evaluated questions)" if dropped else "") + "\n"
