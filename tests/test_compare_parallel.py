"""compare --parallel N: control arms train at the same time (fake engine), with the same records as one
after another; a failure or an interrupt in one arm's thread stops the other watchers promptly."""

from __future__ import annotations

import threading
import time

import pytest

from selfimprove.engines import jobs
from selfimprove.engines import watch as watch_mod
from selfimprove.models import RunConfig
from selfimprove.phases import compare as compare_mod
from selfimprove.phases.compare import compare, default_parallel
from selfimprove.rundir import RunDir

from test_compare import finish_phase3

NUMERIC = ("eval_acc", "eval_reward_mean", "n_eval", "acc_ci95", "train_reward_mean", "rows", "final_step", "seed")


def spans(rd: RunDir, keys: list[str]) -> dict[str, tuple[float, float]]:
    """(launch time, finish time) of each arm's job, from its job.json and job_result.json."""
    out = {}
    for key in keys:
        arm = rd.arm(key)
        out[key] = (jobs.read_job(arm).start_ts, jobs.read_result(arm).finished_ts)
    return out


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_two_arms_train_at_once_and_record_what_one_at_a_time_records(run: RunDir, tmp_path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    finish_phase3(run)
    serial = RunDir(tmp_path / "serial")
    shutil.copytree(run.root, serial.root, symlinks=True)
    # 4 steps: each arm's job lives >= 20 s, longer than packaging the next arm (a pip install) takes; at 10 s
    # a loaded host packaged run_c after run_a had ended, and no two arms overlapped
    monkeypatch.setenv("FAKE_RL_STEP_S", "5")
    keys = ["run_a", "run_b", "run_c"]

    par = compare(run, quiet=True, parallel=2)
    assert par["errors"] == {} and par["parallel"] == 2 and list(par["arms"]) == keys
    s = spans(run, keys)
    # Two arms train at once at some point (which two depends on how long packaging the next arm takes: a pip
    # install, slower on a loaded host), never three.
    pairs = [("run_a", "run_b"), ("run_a", "run_c"), ("run_b", "run_c")]
    assert any(overlaps(s[x], s[y]) for x, y in pairs), s
    assert not overlaps(s["run_a"], s["run_c"]) or not overlaps(s["run_b"], s["run_c"]), s  # never 3 at once

    monkeypatch.setenv("FAKE_RL_STEP_S", "0.25")
    one = compare(serial, quiet=True, parallel=1)
    t = spans(serial, keys)
    assert not overlaps(t["run_a"], t["run_b"]) and not overlaps(t["run_b"], t["run_c"]), t
    # Same figures either way; metrics.json holds each arm once, phase4_errors stays empty.
    for key in keys:
        assert {f: par["arms"][key][f] for f in NUMERIC} == {f: one["arms"][key][f] for f in NUMERIC}, key
    arms = [r.arm for r in run.read_metrics().iters]
    assert arms[-3:] == keys and len(arms) == len(set(arms))  # run order, whichever finished first; each once
    assert run.read_run().phase4_errors == []


def test_a_failing_arm_in_parallel_is_logged_and_the_others_finish(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    finish_phase3(run)
    real = compare_mod.run_arm

    def run_b_fails(rd, arm_key, *args, **kwargs):
        if arm_key == "run_b":
            time.sleep(0.5)  # while run_a trains
            raise compare_mod.SelfImproveError("engine exploded in run_b\nsecond line")
        return real(rd, arm_key, *args, **kwargs)

    monkeypatch.setattr(compare_mod, "run_arm", run_b_fails)
    result = compare(run, quiet=True, parallel=3)
    assert set(result["arms"]) == {"run_a", "run_c"} and result["errors"] == {"run_b": "engine exploded in run_b"}
    assert [e.arm for e in run.read_run().phase4_errors] == ["run_b"]


def test_a_bug_in_one_thread_stops_the_other_watchers() -> None:
    """An unexpected exception (or Ctrl-C) in one unit: the group's stop flag makes the other watchers
    raise KeyboardInterrupt (as Ctrl-C does for one watcher), so compare returns at once instead of
    waiting for every job; the bug is what the caller sees."""
    stopped = threading.Event()

    def train(unit: str) -> str | None:
        if unit == "bad":
            time.sleep(0.2)
            raise RuntimeError("bug in bad")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # what watch does each poll
            if watch_mod._GROUP is not None and watch_mod._GROUP.stopped:
                stopped.set()
                raise KeyboardInterrupt
            time.sleep(0.02)
        return None

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="bug in bad"):
        compare_mod._train_units(["slow", "bad"], train, parallel=2, progress=False)
    assert stopped.is_set() and time.monotonic() - t0 < 10
    assert watch_mod._GROUP is None  # the scope is closed


def test_watch_stops_on_the_group_flag_and_leaves_the_job_running(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_jobs import expect, fake_cmd

    from selfimprove.engines import procs
    from selfimprove.rundir import ArmDir

    monkeypatch.setenv("FAKE_RL_STEP_S", "0.5")
    arm = ArmDir(tmp_path, "run_a_best_from_iter0")
    with jobs.watch_together(progress=True) as group:
        rec = jobs.launch(arm, fake_cmd(arm.prime_out), expect())
        threading.Timer(0.5, group.stop).start()
        with pytest.raises(KeyboardInterrupt):
            jobs.watch(arm, progress=True)
    assert procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token)  # detached: re-running compare attaches to it
    assert jobs.watch(arm, progress=False).status == "succeeded"


def test_default_parallel_is_two_on_the_cpu_engine_and_one_on_prime_rl() -> None:
    assert default_parallel(RunConfig.model_construct(engine="local")) == 2
    assert default_parallel(RunConfig.model_construct(engine="prime-rl")) == 1


def test_parallel_below_one_is_a_usage_error(run: RunDir, cli) -> None:
    finish_phase3(run)
    res = cli("compare", "--run-dir", str(run.root), "--parallel", "0")
    assert res.exit_code != 0 and "--parallel" in res.stderr


def test_metrics_json_lists_the_arms_in_run_order_whichever_finished_first(run: RunDir,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    finish_phase3(run)
    real = compare_mod.run_arm
    finished: list[str] = []

    def run_a_late(rd, arm_key, *args, **kwargs):
        if arm_key == "run_a":
            time.sleep(3)  # Run B (started beside it) finishes first
        out = real(rd, arm_key, *args, **kwargs)
        finished.append(arm_key)
        return out

    monkeypatch.setattr(compare_mod, "run_arm", run_a_late)
    compare(run, quiet=True, parallel=2)
    assert finished.index("run_b") < finished.index("run_a")  # the case this test is about
    assert [r.arm for r in run.read_metrics().iters][-3:] == ["run_a", "run_b", "run_c"]
