"""The generic built-in student: one recipe for any single-turn env whose rows carry a reference answer.

    selfimprove student build si-reasoning-gym          # into the cache, with a progress line
    selfimprove bootstrap si-reasoning-gym --model build:si-reasoning-gym      # default env args, built on first use
    selfimprove bootstrap si-reasoning-gym --model build:si-reasoning-gym@1a2b3c4d  # a build `student build` made
    python -m selfimprove.rl.student_build ENV --out DIR --json   # what the command runs (the env's Python)

Why: tiny-arith's weaknesses were planted (selfimprove_arith/student/warmup.py: HABITS,
PRACTICE_KINDS). This student is made from the env alone, with nothing chosen per kind:

1. Rows: the env's TRAIN split, rendered exactly as the engine renders them (the row's own
   prompt messages, its system prompt included, through the student's chat template). Eval
   rows are never read into training: rows the loop's decontamination flags against the
   evaluated questions (gates/dedup.find_eval_overlap) are dropped, and so are the first
   `eval_examples` train rows of an env without an eval split (the engine evaluates those).
2. The reply is the reference answer written the way the env's parser reads it: the first
   of ANSWER_FORMATS under which the env's OWN rubric gives the reference full reward.
3. The tiny Qwen3 (rl/student.py: characters, 1.06M parameters) with its positions sized to
   the longest rendered row; supervised on rows drawn uniformly (no weights, habits or extra
   kinds); AdamW, warm-up then cosine over the step cap; deterministic from the seed.
4. Stopping rule, stated before training (Recipe): every `check_every` steps the student
   answers a held-out slice of TRAIN greedily and each group (grouping.py, auto) gets its
   pass@1 minus its guessing prior (the commonest TRAIN answer's share in the group). Stop at
   the first check where some group is learning (>= learning_margin above its prior) and some
   group is not solved (pass@1 < solved_from); else at max_steps. The memorisation share
   (held-out questions also present among the trained rows) is reported beside it.
5. Cached by the recipe's hash (no library version in it, as tiny-arith's recipe()), at
   ${SELFIMPROVE_CACHE}/students/build--<env>-<hash>/ (student_cache.py), once and atomically.

Refused, with the reason on one line (BuildRefused): a multi-turn env, rows without a reference
answer, answers longer than max_answer_chars, rows the character tokenizer cannot write, rows
longer than max_seq_tokens, and a reward that is not 0/1 or partial credit (outside [0, 1],
no format that gives the reference full reward, or full reward for wrong answers).

Not covered: v1 Tasksets (their rows are tasks, not prompt/answer rows), env args for the
`build:ENV` id (the env's defaults; `student build ENV --env-args` for others).
Importing this module imports neither torch nor verifiers (the registry reads `entry`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError
from ..models import SEED_EVAL_EXAMPLES
from .builtin_students import BuiltinStudent
from .student_cache import build_into_cache, cache_dir

PREFIX = "build:"
RECIPE_VERSION = 1  # bump when the recipe's code changes in a way its fields don't show
# Reply formats tried in order; the first the env's rubric gives the reference full reward is used.
ANSWER_FORMATS = ("<answer>{a}</answer>", "\\boxed{{{a}}}", "{a}", "Answer: {a}", "#### {a}")
PROBE_ROWS = 16  # train rows the answer format and the reward range are probed on


class BuildRefused(ConfigError):
    """The generic recipe cannot serve this env (the message says why and what would)."""


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the generic student's weights (hashed into its cache name)."""

    env_id: str
    env_args: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    batch: int = 32  # rows per optimizer step
    lr: float = 2e-3  # peak AdamW lr: 30 warm-up steps, then cosine to 10% at max_steps
    max_steps: int = 3000  # the cap (~0.35 CPU-s a step at batch 32 on one thread: ~18 CPU-min)
    check_every: int = 100  # steps between held-out checks (the stopping rule is judged there)
    holdout: int = 96  # TRAIN rows held out for the stopping rule (never trained on)
    learning_margin: float = 0.2  # a group is learning at pass@1 >= its guessing prior + this
    solved_from: float = 0.9  # a group is solved at pass@1 >= this
    max_answer_chars: int = 64  # longer reference answers are refused (a character student writes each one)
    max_seq_tokens: int = 512  # longer rendered rows (prompt + reply) are refused
    eval_examples: int = SEED_EVAL_EXAMPLES  # an env without an eval split: its first N train rows are evaluated
    grouping: str = "auto"  # grouping.py rule the stopping rule judges groups by

    def as_dict(self) -> dict[str, Any]:
        return {"v": RECIPE_VERSION, **asdict(self), "formats": list(ANSWER_FORMATS)}

    def hash(self) -> str:
        """8 hex chars naming this recipe: its fields only, no library version."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True, default=str).encode()).hexdigest()[:8]

    def rule_text(self) -> str:
        return (f"stop at the first check (every {self.check_every} steps, greedy on {self.holdout} held-out TRAIN "
                f"rows) where some group's pass@1 is >= its guessing prior + {self.learning_margin} and some group's "
                f"pass@1 is < {self.solved_from}; else at step {self.max_steps}")


# ------------------------------------------------------------------ the env's rows and what it can serve


def _question(row: dict) -> str:
    from ..phases.analyze import prompt_text

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
    for fmt in ANSWER_FORMATS:
        good = [s["reward"] for s in score_completions(env, probe, [fmt.format(a=r["answer"]) for r in probe])]
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
                       "credit on the reference answer (a judge or a format the recipe does not write)")


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


# ------------------------------------------------------------------ building, caching, the registry entry


def env_id_of(model_id: str) -> str:
    return model_id[len(PREFIX):]


def build_dir(recipe: Recipe) -> Path:
    return cache_dir(f"build/{recipe.env_id}", recipe.hash())  # build--ENV-HASH: no ':' in a path


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


def resolve_cached(recipe: Recipe, log: Callable[[str], None] = print) -> Path:
    """The cached student of `recipe`, built on first use (the engine calls this for `build:ENV`)."""
    final = build_dir(recipe)
    if (final / "READY").is_file():
        return final
    if os.environ.get("SELFIMPROVE_NO_STUDENT_BUILD"):
        raise ConfigError(f"model.name {PREFIX}{recipe.env_id}: not built yet ({final} has no READY) and "
                          "SELFIMPROVE_NO_STUDENT_BUILD is set; build it with `selfimprove student build "
                          f"{recipe.env_id}`")

    def build(tmp: Path) -> None:
        from .rollouts import load_env

        log(f"building {PREFIX}{recipe.env_id} from the generic recipe {recipe.hash()} into {final} (once)")
        build_and_save(load_env(recipe.env_id, recipe.env_args), recipe, tmp, log=log)

    return build_into_cache(final, PREFIX + recipe.env_id, build)


def entry(model_id: str) -> BuiltinStudent | None:
    """The registry's entry for `build:ENV` (the env's default args, the recipe's defaults; built on first
    use) or `build:ENV@HASH` (a build already in the cache, e.g. one `student build ENV --env-args ...`
    made: the command prints this id), else None."""
    if not model_id.startswith(PREFIX) or not env_id_of(model_id).strip():
        return None
    env_id, _, tag = env_id_of(model_id).partition("@")
    if tag:
        final = cache_dir(f"build/{env_id}", tag)

        def resolve(log: Callable[[str], None]) -> Path:
            if not (final / "READY").is_file():
                raise ConfigError(f"model.name {model_id}: no finished build in {final}; make it with `selfimprove "
                                  f"student build {env_id}` and the same settings (it prints the id to use)")
            return final

        return BuiltinStudent(id=model_id, resolve=resolve,
                              on_disk=lambda: final if (final / "config.json").is_file() else None)
    recipe = Recipe(env_id)
    return BuiltinStudent(id=model_id, resolve=lambda log: resolve_cached(recipe, log),
                          on_disk=lambda: build_dir(recipe) if (build_dir(recipe) / "config.json").is_file() else None)


def main(argv: list[str] | None = None) -> int:
    """`python -m selfimprove.rl.student_build ENV [--out DIR] [--env-args JSON] [--seed N] [--max-steps N]`:
    what `selfimprove student build ENV` runs in the env's Python. Progress on stderr; with --json the
    build record on stdout's last line. Exit 2 with one line when the env is refused."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="selfimprove.rl.student_build")
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
        recipe = Recipe(a.env_id, json.loads(a.env_args), seed=a.seed, max_steps=a.max_steps)
        if a.out:
            from .rollouts import load_env

            record = build_and_save(load_env(recipe.env_id, recipe.env_args), recipe, Path(a.out), log=log)
            where = Path(a.out)
        else:
            where = resolve_cached(recipe, log=log)
            record = json.loads((where / "build.json").read_text())
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    model_id = f"{PREFIX}{recipe.env_id}@{recipe.hash()}"  # names this build in the cache (no --out)
    print(json.dumps({"out": str(where), "model_id": None if a.out else model_id, **record}) if a.json
          else f"wrote {where}" + ("" if a.out else f"; use it with --model {model_id}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
