"""Job records are untrusted input (issue 41, items 3, 10, 11; issue 43 item 3): a forged or copied job.json
or an unreachable scheduler never makes the tool signal, attach to or scancel what is not provably this run's,
nor call a live job ended. The scheduler here is a fake (slurm._run answers as squeue/scontrol/scancel do);
tests/test_slurm.py repeats the outage and the copy's cancel on the one-node cluster."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfimprove.engines import job_record, procs, slurm, slurm_jobs, watch
from selfimprove.engines.job_record import JobExpectation, JobRecord, tail, write_job
from selfimprove.engines.jobs import launch, run_training
from selfimprove.errors import JobFailed, JobLive
from selfimprove.phases.cancel import cancel, live_jobs
from selfimprove.phases.slurm_launch import place_tag
from selfimprove.rundir import RunDir

CONTROLLER_DOWN = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


class FakeScheduler:
    """slurm._run's stand-in: one job table (id -> (state, name)), `down` for an outage; records every argv."""

    def __init__(self) -> None:
        self.jobs: dict[str, tuple[str, str]] = {}
        self.down = False
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess:
        self.calls.append(argv)
        if self.down:
            return subprocess.CompletedProcess(argv, 1, "", CONTROLLER_DOWN)
        tool = argv[0]
        if tool == "scancel":
            job_id, name = argv[-1], argv[1].split("=", 1)[1]
            if job_id in self.jobs and self.jobs[job_id][1] == name:
                self.jobs[job_id] = ("CANCELLED", name)
            return subprocess.CompletedProcess(argv, 0, "", "")
        if tool == "squeue" and "-n" in argv:
            name = argv[argv.index("-n") + 1]
            out = "".join(f"{i}|{n}|{s}\n" for i, (s, n) in self.jobs.items() if n == name)
            return subprocess.CompletedProcess(argv, 0, out, "")
        job_id = argv[argv.index("-j") + 1] if tool == "squeue" else argv[-1]
        if job_id not in self.jobs:
            return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")
        state, name = self.jobs[job_id]
        if tool == "squeue":
            return subprocess.CompletedProcess(argv, 0, f"{job_id}|{state}|None|{name}\n", "")
        if tool == "scontrol":
            return subprocess.CompletedProcess(
                argv, 0, f"JobId={job_id} JobName={name} JobState={state} Reason=None ExitCode=0:0 Restarts=0\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "accounting storage is disabled")  # sacct

    @property
    def cancels(self) -> list[list[str]]:
        return [a for a in self.calls if a[0] == "scancel"]


@pytest.fixture
def sched(monkeypatch) -> FakeScheduler:
    fake = FakeScheduler()
    monkeypatch.setattr(slurm, "_run", fake)
    monkeypatch.setattr(slurm_jobs, "POLL_S", 0.05)
    return fake


def own_name(rd: RunDir, arm: str = "iter_0") -> str:
    cfg = rd.read_run()
    return slurm.job_name(cfg.run_id or cfg.dataset, arm, place_tag(rd, cfg))


def slurm_record(rd: RunDir, job_id: str, name: str, arm: str = "iter_0") -> None:
    a = rd.arm(arm) if arm != "iter_0" else rd.iter(0)
    a.dir.mkdir(parents=True, exist_ok=True)
    write_job(a, JobRecord(pid=0, pgid=0, proc_start=None, cmd=[], cwd=str(rd.root), host=socket.gethostname(),
                           start_ts=time.time(), log=str(a.train_log), scheduler="slurm", job_id=job_id, job_name=name,
                           expect=JobExpectation(max_steps=2, num_examples=3).for_arm(a)))


# ---------------------------------------------------------------- the scheduler's answers


def test_an_outage_is_not_a_purged_job(sched: FakeScheduler) -> None:
    sched.down = True
    info = slurm.query("42")
    assert info is not None and info.state == slurm.UNREACHABLE and info.live and not info.reachable
    assert slurm.live_jobs_named("si-x-iter_0") is None  # never "no such job"
    sched.down = False
    assert slurm.query("42") is None  # the controller answered: it does not know the job (purged)
    assert slurm.live_jobs_named("si-x-iter_0") == []


def test_scancel_gets_the_run_s_name_and_a_numeric_id_after_double_dash(sched: FakeScheduler) -> None:
    sched.jobs["42"] = ("RUNNING", "si-r-iter_0")
    slurm.cancel("42", "si-r-iter_0")
    assert sched.cancels == [["scancel", "--name=si-r-iter_0", "--", "42"]]
    for bad in ("--user=alice", "42 43", "-1", ""):
        with pytest.raises(JobFailed, match="not a SLURM job id"):
            slurm.cancel(bad, "si-r-iter_0")
    assert len(sched.cancels) == 1


# ---------------------------------------------------------------- cancel and status


def test_a_forged_job_id_is_refused_at_the_read_and_cancel_names_the_file(new_run, cli, sched) -> None:
    rd = RunDir(new_run())
    slurm_record(rd, "42", own_name(rd))
    data = json.loads(rd.iter(0).job_file.read_text())
    rd.iter(0).job_file.write_text(json.dumps({**data, "job_id": "--user=alice"}))
    res = cli("cancel", "--run-dir", rd.root)
    assert res.exit_code == 1, res.stdout
    line = " ".join(res.stderr.split())
    assert line.startswith("error:") and str(rd.iter(0).job_file) in line and "job_id" in line and "restore" in line, line
    assert not (rd.root / "errors.log").exists()
    assert sched.cancels == []


def test_cancel_on_a_copy_cancels_nothing_of_the_original(new_run, cli, sched, tmp_path) -> None:
    import shutil

    orig = RunDir(new_run())
    sched.jobs["42"] = ("RUNNING", own_name(orig))
    slurm_record(orig, "42", own_name(orig))
    copy = RunDir(tmp_path / "copy")
    shutil.copytree(orig.root, copy.root)
    res = cli("cancel", "--run-dir", copy.root)
    assert res.exit_code == 0 and "not this run dir's" in res.stdout and "no live job" in res.stdout, res.stdout
    assert sched.cancels == [] and sched.jobs["42"][0] == "RUNNING"
    assert live_jobs(copy)["jobs"] == [] and "not this run dir's" in live_jobs(copy)["notes"][0]
    # the copy's watcher and run_training do not attach to it either: one line, then --restart trains here
    with pytest.raises(JobFailed, match="not this run dir's"):
        run_training(copy.iter(0), ["true"], JobExpectation(max_steps=2, num_examples=3), restart=False,
                     resume=False, quiet=True, job_name=own_name(copy))
    res = cli("cancel", "--run-dir", orig.root)  # the original's own cancel still works
    assert res.exit_code == 0 and sched.cancels == [["scancel", f"--name={own_name(orig)}", "--", "42"]], res.stdout


def test_an_id_the_scheduler_gives_another_name_is_left_alone(new_run, cli, sched) -> None:
    rd = RunDir(new_run())
    sched.jobs["424242"] = ("RUNNING", "someone-elses-job")
    slurm_record(rd, "424242", own_name(rd))
    res = cli("cancel", "--run-dir", rd.root)
    assert res.exit_code == 0 and "which the scheduler calls someone-elses-job" in res.stdout, res.stdout
    assert sched.cancels == []
    assert slurm_jobs.ask(job_record.read_job(rd.iter(0))) is None  # the watcher reads it as its job gone


def test_cancel_during_an_outage_refuses_nothing_to_cancel(new_run, cli, sched) -> None:
    rd = RunDir(new_run())
    sched.jobs["42"] = ("PENDING", own_name(rd))
    slurm_record(rd, "42", own_name(rd))
    sched.down = True
    res = cli("cancel", "--run-dir", rd.root)
    assert res.exit_code == 75 and "cannot reach the SLURM scheduler" in res.stderr, (res.stdout, res.stderr)
    assert "no live job" not in res.stdout and sched.cancels == []
    advice = res.stderr.split("re-run `", 1)[1].split("`", 1)[0]
    assert advice == f"selfimprove cancel --run-dir {rd.root}"
    sched.down = False  # the advice, followed once squeue answers
    res = cli(*advice.split()[1:])
    assert res.exit_code == 0 and res.stdout.strip() == "iter_0: scancel 42 (was PENDING)", res.stdout


def test_status_and_cancel_see_and_stop_a_detached_local_job(new_run, cli) -> None:
    rd = RunDir(new_run())
    arm = rd.iter(0)
    rec = launch(arm, ["sleep", "60"], JobExpectation(max_steps=4, num_examples=3))
    res = cli("status", "--run-dir", rd.root)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("live job iter_0"))
    assert f"pid {rec.pid}" in line and "step -/4" in line and str(arm.train_log) in line, line
    advice = line.split("(stop it: ", 1)[1].rstrip(")")
    res = cli(*advice.split()[1:])  # the advice, followed
    assert res.exit_code == 0 and res.stdout.strip() == f"iter_0: stopped pid {rec.pid} and its process group (was RUNNING)"
    assert not procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token)
    assert "cancelled job(s) iter_0 (pid" in rd.scratchpad.read_text()
    assert live_jobs(rd)["jobs"] == []


def test_cancel_never_appends_to_a_closed_run(new_run, cli) -> None:
    from selfimprove.rundir import write_model

    rd = RunDir(new_run())
    rec = launch(rd.iter(0), ["sleep", "60"], JobExpectation(max_steps=4, num_examples=3))
    cfg = rd.read_run()
    write_model(rd.run_json, cfg.model_copy(update={"status": "aborted", "end_ts": time.time(), "reason": "test"}))
    before = rd.scratchpad.read_text()
    res = cli("cancel", "--run-dir", rd.root)
    assert res.exit_code == 0 and f"stopped pid {rec.pid}" in res.stdout
    assert rd.scratchpad.read_text() == before


# ---------------------------------------------------------------- forged local records


def test_a_forged_job_json_naming_another_process_is_never_attached_to_or_killed(tmp_path: Path) -> None:
    """pid, pgid and start time copied from /proc (world-readable), cap_hours 0.001: once `iterate` attached to
    such a process and killed it at the cap. Without the job's token it is not this arm's job."""
    from selfimprove.rundir import ArmDir

    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        arm = ArmDir(tmp_path, "iter_1")
        arm.dir.mkdir()
        expect = JobExpectation(max_steps=2, num_examples=3, cap_hours=0.001)
        for token in (None, procs.new_token()):
            write_job(arm, JobRecord(pid=victim.pid, pgid=victim.pid, proc_start=procs.start_time(victim.pid),
                                     token=token, cmd=["rl"], cwd=str(tmp_path), host=socket.gethostname(),
                                     start_ts=time.time() - 3600, log=str(arm.train_log), expect=expect.for_arm(arm)))
            with pytest.raises(JobFailed, match=f"names pid {victim.pid}, which runs but is not this arm's job"):
                run_training(arm, ["true"], expect, restart=False, resume=False, quiet=True)
            assert victim.poll() is None
        eval_file = arm.eval_file(2)
        rows = (f"import os; os.makedirs({str(eval_file.parent)!r}, exist_ok=True); "
                f"open({str(eval_file)!r}, 'w').write('{{}}\\n' * 3)")
        res = run_training(arm, [sys.executable, "-c", rows], expect, restart=True, resume=False, quiet=True,
                           poll_s=0.05)  # the advice (--restart): trains here, the other process untouched
        assert res.status == "succeeded" and victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


# ---------------------------------------------------------------- the watcher's lines


def _slurm_arm(tmp_path: Path):
    from selfimprove.rundir import ArmDir

    arm = ArmDir(tmp_path, "iter_0")
    arm.dir.mkdir(parents=True)
    expect = JobExpectation(max_steps=2, num_examples=3).for_arm(arm)
    write_job(arm, JobRecord(pid=0, pgid=0, proc_start=None, cmd=["rl"], cwd=str(tmp_path), host="h",
                             start_ts=time.time(), log=str(arm.train_log), expect=expect, scheduler="slurm",
                             job_id="42", job_name="si-x-iter_0", job_log=str(arm.prime_out / "job_42.log")))
    return arm, expect


def test_the_watcher_waits_out_an_outage_with_one_line(tmp_path, sched, monkeypatch, capfd) -> None:
    import threading

    arm, expect = _slurm_arm(tmp_path)
    sched.jobs["42"] = ("RUNNING", "si-x-iter_0")
    monkeypatch.setenv("SELFIMPROVE_SLURM_QUERY_S", "0.5")

    def story():
        time.sleep(0.8)
        sched.down = True  # the outage: the job ends and writes its eval meanwhile
        time.sleep(1.5)
        Path(expect.eval_file).parent.mkdir(parents=True, exist_ok=True)
        Path(expect.eval_file).write_text("{}\n" * 3)
        sched.jobs["42"] = ("COMPLETED", "si-x-iter_0")
        time.sleep(1.5)
        sched.down = False

    threading.Thread(target=story, daemon=True).start()
    res = watch.watch(arm, progress=False, poll_s=0.05)
    out = "".join(capfd.readouterr())
    assert res.status == "succeeded", res
    assert out.count("cannot reach the scheduler") == 1 and "no longer known" not in out, out
    assert "COMPLETED; final eval complete" in out, out


def test_the_timeout_line_keeps_slurm_and_an_empty_job_log_is_named(tmp_path, sched, capfd) -> None:
    arm, _expect = _slurm_arm(tmp_path)
    sched.jobs["42"] = ("TIMEOUT", "si-x-iter_0")
    arm.prime_out.mkdir(parents=True)
    (arm.prime_out / "job_42.log").write_text("")
    res = watch.watch(arm, progress=False, poll_s=0.05)
    out = "".join(capfd.readouterr())
    assert res.status == "failed" and "[slurm] time limit" in out, out
    assert "(job_42.log is empty)" in res.error and "train.log" not in res.error.split("Last lines")[1]
    assert tail(arm.prime_out / "job_42.log") == "  | (job_42.log is empty)"


def test_inside_run_dataset_the_lines_name_run_with_its_run_dir(tmp_path) -> None:
    from selfimprove.engines.job_state import resume_options
    from selfimprove.rundir import ArmDir

    arm = ArmDir(tmp_path, "iter_0")
    assert resume_options(arm, 4).startswith("re-run with --restart")
    job_record.set_rerun(f"selfimprove run --run-dir {tmp_path}")
    try:
        assert resume_options(arm, 4).startswith(f"re-run `selfimprove run --run-dir {tmp_path}` with --restart")
        line = slurm_jobs.state_line(arm, type("R", (), {"job_id": "7", "job_log": "l"})(),
                                     slurm.JobInfo("7", "CANCELLED", None, None, "0:0", "sacct"))
        assert f"re-run `selfimprove run --run-dir {tmp_path}` with --resume" in line, line
    finally:
        job_record.set_rerun(None)


def test_run_takes_the_recovery_flags_only_with_a_run_dir(cli, new_run, monkeypatch) -> None:
    """`run --run-dir R --restart` hands --restart to the phase where the run stands (here: baseline)."""
    from selfimprove.phases import run as run_phase

    res = cli("run", "selfimprove-arith", "--restart")
    assert res.exit_code == 2 and "give its --run-dir" in res.stderr
    seen = {}

    class Stop(Exception):
        pass

    def baseline(rd, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(run_phase, "run_baseline", baseline)
    monkeypatch.setattr(run_phase, "introspect", lambda rd, **kw: None)
    rd = RunDir(new_run())
    with pytest.raises(Stop):
        run_phase.run_loop(rd, lambda ctx: None, restart=True)
    assert seen.get("restart") is True and not seen.get("resume")


def test_token_env_is_what_a_launched_job_carries(tmp_path) -> None:
    from selfimprove.rundir import ArmDir

    arm = ArmDir(tmp_path, "iter_0")
    rec = launch(arm, ["sleep", "30"], JobExpectation(max_steps=2, num_examples=3))
    try:
        assert rec.token and procs.identify(rec.pid, rec.pgid, rec.proc_start, rec.token) == "ours"
        env = Path(f"/proc/{rec.pid}/environ").read_bytes().split(b"\0")
        assert f"{procs.TOKEN_ENV}={rec.token}".encode() in env
    finally:
        os.killpg(rec.pgid, 9)


def test_a_watcher_whose_run_dir_is_moved_stops_without_re_creating_the_old_path(tmp_path) -> None:
    """issue 41 (Why 11): every write of the tool creates its parent dirs, so a watcher that wrote on after a
    move re-created the old path. It stops watching instead, naming the fix; the job is left running."""
    import threading

    from selfimprove.rundir import ArmDir

    old, new = tmp_path / "run", tmp_path / "moved"
    arm = ArmDir(old, "iter_0")
    rec = launch(arm, ["sleep", "60"], JobExpectation(max_steps=2, num_examples=3))
    try:
        threading.Timer(0.5, lambda: old.rename(new)).start()
        with pytest.raises(JobFailed, match="gone while this command watched it .*--run-dir at the run dir's new place"):
            watch.watch(arm, progress=False, poll_s=0.05)
        assert not old.exists() and procs.alive(rec.pid, rec.pgid, rec.proc_start, rec.token)
    finally:
        os.killpg(rec.pgid, 9)


def test_a_copy_follows_its_advice_restart_and_trains_under_its_own_name(new_run, sched, tmp_path) -> None:
    """The copy's line says "train this arm here with --restart": followed, the copy submits its own job (its
    own name) and the original's job is neither cancelled nor watched."""
    import shutil

    orig = RunDir(new_run())
    sched.jobs["42"] = ("RUNNING", own_name(orig))
    slurm_record(orig, "42", own_name(orig))
    copy = RunDir(tmp_path / "copy")
    shutil.copytree(orig.root, copy.root)
    arm, name = copy.iter(0), own_name(copy)
    assert name != own_name(orig)
    expect = JobExpectation(max_steps=2, num_examples=3)
    eval_file = expect.for_arm(arm).eval_file
    sched.jobs["77"] = ("COMPLETED", name)
    launcher = (f"import os; os.makedirs({str(Path(eval_file).parent)!r}, exist_ok=True); "
                f"open({eval_file!r}, 'w').write('{{}}\\n' * 3); print('Submitted batch job 77')")
    res = run_training(arm, [sys.executable, "-c", launcher], expect, restart=True, resume=False, quiet=True,
                       job_name=name, poll_s=0.05)
    assert res.status == "succeeded" and job_record.read_job(arm).job_id == "77"
    assert sched.cancels == [] and sched.jobs["42"][0] == "RUNNING"


def test_ctrl_c_of_run_dataset_names_run_with_its_run_dir(cli, new_run, monkeypatch) -> None:
    """`run DATASET ...` interrupted: the same command would bootstrap a new run dir, so the line names
    `selfimprove run --run-dir R`; the hint is reset after the line."""
    from selfimprove.phases import run as run_phase

    made = RunDir(new_run())

    def interrupted(rd, *a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_phase, "bootstrap", lambda opts: made)
    monkeypatch.setattr(run_phase, "run_loop", interrupted)
    res = cli("run", "selfimprove-arith", "--model", "selfimprove/tiny-arith")
    assert res.exit_code == 130
    assert f"interrupted; re-run `selfimprove run --run-dir {made.root}` to resume" in " ".join((res.stdout + res.stderr).split())
    assert job_record.rerun() == "re-run"


def test_the_first_progress_after_resume_is_the_resume_step_not_the_crashed_launch_s(tmp_path) -> None:
    from selfimprove.engines.watch import _first_step, _step_now
    from selfimprove.rundir import ArmDir

    arm = ArmDir(tmp_path, "iter_0")
    for s in range(1, 8):  # the crashed launch got to step 7; its last complete checkpoint is step 5
        arm.rollout_step(s).mkdir(parents=True)
        os.utime(arm.rollout_step(s), (time.time() - 600, time.time() - 600))
    rec = JobRecord(pid=0, pgid=0, proc_start=None, cmd=[], cwd="/", host="h", start_ts=time.time() - 1, launch=2,
                    resume_step=5, log="l", expect=JobExpectation(max_steps=10, num_examples=3))
    assert _first_step(rec) == 5 and _step_now(arm, rec) == 5
    os.utime(arm.rollout_step(6))  # the resumed launch writes step 6
    assert _step_now(arm, rec) == 6


def test_no_sbatch_on_path_is_refused_before_a_run_dir_unless_told_to_skip(monkeypatch) -> None:
    from selfimprove.errors import ConfigError

    monkeypatch.setattr(slurm.shutil, "which", lambda tool, *a, **k: None)
    monkeypatch.delenv(slurm.CHECK_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"--slurm x.toml: sbatch/squeue are not on PATH: .*SELFIMPROVE_SLURM_CHECK=0"):
        slurm.check_overlay({"partition": "gpu"}, "--slurm x.toml")
    monkeypatch.setenv(slurm.CHECK_ENV, "0")  # the line's own escape hatch, followed
    slurm.check_overlay({"partition": "gpu"}, "--slurm x.toml")
