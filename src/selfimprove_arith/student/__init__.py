"""The built-in student `selfimprove/tiny-arith`: the base student of the embedded env.

A random ~1M-parameter Qwen3 (selfimprove.rl.student.new_student) after a seeded,
step-based supervised warm-up on arithmetic (warmup.py). It ships with the package,
built from the recipe (tiny-arith/ beside this file, see shipped.py), so no user
ever waits for the warm-up; profile.py measures its per-kind pass@k.

    warmup.py     the recipe: kinds, weights, habits; recipe_hash() names it
    shipped.py    the shipped copy: recipe.json / profile.json, rebuild (`selfimprove student build`)
    profile.py    per-kind greedy / pass@1 / pass@k on fresh selfimprove-arith problems
    tiny-arith/   the shipped weights, tokenizer, recipe.json and profile.json

TINY_ARITH registers the id with the core (pyproject.toml: the `selfimprove.students`
entry point). The shipped weights are used while their recipe.json hash equals
`warmup.recipe_hash()`. When the recipe changed without a rebuild (a developer's
working tree), the student is built from the recipe on first use (~5 minutes on
2 cores) and cached under
${SELFIMPROVE_CACHE:-~/.cache/selfimprove}/students/selfimprove--tiny-arith-<recipe>/
(<recipe> = the recipe hash, so a changed recipe never reuses a stale student), once
and atomically (selfimprove.rl.student_cache). SELFIMPROVE_NO_STUDENT_BUILD=1 (set
by the test suite) turns that build into an error.

Importing this package imports neither torch nor verifiers: the orchestrator loads
TINY_ARITH to check a run's model before any job starts.
"""

from __future__ import annotations

import os
from pathlib import Path

from selfimprove.errors import ConfigError
from selfimprove.rl.builtin_students import BuiltinStudent
from selfimprove.rl.student_cache import build_into_cache, cache_dir

from . import shipped

TINY_ARITH_ID = "selfimprove/tiny-arith"


def cached_dir(model_id: str = TINY_ARITH_ID) -> Path:
    """The CACHE directory of the student for the current recipe (used only when the shipped copy is stale)."""
    from .warmup import recipe_hash

    return cache_dir(model_id, recipe_hash())


def resolve(log=print) -> Path:
    """The shipped copy while its recipe hash is current; else the copy built from the recipe into the cache."""
    from selfimprove.rl.student import save_student

    from .warmup import recipe_hash

    name = TINY_ARITH_ID
    shipped_hash, current = shipped.shipped_hash(name), recipe_hash()
    if shipped_hash == current:
        return shipped.shipped_dir(name)
    final = cached_dir(name)
    stale = (f"the shipped student {name} is stale (built from recipe {shipped_hash or 'none'}, the code's warm-up "
             f"recipe is {current}; rebuild it with `selfimprove student build` or `make student`)")
    if (final / "READY").is_file():
        log(f"{stale}; using the copy built from the recipe in {final}")
        return final
    if os.environ.get("SELFIMPROVE_NO_STUDENT_BUILD"):
        raise ConfigError(f"{shipped.shipped_dir(name) / shipped.RECIPE_FILE}: {stale}; SELFIMPROVE_NO_STUDENT_BUILD "
                          "is set, so it is not built into the cache")

    def build(tmp: Path) -> None:
        from .warmup import warm_up

        log(f"{stale}; building it from the recipe into {final} (~5 min on 2 cores, once)")
        model, tok = warm_up(log=log)
        save_student(model, tok, tmp)

    return build_into_cache(final, name, build)


def on_disk() -> Path | None:
    """The shipped directory when it holds a config (stale or not, its architecture is the recipe's)."""
    d = shipped.shipped_dir(TINY_ARITH_ID)
    return d if (d / "config.json").is_file() else None


TINY_ARITH = BuiltinStudent(id=TINY_ARITH_ID, resolve=resolve, on_disk=on_disk, maker=lambda: shipped)
