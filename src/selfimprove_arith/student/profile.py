"""The built-in arithmetic student's per-kind profile on selfimprove-arith (profile.json, bench/).

Arithmetic-specific on purpose: selfimprove.rl.student is the generic student (any env), and these
helpers sample fresh selfimprove-arith problems of one kind and score them with the
env's own rubric.

    python -c "from selfimprove_arith.student.profile import per_kind_pass_at_k as f; print(f('selfimprove/tiny-arith'))"
"""

from __future__ import annotations

import random
from pathlib import Path

import torch

from selfimprove.rl import builtin_students
from selfimprove.rl.student import load_student, render_prompt, resolve_model



def kind_problems(tok, kind: str, n: int, rng_label: str, system_prompt: str | None) -> tuple[list[dict], list[list[int]]]:
    """`n` fresh selfimprove-arith problems of one kind (seeded by `rng_label`), as rows
    the env's rubric scores and as prompt token ids rendered the way the env renders them."""
    from selfimprove_arith import sample

    rng = random.Random(rng_label)
    system_turn = [{"role": "system", "content": system_prompt}] if system_prompt else []
    rows = [{"prompt": system_turn + [{"role": "user", "content": q}], "answer": str(a), "info": {}, "example_id": i}
            for i, (q, a) in enumerate(sample(kind, rng) for _ in range(n))]
    return rows, [render_prompt(tok, r["prompt"]) for r in rows]


@torch.no_grad()
def sampled_rewards(env, model, tok, rows: list[dict], ids: list[list[int]], *, temperature: float,
                    max_new_tokens: int = 24, generator: torch.Generator | None = None) -> list[float]:
    """One completion per row (greedy when temperature <= 0), scored by the env's own rubric."""
    from selfimprove.rl.policy import generate
    from selfimprove.rl.rollouts import score_completions

    comps, _ = generate(model, ids, max_new_tokens=max_new_tokens, temperature=temperature,
                        eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, generator=generator)
    scored = score_completions(env, rows, [tok.decode(c, skip_special_tokens=True) for c in comps])
    return [s["reward"] for s in scored]


@torch.no_grad()
def per_kind_pass_at_k(model_name: str | Path = "selfimprove/tiny-arith", k: int = 16, n_per_kind: int = 100,
                       temperature: float = 1.0, max_new_tokens: int = 24, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per problem kind of selfimprove-arith: greedy pass@1, sampled pass@1 and pass@k.

    Problems come from `selfimprove_arith.sample(kind, rng)` (fresh, seeded), scored
    by the env's own rubric. Returns {kind: {"greedy": ..., "pass@1": ..., f"pass@{k}": ...}}.
    """
    import verifiers as vf

    from selfimprove_arith import KINDS

    env = vf.load_environment("selfimprove-arith")
    path = resolve_model(str(model_name)) if builtin_students.find(str(model_name)) else Path(model_name)
    model, tok = load_student(path)
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        rows, ids = kind_problems(tok, kind, n_per_kind, f"{seed}-{kind}", env.system_prompt)
        greedy = sampled_rewards(env, model, tok, rows, ids, temperature=0.0, max_new_tokens=max_new_tokens)
        hits = torch.zeros(n_per_kind, k)
        for j in range(k):
            hits[:, j] = torch.tensor(sampled_rewards(env, model, tok, rows, ids, temperature=temperature,
                                                      max_new_tokens=max_new_tokens, generator=gen))
        out[kind] = {
            "greedy": sum(greedy) / n_per_kind,
            "pass@1": float(hits.mean()),
            f"pass@{k}": float((hits.max(dim=1).values > 0).float().mean()),
        }
    return out
