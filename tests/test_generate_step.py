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


def test_a_fixed_teacher_module_or_data_file_regenerates_and_a_moved_run_does_not(run: RunDir, tmp_path) -> None:
    """The dataset is keyed on every file the generator read (engines/gen_reads.py), not on gen_dataset.py's
    text alone: a generator importing the teacher's module kept its stale rows after the module was fixed."""
    it = _at_iter1(run)
    teacher = tmp_path / "teacher_mod"
    teacher.mkdir()
    (teacher / "my_rows.py").write_text("BREAK = ['reverse']\n")
    (it.dir / "extra.txt").write_text("one")
    gen = GENERATOR.format(break_rules=[]).replace(
        "BREAK = []", f"sys.path.insert(0, {str(teacher)!r})\nfrom my_rows import BREAK\nopen('extra.txt').read()")
    (it.dir / "gen_dataset.py").write_text(gen)
    rec = steps.generate(RunContext.load(run), it, timeout=60)
    assert str(teacher / "my_rows.py") in rec["reads"] and "RUN/iter_1/extra.txt" in rec["reads"]
    assert not any("site-packages" in k or k.endswith("json/__init__.py") for k in rec["reads"])  # not the interpreter's
    assert not (it.dir / "gen_reads.json").exists() and steps.generated_is_current(it)
    (teacher / "my_rows.py").write_text("BREAK = []\n")  # the teacher fixes its module
    assert not steps.generated_is_current(it)
    steps.generate(RunContext.load(run), it, timeout=60)
    assert steps.generated_is_current(it)
    (it.dir / "extra.txt").write_text("two")  # a data file it read
    assert not steps.generated_is_current(it)
    steps.generate(RunContext.load(run), it, timeout=60)
    moved = tmp_path / "moved"
    run.root.rename(moved)  # paths inside the run dir are kept relative to it
    assert steps.generated_is_current(RunDir(moved).iter(1))


def test_a_generator_that_leaves_by_os_exit_is_run_again(run: RunDir) -> None:
    """os._exit skips the exit hook that lists what it read: its rows cannot be checked, so they are never reused."""
    it = _at_iter1(run)
    (it.dir / "gen_dataset.py").write_text(GENERATOR.format(break_rules=[]) + "\nimport os\nos._exit(0)\n")
    assert steps.generate(RunContext.load(run), it, timeout=60)["reads"] is None
    assert not steps.generated_is_current(it)
