"""Procedurally generated arithmetic problems for the embedded default environment.

Each *kind* is a structural family (operand count, digit lengths, operators,
parentheses, sign of the result). A weak student fails some kinds far more than
others, which is what gives the teacher something to find. The kind is never
written into a row: like on a real dataset, the teacher must infer structure
from the question text.

Everything is deterministic: `make_split(name, n, seed)` returns the same rows
for the same arguments on every machine.
"""

from __future__ import annotations

import random
from typing import Callable

Problem = tuple[str, int]  # (expression text, integer result)


def _d(rng: random.Random, digits: int) -> int:
    lo = 10 ** (digits - 1) if digits > 1 else 0
    return rng.randint(lo, 10**digits - 1)


def add_2d(rng: random.Random) -> Problem:
    a, b = _d(rng, 2), _d(rng, 2)
    return f"{a}+{b}", a + b


def sub_2d(rng: random.Random) -> Problem:
    a, b = sorted((_d(rng, 2), _d(rng, 2)), reverse=True)
    return f"{a}-{b}", a - b


def neg_result(rng: random.Random) -> Problem:
    a, b = sorted((_d(rng, 2), _d(rng, 2)))
    if a == b:
        b += 1
    return f"{a}-{b}", a - b


def sub_2d1d(rng: random.Random) -> Problem:
    a, b = _d(rng, 2), rng.randint(1, 9)
    return f"{a}-{b}", a - b


def neg_2d1d(rng: random.Random) -> Problem:
    a, b = rng.randint(1, 9), _d(rng, 2)
    return f"{a}-{b}", a - b


def sub_3d1d(rng: random.Random) -> Problem:
    a, b = _d(rng, 3), rng.randint(1, 9)
    return f"{a}-{b}", a - b


def add_3d1d(rng: random.Random) -> Problem:
    a, b = _d(rng, 3), rng.randint(1, 9)
    a, b = (a, b) if rng.random() < 0.5 else (b, a)
    return f"{a}+{b}", a + b


def add_three(rng: random.Random) -> Problem:
    a, b, c = _d(rng, 2), rng.randint(1, 9), rng.randint(1, 9)
    return f"{a}+{b}+{c}", a + b + c


# Ordered roughly from easiest to hardest for a small character-level student.
KINDS: dict[str, Callable[[random.Random], Problem]] = {
    "add_2d": add_2d,
    "sub_2d": sub_2d,
    "neg_result": neg_result,
    "sub_2d1d": sub_2d1d,
    "neg_2d1d": neg_2d1d,
    "sub_3d1d": sub_3d1d,
    "add_3d1d": add_3d1d,
    "add_three": add_three,
}

# Disjoint seeds per split; the eval split is made first and the train split
# skips every eval question, so no eval problem is ever trained on.
SPLIT_SEEDS = {"eval": 1_000_003, "train": 2_000_003}
SPLIT_SIZES = {"eval": 1000, "train": 20000}


def sample(kind: str, rng: random.Random) -> Problem:
    return KINDS[kind](rng)


def _round_robin(n: int, seed: int, exclude: set[str]) -> list[tuple[str, int, str]]:
    rng = random.Random(seed)
    kinds = list(KINDS)
    rows: list[tuple[str, int, str]] = []
    seen = set(exclude)
    while len(rows) < n:
        rng.shuffle(kinds)  # all kinds equally often, in a shuffled order
        for kind in kinds:
            for _ in range(50):  # small spaces can collide; retry a few times
                q, a = KINDS[kind](rng)
                if q not in seen:
                    break
            else:
                continue
            seen.add(q)
            rows.append((q, a, kind))
            if len(rows) == n:
                break
    return rows


def make_split(name: str, n: int | None = None, seed: int | None = None) -> list[Problem]:
    """Rows of split `name` ("train" or "eval"), every kind equally represented."""
    return [(q, a) for q, a, _ in labelled_split(name, n, seed)]


def labelled_split(name: str, n: int | None = None, seed: int | None = None) -> list[tuple[str, int, str]]:
    """`make_split`'s rows with the kind that made each one, for diagnostics in bench/ only.

    The env never exposes kinds (rows carry no labels); a teacher must not read them.
    """
    if name not in SPLIT_SEEDS:
        raise ValueError(f"unknown split '{name}'; expected 'train' or 'eval'")
    size = SPLIT_SIZES[name] if n is None or n < 0 else n
    eval_rows = _round_robin(SPLIT_SIZES["eval"], SPLIT_SEEDS["eval"] if seed is None or name != "eval" else seed, set())
    if name == "eval":
        return eval_rows[:size] if seed is None else _round_robin(size, seed, set())
    exclude = {q for q, _, _ in eval_rows}
    return _round_robin(size, SPLIT_SEEDS["train"] if seed is None else seed, exclude)
