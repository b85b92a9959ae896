"""The report page's drill-down into one iteration: what the teacher read and what it wrote.

For iter_N: the teacher's weakness report (weakness_report.md, once submitted to the report
gate: before that the file is the tool's skeleton), a few of the TRAIN failures it read
(failures.jsonl, lowest reward first, as analyze wrote them), a few of the generated rows
(dataset.jsonl) and the dataset gate's own report (gate_report.txt). All of it is TRAIN-side
material the teacher wrote or was given; nothing here opens an eval file.

The files are untrusted (a generator or a hand edit may have written anything): a line that is
not a JSON object is counted, not shown; the page escapes and caps every value (`markup`).
Only the first SAMPLES rows are decoded; the rest are counted, so a 1 GB dataset.jsonl costs a
line count, not a parse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SAMPLES = 5  # rows shown per kind (failures, generated rows); the page says how many there are in all
TEXT_CAP = 200_000  # bytes of a text file read for the page (a forged huge file is cut, and the page says so)


def _text(path: Path) -> str | None:
    """The file's text (at most TEXT_CAP bytes, undecodable bytes replaced), None when it does not exist."""
    try:
        with open(path, "rb") as f:
            data = f.read(TEXT_CAP + 1)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except OSError as e:
        return f"({path.name} is not readable: {e.strerror})"
    text = data[:TEXT_CAP].decode("utf-8", errors="replace")
    return text + (f"\n... [cut at {TEXT_CAP:,} bytes]" if len(data) > TEXT_CAP else "")


def jsonl_sample(path: Path, limit: int = SAMPLES) -> dict[str, Any] | None:
    """{"rows": the first `limit` JSON-object lines, "total": non-empty lines, "bad": lines shown as
    neither} of a JSONL file; None when it does not exist."""
    if not path.is_file():
        return None
    rows: list[dict] = []
    total = bad = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if not line.strip():
                    continue
                total += 1
                if len(rows) >= limit:
                    continue  # counted, not decoded
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    bad += 1
                    continue
                if isinstance(row, dict):
                    rows.append(row)
                else:
                    bad += 1
    except OSError:
        return None
    return {"rows": rows, "total": total, "bad": bad}


def _failure(row: dict) -> dict[str, Any]:
    """A failures.jsonl row (phases.analyze.read_train_rollouts' fields) as the page shows it."""
    return {k: row.get(k) for k in ("step", "idx", "example_id", "reward", "question", "completion", "answer",
                                    "is_truncated")}


def _generated(row: dict) -> dict[str, Any]:
    """A dataset.jsonl row: question, answer and the info fields a person checks first; the rest as JSON."""
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    shown = {k: info.get(k) for k in ("domain", "sub_domain", "difficulty", "source") if k in info}
    rest = {k: v for k, v in row.items() if k not in ("question", "answer", "info")}
    return {"question": row.get("question"), "answer": row.get("answer"), "info": shown,
            "reasoning": info.get("reasoning"), "other": json.dumps(rest)[:2000] if rest else None}


def iteration_samples(it_dir: Path, report_submitted: bool) -> dict[str, Any]:
    """The drill-down parts of one iteration dir (each None when its file does not exist yet)."""
    failures = jsonl_sample(it_dir / "failures.jsonl")
    dataset = jsonl_sample(it_dir / "dataset.jsonl")
    return {
        "weakness_report": _text(it_dir / "weakness_report.md") if report_submitted else None,
        "failures": failures and {**failures, "rows": [_failure(r) for r in failures["rows"]]},
        "dataset": dataset and {**dataset, "rows": [_generated(r) for r in dataset["rows"]]},
        "gate_report": _text(it_dir / "gate_report.txt"),
    }
