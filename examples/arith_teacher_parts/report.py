"""weakness_report.md: its YAML front matter and the markdown that explains every number in it.

render_report(ctx, plan, rules) turns a Plan (cells.py) into the report's text:
the front matter the report gate validates (domains with their severity,
evidence and sub_domains' failure modes, buckets, structural features,
fixed_axes), then for a human reader how severity is measured, every structure
seen in the train rollouts, each domain's cells, the bucket allocations, the
chosen features with their failure-rate lift, and the data plan with the
self-check's result. `ArithTeacher.render_report` (teacher.py) calls it.

_evidence (called by the planner, plan.py, when it finishes), _failure_mode and
_quartile_notes write the report's prose fields from the failed rows.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from .cells import Cell, DomainPlan, Plan, _structure_label
from .check import _nine_lines
from .expr import value
from .observe import _read_json, error_kind
from .settings import (
    BUCKET_FLOOR,
    FEATURE_CATALOGUE,
    FIXED_AXES,
    FREE_RISK_MAX,
    HARD_FOR_STUDENT,
    HOPELESS_P,
    RESCUE_SHARE,
    RESCUE_VALUE,
)


def render_report(ctx, plan: Plan, rules: set[str]) -> str:
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
               "expression) that meet the procedure's feature bars on the planned rows, preferring features that raise "
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
        f"{HARD_FOR_STUDENT:.0%} of the time in its train rollouts (the skill's procedure calibrates difficulty to the student); "
        f"hard >= 3, med = 2, easy <= 1. Planned: {dict(diff)}.\n"
        f"- Eval overlap, by construction: train and eval splits of this env are disjoint, so buckets draw fresh "
        f"instances among those the TRAIN split contains ({st['train_src']}, {st['train_questions']} questions), "
        f"and fall back to fresh sampling only where the expected eval collisions stay below {FREE_RISK_MAX} "
        f"(eval size {st['eval_size']}). Eval rows were never read.\n"
        f"- No repeats: failed prompts themselves and every question of earlier iterations "
        f"({st['prior_questions']}) are excluded; the generator re-checks this against ../iter_k/dataset.jsonl.\n"
        f"- Seed {plan.iteration} (offset {plan.seed_offset}); the teacher ran the same builder in-process before "
        f"writing: the procedure's nine lines {'all pass' if all(lines.values()) else 'FAIL: ' + ', '.join(k for k, v in lines.items() if not v)}; "
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
                   + "stricter margins on every bar of the procedure.\n")
    out.append("## Custom rewards\n\nNone: the hub's exact-match reward already measures the failure modes.\n")
    return "\n".join(out) + "\n"


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

