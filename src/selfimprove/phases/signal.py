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
2. the step-0 eval of the base student (rewards only; eval rows stay sealed):
   the standard deviation of its per-example rewards.

Verdict: NO SIGNAL when no train group spread, or, when the engine wrote no
train rollouts, when the step-0 eval rewards do not spread either. Then
baseline stops with NO_SIGNAL_VERDICT (exit 4, like a failed gate) unless the
user passes --allow-no-signal; the verdict stays in run.json `learning_signal`
and finalize prints it instead of presenting the table as a result.

What is not covered: a signal that is present but tiny (one group in a
thousand) passes; a student that learns from later steps only is not seen.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..engines.rollouts import TRAIN_FILE, train_steps
from ..rundir import ArmDir
from .evals import eval_file, read_sealed

NO_SIGNAL_VERDICT = "the student gets no reward signal on this env; RL cannot learn; use a stronger model"
FIRST_TRAIN_STEPS = 5
SPREAD_EPS = 1e-6


def _train_groups(path: Path) -> list[list[float]]:
    """Rewards per prompt group (env name, example id) of one train rollouts file; torn lines skipped."""
    groups: dict[tuple[str, str], list[float]] = {}
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        reward = rec.get("reward") if isinstance(rec, dict) else None
        if isinstance(reward, (int, float)) and not isinstance(reward, bool):
            key = (str(rec.get("env_name")), str(rec.get("example_id")))
            groups.setdefault(key, []).append(float(reward))
    return list(groups.values())


def learning_signal(arm: ArmDir) -> dict:
    """The evidence and the verdict, as recorded in run.json `learning_signal`."""
    steps = train_steps(arm)
    steps = [s for s in steps if s >= 1][:FIRST_TRAIN_STEPS]
    groups = [g for s in steps for g in _train_groups(arm.rollout_step(s) / TRAIN_FILE)]
    multi = [g for g in groups if len(g) > 1]
    spread = sum(1 for g in multi if max(g) - min(g) > SPREAD_EPS)
    if groups and not multi:  # one rollout per prompt: no groups to compare, so the spread across prompts
        flat = [r for g in groups for r in g]
        spread = int(max(flat) - min(flat) > SPREAD_EPS)
    rewards: list[float] = []
    step0 = eval_file(arm, 0)
    if step0.is_file():
        rows, _, _ = read_sealed(step0)
        rewards = [r for _, r, _ in rows]
    eval_sd = statistics.pstdev(rewards) if len(rewards) > 1 else None
    if groups:
        has_signal = spread > 0
    else:
        has_signal = eval_sd is None or eval_sd > SPREAD_EPS  # nothing measured: do not claim "no signal"
    return {
        "has_signal": has_signal,
        "verdict": None if has_signal else NO_SIGNAL_VERDICT,
        "train_steps": steps,
        "train_groups": len(groups),
        "train_groups_with_spread": spread,
        "eval_step0_examples": len(rewards),
        "eval_step0_reward_sd": None if eval_sd is None else round(eval_sd, 6),
        "eval_step0_reward_mean": round(sum(rewards) / len(rewards), 6) if rewards else None,
        "allowed": False,  # set when the user continues with --allow-no-signal
    }
