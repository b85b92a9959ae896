"""How fast does the tiny student learn in the supervised warm-up? (issue 3 diagnosis). Not a test.

    .venv/bin/python bench/warmup.py                          # the 4 default variants, ~15 min
    .venv/bin/python bench/warmup.py --variant prompt/add_2d --steps 600 --seed 7

Runs the product's own warm-up (`selfimprove_arith.student.warmup.warm_up`: same model,
optimizer and schedule) under variants and prints per-kind greedy accuracy every
`--every` steps, so that recipe choices rest on measurements:

    env/<weights>      prompts rendered as the env renders them (no system turn)
    prompt/<weights>   the same with a system turn (PROMPT below, the env's former one)

<weights>: `recipe` (the built-in student's recipe: add_2d alone first, then the
mix, with its answer habits), `mix` (the stage-2 mix from step 0, no habits) or
one kind name (that kind only). Accuracy: greedy, `--n` fresh problems per kind
(seeded by kind name, drawn with selfimprove_arith.sample), scored by the env's
own rubric (so a habit reply counts as wrong). Writes bench/out/warmup.txt.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see selfimprove/rl/cli.py
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

DEFAULT_VARIANTS = ["env/add_2d", "prompt/add_2d", "env/mix", "env/recipe"]
PROMPT = "Compute the expression. Reply with the result only, as <answer>N</answer>."


def greedy_per_kind(env, model, tok, kinds, system_prompt: str, n: int) -> dict[str, float]:
    from selfimprove_arith.student.profile import kind_problems, sampled_rewards

    out = {}
    model.eval()
    for kind in kinds:
        rows, ids = kind_problems(tok, kind, n, f"warmup-bench-{kind}", system_prompt)
        out[kind] = sum(sampled_rewards(env, model, tok, rows, ids, temperature=0.0)) / n
    model.train()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", help=f"default: {' '.join(DEFAULT_VARIANTS)}")
    ap.add_argument("--steps", type=int, default=None, help="default: the recipe's STEPS for recipe, else 600")
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--n", type=int, default=100, help="problems per kind at each check")
    ap.add_argument("--seed", type=int, default=None, help="warm-up seed (default: the recipe's)")
    args = ap.parse_args()

    import verifiers as vf

    from selfimprove_arith.student.warmup import KIND_WEIGHTS, SEED, STEPS, warm_up
    from selfimprove_arith import KINDS

    seed = SEED if args.seed is None else args.seed
    env = vf.load_environment("selfimprove-arith")
    lines = [f"# bench/warmup.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  lr={args.lr} "
             f"seed={seed} batch=64; greedy accuracy per kind on n={args.n} fresh problems each"]
    print(lines[0], flush=True)
    for variant in args.variant or DEFAULT_VARIANTS:
        prompt_kind, _, weights_name = variant.partition("/")
        if prompt_kind not in ("env", "prompt") or (weights_name not in ("recipe", "mix") and weights_name not in KINDS):
            sys.exit(f"--variant {variant!r}: expected env|prompt / recipe|mix|<kind> (kinds: {', '.join(KINDS)})")
        system_prompt = PROMPT if prompt_kind == "prompt" else ""
        if weights_name == "recipe":
            recipe = {}
        elif weights_name == "mix":
            recipe = {"weights": KIND_WEIGHTS, "first_steps": 0, "habits": {}}
        else:
            recipe = {"weights": {weights_name: 1.0}, "first_steps": 0, "habits": {}}
        shown = [weights_name] if weights_name in KINDS else list(KINDS)
        steps = args.steps or (STEPS if weights_name == "recipe" else 600)
        t0 = time.time()

        def check(step, model, tok, variant=variant, system_prompt=system_prompt, shown=shown, t0=t0, steps=steps):
            if step % args.every == 0 or step == steps:
                acc = greedy_per_kind(env, model, tok, shown, system_prompt, args.n)
                line = (f"{variant:<14} step {step:>5} {time.time() - t0:6.0f}s  "
                        + "  ".join(f"{k} {v:.2f}" for k, v in acc.items()))
                print(line, flush=True)
                lines.append(line)

        warm_up(steps=steps, lr=args.lr, seed=seed, system_prompt=system_prompt,
                log=lambda *_: None, callback=check, **recipe)
    save("warmup.txt", "\n".join(lines))


if __name__ == "__main__":
    main()
