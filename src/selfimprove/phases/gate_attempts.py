"""iter_N/gate_attempts.json: each distinct submission to the report and dataset gates, and its result.

The gates keep only their last report (report_gate.json, gate_report.json), so a teacher that
failed twice and then passed would leave no trace of the two retries. `iterate` re-checks an
unchanged report on every call, so an attempt is keyed by what was submitted (the sha256 of the
report, or of the report and the dataset) and what the gate said (its failures): the same files
checked again with the same outcome are not a retry; a fix elsewhere (the scratchpad sections the
report gate also reads) that changes the outcome is.
Written atomically; a kill between a gate's report and this record only loses an entry the
re-run writes again (it checks the same files).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from ..gates.common import GateReport
from ..rundir import atomic_write_json, read_json_object

FILE = "gate_attempts.json"


def record_attempt(it_dir: Path, gate: str, submitted: str, report: GateReport) -> None:
    """Add `gate`'s result on the files whose digest is `submitted`, unless that submission is recorded."""
    path = Path(it_dir) / FILE
    outcome = hashlib.sha256("\n".join(f.line() for f in report.failures).encode()).hexdigest()[:16]
    submitted = f"{submitted}:{outcome}"
    attempts = (read_json_object(path) or {}).get("attempts") or []
    if any(a.get("gate") == gate and a.get("submitted") == submitted for a in attempts):
        return
    attempts.append({"gate": gate, "submitted": submitted, "passed": report.passed, "ts": time.time(),
                     "failed_rules": sorted({f.rule for f in report.failures})})
    atomic_write_json(path, {"attempts": attempts})


def read_attempts(it_dir: Path) -> list[dict]:
    return (read_json_object(Path(it_dir) / FILE) or {}).get("attempts") or []
