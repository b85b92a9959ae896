"""The provenance gate: rows against the failed TRAIN prompts they were made from.

    gate = check_failure_provenance(rows, failures)     # failures = iter_N/failures.jsonl rows

The skill's procedure's skeleton rule (3b): a skeleton paraphrase keeps a failed prompt's
compositional skeleton, is tagged `skeleton:train_step_<S>_idx_<I>`, and never
copies the prompt ("Sally->Sarah, 5->7" is an alias, forbidden by Pillar 2).
Rules, each zero-tolerance and each grouping its rows:

- `unknown_skeleton`: the tag's (S, I) is not a row of failures.jsonl (step,
  idx): the row claims to paraphrase a failure the teacher was never shown.
- `copy_of_failure`: the question equals a failed prompt up to whitespace,
  case and sentence punctuation (the eval-overlap tokens: "47 + 38" = "47+38").
- `alias_of_failure`: the question has the template signature of a failed
  prompt (dedup.template_signature: names, numbers, pronouns and short
  literals swapped). As in dedup.py, a signature with fewer than
  MIN_TEMPLATE_WORDS words carries no template (a bare expression: there the
  numbers ARE the problem), so such prompts are compared by copy only.

Every failed prompt counts, not only the one a row's tag names: a
teacher-invented row that copies some failed prompt is a copy too.
What is not covered: synonym rewrites and reordered clauses (see dedup.py).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from .common import GateFailure, GateReport
from .dedup import MIN_TEMPLATE_WORDS, _template_words, template_signature
from .ngram_hash import overlap_tokens

GATE = "provenance"
SKELETON_TAG_RE = re.compile(r"^skeleton:train_step_(\d+)_idx_(\d+)$")
SHOWN_TAGS = 5  # unknown tags named in the message before eliding


def _question(row: Any) -> str | None:
    q = row.get("question") if isinstance(row, dict) else None
    return q if isinstance(q, str) and q.strip() else None


def _source(row: Any) -> str:
    info = row.get("info") if isinstance(row, dict) else None
    src = info.get("source") if isinstance(info, dict) else None
    return src if isinstance(src, str) else ""


def copy_key(text: str) -> tuple[str, ...]:
    """The question up to whitespace, case and sentence punctuation."""
    return tuple(overlap_tokens(text))


def check_failure_provenance(rows: list[dict], failures: list[dict]) -> GateReport:
    """Skeleton tags must name a failed prompt; no row may copy or alias one."""
    known: set[tuple[int, int]] = set()
    by_copy: dict[tuple[str, ...], tuple[int, int]] = {}
    by_sig: dict[str, tuple[int, int]] = {}
    for f in failures:
        if not isinstance(f, dict) or not isinstance(f.get("step"), int) or not isinstance(f.get("idx"), int):
            continue
        origin = (f["step"], f["idx"])
        known.add(origin)
        q = f.get("question")
        if isinstance(q, str) and q.strip():
            by_copy.setdefault(copy_key(q), origin)
            sig = template_signature(q)
            if _template_words(sig) >= MIN_TEMPLATE_WORDS:
                by_sig.setdefault(sig, origin)

    unknown: dict[str, list[int]] = defaultdict(list)
    copies: list[int] = []
    aliases: list[int] = []
    tagged_self_copies = 0
    for i, row in enumerate(rows):
        m = SKELETON_TAG_RE.match(_source(row))
        tag_origin = (int(m.group(1)), int(m.group(2))) if m else None
        if tag_origin is not None and tag_origin not in known:
            unknown[_source(row)].append(i)
        q = _question(row)
        if q is None:
            continue  # the dataset gate's row_schema reports it
        origin = by_copy.get(copy_key(q))
        if origin is None:
            origin = by_sig.get(template_signature(q))
            if origin is not None:
                aliases.append(i)
        else:
            copies.append(i)
        tagged_self_copies += origin is not None and origin == tag_origin

    failures_out: list[GateFailure] = []
    if unknown:
        tags = sorted(unknown, key=lambda t: (-len(unknown[t]), t))
        named = ", ".join(f"{t} x{len(unknown[t])}" for t in tags[:SHOWN_TAGS])
        more = f" ... +{len(tags) - SHOWN_TAGS} more tags" if len(tags) > SHOWN_TAGS else ""
        failures_out.append(GateFailure(
            rule="unknown_skeleton",
            message=(f"{sum(map(len, unknown.values()))} row(s) carry {len(tags)} skeleton tag(s) whose (step, idx) is not "
                     f"in failures.jsonl: {named}{more}; tag each paraphrase with the step and idx of the failed row it keeps"),
            rows=sorted(i for ix in unknown.values() for i in ix),
        ))
    if copies:
        failures_out.append(GateFailure(
            rule="copy_of_failure",
            message=f"{len(copies)} row(s) copy a failed train prompt of failures.jsonl (up to whitespace/case/punctuation); keep the skeleton, change cover story and numbers",
            rows=copies,
        ))
    if aliases:
        failures_out.append(GateFailure(
            rule="alias_of_failure",
            message=f"{len(aliases)} row(s) alias a failed train prompt (same template, only names/numbers swapped); change the cover story or the structure, not just the names",
            rows=aliases,
        ))
    stats = {
        "failures": len(known),
        "skeleton_rows": sum(1 for r in rows if SKELETON_TAG_RE.match(_source(r))),
        "distinct_skeletons": len(Counter(_source(r) for r in rows if SKELETON_TAG_RE.match(_source(r)))),
        "unknown_skeleton_rows": sum(map(len, unknown.values())),
        "copy_rows": len(copies),
        "alias_rows": len(aliases),
        "copies_of_own_skeleton": tagged_self_copies,
        "failure_templates": len(by_sig),  # failed prompts compared by signature (the rest by copy only)
    }
    return GateReport.build(GATE, failures_out, stats)
