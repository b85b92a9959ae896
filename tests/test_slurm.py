"""The loop through a real SLURM scheduler: the one-node cluster of tests/slurm_cluster.py.

- the whole loop (`selfimprove run --slurm`) from the dataset to finalize: one job per arm, all COMPLETED;
- kill -9 of the CLI at each point of a submission leaves exactly one job per arm (counted in squeue by
  the arm's unique name), and the next invocation attaches to it by id;
- --restart refuses while the scheduler holds the job, naming `scancel <id>`;
- a held job is shown PENDING with the scheduler's reason (in the watch and in `selfimprove status`), then
  released; a job scancel'ed from outside ends the watch with its CANCELLED line;
- `selfimprove cancel` cancels only this run's recorded job (not another job on the cluster) and notes why.

The kill-point and state tests drive `engines.jobs.run_training` (what every phase calls) with the real
CPU engine as launcher, on the cluster's DOWN partition `parked`: the jobs wait there at no CPU cost.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from selfimprove.engines import slurm

REPO = Path(__file__).resolve().parents[1]
ENGINE = str(Path(sys.executable).parent / "selfimprove-rl")
SELFIMPROVE = str(Path(sys.executable).parent / "selfimprove")
CANONICAL = REPO / "configs" / "selfimprove-arith" / "rl.toml"
TEACHER = f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher"
SMALL = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "6", "--batch-size", "64",
         "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "100", "--budget", "30m"]

# What a phase does for one arm: run_training with the engine's command and the arm's job name.
# A background shell (`make test &`) leaves SIGINT ignored in what it starts: the tests' Ctrl-C needs it back.
RESTORE_SIGINT = "import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"

DRIVER = RESTORE_SIGINT + """
from pathlib import Path
from selfimprove.engines.jobs import JobExpectation, run_training
from selfimprove.errors import SelfImproveError
from selfimprove.rundir import ArmDir

root, name, overlay, flag, max_steps, *extra = sys.argv[1:]
arm = ArmDir(Path(root), "iter_0")
import os, shlex
engine = shlex.split(os.environ.get("SELFIMPROVE_RL_CMD", "")) or [{engine!r}]  # the dry-run tier's wrapper, or the engine
cmd = [*engine, "@", {canonical!r}, "@", overlay, "--max-steps", max_steps, *extra, "--slurm.job-name", name,
       "--output-dir", str(arm.prime_out)]
try:
    run_training(arm, cmd, JobExpectation(max_steps=int(max_steps), num_examples=10), restart=flag == "restart",
                 resume=flag == "resume", quiet=False, job_name=name)
except SelfImproveError as e:
    print(f"error: {{e}}", file=sys.stderr)
    sys.exit(e.exit_code)
""".format(engine=ENGINE, canonical=str(CANONICAL))


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONUNBUFFERED": "1", **extra}


class Driver:
    """The driver in the background, its output collected as it comes."""

    def __init__(self, root: Path, name: str, overlay: Path, *, fault: str | None = None, flag: str = "",
                 max_steps: int = 2, extra: tuple[str, ...] = (), env: dict | None = None):
        # the state tests watch transitions (held, released, cancelled): ask the scheduler every 2 s, not 15
        env = _env(SELFIMPROVE_SLURM_QUERY_S="2", **({"SELFIMPROVE_FAULT_AT": fault} if fault else {}), **(env or {}))
        argv = [sys.executable, "-c", DRIVER, str(root), name, str(overlay), flag or "-", str(max_steps), *extra]
        self.proc = subprocess.Popen(argv,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")), daemon=True)
        self.reader.start()

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout: float = 90.0, count: int = 1) -> None:
        deadline = time.monotonic() + timeout
        while self.out.count(text) < count:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.proc.kill()
                raise AssertionError(f"no {text!r} in the driver's output:\n{self.out}")
            time.sleep(0.2)

    def interrupt(self) -> str:
        self.proc.send_signal(signal.SIGINT)  # Ctrl-C: stops watching, the job stays
        return self.finish()

    def finish(self, timeout: float = 90.0) -> str:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"driver still running after {timeout} s:\n{self.out}") from None
        self.reader.join(timeout=10)
        return self.out


def drive(root: Path, name: str, overlay: Path, *, fault: str | None = None, restart: bool = False,
          until: str | None = None) -> tuple[int | None, str]:
    """Run the driver to its end; with `until`, stop it (it only watches) once its output shows that text."""
    d = Driver(root, name, overlay, fault=fault, flag="restart" if restart else "")
    if until is None:
        return d.proc.returncode if d.finish() is not None else None, d.out
    d.wait_for(until)
    return None, d.interrupt()


def overlay_file(tmp_path: Path, partition: str, **more: str) -> Path:
    path = tmp_path / "slurm.toml"
    extra = "".join(f'{k} = "{v}"\n' for k, v in more.items())
    path.write_text(f'[slurm]\npartition = "{partition}"\n{extra}')
    return path


def dry_run_tier(dialect: str) -> dict:
    """The env that puts every launch through prime-rl's real `rl --dry-run` first (tests/prime_rl_dry_run.py),
    where prime-rl's archives are here; {} elsewhere (the tier's own tests then skip with one line)."""
    from prime_rl_venvs import ensure, missing_reason

    if missing_reason() is not None:
        return {}
    return {"SELFIMPROVE_RL_CMD": f"{sys.executable} {REPO / 'tests' / 'prime_rl_dry_run.py'}",
            "SELFIMPROVE_DRY_RUN_RL": str(ensure(dialect) / ".venv" / "bin" / "rl")}


def live_ids(cluster, name: str) -> list[str]:
    return [i for i, _n, state in cluster.jobs(name) if state in slurm.LIVE_STATES]


def wait_for_job(cluster, name: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ids = live_ids(cluster, name)
        if ids:
            return ids[0]
        time.sleep(0.3)
    raise AssertionError(f"no job named {name} appeared in {timeout} s")


# ---------------------------------------------------------------- never twice


@pytest.mark.parametrize("fault", ["submit:iter_0", "submitted:iter_0", "train:iter_0"])
def test_kill_of_the_cli_during_submission_leaves_one_job_and_the_next_call_attaches(slurm_cluster, tmp_path, fault):
    """kill -9 right after the launcher started (before job.json), after sbatch but before job.json has the id,
    and while the job is pending: one job in squeue, and re-invoking attaches to it by id."""
    name = f"si-test-{fault.split(':')[0]}"
    overlay = overlay_file(tmp_path, slurm_cluster.parked)
    rc, out = drive(tmp_path, name, overlay, fault=fault)
    assert rc == -signal.SIGKILL, out
    # the second call finds the job (by the launcher's argv, then by name) and watches it
    rc, out = drive(tmp_path, name, overlay, until="PENDING (PartitionDown)")
    ids = live_ids(slurm_cluster, name)
    assert len(ids) == 1, (ids, out)
    assert json.loads((tmp_path / "iter_0" / "job.json").read_text())["job_id"] == ids[0]
    assert f"SLURM job {ids[0]} PENDING (PartitionDown)" in out and "never resubmit" in out
    if fault == "train:iter_0":  # a third call while pending, and --restart: still one job
        rc, out = drive(tmp_path, name, overlay, restart=True)
        assert rc == 75 and f"scancel {ids[0]}" in out, out
        assert live_ids(slurm_cluster, name) == ids
    slurm_cluster.run("scancel", ids[0])


def test_kill_while_running_attaches_to_the_running_job(slurm_cluster, tmp_path):
    name = "si-test-running"
    overlay = overlay_file(tmp_path, slurm_cluster.partition)
    rc, _out = drive(tmp_path, name, overlay, fault="train:iter_0")
    assert rc == -signal.SIGKILL
    rc, out = drive(tmp_path, name, overlay, until=" RUNNING; log ")
    ids = live_ids(slurm_cluster, name)
    assert len(ids) == 1 and f"following SLURM job {ids[0]} (the scheduler says" in out, out
    slurm_cluster.run("scancel", ids[0])


# ---------------------------------------------------------------- states


def own_name(run_dir: Path, arm: str = "iter_0") -> str:
    """The arm's job name as the run dir's phases give it (si-<run id>-<arm>): what status and cancel accept."""
    from selfimprove.phases.slurm_launch import place_tag
    from selfimprove.rundir import RunDir

    rd = RunDir(run_dir)
    cfg = rd.read_run()
    return slurm.job_name(cfg.run_id or cfg.dataset, arm, place_tag(rd, cfg))


def status_lines(run_dir: Path) -> list[str]:
    res = subprocess.run([SELFIMPROVE, "status", "--run-dir", str(run_dir)], capture_output=True, text=True, env=_env())
    assert res.returncode == 0, res.stderr
    return [ln for ln in res.stdout.splitlines() if ln.startswith("SLURM job ")]


def test_held_job_shows_its_reason_then_a_scancel_from_outside_ends_the_watch(slurm_cluster, new_run, tmp_path):
    """PENDING with the scheduler's reason (held, released) in the watch and in `selfimprove status`, then
    CANCELLED from outside: the watch ends with the state, the job id, the log and the next step, exit 1."""
    run_dir = new_run()
    name = own_name(run_dir)
    overlay = overlay_file(tmp_path, slurm_cluster.parked)
    driver = Driver(run_dir, name, overlay)
    job_id = wait_for_job(slurm_cluster, name)
    driver.wait_for(f"SLURM job {job_id} PENDING (PartitionDown)")
    slurm_cluster.run("scontrol", "hold", job_id)
    driver.wait_for(f"SLURM job {job_id} PENDING (JobHeld")
    held = status_lines(run_dir)
    advice = re.search(r"next: `(scontrol release \d+)`", driver.out)  # the held line's advice, followed
    assert advice and advice.group(1) == f"scontrol release {job_id}", driver.out
    slurm_cluster.run(*advice.group(1).split())
    driver.wait_for(f"SLURM job {job_id} PENDING (PartitionDown)", count=2)
    released = status_lines(run_dir)
    slurm_cluster.run("scancel", job_id)
    out = driver.finish()
    assert driver.proc.returncode == 1, out
    log = run_dir / "iter_0" / "prime_out" / f"job_{job_id}.log"
    assert held == [f"SLURM job {job_id} iter_0: PENDING (JobHeldAdmin), step -/2; log {log}"], held
    assert released == [f"SLURM job {job_id} iter_0: PENDING (PartitionDown), step -/2; log {log}"], released
    lines = [ln for ln in out.splitlines() if f": SLURM job {job_id} " in ln]
    states = [ln.split(f"SLURM job {job_id} ", 1)[1].split(";")[0].split(":")[0] for ln in lines]
    states = [st for st in states if st != "PENDING (no reason given)"]  # the instant after release, if seen
    assert states[:3] == ["PENDING (PartitionDown)", "PENDING (JobHeldAdmin)", "PENDING (PartitionDown)"], out
    assert "CANCELLED" in states[-1] and "re-run with --resume" in out and str(log) in out
    assert live_ids(slurm_cluster, name) == [] and status_lines(run_dir) == []


def test_cancel_scancels_only_this_runs_job_and_notes_why(slurm_cluster, new_run, tmp_path):
    """Only this run's job; a copy of the run dir (its job.json names the original's job) cancels nothing."""
    import shutil

    run_dir = new_run()
    name = own_name(run_dir)
    other = slurm.submitted_id(slurm_cluster.run("sbatch", "-p", slurm_cluster.parked, "-J", "someone-else",
                                                 "-o", "/dev/null", "--wrap", "sleep 1"))  # not this run's
    driver = Driver(run_dir, name, overlay_file(tmp_path, slurm_cluster.parked))
    driver.wait_for("PENDING (PartitionDown)")
    ours = json.loads((run_dir / "iter_0" / "job.json").read_text())["job_id"]
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    res = subprocess.run([SELFIMPROVE, "cancel", "--run-dir", str(copy)], capture_output=True, text=True, env=_env())
    assert res.returncode == 0 and "not this run dir's" in res.stdout and "no live job" in res.stdout, res
    assert live_ids(slurm_cluster, name) == [ours]  # the original's job is untouched
    res = subprocess.run([SELFIMPROVE, "cancel", "--run-dir", str(run_dir), "--why", "wrong partition"],
                         capture_output=True, text=True, env=_env())
    assert res.returncode == 0 and res.stdout.strip() == f"iter_0: scancel {ours} (was PENDING)", res
    out = driver.finish()
    assert driver.proc.returncode == 1 and f"SLURM job {ours} CANCELLED" in out, out
    assert live_ids(slurm_cluster, name) == [] and live_ids(slurm_cluster, "someone-else") == [other]
    assert f"cancelled job(s) iter_0 (job {ours}, was PENDING): wrong partition" in (run_dir / "scratchpad.md").read_text()
    slurm_cluster.run("scancel", other)


def test_a_controller_outage_is_waited_out_never_read_as_the_end_of_the_job(slurm_cluster, new_run, tmp_path):
    """issue 41: with slurmctld down, squeue and scontrol fail, which the watcher once read as "no longer known"
    (the arm failed while its job ran on). Now: one "cannot reach the scheduler" line, --restart and cancel
    refuse (exit 75) while it lasts (about a minute: each query of a down controller takes ~18 s), and once the controller is back the same watch ends with the job's
    final eval: one job for the arm, COMPLETED."""
    run_dir = new_run()
    name = own_name(run_dir)
    driver = Driver(run_dir, name, overlay_file(tmp_path, slurm_cluster.partition), max_steps=4,
                    extra=("--orchestrator.eval.num-examples", "10", "--no-orchestrator.eval.eval-base-model"))
    job_id = wait_for_job(slurm_cluster, name)
    driver.wait_for(f"SLURM job {job_id} RUNNING")
    t0 = time.monotonic()
    slurm_cluster.stop_controller()
    try:
        driver.wait_for(f"SLURM job {job_id}: cannot reach the scheduler", timeout=60)
        rc, out = drive(run_dir, name, overlay_file(tmp_path, slurm_cluster.partition), restart=True)
        assert rc == 75 and "cannot reach the SLURM scheduler" in out and "--restart" in out, out
        res = subprocess.run([SELFIMPROVE, "cancel", "--run-dir", str(run_dir)], capture_output=True, text=True,
                             env=_env())
        assert res.returncode == 75 and "cannot reach the SLURM scheduler" in res.stderr, res
        # (status's UNREACHABLE line: tests/test_untrusted_jobs.py; each query of a down controller takes ~18 s)
    finally:
        outage = time.monotonic() - t0
        slurm_cluster.start_controller()
    out = driver.finish(timeout=240)
    assert driver.proc.returncode == 0, out
    assert out.count("cannot reach the scheduler") == 1, out  # one line for the outage, not one per poll
    assert "no longer known" not in out and "--restart" not in out.split("cannot reach the scheduler")[1], out
    assert [(i, s) for i, _n, s in slurm_cluster.jobs(name)] == [(job_id, "COMPLETED")]
    print(f"controller outage: {outage:.0f} s")


@pytest.mark.parametrize("values, words", [
    ({"partition": "nosuchpart"}, ["slurm.partition 'nosuchpart'", "cluster"]),
    ({"partition": "cluster", "time": "abc"}, ["slurm.time", "--time=abc"]),
])
def test_overlay_values_are_checked_with_the_scheduler_before_a_run_dir(slurm_cluster, cli, runs_dir, tmp_path,
                                                                       values, words):
    """issue 41: a partition that does not exist or a time that does not parse once passed bootstrap and failed
    at iter_0, leaving a run dir behind. `sinfo` and `sbatch --test-only` refuse them first: one line, exit 2."""
    overlay = tmp_path / "slurm.toml"
    overlay.write_text("[slurm]\n" + "".join(f'{k} = "{v}"\n' for k, v in values.items()))
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", str(runs_dir), "--model", "selfimprove/tiny-arith",
              "--slurm", str(overlay))
    line = res.stderr.strip()
    assert res.exit_code == 2 and "\n" not in line and str(overlay) in line, line
    assert all(w in line for w in words), line
    assert list(runs_dir.iterdir()) == []
    overlay.write_text(f'[slurm]\npartition = "{slurm_cluster.partition}"\ntime = "00:10:00"\n')  # the fix
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", str(runs_dir), "--model", "selfimprove/tiny-arith",
              "--slurm", str(overlay))
    assert res.exit_code == 0, res.stderr


# ---------------------------------------------------------------- the whole loop


PHASE4_ARMS = ["run_a_best_from_iter0", "run_b_combined_from_base", "run_c_real_from_iter0"]


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory) -> tuple[Path, str]:
    """`selfimprove run --slurm` to finalize: (run dir, what it printed on stderr)."""
    root = tmp_path_factory.mktemp("slurm_run")
    overlay = overlay_file(root, slurm_cluster.partition, time="00:30:00")
    proc = subprocess.run([SELFIMPROVE, "run", "selfimprove-arith", *SMALL,
                           "--runs-dir", str(root / "runs"), "--teacher", TEACHER, "--slurm", str(overlay), "--json"],
                          capture_output=True, text=True, env=_env(OMP_WAIT_POLICY="PASSIVE", **dry_run_tier("seed")),
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(json.loads(proc.stdout)["run_dir"]), proc.stderr


@pytest.mark.slow
def test_run_through_slurm_to_finalize_with_one_completed_job_per_arm(slurm_cluster, slurm_run):
    slurm_run, printed = slurm_run
    run = json.loads((slurm_run / "run.json").read_text())
    assert run["status"] == "finalized" and run["slurm"].endswith("slurm.toml")
    arms = sorted(p.parent.name for p in slurm_run.glob("*/job.json"))
    assert arms == sorted(["iter_0", "iter_1", *PHASE4_ARMS])
    # each job's end is one line: COMPLETED with its final eval, never the "missing eval" advice
    assert "without the final eval file" not in printed, printed[-3000:]
    assert printed.count(" COMPLETED; final eval complete; log ") == len(arms), printed[-3000:]
    for arm in arms:
        rec = json.loads((slurm_run / arm / "job.json").read_text())
        assert rec["scheduler"] == "slurm" and rec["job_name"] == f"si-{run['run_id']}-{arm}"
        jobs = slurm_cluster.jobs(rec["job_name"])
        assert [(i, s) for i, _n, s in jobs] == [(rec["job_id"], "COMPLETED")], (arm, jobs)  # one job, ended well
        assert (slurm_run / arm / rec["job_log"]).is_file()
    status = subprocess.run([SELFIMPROVE, "status", "--run-dir", str(slurm_run),
                             "--json"], capture_output=True, text=True, env=_env())
    assert {j["arm"]: j["state"] for j in json.loads(status.stdout)["slurm_jobs"]} == dict.fromkeys(arms, "COMPLETED")


@pytest.mark.slow
def test_phase4_arms_were_submitted_side_by_side(slurm_cluster, slurm_run):
    """On SLURM --parallel defaults to every pending arm: the Phase 4 jobs were not trained one after
    another. By the scheduler's own SubmitTime and EndTime, the second arm was submitted before the first
    ended. (Not "all three before any ended": each arm's thread packages its data and passes prime-rl's dry
    run before it submits, and on loaded cores the last submission came 3 s after the first short job ended.)"""
    slurm_run, _printed = slurm_run
    times = {}
    for arm in PHASE4_ARMS:
        job_id = json.loads((slurm_run / arm / "job.json").read_text())["job_id"]
        f = dict(kv.split("=", 1) for kv in slurm_cluster.run("scontrol", "-o", "show", "job", job_id).split() if "=" in kv)
        times[arm] = (f["SubmitTime"], f["EndTime"])
    by_submit = sorted(times.values())
    assert by_submit[1][0] < by_submit[0][1], times


@pytest.mark.slow
def test_every_launch_passed_prime_rl_seeds_dry_run_and_its_sbatch_puts_the_env_packages_back(slurm_cluster, slurm_run):
    """Each `--slurm` launch of the whole run went through prime-rl 09e297743's real `rl --dry-run` first
    (tests/prime_rl_dry_run.py). What prime-rl wrote: its resolved rl.toml (output dir <arm>/prime_out, one eval
    at max_steps, filesystem weight broadcast) and rl.sbatch: job name, job log path, and after its `uv sync
    --all-extras`, which removes the pip-installed env packages, the pre-run command the tool adds reinstalls
    every generated package the arm trains on, before `uv run rl`."""
    from prime_rl_dry_run import launches
    from prime_rl_venvs import missing_reason

    from selfimprove.stack.toml_paths import read_toml

    if missing_reason():
        pytest.skip(missing_reason())
    run_dir, _printed = slurm_run
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    got = launches(run_dir)
    assert sorted(a for a, _, _ in got) == sorted(p.parent.name for p in run_dir.glob("*/job.json"))
    for arm, rec, meta in got:
        assert meta["rc"] == 0, (arm, (rec / "rl.log").read_text()[-3000:])
        cfg = read_toml(rec / "configs" / "rl.toml")
        out = run_dir / arm / "prime_out"
        assert Path(cfg["output_dir"]) == out and cfg["orchestrator"]["eval"]["interval"] == cfg["max_steps"], arm
        assert cfg["trainer"]["weight_broadcast"]["type"] == "filesystem", arm
        script = (rec / "rl.sbatch").read_text().splitlines()
        assert f"#SBATCH --job-name=si-{run_id}-{arm}" in script and f"#SBATCH --output={out}/job_%j.log" in script
        sync, run = script.index("uv sync --all-extras"), next(i for i, ln in enumerate(script) if ln.startswith("uv run rl @"))
        generated = {e["id"] for e in cfg["orchestrator"]["train"]["env"]} - {"selfimprove-arith"}
        pre = [i for i, ln in enumerate(script) if "pip install --no-deps" in ln]
        assert (pre or not generated) and all(sync < i < run for i in pre), (arm, script[sync:run + 1])
        for env_id in generated:  # on PYTHONPATH and reinstalled
            dirs = [str(p.parent) for p in run_dir.glob("*/*/pyproject.toml") if (p.parent / env_id).is_dir()]
            assert dirs and all(script[pre[0]].count(d) == 2 for d in dirs), (arm, env_id)


@pytest.mark.slow
def test_the_same_launches_without_the_overlay_pass_prime_rl_seeds_dry_run(slurm_cluster, slurm_run, tmp_path):
    """The run's launches on one machine (the --slurm overlay and its flags taken out), through prime-rl
    09e297743's dry run in one process: accepted, with the trainer and orchestrator sub-configs resolved."""
    from prime_rl_dry_run import launches, replay, without_overlay
    from prime_rl_venvs import ensure, missing_reason

    from selfimprove.engines.preflight import with_output_dir
    from selfimprove.stack.toml_paths import read_toml

    if missing_reason():
        pytest.skip(missing_reason())
    run_dir, _printed = slurm_run
    overlay = json.loads((run_dir / "run.json").read_text())["slurm"]
    got = launches(run_dir)
    argvs = [with_output_dir(without_overlay(m["argv"], overlay), tmp_path / arm) for arm, _rec, m in got]
    assert all(overlay not in a and not any(t.startswith("--slurm") for t in a) for a in argvs)
    packages = sorted(str(p.parent) for p in run_dir.glob("*/*/pyproject.toml"))
    results = replay(str(ensure("seed") / ".venv" / "bin" / "rl"), argvs, packages, tmp_path)
    for (arm, _rec, _m), res in zip(got, results):
        assert res["ok"], (arm, res.get("error"))
        orch = read_toml(tmp_path / arm / "configs" / "orchestrator.toml")
        assert orch["eval"]["interval"] == orch["max_steps"] and (tmp_path / arm / "configs" / "trainer.toml").is_file()


def test_phase4_with_three_seeds_submits_its_nine_arms_at_once(slurm_cluster, run, tmp_path):
    """`compare --seeds 3` on SLURM queues all nine Phase 4 jobs at once: on the DOWN partition all nine are
    PENDING together (nothing runs, so this costs only the submissions). `selfimprove cancel` then cancels
    exactly those nine and leaves the run resumable. (iter_0 / iter_1 come from the fake engine; the
    launcher is the real CPU engine, which only submits.)"""
    from selfimprove.rundir import write_model
    from test_compare import finish_phase3

    finish_phase3(run)  # iter_0, iter_1 on this machine; then the run goes to SLURM for Phase 4
    cfg = run.read_run()
    write_model(run.run_json, cfg.model_copy(update={"slurm": str(overlay_file(tmp_path, slurm_cluster.parked))}))
    env = _env(SELFIMPROVE_RL_CMD=ENGINE, SELFIMPROVE_SLURM_QUERY_S="2")
    compare = subprocess.Popen([sys.executable, "-c", RESTORE_SIGINT + "from selfimprove.cli import main\n"
                                "sys.argv = sys.argv[1:]\nmain()",
                                "selfimprove", "compare", "--run-dir", str(run.root), "--seeds", "3"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    ids: dict[str, str] = {}
    deadline = time.monotonic() + 120
    while len(ids) < 9:
        assert time.monotonic() < deadline and compare.poll() is None, (ids, compare.poll())
        for job in run.root.glob("*/job.json"):
            rec = json.loads(job.read_text())
            if rec.get("scheduler") == "slurm" and rec.get("job_id"):
                ids[job.parent.name] = rec["job_id"]
        time.sleep(0.3)
    states = {i: s for i, _n, s in slurm_cluster.jobs()}
    assert sorted(ids) == sorted(PHASE4_ARMS + ["iter_1_seed1", "iter_1_seed2", "run_a_best_from_iter0_seed1",
                                                "run_a_best_from_iter0_seed2", "run_c_real_from_iter0_seed1",
                                                "run_c_real_from_iter0_seed2"]), ids
    assert [states.get(i) for i in ids.values()] == ["PENDING"] * 9, states  # all nine queued together
    compare.send_signal(signal.SIGINT)  # stop watching; the jobs stay queued
    out, _ = compare.communicate(timeout=60)
    assert compare.returncode == 130, out
    res = subprocess.run([SELFIMPROVE, "cancel", "--run-dir", str(run.root), "--why", "test"],
                         capture_output=True, text=True, env=_env())
    assert res.returncode == 0 and len(res.stdout.strip().splitlines()) == 9, res
    assert [s for i, _n, s in slurm_cluster.jobs() if i in ids.values()] == ["CANCELLED"] * 9


@pytest.mark.slow
def test_a_job_past_its_time_limit_ends_timeout_and_resumes_from_its_last_checkpoint(slurm_cluster, tmp_path):
    """[slurm] time = 1 minute on a longer training: TIMEOUT, with its line and the checkpoint to resume from;
    --resume submits one new job (never two live) that continues from that checkpoint."""
    name = "si-test-timeout"
    overlay = overlay_file(tmp_path, slurm_cluster.partition, time="00:01:00")
    extra = ("--ckpt.interval", "1", "--orchestrator.eval.num-examples", "20", "--no-orchestrator.eval.eval-base-model")
    tier = dry_run_tier("seed")  # both launches through prime-rl 09e297743's dry run, where the tier runs
    driver = Driver(tmp_path, name, overlay, max_steps=200, extra=extra, env=tier)
    out = driver.finish(timeout=240)
    assert driver.proc.returncode == 1, out
    first = json.loads((tmp_path / "iter_0" / "job.json").read_text())["job_id"]
    m = re.search(r"--resume \(continue from checkpoint step (\d+)\)", out)
    assert f"SLURM job {first} TIMEOUT" in out and "time limit" in out and m, out
    step = int(m.group(1))
    driver = Driver(tmp_path, name, overlay, flag="resume", max_steps=200, extra=extra, env=tier)
    driver.wait_for(" RUNNING; log ")
    out = driver.interrupt()
    rec = json.loads((tmp_path / "iter_0" / "job.json").read_text())
    assert rec["job_id"] != first and rec["cmd"][-2:] == ["--ckpt.resume-step", str(step)], rec
    if tier:  # prime-rl 09e297743 accepted the relaunch and resolved the resume step from it
        from prime_rl_dry_run import launches

        (_a, rec1, m1), (_b, rec2, m2) = launches(tmp_path)
        assert m1["rc"] == 0 and m2["rc"] == 0, (rec2 / "rl.log").read_text()[-3000:]
        assert m2["argv"] == rec["cmd"][rec["cmd"].index("@"):]
        from selfimprove.stack.toml_paths import read_toml

        assert read_toml(rec2 / "configs" / "rl.toml")["ckpt"]["resume_step"] == step  # the seed writes rl.toml on SLURM
        assert (rec1 / "rl.sbatch").is_file() and (rec2 / "rl.sbatch").is_file()
    assert f"resuming the crashed job from checkpoint step {step}" in out, out
    assert live_ids(slurm_cluster, name) == [rec["job_id"]]
    assert [s for i, _n, s in slurm_cluster.jobs(name) if i == first] == ["TIMEOUT"]
    slurm_cluster.run("scancel", rec["job_id"])


@pytest.mark.slow
def test_node_set_down_mid_job_requeues_it_and_the_arm_waits_for_the_same_job(slurm_cluster, tmp_path):
    """The node goes DOWN while the job trains: the scheduler requeues the SAME job (no second one), the watch
    says so and waits; with the node back, the job runs again, resumes from its last checkpoint and completes."""
    name = "si-test-nodedown"
    overlay = overlay_file(tmp_path, slurm_cluster.partition)
    extra = ("--ckpt.interval", "1", "--orchestrator.eval.num-examples", "10", "--no-orchestrator.eval.eval-base-model")
    driver = Driver(tmp_path, name, overlay, max_steps=8, extra=extra)
    job = wait_for_job(slurm_cluster, name)
    ckpts = tmp_path / "iter_0" / "prime_out" / "checkpoints"
    deadline = time.monotonic() + 180
    while not any(ckpts.glob("step_*")):  # a checkpoint to resume from
        assert time.monotonic() < deadline and driver.proc.poll() is None, driver.out
        time.sleep(0.5)
    slurm_cluster.run("scontrol", "update", f"nodename={slurm_cluster.host}", "state=down", "reason=si-test")
    deadline = time.monotonic() + 60
    while [s for i, _n, s in slurm_cluster.jobs(name) if i == job] == ["RUNNING"]:
        assert time.monotonic() < deadline, slurm_cluster.jobs(name)
        time.sleep(0.5)
    states = [s for i, _n, s in slurm_cluster.jobs(name) if i == job]
    # ReturnToService=2 may bring the node back on its own, also between the check and the update (then
    # slurmctld answers "Invalid node state specified"): resume it when down, and only require it to be up.
    deadline = time.monotonic() + 60
    while slurm_cluster.node_state().startswith("down"):
        slurm_cluster.run("scontrol", "update", f"nodename={slurm_cluster.host}", "state=resume", check=False)
        assert time.monotonic() < deadline, slurm_cluster.node_state()
        time.sleep(1)
    out = driver.finish(timeout=420)
    assert driver.proc.returncode == 0, (states, out)
    assert [i for i, _n, _s in slurm_cluster.jobs(name)] == [job], slurm_cluster.jobs(name)  # never a second job
    assert states and states[0] in slurm.LIVE_STATES, states  # requeued, not ended
    assert f"SLURM job {job}" in out and ("PENDING" in out or "requeued" in out), out
    rec = json.loads((tmp_path / "iter_0" / "job.json").read_text())
    log = (tmp_path / "iter_0" / rec["job_log"]).read_text(errors="replace")
    assert rec["job_id"] == job and "SLURM requeued this job" in log, log[-3000:]  # resumed, not started over


def test_the_double_submission_count_sees_two_live_jobs_of_one_name(slurm_cluster, tmp_path):
    """The suite-wide check (slurm_cluster's teardown) is real: two jobs of one name, both pending, are counted
    (jobs named si-selftest-* are this test's own and left out of the suite's count)."""
    from slurm_cluster import SELFTEST

    script = tmp_path / "sleep.sbatch"
    script.write_text("#!/bin/sh\nsleep 1\n")
    name = f"{SELFTEST}double"
    ids = [slurm_cluster.run("sbatch", "--parsable", "-p", slurm_cluster.parked, "-J", name, "-o", "/dev/null",
                             str(script)).strip() for _ in range(2)]
    try:
        counted = slurm_cluster.double_submissions(include_selftest=True)
        assert counted == [f"{name}: job {ids[1]} submitted while job {ids[0]} was live"], counted
        assert not any(d.startswith(SELFTEST) for d in slurm_cluster.double_submissions())
    finally:
        slurm_cluster.run("scancel", *ids)
