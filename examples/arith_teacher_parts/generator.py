"""gen_dataset.py: the self-contained generator the tool runs (cwd = iter_N/) to write dataset.jsonl.

render_generator(ctx, plan) returns its text: a docstring listing the buckets,
the constants (SEED, SEED_OFFSET, the hub parser's configuration), the toolkit
functions copied verbatim with inspect.getsource (rows.GENERATOR_FUNCTIONS:
expr.py and rows.py), the PLAN the planner decided (plan.py), and a main() that
builds the rows with the same build_rows the teacher ran in-process, checks each
answer against Python's own evaluation, round-trips it through the hub parser,
refuses repeats of earlier iterations, and writes dataset.jsonl atomically.
`ArithTeacher.render_generator` (teacher.py) calls it.
"""

from __future__ import annotations

import inspect
import pprint

from .cells import Plan
from .rows import GENERATOR_FUNCTIONS


def render_generator(ctx, plan: Plan) -> str:
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
