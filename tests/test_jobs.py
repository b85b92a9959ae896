"""The detached job runner (engines.jobs) against the fake `rl` (tests/fakes/fake_rl.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfimprove.engines import procs
from selfimprove.engines.jobs import (
    JobExpectation,
    JobRecord,
    job_state,
    launch,
    read_job,
    read_result,
    resumable_step,
    run_training,
    watch,
)
from selfimprove.engines.watch import CAP_MARGIN_S, DEFAULT_EXPECTED_S, _cap_deadline, _Pace
from selfimprove.errors import JobFailed
from selfimprove.models import HubEnv, RewardFunc
from selfimprove.rundir import ArmDir, RunDir

FAKE = Path(__file__).parent / "fakes" / "fake_rl.py"
STEPS, N_EVAL = 4, 12
CLI = [sys.executable, "-c", "from selfimprove.cli import main; main()"]


def fake_cmd(out: Path, steps: int = STEPS, n_eval: int = N_EVAL, tmp: Path | None = None) -> list[str]:
    """A full `rl` command line for the fake, with one config file holding the eval env."""
    cfg = (tmp or out.parent) / "fake.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f"[trainer]\n[orchestrator]\n[[orchestrator.eval.env]]\nid = 'x'\nnum_examples = {n_eval}\n")
    return [sys.executable, str(FAKE), "@", str(cfg), "--max-steps", str(steps), "--output-dir", str(out)]


@pytest.fixture
def arm(tmp_path: Path) -> ArmDir:
    return ArmDir(tmp_path, "iter_0")


@pytest.fixture
def launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "launches.log"
    monkeypatch.setenv("FAKE_RL_LAUNCH_LOG", str(log))
    return log


def n_launches(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def expect() -> JobExpectation:
    return JobExpectation(max_steps=STEPS, num_examples=N_EVAL)


def test_launch_and_watch_succeeds(arm: ArmDir, launches: Path) -> None:
    """A job that writes its final eval is 'succeeded' with rc 0, recorded in job.json and job_result.json."""
    rec = launch(arm, fake_cmd(arm.prime_out), expect())
    assert rec.pgid == rec.pid and rec.proc_start is not None
    res = watch(arm, progress=False)
    assert (res.status, res.rc, res.eval_rows, res.timed_out) == ("succeeded", 0, N_EVAL, False)
    assert read_result(arm) == res
    assert job_state(arm) == "finished"
    assert "RL training finished!" in arm.train_log.read_text()


def test_completion_latency_under_5s(arm: ArmDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """watch returns within a generous 5 s of the engine's exit (real figures: bench/latency.py)."""
    stamp = tmp_path / "end"
    monkeypatch.setenv("FAKE_RL_END_STAMP", str(stamp))
    monkeypatch.setenv("FAKE_RL_EXIT_DELAY", "1.0")  # eval complete first, exit later: watch waits for the exit
    launch(arm, fake_cmd(arm.prime_out), expect())
    res = watch(arm, progress=False)
    latency = time.time() - float(stamp.read_text())
    assert res.status == "succeeded" and not res.still_running
    assert latency < 5.0, latency


def test_crash_then_restart(arm: ArmDir, launches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash says what is on disk and offers --restart; --restart moves prime_out aside and relaunches once."""
    monkeypatch.setenv("FAKE_RL_CRASH_AFTER", "2")
    cmd = fake_cmd(arm.prime_out)
    with pytest.raises(JobFailed) as e:
        run_training(arm, cmd, expect(), restart=False, resume=False, quiet=True)
    msg = str(e.value)
    assert "rc 1" in msg and "highest rollouts step 2" in msg and "--restart" in msg
    assert "fake engine crashed after step 2" in msg  # the last lines of train.log
    assert job_state(arm, expect()) == "crashed"
    with pytest.raises(JobFailed, match="--restart"):  # re-invoking without a flag never relaunches
        run_training(arm, cmd, expect(), restart=False, resume=False, quiet=True)
    assert n_launches(launches) == 1
    monkeypatch.delenv("FAKE_RL_CRASH_AFTER")
    res = run_training(arm, cmd, expect(), restart=True, resume=False, quiet=True)
    assert res.status == "succeeded" and n_launches(launches) == 2
    assert len(list(arm.dir.glob("prime_out.failed-*"))) == 1
    assert read_job(arm).launch == 2


def test_crash_then_resume(arm: ArmDir, launches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--resume relaunches with --ckpt.resume-step <last complete checkpoint> in the same prime_out."""
    monkeypatch.setenv("FAKE_RL_CKPT_EVERY", "2")
    monkeypatch.setenv("FAKE_RL_CRASH_AFTER", "3")
    cmd = fake_cmd(arm.prime_out)
    with pytest.raises(JobFailed, match="continue from checkpoint step 2"):
        run_training(arm, cmd, expect(), restart=False, resume=False, quiet=True)
    assert resumable_step(arm, STEPS) == 2
    monkeypatch.delenv("FAKE_RL_CRASH_AFTER")
    res = run_training(arm, cmd, expect(), restart=False, resume=True, quiet=True)
    assert res.status == "succeeded"
    second = launches.read_text().splitlines()[1]
    assert second.endswith("--ckpt.resume-step 2")
    assert read_job(arm).resume_step == 2 and not list(arm.dir.glob("prime_out.failed-*"))


def test_resume_without_checkpoint_refused(arm: ArmDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """--resume with no checkpoint below max_steps says so and points at --restart."""
    monkeypatch.setenv("FAKE_RL_CRASH_AFTER", "1")
    with pytest.raises(JobFailed, match="--resume is not possible"):
        run_training(arm, fake_cmd(arm.prime_out), expect(), restart=False, resume=False, quiet=True)
    with pytest.raises(JobFailed, match="cannot --resume.*--restart"):
        run_training(arm, fake_cmd(arm.prime_out), expect(), restart=False, resume=True, quiet=True)


def test_cap_times_out_and_stops_the_job(arm: ArmDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that hangs past its cap is stopped (whole process group) and reported timed out."""
    monkeypatch.setenv("FAKE_RL_HANG", "1")
    exp = JobExpectation(max_steps=STEPS, num_examples=N_EVAL, cap_hours=1.5 / 3600)
    t0 = time.monotonic()
    with pytest.raises(JobFailed, match="time cap"):
        run_training(arm, fake_cmd(arm.prime_out), exp, restart=False, resume=False, quiet=True)
    assert time.monotonic() - t0 < 15
    res = read_result(arm)
    assert res.status == "timed_out" and res.timed_out
    rec = read_job(arm)
    assert not procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token)
    assert job_state(arm) == "crashed"


def test_job_that_dies_at_once_shows_log_tail(arm: ArmDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that exits immediately is detected fast and its last log lines are in the error."""
    monkeypatch.setenv("FAKE_RL_DIE_AT_ONCE", "1")
    t0 = time.monotonic()
    with pytest.raises(JobFailed) as e:
        run_training(arm, fake_cmd(arm.prime_out), expect(), restart=False, resume=False, quiet=True)
    assert time.monotonic() - t0 < 5
    assert "fake engine died at once" in str(e.value) and "highest checkpoint step none" in str(e.value)


def test_running_job_is_attached_not_relaunched(arm: ArmDir, launches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the job lives, run_training attaches (even with --restart) and launches nothing."""
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.3")
    cmd = fake_cmd(arm.prime_out)
    rec = launch(arm, cmd, expect())
    assert job_state(arm) == "running"
    res = run_training(arm, cmd, expect(), restart=True, resume=False, quiet=True)
    assert res.status == "succeeded" and res.pid == rec.pid
    assert n_launches(launches) == 1 and read_job(arm).launch == 1


def test_zombie_and_recycled_pid_are_not_alive(tmp_path: Path) -> None:
    """An exited-but-unreaped child (zombie) and a pid with another start time both count as dead."""
    child = subprocess.Popen(["true"], start_new_session=True)
    deadline = time.monotonic() + 5
    while procs._stat(child.pid)[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert procs._stat(child.pid)[0] == "Z"
    tok = procs.new_token()
    assert not procs.alive(child.pid, child.pid, None, tok)
    child.wait()
    live = subprocess.Popen(["sleep", "30"], start_new_session=True, env=procs.token_env(tok))
    try:
        start = procs.start_time(live.pid)
        assert procs.alive(live.pid, live.pid, start, tok)
        assert not procs.alive(live.pid, live.pid, start + 1, tok)  # same number, different process
        assert not procs.alive(live.pid, live.pid, start, procs.new_token())  # another job's token
        assert not procs.alive(live.pid, live.pid, None, tok)  # no start time recorded: proves nothing
    finally:
        live.kill()
        live.wait()


def test_a_job_checked_the_moment_it_was_launched_is_ours() -> None:
    """Popen returns before the kernel has placed the child's new environment, so /proc/<pid>/environ can
    read empty for a moment (~1 launch in 100 here): identify must not call that job foreign."""
    for _ in range(3000):
        tok = procs.new_token()
        child = subprocess.Popen(["sleep", "5"], start_new_session=True, env=procs.token_env(tok))
        try:
            # the token check first, at once: that is where the empty read happens (~1% of launches)
            assert procs._has_token(child.pid, tok)
            assert procs.alive(child.pid, child.pid, procs.start_time(child.pid), tok)
        finally:
            child.kill()
            child.wait()


def _write_hub(run: Path, n_eval: int) -> None:
    RunDir(run).write_hub_env(HubEnv(
        env_id="selfimprove-arith", module="selfimprove_arith", source="local", env_class="SingleTurnEnv",
        parser_class="XMLParser", rubric_class="Rubric", rubric_funcs=[RewardFunc(name="correct_answer", weight=1.0)],
        system_prompt="Answer in <answer> tags.", answer_format_instruction=None, train_size=1000, eval_size=n_eval,
    ))


def test_kill_cli_then_reinvoke_attaches(new_run, launches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 of the `baseline` CLI leaves the job running; re-invoking attaches to the same pid and completes."""
    run = new_run("selfimprove-arith", "--steps-per-run", "6", "--batch-size", "32", "--rollouts-per-example", "4",
                  "--allow-small-batch", "--eval-examples", "20")
    _write_hub(run, 200)
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.4")
    arm = RunDir(run).iter(0)
    first = subprocess.Popen([*CLI, "baseline", "--run-dir", str(run), "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 300  # generous: on busy cores the CLI's imports alone can take a minute
    while not arm.job_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    rec = read_job(arm)
    assert rec is not None, f"baseline wrote no {arm.job_file} within 300 s"
    first.send_signal(signal.SIGKILL)
    first.communicate()
    assert procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token), "the job must outlive its CLI"
    second = subprocess.run([*CLI, "baseline", "--run-dir", str(run), "--json"], capture_output=True, text=True,
                            env=os.environ.copy(), timeout=60)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["n_eval"] == 20
    assert read_job(arm).pid == rec.pid and read_job(arm).launch == 1
    assert read_result(arm).rc == 0  # learnt from job.rc: the attaching CLI is not the job's parent
    assert n_launches(launches) == 1
    assert arm.train_log.read_text().count("[selfimprove]") == 1


def test_cap_projection_from_observed_pace() -> None:
    """Without an explicit cap: expected end projected from the steps this watcher saw, + 2 h."""
    rec = JobRecord(pid=1, pgid=1, proc_start=None, cmd=["rl"], cwd="/", host="h", start_ts=1000.0, log="l",
                    expect=JobExpectation(max_steps=200, num_examples=1))
    pace = _Pace()
    assert _cap_deadline(rec, None, pace) == 1000.0 + DEFAULT_EXPECTED_S + CAP_MARGIN_S
    pace.first, pace.last = (101, 2000.0), (111, 2600.0)  # a resumed run at 60 s per step
    assert _cap_deadline(rec, None, pace) == 2600.0 + 89 * 60 + CAP_MARGIN_S
    assert _cap_deadline(rec, 30.0, pace) == 1030.0  # an explicit cap wins


def test_a_forked_arms_progress_counts_its_own_steps(arm: ArmDir, capfd: pytest.CaptureFixture) -> None:
    """iter_N forks iter_0 at step 50 and trains to prime-rl's step 100: its progress says "step 0/50" and
    names the fork point, never prime-rl's global "50/100" (which reads as half done) nor "0/100"; a
    relaunch resumed at step 70 starts at 20/50."""
    from types import SimpleNamespace

    from selfimprove.engines.watch import _progress_bar

    rec = SimpleNamespace(expect=JobExpectation(max_steps=100, start_step=50, num_examples=1))
    with _progress_bar(True, arm, rec) as (bar, task):
        assert bar is not None
    out = "".join(capfd.readouterr())
    assert f"{arm.name} (from step 50): step 0/50" in out and "/100" not in out, out
    rec.resume_step = 70
    with _progress_bar(True, arm, rec):
        pass
    assert "(from step 50): step 20/50" in "".join(capfd.readouterr())
