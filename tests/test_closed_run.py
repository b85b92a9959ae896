"""A closed run is never rewritten, and its advice leads somewhere (issue 36). Fast: synthetic finished runs
(test_finalize_seeds.make_run: run.json, metrics.json, eval summaries; no training) and the session's
iter_0-done run (loop_helpers.run, fake engine).

Every refusal here is followed: the command it names is checked to be one the run's state allows
(`check_keeps_records` passes for it, or it runs), never one that refuses in turn."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from loop_helpers import tree_digest
from selfimprove.phases.compare import check_keeps_records
from selfimprove.phases.context import RunContext
from selfimprove.phases.status import next_step
from selfimprove.rundir import RunDir
from test_finalize_seeds import make_run

TWO_SEEDS = {"iter_0": [0.50], "iter_1": [0.56, 0.57], "run_a": [0.60, 0.61], "run_b": [0.52], "run_c": [0.51, 0.50]}


def finalized(tmp_path: Path, cli, arms=TWO_SEEDS) -> RunDir:
    rd = make_run(tmp_path, arms)
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 0, res.stderr
    return rd


def advised_compare(stderr: str) -> list[str]:
    """The `selfimprove compare ...` command a line advises, as argv after `compare`."""
    m = re.search(r"`selfimprove compare ([^`]+)`", " ".join(stderr.split()))
    assert m, stderr
    return m.group(1).split()


def assert_compare_would_train(rd: RunDir, argv: list[str]) -> None:
    """The advised compare passes the closed-run check and has an arm to train (so it reopens the run)."""
    seeds = int(argv[argv.index("--seeds") + 1]) if "--seeds" in argv else None
    check_keeps_records(RunContext.load(rd), control="--no-control" not in argv, seeds=seeds)


@pytest.mark.parametrize("flags", [["--seeds", "1"], ["--no-control"], [], ["--seeds", "2"]])
def test_compare_with_nothing_to_train_on_a_closed_run_changes_nothing(tmp_path: Path, cli, flags) -> None:
    """Before issue 36, `compare --seeds 1` after a 2-seed compare rewrote run.json seeds and reordered
    metrics.json under a summary of 2 seeds, then advised a finalize that exited 5."""
    rd = finalized(tmp_path, cli)
    before = tree_digest(rd.root)
    res = cli("compare", "--run-dir", rd.root, *flags)
    err = " ".join(res.stderr.split())
    assert res.exit_code == 5 and "closed" in err and "nothing changed" in err and "next:" not in res.stdout, err
    assert len(res.stderr.strip().splitlines()) == 1
    assert tree_digest(rd.root) == before
    argv = advised_compare(res.stderr)
    assert argv[:2] == ["--run-dir", str(rd.root)] and argv[argv.index("--seeds") + 1] == "3"
    assert_compare_would_train(rd, argv)


def test_finalize_on_a_closed_run_advises_a_compare_that_trains(tmp_path: Path, cli) -> None:
    rd = finalized(tmp_path, cli)
    res = cli("finalize", "--run-dir", rd.root)
    assert res.exit_code == 5
    assert_compare_would_train(rd, advised_compare(res.stderr))


def test_fewer_seeds_than_trained_on_an_open_run_is_refused_and_its_advice_passes(tmp_path: Path, cli) -> None:
    rd = make_run(tmp_path, TWO_SEEDS)
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")
    before = tree_digest(rd.root)
    res = cli("compare", "--run-dir", rd.root, "--seeds", "1")
    assert res.exit_code == 2 and "--seeds 2 or more" in res.stderr and tree_digest(rd.root) == before
    check_keeps_records(RunContext.load(rd), control=True, seeds=2)
    check_keeps_records(RunContext.load(rd), control=True, seeds=None)


def test_one_summary_at_a_time(tmp_path: Path, cli) -> None:
    """finalize after raising the seeds writes a Partial summary IN PLACE of the Final one (whose
    recommendation no longer holds); the next complete finalize replaces the Partial with one Final. The
    teacher's words under the first summary survive both."""
    rd = finalized(tmp_path, cli, {"iter_0": [0.50], "iter_1": [0.56], "run_a": [0.60], "run_b": [0.52],
                                   "run_c": [0.51]})
    pad = rd.scratchpad.read_text()
    rd.scratchpad.write_text(pad.replace("_teacher: fill in from the iteration entries above._",
                                         "Carry-digit rows helped."), encoding="utf-8")
    cfg = rd.read_run()
    cfg.seeds = 2  # what `compare --seeds 2` records before its first replicate
    rd.write_run(cfg)
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 6
    pad = rd.scratchpad.read_text()
    assert pad.count("## Partial summary") == 1 and "## Final summary" not in pad, pad
    assert "Carry-digit rows helped." in pad and pad.startswith("# run\n")
    two = make_run(tmp_path / "two", TWO_SEEDS)
    for key in ("run_a_seed1", "run_c_seed1", "iter_1_seed1"):
        rd.arm(key).dir.mkdir()
        two.arm(key).eval_summary.replace(rd.arm(key).eval_summary)
        rd.record_arm(two.read_metrics().get(key))
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 0, res.stderr
    pad = rd.scratchpad.read_text()
    assert pad.count("## Final summary") == 1 and "Partial summary" not in pad and "INCOMPLETE" not in pad, pad
    assert "Carry-digit rows helped." in pad


def test_compare_after_the_no_signal_stop_names_a_command_that_runs(run: RunDir, cli) -> None:
    """Before issue 36: compare said 're-run iterate', and iterate refused with exit 4 (a loop)."""
    cfg = run.read_run()
    cfg.learning_signal = {"has_signal": False, "verdict": "no signal", "allowed": False,
                           "train_groups": 8, "train_groups_with_spread": 0}
    run.write_run(cfg)
    res = cli("compare", "--run-dir", run.root)
    err = " ".join(res.stderr.split())
    assert res.exit_code == 5 and "selfimprove iterate" not in err
    assert f"selfimprove baseline --run-dir {run.root} --allow-no-signal" in err
    assert cli("iterate", "--run-dir", run.root).exit_code == 4  # what compare no longer points at


def test_every_phase_on_a_closed_run_exits_5(run: RunDir, cli) -> None:
    cfg = run.read_run()
    cfg.status, cfg.end_reason, cfg.end_ts = "finalized", "max_iters_reached", time.time()
    run.write_run(cfg)
    before = tree_digest(run.root)
    for phase in ("introspect", "baseline", "iterate"):
        res = cli(phase, "--run-dir", run.root)
        assert res.exit_code == 5, (phase, res.stderr)
        assert "iter_0 checkpoint" in res.stderr or phase == "introspect"
    res = cli("note", "--run-dir", run.root, "--compact-failed", "timed out")
    assert res.exit_code == 5 and "closed" in res.stderr
    assert tree_digest(run.root) == before
    assert next_step(RunContext.load(run))[1] == "nothing: the run is finished"


def test_weaknesses_after_phase_3_names_no_iteration_that_does_not_exist(run: RunDir, cli) -> None:
    """`weaknesses` on a run whose Phase 3 is over: before issue 36 it said 'weaknesses for iter_1' (or iter_2)
    for an iteration that was never trained; a --iter past the end names the valid range."""
    cfg = run.read_run()
    cfg.status, cfg.reason = "max_iters_reached", "max_iters=1 reached"
    run.write_run(cfg)
    res = cli("weaknesses", "--run-dir", run.root)
    assert res.exit_code == 0, res.stderr
    head = res.stdout.splitlines()[0]
    assert "weaknesses for iter_1" not in head and "never trained" in head, head
    res = cli("weaknesses", "--run-dir", run.root, "--iter", "5", "--source", "previous")
    assert res.exit_code == 5 and "use --source real" in " ".join(res.stderr.split()), res.stderr
    assert cli("weaknesses", "--run-dir", run.root, "--iter", "5", "--source", "real").exit_code == 0  # the advice
