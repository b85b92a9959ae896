"""The diversity gate: Pillar 2 of the skill's procedure, per (domain, sub_domain) bucket.

    gate = check_diversity(rows)

The skill's procedure: "Per bucket, vary across >= 3 of: cover story, reasoning depth (no
single depth > 70%), surface structure, number characteristics, distractor
presence." Only the teacher knows which cover story or depth a template drew,
so every row declares its place on the five axes, the way it declares its
difficulty and structural features (which the procedure's own gate also counts):

    "info": {..., "axes": {"cover_story": "bakery", "depth": 3, "surface": "table first",
                           "numbers": "decimals", "distractor": false}}

Values are short labels, integers or booleans; an axis a row leaves out is
not varied by that row.

The five axes are written for word problems; a dataset may have no room for
some (bare expressions have no cover story and no distractor). The weakness
report names those in `fixed_axes` (axis -> a reason of >= MIN_REASON_WORDS
words, at most MAX_FIXED_AXES axes), and a bucket then needs
min(MIN_VARIED_AXES, free axes) varied ones. Fixed axes are listed in the
gate's stats and message, so the exemption is visible wherever the result is.
Rules:

- `axes_schema`: `info.axes` missing, not an object, an unknown axis name, or a
  value that is not a scalar (rows grouped by problem).
- `diversity_axes`: a bucket varies fewer than MIN_VARIED_AXES (3) axes (or
  all the free ones when fewer remain). An
  axis is varied in a bucket when its rows take >= 2 distinct values; the
  depth axis only when, in addition, no single depth value holds more than
  MAX_DEPTH_SHARE (70%) of the bucket's rows (the procedure's parenthesis). The
  message names each failing bucket with the axes it does vary.
- Buckets split by a structural count. The weakness classes ask for buckets
  cut along a structure ("one carry", "two carries", "three carries"), and
  such a bucket holds one `depth` by construction. So `depth` counts as
  varied in a bucket whose rows all take one depth value that no other
  bucket of its domain takes (and the domain has another bucket with a
  depth): the variation is across the split (`split_by` in the stats). Only
  depth, the count axis: a bucket with one cover story of its own is not a
  split, just a bucket without cover-story variety.

What is not covered: whether the declared values are true. The cold-read audit
(Pillar 1) and the template signatures (dedup.py: name/number clones count as
one row) are the checks on that.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from .common import GateFailure, GateReport, share

GATE = "diversity"
AXES = ("cover_story", "depth", "surface", "numbers", "distractor")
SPLIT_AXES = ("depth",)  # the structural count a domain's buckets may be split by
MIN_VARIED_AXES = 3
MAX_DEPTH_SHARE = 0.70
MAX_FIXED_AXES = 4  # at least one axis always has to vary
MIN_REASON_WORDS = 5  # a fixed axis needs a reason a reader can check
SHOWN_BUCKETS = 6  # failing buckets named in the message before eliding


def _info(row: Any) -> dict:
    info = row.get("info") if isinstance(row, dict) else None
    return info if isinstance(info, dict) else {}


def _axes_problem(axes: Any) -> str | None:
    if not isinstance(axes, dict):
        return "info.axes missing or not an object of axis -> value"
    unknown = sorted(str(k) for k in axes if k not in AXES)
    if unknown:
        return f"info.axes has unknown axis name(s) {', '.join(unknown)} (use {', '.join(AXES)})"
    if not all(isinstance(v, (str, int, float, bool)) for v in axes.values()):
        return "info.axes values must be short labels, numbers or booleans"
    return None


def varied_axes(axes_rows: list[dict]) -> dict[str, Any]:
    """Per axis: distinct values, the largest value share, and whether it counts as varied."""
    out = {}
    for axis in AXES:
        values = Counter(repr(a[axis]) for a in axes_rows if axis in a)
        top = max(values.values(), default=0)
        varied = len(values) >= 2
        if axis == "depth":
            varied = varied and share(top, len(axes_rows)) <= MAX_DEPTH_SHARE
        out[axis] = {"distinct": len(values), "top_share": round(share(top, len(axes_rows)), 4), "varied": varied}
    return out


def _values(axis: str, axes_rows: list[dict]) -> set[str]:
    return {repr(a[axis]) for a in axes_rows if axis in a}


def split_axis(axis: str, axes_rows: list[dict], siblings: list[list[dict]]) -> bool:
    """Is this bucket one slice of its domain's split by `axis`: every row of it one value on the
    axis, a value no sibling bucket (same domain) takes, with at least one sibling on that axis?"""
    mine = _values(axis, axes_rows)
    if len(mine) != 1 or any(axis not in a for a in axes_rows):
        return False
    theirs = [_values(axis, rows) for rows in siblings]
    return any(theirs) and not any(mine & t for t in theirs)


def check_diversity(rows: list[dict], fixed_axes: dict[str, str] | None = None) -> GateReport:
    """Every bucket must vary >= 3 of the skill's procedure's five axes (depth: no value over 70%), or every
    free axis when the report fixes some (`WeaknessReport.fixed_axes`)."""
    fixed = sorted(a for a in (fixed_axes or {}) if a in AXES)[:MAX_FIXED_AXES]
    free = [a for a in AXES if a not in fixed]
    need = min(MIN_VARIED_AXES, len(free))
    by_problem: dict[str, list[int]] = defaultdict(list)
    buckets: dict[tuple, list[dict]] = defaultdict(list)
    for i, row in enumerate(rows):
        info = _info(row)
        axes = info.get("axes")
        problem = _axes_problem(axes)
        if problem:
            by_problem[problem].append(i)
            axes = {}
        key = (info.get("domain"), info.get("sub_domain"))
        if isinstance(key[0], str) and isinstance(key[1], str):
            buckets[key].append(axes)

    failures = [GateFailure(rule="axes_schema", message=f"{len(ix)} row(s): {p}", rows=ix) for p, ix in by_problem.items()]
    per_bucket = {}
    short: list[str] = []
    short_rows: list[int] = []
    for (dom, sub), axes_rows in sorted(buckets.items()):
        axes = varied_axes(axes_rows)
        names = [a for a in free if axes[a]["varied"]]
        siblings = [rows_ for (d, s_), rows_ in buckets.items() if d == dom and s_ != sub]
        split = next((a for a in SPLIT_AXES if a in free and a not in names and split_axis(a, axes_rows, siblings)), None)
        if split is not None:
            names.append(split)
        per_bucket[f"{dom} / {sub}"] = {"rows": len(axes_rows), "varied": names, "split_by": split, "axes": axes}
        if len(names) < need:
            depth = axes["depth"]
            note = f"; depth top value {depth['top_share']:.0%}" if depth["distinct"] >= 2 and not depth["varied"] else ""
            short.append(f"({dom}, {sub}) varies {len(names)}: {', '.join(names) or 'none'}{note}")
            short_rows += [i for i, r in enumerate(rows) if (_info(r).get("domain"), _info(r).get("sub_domain")) == (dom, sub)]
    if short:
        shown = "; ".join(short[:SHOWN_BUCKETS]) + (f" ... +{len(short) - SHOWN_BUCKETS} more" if len(short) > SHOWN_BUCKETS else "")
        failures.append(GateFailure(
            rule="diversity_axes",
            message=(f"{len(short)} bucket(s) vary fewer than {need} of {', '.join(free)}"
                     + (f" (fixed by the report: {', '.join(fixed)})" if fixed else "")
                     + f" (depth counts only with no value over {MAX_DEPTH_SHARE:.0%}, or when the domain's buckets "
                       f"split by depth, one value each): {shown}"),
            rows=sorted(short_rows),
        ))
    stats = {"fixed_axes": fixed, "varied_needed": need, "per_bucket": per_bucket, "buckets_short": len(short)}
    return GateReport.build(GATE, failures, stats)
