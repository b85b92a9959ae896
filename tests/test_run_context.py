"""The run context (phases/context.py): a phase reads run.json once under its lock and hands the
context to its helpers. These tests count RunDir.read_run calls, so a helper that starts re-reading
run.json again fails here, and check that a phase that writes run.json carries the new copy on.
Fast: synthetic run dirs (test_finalize_seeds.make_run), no training."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfimprove.phases.compare import _record_seeds, _reopen_for, compare
from selfimprove.phases.context import RunContext
from selfimprove.phases.finalize import finalize
from selfimprove.phases.status import run_status
from selfimprove.rundir import RunDir
from test_baseline import hub_env
from test_finalize_seeds import make_run
from test_r3_state import ARMS_1, phase4_ready


def count_run_json_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every RunDir.read_run call from now on, by run dir."""
    reads: list[Path] = []
    real = RunDir.read_run

    def counted(self: RunDir):
        reads.append(self.root)
        return real(self)

    monkeypatch.setattr(RunDir, "read_run", counted)
    return reads


@pytest.fixture
def run_json_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    return count_run_json_reads(monkeypatch)


def test_status_reads_run_json_once(tmp_path: Path, run_json_reads: list[Path]) -> None:
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    hub_env(rd.root)
    shown = run_status(rd)
    assert shown["next"] == f"selfimprove finalize --run-dir {rd.root}"
    assert len(run_json_reads) == 1


def test_compare_and_finalize_read_run_json_before_and_under_the_lock_only(tmp_path: Path,
                                                                          run_json_reads: list[Path]) -> None:
    """compare with every arm finished (nothing to train) and finalize: one read for the order check
    before the lock (a refusal leaves the run dir untouched), one for the context under it."""
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    hub_env(rd.root)
    result = compare(rd, quiet=True)
    assert result["best"]["best_iter"] == 1 and not result["errors"]
    assert len(run_json_reads) == 2
    run_json_reads.clear()
    assert finalize(rd, plot=False, wandb=False)["status"] == "finalized"
    # + 1: the report page, written after the run is closed, reads the closed run as any reader does
    assert len(run_json_reads) == 3


def test_a_phase_that_writes_run_json_carries_the_written_copy(tmp_path: Path) -> None:
    """compare --seeds 2 on a finalized run: recording the seeds and reopening the run each hand back a
    context holding what is on disk, while the context they were given is left as it was read."""
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    assert finalize(rd, plot=False, wandb=False)["status"] == "finalized"
    before = RunContext.load(rd)
    after = _reopen_for(_record_seeds(before, 2), [("run_a", 1, "run_a_seed1")])
    assert after.cfg == rd.read_run()
    assert (after.cfg.seeds, after.cfg.end_ts) == (2, None)
    assert before.cfg.seeds == 1 and before.cfg.end_ts is not None


def test_the_canonical_config_is_a_fresh_copy_per_call(tmp_path: Path) -> None:
    """Builders merge into the config they are given; compare's arms share one context, so one arm's
    changes must not reach the next."""
    rd = make_run(tmp_path, ARMS_1)
    (rd.iter(0).dir / "canonical_rl.toml").write_text('max_steps = 10\n[orchestrator]\nseed = 7\n', encoding="utf-8")
    ctx = RunContext.load(rd)
    first = ctx.canonical_config()
    first["orchestrator"]["seed"] = 99
    assert ctx.canonical_config()["orchestrator"]["seed"] == 7
