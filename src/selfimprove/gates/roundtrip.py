"""The round-trip gate (Pillar 1, ACCURATE): the hub parser must find each row's answer.

Two forms, one per env API (the run's `env_api.round_trip_gate` picks one):
`check_round_trip` (classic: the env's parser) and `check_reward_round_trip`
(verifiers v1: the hub Task's own rewards score the reasoning; full marks required).

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


def round_trip_inputs(rows: list[dict]) -> list[dict | None]:
    """Per row, {question, answer, reasoning} to score, or None when the row lacks a string question or
    answer or a non-empty info.reasoning (reported as round_trip_input, never scored)."""
    out: list[dict | None] = []
    for row in rows:
        info = row.get("info") if isinstance(row, dict) else None
        reasoning = info.get("reasoning") if isinstance(info, dict) else None
        question, answer = (row.get("question"), row.get("answer")) if isinstance(row, dict) else (None, None)
        ok = isinstance(reasoning, str) and reasoning.strip() and isinstance(answer, str) and isinstance(question, str)
        out.append({"question": question, "answer": answer, "reasoning": reasoning} if ok else None)
    return out


FULL_MARKS = 1.0  # a correctness reward's maximum; a row round-trips when every positively weighted reward reaches it


def check_reward_round_trip(rows: list[dict], scored: list[dict | None], weights: dict[str, float]) -> GateReport:
    """The v1 round trip: `scored[i]` is None (row not scorable), {"error": one line} (the task could
    not be built or a reward raised) or {"rewards": {name: score}} from the hub Task's rewards run on
    row i's info.reasoning as the reply, against a task holding row i's answer. A row passes when every
    reward with a positive weight scores >= FULL_MARKS: a reasoning the rewards cannot read, or whose
    answer is not the row's, is a format the student would be taught but never rewarded for.
    (Zero- and negative-weight rewards are penalties or metrics: a reasoning may trip them.)"""
    graded = [name for name, w in sorted(weights.items()) if w > 0]
    missing = [i for i, s in enumerate(scored) if s is None]
    errors = [i for i, s in enumerate(scored) if s is not None and "error" in s]
    error_kinds: dict[str, int] = {}
    for i in errors:
        kind = str(scored[i]["error"]).split(":")[0]
        error_kinds[kind] = error_kinds.get(kind, 0) + 1
    short: list[int] = []
    examples: list[str] = []
    for i, s in enumerate(scored):
        if s is None or "error" in s:
            continue
        got = {n: s["rewards"].get(n) for n in graded}
        below = {n: v for n, v in got.items() if v is None or v < FULL_MARKS}
        if below or not graded:
            short.append(i)
            if len(examples) < EXAMPLES_IN_MESSAGE:
                shown = ", ".join(f"{n}={v}" for n, v in (below or s["rewards"]).items())
                examples.append(f"row {i}: {shown} (answer {_short(rows[i].get('answer'))})")
    failures = []
    if missing:
        failures.append(GateFailure(rule="round_trip_input", message=f"{len(missing)} row(s) lack a string question, a string answer or a non-empty info.reasoning", rows=missing))
    if errors:
        kinds = ", ".join(f"{k} x{v}" for k, v in error_kinds.items())
        failures.append(GateFailure(rule="round_trip_reward_error", message=f"the hub task could not be built or a reward raised on {len(errors)} row(s) ({kinds}); check each row's answer fits the task's answer field", rows=errors))
    if short:
        failures.append(GateFailure(rule="round_trip_not_full_marks", message=f"the hub task's rewards give {len(short)} row(s) less than full marks ({FULL_MARKS:g} on every reward of positive weight: {', '.join(graded) or 'none'}) for info.reasoning as the reply; it must end in the hub answer format with the row's answer; e.g. " + "; ".join(examples), rows=short))
    ok = len(rows) - len(missing) - len(errors) - len(short)
    return GateReport.build(GATE, failures, {"rows": len(rows), "round_trip_ok": ok})
