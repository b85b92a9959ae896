"""Round 5 (issue 41), area procs: forged and copied job records. A record in a run dir is untrusted input: it
must never make the tool signal, attach to or scancel what is not provably this run's. Loaded by
bench/hostile.py; select with `-k "r5 procs"`.

The SLURM cases use a fake scheduler on PATH (squeue, scontrol, sacct, scancel reading one JSON job table and
logging every call), so they run anywhere. A case whose harm would show after the command (a killed process,
a scancel) runs the hostile command once in its setup and asserts there that nothing was harmed; the runner
then judges the same command's exit code, message and run dir."""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from hostile import ENV, case, cli, copy_run

P = "r5 procs: "

FAKE_SLURM = r'''#!{py}
import json, os, sys
state = json.load(open({table!r}))
tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
open({log!r}, "a").write(json.dumps([tool, *args]) + "\n")
if state.get("down"):
    sys.exit("slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
jobs = state["jobs"]
if tool == "scancel":
    sys.exit(0)
if tool == "squeue" and "-n" in args:
    name = args[args.index("-n") + 1]
    print("".join(f"{{i}}|{{n}}|{{s}}\n" for i, (s, n) in jobs.items() if n == name), end="")
    sys.exit(0)
job = args[args.index("-j") + 1] if "-j" in args else args[-1]
if tool == "sacct" or job not in jobs:
    sys.exit("slurm_load_jobs error: Invalid job id specified")
state_, name = jobs[job]
if tool == "squeue":
    print(f"{{job}}|{{state_}}|None|{{name}}")
else:
    print(f"JobId={{job}} JobName={{name}} JobState={{state_}} Reason=None ExitCode=0:0 Restarts=0")
'''


def fake_slurm(tmp: Path, jobs: dict[str, tuple[str, str]], down: bool = False) -> tuple[dict, Path]:
    """(env with the fake scheduler first on PATH, its call log)."""
    bin_dir, table, log = tmp / "fake_slurm_bin", tmp / "fake_slurm.json", tmp / "fake_slurm_calls.jsonl"
    bin_dir.mkdir()
    table.write_text(json.dumps({"jobs": jobs, "down": down}))
    for tool in ("squeue", "scontrol", "sacct", "scancel"):
        p = bin_dir / tool
        p.write_text(FAKE_SLURM.format(py=sys.executable, table=str(table), log=str(log)))
        p.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{ENV['PATH']}"}, log


def scancels(log: Path) -> list[list[str]]:
    """Every scancel the fake scheduler was asked for."""
    calls = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    return [c for c in calls if c[0] == "scancel"]


def own_name(run: Path, arm: str = "iter_0") -> str:
    from selfimprove.engines.slurm import job_name
    from selfimprove.phases.slurm_launch import place_tag
    from selfimprove.rundir import RunDir

    rd = RunDir(run)
    cfg = rd.read_run()
    return job_name(cfg.run_id or cfg.dataset, arm, place_tag(rd, cfg))


def slurm_job_json(run: Path, job_id: str, name: str, arm: str = "iter_0") -> None:
    from selfimprove.engines.jobs import JobExpectation, JobRecord, write_job
    from selfimprove.rundir import ArmDir

    a = ArmDir(run, arm)
    a.dir.mkdir(parents=True, exist_ok=True)
    write_job(a, JobRecord(pid=0, pgid=0, proc_start=None, cmd=[], cwd=str(run), host=socket.gethostname(),
                           start_ts=time.time(), log=str(a.train_log), scheduler="slurm", job_id=job_id,
                           job_name=name, expect=JobExpectation(max_steps=4, num_examples=20).for_arm(a)))


VICTIMS: list[subprocess.Popen] = []


def victim() -> subprocess.Popen:
    """Someone else's process: not started by the tool, so it carries no job token. It lives until the bench
    ends (atexit), longer than any case (a case's `iterate --once` can take minutes on a busy machine)."""
    v = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    VICTIMS.append(v)
    return v


@atexit.register
def _kill_victims() -> None:
    for v in VICTIMS:
        v.kill()
        v.wait()


# ---------------------------------------------------------------- forged local records


@case(f"{P}forged iter_0/job.json naming another process (cap 0.001 h)", ("job.json", "--restart"), code=1)
def _(tmp, t):
    """pid, pgid and start time copied from /proc/<pid>/stat: the tool once attached to it and killed it at
    the cap. Now the record does not count (no token): one line, the process untouched, and the same line on
    every later call (never a retry loop)."""
    from selfimprove.engines import procs
    from selfimprove.engines.jobs import JobExpectation, JobRecord, write_job
    from selfimprove.rundir import RunDir

    run = copy_run(t.boot, tmp)
    cli(["introspect", "--run-dir", str(run)], tmp)
    v = victim()
    arm = RunDir(run).iter(0)
    arm.dir.mkdir(parents=True, exist_ok=True)
    write_job(arm, JobRecord(pid=v.pid, pgid=v.pid, proc_start=procs.start_time(v.pid), cmd=["rl"], cwd=str(run),
                             host=socket.gethostname(), start_ts=time.time() - 3600, log=str(arm.train_log),
                             expect=JobExpectation(max_steps=4, num_examples=20, cap_hours=0.001).for_arm(arm)))
    p = cli(["baseline", "--run-dir", str(run)], tmp)
    assert p.returncode == 1 and "is not this arm's job" in p.stderr, p.stderr
    assert v.poll() is None, "the forged record's process was killed"
    return ["baseline", "--run-dir", str(run)], run


@case(f"{P}gen.pid of pid 1 and a foreign process group", (), bad=False)
def _(tmp, t):
    """{"pid": 1, "pgid": V}: once SIGKILLed group V, then every later iterate stopped on "could not be
    killed". Now: one line, the record dropped, V untouched, and the iteration goes on."""
    from loop_helpers import write_teacher_files

    run = copy_run(t.stop1, tmp)
    write_teacher_files(run / "iter_1")
    v = victim()
    (run / "iter_1" / "gen.pid").write_text(json.dumps({"pid": 1, "pgid": v.pid}))
    p = cli(["iterate", "--run-dir", str(run), "--once"], tmp)
    assert v.poll() is None, "a process group the tool did not start was signalled"
    assert p.returncode == 0 and p.stderr.count("gen.pid") == 1 and "dropped" in p.stderr, p.stderr
    return ["status", "--run-dir", str(run)], run


# ---------------------------------------------------------------- forged and copied SLURM records


@case(f"{P}job.json with job_id --user=alice: cancel", ("job.json", "job_id"), code=1)
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    slurm_job_json(run, "42", own_name(run))
    job = run / "iter_0" / "job.json"
    job.write_text(json.dumps({**json.loads(job.read_text()), "job_id": "--user=alice"}))
    env, log = fake_slurm(tmp, {})
    p = cli(["cancel", "--run-dir", str(run)], tmp, env={**ENV, **env})
    assert scancels(log) == [], "scancel ran on a forged id"
    return ["cancel", "--run-dir", str(run)], run


@case(f"{P}job.json naming someone else's job 424242: cancel", (), bad=False)
def _(tmp, t):
    """The record has this run's name, but the scheduler calls job 424242 otherwise: left alone, one line."""
    run = copy_run(t.boot, tmp)
    slurm_job_json(run, "424242", own_name(run))
    env, log = fake_slurm(tmp, {"424242": ("RUNNING", "someone-elses-job")})
    p = cli(["cancel", "--run-dir", str(run)], tmp, env={**ENV, **env})
    assert p.returncode == 0 and "not this run's job" in p.stdout and scancels(log) == [], (p.stdout, p.stderr)
    case_env.update(env)
    return ["cancel", "--run-dir", str(run)], run


@case(f"{P}cancel on a copy of a run with a live SLURM job", (), bad=False)
def _(tmp, t):
    """The copy's job.json names the original's job (its id and name): once scancelled it. Now: one line
    (a copy's record), nothing cancelled; the original's own cancel still reaches it."""
    orig = copy_run(t.boot, tmp)
    slurm_job_json(orig, "4242", own_name(orig))
    (tmp / "copies").mkdir()
    copy = copy_run(orig, tmp / "copies")
    env, log = fake_slurm(tmp, {"4242": ("RUNNING", own_name(orig))})
    p = cli(["cancel", "--run-dir", str(copy)], tmp, env={**ENV, **env})
    assert p.returncode == 0 and "not this run dir's" in p.stdout and scancels(log) == [], (p.stdout, p.stderr)
    p = cli(["cancel", "--run-dir", str(orig)], tmp, env={**ENV, **env})
    assert p.returncode == 0 and scancels(log) == [["scancel", f"--name={own_name(orig)}", "--", "4242"]], p.stdout
    case_env.update(env)
    return ["cancel", "--run-dir", str(copy)], copy


@case(f"{P}cancel while the scheduler does not answer", ("scheduler",), code=75)
def _(tmp, t):
    """Not "no live job to cancel" (exit 0) with a job queued: exit 75, naming the retry."""
    run = copy_run(t.boot, tmp)
    slurm_job_json(run, "42", own_name(run))
    env, _log = fake_slurm(tmp, {"42": ("PENDING", own_name(run))}, down=True)
    case_env.update(env)
    return ["cancel", "--run-dir", str(run)], run


# The fake scheduler's PATH for the runner's own call of the last three cases (set by their setup: the runner
# passes Case.env, read when it runs the command, after setup).
case_env: dict = {}
for _c in __import__("hostile").CASES:
    if _c.name.startswith(P) and ("cancel" in _c.name and "alice" not in _c.name):
        _c.env = case_env
