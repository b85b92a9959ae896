"""A scripted teacher for `selfimprove-arith`: the worked example of the teacher contract.

    selfimprove run selfimprove-arith --teacher examples/arith_teacher.py:ArithTeacher
    python examples/arith_teacher.py --run-dir runs/<run> --iteration 1     # one write by hand

It is dataset-specific by design (it knows that questions are bare arithmetic
expressions like "47+38" or "85-(40-12)"), which is why it lives here and not
in the core. What it does for iteration N:

1. Reads the failed TRAIN rollouts (`failures.jsonl`) and the anchor's own
   train rollouts (iter_0's last steps: every iteration trains from iter_0's
   checkpoint, so iter_0's final-step behaviour is the student being taught).
   Structure is inferred from the question text only: the parse tree gives the
   operator/parenthesis pattern, the operand digit lengths, the sign of every
   sub-result and, computed from the operands, the carries/borrows of every
   step. Completions are classified (no answer tag, sign error, off by a power
   of ten = a dropped carry/borrow, wrong digits) against the value computed
   from the expression. No hidden label is ever read (rows carry none).
2. Ranks failure modes by how much GRPO can learn from them. A structure the
   student solves with probability p gives reward variance p(1-p) per group
   (all-right or all-wrong groups carry no gradient) and has 1-p room to grow,
   so learnability = (27/4) p (1-p)^2 (1 at p = 1/3), and the weighted severity
   of a (structure, carry profile) is its share of the train rollouts times its
   learnability. Partial structures outrank both solved and hopeless ones.
2b. Drills what the real data cannot teach. A structure the student solves in
   under HOPELESS_P of its rollouts gives GRPO all-wrong groups almost
   everywhere: at its share of the real mix (1/8 here) a step holds ~0.1
   correct rollouts of it, and the habit behind the failures never moves.
   Concentrated (most of a step's prompts), the same rare successes become a
   few signal-carrying groups per step, and Adam's normalised update makes a
   few groups enough: such a structure gets RESCUE_VALUE instead of its ~0
   learnability (measured: 50 steps on real-shape rows of the two hopeless
   kinds took `347+8` from 0.00 to 0.99, where the real mix left it at 0.00),
   and the drillable hopeless structures together get RESCUE_SHARE (70%) of
   the weight, the partial ones the rest.
   When the train split has no fresh instances to drill it with, its easier
   variants that the split does not hold (one operand a digit shorter, or the
   last term dropped) become a "Stepping-stone ..." domain instead, weighted by
   the hopeless structure's share (STONE_VALUE; SwS's mechanism).
3. Writes `weakness_report.md`: domains = the structures with the highest
   weighted severity (3-6; more when the top ones have few fresh instances
   left), sub_domains = their carry/borrow profiles (no / one / chained),
   rows = a 3.5% floor per bucket plus the rest shared in proportion to weighted
   severity, and 4-6 structural features chosen by how much they raise the
   failure rate (among subsets that meet the seed's feature bars).
4. Writes `gen_dataset.py`: one template per bucket (a failed prompt's skeleton
   plus the bucket's carry constraint, instantiated with fresh numbers), one
   exact solver (integer evaluation of the parse tree, cross-checked with
   Python's evaluator), a column-by-column derivation ending in the hub's
   answer tag, and a round-trip assert with the hub parser on every row.
   Before writing, the teacher runs the very same row builder in-process and
   checks the seed's nine lines, the report gate and the repeat rule,
   rebalancing rows until they pass, so the first write normally passes.
5. On feedback (a re-call after a failed gate) it moves to fresh numbers
   (SEED_OFFSET + 10) with stricter margins; after an eval-overlap failure it
   also cuts the fresh-sampling risk budget by 4.

Eval overlap (the eval split is sealed, so it is avoided by construction): the
env's train and eval splits are disjoint, so fresh numbers are drawn among the
instances of the skeleton that the TRAIN split contains and that no earlier
iteration used. Only when those run out (small spaces such as a 1-digit x
2-digit product, 720 instances of which the eval split holds ~15%, are gone
after about three iterations) does a bucket sample operands freely, and only
up to the row count where the expected number of eval collisions stays below
0.01 per bucket (the eval share of the skeleton's space is estimated from the
eval size in hub_env.json and the structure's share of the train split).

What is not covered: other datasets, unary minus, division, and questions whose
text is more than one arithmetic expression in a fixed frame.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import math
import os
import pprint
import random
import re
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# ======================================================================
# Part 1. The expression toolkit. These functions are copied verbatim into
# gen_dataset.py (see GENERATOR_FUNCTIONS), so the teacher and the
# generator classify, sample and solve with the same code.
# Nodes: ("n", value) | ("b", op, left, right, parenthesised).
# ======================================================================


def parse_expr(text):
    """The parse tree of a bare arithmetic expression (+, -, *, parentheses), or None."""
    toks = re.findall(r"\d+|[-+*()]|\S", text)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        tok = peek()
        pos[0] += 1
        return tok

    def factor():
        tok = take()
        if tok is not None and tok.isdigit() and (len(tok) == 1 or tok[0] != "0"):
            return ("n", int(tok))
        if tok == "(":
            inner = expr()
            if take() != ")" or inner[0] != "b":
                raise ValueError("unbalanced or trivial parentheses")
            return ("b", inner[1], inner[2], inner[3], True)
        raise ValueError(f"unexpected token {tok!r}")

    def term():
        node = factor()
        while peek() == "*":
            take()
            node = ("b", "*", node, factor(), False)
        return node

    def expr():
        node = term()
        while peek() in ("+", "-"):
            op = take()
            node = ("b", op, node, term(), False)
        return node

    try:
        node = expr()
    except (ValueError, RecursionError):
        return None
    return node if pos[0] == len(toks) and node[0] == "b" else None


def value(node):
    """Exact integer value of a parse tree (the solver)."""
    if node[0] == "n":
        return node[1]
    a, b = value(node[2]), value(node[3])
    return a + b if node[1] == "+" else a - b if node[1] == "-" else a * b


def render(node, spaced=False):
    """The expression text of a parse tree, parentheses where the tree has them."""
    if node[0] == "n":
        return str(node[1])
    sep = f" {node[1]} " if spaced else node[1]
    text = render(node[2], spaced) + sep + render(node[3], spaced)
    return f"({text})" if node[4] else text


def leaves(node):
    """Operands in text order."""
    return [node[1]] if node[0] == "n" else leaves(node[2]) + leaves(node[3])


def with_leaves(node, vals):
    """The same tree with its operands replaced, in text order."""
    it = iter(vals)

    def go(n):
        return ("n", next(it)) if n[0] == "n" else ("b", n[1], go(n[2]), go(n[3]), n[4])

    return go(node)


def ops_post(node):
    """Operation nodes in evaluation order (post-order)."""
    return [] if node[0] == "n" else ops_post(node[2]) + ops_post(node[3]) + [node]


def shape_of(node):
    """Operator/parenthesis pattern with digit lengths, e.g. '##-(##-##)'."""
    if node[0] == "n":
        return "#" * len(str(node[1]))
    text = shape_of(node[2]) + node[1] + shape_of(node[3])
    return f"({text})" if node[4] else text


def signs_of(node):
    """'+' or '-' per operation (evaluation order): the sign of each sub-result."""
    return "".join("-" if value(b) < 0 else "+" for b in ops_post(node))


def col_add(x, y):
    """Carries of the written column addition x + y (x, y >= 0)."""
    n = c = 0
    while x or y:
        c = 1 if x % 10 + y % 10 + c >= 10 else 0
        n += c
        x, y = x // 10, y // 10
    return n


def col_sub(x, y):
    """Borrows of the written column subtraction x - y (x >= y >= 0)."""
    n = b = 0
    while x or y:
        b = 1 if x % 10 - y % 10 - b < 0 else 0
        n += b
        x, y = x // 10, y // 10
    return n


def col_mul(x, y):
    """Carries of written long multiplication x * y (x, y >= 0): inside each partial
    product (a carry added into the next digit), then while adding the partial products."""
    big, small = max(x, y), min(x, y)
    n, total, k = 0, 0, 0
    while True:
        d, c, t = small % 10, 0, big
        while t:
            c = (t % 10 * d + c) // 10
            t //= 10
            n += 1 if c and t else 0
        part = big * d * 10**k
        n += col_add(total, part) if k else 0
        total += part
        small //= 10
        k += 1
        if not small:
            return n


def op_carries(op, a, b):
    """Carries/borrows of one operation on signed operands, done on magnitudes as by hand."""
    if op == "*":
        return col_mul(abs(a), abs(b))
    if op == "-":
        b = -b
    if (a >= 0) == (b >= 0):
        return col_add(abs(a), abs(b))
    return col_sub(max(abs(a), abs(b)), min(abs(a), abs(b)))


def carry_vector(node):
    """Carries/borrows per operation, in evaluation order."""
    return tuple(op_carries(b[1], value(b[2]), value(b[3])) for b in ops_post(node))


def carry_class(node):
    """0, 1, or 2 (= two or more) carries/borrows over the whole evaluation."""
    return min(sum(carry_vector(node)), 2)


def feature_flags(node):
    """Every structural feature of the catalogue (FEATURE_CATALOGUE), True/False."""
    nums, ops, vec, v = leaves(node), ops_post(node), carry_vector(node), value(node)
    kinds = {b[1] for b in ops}
    widest = max(len(str(x)) for x in nums)
    return {
        "carry": sum(vec) >= 1,
        "chain": sum(vec) >= 2,
        "three_ops": len(nums) >= 3,
        "mixed": len(kinds) >= 2,
        "minus": "-" in kinds,
        "paren": any(b[4] for b in ops if b is not node),
        "negative": v < 0 or any(value(b) < 0 for b in ops),
        "mult": "*" in kinds,
        "wide": widest >= 3,
        "uneven": len({len(str(abs(x))) for x in nums}) > 1,
        "width": len(str(abs(v))) != widest,
        "zero": "0" in "".join(str(x) for x in nums) + str(abs(v)),
    }


def difficulty_of(node, student_bonus=0):
    """easy/med/hard from structure: steps + carries (max 2) + parentheses + sign + product + width,
    plus `student_bonus` (1 when the student solves this structure and carry profile < 35% of the time)."""
    f = feature_flags(node)
    score = len(leaves(node)) - 1 + min(sum(carry_vector(node)), 2) + student_bonus
    score += f["paren"] + f["negative"] + f["mult"] + f["wide"]
    return "hard" if score >= 3 else "med" if score == 2 else "easy"


def number_traits(node) -> str:
    """The number characteristics of one instance, as the diversity gate's `numbers` label.

    Three traits a reader can check on the question itself: a 0 digit anywhere in the
    working (operands, intermediate results, result: 11+9+3 passes through 20), a result
    wider or narrower than the widest operand, and an operand used twice (14+7+7). The
    working counts, not only operands and result: the real split's three-term chains hold
    no 0 in operands or results at all, so a label without intermediates is constant there
    and the gate rightly fails the bucket (a fresh-clone demo did, 2026-12-02)."""
    nums, v = leaves(node), value(node)
    working = [*nums, *(value(b) for b in ops_post(node))]  # every intermediate result; the last one is v
    zero = "0" in "".join(str(abs(x)) for x in working)
    width = len(str(abs(v))) != max(len(str(abs(x))) for x in nums)
    repeated = len(set(nums)) < len(nums)
    return ", ".join([
        "zero digit" if zero else "no zero",
        "result width differs" if width else "same width",
        "repeated operand" if repeated else "distinct operands",
    ])


def axes_of(node):
    """The row's place on the seed's five Pillar 2 axes (the diversity gate reads info.axes)."""
    return {
        "cover_story": "none: bare expression",  # the real questions are bare expressions
        "depth": len(ops_post(node)) + sum(carry_vector(node)),  # operations plus carries/borrows to hold
        "surface": "bare expression",
        "numbers": number_traits(node),
        "distractor": False,
    }


def place_name(k):
    return ["ones", "tens", "hundreds", "thousands"][k] if k < 4 else f"10^{k} column"


def explain_add(x, y):
    """Column-by-column addition x + y with its carries."""
    parts, c, k = [], 0, 0
    while x or y:
        a, b = x % 10, y % 10
        s = a + b + c
        parts.append(f"{place_name(k)} {a}+{b}{'+1' if c else ''}={s}" + (f" (write {s % 10}, carry 1)" if s >= 10 else ""))
        c, x, y, k = s // 10, x // 10, y // 10, k + 1
    if c:
        parts.append(f"{place_name(k)} the carried 1")
    return "; ".join(parts) or "0+0=0"


def explain_sub(x, y):
    """Column-by-column subtraction x - y (x >= y) with its borrows."""
    parts, owe, k = [], 0, 0
    while x or y:
        a, b = x % 10, y % 10
        top = a - owe
        shown = f"{a}-1" if owe else f"{a}"
        if top < b:
            parts.append(f"{place_name(k)} {shown} < {b}, borrow: {top + 10}-{b}={top + 10 - b}")
            owe = 1
        else:
            parts.append(f"{place_name(k)} {shown}-{b}={top - b}")
            owe = 0
        x, y, k = x // 10, y // 10, k + 1
    return "; ".join(parts) or "0-0=0"


def explain_mul(x, y):
    """Long multiplication x * y: digit products with carries, then the partial products."""
    big, small = max(x, y), min(x, y)
    if small < 10:
        parts, c, t = [], 0, big
        while t:
            d = t % 10
            p = d * small + c
            t //= 10
            text = f"{d}*{small}{f'+{c}' if c else ''}={p}"
            parts.append(text + (f" (write {p % 10}, carry {p // 10})" if t and p >= 10 else ""))
            c = p // 10 if t else 0
        return f"digit by digit from the right: {'; '.join(parts) or f'0*{small}=0'}"
    rows, k, s = [], 0, small
    while s:
        rows.append((s % 10 * 10**k, big * (s % 10) * 10**k))
        s, k = s // 10, k + 1
    parts = "; ".join(f"{big}*{d}={r}" for d, r in rows)
    return f"partial products {parts}; sum {'+'.join(str(r) for _, r in rows)}={sum(r for _, r in rows)}"


def explain_op(op, a, b):
    """One line of the derivation for `a op b` (operands may be negative intermediates)."""
    shown = f"{a if a >= 0 else f'({a})'}{op}{b if b >= 0 else f'({b})'}"
    r = a + b if op == "+" else a - b if op == "-" else a * b
    if op == "*":
        body = explain_mul(abs(a), abs(b)) + ("; one factor is negative, so the product is negative" if r < 0 else "")
        return f"{shown}: {body}. So {shown} = {r}."
    b2 = b if op == "+" else -b
    if (a >= 0) == (b2 >= 0):
        body = f"add {abs(a)}+{abs(b2)}: {explain_add(abs(a), abs(b2))}"
        if a < 0:
            body += "; both terms are negative, so the sum is negative"
        return f"{shown}: {body}. So {shown} = {r}."
    hi, lo = max(abs(a), abs(b2)), min(abs(a), abs(b2))
    body = f"subtract {hi}-{lo}: {explain_sub(hi, lo)}"
    if r < 0:
        body += "; the negative term has the larger size, so the result is negative"
    return f"{shown}: {body}. So {shown} = {r}."


def reasoning_for(node, tag):
    """The derivation the hub parser reads: one line per operation, then the answer tag."""
    steps = ops_post(node)
    paren = any(b[4] for b in steps if b is not node)
    lines = [f"Evaluate {render(node)} one operation at a time{', parentheses first' if paren else ', left to right'}."]
    for i, b in enumerate(steps, 1):
        lines.append(f"Step {i}: " + explain_op(b[1], value(b[2]), value(b[3])))
    lines.append(f"<{tag}>{value(node)}</{tag}>")
    return "\n".join(lines)


def fits(node, b, want_vec=None):
    """Does an instance satisfy bucket b's skeleton and carry constraint (and an anchor's carry vector)?"""
    if node is None or shape_of(node) != b["shape"] or signs_of(node) != b["signs"]:
        return False
    vec = carry_vector(node)
    if b.get("cls") is not None and min(sum(vec), 2) != b["cls"]:
        return False
    if b.get("zero") is not None and feature_flags(node)["zero"] != b["zero"]:
        return False
    return want_vec is None or list(vec) == list(want_vec)


def frame_question(node, frame):
    return frame["prefix"] + render(node, frame["spaced"]) + frame["suffix"]


def pool_entries(b, frame):
    """The bucket's train-split candidates, parsed once: [node, carry vector, question] of each that fits."""
    out = []
    for expr in b.get("pool") or []:
        node = parse_expr(expr)
        if fits(node, b):
            out.append([node, list(carry_vector(node)), frame_question(node, frame)])
    return out


def draw(b, template, pool, used, rng, frame, want_vec=None, tries=4000):
    """One fresh instance for bucket b: from its train-split pool, or sampled in its operand ranges."""
    if b["mode"] == "pool":
        for i, (node, vec, question) in enumerate(pool):
            if (want_vec is None or vec == list(want_vec)) and question not in used:
                pool.pop(i)
                return node
        return None
    for _ in range(tries):
        node = with_leaves(template, [rng.randint(lo, hi) for lo, hi in b["ranges"]])
        if fits(node, b, want_vec) and frame_question(node, frame) not in used:
            return node
    return None


def build_rows(plan, seed, prior):
    """Every row of the dataset, deterministic in (plan, seed, prior questions)."""
    rng = random.Random(seed)
    used = set(prior) | set(plan["avoid"])
    frame, tag = plan["frame"], plan["answer_tag"]
    rows = []
    for b in plan["buckets"]:
        template = parse_expr(b["template"])
        pool = pool_entries(b, frame)
        rng.shuffle(pool)
        anchors = b["anchors"]
        n_skel = round(b["rows"] * b["skeleton_share"]) if anchors else 0
        for j in range(b["rows"]):
            anchor = anchors[j % len(anchors)] if j < n_skel else None
            node = draw(b, template, pool, used, rng, frame, anchor["vec"] if anchor else None)
            if node is None and anchor is not None:  # no fresh instance with the anchor's exact carries left
                anchor = None
                node = draw(b, template, pool, used, rng, frame)
            if node is None:
                raise RuntimeError(f"bucket ({b['domain']}, {b['sub_domain']}): no fresh instance left for row {j + 1} of {b['rows']}")
            question = frame_question(node, frame)
            used.add(question)
            flags = feature_flags(node)
            rows.append({
                "question": question,
                "answer": str(value(node)),
                "info": {
                    "domain": b["domain"],
                    "sub_domain": b["sub_domain"],
                    "difficulty": difficulty_of(node, b.get("student_bonus", 0)),
                    "structural_features": [label for fid, label in plan["features"] if flags[fid]],
                    "source": anchor["tag"] if anchor else "teacher-invented",
                    "reasoning": reasoning_for(node, tag),
                    "axes": axes_of(node),
                },
            })
    rng.shuffle(rows)
    return rows


GENERATOR_FUNCTIONS = [
    parse_expr, value, render, leaves, with_leaves, ops_post, shape_of, signs_of, col_add, col_sub, col_mul,
    op_carries, carry_vector, carry_class, feature_flags, difficulty_of, number_traits, axes_of, place_name, explain_add, explain_sub,
    explain_mul, explain_op, reasoning_for, fits, frame_question, pool_entries, draw, build_rows,
]

# ======================================================================
# Part 2. What the teacher reads: failures, rollouts, the train split.
# ======================================================================

FEATURE_CATALOGUE = {  # id -> (label used in rows, one-sentence definition)
    "carry": ("carry or borrow", "At least one column of the written algorithm carries (addition, multiplication) or borrows (subtraction)."),
    "chain": ("chained carries", "Two or more carries or borrows over the whole evaluation, so one slip propagates into later columns."),
    "three_ops": ("three operands", "Three or more numbers, so an intermediate result must be held before the last operation."),
    "mixed": ("mixed operators", "More than one kind of operator (+, -, *) in one expression."),
    "paren": ("parenthesised group", "Parentheses force an inner operation first, and a subtracted group flips the sign of its terms."),
    "minus": ("subtraction", "A subtraction: digits are taken away column by column and the order of the operands decides the sign."),
    "negative": ("negative value", "The result or an intermediate result is below zero, so the answer needs a minus sign."),
    "mult": ("multiplication step", "A product, computed digit by digit with carries between the digit products."),
    "wide": ("three-digit operand", "An operand with three or more digits, so more columns must be processed."),
    "uneven": ("uneven operand widths", "Operands have different numbers of digits, so the columns must be aligned from the right first."),
    "width": ("result width change", "The result has more digits than the widest operand (a final carry) or fewer (borrows collapse it)."),
    "zero": ("zero digit", "An operand or the result contains a 0 digit, a classic place-holding slip."),
}

# Pillar 2 axes a bucket cannot vary here (the report's fixed_axes): only number characteristics vary.
FIXED_AXES = {
    "cover_story": "the real questions are bare arithmetic expressions with no story",
    "surface": "the real questions have one written form; another would train on text the eval never shows",
    "distractor": "a bare expression has no room for irrelevant information",
    "depth": "each bucket is one structure under one carry/borrow profile (the failure mode drilled), "
             "which fixes its operations and carries",
}
ANCHOR_STEPS = 25  # how many final steps of the anchor's train rollouts estimate per-structure success
TOTAL_ROWS = 800  # within the seed's 500-1000
BUCKET_FLOOR = 0.035  # every bucket >= 3.5% (the gate's bar is 3%)
POOL_MARGIN = 1.5  # a pool bucket needs this many candidates per row
FREE_RISK_MAX = 0.01  # expected eval collisions allowed per freshly sampled bucket (/4 after an eval_overlap failure)
HARD_FOR_STUDENT = 0.35  # a (structure, carry profile) solved less often than this adds 1 to its rows' difficulty score
# Stepping stones (SwS's mechanism): a structure the student (almost) never solves gives GRPO no signal
# on the real split, however many rows of it are trained on. Easier variants of its skeleton that the real
# split does not hold (one operand a digit shorter, or the last term dropped) can sit in the learnable band
# and carry what they teach back to the hard structure.
HOPELESS_P = 0.05  # success below this on the anchor's train rollouts: the structure is hopeless for GRPO
RESCUE_VALUE = 1.0  # a hopeless structure's weighted severity per unit share when drilled concentrated (= the learnability peak)
# ... and concentrated means MOST of the rows: the hopeless structures that can be drilled share RESCUE_SHARE
# of the weight (before the floors), the partial ones the rest. At their natural weight they got ~45% of the
# rows, which left `347+8` at 0.43 (mean of 3 seeds, bench/lift.py 2026-12-01); 800 rows of only the hopeless
# kinds (the oracle arm) took it to 1.00 in the same 50 steps. The partial kinds need few rows: the anchor
# already solves them ~90% greedy, and the oracle arm kept them there without any.
RESCUE_SHARE = 0.7
STONE_VALUE = 0.75  # a stone's weighted severity per unit share of the hopeless structures it leads to
ALLOC_EXPONENTS = (1.0, 1.5, 0.75)  # iteration 1, 2, 3, 4, ...: proportional, sharper, flatter (each iteration is an experiment)
# The gate's bars plus a small margin: the self-check simulates the exact rows the generator writes, so the
# margin only absorbs pilot-vs-final drift; a retry raises it by 0.05. Every row moved to meet a bar is a row
# taken from a more severe bucket, so the margin is kept small.
BARS = {"hard": 0.42, "easy": 0.18, "n2": 0.82, "n3": 0.42, "feature": 0.11, "skeleton": 0.33}
BAR_NAMES = {"hard": "hard >= 40%", "easy": "easy <= 20%", "n2": ">= 2 features on 80%", "n3": ">= 3 features on 40%",
             "skeleton": "skeleton >= 30%"}
_SPAN = re.compile(r"[\d(][\d\s+\-*()]*[\d)]")


def split_frame(question):
    """(prefix, expression, suffix) around the longest arithmetic span of a question, or None."""
    spans = [m for m in _SPAN.finditer(question) if re.search(r"\d\s*[-+*]\s*[\d(]", m.group())]
    if not spans:
        return None
    m = max(spans, key=lambda s: len(s.group()))
    return question[: m.start()], m.group(), question[m.end():]


def _message_text(messages, role):
    if isinstance(messages, str):
        return messages
    if isinstance(messages, list):
        texts = [m.get("content") or "" for m in messages if isinstance(m, dict) and m.get("role", role) == role]
        texts = [t if isinstance(t, str) else json.dumps(t) for t in texts]
        return texts[-1] if role == "user" and texts else "\n".join(texts)
    return "" if messages is None else str(messages)


@dataclass
class Obs:
    """One train rollout (or failure row), classified from its question text."""

    question: str
    expr: str
    node: tuple
    reward: float
    completion: str = ""
    truncated: bool = False
    step: int | None = None
    idx: int | None = None
    example_id: Any = None
    key: str = field(init=False)  # structure: shape + sign of every sub-result, e.g. '##-(##-##)|++'
    vec: tuple = field(init=False)  # carries/borrows per operation
    cls: int = field(init=False)  # 0, 1, 2 (= two or more) carries/borrows

    def __post_init__(self) -> None:
        self.key = f"{shape_of(self.node)}|{signs_of(self.node)}"
        self.vec = carry_vector(self.node)
        self.cls = min(sum(self.vec), 2)

    @functools.cached_property
    def zero(self) -> bool:
        """A 0 digit in an operand or the result."""
        return "0" in "".join(str(x) for x in leaves(self.node)) + str(abs(value(self.node)))

    @property
    def ok(self) -> bool:
        return self.reward >= 0.5


def _obs(question: str, reward: float, **kw) -> Obs | None:
    parts = split_frame(question or "")
    node = parse_expr(parts[1]) if parts else None
    return Obs(question, parts[1], node, reward, **kw) if node else None


def read_failures(path: Path) -> tuple[list[Obs], int]:
    """Classified failure rows (with step/idx) and how many rows were not expressions."""
    out, skipped = [], 0
    if not Path(path).is_file():
        return out, skipped
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        o = _obs(str(r.get("question", "")), float(r.get("reward") or 0.0), completion=str(r.get("completion") or ""),
                 truncated=bool(r.get("is_truncated")), step=r.get("step"), idx=r.get("idx"), example_id=r.get("example_id"))
        if o is None:
            skipped += 1
        else:
            out.append(o)
    return out, skipped


def rollout_files(arm_dir: Path) -> list[tuple[int, Path]]:
    """(step, train_rollouts.jsonl) of an arm dir, ascending."""
    root = Path(arm_dir) / "prime_out" / "run_default" / "rollouts"
    found = []
    for p in root.glob("step_*"):
        tail = p.name[5:]
        if tail.isdigit() and (p / "train_rollouts.jsonl").is_file():
            found.append((int(tail), p / "train_rollouts.jsonl"))
    return sorted(found)


def read_rollouts(arm_dir: Path, last: int = ANCHOR_STEPS) -> tuple[list[Obs], list[int]]:
    """Classified TRAIN rollouts of an arm's last `last` steps, and the steps read."""
    files = rollout_files(arm_dir)[-last:]
    out = []
    for step, path in files:
        with open(path, encoding="utf-8") as f:
            for idx, line in enumerate(f):
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line
                o = _obs(_message_text(r.get("prompt"), "user"), float(r.get("reward") or 0.0),
                         completion=_message_text(r.get("completion"), "assistant"),
                         truncated=bool(r.get("is_truncated")), step=step, idx=idx, example_id=r.get("example_id"))
                if o is not None:
                    out.append(o)
    return out, [s for s, _ in files]


def error_kind(o: Obs, tag: str) -> str:
    """Why a completion earned no reward, judged against the value of the expression."""
    found = re.findall(rf"<{tag}>\s*(.*?)\s*</{tag}>", o.completion, re.S)
    if not found:
        return "truncated" if o.truncated else "no answer tag"
    got = found[-1].strip()
    if not re.fullmatch(r"-?\d+", got):
        return "non-integer answer"
    g, t = int(got), value(o.node)
    if g == t:
        return "right value, rejected format"
    if g == -t:
        return "sign error"
    d = abs(g - t)
    if d >= 10 and 10 ** round(math.log10(d)) == d:
        return "off by a power of ten"
    return "off by one" if d == 1 else "wrong digits"


# ======================================================================
# Part 3. Planning: severity, domains, buckets, features, modes.
# ======================================================================


def severity_score(p: float) -> float:
    """Learnability (27/4) p (1-p)^2: GRPO signal p(1-p) times headroom (1-p), 1.0 at p = 1/3.

    Below HOPELESS_P the diluted signal is ~0 but the concentrated one is not (module docstring, 2b):
    a hopeless structure scores RESCUE_VALUE, so it is drilled with most of the rows."""
    if p < HOPELESS_P:
        return RESCUE_VALUE
    return 6.75 * p * (1 - p) ** 2


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


def rescue_weights(cells: list, weights: dict) -> dict:
    """Scale the drillable hopeless cells so that together they hold RESCUE_SHARE of the weight.

    Only when both kinds are present (nothing to shift otherwise). Stepping stones keep their weight:
    concentrating them did not help (bench/stones.py: stones alone moved `347+8` from 0.00 to 0.02)."""
    hopeless = {id(c) for c in cells if c.p < HOPELESS_P and not c.stone_for}
    h = sum(w for k, w in weights.items() if k in hopeless)
    rest = sum(w for k, w in weights.items() if k not in hopeless)
    if not h or not rest:
        return weights
    scale = RESCUE_SHARE / (1 - RESCUE_SHARE) * rest / h
    return {k: w * scale if k in hopeless else w for k, w in weights.items()}


def _round_alloc(weights: dict, total: int, floor: int, caps: dict) -> dict:
    """Integer rows per bucket: the floor each, the rest shared in proportion to weights, never above a cap.

    Water-filling: a bucket that reaches its cap drops out and the others share
    what it could not take. The sum is `total` unless the caps forbid it.
    """
    rows = {k: min(floor, caps[k]) for k in weights}
    left = total - sum(rows.values())
    while left > 0:
        room = [k for k in weights if rows[k] < caps[k]]
        if not room:
            break
        wsum = sum(weights[k] for k in room) or 1.0
        grant = {k: min(caps[k] - rows[k], int(left * weights[k] / wsum)) for k in room}
        if not any(grant.values()):  # the last few rows: one each, heaviest first
            for k in sorted(room, key=lambda k: -weights[k])[:left]:
                grant[k] = 1
        for k, g in grant.items():
            rows[k] += g
            left -= g
    return rows


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


class _Planner:
    """One planning pass: inputs -> structures -> domains -> buckets -> rows (see the module docstring)."""

    def __init__(self, teacher: "ArithTeacher", ctx, offset: int, strict: bool, rules: set[str], widen: int = 0,
                 stones: bool = True):
        self.teacher, self.ctx, self.offset, self.rules, self.widen = teacher, ctx, offset, rules, widen
        self.stones = stones
        self.n_iter = int(ctx.iteration)
        self.run_dir = Path(ctx.run_dir)
        self.tag = _answer_tag(ctx.hub_env)
        self.notes: list[str] = []
        self.bars = {k: (v - 0.05 if k == "easy" else v + 0.05) for k, v in BARS.items()} if strict else dict(BARS)
        self.floor_share = BUCKET_FLOOR + (0.01 if rules & {"seed_smallest_bucket", "bucket_floor"} else 0.0)
        self.total = teacher.total_rows
        self.exponent = ALLOC_EXPONENTS[(self.n_iter - 1) % len(ALLOC_EXPONENTS)]
        self.seed = self.n_iter * 1000 + offset
        self._space: dict = {}

    def run(self) -> Plan:
        self.read_inputs()
        self.measure_structures()
        self.choose_domains()
        self.allocate()
        self.pilot_and_rebalance()
        return self.finish()

    # 1. inputs ----------------------------------------------------------

    def read_inputs(self) -> None:
        ctx = self.ctx
        self.failures, self.fail_skipped = read_failures(ctx.failures_path)
        self.anchor, self.anchor_steps = read_rollouts(self.run_dir / "iter_0")
        self.anchor_src = "iter_0"
        if not self.anchor and self.n_iter > 1:
            self.anchor, self.anchor_steps = read_rollouts(self.run_dir / f"iter_{self.n_iter - 1}")
            self.anchor_src = f"iter_{self.n_iter - 1}"
        if not self.anchor:
            self.notes.append("no train rollouts found: severity falls back to failure counts (learnability not measurable)")
        self.source = self.anchor or self.failures
        if not self.source:
            raise PlanError(f"{ctx.failures_path}: no failed train rollout is an arithmetic expression")
        self.train_qs, self.train_src = self.teacher._load_train_questions(ctx, self.anchor)
        self.train_obs = self.teacher._train_index(self.train_qs)
        self.n_train = sum(len(v) for v in self.train_obs.values())
        self.prior = _prior_questions(ctx.prior_iterations)
        self.avoid = sorted({o.question for o in self.failures})
        self.excluded = set(self.prior) | set(self.avoid)
        self.frame = _majority_frame([o.question for o in self.source] or self.train_qs)
        self.eval_size = int((ctx.hub_env or {}).get("eval_size") or 1000)

    # 2. structures ------------------------------------------------------

    def measure(self, cell: Cell) -> None:
        """Rollout count, success, frequency, mixed-outcome share and failure rows of a cell."""
        rows = [o for o in self.anchor if cell.match(o)]
        cell.n, cell.succ = len(rows), sum(o.reward for o in rows)
        cell.freq = len(rows) / (len(self.anchor) or 1)
        cell.failures = [o for o in self.failures if cell.match(o)]
        groups: dict = defaultdict(list)
        for o in rows:
            groups[(o.step, o.example_id if o.example_id is not None else o.question)].append(o.ok)
        multi = [g for g in groups.values() if len(g) > 1]
        cell.mixed = sum(1 for g in multi if 0 < sum(g) < len(g)) / len(multi) if multi else None
        if not self.anchor:  # no rollouts: the share of failures stands in for frequency x learnability
            cell.freq = len(cell.failures) / (len(self.failures) or 1)

    def measure_structures(self) -> None:
        self.struct: dict[str, Cell] = {}
        for k in sorted({o.key for o in self.source}):
            c = Cell(k, {})
            self.measure(c)
            c.p = (c.succ + 0.5) / (c.n + 1)
            c.score = severity_score(c.p) if self.anchor else 1.0
            c.weight = c.freq * c.score
            c.example = next(o.node for o in self.source if o.key == k)
            self.struct[k] = c

    def template_obs(self, key: str) -> list[Obs]:
        return self.train_obs.get(key) or [o for o in self.source if o.key == key]

    def sample_space(self, key: str) -> tuple[float, list[tuple[int, bool]]]:
        """(size of the structure's space in its observed operand ranges, (cls, zero) of sampled instances)."""
        if key not in self._space:
            obs = self.template_obs(key)
            ranges, tmpl = _ranges(obs), obs[0].node
            rng = random.Random(f"space:{key}")
            draws, hits = 600, []
            shape, signs = key.split("|")
            for _ in range(draws):
                node = with_leaves(tmpl, [rng.randint(lo, hi) for lo, hi in ranges])
                if shape_of(node) == shape and signs_of(node) == signs:
                    d = [str(x) for x in leaves(node)] + [str(abs(value(node)))]
                    hits.append((carry_class(node), "0" in "".join(d)))
            size = math.prod(hi - lo + 1 for lo, hi in ranges) * len(hits) / draws
            self._space[key] = (size, hits)
        return self._space[key]

    def capacity(self, cell: Cell) -> None:
        """How many rows a cell can take: fresh train-split instances, or fresh samples within the eval-risk budget."""
        cell.pool = sorted({o.expr for o in self.train_obs.get(cell.key, []) if cell.match(o) and o.question not in self.excluded})
        size, hits = self.sample_space(cell.key)
        in_cell = sum(1 for cls, zero in hits if cell.cons.get("cls", cls) == cls and cell.cons.get("zero", zero) == zero)
        key_share = len(self.train_obs.get(cell.key, [])) / self.n_train if self.n_train else self.struct[cell.key].freq
        risk_row = self.eval_size * key_share / size if size else 1.0  # chance that a fresh sample is an eval question
        budget = FREE_RISK_MAX / (4 if "eval_overlap" in self.rules else 1)  # the gate saw a collision: be stricter
        cell.free_cap = int(budget / risk_row) if in_cell and risk_row > 0 else 0
        cell.cap = max(int(len(cell.pool) / POOL_MARGIN), cell.free_cap)

    # 3. domains ---------------------------------------------------------

    def make_cell(self, key: str, cons: dict, floor_rows: int) -> Cell | None:
        c = Cell(key, cons)
        self.measure(c)
        if self.anchor and c.n == 0 and not c.failures:
            return None  # never observed: not a failure mode of this student
        self.capacity(c)
        if c.cap < floor_rows:
            return None
        s = self.struct[key]
        c.p = (c.succ + 10 * s.p) / (c.n + 10)  # small cells shrink toward the structure's rate
        c.score = severity_score(c.p) if self.anchor else 1.0
        c.weight = c.freq * c.score
        c.example = s.example
        c.sub_label = _sub_label(s.example, cons)
        return c

    def candidate_domains(self, split_zero: bool) -> list[DomainPlan]:
        floor_rows = math.ceil(self.floor_share * self.total)
        out = []
        for k, s in self.struct.items():
            if split_zero:  # fallback: one domain per (structure, carry class), split by zero digits
                groups = [[{"cls": c, "zero": z} for z in (True, False)] for c in (0, 1, 2)]
            else:
                groups = [[{"cls": c} for c in (0, 1, 2)]]
            for group in groups:
                cells = [c for c in (self.make_cell(k, cons, floor_rows) for cons in group) if c is not None]
                if len(cells) < 2:
                    continue
                cells.sort(key=lambda c: -c.weight)
                label = _structure_label(s.example)
                if split_zero:
                    label = f"Expressions {k.split('|')[0]} {['no-carry', 'one-carry', 'multi-carry'][group[0]['cls']]}"
                n = sum(c.n for c in cells)
                p = sum(c.succ for c in cells) / n if n else s.p
                out.append(DomainPlan(k, label, cells, sum(c.weight for c in cells), p, n))
        if not split_zero and self.anchor and self.stones:
            drilled = {d.key for d in out}
            out += self.stone_domains(floor_rows, drilled)
        return out

    def stone_domains(self, floor_rows: int, drilled: set[str]) -> list[DomainPlan]:
        """Stepping-stone domains: easier variants of the hopeless structures that cannot be drilled
        (too few fresh instances for a domain of their own), which the real TRAIN split lacks."""
        hopeless = [s for s in self.struct.values() if s.p < HOPELESS_P and s.n >= 32 and s.key not in drilled]
        stones: dict[str, dict] = {}
        for h in hopeless:
            obs = self.template_obs(h.key)
            for template, ranges in stone_variants(obs[0].node, _ranges(obs)):
                key = f"{shape_of(template)}|{signs_of(template)}"
                if key in self.train_obs or key in self.struct:
                    continue  # the real split already holds it: GRPO on real data sees it too
                st = stones.setdefault(key, {"template": template, "ranges": ranges, "for": []})
                st["for"].append(h)
        out = []
        for key, st in stones.items():
            cells = []
            # Carrying stones first: a no-carry stone has ~1 structural feature, so it only joins (as the
            # easiest rung) when a carry class lacks fresh instances.
            for cls in (1, 2, 0):
                if len(cells) >= 2:
                    break
                cap = int(stone_space(st["template"], st["ranges"], {"cls": cls}, self.excluded, self.frame) / POOL_MARGIN)
                if cap < floor_rows:
                    continue
                freq = sum(h.freq for h in st["for"])
                c = Cell(key, {"cls": cls}, p=0.0, freq=freq, score=STONE_VALUE, weight=freq * STONE_VALUE,
                         example=st["template"], free_cap=cap, cap=cap, mode="free",
                         stone_for=[h.key for h in st["for"]], template=render(st["template"]), ranges=st["ranges"])
                # its anchors: failed prompts of the hard structures, or of the stone itself (an iteration after
                # the first reads the previous iteration's rollouts, which trained on stones)
                c.failures = [o for o in self.failures if o.key in c.stone_for or o.key == key]
                c.sub_label = _sub_label(st["template"], {"cls": cls})
                cells.append(c)
            if len(cells) < 2:
                continue
            label = f"Stepping-stone {_structure_label(st['template'])}"
            if len(label.split()) > 4:
                label = f"Stepping-stone {shape_of(st['template'])}"
            out.append(DomainPlan(key, label, cells, sum(c.weight for c in cells), 0.0, 0))
        return out

    def choose_domains(self) -> None:
        domains = self.candidate_domains(split_zero=False)
        self.fallback = sum(1 for d in domains if d.score > 0) < 3
        if self.fallback:
            domains = self.candidate_domains(split_zero=True)
            self.notes.append("fewer than three structures with learnable failures: each (structure, carry class) "
                              "became a domain, split by zero digits")
        domains.sort(key=lambda d: (-d.score, d.label))
        self.all_domains = domains
        if len(domains) < 3:
            raise PlanError(f"arith_teacher: only {len(domains)} structure(s) have two carry profiles with enough fresh "
                            f"instances (>= {math.ceil(self.floor_share * self.total)} rows each); the report needs 3 "
                            f"domains. Write iter_{self.n_iter}/ by hand or use another teacher.")
        top = domains[0].score or 1.0
        for d in domains:
            keep = [c for c in d.cells if c.weight >= 0.1 * (d.cells[0].weight or 1.0)]
            d.cells = (keep if len(keep) >= 2 else d.cells[:2])[:5]
            ratio = d.score / top
            d.severity = "high" if ratio >= 0.6 else "med" if ratio >= 0.3 else "low"
        chosen = [d for d in domains if d.score >= 0.25 * top][:5]
        chosen += [d for d in domains if d not in chosen][: max(0, 3 - len(chosen))]
        for d in domains:  # fresh instances run out over iterations: add the next structures until they suffice
            if sum(c.cap for e in chosen for c in e.cells) >= 1.25 * self.total or len(chosen) >= 6:
                break
            if d not in chosen:
                chosen.append(d)
                self.notes.append(f"added '{d.label}' because the more severe structures have few fresh instances left")
        for d in [d for d in domains if d not in chosen][: max(0, min(self.widen, 6 - len(chosen)))]:
            chosen.append(d)  # a retry after a failed self-check: more structures give the bars more room
            self.notes.append(f"added '{d.label}' to give the difficulty/feature bars more structures to draw on")
        chosen.sort(key=lambda d: -d.score)
        seen = Counter(d.label.lower() for d in chosen)
        for d in chosen:  # two structures can share a label (e.g. different digit lengths)
            if seen[d.label.lower()] > 1:
                d.label = " ".join(d.label.split()[:3] + [d.key.split("|")[0]])
        self.domains = chosen
        self.cells = [c for d in chosen for c in d.cells]

    # 4. rows per bucket -------------------------------------------------

    def allocate(self) -> None:
        caps = {id(c): c.cap for c in self.cells}
        if sum(caps.values()) < self.total:
            self.total = max(500, sum(caps.values()))
            self.notes.append(f"fresh instances are scarce: {self.total} rows instead of {self.teacher.total_rows}")
        self.floor_rows = math.ceil(self.floor_share * self.total)
        weights = {id(c): max(c.weight, 1e-9) ** self.exponent for c in self.cells}
        if self.anchor:  # success rates come from the anchor's rollouts only
            weights = rescue_weights(self.cells, weights)
        alloc = _round_alloc(weights, self.total, self.floor_rows, caps)
        for c in self.cells:
            c.rows = alloc[id(c)]
        self.anchors = {id(c): self.anchors_of(c) for c in self.cells}

    def anchors_of(self, c: Cell) -> list[dict]:
        """Failed prompts of this cell (newest first) whose skeleton the bucket paraphrases.

        A stepping stone paraphrases the hopeless prompts it leads to: the same operator skeleton with a
        shorter operand or one term fewer, so their carries cannot be copied (vec None)."""
        out, seen = [], set()
        for o in sorted(c.failures, key=lambda o: (o.step is None, -(o.step or 0), o.idx or 0)):
            if o.step is None or o.idx is None or o.question in seen:
                continue
            seen.add(o.question)
            out.append({"tag": f"skeleton:train_step_{int(o.step)}_idx_{int(o.idx)}",
                        "vec": None if c.stone_for else list(o.vec), "question": o.question})
        return out[:12]

    def gen_plan(self, trim: bool, skeleton: dict | None = None) -> dict:
        """The generator's PLAN (what gen_dataset.py embeds)."""
        buckets = []
        for d in self.domains:
            for c in d.cells:
                anchors = self.anchors[id(c)]
                c.mode = "pool" if len(c.pool) >= POOL_MARGIN * c.rows or c.free_cap < c.rows else "free"
                pool = list(c.pool) if c.mode == "pool" else []
                if trim and pool:  # embed enough candidates, those with the anchors' exact carries first
                    random.Random(f"pool:{self.seed}:{c.key}:{sorted(c.cons.items())}").shuffle(pool)
                    want = {tuple(a["vec"]) for a in anchors}
                    pool.sort(key=lambda e: carry_vector(parse_expr(e)) not in want)
                    pool = sorted(pool[: 3 * c.rows + 30])
                tmpl = None if c.stone_for else self.template_obs(c.key)
                buckets.append({
                    "domain": d.label, "sub_domain": c.sub_label, "rows": c.rows,
                    "template": c.template or tmpl[0].expr, "shape": c.key.split("|")[0], "signs": c.key.split("|")[1],
                    "cls": c.cons.get("cls"), "zero": c.cons.get("zero"), "mode": c.mode,
                    "ranges": c.ranges or _ranges(tmpl),
                    "student_bonus": int(bool(self.anchor) and c.p < HARD_FOR_STUDENT),
                    "anchors": anchors, "skeleton_share": (skeleton or {}).get(id(c), 0.6), "pool": pool,
                })
        return {"iteration": self.n_iter, "answer_tag": self.tag, "frame": self.frame, "features": [],
                "avoid": self.avoid, "buckets": buckets}

    # 5. pilot rows, features, rebalancing --------------------------------

    def pilot_and_rebalance(self) -> None:
        pilot = self.gen_plan(trim=False)
        pilot["features"] = [[f, f] for f in FEATURE_CATALOGUE]
        by_bucket: dict = defaultdict(list)
        for r in build_rows(pilot, self.seed, self.prior):
            by_bucket[(r["info"]["domain"], r["info"]["sub_domain"])].append(r)
        self.shares = []
        for d in self.domains:
            for c in d.cells:
                rs = by_bucket[(d.label, c.sub_label)]
                m = len(rs) or 1
                self.shares.append({
                    "hard": sum(r["info"]["difficulty"] == "hard" for r in rs) / m,
                    "easy": sum(r["info"]["difficulty"] == "easy" for r in rs) / m,
                    "skeleton": sum(r["info"]["source"].startswith("skeleton:") for r in rs) / m,
                    "flags": Counter(frozenset(r["info"]["structural_features"]) for r in rs),
                })
        self.lift = _feature_lift(self.source)
        self.features = _choose_features(self.cells, self.shares, self.lift, self.bars)
        moved = _rebalance(self.cells, self.shares, self.features, self.bars, self.floor_rows)
        if moved:
            why = ", ".join(f"{n} rows for '{bar}'" for bar, n in moved.most_common())
            self.notes.append(f"moved {sum(moved.values())} rows from more to less severe buckets to meet the seed's bars ({why})")
        self.skeleton = {id(c): 0.6 for c in self.cells}
        if _metrics(self.cells, self.shares, self.features)["skeleton"] < self.bars["skeleton"]:
            for c, s in zip(self.cells, self.shares):
                self.skeleton[id(c)] = 1.0 if s["skeleton"] > 0 else 0.6

    def finish(self) -> Plan:
        gp = self.gen_plan(trim=True, skeleton=self.skeleton)
        gp["features"] = [[f, FEATURE_CATALOGUE[f][0]] for f in self.features]
        rows = build_rows(gp, self.seed, self.prior)
        for d in self.domains:
            d.evidence = _evidence(d, self.tag)
        stats = {
            "anchor_src": self.anchor_src, "anchor_steps": self.anchor_steps, "anchor_rollouts": len(self.anchor),
            "failures": len(self.failures), "failure_obs": self.failures, "failures_skipped": self.fail_skipped,
            "train_src": self.train_src, "train_questions": len(self.train_qs), "structures": self.struct,
            "all_domains": self.all_domains, "exponent": self.exponent, "lift": self.lift, "fallback": self.fallback,
            "eval_size": self.eval_size, "prior_questions": len(self.prior), "bars": self.bars,
            "stones": [d.label for d in self.domains if d.cells[0].stone_for],
        }
        if self.n_iter > 1 and self.anchor_src == "iter_0":
            stats["prev_rollouts"] = read_rollouts(self.run_dir / f"iter_{self.n_iter - 1}")[0]
        return Plan(self.n_iter, self.offset, self.domains, self.features, sum(c.rows for c in self.cells),
                    self.frame, self.tag, gp, rows, self.notes, stats)


class ArithTeacher:
    """The scripted teacher: `write(ctx)` writes weakness_report.md and gen_dataset.py into ctx.iter_dir.

    `ctx` needs the fields of `selfimprove.teacher.TeacherContext` (iteration,
    iter_dir, run_dir, failures_path, analysis, hub_env, prior_iterations,
    feedback); any object with those attributes works. `train_questions`
    (optional) replaces loading the real env's TRAIN split, e.g. in tests.
    """

    _train_cache: dict[str, list[str]] = {}

    def __init__(self, train_questions: list[str] | None = None, total_rows: int = TOTAL_ROWS):
        self.train_questions = train_questions
        self.total_rows = total_rows
        self._index: tuple[int, dict] | None = None
        self.last_plan: Plan | None = None

    # ------------------------------------------------------------ entry point

    def write(self, ctx) -> None:
        iter_dir = Path(ctx.iter_dir)
        offset, rules = self._retry_state(iter_dir, ctx.feedback)
        plan, problems = None, ["not planned"]
        # Our own simulation failed a gate: fresh numbers, stricter margins, one more domain. Stepping stones
        # are feature-poor (short expressions), so when no plan with them meets the seed's bars, the teacher
        # plans without them rather than hand the tool a dataset that fails its gate.
        for stones in (True, False):
            for attempt in range(4):
                plan = self.plan(ctx, offset=offset + attempt, strict=bool(rules) or attempt > 0, rules=rules,
                                 widen=attempt, stones=stones)
                _atomic_write(iter_dir / "weakness_report.md", self.render_report(ctx, plan, rules))
                problems = self.self_check(ctx, plan)
                plan.stats["self_check"] = problems or ["passed"]
                if not problems:
                    break
                plan.notes.append(f"self-check with seed offset {offset + attempt} failed ({'; '.join(problems)}); re-planned")
            if not problems:
                break
        if not plan.stats.get("stones"):
            plan.notes.append("no stepping stones: no structure is hopeless, or no plan with stones met the seed's bars")
        _atomic_write(iter_dir / "weakness_report.md", self.render_report(ctx, plan, rules))
        _atomic_write(iter_dir / "gen_dataset.py", self.render_generator(ctx, plan))
        self.last_plan = plan  # what was written, including the rows gen_dataset.py will produce
        fill = getattr(ctx, "fill_scratchpad", None)  # absent on a bare context (tests, stand-alone without a run)
        if fill is not None:
            fill(self.scratchpad_sections(ctx, plan), worked_prev=self.worked_line(ctx))

    def scratchpad_sections(self, ctx, plan: Plan) -> dict[int, str]:
        """Sections 1 (understanding), 3 (plan) and 4 (changes) of this iteration's scratchpad entry."""
        st = plan.stats
        understanding = [f"{st['failures']} failed train rollouts in failures.jsonl; success per structure measured on "
                         f"{st['anchor_rollouts']} train rollouts of the anchor. By weighted severity:"]
        understanding += [f"- {d.label} ({d.severity}): {d.evidence}" for d in plan.domains]
        buckets = [f"- ({d.label}, {c.sub_label}) -> {c.rows} rows, {'train-split instances' if c.mode == 'pool' else 'fresh operands'}"
                   for d in plan.domains for c in d.cells]
        data = ([f"One template per bucket (the failed prompts' skeleton + the bucket's carry profile), exact solver, "
                 f"column-by-column derivation; seed offset {plan.seed_offset}. Questions stay bare expressions like "
                 "the real split, so the varied axes are depth (operations + carries) and number characteristics "
                 "(zero digits, result width); no question of an earlier iteration or of failures.jsonl is reused."]
                + buckets)
        return {1: "\n".join(understanding), 3: "\n".join(data),
                4: "None: no overrides.toml and no custom reward (the real rubric alone, same hyperparameters as iter_0)."}

    @staticmethod
    def worked_line(ctx) -> str | None:
        """The previous iteration's "what worked" line, from its record (None before iteration 2)."""
        if ctx.iteration < 2:
            return None
        rec = _read_json(Path(ctx.run_dir) / f"iter_{ctx.iteration - 1}" / "record.json") or {}
        if not rec:
            return None
        return (f"eval_acc {rec.get('eval_acc', float('nan')):.3f}, verdict {rec.get('verdict')}; the scripted teacher "
                f"carries over nothing by hand: iter_{ctx.iteration} re-ranks the structures on fresh train rollouts.")

    def plan(self, ctx, *, offset: int = 0, strict: bool = False, rules: set[str] | None = None, widen: int = 0,
             stones: bool = True) -> Plan:
        """Decide everything for one write (no file is written)."""
        return _Planner(self, ctx, offset, strict, rules or set(), widen, stones).run()

    # ------------------------------------------------------------ inputs

    @staticmethod
    def _retry_state(iter_dir: Path, feedback: str | None) -> tuple[int, set[str]]:
        """(seed offset, failed rule ids): a re-call after a failure moves to fresh numbers."""
        if not feedback:
            return 0, set()
        prev = 0
        gen = iter_dir / "gen_dataset.py"
        if gen.is_file():
            m = re.search(r"^SEED_OFFSET = (\d+)", gen.read_text(encoding="utf-8"), re.M)
            prev = int(m.group(1)) if m else 0
        rules = set(re.findall(r"\[([a-z0-9_]+)\]", feedback)) or {"generator"}
        return prev + 10, rules

    def _load_train_questions(self, ctx, anchor: list[Obs]) -> tuple[list[str], str]:
        """The real env's TRAIN split questions (never eval), or the anchor's rollout questions as a fallback."""
        if self.train_questions is not None:
            return list(self.train_questions), "given to the teacher"
        hub = ctx.hub_env or {}
        key = json.dumps([hub.get("env_id"), hub.get("env_args") or {}], sort_keys=True)
        if key not in self._train_cache:
            try:
                self._train_cache[key] = self._classic_train_questions(hub)
            except Exception as e:  # noqa: BLE001 - no classic side (a Taskset-only env), or it fails to load
                if hub.get("api") == "verifiers.v1" and hub.get("taskset"):
                    self._train_cache[key] = self._taskset_train_questions(hub["taskset"])
                else:
                    print(f"arith_teacher: could not load the train split of {hub.get('env_id')} ({e}); "
                          f"using the anchor's rollout questions", file=sys.stderr)
                    return sorted({o.question for o in anchor}), "the anchor's train rollouts (train split not loadable)"
        return self._train_cache[key], f"the TRAIN split of {hub.get('env_id')}"

    @staticmethod
    def _classic_train_questions(hub: dict) -> list[str]:
        import verifiers as vf

        env = vf.load_environment(hub["env_id"], **(hub.get("env_args") or {}))
        src = getattr(env, "dataset_source", None)  # the TRAIN split builder
        ds = src() if callable(src) else (src if src is not None else env.get_dataset())
        if "question" in ds.column_names:
            return [str(q) for q in ds["question"]]
        return [_message_text(p, "user") for p in ds["prompt"]]

    @staticmethod
    def _taskset_train_questions(taskset: dict) -> list[str]:
        """The user prompts of a verifiers v1 Taskset's TRAIN tasks (hub_env.json `taskset.train_args`)."""
        from selfimprove.stack.verifiers_v1 import load_tasks, prompt_messages  # the teacher runs in selfimprove's venv

        tasks = load_tasks(taskset["taskset_id"], taskset.get("train_args") or {})
        return [_message_text(prompt_messages(t), "user") for t in tasks]

    def _train_index(self, questions: list[str]) -> dict[str, list[Obs]]:
        """Train questions classified by structure (cached: the split does not change within a run)."""
        key = hash(tuple(questions))
        if self._index is None or self._index[0] != key:
            index: dict[str, list[Obs]] = defaultdict(list)
            for q in questions:
                o = _obs(q, 0.0)
                if o is not None:
                    index[o.key].append(o)
            self._index = (key, dict(index))
        return self._index[1]

    # ------------------------------------------------------------ self-check

    def self_check(self, ctx, plan: Plan) -> list[str]:
        """The seed's nine lines, duplicates and repeats of earlier iterations, on the rows the generator will write."""
        rows, problems = plan.rows, []
        T = len(rows) or 1
        lines = _nine_lines(rows)
        problems += [name for name, ok in lines.items() if not ok]
        qs = [r["question"] for r in rows]
        if len(set(qs)) != len(qs):
            problems.append("duplicate questions")
        prior = set(_prior_questions(ctx.prior_iterations))
        if any(q in prior for q in qs):
            problems.append("repeats of earlier iterations")
        if not 500 <= T <= 1000:
            problems.append(f"{T} rows")
        try:  # the tool's own gates, when the teacher runs inside selfimprove
            from selfimprove.gates import (check_dataset, check_diversity, check_failure_provenance, check_near_duplicates,
                                           check_weakness_report)
        except ImportError:
            return problems
        report, gate = check_weakness_report(Path(ctx.iter_dir) / "weakness_report.md")
        if not gate.passed or report is None:
            return problems + [f.rule for f in gate.failures]
        problems += [f.rule for f in check_dataset(rows, report).failures]
        prior_rows = {i: _read_jsonl(Path(p) / "dataset.jsonl") for i, p in enumerate(ctx.prior_iterations, 1)}
        problems += [f.rule for f in check_near_duplicates(rows, prior_rows).failures]
        problems += [f.rule for f in check_diversity(rows, report.fixed_axes).failures]
        failed = _read_jsonl(Path(ctx.failures_path)) if Path(ctx.failures_path).is_file() else []
        problems += [f.rule for f in check_failure_provenance(rows, failed).failures]
        return sorted(set(problems))

    # ------------------------------------------------------------ rendering

    def render_report(self, ctx, plan: Plan, rules: set[str]) -> str:
        a = ctx.analysis or {}
        st = plan.stats
        front = {
            "eval_acc_prev": round(float(a.get("eval_acc_prev") or 0.0), 4),
            "length_quartile_notes": _quartile_notes(a, plan),
            "domains": [
                {
                    "label": d.label,
                    "severity": d.severity,
                    "evidence": d.evidence,
                    "sub_domains": [{"label": c.sub_label, "failure_mode": _failure_mode(c, plan.tag)} for c in d.cells],
                }
                for d in plan.domains
            ],
            "buckets": [{"domain": d.label, "sub_domain": c.sub_label, "rows": c.rows} for d in plan.domains for c in d.cells],
            "structural_features": [{"label": FEATURE_CATALOGUE[f][0], "definition": FEATURE_CATALOGUE[f][1]} for f in plan.features],
            "custom_rewards": [],
            "fixed_axes": FIXED_AXES,
        }
        out = ["---", _yaml(front).rstrip(), "---", ""]
        out.append(f"# Weakness report, iteration {plan.iteration} (scripted teacher `examples/arith_teacher.py`)\n")
        out.append("## Eval accuracy of the previous iteration\n")
        out.append(f"{front['eval_acc_prev']:.4f} (aggregate only; eval rows are sealed).\n")
        for p in ctx.prior_iterations or []:
            summ = _read_json(Path(p) / "eval_summary.json")
            if summ:
                out.append(f"- {Path(p).name}: eval_acc {summ.get('eval_acc')}")
        out.append("\n## Reward by length quartile\n")
        out.append(front["length_quartile_notes"] + "\n")
        quart = a.get("reward_by_length_quartile") or []
        if quart:
            out.append("| quartile | rows | chars | mean reward | truncated |\n|---|---|---|---|---|")
            out += [f"| Q{q.get('quartile')} | {q.get('n')} | {q.get('chars_min')}-{q.get('chars_max')} | {q.get('reward_mean')} | {q.get('share_truncated')} |" for q in quart]
            out.append("")
        out.append("## How severity is measured\n")
        out.append(
            f"GRPO learns only from groups whose rollouts disagree: a structure the student solves with "
            f"probability p yields reward variance p(1-p) per group and has 1-p left to gain. Learnability is "
            f"therefore (27/4)·p·(1-p)² (1.0 at p = 1/3, ~0 for solved structures). A structure solved in under "
            f"{HOPELESS_P:.0%} of its rollouts is the exception: diluted in the real mix its rare successes carry "
            f"no signal, concentrated they do, so it is drilled at learnability {RESCUE_VALUE:.2f}. The "
            f"weighted severity of a (structure, carry profile) is its share of the train rollouts (the eval "
            f"mixes structures like the train split) times its learnability. "
            + (f"p is measured on the anchor's own TRAIN rollouts ({st['anchor_src']}, steps {_steps(st['anchor_steps'])}, "
               f"{st['anchor_rollouts']} rollouts), because every iteration trains from iter_0's checkpoint; "
               if st["anchor_rollouts"] else
               "No train rollouts were found, so p cannot be measured: each structure's share of the failed rows "
               "stands in for its weighted severity; ")
            + f"failures.jsonl ({st['failures']} rows) supplies "
            f"the failed prompts, their error types and the skeletons. Row counts follow severity with "
            f"exponent {st['exponent']} (iterations alternate 1.0 / 1.5 / 0.75 so that each iteration tests "
            f"a different concentration).\n"
        )
        if plan.notes:
            out.append("Notes: " + "; ".join(plan.notes) + ".\n")
        out.append("### Every structure seen in the train rollouts\n")
        out.append("| structure | shape | rollouts | share | success p | prompts with mixed outcomes | failures.jsonl rows | learnability | weighted severity | chosen |\n|---|---|---|---|---|---|---|---|---|---|")
        chosen = {d.key for d in plan.domains}
        for k, c in sorted(st["structures"].items(), key=lambda kv: -kv[1].weight):
            mixed = "n/a" if c.mixed is None else f"{c.mixed:.0%}"
            shape = k.split("|")[0] + (" (negative)" if "-" in k.split("|")[1] else "")
            out.append(f"| {_structure_label(c.example)} | `{shape}` | {c.n} | {c.freq:.0%} | {c.p:.2f} | {mixed} | "
                       f"{len(c.failures)} | {c.score:.2f} | {c.weight:.3f} | {'yes' if k in chosen else ''} |")
        out.append("")
        if st.get("prev_rollouts"):
            prev = st["prev_rollouts"]
            by = defaultdict(list)
            for o in prev:
                by[o.key].append(o.reward)
            out.append(f"After the previous iteration's targeted training (iter_{plan.iteration - 1}, last steps), train success by structure: "
                       + ", ".join(f"`{k.split('|')[0]}` {statistics.fmean(v):.2f}" for k, v in sorted(by.items())) + ".\n")
        out.append("## Domains\n")
        for d in plan.domains:
            seen = f"success p = {d.p:.2f} over {d.n} rollouts" if not d.cells[0].stone_for else "a stepping stone, unseen in the train rollouts"
            out.append(f"### {d.label} ({d.severity}; weighted severity {d.score:.3f}, {seen})\n")
            out.append(d.evidence + "\n")
            out.append("| sub_domain | success p | rollouts | weighted severity | failed rows | error types | rows | source |\n|---|---|---|---|---|---|---|---|")
            for c in d.cells:
                errs = Counter(error_kind(o, plan.tag) for o in c.failures)
                et = ", ".join(f"{k} {v}" for k, v in errs.most_common(3)) or "none in failures.jsonl"
                src = "train-split instances" if c.mode == "pool" else "fresh sampling"
                p = "unseen" if c.stone_for else f"{c.p:.2f}"
                out.append(f"| {c.sub_label} | {p} | {c.n} | {c.weight:.3f} | {len(c.failures)} | {et} | {c.rows} | {src} |")
            out.append("")
        out.append("## Bucket allocations\n")
        T = plan.total
        out.append(f"{T} rows. Every bucket gets the floor ({BUCKET_FLOOR:.1%}); the rest is shared in proportion to "
                   f"weighted severity (share of the train rollouts x learnability) to the power {st['exponent']}, "
                   f"with the structures solved in under {HOPELESS_P:.0%} of their rollouts (drilled concentrated) "
                   f"holding {RESCUE_SHARE:.0%} of that weight when partial ones are drilled too, "
                   f"never above the fresh instances a bucket has; then rows were moved between buckets only where "
                   f"the difficulty, feature and skeleton bars required it.\n")
        out.append("| domain | sub_domain | rows | share |\n|---|---|---|---|")
        for b in front["buckets"]:
            out.append(f"| {b['domain']} | {b['sub_domain']} | {b['rows']} | {b['rows'] / T:.1%} |")
        out.append("")
        out.append("## Structural features\n")
        out.append("Chosen among the 4-6-feature subsets of a catalogue of structural checks (each computed from the "
                   "expression) that meet the seed's feature bars on the planned rows, preferring features that raise "
                   "the failure rate of the train rollouts most (lift, in percentage points).\n")
        out.append("| feature | definition | failure-rate lift | share of rows |\n|---|---|---|---|")
        for f in plan.features:
            lab = FEATURE_CATALOGUE[f][0]
            share = sum(lab in r["info"]["structural_features"] for r in plan.rows) / (len(plan.rows) or 1)
            out.append(f"| {lab} | {FEATURE_CATALOGUE[f][1]} | {st['lift'].get(f, 0.0):+.1%} | {share:.0%} |")
        out.append("")
        lines = _nine_lines(plan.rows)
        diff = Counter(r["info"]["difficulty"] for r in plan.rows)
        skel = sum(r["info"]["source"].startswith("skeleton:") for r in plan.rows)
        out.append("## Data plan\n")
        out.append(
            f"- Question format: the real env's own (a bare expression such as `{plan.rows[0]['question'] if plan.rows else ''}`); "
            f"answer = the integer; reasoning = a column-by-column derivation ending in `<{plan.tag}>N</{plan.tag}>`.\n"
            f"- Templates: one per bucket = a failed prompt's skeleton (operator/parenthesis pattern, digit lengths, "
            f"sign of every sub-result) + the bucket's carry profile. Skeleton rows keep the failed prompt's exact "
            f"carries per step and are tagged `skeleton:train_step_S_idx_I` ({skel / (len(plan.rows) or 1):.0%} of rows).\n"
            f"- Difficulty from structure: (operations) + min(carries, 2) + parentheses + negative value + product + "
            f"3-digit operand, + 1 when the student solves that structure and carry profile less than "
            f"{HARD_FOR_STUDENT:.0%} of the time in its train rollouts (the seed calibrates difficulty to the student); "
            f"hard >= 3, med = 2, easy <= 1. Planned: {dict(diff)}.\n"
            f"- Eval overlap, by construction: train and eval splits of this env are disjoint, so buckets draw fresh "
            f"instances among those the TRAIN split contains ({st['train_src']}, {st['train_questions']} questions), "
            f"and fall back to fresh sampling only where the expected eval collisions stay below {FREE_RISK_MAX} "
            f"(eval size {st['eval_size']}). Eval rows were never read.\n"
            f"- No repeats: failed prompts themselves and every question of earlier iterations "
            f"({st['prior_questions']}) are excluded; the generator re-checks this against ../iter_k/dataset.jsonl.\n"
            f"- Seed {plan.iteration} (offset {plan.seed_offset}); the teacher ran the same builder in-process before "
            f"writing: seed lines {'all pass' if all(lines.values()) else 'FAIL: ' + ', '.join(k for k, v in lines.items() if not v)}; "
            f"self-check {'; '.join(st.get('self_check', ['not run']))}.\n"
        )
        if st["fallback"]:
            out.append("## Why the domains split single structures\n")
            out.append("Fewer than three structures showed learnable failures, so each (structure, carry class) became a "
                       "domain and zero digits in operands or result split it into two sub_domains; both axes are "
                       "observed structure, never wider operand ranges.\n")
        if rules:
            out.append("## Feedback addressed\n")
            out.append(f"Re-called after: {', '.join(sorted(rules))}. Fresh numbers (seed offset {plan.seed_offset}); "
                       + ("train-split instances only (no fresh sampling); " if "eval_overlap" in rules else "")
                       + "stricter margins on every seed bar.\n")
        out.append("## Custom rewards\n\nNone: the hub's exact-match reward already measures the failure modes.\n")
        return "\n".join(out) + "\n"

    def render_generator(self, ctx, plan: Plan) -> str:
        hub = ctx.hub_env or {}
        cfg = hub.get("parser_config") or {}
        parser = {
            "module": cfg.get("module") or "verifiers",
            "class": hub.get("parser_class") or "XMLParser",
            "fields": cfg.get("fields") or [plan.tag],
            "answer_field": cfg.get("answer_field") or plan.tag,
        }
        counts = "\n".join(f"  {b['domain']} / {b['sub_domain']}: {b['rows']} rows ({b['mode']})" for b in plan.gen_plan["buckets"])
        header = f'''"""iter_{plan.iteration} generator for {hub.get('env_id')}: written by examples/arith_teacher.py (scripted teacher).

Run by `selfimprove iterate` (cwd = this iteration's directory); writes dataset.jsonl.
Each bucket of weakness_report.md is one template: a skeleton expression (the operator
and parenthesis pattern, operand digit lengths and the sign of every sub-result of a
failed TRAIN prompt) plus the bucket's carry/borrow constraint, instantiated with fresh
numbers ("pool" buckets draw them among the instances of the real TRAIN split, which is
disjoint from the eval split; "free" buckets sample operands in the observed ranges).
The solver is exact integer evaluation of the parse tree; every row is cross-checked
with Python's own evaluation of the question and round-tripped through the hub parser
before anything is written. Deterministic: SEED = iteration, SEED_OFFSET bumps on retry.

{counts}
"""

import ast
import importlib
import json
import random
import re
from pathlib import Path

SEED = {plan.iteration}
SEED_OFFSET = {plan.seed_offset}
OUT = Path(__file__).resolve().parent / "dataset.jsonl"
HUB_PARSER = {parser!r}
HUB_ENV = {{"env_id": {hub.get('env_id')!r}, "env_args": {hub.get('env_args') or {}!r}}}
'''
        funcs = "\n\n".join(inspect.getsource(f) for f in GENERATOR_FUNCTIONS)
        plan_text = "PLAN = " + pprint.pformat(plan.gen_plan, width=120, compact=True, sort_dicts=False)
        main = '''

def prior_questions():
    """Questions of earlier iterations (../iter_k/dataset.jsonl, k < this iteration): never repeated."""
    here = Path(__file__).resolve().parent
    out = set()
    for k in range(1, PLAN["iteration"]):
        path = here.parent / f"iter_{k}" / "dataset.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    out.add(json.loads(line)["question"])
    return out


def python_value(question):
    """An independent solver for the audit: Python's own evaluation of the expression."""
    expr = question[len(PLAN["frame"]["prefix"]): len(question) - len(PLAN["frame"]["suffix"])]
    assert re.fullmatch(r"[0-9+*() -]+", expr), expr
    return eval(compile(ast.parse(expr, mode="eval"), "<expr>", "eval"), {"__builtins__": {}}, {})


def hub_parser():
    """The hub env's parser class with its recorded configuration (hub_env.json)."""
    try:
        cls = getattr(importlib.import_module(HUB_PARSER["module"]), HUB_PARSER["class"])
        fields = [tuple(f) if isinstance(f, list) else f for f in HUB_PARSER["fields"]]
        return cls(fields, answer_field=HUB_PARSER["answer_field"])
    except Exception:  # recorded config not constructible here: ask the env itself
        import verifiers as vf
        return vf.load_environment(HUB_ENV["env_id"], **HUB_ENV["env_args"]).parser


def main():
    prior = prior_questions()
    rows = build_rows(PLAN, SEED * 1000 + SEED_OFFSET, prior)
    parser = hub_parser()
    per_bucket = {}
    for row in rows:
        info = row["info"]
        per_bucket[(info["domain"], info["sub_domain"])] = per_bucket.get((info["domain"], info["sub_domain"]), 0) + 1
        assert str(python_value(row["question"])) == row["answer"], ("solver disagrees", row["question"])
        got = parser.parse_answer(info["reasoning"])
        assert got is not None and got.strip() == row["answer"], ("round trip", row["question"], got)
        assert row["question"] not in prior, ("repeat of an earlier iteration", row["question"])
    assert len({r["question"] for r in rows}) == len(rows), "duplicate questions"
    for b in PLAN["buckets"]:
        assert per_bucket.get((b["domain"], b["sub_domain"])) == b["rows"], (b["domain"], b["sub_domain"])
    tmp = OUT.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\\n")
    tmp.replace(OUT)
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
'''
        return header + "\n\n" + funcs + "\n\n" + plan_text + "\n" + main


# ======================================================================
# Part 4. Helpers.
# ======================================================================


def _answer_tag(hub_env: dict) -> str:
    cls = (hub_env or {}).get("parser_class") or "XMLParser"
    if cls != "XMLParser":
        raise PlanError(f"arith_teacher writes XML answer tags; the hub parser is {cls}")
    cfg = (hub_env or {}).get("parser_config") or {}
    field_ = cfg.get("answer_field") or (cfg.get("fields") or ["answer"])[-1]
    return field_[0] if isinstance(field_, list) else str(field_)


def _majority_frame(questions: list[str]) -> dict:
    frames = Counter()
    for q in questions:
        parts = split_frame(q)
        if parts:
            frames[(parts[0], parts[2], bool(re.search(r"\s[-+*]\s", parts[1])))] += 1
    (prefix, suffix, spaced), _ = frames.most_common(1)[0] if frames else (("", "", False), 0)
    return {"prefix": prefix, "suffix": suffix, "spaced": spaced}


def _ranges(obs: list[Obs]) -> list[list[int]]:
    """Observed [min, max] of each operand position of one structure."""
    cols = list(zip(*(leaves(o.node) for o in obs)))
    return [[min(c), max(c)] for c in cols]


def _feature_lift(obs: list[Obs]) -> dict[str, float]:
    """Failure rate with the feature minus failure rate without it (train rollouts)."""
    out = {}
    flags = [(feature_flags(o.node), o.ok) for o in obs]
    for f in FEATURE_CATALOGUE:
        w = [ok for fl, ok in flags if fl[f]]
        wo = [ok for fl, ok in flags if not fl[f]]
        if w and wo:
            out[f] = (1 - sum(w) / len(w)) - (1 - sum(wo) / len(wo))
        else:
            out[f] = 0.0
    return out


def _metrics(cells: list[Cell], shares: list[dict], features: list[str]) -> dict:
    """Planned shares of hard/easy/skeleton rows, of rows with >= 2 and >= 3 features, and per-feature coverage.

    shares[i] describes bucket i's pilot rows: hard/easy/skeleton shares and a
    Counter of each row's feature-id set, so any feature subset is cheap to score.
    """
    T = sum(c.rows for c in cells) or 1
    chosen = set(features)
    m = {"hard": 0.0, "easy": 0.0, "skeleton": 0.0, "n2": 0.0, "n3": 0.0, "cov": {f: 0.0 for f in features}}
    for c, s in zip(cells, shares):
        w = c.rows / T
        for k in ("hard", "easy", "skeleton"):
            m[k] += w * s[k]
        total = sum(s["flags"].values()) or 1
        for flags, count in s["flags"].items():
            share = w * count / total
            n = len(flags & chosen)
            m["n2"] += share if n >= 2 else 0.0
            m["n3"] += share if n >= 3 else 0.0
            for f in flags & chosen:
                m["cov"][f] += share
    return m


def _bucket_score(s: dict, need: str, features: list[str]) -> float:
    """How much one bucket helps a failing bar (higher = more rows should go there)."""
    if need in ("hard", "skeleton"):
        return s[need]
    if need == "easy":
        return -s["easy"]
    total = sum(s["flags"].values()) or 1
    chosen = set(features)
    if need in ("n2", "n3"):
        k = 2 if need == "n2" else 3
        return sum(c for fl, c in s["flags"].items() if len(fl & chosen) >= k) / total
    return sum(c for fl, c in s["flags"].items() if need in fl) / total  # a feature's coverage


def _failing(m: dict, features: list[str], bars: dict) -> list[str]:
    needs = [k for k in ("hard", "n2", "n3", "skeleton") if m[k] < bars[k]]
    needs += ["easy"] if m["easy"] > bars["easy"] else []
    return needs + [f for f in features if m["cov"][f] < bars["feature"]]


def _choose_features(cells, shares, lift, bars) -> list[str]:
    """The 4-6 catalogue features that meet the feature bars on the planned rows, highest failure lift first.

    Exhaustive over subsets (at most a few hundred); if none meets every bar,
    the subset with the fewest failing bars (rebalancing then moves rows).
    """
    m_all = _metrics(cells, shares, list(FEATURE_CATALOGUE))
    eligible = [f for f in FEATURE_CATALOGUE if m_all["cov"][f] > 0]
    best, best_key = None, None
    for size in (4, 5, 6):
        for combo in itertools.combinations(eligible, size):
            m = _metrics(cells, shares, list(combo))
            failing = _failing(m, list(combo), bars)
            key = (len([x for x in failing if x not in ("hard", "easy", "skeleton")]),
                   -sum(lift.get(f, 0.0) for f in combo) / size, size)
            if best_key is None or key < best_key:
                best, best_key = list(combo), key
    if best is None:  # fewer than 4 features occur at all: take the most common ones
        best = sorted(FEATURE_CATALOGUE, key=lambda f: -m_all["cov"][f])[:4]
    return sorted(best, key=lambda f: -lift.get(f, 0.0))


def _rebalance(cells, shares, features, bars, floor_rows) -> Counter:
    """Move rows between buckets (within floors and capacities) until the planned rows meet the bars.

    Returns the rows moved per bar that required it.
    """
    moved: Counter = Counter()
    for _ in range(400):
        needs = _failing(_metrics(cells, shares, features), features, bars)
        if not needs:
            return moved
        progress = False
        for need in needs:
            order = sorted(range(len(cells)), key=lambda i: (_bucket_score(shares[i], need, features), cells[i].weight))
            donors = [i for i in order if cells[i].rows > floor_rows]
            takers = [i for i in reversed(order) if cells[i].rows < cells[i].cap]
            if not donors or not takers:
                continue
            d, t = donors[0], takers[0]
            if _bucket_score(shares[t], need, features) <= _bucket_score(shares[d], need, features):
                continue
            k = min(8, cells[d].rows - floor_rows, cells[t].cap - cells[t].rows)
            cells[d].rows -= k
            cells[t].rows += k
            moved[BAR_NAMES[need] if need in BAR_NAMES else f"feature '{FEATURE_CATALOGUE[need][0]}' >= 10%"] += k
            progress = True
            break
        if not progress:
            return moved
    return moved


def _nine_lines(rows: list[dict]) -> dict[str, bool]:
    """The seed's validation snippet, line for line."""
    T = len(rows) or 1
    doms = Counter(r["info"]["domain"] for r in rows)
    subs = Counter((r["info"]["domain"], r["info"]["sub_domain"]) for r in rows)
    diff = Counter(r["info"]["difficulty"] for r in rows)
    feats = [r["info"].get("structural_features", []) for r in rows]
    per_feat = Counter(f for fs in feats for f in fs)
    return {
        ">=3 domains": len(doms) >= 3,
        "every dom >=2 sub": all(sum(1 for (d, s) in subs if d == dom) >= 2 for dom in doms),
        "smallest bucket >=3%": bool(subs) and min(subs.values()) / T >= 0.03,
        "hard >=40%": diff.get("hard", 0) / T >= 0.40,
        "easy <=20%": diff.get("easy", 0) / T <= 0.20,
        ">=2 features (>=80%)": sum(1 for f in feats if len(f) >= 2) / T >= 0.80,
        ">=3 features (>=40%)": sum(1 for f in feats if len(f) >= 3) / T >= 0.40,
        "per-feature coverage": all(v / T >= 0.10 for v in per_feat.values()),
        "skeleton-source >=30%": sum(1 for r in rows if str(r["info"].get("source", "")).startswith("skeleton:")) / T >= 0.30,
    }


def _evidence(d: DomainPlan, tag: str) -> str:
    if d.cells[0].stone_for:
        targets = " and ".join(f"`{k.split('|')[0]}`" for k in d.cells[0].stone_for)
        return (f"Stepping stone: the student almost never solves {targets} (under {HOPELESS_P:.0%} of its train "
                f"rollouts), so GRPO on the real split gets no signal there; this easier skeleton is absent from the "
                f"TRAIN split and leads toward it.")
    fails = [o for c in d.cells for o in c.failures]
    shown, seen = [], set()
    for o in fails:
        if o.question in seen:
            continue
        seen.add(o.question)
        got = re.findall(rf"<{tag}>\s*(.*?)\s*</{tag}>", o.completion, re.S)
        said = f"answered {got[-1].strip()!s}" if got else "gave no answer tag"
        shown.append(f"{o.question} ({said}, true {value(o.node)})")
        if len(shown) == 2:
            break
    example = " and ".join(shown) if shown else "none in failures.jsonl"
    if not d.n:
        return f"Failed train prompts such as {example}."
    weighted = [(c.mixed, c.n) for c in d.cells if c.mixed is not None]
    mixed = sum(m * n for m, n in weighted) / (sum(n for _, n in weighted) or 1)
    tail = f", and {mixed:.0%} of its prompts drew both right and wrong answers" if weighted else ""
    return f"Failed train prompts such as {example}; the student solves this shape in {d.p:.0%} of {d.n} recent train rollouts{tail}."


def _failure_mode(c: Cell, tag: str) -> str:
    errs = Counter(error_kind(o, tag) for o in c.failures)
    if c.stone_for:
        top = ", ".join(f"{k} x{v}" for k, v in errs.most_common(3)) or "none listed"
        return f"not in the train split; the hard structures it leads to failed with: {top}."
    top = ", ".join(f"{k} x{v}" for k, v in errs.most_common(3))
    base = f"success {c.p:.0%} over {c.n} train rollouts" if c.n else "seen only in failures"
    return f"{base}; failed answers: {top}." if top else f"{base}; no row of failures.jsonl (rare in the last step)."


def _quartile_notes(a: dict, plan: Plan) -> str:
    """Reward by completion-length quartile, and whether failures are truncation, format or wrong numbers."""
    quart = a.get("reward_by_length_quartile") or []
    trunc = float(a.get("share_truncated") or 0.0)
    kinds = Counter(error_kind(o, plan.tag) for o in plan.stats["failure_obs"])
    n = sum(kinds.values())
    fmt = kinds["no answer tag"] + kinds["non-integer answer"] + kinds["right value, rejected format"]
    head = ("Mean reward by completion-length quartile: " + ", ".join(f"Q{q.get('quartile')} {q.get('reward_mean')}" for q in quart)
            if quart else "No length quartiles were recorded")
    verdict = (f"truncation is frequent ({trunc:.1%} of rollouts), so part of the loss is length, not arithmetic"
               if trunc > 0.1 else "truncation is rare, so the failures are reasoning (wrong numbers), not length")
    return (f"{head}; {trunc:.1%} of rollouts truncated. Of {n} failed rows, {n - fmt - kinds['truncated']} give a wrong "
            f"number, {fmt} have no readable integer answer tag and {kinds['truncated']} were cut off: {verdict}.")


def _steps(steps: list[int]) -> str:
    return f"{steps[0]}-{steps[-1]}" if steps else "none"


def _yaml(data: dict) -> str:
    try:
        import yaml

        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)
    except ImportError:  # JSON is valid YAML
        return json.dumps(data, indent=2)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _read_jsonl(path: Path) -> list[dict]:
    if not Path(path).is_file():
        return []
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _prior_questions(prior_iterations) -> list[str]:
    out = []
    for p in prior_iterations or []:
        out += [r["question"] for r in _read_jsonl(Path(p) / "dataset.jsonl") if isinstance(r.get("question"), str)]
    return out


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ======================================================================
# Stand-alone use: one write for an existing run dir.
# ======================================================================


@dataclass
class _Context:
    iteration: int
    iter_dir: Path
    run_dir: Path
    failures_path: Path
    analysis: dict
    hub_env: dict
    prior_iterations: list
    feedback: str | None = None

    def fill_scratchpad(self, sections: dict, worked_prev: str | None = None) -> list:
        from selfimprove.scratchpad import fill_teacher_sections  # stand-alone use runs in selfimprove's venv

        pad = Path(self.run_dir) / "scratchpad.md"
        return fill_teacher_sections(pad, self.iteration, sections, worked_prev) if pad.is_file() else []


def _main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Write weakness_report.md and gen_dataset.py for one iteration.")
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--iteration", type=int, required=True, help="N >= 1; iter_N/ must hold failures.jsonl and analysis.json")
    ap.add_argument("--feedback", default=None, help="gate failure text, when fixing a failed attempt")
    args = ap.parse_args(argv)
    it = args.run_dir / f"iter_{args.iteration}"
    ctx = _Context(args.iteration, it, args.run_dir, it / "failures.jsonl", _read_json(it / "analysis.json") or {},
                   _read_json(args.run_dir / "hub_env.json") or {}, [args.run_dir / f"iter_{k}" for k in range(1, args.iteration)],
                   args.feedback)
    ArithTeacher().write(ctx)
    print(f"wrote {it / 'weakness_report.md'} and {it / 'gen_dataset.py'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
