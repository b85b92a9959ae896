"""The generic built-in student: one recipe for any single-turn env whose rows carry a reference answer.

    selfimprove student build si-reasoning-gym          # into the cache, with a progress line
    selfimprove bootstrap si-reasoning-gym --model build:si-reasoning-gym      # default env args, built on first use
    selfimprove bootstrap si-reasoning-gym --model build:si-reasoning-gym@1a2b3c4d  # a build `student build` made
    python -m selfimprove.rl.student_build_run ENV --out DIR --json   # what the command runs (the env's Python)

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
   the first check where some group is learning (>= learning_margin above its prior, on at least
   min_group_rows rows, its Wilson lower bound above the prior) and some
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
This module is the recipe and the registry's entry (imports neither torch nor verifiers, nor the
engine's modules: the registry reads `entry`); student_build_run.py checks the env and builds,
student_build_train.py trains.
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
from .student_cache import cache_dir

PREFIX = "build:"
RECIPE_VERSION = 2  # bump when the recipe's code changes in a way its fields don't show
# Reply formats tried in order; the first the env's rubric gives the reference full reward is used.
ANSWER_FORMATS = ("<answer>{a}</answer>", "\\boxed{{{a}}}", "{a}", "Answer: {a}", "#### {a}")
PROBE_ROWS = 16  # train rows the answer format and the reward range are probed on


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
    learning_margin: float = 0.2  # a group is learning at pass@1 >= its guessing prior + this, and
    min_group_rows: int = 8  # ... has at least this many held-out rows, and its Wilson 95% lower bound is above
    # its prior: one right answer in a group of 2 (0.50) is no evidence (selfimprove-arith stopped on it at step 400)
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
                f"rows) where some group of >= {self.min_group_rows} rows has pass@1 >= its guessing prior + "
                f"{self.learning_margin} with its Wilson 95% lower bound above that prior, and some group's "
                f"pass@1 is < {self.solved_from}; else at step {self.max_steps}")


# ------------------------------------------------------------------ the cache and the registry entry


def env_id_of(model_id: str) -> str:
    return model_id[len(PREFIX):]


def build_dir(recipe: Recipe) -> Path:
    return cache_dir(f"build/{recipe.env_id}", recipe.hash())  # build--ENV-HASH: no ':' in a path


def resolve_default(env_id: str, log: Callable[[str], None] = print) -> Path:
    """The cached student of the default recipe for `env_id` (`build:ENV`), built on first use by
    `python -m selfimprove.rl.student_build_run ENV` in this interpreter (the engine's: it imports the
    env), its progress lines passed to `log`."""
    import sys

    final = build_dir(Recipe(env_id))
    if (final / "READY").is_file():
        return final
    if os.environ.get("SELFIMPROVE_NO_STUDENT_BUILD"):
        raise ConfigError(f"model.name {PREFIX}{env_id}: not built yet ({final} has no READY) and "
                          "SELFIMPROVE_NO_STUDENT_BUILD is set; build it with `selfimprove student build "
                          f"{env_id}`")
    cmd = [sys.executable, "-P", "-m", "selfimprove.rl.student_build_run", env_id]  # -P: see commands/student.py
    rc, _, error = run_build(cmd, log)
    if rc != 0 or not (final / "READY").is_file():
        raise ConfigError(error or f"model.name {PREFIX}{env_id}: `{' '.join(cmd[1:])}` failed (exit {rc})")
    return final


def run_build(cmd: list[str], log: Callable[[str], None] | None) -> tuple[int, str, str]:
    """Run a `student_build_run` command: its progress lines ("student build ...", "building ...") to `log`
    (None: dropped), its refusal ("error: ...") kept. Returns (exit code, stdout, the refusal or "")."""
    import subprocess

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    error = ""
    for line in proc.stderr:  # type: ignore[union-attr]
        line = line.rstrip("\n")
        if line.startswith("error: "):
            error = line[len("error: "):]
        elif line.startswith(("student build", "building ")) and log is not None:
            log(line)
    stdout = proc.stdout.read() if proc.stdout else ""  # type: ignore[union-attr]
    return proc.wait(), stdout, error


def entry(model_id: str) -> tuple[Callable[[Callable[[str], None]], Path], Callable[[], Path | None]] | None:
    """(resolve, on_disk) for the registry's `build:ENV` (the env's default args, the recipe's defaults; built
    on first use) or `build:ENV@HASH` (a build already in the cache, e.g. one `student build ENV --env-args`
    made: the command prints this id); None for any other id."""
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

        return resolve, lambda: final if (final / "config.json").is_file() else None
    recipe = Recipe(env_id)
    return (lambda log: resolve_default(env_id, log),
            lambda: build_dir(recipe) if (build_dir(recipe) / "config.json").is_file() else None)
