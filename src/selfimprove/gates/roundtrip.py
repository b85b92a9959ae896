"""The round-trip gate (Pillar 1, ACCURATE): the hub parser must find each row's answer.

    parser = vf.XMLParser(["answer"], answer_field="answer")   # the hub env's parser
    gate = check_round_trip(rows, parser.parse_answer)

For EVERY row (not a sample, unlike the generator's own assert block), the
parser runs over `info.reasoning` and must extract a value equal to
`row["answer"]`, compared after `.strip()` and, when given, after
`normalise` on both sides. A reasoning string the parser cannot read means
the student is being taught a format the rubric will not reward.

`parse_answer` contract: takes the completion text, returns the extracted
answer string or None; an exception counts as a failure of that row.
"""

from __future__ import annotations

from typing import Any, Callable

from .common import GateFailure, GateReport

GATE = "round_trip"
EXAMPLES_IN_MESSAGE = 3  # generated rows only, so showing values is safe


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_round_trip(
    rows: list[dict],
    parse_answer: Callable[[str], str | None],
    normalise: Callable[[str], str] | None = None,
) -> GateReport:
    """Run the hub parser over every row's info.reasoning; list rows that do not round-trip."""
    norm = normalise or (lambda s: s)
    missing: list[int] = []
    errors: list[int] = []
    error_kinds: dict[str, int] = {}
    nothing: list[int] = []
    mismatch: list[int] = []
    examples: list[str] = []
    for i, row in enumerate(rows):
        info = row.get("info") if isinstance(row, dict) else None
        reasoning = info.get("reasoning") if isinstance(info, dict) else None
        answer = row.get("answer") if isinstance(row, dict) else None
        if not isinstance(reasoning, str) or not reasoning.strip() or not isinstance(answer, str):
            missing.append(i)
            continue
        try:
            parsed = parse_answer(reasoning)
        except Exception as e:  # a parser crash is this row's failure, not the gate's
            errors.append(i)
            error_kinds[type(e).__name__] = error_kinds.get(type(e).__name__, 0) + 1
            continue
        if parsed is None or not str(parsed).strip():
            nothing.append(i)
            continue
        if norm(str(parsed).strip()) != norm(answer.strip()):
            mismatch.append(i)
            if len(examples) < EXAMPLES_IN_MESSAGE:
                examples.append(f"row {i}: parsed {_short(str(parsed).strip())} != answer {_short(answer.strip())}")

    failures = []
    if missing:
        failures.append(GateFailure(rule="round_trip_input", message=f"{len(missing)} row(s) lack a string answer or a non-empty info.reasoning", rows=missing))
    if errors:
        kinds = ", ".join(f"{k} x{v}" for k, v in error_kinds.items())
        failures.append(GateFailure(rule="round_trip_parser_error", message=f"the parser raised on {len(errors)} row(s) ({kinds})", rows=errors))
    if nothing:
        failures.append(GateFailure(rule="round_trip_no_answer", message=f"the parser extracted nothing from {len(nothing)} row(s); info.reasoning must use the hub answer format", rows=nothing))
    if mismatch:
        failures.append(GateFailure(rule="round_trip_mismatch", message=f"{len(mismatch)} row(s) parse to a value != answer; e.g. " + "; ".join(examples), rows=mismatch))
    ok = len(rows) - len(missing) - len(errors) - len(nothing) - len(mismatch)
    return GateReport.build(GATE, failures, {"rows": len(rows), "round_trip_ok": ok})
