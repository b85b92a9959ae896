"""Phases run in order (issue 13, item 4): each refusal is one line naming the
phase to run first, exits 5 (PhaseOrderError, not the teacher's 3), and leaves
the run dir unchanged. The prerequisites live in phases/order.py."""

from __future__ import annotations

from pathlib import Path

from selfimprove.phases.finalize import finalize
from selfimprove.phases.run import run_loop
from selfimprove.rundir import RunDir

from loop_helpers import baseline_run, run, tree_digest  # noqa: F401


def test_finalize_on_a_fresh_run_refuses_and_names_the_first_phase(cli, new_run) -> None:
    root: Path = new_run()
    before = tree_digest(root)
    res = cli("finalize", "--run-dir", root)
    assert res.exit_code == 5, res.stdout + res.stderr
    assert f"selfimprove introspect --run-dir {root}" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert tree_digest(root) == before and RunDir(root).read_run().status == "running"


def test_iterate_before_baseline_is_a_phase_order_error_not_a_teacher_stop(cli, new_run) -> None:
    root: Path = new_run()
    before = tree_digest(root)
    res = cli("iterate", "--run-dir", root)
    assert res.exit_code == 5 and "needs iter_0 first" in res.stderr and "error:" in res.stderr
    assert tree_digest(root) == before


def test_training_phases_refuse_a_closed_run(run: RunDir, cli) -> None:  # noqa: F811
    """finalize closes the run; baseline and iterate then refuse; `run --run-dir` re-prints the summary."""
    finalize(run, plot=False)
    assert run.read_run().status == "completed" and run.read_run().end_ts is not None
    before = tree_digest(run.root)
    for phase in ("baseline", "iterate"):
        res = cli(phase, "--run-dir", run.root)
        assert res.exit_code == 5, (phase, res.stdout, res.stderr)
        assert "the run is closed" in res.stderr and "selfimprove bootstrap" in res.stderr
    assert tree_digest(run.root) == before

    def no_teacher(ctx):
        raise AssertionError("a closed run must not call the teacher")

    out = run_loop(run, no_teacher, quiet=True)
    assert out["status"] == "completed" and out["complete"]
