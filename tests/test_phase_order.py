"""Phases run in order (issue 13, item 4): each refusal is one line naming the
phase to run first, exits 5 (PhaseOrderError, not the teacher's 3), and leaves
the run dir unchanged. The prerequisites live in phases/order.py. (The closed-run
refusals need a trained iter_0: test_compare.py::test_training_phases_refuse_a_closed_run.)"""

from __future__ import annotations

from pathlib import Path

from selfimprove.rundir import RunDir

from loop_helpers import tree_digest


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
