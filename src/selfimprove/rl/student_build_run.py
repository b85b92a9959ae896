"""Checking an env and building its generic student (the recipe: student_build.py; the training loop:
student_build_train.py). Run in the env's Python:

    python -m selfimprove.rl.student_build_run ENV [--out DIR] [--env-args JSON] [--seed N] [--max-steps N] [--json]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import BuildRefused, ConfigError, SelfImproveError
from .student_build import ANSWER_FORMATS, PREFIX, PROBE_ROWS, Recipe, build_dir
from .student_cache import build_into_cache


def _question(row: dict) -> str:
    from ..phases.analyze import prompt_text  # the loop's "question" of a row: its last user message

    return prompt_text(row["prompt"])


def check_single_turn(env: Any, env_id: str) -> None:
    import verifiers as vf

    single = getattr(vf, "SingleTurnEnv", None)
    turns = getattr(env, "max_turns", None)
    if (single is not None and isinstance(env, single)) or turns == 1:
        return
    raise BuildRefused(f"env '{env_id}': {type(env).__name__} with max_turns={turns} is not single-turn; the generic "
                       "recipe supervises one reply per prompt (use a model dir or a hub model for this env)")


def check_answers(rows: list[dict], env_id: str, max_chars: int) -> None:
    missing = [r for r in rows if not str(r.get("answer") or "").strip()]
    if missing:
        raise BuildRefused(f"env '{env_id}': {len(missing)} of {len(rows)} TRAIN rows have no reference answer "
                           "(row field `answer` empty); the generic recipe supervises the reference answer, so it "
                           "needs one on every row")
    longest = max(rows, key=lambda r: len(str(r["answer"])))
    if len(str(longest["answer"])) > max_chars:
        raise BuildRefused(f"env '{env_id}': answers too long for the tiny student (the longest, of example "
                           f"{longest['example_id']}, has {len(str(longest['answer']))} characters; the recipe's "
                           f"max_answer_chars is {max_chars}); use a larger model for this env")


def sealed_rows(env: Any, train: list[dict], recipe: Recipe) -> tuple[list[dict], dict[str, int]]:
    """The TRAIN rows the recipe may use: minus the evaluated ones and any the decontamination flags."""
    from ..gates.dedup import find_eval_overlap
    from ..gates.ngram_hash import eval_ngram_index
    from .rollouts import split_rows

    if getattr(env, "eval_dataset", None) is None:  # verifiers evaluates the first train rows instead
        evaluated = split_rows(env, "train", n=recipe.eval_examples)
    else:
        evaluated = split_rows(env, "eval")
    sealed_ids = {r["example_id"] for r in evaluated} if getattr(env, "eval_dataset", None) is None else set()
    index = eval_ngram_index(_question(r) for r in evaluated)
    kept = [r for r in train if r["example_id"] not in sealed_ids]
    flagged = set(find_eval_overlap([{"question": _question(r)} for r in kept], index).rows)
    clean = [r for i, r in enumerate(kept) if i not in flagged]
    counts = {"train_rows": len(train), "evaluated_rows": len(evaluated), "sealed_train_rows": len(train) - len(kept),
              "dropped_by_decontamination": len(flagged), "usable_rows": len(clean),
              "eval_source": "train_fallback" if sealed_ids else "eval_split"}
    return clean, counts


def answer_format(env: Any, rows: list[dict], env_id: str) -> str:
    """The first ANSWER_FORMATS entry under which the env's rubric gives the reference answer full reward;
    refuses a reward outside [0, 1] or one that also pays wrong answers in full."""
    from .rollouts import score_completions

    probe = rows[:PROBE_ROWS]
    wrong = [str(probe[(i + 1) % len(probe)]["answer"]) + "x" for i in range(len(probe))]  # never the reference
    first_format_scores: list[float] = []
    for fmt in ANSWER_FORMATS:
        good = [s["reward"] for s in score_completions(env, probe, [fmt.format(a=r["answer"]) for r in probe])]
        first_format_scores = first_format_scores or good
        if any(not 0.0 <= x <= 1.0 for x in good):
            raise BuildRefused(f"env '{env_id}': its reward is not 0/1 or partial credit (the reference answer scored "
                               f"{max(good, key=lambda x: abs(x - 0.5)):g}, outside [0, 1]); the recipe's stopping "
                               "rule and the weakness classes read a reward in [0, 1]")
        if sum(good) / len(good) < 0.99:
            continue
        bad = [s["reward"] for s in score_completions(env, probe, [fmt.format(a=w) for w in wrong])]
        if any(not 0.0 <= x <= 1.0 for x in bad):
            raise BuildRefused(f"env '{env_id}': its reward is not 0/1 or partial credit (a wrong answer scored "
                               f"{max(bad, key=lambda x: abs(x - 0.5)):g}, outside [0, 1])")
        if sum(bad) / len(bad) >= 0.99:
            raise BuildRefused(f"env '{env_id}': its reward pays wrong answers in full (mean {sum(bad) / len(bad):.2f} "
                               f"with format {fmt!r}); a reward that does not read the answer cannot be learned")
        return fmt
    raise BuildRefused(f"env '{env_id}': no reply format tried ({', '.join(ANSWER_FORMATS)}) gets the reference answer "
                       f"full reward from the env's rubric on {len(probe)} TRAIN rows; its reward is not 0/1 or partial "
                       "credit on the reference answer (a judge or a format the recipe does not write). "
                       f"TRAIN row 0's answer column is {str(probe[0]['answer'])[:40]!r}, and {ANSWER_FORMATS[0]!r} with it "
                       f"scored {first_format_scores[0]:g}: if that column is not the answer itself (an index or an id the reward looks up, "
                       "as in verifiers' ReasoningGymEnv), the recipe cannot learn from it")


def prepare(env: Any, recipe: Recipe) -> dict[str, Any]:
    """Everything training needs, checked: rows (train, held out), the reply format, groups and priors."""
    import random

    from ..grouping import PromptRow, choose_grouping, guess_priors, task_label
    from .rollouts import split_rows

    check_single_turn(env, recipe.env_id)
    train = split_rows(env, "train")
    check_answers(train, recipe.env_id, recipe.max_answer_chars)
    usable, counts = sealed_rows(env, train, recipe)
    if len(usable) < recipe.holdout + recipe.batch:
        raise BuildRefused(f"env '{recipe.env_id}': {len(usable)} usable TRAIN rows after sealing the evaluated ones "
                           f"({counts}); the recipe needs at least holdout + batch = {recipe.holdout + recipe.batch}")
    fmt = answer_format(env, usable, recipe.env_id)
    order = list(range(len(usable)))
    random.Random(recipe.seed).shuffle(order)
    held = [usable[i] for i in order[:recipe.holdout]]
    fit = [usable[i] for i in order[recipe.holdout:]]
    prompt_rows = [PromptRow(_question(r), task_label(r.get("info")), str(r["answer"])) for r in usable]
    grouping = choose_grouping(prompt_rows, recipe.grouping)
    priors = guess_priors([PromptRow(_question(r), task_label(r.get("info")), str(r["answer"])) for r in fit], grouping)
    return {"train": fit, "holdout": held, "format": fmt, "grouping": grouping, "priors": priors, "counts": counts}


def build_and_save(env: Any, recipe: Recipe, out: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train the student of `recipe` on `env` and write it to `out` (weights, tokenizer, build.json last)."""
    from ..rundir import atomic_write_json
    from .student import save_student
    from .student_build_train import train

    data = prepare(env, recipe)
    model, tok, report = train(env, recipe, data, log=log)
    out.mkdir(parents=True, exist_ok=True)
    save_student(model, tok, out)
    record = {"recipe": recipe.as_dict(), "recipe_hash": recipe.hash(), "stopping_rule": recipe.rule_text(), **report}
    atomic_write_json(out / "build.json", record)
    return record


def build_cached(recipe: Recipe, log: Callable[[str], None] = print) -> Path:
    """The cached student of `recipe`, built once and atomically (student_cache.build_into_cache)."""
    final = build_dir(recipe)
    if (final / "READY").is_file():
        return final

    def build(tmp: Path) -> None:
        from .rollouts import load_env

        log(f"building {PREFIX}{recipe.env_id} from the generic recipe {recipe.hash()} into {final} (once)")
        build_and_save(load_env(recipe.env_id, recipe.env_args), recipe, tmp, log=log)

    return build_into_cache(final, PREFIX + recipe.env_id, build)


def main(argv: list[str] | None = None) -> int:
    """`python -m selfimprove.rl.student_build_run ENV [--out DIR] [--env-args JSON] [--seed N] [--max-steps N]`:
    what `selfimprove student build ENV` runs in the env's Python. Progress on stderr; with --json the
    build record on stdout's last line. Exit 1 with one line when the env is refused (the CLI's error code)."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="selfimprove.rl.student_build_run")
    p.add_argument("env_id")
    p.add_argument("--out")
    p.add_argument("--env-args", default="{}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=Recipe.max_steps)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(a.threads)  # one thread: on a shared 2-core host it ran a step 5x faster than two
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    try:
        env_args = json.loads(a.env_args)
    except ValueError as e:
        print(f"error: --env-args {a.env_args!r}: not JSON ({e}); pass a JSON object, e.g. '{{\"n\": 100}}'",
              file=sys.stderr)
        return 1
    if not isinstance(env_args, dict):
        print(f"error: --env-args {a.env_args!r}: not a JSON object; pass one, e.g. '{{\"n\": 100}}'", file=sys.stderr)
        return 1
    try:
        recipe = Recipe(a.env_id, env_args, seed=a.seed, max_steps=a.max_steps)
        if a.out:
            from .rollouts import load_env

            record = build_and_save(load_env(recipe.env_id, recipe.env_args), recipe, Path(a.out), log=log)
            where = Path(a.out)
        else:
            where = build_cached(recipe, log=log)
            record = json.loads((where / "build.json").read_text())
    except SelfImproveError as e:  # a refusal, a bad env id, an env that does not load
        print(f"error: {e}", file=sys.stderr)
        return 1
    model_id = f"{PREFIX}{recipe.env_id}@{recipe.hash()}"  # names this build in the cache (no --out)
    print(json.dumps({"out": str(where), "model_id": None if a.out else model_id, **record}) if a.json
          else f"wrote {where}" + ("" if a.out else f"; use it with --model {model_id}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
