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
   failure rate (among subsets that meet the skill's procedure's feature bars).
4. Writes `gen_dataset.py`: one template per bucket (a failed prompt's skeleton
   plus the bucket's carry constraint, instantiated with fresh numbers), one
   exact solver (integer evaluation of the parse tree, cross-checked with
   Python's evaluator), a column-by-column derivation ending in the hub's
   answer tag, and a round-trip assert with the hub parser on every row.
   Before writing, the teacher runs the very same row builder in-process and
   checks the procedure's nine validation lines, the report gate and the repeat rule,
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

Where the code lives (examples/arith_teacher_parts/, each module opens with what
it holds; the package's __init__.py lists them in reading order):

- settings.py: the tuning constants above (HOPELESS_P, RESCUE_SHARE, BARS, ...),
  the structural feature catalogue and the fixed axes;
- expr.py, rows.py: the expression toolkit (parse, solve, carries, features,
  derivations, build_rows), copied verbatim into every gen_dataset.py
  (rows.GENERATOR_FUNCTIONS);
- observe.py: point 1, what the teacher reads (failures, rollouts, earlier iterations);
- cells.py, allocate.py, plan.py: points 2-3, the planner (_Planner), its data
  (Cell, DomainPlan, Plan), severity, allocation and rebalancing to the procedure's bars;
- check.py: point 4's in-process self-check (the procedure's nine lines and the tool's gates);
- report.py, generator.py: the text of weakness_report.md (point 3) and gen_dataset.py (point 4);
- teacher.py: ArithTeacher.write (plan, self-check, re-plan, write; point 5) and the CLI.

This file is the entry point the tool loads by path (`--teacher
examples/arith_teacher.py:ArithTeacher`, via importlib's spec_from_file_location,
so it is no package member): it puts its own directory on sys.path, imports the
package, and re-exports ArithTeacher, the toolkit and the constants.
"""

from __future__ import annotations

import sys
from pathlib import Path

_EXAMPLES = str(Path(__file__).resolve().parent)  # holds arith_teacher_parts/
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)

# Re-exported (__all__ below): what tests, benches and readers use as `arith_teacher.NAME`.
from arith_teacher_parts.allocate import rescue_weights, severity_score  # noqa: E402
from arith_teacher_parts.cells import Cell, DomainPlan, Plan, PlanError, stone_space, stone_variants  # noqa: E402
from arith_teacher_parts.expr import (  # noqa: E402
    axes_of, carry_class, carry_vector, col_add, col_mul, col_sub, difficulty_of, feature_flags, leaves, number_traits,
    op_carries, ops_post, parse_expr, render, shape_of, signs_of, value, with_leaves,
)
from arith_teacher_parts.observe import Obs, error_kind, read_failures, read_rollouts, rollout_files, split_frame  # noqa: E402
from arith_teacher_parts.rows import (  # noqa: E402
    GENERATOR_FUNCTIONS, build_rows, draw, explain_add, explain_mul, explain_op, explain_sub, fits, frame_question,
    place_name, pool_entries, reasoning_for,
)
from arith_teacher_parts.settings import (  # noqa: E402
    ALLOC_EXPONENTS, ANCHOR_STEPS, BAR_NAMES, BARS, BUCKET_FLOOR, FEATURE_CATALOGUE, FIXED_AXES, FREE_RISK_MAX,
    HARD_FOR_STUDENT, HOPELESS_P, POOL_MARGIN, RESCUE_SHARE, RESCUE_VALUE, STONE_VALUE, TOTAL_ROWS,
)
from arith_teacher_parts.teacher import ArithTeacher, _main  # noqa: E402

__all__ = [
    "ArithTeacher", "Plan", "PlanError", "Cell", "DomainPlan", "Obs", "GENERATOR_FUNCTIONS",
    # expr.py, rows.py: the toolkit
    "parse_expr", "value", "render", "leaves", "with_leaves", "ops_post", "shape_of", "signs_of", "col_add", "col_sub",
    "col_mul", "op_carries", "carry_vector", "carry_class", "feature_flags", "difficulty_of", "number_traits", "axes_of",
    "place_name", "explain_add", "explain_sub", "explain_mul", "explain_op", "reasoning_for", "fits", "frame_question",
    "pool_entries", "draw", "build_rows",
    # observe.py, cells.py, allocate.py
    "split_frame", "read_failures", "rollout_files", "read_rollouts", "error_kind", "stone_variants", "stone_space",
    "severity_score", "rescue_weights",
    # settings.py
    "FEATURE_CATALOGUE", "FIXED_AXES", "ANCHOR_STEPS", "TOTAL_ROWS", "BUCKET_FLOOR", "POOL_MARGIN", "FREE_RISK_MAX",
    "HARD_FOR_STUDENT", "HOPELESS_P", "RESCUE_VALUE", "RESCUE_SHARE", "STONE_VALUE", "ALLOC_EXPONENTS", "BARS", "BAR_NAMES",
]

if __name__ == "__main__":
    raise SystemExit(_main())
