"""The supervised warm-up that makes the built-in base student `selfimprove/tiny-arith`.

Deterministic and step-based (a seeded schedule reproduces exactly; a time-based
one would not). Each step draws a batch of fresh selfimprove-arith problems,
renders them exactly as the env does (its system prompt + the question, through
the chat template) and trains on the reply `<answer>N</answer><|im_end|>` only.

Designed for ROOM TO IMPROVE, which the product's lift benchmark depends on
(refs/cpu-engine.md, "When does RL help a tiny student"): the kinds are NOT
mixed equally, unlike the env's splits. The easy kinds get most examples
(strong), the middle kinds some (partial: single-sample well below best-of-16),
and the hard kinds very few (near zero). RL on the real mix then spends most
groups on solved or hopeless kinds, while data aimed at the partial kinds
concentrates the gradient. Eval-split questions are never trained on.
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

# Share of warm-up examples per kind (normalised). Tuned by measuring per-kind
# pass@1 / pass@16 of the result (bench/engine.py prints them).
KIND_WEIGHTS = {
    "add_2d": 6.0,
    "sub_2d": 6.0,
    "add_3d": 2.0,
    "sub_3d": 2.0,
    "add_three": 1.0,
    "add_sub": 1.0,
    "mul_1x2": 0.6,
    "paren_sub": 0.3,
    "neg_result": 0.15,
}

STEPS = 900  # optimizer steps
BATCH = 64  # examples per step
LR = 2e-3  # peak AdamW lr, linear warm-up 30 steps then cosine to 10%
SEED = 1234


RECIPE_VERSION = 1  # bump when the warm-up code changes in a way the constants don't show


def recipe_hash() -> str:
    """8 hex chars naming this recipe; part of the built-in student's cache directory."""
    from .student import tiny_config

    blob = json.dumps({"v": RECIPE_VERSION, "w": KIND_WEIGHTS, "steps": STEPS, "batch": BATCH, "lr": LR,
                       "seed": SEED, "cfg": tiny_config().to_dict()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def warm_up(steps: int = STEPS, batch: int = BATCH, lr: float = LR, seed: int = SEED,
            weights: dict[str, float] | None = None, log=print, callback=None):
    """Train a fresh tiny student; returns (model, tokenizer). Same arguments, same weights."""
    from selfimprove_arith import SYSTEM_PROMPT, make_split, sample

    weights = weights or KIND_WEIGHTS
    model, tok = new_student(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    rng = random.Random(seed)
    kinds, w = list(weights), list(weights.values())
    sealed = {q for q, _ in make_split("eval")}
    prompt_cache: dict[str, list[int]] = {}

    def prompt_ids(q: str) -> list[int]:
        if q not in prompt_cache:
            prompt_cache[q] = render_prompt(tok, [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": q}])
        return prompt_cache[q]

    t0 = time.time()
    for step in range(steps):
        prompts, comps = [], []
        while len(prompts) < batch:
            q, a = sample(rng.choices(kinds, w)[0], rng)
            if q in sealed:
                continue
            prompts.append(prompt_ids(q))
            comps.append(tok(f"<answer>{a}</answer>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
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
