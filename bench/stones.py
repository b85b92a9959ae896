"""Do stepping stones unlock what real data cannot? In-process GRPO experiment on the built-in student. Not a test.

    .venv/bin/python bench/stones.py [--lr 3e-5] [--s0 50] [--s1 50] [--seeds 0,1] [--branches C,A,S,O]

From the student (default: the shipped selfimprove/tiny-arith), `--s0` GRPO steps
on the real train mix make an iter_0; from iter_0's weights and optimizer state,
each branch trains `--s1` more steps (16 prompts x 16 rollouts, the engine's own
`run_rollouts` + `grpo_step`, scored by the env's rubric):

    C  real train rows (Run C)                 S  stepping stones only: `47+8` / `8+47`
    A  stones + the partial kinds, fresh rows  O  oracle: real train rows of the hopeless kinds
    L  the partial kinds only, fresh rows

and greedy eval accuracy per kind on the full eval split is printed (kinds from
`labelled_split`: a bench-only diagnostic; no teacher sees them). This is the
measurement behind docs/results.md "Does targeted data beat equal compute?".
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import sys
import time
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

PARTIAL = ["sub_2d", "neg_result", "sub_2d1d", "neg_2d1d", "sub_3d1d"]
HOPELESS = ["add_3d1d", "add_three"]
STONES = ["add_2d1d"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--student", default="selfimprove/tiny-arith")
    ap.add_argument("--s0", type=int, default=50, help="iter_0 steps on the real mix")
    ap.add_argument("--s1", type=int, default=50, help="steps per branch from iter_0")
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--branches", default="C,A,S,O")
    ap.add_argument("--prompts", type=int, default=16)
    args = ap.parse_args()

    import torch
    import verifiers as vf

    from selfimprove_arith.student import warmup as W
    from selfimprove.rl.grpo import grpo_step
    from selfimprove.rl.rollouts import EnvSpec, run_rollouts
    from selfimprove.rl.student import load_student, resolve_model
    from selfimprove_arith.problems import labelled_split

    env = vf.load_environment("selfimprove-arith")
    spec = EnvSpec(id="selfimprove-arith", name="selfimprove-arith", args={}, ratio=None, env=env)

    def row(q, a, i):
        return {"prompt": [{"role": "user", "content": q}], "answer": str(a), "info": {}, "example_id": i}

    ev = labelled_split("eval")
    ev_rows, ev_kinds = [row(q, a, i) for i, (q, a, _) in enumerate(ev)], [k for _, _, k in ev]
    sealed = {q for q, _, _ in ev}
    tr = labelled_split("train")
    real = [row(q, a, i) for i, (q, a, _) in enumerate(tr)]

    def fresh(kinds, n, seed):
        rng, out = random.Random(seed), []
        while len(out) < n:
            q, a = W.sample_any(kinds[len(out) % len(kinds)], rng)
            if q not in sealed:
                out.append(row(q, a, len(out)))
        return out

    data = {"C": real, "S": fresh(STONES, 800, "s"), "A": fresh(STONES + PARTIAL, 800, "a"),
            "O": [r for r, (_, _, k) in zip(real, tr) if k in HOPELESS], "L": fresh(PARTIAL, 800, "l")}
    lines = [f"# bench/stones.py {time.strftime('%Y-%m-%d %H:%M:%S')} student={args.student} lr={args.lr} "
             f"iter_0 {args.s0} steps, branches {args.s1} steps, {args.prompts}x16 rollouts; greedy eval n=1000 "
             f"({len(ev) // len(set(ev_kinds))} per kind)"]

    def say(s):
        print(s, flush=True)
        lines.append(s)

    def evaluate(model, tok, tag):
        recs = run_rollouts(model, tok, [(spec, r) for r in ev_rows], n=1, temperature=0.0, max_tokens=24, generator=None)
        per: dict[str, list[float]] = {}
        for r, k in zip(recs, ev_kinds):
            per.setdefault(k, []).append(r["reward"])
        acc = sum(r["reward"] for r in recs) / len(recs)
        say(f"{tag:<14} acc {acc:.3f} | " + " ".join(f"{k} {sum(v) / len(v):.2f}" for k, v in per.items()))

    def train(model, tok, opt, rows, steps, seed, tag):
        order = list(range(len(rows)))
        random.Random(f"{seed}:{tag}").shuffle(order)
        zero_var = []
        for step in range(steps):
            chosen = [(spec, rows[order[(step * args.prompts + j) % len(order)]]) for j in range(args.prompts)]
            gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
            recs = run_rollouts(model, tok, chosen, n=16, temperature=1.0, max_tokens=24, generator=gen)
            zero_var.append(grpo_step(model, opt, recs, 16, pad_id=tok.pad_token_id)["zero_var"])
        say(f"  {tag}: zero-variance groups {sum(zero_var) / len(zero_var):.0%}")

    model, tok = load_student(resolve_model(args.student))
    evaluate(model, tok, "base")
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.01)
    train(model, tok, opt, real, args.s0, 0, "iter_0")
    evaluate(model, tok, f"iter_0@{args.s0}")
    state = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
    for seed in [int(s) for s in args.seeds.split(",")]:
        for b in args.branches.split(","):
            model.load_state_dict(state[0])
            opt.load_state_dict(state[1])
            torch.manual_seed(seed)
            train(model, tok, opt, data[b], args.s1, seed + 1, b)
            evaluate(model, tok, f"{b} seed{seed}")
    save("stones.txt", "\n".join(lines))


if __name__ == "__main__":
    main()
