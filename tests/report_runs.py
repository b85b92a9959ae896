"""Run dirs for the report page's tests, made cheaply with the fake engine (tests/fakes/fake_rl.py):
a finished run (iter_1, Runs A/B/C, finalized) and a run stopped after iter_1 (Phase 4 never ran).
Both start from the session's iter_0-done run (loop_helpers.baseline_run), copied."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfimprove.cli import app
from selfimprove.errors import TeacherActionNeeded
from selfimprove.phases.compare import compare
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir

from loop_helpers import FAKE, write_teacher_files

CANARY = "CANARY-REPORT-SEALED-EVAL"  # planted in every eval row's text by the fake engine


def _copy(baseline: Path, where: Path) -> RunDir:
    dst = where / baseline.name
    shutil.copytree(baseline, dst, symlinks=True)
    return RunDir(dst)


def _through_iter1(rd: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(rd, quiet=True)
    write_teacher_files(rd.iter(1).dir)
    assert iterate(rd, quiet=True).kind == "ended"


@pytest.fixture(scope="module")
def report_runs(baseline_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    """{"finished": ..., "iter1": ...}: made once per module with the fake engine (iter_1, then a copy
    of that run goes on through compare and finalize)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
        mp.setenv("FAKE_RL_STEP_S", "0.001")
        mp.setenv("FAKE_RL_CANARY", CANARY)
        stopped = _copy(baseline_run, tmp_path_factory.mktemp("report_iter1"))
        _through_iter1(stopped)
        finished = _copy(stopped.root, tmp_path_factory.mktemp("report_finished"))
        compare(finished, quiet=True)
        res = CliRunner().invoke(app, ["finalize", "--run-dir", str(finished.root), "--no-plot", "--no-wandb"])
        assert res.exit_code == 0, res.output
        (finished.root / "finalize.out").write_text(res.stdout)  # what finalize printed, for the tests
    return {"finished": finished, "iter1": stopped}


@pytest.fixture(scope="module")
def report_tables(report_runs: dict[str, RunDir]) -> dict[str, dict]:
    """finalize's table of each run, computed once (the paired bootstrap takes seconds on 1000 examples)."""
    from selfimprove.phases.finalize import report_table

    return {kind: report_table(rd) for kind, rd in report_runs.items()}
