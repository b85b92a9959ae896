"""The tool's own records as the report page reads them, validated at the read (issue 41).

A run dir is untrusted: weakness_stats.json, gate_attempts.json, gate_report.json,
report_gate.json, record.json and generate.json are the tool's files, but anyone who had the dir
could have edited them, and a wrong type used to end in "unexpected TypeError" or put a forged
string where the page expected a number. Each is read through a pydantic model of the fields the
page shows. A file that fails becomes `Bad`: one line naming the file, the first bad field and
what to do, which the page shows in place of that part (and `selfimprove report` prints as a
warning); the rest of the page is still written. A missing file is None, as before.

The models check only what the page reads and allow any other field, so a record written by a
newer version of the tool still reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..weakness import CLASSES


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class GroupFigures(_Record):
    group: str
    prompts: int = Field(ge=0)
    rollouts: int = Field(ge=0)
    solve_rate: float = Field(ge=0, le=1)
    solve_rate_ci95: tuple[float, float]
    # `class` is a keyword: the field is read as "class" and named cls here
    cls: str = Field(alias="class")

    @field_validator("cls")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in CLASSES:
            raise ValueError(f"not one of {', '.join(CLASSES)}")
        return v


class Window(_Record):
    steps: list[int] = Field(max_length=2)
    rollouts: int = Field(ge=0)


class Grouping(_Record):
    groups: int = Field(ge=0)


class ClassCount(_Record):
    groups: int = Field(ge=0)


class ArmWeakness(_Record):
    """One arm's figures (`weakness.weakness_stats`'s dict), the parts the page shows."""

    window: Window
    grouping: Grouping
    by_class: dict[str, ClassCount]
    groups: list[GroupFigures]


class WeaknessStats(_Record):
    """iter_N/weakness_stats.json (`phases.analyze.write_weakness_stats`)."""

    real: ArmWeakness | None = None
    previous: ArmWeakness | None = None


class Attempt(_Record):
    gate: str
    passed: bool
    failed_rules: list[str] = Field(default_factory=list)


class Attempts(_Record):
    """iter_N/gate_attempts.json (`phases.gate_attempts`)."""

    attempts: list[Attempt] = Field(default_factory=list)


class Failure(_Record):
    rule: str
    message: str


class GateRecord(_Record):
    """iter_N/gate_report.json and report_gate.json (`gates.common.GateReport`)."""

    passed: bool
    failures: list[Failure] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)


class VsIter0(_Record):
    mcnemar_p: float | None = None
    verdict: str | None = None


class IterationRecord(_Record):
    """iter_N/record.json, the parts the page shows."""

    verdict: str | None = None
    delta_vs_prev: float | None = None
    vs_iter0: VsIter0 | None = None


class Generated(_Record):
    """iter_N/generate.json, the parts the page shows."""

    rows: int | None = Field(default=None, ge=0)
    rows_dropped_eval_overlap: int | None = Field(default=None, ge=0)


@dataclass(frozen=True)
class Bad:
    """A record that failed its model: `line` names the file, the field and what to do."""

    line: str


M = TypeVar("M", bound=BaseModel)

FIX = {
    "weakness_stats.json": "delete it: the page then recomputes the figures from the TRAIN rollouts",
    "gate_attempts.json": "delete it: the page then says the attempts are not recorded",
    "gate_report.json": "delete it and re-run `selfimprove iterate`, which gates the dataset again",
    "report_gate.json": "delete it and re-run `selfimprove iterate`, which gates the report again",
    "record.json": "restore it from a copy of the run, or delete it and re-run `selfimprove iterate`",
    "generate.json": "delete it and re-run `selfimprove iterate`, which generates the rows again",
}


def read_record(path: Path, cls: type[M]) -> M | Bad | None:
    """`path` through `cls`: the model, None when the file does not exist, or Bad with one line."""
    path = Path(path)
    if not path.is_file():
        return None
    fix = FIX.get(path.name, "restore it or delete it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # ValueError: not UTF-8 or not JSON
        return Bad(f"{path}: {'not readable' if isinstance(e, OSError) else 'not valid UTF-8 JSON'}; {fix}")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        return Bad(f"{path}: field '{where}': {err['msg'][:200]}; {fix}")


def as_dict(record: BaseModel | Bad | None) -> dict | None:
    """A valid record as the plain dict the page's data holds (by the field names of the file)."""
    return record.model_dump(by_alias=True) if isinstance(record, BaseModel) else None
