"""Can RL learn anything here? iter_0's reward spread, checked before Phase 3.

GRPO learns only from prompts whose rollouts disagree: the advantage is the
reward minus its group's mean, so a group whose rollouts all score the same
contributes nothing. A student that gets every rollout of an env wrong (the
built-in arithmetic student on a text task scores 0.000 everywhere) gives no
gradient at all: the loop would still "run", train and print a table that
measures nothing. So baseline reads, from iter_0's own output:

1. the first FIRST_TRAIN_STEPS train steps: per prompt group (same env and
   example id in a step), whether its rewards spread by more than SPREAD_EPS
   (with one rollout per prompt, whether the rewards spread across prompts);
2. the base-model eval (rewards only; eval rows stay sealed): the standard
   deviation of its per-example rewards. The seed dialect labels it step 0; prime-rl
   main's steps are 1-indexed, so its base eval is rollouts/step_1/eval
   (`OutputLayout.base_eval_step`; main orchestrator/types.py:27-30). The
   record keeps its `eval_step0_*` names for both.

Verdict: NO SIGNAL when the train groups' spread is (near) zero: the mean over
groups of their reward standard deviation (the raw advantage scale GRPO sees) is
below NEAR_ZERO_GROUP_SD, which a student solving ~1% of prompts in groups of 4
just clears (E[sd] ~ 0.017). Measured on reasoning-gym tasks with the arithmetic
student: 2 of 32 groups spread, by a 0.05 format floor of one scorer (any parsed
answer), mean group sd 0.001: "some spread" but nothing of the task to learn.
When the engine wrote no train rollouts, the step-0 eval rewards decide. Then
baseline stops with NO_SIGNAL_VERDICT (exit 4, like a failed gate) unless the
user passes --allow-no-signal; the verdict stays in run.json `learning_signal`
and finalize prints it instead of presenting the table as a result.

What is not covered: a reward floor that every group clears a little (a format
reward on most prompts) still counts as signal, though it teaches the format, not
the task; a student that learns from later steps only is not seen.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..engines.rollout_rows import group_rewards_of
from ..engines.rollouts import train_steps
from ..rundir import ArmDir
from .evals import eval_file, read_sealed

NO_SIGNAL_VERDICT = "the student gets no reward signal on this env; RL cannot learn; use a stronger model"
FIRST_TRAIN_STEPS = 5
SPREAD_EPS = 1e-6
NEAR_ZERO_GROUP_SD = 0.01  # mean within-group reward sd below this is "near zero" (see above)


def _train_groups(path: Path) -> list[list[float]]:
    """Rewards per prompt group of one train rollouts file (seed rows or v1 Episode records); torn lines skipped."""
    groups: dict[str, list[float]] = {}
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        for key, reward in group_rewards_of(rec) if isinstance(rec, dict) else []:
            groups.setdefault(key, []).append(reward)
    return list(groups.values())


def learning_signal(arm: ArmDir) -> dict:
    """The evidence and the verdict, as recorded in run.json `learning_signal`."""
    steps = train_steps(arm)
    steps = [s for s in steps if s >= 1][:FIRST_TRAIN_STEPS]
    groups = [g for s in steps for g in _train_groups(arm.train_file(s))]
    multi = [g for g in groups if len(g) > 1]
    spread = sum(1 for g in multi if max(g) - min(g) > SPREAD_EPS)
    group_sd = statistics.fmean(statistics.pstdev(g) for g in multi) if multi else None
    if groups and not multi:  # one rollout per prompt: no groups to compare, so the spread across prompts
        flat = [r for g in groups for r in g]
        spread = int(max(flat) - min(flat) > SPREAD_EPS)
        group_sd = statistics.pstdev(flat) if len(flat) > 1 else 0.0
    rewards: list[float] = []
    step0 = eval_file(arm, arm.layout.base_eval_step)
    if step0.is_file():
        rows, _, _ = read_sealed(step0)
        rewards = [r for _, r, _ in rows]
    eval_sd = statistics.pstdev(rewards) if len(rewards) > 1 else None
    if groups:
        has_signal = spread > 0 and group_sd >= NEAR_ZERO_GROUP_SD
    else:
        has_signal = eval_sd is None or eval_sd > SPREAD_EPS  # nothing measured: do not claim "no signal"
    return {
        "has_signal": has_signal,
        "verdict": None if has_signal else NO_SIGNAL_VERDICT,
        "train_steps": steps,
        "train_groups": len(groups),
        "train_groups_with_spread": spread,
        "train_mean_group_reward_sd": None if group_sd is None else round(group_sd, 6),
        "eval_step0_examples": len(rewards),
        "eval_step0_reward_sd": None if eval_sd is None else round(eval_sd, 6),
        "eval_step0_reward_mean": round(sum(rewards) / len(rewards), 6) if rewards else None,
        "allowed": False,  # set when the user continues with --allow-no-signal
    }


NOT_A_RESULT = ("NOT A RESULT: iter_0 had no reward signal (continued with --allow-no-signal), "
                "so no score of this run is evidence of learning")


def signal_state(learning_signal: dict | None) -> str:
    """run.json learning_signal as one word: "unchecked" (baseline has not checked), "yes", "none" (baseline
    stopped with exit 4, the run waits for the user's choice) or "none-allowed" (--allow-no-signal)."""
    if not learning_signal:
        return "unchecked"
    if learning_signal.get("has_signal", True):
        return "yes"
    return "none-allowed" if learning_signal.get("allowed") else "none"


def not_a_result(learning_signal: dict | None) -> str | None:
    """The warning every place that shows a score carries once the run went on without a signal, else None."""
    return NOT_A_RESULT if signal_state(learning_signal) == "none-allowed" else None
