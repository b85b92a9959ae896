"""Benchmark: every arm of a finished (or partial) run scored on FRESH rows from the env's own generator.

    .venv/bin/python bench/fresh_rows.py RUN_DIR [--n 600] [--seed 20261208] [--out fresh_rg.txt]

The run's eval split is the one the best iteration was picked on, so its figures carry that selection;
fresh rows are a second, independent test set of the same distribution. For an env whose module exposes
`TASKS` and `make_row(task, rng)` (the contract of examples/codegen_teacher.py and `selfimprove new-env`),
it draws `--n` rows, tasks in turn, dropping any question the env's train or eval rows hold (exact match)
and repeats. They are rendered and scored by the env itself: a SingleTurnEnv with the env's system prompt,
parser and rubric. Each arm's final checkpoint answers them greedily with the CPU engine's sampler
(`run_rollouts`, temperature 0) within the eval completion budget the run recorded; correct = reward >= 0.5
(the eval rule when the env writes no is_correct).

Printed and saved (bench/out/): per arm the accuracy with its Wilson interval and per-task accuracy; per
compared arm the mean ± sd over its training seeds; Run A vs Run C and the best iteration vs iter_0 by
Welch's t on per-seed accuracies (the product's `welch_t_test`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def fresh_rows(env, module, n: int, seed: int) -> list[dict]:
    """n rows from the env's make_row, tasks in turn, none whose question the env's own rows hold."""
    from selfimprove.phases.analyze import prompt_text
    from selfimprove.rl.rollouts import split_rows

    known = {prompt_text(r["prompt"]) for split in ("train", "eval") for r in _rows_or_none(split_rows, env, split)}
    rng, tasks, rows, seen = random.Random(seed), list(module.TASKS), [], set()
    for i in range(200 * n):
        if len(rows) == n:
            break
        row = module.make_row(tasks[i % len(tasks)], rng)
        if row["question"] in seen or any(row["question"] in k for k in known):
            continue
        seen.add(row["question"])
        rows.append(row)
    return rows


def _rows_or_none(split_rows, env, split):
    try:
        return split_rows(env, split)
    except Exception:  # noqa: BLE001  (an env without an eval split)
        return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--seed", type=int, default=20261208)
    ap.add_argument("--out", default=None, help="file name under bench/out/")
    args = ap.parse_args()

    import torch
    import verifiers as vf
    from datasets import Dataset

    from selfimprove.rl.rollouts import EnvSpec, load_env, run_rollouts, split_rows
    from selfimprove.rl.student import load_student
    from selfimprove.stats import welch_t_test, wilson_interval

    torch.set_num_threads(1)
    run = json.loads((args.run_dir / "run.json").read_text())
    metrics = json.loads((args.run_dir / "metrics.json").read_text())
    env_id = run["hub_id"].split("/")[-1]
    env = load_env(env_id, run.get("env_args") or {})
    module = importlib.import_module(env_id.replace("-", "_"))
    if not (hasattr(module, "TASKS") and callable(getattr(module, "make_row", None))):
        sys.exit(f"{env_id}: its module has no TASKS and make_row(task, rng): no generator to draw fresh rows from")
    made = fresh_rows(env, module, args.n, args.seed)
    fresh_env = vf.SingleTurnEnv(dataset=Dataset.from_list(made), system_prompt=env.system_prompt,
                                 parser=env.parser, rubric=env.rubric)
    rows = split_rows(fresh_env, "train")
    spec = EnvSpec(id=env_id, name=env_id, args={}, ratio=None, env=fresh_env, rows=rows)
    iter0_out = args.run_dir / (run.get("iter_0_path") or "iter_0/prime_out")  # absolute for an --init-from iter_0
    budget = json.loads((iter0_out / "completion_budget.json").read_text())
    max_tokens = int(budget["eval"]["in_force"])  # the engine's own record of the eval budget it used

    lines = [f"fresh rows: {len(rows)} from {env_id}'s make_row (seed {args.seed}, tasks in turn, none in the env's "
             f"own train/eval rows); greedy, {max_tokens} completion tokens; correct = reward >= 0.5; run {args.run_dir}"]
    per_arm: dict[str, dict] = {}
    t0 = time.time()
    for rec in metrics["iters"]:
        ckpt = args.run_dir / rec["checkpoint"]
        model, tok = load_student(ckpt)
        out = run_rollouts(model, tok, [(spec, r) for r in rows], n=1, temperature=0.0, max_tokens=max_tokens,
                           generator=None)
        correct = [float(o["reward"] >= 0.5) for o in out]
        tasks = defaultdict(list)
        for r, c in zip(rows, correct):
            tasks[r["info"]["task"]].append(c)
        acc = sum(correct) / len(correct)
        lo, hi = wilson_interval(sum(correct), len(correct))
        per_arm[rec["arm"]] = {"acc": acc, "reward": sum(o["reward"] for o in out) / len(out),
                               "tasks": {t: sum(v) / len(v) for t, v in sorted(tasks.items())},
                               "replicate_of": rec.get("replicate_of")}
        lines.append(f"{rec['arm']:<14} acc {acc:.3f} [{lo:.3f}, {hi:.3f}] (n={len(correct)})  reward mean "
                     f"{per_arm[rec['arm']]['reward']:.3f}  " + "  ".join(f"{t} {a:.2f}" for t, a in per_arm[rec['arm']]['tasks'].items()))
    groups: dict[str, list[float]] = defaultdict(list)
    for arm, r in per_arm.items():
        groups[r["replicate_of"] or arm].append(r["acc"])
    lines.append("over training seeds (mean ± sd, seeds):")
    for arm, xs in groups.items():
        mean = sum(xs) / len(xs)
        sd = (sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 if len(xs) > 1 else float("nan")
        lines.append(f"  {arm:<12} {mean:.3f} ± {sd:.3f} ({len(xs)})")
    best = max((a for a in groups if a.startswith("iter_") and a != "iter_0"), key=lambda a: sum(groups[a]) / len(groups[a]),
               default=None)
    for a, b in (("run_a", "run_c"), (best, "iter_0")):
        if a in groups and b in groups and len(groups[a]) >= 2 and len(groups[b]) >= 2:
            t = welch_t_test(groups[a], groups[b])
            p = f"Welch p={t.p_value:.3f}" if t.p_value is not None else f"no test ({t.note})"
            lines.append(f"{a} vs {b}: {t.delta:+.3f}, {p} (seeds {len(groups[a])} vs {len(groups[b])})")
        elif a in groups and b in groups:
            lines.append(f"{a} vs {b}: {sum(groups[a]) / len(groups[a]) - sum(groups[b]) / len(groups[b]):+.3f} "
                         f"(fewer than 2 seeds on a side: no seed-aware test)")
    lines.append(f"({time.time() - t0:.0f} s for {len(per_arm)} arms)")
    print("\n".join(lines))
    if args.out:
        save(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
