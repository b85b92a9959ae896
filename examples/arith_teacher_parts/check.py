"""The self-check: the tool's gates run in-process on the rows the generator will write.

self_check(ctx, plan) holds plan.rows (built by the same build_rows as
gen_dataset.py) to the skill's procedure's nine validation lines (_nine_lines, the
procedure's validation snippet line for line), no duplicate question, no repeat of an earlier
iteration, 500-1000 rows and, inside selfimprove, the report gate, the dataset
gate, near duplicates, diversity and failure provenance. ArithTeacher.write
(teacher.py) re-plans with fresh numbers and stricter margins until it passes,
so the tool's own gates normally pass on the first write. Rows are moved to
meet the procedure's bars before this, by the planner (allocate._rebalance).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .cells import Plan
from .observe import _prior_questions, _read_jsonl


def self_check(ctx, plan: Plan) -> list[str]:
    """The skill's procedure's nine lines, duplicates and repeats of earlier iterations, on the rows the generator will write."""
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


def _nine_lines(rows: list[dict]) -> dict[str, bool]:
    """The skill's procedure's validation snippet, line for line."""
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

