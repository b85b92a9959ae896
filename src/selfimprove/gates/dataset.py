"""The dataset gate: iter_N/dataset.jsonl against its weakness report.

    rows, load_failures = load_dataset_jsonl(path)
    gate = check_dataset(rows, report)          # or check_dataset_file(path, report)

Checks every row's schema, that rows only use the report's labels, the nine
validation lines of the skill's procedure (Phase 3b), the 500-1000 row count and exact duplicates.
The nine lines are computed exactly as the procedure's snippet computes them (same
denominators, same Counter semantics, `source.startswith("skeleton:")`); each
message carries the measured value. Two rules close gaps the snippet leaves
open: `defined_feature_unused` (the snippet's per-feature line only sees
features that occur at least once; Pillar 4 wants every DEFINED feature) and
the per-row ban on repeated features (["a", "a"] would count as two).

What is not covered here: near-duplicates of earlier iterations and overlap
with the eval split (dedup.py), round-trip parsing (roundtrip.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from .common import SUMMARY_MAX_ROWS, GateFailure, GateReport, label_repr, share
from .report import WeaknessReport

GATE = "dataset"

ROWS_MIN, ROWS_MAX = 500, 1000
DIFFICULTIES = ("easy", "med", "hard")
# Seed schema: info.source is "teacher-invented" or "skeleton:train_step_<S>_idx_<I>".
SOURCE_RE = re.compile(r"^(teacher-invented|skeleton:train_step_\d+_idx_\d+)$")
INFO_STR_FIELDS = ("domain", "sub_domain", "source", "reasoning")
# A text field longer than this is refused: 16,000 characters is about 4,000 tokens, past the context of
# every student the tool trains (a question that long is never answered; the engine refused a 1 MB one only
# after packaging). Real rows are far shorter: the arith fixtures' longest field is ~200 characters.
FIELD_MAX_CHARS = 16_000
# C0 control characters other than tab, newline and carriage return: the engine refuses a NUL in a prompt,
# and none of them is text a student should read. (U+0085 and U+2028 are text, and valid in JSONL.)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def split_jsonl(text: str) -> list[str]:
    """The lines of a JSONL text: split on "\\n" only, as the env loader (`for line in file`) and JSON Lines
    do. str.splitlines also splits at U+2028, U+0085, ..., which json.dumps(ensure_ascii=False) leaves
    inside strings of valid rows."""
    return text.split("\n")


def parse_jsonl_line(line: str) -> tuple[dict | None, tuple[str, str] | None]:
    """(row, None) for a line holding one JSON object of text, else (None, (problem, detail)); (None, None) for
    a blank line. Every reader of dataset.jsonl uses this, so a row is the same row in every gate."""
    if not line.strip():
        return None, None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        return None, ("not JSON", f"{e.msg} at column {e.colno}")
    except RecursionError:
        return None, ("not JSON", "nested too deeply to read (thousands of brackets)")
    if not isinstance(obj, dict):
        return None, ("not a JSON object", f"got {type(obj).__name__}")
    bad = _lone_surrogate(obj)
    if bad is not None:
        return None, ("not text", f"a string holds the lone surrogate {bad} (an escape like \\ud800 that is no "
                                  f"character; write real characters)")
    return obj, None


def _lone_surrogate(obj: Any) -> str | None:
    """The first lone UTF-16 surrogate in any string (keys included) of a parsed row, as an escape; else None."""
    todo = [obj]
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
        elif isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError as e:
                return ascii(x[e.start])
    return None


def load_dataset_jsonl(path: Path) -> tuple[list[dict], list[GateFailure]]:
    """Rows of a JSONL file (blank lines skipped, as the env loader does) and one failure per bad line.

    Row indices of later gates are positions in the returned list, which is also
    the row order of the packaged environment.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return [], [GateFailure(rule="jsonl_file", message=f"{path}: cannot read ({e})")]
    rows: list[dict] = []
    # Bad lines are grouped by problem, like every other rule: one failure each, first lines shown.
    bad: dict[str, list[tuple[int, str]]] = {"not JSON": [], "not a JSON object": [], "not text": []}
    for lineno, line in enumerate(split_jsonl(text), start=1):
        obj, problem = parse_jsonl_line(line)
        if problem is not None:
            bad[problem[0]].append((lineno, problem[1]))
        elif obj is not None:
            rows.append(obj)
    return rows, [_grouped_line_failure(problem, lines) for problem, lines in bad.items() if lines]


def _grouped_line_failure(problem: str, lines: list[tuple[int, str]]) -> GateFailure:
    """'3 lines are not JSON (lines 1, 4, 9; first: line 1: Expecting value at column 1)'."""
    shown = ", ".join(str(n) for n, _ in lines[:SUMMARY_MAX_ROWS])
    more = len(lines) - SUMMARY_MAX_ROWS
    first_no, first_why = lines[0]
    noun = "line is" if len(lines) == 1 else "lines are"
    return GateFailure(rule="jsonl_line", message=(
        f"{len(lines)} {noun} {problem}; each line must be one JSON object "
        f"(lines {shown}{f' ... +{more} more' if more > 0 else ''}; first: line {first_no}: {first_why})"))


def _row_problems(row: Any) -> list[str]:
    """Schema problems of one row, as short stable phrases (rows are grouped by phrase)."""
    if not isinstance(row, dict):
        return ["row is not an object"]
    problems = []
    for key in ("question", "answer"):
        v = row.get(key)
        if not isinstance(v, str) or not v.strip():
            problems.append(f"{key} missing, not a string or empty")
        else:
            problems += _text_problems(key, v)
    info = row.get("info")
    if not isinstance(info, dict):
        return problems + ["info missing or not an object"]
    for key in INFO_STR_FIELDS:
        v = info.get(key)
        if not isinstance(v, str) or not v.strip():
            problems.append(f"info.{key} missing, not a string or empty")
        else:
            problems += _text_problems(f"info.{key}", v)
    if info.get("difficulty") not in DIFFICULTIES:
        problems.append("info.difficulty not one of easy|med|hard")
    feats = info.get("structural_features")
    if not isinstance(feats, list) or not all(isinstance(f, str) and f.strip() for f in feats):
        problems.append("info.structural_features not a list of non-empty strings")
    elif len(set(feats)) != len(feats):
        problems.append("info.structural_features repeats a feature")
    src = info.get("source")
    if isinstance(src, str) and src.strip() and not SOURCE_RE.match(src):
        problems.append("info.source not 'teacher-invented' or 'skeleton:train_step_<S>_idx_<I>'")
    return problems


def _text_problems(field: str, value: str) -> list[str]:
    """What the engine (or any student) could not take in a text field: control characters, a huge value."""
    problems = []
    if _CONTROL_RE.search(value):
        problems.append(f"{field} holds a control character (NUL or another of U+0000-U+001F besides tab and "
                        f"newline); remove it")
    if len(value) > FIELD_MAX_CHARS:
        problems.append(f"{field} longer than {FIELD_MAX_CHARS} characters (past any student's context); shorten it")
    return problems


def _info(row: Any) -> dict:
    info = row.get("info") if isinstance(row, dict) else None
    return info if isinstance(info, dict) else {}


def _feats(row: Any) -> list:
    feats = _info(row).get("structural_features", [])
    return feats if isinstance(feats, list) else []


def seed_validation_lines(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """The skill's procedure's nine validation lines: {name: {"passed": bool, "value": measured, "bar": text}}.

    Same arithmetic as the procedure's snippet. It would crash on malformed rows; we
    read fields tolerantly instead (a missing value is just absent), since the
    row_schema rule already fails such rows.
    """
    T = len(rows)
    doms = Counter(_info(r).get("domain") for r in rows if _info(r).get("domain") is not None)
    subs = Counter((_info(r).get("domain"), _info(r).get("sub_domain")) for r in rows if _info(r).get("domain") is not None)
    diff = Counter(_info(r).get("difficulty") for r in rows)
    feats = [_feats(r) for r in rows]
    per_feat = Counter(f for fs in feats for f in fs if isinstance(f, str))
    n2 = sum(1 for f in feats if len(f) >= 2)
    n3 = sum(1 for f in feats if len(f) >= 3)
    n_skel = sum(1 for r in rows if str(_info(r).get("source", "")).startswith("skeleton:"))
    subs_per_dom = {dom: sum(1 for (d, _s) in subs if d == dom) for dom in doms}
    smallest = min(subs.values()) if subs else 0
    low_feats = {f: round(share(v, T), 4) for f, v in per_feat.items() if share(v, T) < 0.10}

    def line(passed: bool, value: Any, bar: str) -> dict[str, Any]:
        return {"passed": bool(passed), "value": value, "bar": bar}

    return {
        "seed_domains": line(len(doms) >= 3, len(doms), ">= 3 domains"),
        "seed_subs_per_domain": line(all(n >= 2 for n in subs_per_dom.values()), subs_per_dom, "every domain >= 2 sub_domains"),
        "seed_smallest_bucket": line(T > 0 and smallest / T >= 0.03, round(share(smallest, T), 4), "smallest (domain, sub_domain) >= 3%"),
        "seed_hard": line(share(diff.get("hard", 0), T) >= 0.40, round(share(diff.get("hard", 0), T), 4), "hard >= 40%"),
        "seed_easy": line(T > 0 and share(diff.get("easy", 0), T) <= 0.20, round(share(diff.get("easy", 0), T), 4), "easy <= 20%"),
        "seed_features_2": line(share(n2, T) >= 0.80, round(share(n2, T), 4), ">= 80% of rows with >= 2 features"),
        "seed_features_3": line(share(n3, T) >= 0.40, round(share(n3, T), 4), ">= 40% of rows with >= 3 features"),
        "seed_feature_coverage": line(T > 0 and not low_feats, low_feats, "every feature used in >= 10% of rows"),
        "seed_skeleton": line(share(n_skel, T) >= 0.30, round(share(n_skel, T), 4), "skeleton-source >= 30%"),
    }


def _normalise_question(q: Any) -> str:
    return " ".join(str(q).split())


def check_dataset(rows: list[dict], report: WeaknessReport, dropped_eval_overlap: int = 0) -> GateReport:
    """Gate the generated rows against the report; every failing rule is listed.

    `dropped_eval_overlap`: how many rows the generate step dropped before (decontam.py), named
    in the row-count message so the teacher knows why there are fewer rows than it wrote."""
    failures: list[GateFailure] = []
    T = len(rows)

    by_problem: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        for p in _row_problems(row):
            by_problem[p].append(i)
    for problem, idx in by_problem.items():
        failures.append(GateFailure(rule="row_schema", message=f"{len(idx)} row(s): {problem}", rows=idx))

    pairs = report.pairs()
    unknown_pairs: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        info = _info(r)
        key = (info.get("domain"), info.get("sub_domain"))
        if isinstance(key[0], str) and isinstance(key[1], str) and key not in pairs:
            unknown_pairs[key].append(i)
    if unknown_pairs:
        domains, subs = {d for d, _ in pairs}, {s for _, s in pairs}
        names = "; ".join(f"({label_repr(d, domains)}, {label_repr(s, subs)}) x{len(ix)}" for (d, s), ix in unknown_pairs.items())
        failures.append(GateFailure(rule="unknown_pair", message=f"(domain, sub_domain) pairs not in the weakness report: {names}; fix the report first", rows=sorted(i for ix in unknown_pairs.values() for i in ix)))

    defined = report.feature_labels()
    unknown_feats: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        for f in _feats(r):
            if isinstance(f, str) and f not in defined:
                unknown_feats[f].append(i)
    if unknown_feats:
        names = "; ".join(f"{label_repr(f, defined)} x{len(ix)}" for f, ix in unknown_feats.items())
        failures.append(GateFailure(rule="unknown_feature", message=f"structural features not defined in the report (labels must match verbatim): {names}", rows=sorted({i for ix in unknown_feats.values() for i in ix})))

    used = {f for r in rows for f in _feats(r) if isinstance(f, str)}
    unused = sorted(defined - used)
    if unused:
        failures.append(GateFailure(rule="defined_feature_unused", message=f"features defined in the report but used by no row (each needs >= 10%): {', '.join(map(repr, unused))}"))

    lines = seed_validation_lines(rows)
    for name, ln in lines.items():
        if not ln["passed"]:
            rows_hint: list[int] = []
            if name == "seed_smallest_bucket":  # point at the rows of the undersized buckets
                sizes = Counter((_info(r).get("domain"), _info(r).get("sub_domain")) for r in rows)
                small = {k for k, v in sizes.items() if share(v, T) < 0.03}
                rows_hint = [i for i, r in enumerate(rows) if (_info(r).get("domain"), _info(r).get("sub_domain")) in small]
            failures.append(GateFailure(rule=name, message=f"{ln['bar']}: measured {_fmt(ln['value'])}", rows=rows_hint))

    if not ROWS_MIN <= T <= ROWS_MAX:
        if dropped_eval_overlap and T < ROWS_MIN:
            message = (f"{T} rows after the tool dropped {dropped_eval_overlap} that overlap the evaluated questions; "
                       f"need {ROWS_MIN}-{ROWS_MAX}: generate more rows")
        else:
            message = f"{T} rows; need {ROWS_MIN}-{ROWS_MAX}"
        failures.append(GateFailure(rule="row_count", message=message))

    first_seen: dict[str, int] = {}
    dupes: list[int] = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("question"), str) or not r["question"].strip():
            continue  # already a row_schema failure
        q = _normalise_question(r["question"])
        if q in first_seen:
            dupes.append(i)
        else:
            first_seen[q] = i
    if dupes:
        failures.append(GateFailure(rule="duplicate_question", message=f"{len(dupes)} row(s) repeat an earlier row's question (whitespace-normalised)", rows=dupes))

    stats = {
        "rows": T,
        "seed_lines": lines,
        "per_pair": {f"{d} / {s}": c for (d, s), c in Counter((_info(r).get("domain"), _info(r).get("sub_domain")) for r in rows).items()},
        "bucket_targets": {f"{b.domain} / {b.sub_domain}": b.rows for b in report.buckets},
        "difficulty": dict(Counter(str(_info(r).get("difficulty")) for r in rows)),
        "feature_share": {f: round(share(c, T), 4) for f, c in Counter(f for r in rows for f in _feats(r) if isinstance(f, str)).items()},
    }
    return GateReport.build(GATE, failures, stats)


def check_rows_fit_student(rows: list[dict], prompt_tokens: list[int | None], *, counted: str, positions: int,
                           room: int, model: str, room_from: str) -> GateReport:
    """Every row must fit the student (issue 36): its prompt's tokens (`prompt_tokens[i]`, None for a row whose
    question is a schema failure) plus `room` completion tokens within `positions`. A row that does not fit
    would be refused by the engine at launch (no room at all) or cut every rollout's completion budget; here
    it fails the gate (exit 4) with the rows and the longest prompt the student takes."""
    max_prompt = positions - room
    over = [i for i, n in enumerate(prompt_tokens) if n is not None and n > max_prompt]
    failures = []
    if over:
        longest = max(prompt_tokens[i] for i in over)  # type: ignore[type-var]
        failures.append(GateFailure(rule="row_fits_student", rows=over, message=(
            f"{len(over)} row(s) too long for {model}: the longest prompt is {longest} tokens ({counted}); "
            f"{model} attends over {positions} positions and a completion needs {room} of them ({room_from}), "
            f"so a prompt may take at most {max_prompt} tokens: shorten those questions in gen_dataset.py")))
    counts = [n for n in prompt_tokens if n is not None]
    return GateReport.build("fits_student", failures, {
        "positions": positions, "completion_room": room, "max_prompt_tokens": max_prompt,
        "longest_prompt_tokens": max(counts, default=None), "counted_with": counted})


def check_dataset_file(path: Path, report: WeaknessReport) -> GateReport:
    """load_dataset_jsonl + check_dataset in one report (bad lines come first)."""
    rows, load_failures = load_dataset_jsonl(path)
    gate = check_dataset(rows, report)
    return GateReport.build(GATE, load_failures + gate.failures, gate.stats)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1%}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}" if value else "{}"
    return str(value)
