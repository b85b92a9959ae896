"""The fault suite's scripted teacher (`--teacher tests/fakes/fault_teacher.py:FaultTeacher`).

It writes the same two files as tests/loop_helpers.py::write_teacher_files (a report
and a generator whose rows pass every gate), one after the other, with the fault
point "teacher-write" between them: SELFIMPROVE_FAULT_AT=teacher-write kills the
CLI after the report and before the generator, a teacher stop half-answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from gate_fixtures import report_dict, write_report  # noqa: E402
from loop_helpers import GENERATOR  # noqa: E402

from selfimprove.faults import fault_point  # noqa: E402
from selfimprove.teacher import TeacherContext  # noqa: E402


class FaultTeacher:
    def write(self, ctx: TeacherContext) -> None:
        write_report(ctx.iter_dir / "weakness_report.md", report_dict())
        fault_point("teacher-write")
        (ctx.iter_dir / "gen_dataset.py").write_text(GENERATOR.format(break_rules=[]))
