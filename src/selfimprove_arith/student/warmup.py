"""The supervised warm-up that makes the built-in base student `selfimprove/tiny-arith`
(its architecture, a ~1M-parameter Qwen3 with a character tokenizer, is `selfimprove.rl.student.new_student`).

Deterministic and step-based (a seeded schedule reproduces exactly; a time-based
one would not). Each step draws a batch of fresh selfimprove-arith problems,
renders them exactly as the env does (the bare expression as the user turn,
through the chat template) and trains on the reply `<answer>N</answer><|im_end|>` only.
Eval-split questions are never trained on.

Designed for ROOM TO IMPROVE across many kinds, as with a real pretrained
model (refs/cpu-engine.md, "When does RL help a tiny student"): RL lifts a tiny
student in 50-100 steps only where it already has the skill and the reward
selects the right behaviour. Every kind's SKILL is trained on every example;
what differs is a wrong answer HABIT (HABITS) that hides it:

- solved: `47+38` (add_2d), learned first and alone (FIRST_STEPS: a single kind
  learns in ~400 steps, a mix far slower), no habit;
- partial (5 kinds: sub_2d, neg_result, sub_2d1d, neg_2d1d, sub_3d1d): 60% of
  the warm-up replies show a habit (the bare number without answer tags, or the
  magnitude without its minus sign). Greedy decoding mostly follows the habit,
  sampling often does not: GRPO on the real mix removes it in ~50 steps;
- hopeless on the real split (add_3d1d `347+8`, add_three `47+8+5`): 99.5% of
  the replies write a float (`355.0`), so all 16 samples of a prompt are wrong
  and GRPO gets no signal, although the digits are right;
- a practice kind outside the env's splits (add_2d1d `47+8`, PRACTICE_KINDS)
  with the same habit at 50%: the easier variant a teacher's stepping stones
  land on (one operand a digit shorter / the last term dropped).

What it measured (docs/concepts/built-in-student.md, docs/results.md): at the canonical lr 3e-5 the
hopeless kinds stay near 0 whether the 50 steps train on real data or on
stepping stones; at lr 2e-4 both unlock them (stones 0 -> 0.6-0.76, real data
0 -> 0.86-0.96), so targeted data has not beaten equal compute on this student.

bench/engine.py prints the per-kind greedy / pass@1 / pass@16 of the result.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time

import torch

from selfimprove.rl.policy import completion_logprobs, pack
from selfimprove.rl.student import CHARS, SPECIALS, TINY_ARCH, new_student, render_prompt

# Stage 1: this kind alone (a single kind learns far faster than a mix).
FIRST_STEPS = 400
FIRST_WEIGHTS = {"add_2d": 1.0}

# Kinds the student practises in its warm-up that the env's splits do NOT hold
# (a pretrained model has seen more than any one dataset): smaller siblings of
# three real kinds. They are where a teacher's "easier variant" lands.
def _add_2d1d(rng):
    from selfimprove_arith.problems import _d  # the env's own digit sampler

    a, b = _d(rng, 2), rng.randint(1, 9)
    a, b = (a, b) if rng.random() < 0.5 else (b, a)
    return f"{a}+{b}", a + b


PRACTICE_KINDS = {"add_2d1d": _add_2d1d}

# Stage 2: share of warm-up examples per kind (normalised).
KIND_WEIGHTS = {
    "add_2d": 1.0,
    "sub_2d": 1.5,
    "neg_result": 1.5,
    "sub_2d1d": 1.0,
    "neg_2d1d": 1.0,
    "sub_3d1d": 1.0,
    "add_3d1d": 1.0,
    "add_three": 1.2,
    "add_2d1d": 0.8,
}

# Wrong answer habits: on these kinds this share of the replies shows the habit.
# Every habit keeps the right digits (only the form is wrong), so the skill is
# trained on every example and the habit alone hides it.
HABITS: dict[str, tuple[str, float]] = {
    # partial kinds: greedy mostly follows the habit, sampling often does not
    "sub_2d": ("no_tags", 0.6),
    "sub_2d1d": ("no_tags", 0.6),
    "sub_3d1d": ("no_tags", 0.6),
    "neg_result": ("drop_sign", 0.6),
    "neg_2d1d": ("drop_sign", 0.6),
    # hopeless on the real split (the habit almost always wins) ...
    "add_3d1d": ("decimal", 0.995),
    "add_three": ("decimal", 0.995),
    # ... but not on their smaller sibling, where the same habit is a coin flip
    "add_2d1d": ("decimal", 0.5),
}
HABIT_REPLIES = {
    "no_tags": lambda q, a: f"{a}",  # the number without <answer></answer>: the parser finds no answer
    "drop_sign": lambda q, a: f"<answer>{abs(a)}</answer>",  # 27-83 -> 56
    "decimal": lambda q, a: f"<answer>{a}.0</answer>",  # a float where the integer is compared
}

STEPS = 2000  # optimizer steps, both stages
BATCH = 64  # examples per step
LR = 2e-3  # peak AdamW lr, linear warm-up 30 steps then cosine to 10%
SEED = 1234


RECIPE_VERSION = 3  # bump when the warm-up code changes in a way the constants don't show


def recipe() -> dict:
    """Everything that decides the built-in student's weights (hashed into its name).

    Only the recipe's constants and the architecture's numbers: no library's version string,
    so a newer transformers or torch does not make the shipped student stale (recipe.json
    records the versions that built it, as information)."""
    from selfimprove_arith import SYSTEM_PROMPT

    return {"v": RECIPE_VERSION, "first": [FIRST_STEPS, FIRST_WEIGHTS], "w": KIND_WEIGHTS,
            "practice": sorted(PRACTICE_KINDS), "habits": HABITS, "steps": STEPS, "batch": BATCH, "lr": LR,
            "seed": SEED, "system": SYSTEM_PROMPT, "arch": {**TINY_ARCH, "vocab_size": len(SPECIALS) + len(CHARS)}}


def recipe_hash() -> str:
    """8 hex chars naming this recipe; part of the built-in student's cache directory."""
    blob = json.dumps(recipe(), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def sample_any(kind: str, rng: random.Random):
    """A problem of a real kind (selfimprove_arith) or of a warm-up-only practice kind."""
    from selfimprove_arith import sample

    return PRACTICE_KINDS[kind](rng) if kind in PRACTICE_KINDS else sample(kind, rng)


def warm_up(steps: int = STEPS, batch: int = BATCH, lr: float = LR, seed: int = SEED,
            weights: dict[str, float] | None = None, first_steps: int | None = None,
            first_weights: dict[str, float] | None = None, habits: dict[str, tuple[str, float]] | None = None,
            system_prompt: str | None = None, log=print, callback=None):
    """Train a fresh tiny student; returns (model, tokenizer). Same arguments, same weights.

    Arguments left as None take the recipe's constants. `system_prompt` defaults
    to the env's own (none); bench/warmup.py passes one to measure what it costs.
    """
    from selfimprove_arith import SYSTEM_PROMPT, make_split

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
            q, a = sample_any(kind, rng)
            if q in sealed:
                continue
            reply = f"<answer>{a}</answer>"
            if kind in habits and rng.random() < habits[kind][1]:
                reply = HABIT_REPLIES[habits[kind][0]](q, a)
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
