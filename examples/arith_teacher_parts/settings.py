"""The arith teacher's tuning constants and the two tables its report quotes.

Every number the planner and the report use lives here, next to the measurement
that set it: rows per write, the bucket floor, the eval-collision budget, when a
structure counts as hopeless and how much of the weight the hopeless ones get,
the allocation exponents per iteration, and the bars of the skill's procedure (with their margins)
that the self-check holds the planned rows to. FEATURE_CATALOGUE is the menu of
structural features the report chooses from (their ids are the keys of
`expr.feature_flags`); FIXED_AXES are the Pillar 2 axes a bare expression cannot
vary. Nothing here imports anything; everything else in the package reads it.
"""

from __future__ import annotations

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
TOTAL_ROWS = 800  # within the skill's procedure's 500-1000
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
