"""The generate step against a generator that breaks its iteration dir: one teacher stop naming the path,
and a fixed generator recovers without the teacher cleaning up by hand."""

from __future__ import annotations

import pytest

from selfimprove.errors import TeacherActionNeeded
from selfimprove.phases import iteration_steps as steps
from selfimprove.phases.context import RunContext
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir

from loop_helpers import GENERATOR, write_teacher_files


def _at_iter1(run: RunDir):
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1)
    write_teacher_files(it.dir)
    return it


def test_dataset_jsonl_made_a_directory_is_named_and_a_fixed_generator_recovers(run: RunDir) -> None:
    it = _at_iter1(run)
    ds = it.dir / "dataset.jsonl"
    (it.dir / "gen_dataset.py").write_text("import os\nos.makedirs('dataset.jsonl/part')\n")
    with pytest.raises(TeacherActionNeeded, match=r"dataset\.jsonl: gen_dataset\.py made it a directory"):
        steps.generate(RunContext.load(run), it, timeout=60)
    assert ds.is_dir() and not steps.generated_is_current(it) and not steps.dataset_gate_is_current(it)
    assert not steps.package_is_current(it)
    (it.dir / "gen_dataset.py").write_text(GENERATOR.format(break_rules=[]))
    assert steps.generate(RunContext.load(run), it, timeout=60)["rows"] == 600
    assert ds.is_file() and steps.generated_is_current(it)


def test_a_generator_deleting_the_report_is_a_teacher_stop_naming_it(run: RunDir) -> None:
    it = _at_iter1(run)
    (it.dir / "gen_dataset.py").write_text(GENERATOR.format(break_rules=[]) + "\nimport os\nos.remove('weakness_report.md')\n")
    with pytest.raises(TeacherActionNeeded, match=r"weakness_report\.md: gen_dataset\.py deleted or moved it"):
        steps.generate(RunContext.load(run), it, timeout=60)
    assert not steps.dataset_gate_is_current(it)
