"""Issue 24, round 3, area "state": the run's state after finalize, the no-signal verdict in every
view, --seeds bounds, damaged files and races. Fast: synthetic run dirs (test_finalize_seeds.make_run)
or the session's iter_0-done run (loop_helpers.run, fake engine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop_helpers import tree_digest
from selfimprove.engines.jobs import JobExpectation, JobRecord, describe_crash
from selfimprove.errors import UsageError
from selfimprove.models import MAX_SEEDS, IterRecord, Metrics
from selfimprove.phases import bootstrap as bootstrap_mod
from selfimprove.phases.compare import _reopen_for, compare
from selfimprove.phases.context import RunContext
from selfimprove.phases.iterate import iterate
from selfimprove.phases.status import next_step, run_status
from selfimprove.rundir import RunDir
from selfimprove.scratchpad import render_iter0
from test_finalize_seeds import make_run, reopen

ARMS_1 = {"iter_0": [0.50], "iter_1": [0.56], "run_a": [0.60], "run_b": [0.52], "run_c": [0.51]}


def phase4_ready(rd: RunDir) -> RunDir:
    """A synthetic run whose compare has started (best_iter.json), so status and finalize expect Phase 4."""
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")
    return rd


# ---------------------------------------------------------------- finalize: closed, idempotent, --no-plot


def test_finalize_closes_as_finalized_then_refuses_with_exit_5(tmp_path: Path, cli) -> None:
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 0, res.stderr
    assert "plot:" not in res.stdout and not rd.plot_png.exists()  # --no-plot: nothing drawn, nothing claimed
    cfg = rd.read_run()
    assert (cfg.status, cfg.end_reason) == ("finalized", "max_iters_reached") and cfg.end_ts is not None
    assert "status finalized (ended: max_iters_reached" in res.stdout
    shown = run_status(rd)
    assert (shown["status"], shown["end_reason"], shown["next"]) == ("finalized", "max_iters_reached",
                                                                     "nothing: the run is finished")
    before = tree_digest(rd.root)
    again = cli("finalize", "--run-dir", rd.root)  # plot on: still nothing written
    assert again.exit_code == 5 and "already finalized" in again.stderr and "nothing changed" in again.stderr
    assert str(rd.scratchpad) in " ".join(again.stderr.split()) and again.stdout == ""
    assert tree_digest(rd.root) == before


def test_more_seeds_after_finalize_replace_the_final_summary(tmp_path: Path, cli) -> None:
    """compare --seeds 2 on a finalized run reopens it; the next finalize replaces the 1-seed summary
    (no stale provisional recommendation) and keeps what the teacher wrote under it."""
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    assert cli("finalize", "--run-dir", rd.root, "--no-plot").exit_code == 0
    pad = rd.scratchpad.read_text()
    assert "Recommendation (provisional)" in pad
    rd.scratchpad.write_text(pad.replace("_teacher: fill in from the iteration entries above._",
                                         "The teacher's lesson: carry-digit data helped."), encoding="utf-8")
    # What compare --seeds 2 does: record the seeds, reopen (a unit is missing), train the replicates.
    two = make_run(tmp_path / "two", {"iter_0": [0.50], "iter_1": [0.56, 0.57], "run_a": [0.60, 0.61],
                                      "run_b": [0.52], "run_c": [0.51, 0.50]})
    cfg = rd.read_run()
    cfg.seeds = 2
    rd.write_run(cfg)
    _reopen_for(RunContext.load(rd), [("run_a", 1, "run_a_seed1")])
    cfg = rd.read_run()
    assert cfg.end_ts is None and cfg.status == "max_iters_reached" and cfg.end_reason is None
    assert next_step(RunContext.load(rd))[1] == f"selfimprove compare --run-dir {rd.root} --seeds 2"
    for key in ("run_a_seed1", "run_c_seed1", "iter_1_seed1"):
        (rd.root / two.arm(key).dir.name).mkdir()
        os.replace(two.arm(key).eval_summary, rd.arm(key).eval_summary)
        rd.record_arm(two.read_metrics().get(key))
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 0, res.stderr
    pad = rd.scratchpad.read_text()
    assert pad.count("## Final summary") == 1 and "Recommendation (provisional)" not in pad
    assert "mean ± sd" in pad and "The teacher's lesson: carry-digit data helped." in pad


def test_interrupted_seeds_on_a_closed_run_point_at_compare_and_finalize_reopens(tmp_path: Path, cli) -> None:
    """A run closed with 1 seed whose compare --seeds 3 stopped early (run.json seeds 3, no replicate):
    status says compare --seeds 3, not 'finished'; finalize exits 6 and leaves the run open (no end_ts)."""
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    assert cli("finalize", "--run-dir", rd.root, "--no-plot").exit_code == 0
    cfg = rd.read_run()
    cfg.seeds = 3
    rd.write_run(cfg)
    phase, nxt = next_step(RunContext.load(rd))
    assert phase == "compare" and nxt == f"selfimprove compare --run-dir {rd.root} --seeds 3"
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 6 and "--seeds 3" in res.stderr
    cfg = rd.read_run()
    assert cfg.end_ts is None and cfg.total_duration_s is None and cfg.status == "max_iters_reached"


def test_missing_arm_messages_are_bounded(tmp_path: Path, cli) -> None:
    """--seeds 32 with no replicate trained: ~90 missing arms are counted, not listed one per line."""
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    cfg = rd.read_run()
    cfg.seeds = MAX_SEEDS
    rd.write_run(cfg)
    shown = cli("status", "--run-dir", rd.root)
    assert shown.exit_code == 0 and len(shown.stdout.splitlines()) < 30
    assert "more (0 failed" in shown.stdout
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 6 and len(res.stderr) < 1500
    assert len(rd.scratchpad.read_text()) < 10_000


# ---------------------------------------------------------------- the end reason names every gate


def test_end_reason_names_both_gates(run: RunDir) -> None:
    cfg = run.read_run()
    cfg.max_iters, cfg.budget_seconds, cfg.phase3_start_ts = 1, 1, time.time() - 5
    run.write_run(cfg)
    assert iterate(run, quiet=True).kind == "ended"
    reason = run.read_run().reason
    assert "budget of 1 s used" in reason and "max_iters=1 reached" in reason
    assert "## Phase 3 ended: budget_exhausted + max_iters_reached" in run.scratchpad.read_text()


# ---------------------------------------------------------------- no learning signal


def test_status_after_no_signal_stop_is_the_users_choice(run: RunDir, cli) -> None:
    cfg = run.read_run()
    cfg.learning_signal = {"has_signal": False, "verdict": "no signal", "allowed": False}
    run.write_run(cfg)
    s = run_status(run)
    assert s["learning_signal"] == "none" and "iterate" not in s["next"] and "--allow-no-signal" in s["next"]
    text = cli("status", "--run-dir", run.root).stdout
    assert "learning signal: NONE" in text and "next: your choice" in text
    cfg.learning_signal = {**cfg.learning_signal, "allowed": True}
    run.write_run(cfg)
    s = run_status(run)
    assert s["learning_signal"] == "none-allowed" and s["not_a_result"].startswith("NOT A RESULT")
    assert s["next"].startswith("selfimprove iterate")
    assert "NOT A RESULT" in cli("status", "--run-dir", run.root).stdout


def test_iter0_entry_says_not_a_result(run: RunDir) -> None:
    summary = run.read_eval_summary(run.iter(0))
    assert "**NOT A RESULT" in render_iter0(summary, trajectory=[], warning="NOT A RESULT: x")
    assert "NOT A RESULT" not in render_iter0(summary, trajectory=[])


# ---------------------------------------------------------------- --seeds / --parallel bounds


@pytest.mark.parametrize("flag,value", [("--seeds", "100000"), ("--seeds", str(10**30)), ("--parallel", "1000")])
def test_huge_seeds_or_parallel_are_refused_before_anything_is_written(run: RunDir, cli, flag: str, value: str) -> None:
    before = tree_digest(run.root)
    res = cli("compare", "--run-dir", run.root, flag, value)
    assert res.exit_code == 2 and flag in res.stderr
    assert tree_digest(run.root) == before
    with pytest.raises(UsageError, match="between 1 and"):
        compare(run, **{flag[2:]: int(value)})
    assert tree_digest(run.root) == before


def test_huge_seeds_in_run_json_is_named(run: RunDir, cli) -> None:
    data = json.loads(run.run_json.read_text())
    run.run_json.write_text(json.dumps({**data, "seeds": 100000}))
    res = cli("status", "--run-dir", run.root)
    assert res.exit_code == 1 and "field 'seeds'" in res.stderr and len(res.stdout) < 200


# ---------------------------------------------------------------- damaged files


def _edit_metrics(rd: RunDir, edit) -> None:
    data = json.loads(rd.metrics_json.read_text())
    edit(data["iters"])
    rd.metrics_json.write_text(json.dumps(data))


def test_nan_eval_acc_is_refused_naming_the_field(tmp_path: Path, cli) -> None:
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    _edit_metrics(rd, lambda iters: iters[2].update(eval_acc=float("nan")))
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 1 and "metrics.json" in res.stderr and "iters.2.eval_acc" in res.stderr
    assert rd.read_run().end_ts is None


def test_duplicated_row_is_refused_naming_the_arm(tmp_path: Path, cli) -> None:
    rd = phase4_ready(make_run(tmp_path, ARMS_1))
    _edit_metrics(rd, lambda iters: iters.append({**iters[-1], "eval_acc": 0.99}))
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 1 and "arm 'run_c' is recorded twice" in res.stderr
    with pytest.raises(ValueError):
        Metrics(iters=[IterRecord(arm="run_c", eval_acc=0.5, eval_reward_mean=0.5, n_eval=1, acc_ci95=(0, 1))] * 2)


def test_future_phase3_start_is_refused(run: RunDir, cli) -> None:
    data = json.loads(run.run_json.read_text())
    run.run_json.write_text(json.dumps({**data, "phase3_start_ts": time.time() + 2200 * 24 * 3600}))
    res = cli("status", "--run-dir", run.root)
    assert res.exit_code == 1 and "phase3_start_ts" in res.stderr and "in the future" in res.stderr


def test_lock_that_is_a_directory(run: RunDir, cli) -> None:
    run.lock_file.unlink(missing_ok=True)
    run.lock_file.mkdir()
    res = cli("finalize", "--run-dir", run.root, "--no-plot")
    assert res.exit_code == 1 and ".lock" in res.stderr and "rm -r" in res.stderr


def test_symlink_loop_run_dir(tmp_path: Path, cli) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    res = cli("status", "--run-dir", tmp_path / "a")
    assert res.exit_code == 1 and "symlink loop" in res.stderr


def test_deleted_cwd(tmp_path: Path, run: RunDir) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(["/bin/sh", "-c", f"cd {gone} && rmdir {gone} && exec {sys.executable} -m selfimprove "
                           f"status --run-dir {run.root}"], capture_output=True, text=True)
    assert proc.returncode == 1 and "current directory no longer exists" in proc.stderr
    assert "unexpected" not in proc.stderr


# ---------------------------------------------------------------- races and paths


def test_bootstrap_losing_the_name_race(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another bootstrap made the same run dir between the name check and the rename."""
    runs = tmp_path / "runs"
    taken = runs / "taken"

    def the_other_bootstrap_wins(point: str) -> None:
        (taken / "run.json").parent.mkdir(parents=True, exist_ok=True)
        (taken / "run.json").write_text("{}")

    monkeypatch.setattr(bootstrap_mod, "run_dir_name", lambda dataset, now: "taken")
    monkeypatch.setattr(bootstrap_mod, "fault_point", the_other_bootstrap_wins)
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", runs, "--model", "selfimprove/tiny-arith")
    assert res.exit_code == 2 and "already exists; wait a second and retry" in res.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["taken"]  # the staging dir is gone


def test_job_of_a_moved_run_dir_is_explained(run: RunDir, tmp_path: Path) -> None:
    arm = run.iter(1)
    arm.dir.mkdir()
    old = tmp_path / "old-place" / run.root.name / "iter_1" / "prime_out"
    old.mkdir(parents=True)  # the job's output at the old path (no run.json there: moved, not copied)
    rec = JobRecord(pid=1, pgid=1, proc_start=None, cmd=["rl", "--output-dir", str(old)], cwd="/", host="h",
                    start_ts=0.0, log=str(arm.train_log),
                    expect=JobExpectation(num_examples=20, max_steps=4, eval_file=str(arm.eval_file(4))))
    msg = describe_crash(arm, rec)
    assert msg.startswith("iter_1: the run dir was moved while this job ran")
    assert f"move {old} to {arm.prime_out}" in msg and "--restart" in msg


def test_init_from_advice_of_a_closed_run_can_be_followed(run: RunDir, cli, new_run) -> None:
    """iterate on a closed run advises `bootstrap <dataset> --init-from <run dir>`; following it works, and
    so does --init-from <run dir>/iter_0: iter_0 of the new run is the closed run's iter_0."""
    cfg = run.read_run()
    cfg.status, cfg.end_reason, cfg.end_ts = "finalized", "max_iters_reached", time.time()
    run.write_run(cfg)
    res = cli("iterate", "--run-dir", run.root)
    assert res.exit_code == 5
    advice = " ".join(res.stderr.split())
    assert f"selfimprove bootstrap selfimprove-arith --init-from {run.root}" in advice
    prior_acc = run.read_eval_summary(run.iter(0)).eval_acc
    for source in (run.root, run.root / "iter_0"):
        time.sleep(1.1)  # run dirs are named by the second
        new = RunDir(new_run("selfimprove-arith", "--steps-per-run", "4", "--batch-size", "32",
                             "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "20",
                             "--init-from", str(source)))
        assert new.read_run().init_from == str(run.root / "iter_0")
        os.link(run.hub_env_json, new.hub_env_json)  # introspect's output: the same env
        res = cli("baseline", "--run-dir", new.root)
        assert res.exit_code == 0, res.stderr
        s = new.read_eval_summary(new.iter(0))
        assert s.source == "init-from" and s.eval_acc == pytest.approx(prior_acc)
