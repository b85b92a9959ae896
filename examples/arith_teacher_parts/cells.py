"""The planner's vocabulary: candidate buckets, domains, the finished plan, and their labels.

A Cell is one candidate bucket: a structure (shape + sign of every sub-result)
under one constraint (a carry class, and in the fallback a zero digit), with the
student's measured success on it, its share of the anchor's rollouts, its
weight, its fresh instances and, once allocated, its rows. A DomainPlan groups
the cells of one structure (the report's domain and its sub_domains). A Plan is
everything one write decided (plan.py builds it; report.py, generator.py and
check.py read it). PlanError: the inputs allow no valid report.

The labels (_structure_label, _sub_label) turn a parse tree into the report's
domain and sub_domain names. stone_variants and stone_space describe stepping
stones: easier variants of a hopeless structure that the train split lacks.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

from .expr import carry_vector, leaves, ops_post, parse_expr, shape_of, signs_of, value, with_leaves
from .observe import Obs, split_frame
from .rows import frame_question


@dataclass
class Cell:
    """A candidate bucket: one structure (key) under one constraint (cls and/or zero)."""

    key: str
    cons: dict
    n: int = 0  # anchor rollouts in the cell
    succ: float = 0.0
    p: float = 0.5  # success rate (smoothed)
    freq: float = 0.0  # share of the anchor rollouts
    score: float = 0.0  # learnability of p (or share of failures when there are no rollouts)
    weight: float = 0.0  # freq x score: what the row counts are proportional to
    mixed: float | None = None  # share of prompts (per step) with both right and wrong rollouts
    failures: list = field(default_factory=list)
    example: tuple | None = None  # a parse tree of this structure (for labels)
    pool: list = field(default_factory=list)  # fresh train-split instances (expressions)
    free_cap: int = 0  # rows that fresh sampling may add within the eval-collision budget
    cap: int = 0
    sub_label: str = ""
    rows: int = 0
    mode: str = "pool"
    stone_for: list = field(default_factory=list)  # a stepping stone: the hopeless structure keys it leads to
    template: str | None = None  # a stone's own template and operand ranges (real structures use the split's)
    ranges: list | None = None

    def match(self, o: Obs) -> bool:
        return o.key == self.key and all(getattr(o, k) == v for k, v in self.cons.items())


@dataclass
class DomainPlan:
    key: str
    label: str
    cells: list[Cell]
    score: float
    p: float
    n: int
    severity: str = "low"
    evidence: str = ""


try:  # inside selfimprove, the CLI prints this as one line instead of a traceback
    from selfimprove.errors import SelfImproveError as _ErrorBase
except ImportError:  # stand-alone use
    _ErrorBase = RuntimeError


class PlanError(_ErrorBase):
    """The inputs do not allow a valid report (e.g. fewer than three structures with fresh instances left)."""


@dataclass
class Plan:
    """Everything one write decided: the report's content and the generator's PLAN, plus the rows it yields."""

    iteration: int
    seed_offset: int
    domains: list[DomainPlan]
    features: list[str]
    total: int
    frame: dict
    tag: str
    gen_plan: dict
    rows: list[dict]
    notes: list[str]
    stats: dict


def _structure_label(node) -> str:
    """A 2-4 word domain label from the parse tree (operands, operators, parentheses, sign)."""
    nums, ops = leaves(node), ops_post(node)
    kinds = {b[1] for b in ops}
    words = {1: "One", 2: "Two", 3: "Three", 4: "Four", 5: "Five"}
    digits = [len(str(x)) for x in nums]
    paren = any(b[4] for b in ops if b is not node)
    neg = any(value(b) < 0 for b in ops)
    if paren:
        kind = "subtraction" if kinds == {"-"} else "addition" if kinds == {"+"} else "mixed"
        return f"Negative parenthesised {kind} groups" if neg else f"Parenthesised {kind} groups"
    if len(nums) == 2:
        width = f"{words.get(digits[0], digits[0])}-digit" if len(set(digits)) == 1 else f"{digits[0]}-by-{digits[1]}-digit"
        opname = {"+": "addition", "-": "subtraction", "*": "multiplication"}[ops[0][1]]
        return f"Negative {width.lower()} differences" if neg and opname == "subtraction" else f"{width} {opname}"
    chain = "addition" if kinds == {"+"} else "add-subtract" if kinds == {"+", "-"} else "mixed-operator"
    terms = f"{words.get(len(nums), len(nums))}-term"
    return f"Negative {terms.lower()} {chain} chains" if neg else f"{terms} {chain} chains"


def _carry_words(node) -> tuple[str, str]:
    """'carry' / 'borrow' / both, from the magnitude operations the expression really needs."""
    kinds = set()
    for b in ops_post(node):
        a, c = value(b[2]), value(b[3])
        if b[1] == "*":
            kinds.add("carry")
        else:
            c = c if b[1] == "+" else -c
            kinds.add("carry" if (a >= 0) == (c >= 0) else "borrow")
    if kinds == {"carry"}:
        return "carry", "carries"
    if kinds == {"borrow"}:
        return "borrow", "borrows"
    return "carry or borrow", "carries and borrows"


def _sub_label(node, cons: dict) -> str:
    one, many = _carry_words(node)
    if "zero" in cons:
        return "with a zero digit" if cons["zero"] else "without any zero digit"
    return [f"slips with no {one}", f"drops a single {one}", f"loses chained {many}"][cons["cls"]]


def stone_variants(node, ranges) -> list[tuple[tuple, list]]:
    """Easier variants of an expression that keep its operator skeleton: (template, operand ranges).

    One operand a digit shorter (each operand with 2+ digits in turn), or the last term dropped (3+ terms,
    no parentheses). Only variants whose sub-results keep their signs are kept (no new negatives).
    """
    out = []
    nums = leaves(node)
    for i, x in enumerate(nums):
        d = len(str(abs(x)))
        if d < 2:
            continue
        lo, hi = (10 ** (d - 2) if d > 2 else 1), 10 ** (d - 1) - 1
        new_ranges = [list(r) for r in ranges]
        new_ranges[i] = [lo, hi]
        mid = [(a + b) // 2 for a, b in new_ranges]
        out.append((with_leaves(node, mid), new_ranges))
    if len(nums) >= 3 and node[0] == "b" and not node[4] and not any(b[4] for b in ops_post(node)):
        left = node[2]
        out.append((left, [list(r) for r in ranges[: len(leaves(left))]]))
    return [(t, r) for t, r in out if signs_of(t) == signs_of(node)[: len(signs_of(t))]]


def stone_space(template, ranges, cons: dict, taken: set, frame: dict, limit: int = 20000) -> int:
    """Fresh instances of the stone's skeleton in the cell, not counting `taken` questions (exact when small)."""
    total = math.prod(hi - lo + 1 for lo, hi in ranges)
    shape, signs = shape_of(template), signs_of(template)

    def fits_cell(node) -> bool:
        return shape_of(node) == shape and signs_of(node) == signs and min(sum(carry_vector(node)), 2) == cons["cls"]

    if total <= limit:
        nodes = (with_leaves(template, list(v)) for v in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges)))
        return sum(1 for n in nodes if fits_cell(n) and frame_question(n, frame) not in taken)
    rng = random.Random(f"stone:{shape}")
    hits = sum(1 for _ in range(limit) if fits_cell(with_leaves(template, [rng.randint(lo, hi) for lo, hi in ranges])))
    used = sum(1 for q in taken if (p := split_frame(q)) and (n := parse_expr(p[1])) and fits_cell(n))
    return max(0, int(hits * total / limit) - used)
