"""Types shared by every gate: one failure per broken rule, one report per gate.

A gate never stops at the first problem: it evaluates every rule and returns a
`GateReport` listing all failures, so the teacher fixes everything in one pass.
`rows` always holds indices into the GENERATED rows being gated (never eval
rows), which is what makes a report safe to show the teacher.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field

# How many row indices a one-line summary shows before eliding the rest.
SUMMARY_MAX_ROWS = 8


def label_repr(label: str, known: Iterable[str]) -> str:
    """repr(label), with its code points spelled out when it equals a `known` label only after Unicode NFC
    normalisation (an NFD 'café' and an NFC 'café' print identically, and a message naming both would
    show two equal-looking labels)."""
    nfc = unicodedata.normalize("NFC", label)
    twin = next((k for k in known if k != label and unicodedata.normalize("NFC", k) == nfc), None)
    if twin is None:
        return repr(label)
    return (f"{label!r} (written {ascii(label)}, the report's is {ascii(twin)}: the same text in another "
            f"Unicode normal form; write labels in NFC, e.g. unicodedata.normalize('NFC', label))")


class GateFailure(BaseModel):
    """One broken rule: a stable rule id, a one-line message with the measured value."""

    model_config = ConfigDict(extra="forbid")

    rule: str  # stable id, e.g. "seed_hard"; tests and callers match on it
    message: str  # one line: what is wrong, the measured value, the bar
    rows: list[int] = Field(default_factory=list)  # indices of offending generated rows

    def line(self) -> str:
        text = f"[{self.rule}] {self.message}"
        if self.rows:
            shown = ", ".join(str(r) for r in self.rows[:SUMMARY_MAX_ROWS])
            more = len(self.rows) - SUMMARY_MAX_ROWS
            text += f" (rows {shown}{f' ... +{more} more' if more > 0 else ''})"
        return text


class GateReport(BaseModel):
    """The outcome of one gate: every failure, plus measured statistics."""

    model_config = ConfigDict(extra="forbid")

    gate: str  # "report", "dataset", "near_duplicates", "eval_overlap", "round_trip", "reward_lint"
    passed: bool
    failures: list[GateFailure] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)  # measured values, JSON-serialisable

    @classmethod
    def build(cls, gate: str, failures: list[GateFailure], stats: dict[str, Any] | None = None) -> "GateReport":
        """A report that passes exactly when there are no failures."""
        return cls(gate=gate, passed=not failures, failures=failures, stats=stats or {})

    @property
    def failed_rules(self) -> set[str]:
        return {f.rule for f in self.failures}

    def summary(self) -> str:
        """Readable multi-line summary: a header, then one line per failure."""
        if self.passed:
            return f"{self.gate} gate: passed"
        lines = [f"{self.gate} gate: FAILED ({len(self.failures)} failure{'s' if len(self.failures) != 1 else ''})"]
        lines += [f"  - {f.line()}" for f in self.failures]
        return "\n".join(lines)


def merge_reports(gate: str, reports: Iterable[GateReport]) -> GateReport:
    """One report over several sub-gates (e.g. for iter_N/gate_report.json).

    Rule ids are unique across gates, so failures are concatenated as they are;
    stats are keyed by sub-gate name.
    """
    reports = list(reports)
    failures = [f for r in reports for f in r.failures]
    return GateReport.build(gate, failures, {r.gate: r.stats for r in reports})


def share(count: int, total: int) -> float:
    """count / total, 0.0 for an empty total (a gate on 0 rows must not divide by zero)."""
    return count / total if total else 0.0
