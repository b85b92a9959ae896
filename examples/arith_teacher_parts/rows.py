"""The expression toolkit, second half: one dataset row, and the list copied into gen_dataset.py.

Part 1 of the teacher (with expr.py). The derivation a row carries as its
reasoning (explain_* column by column, reasoning_for ending in the answer tag),
whether an instance fits a bucket (fits), drawing a fresh instance for a bucket
from its train-split pool or by sampling operands (pool_entries, draw), and
build_rows, which turns the generator's PLAN into every row. The planner
(plan.py) runs build_rows in-process on the same PLAN that gen_dataset.py
embeds, so the self-check sees exactly the rows the generator will write.

GENERATOR_FUNCTIONS lists, in order, the functions generator.py copies verbatim
(inspect.getsource) into gen_dataset.py, which is therefore self-contained.
Their text is the generated file's text: keep them free of teacher-only names.
"""

from __future__ import annotations

import random

from .expr import (
    axes_of,
    carry_class,
    carry_vector,
    col_add,
    col_mul,
    col_sub,
    difficulty_of,
    feature_flags,
    leaves,
    number_traits,
    op_carries,
    ops_post,
    parse_expr,
    render,
    shape_of,
    signs_of,
    value,
    with_leaves,
)


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
