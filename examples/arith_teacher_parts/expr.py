"""The expression toolkit, first half: parse, solve and classify one arithmetic expression.

Part 1 of the teacher (with rows.py). These functions are copied verbatim into
every gen_dataset.py (see `rows.GENERATOR_FUNCTIONS`, rendered by generator.py
with inspect.getsource), so the teacher and the generator classify, sample and
solve with the same code. That is why they use only the standard library's `re`
and each other, take plain tuples, and carry no annotations the generator would
need to import: a change here changes the generated file.

Nodes: ("n", value) | ("b", op, left, right, parenthesised).

- parse_expr / value / render: text -> tree -> exact integer (the solver) -> text;
- leaves, with_leaves, ops_post: operands and operations in text / evaluation order;
- shape_of, signs_of: the structure key ('##-(##-##)' plus the sign of each sub-result);
- col_add, col_sub, col_mul, op_carries, carry_vector, carry_class: carries and borrows
  of the written algorithm, per operation;
- feature_flags, difficulty_of, number_traits, axes_of: what a row's `info` says about it.
"""

from __future__ import annotations

import re


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
    """The row's place on the skill's procedure's five Pillar 2 axes (the diversity gate reads info.axes)."""
    return {
        "cover_story": "none: bare expression",  # the real questions are bare expressions
        "depth": len(ops_post(node)) + sum(carry_vector(node)),  # operations plus carries/borrows to hold
        "surface": "bare expression",
        "numbers": number_traits(node),
        "distractor": False,
    }

