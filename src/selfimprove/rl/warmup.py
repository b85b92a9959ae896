"""The supervised warm-up that makes the built-in base student `selfimprove/tiny-arith`.

Deterministic and step-based (a seeded schedule reproduces exactly; a time-based
one would not). Each step draws a batch of fresh selfimprove-arith problems,
renders them exactly as the env does (the bare expression as the user turn,
through the chat template) and trains on the reply `<answer>N</answer><|im_end|>` only.
Eval-split questions are never trained on.

Designed for ROOM TO IMPROVE, which GRPO and the loop's lift depend on
(refs/cpu-engine.md, "When does RL help a tiny student"): RL lifts a tiny
student in 100 steps only where it already has the skill and the reward selects
the right behaviour. So the recipe makes three kinds of kinds:

- strong: `47+38` (add_2d) is learned first, alone (FIRST_STEPS): on its own the
  1M-parameter student learns it in ~500 steps, inside the 9-kind mix it only
  reaches 0.15 in 600 steps (bench/warmup.py measured both);
- partial by habit: `83-27` (sub_2d) and `27-83` (neg_result) are learned as
  skills, but most warm-up replies show a wrong habit (HABITS): the bare number
  without the answer tags, the magnitude without its minus sign. Greedy decoding
  follows the habit, sampling often does not (pass@16 >> pass@1): the regime in
  which RL selects the right behaviour, and in which data aimed at those kinds
  concentrates the gradient;
- weak or near zero: the other kinds get few examples (3-digit, products,
  parentheses, three operands).

bench/engine.py prints the per-kind greedy / pass@1 / pass@16 of the result.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time

import torch

from .policy import completion_logprobs, pack
from .student import new_student, render_prompt

# Stage 1: this kind alone (a single kind learns far faster than a mix).
FIRST_STEPS = 500
FIRST_WEIGHTS = {"add_2d": 1.0}

# Stage 2: share of warm-up examples per kind (normalised).
KIND_WEIGHTS = {
    "add_2d": 2.0,
    "sub_2d": 3.0,
    "neg_result": 2.0,
    "add_3d": 0.5,
    "sub_3d": 0.5,
    "add_three": 0.7,
    "add_sub": 0.7,
    "mul_1x2": 0.5,
    "paren_sub": 0.3,
}

# Wrong answer habits: on these kinds this share of the replies shows the habit.
HABITS: dict[str, tuple[str, float]] = {
    "sub_2d": ("no_tags", 0.7),
    "neg_result": ("drop_sign", 0.7),
}
HABIT_REPLIES = {
    "no_tags": lambda a: f"{a}",  # the number without <answer></answer>: the parser finds no answer
    "drop_sign": lambda a: f"<answer>{abs(a)}</answer>",  # 27-83 -> 56
}

STEPS = 1000  # optimizer steps, both stages
BATCH = 64  # examples per step
LR = 2e-3  # peak AdamW lr, linear warm-up 30 steps then cosine to 10%
SEED = 1234


RECIPE_VERSION = 2  # bump when the warm-up code changes in a way the constants don't show


def recipe_hash() -> str:
    """8 hex chars naming this recipe; part of the built-in student's cache directory."""
    from selfimprove_arith import SYSTEM_PROMPT

    from .student import tiny_config

    blob = json.dumps({"v": RECIPE_VERSION, "first": [FIRST_STEPS, FIRST_WEIGHTS], "w": KIND_WEIGHTS,
                       "habits": HABITS, "steps": STEPS, "batch": BATCH, "lr": LR, "seed": SEED,
                       "system": SYSTEM_PROMPT, "cfg": tiny_config().to_dict()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def warm_up(steps: int = STEPS, batch: int = BATCH, lr: float = LR, seed: int = SEED,
            weights: dict[str, float] | None = None, first_steps: int | None = None,
            first_weights: dict[str, float] | None = None, habits: dict[str, tuple[str, float]] | None = None,
            system_prompt: str | None = None, log=print, callback=None):
    """Train a fresh tiny student; returns (model, tokenizer). Same arguments, same weights.

    Arguments left as None take the recipe's constants. `system_prompt` defaults
    to the env's own (none); bench/warmup.py passes one to measure what it costs.
    """
    from selfimprove_arith import SYSTEM_PROMPT, make_split, sample

    weights = KIND_WEIGHTS if weights is None else weights
    first_steps = FIRST_STEPS if first_steps is None else first_steps
    first_weights = FIRST_WEIGHTS if first_weights is None else first_weights
    habits = HABITS if habits is None else habits
    system_prompt = SYSTEM_PROMPT if system_prompt is None else system_prompt
    system_turn = [{"role": "system", "content": system_prompt}] if system_prompt else []

    model, tok = new_student(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    rng = random.Random(seed)
    sealed = {q for q, _ in make_split("eval")}
    prompt_cache: dict[str, list[int]] = {}

    def prompt_ids(q: str) -> list[int]:
        if q not in prompt_cache:
            prompt_cache[q] = render_prompt(tok, system_turn + [{"role": "user", "content": q}])
        return prompt_cache[q]

    t0 = time.time()
    for step in range(steps):
        stage = first_weights if step < first_steps else weights
        kinds, w = list(stage), list(stage.values())
        prompts, comps = [], []
        while len(prompts) < batch:
            kind = rng.choices(kinds, w)[0]
            q, a = sample(kind, rng)
            if q in sealed:
                continue
            reply = f"<answer>{a}</answer>"
            if kind in habits and rng.random() < habits[kind][1]:
                reply = HABIT_REPLIES[habits[kind][0]](a)
            prompts.append(prompt_ids(q))
            comps.append(tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
        frac = step / max(1, steps - 1)
        cur = lr * min(1.0, (step + 1) / 30) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = cur
        packed = pack(prompts, comps, tok.pad_token_id)
        logp = completion_logprobs(model, packed)
        loss = -(logp * packed.target_mask).sum() / packed.target_mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if callback is not None:
            callback(step + 1, model, tok)  # e.g. snapshots while tuning the recipe
        if step % 100 == 0 or step == steps - 1:
            log(f"warm-up step {step}/{steps} | loss {loss.item():.4f} | lr {cur:.2e} | {time.time() - t0:.0f}s")
    model.eval()
    return model, tok
