"""A copied run dir is not a moved one (issue 36). The copy's job.json names the original's job: while the
original still exists (and its job may still train), the advice never moves files out of it; the copy's own
--restart trains the arm in the copy and leaves the original and its job alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfimprove.engines import procs
from selfimprove.engines.jobs import JobExpectation, JobRecord, describe_crash, run_training, write_job
from selfimprove.errors import JobFailed
from selfimprove.rundir import RunDir


TOKEN = procs.new_token()  # the original's job carries it; the copied job.json records it


@pytest.fixture
def live_job():
    """A detached process standing in for the original run's training job."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                            env=procs.token_env(TOKEN))
    yield proc
    proc.kill()
    proc.wait()


def foreign_job(arm, old_out: Path, proc, expect: JobExpectation) -> JobRecord:
    rec = JobRecord(pid=proc.pid, pgid=proc.pid, proc_start=procs.start_time(proc.pid), token=TOKEN,
                    cmd=["rl", "--output-dir", str(old_out)], cwd=str(old_out.parent.parent), host=os.uname().nodename,
                    start_ts=time.time(), log=str(arm.train_log), expect=expect.for_arm(arm))
    write_job(arm, rec)
    return rec


def test_a_copy_while_the_originals_job_trains_is_told_apart_and_restart_works(tmp_path: Path, live_job) -> None:
    orig = RunDir(tmp_path / "orig")
    copy = RunDir(tmp_path / "copy")
    for rd in (orig, copy):
        (rd.root / "iter_1" / "prime_out").mkdir(parents=True)
        (rd.root / "run.json").write_text("{}")
    (orig.root / "iter_1" / "prime_out" / "partial.txt").write_text("the original's output\n")
    arm = copy.iter(1)
    expect = JobExpectation(max_steps=4, num_examples=3)
    rec = foreign_job(arm, orig.iter(1).prime_out, live_job, expect)
    msg = describe_crash(arm, rec)
    assert f"this run dir is a copy of {orig.root}" in msg and "still training" in msg, msg
    assert "--restart" in msg and f"--run-dir {orig.root}" in msg
    assert "was moved" not in msg and f"move {orig.iter(1).prime_out}" not in msg
    # without flags the copy refuses: it neither attaches to nor waits on the original's job
    with pytest.raises(JobFailed, match="is a copy of"):
        run_training(arm, ["true"], expect, restart=False, resume=False, quiet=True)
    # the advice: --restart in the copy trains there; the original's job and files are untouched
    eval_file = arm.eval_file(4)
    write_rows = (f"import os; os.makedirs({str(eval_file.parent)!r}, exist_ok=True); "
                  f"open({str(eval_file)!r}, 'w').write('{{}}\\n' * 3)")
    res = run_training(arm, [sys.executable, "-c", write_rows], expect, restart=True, resume=False, quiet=True,
                       poll_s=0.05)
    assert res.status == "succeeded"
    assert live_job.poll() is None  # still training
    assert (orig.iter(1).prime_out / "partial.txt").read_text() == "the original's output\n"


def test_a_moved_run_dir_keeps_the_move_advice(tmp_path: Path) -> None:
    """The original path holds only the job's output (no run.json): the run dir was moved."""
    moved = RunDir(tmp_path / "new")
    (moved.root / "iter_1").mkdir(parents=True)
    old_out = tmp_path / "old" / "iter_1" / "prime_out"
    old_out.mkdir(parents=True)
    arm = moved.iter(1)
    rec = JobRecord(pid=2**22 + 7, pgid=2**22 + 7, proc_start=None, cmd=["rl", "--output-dir", str(old_out)],
                    cwd="/", host=os.uname().nodename, start_ts=0.0, log=str(arm.train_log),
                    expect=JobExpectation(max_steps=4, num_examples=3).for_arm(arm))
    msg = describe_crash(arm, rec)
    assert "was moved" in msg and f"move {old_out} to {arm.prime_out}" in msg and "copy" not in msg
