"""`--slurm FILE.toml` without a scheduler: the overlay's checks, what run.json records, what each launch
gets (`@ FILE`, `--slurm.job-name si-<run id>-<arm>`), the key snapshots, and the CPU engine's sbatch
script. The scheduler itself is exercised in tests/test_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfimprove.engines import slurm
from selfimprove.phases.slurm_launch import CANONICAL_OVERLAY, keep_canonical_overlay, launch_extras, on_slurm
from selfimprove.rl.slurm_submit import render
from selfimprove.rundir import RunDir
from selfimprove.stack import prime_rl_keys
from selfimprove.stack.dialects import SEED, V1
from selfimprove.stack.slurm_overlay import read_overlay

SLURM_KEYS = {"job_name": "str", "project_dir": "str", "template_path": "str", "partition": "str", "nodelist": "str",
              "exclude": "str", "account": "str", "time": "str", "pre_run_command": "str"}
MAIN_ONLY = {"cleanup_grace_period": "int", "shared_fs": "bool"}  # SlurmConfig at 559b44772, not at 09e297743


@pytest.mark.parametrize("dialect, keys", [(SEED, SLURM_KEYS), (V1, {**SLURM_KEYS, **MAIN_ONLY})])
def test_the_slurm_keys_of_each_snapshot_are_prime_rls(dialect, keys):
    """The key snapshots hold SlurmConfig's fields with their types; a misspelt key is unknown."""
    assert prime_rl_keys.node_at("slurm", dialect.keys_file) == keys
    assert prime_rl_keys.leaf_type("deployment.type", dialect.keys_file) == "str"
    assert prime_rl_keys.unknown_keys({"slurm": {"jobname": "x", "partiton": "p"}}, dialect.keys_file) == [
        "slurm.jobname", "slurm.partiton"]


@pytest.fixture(autouse=True)
def _no_scheduler_check(monkeypatch):
    """These tests are about the overlay's keys and names, on machines without a scheduler: the scheduler's
    own check of its values (slurm.check_overlay) is tested against the one-node cluster in test_slurm.py."""
    monkeypatch.setenv(slurm.CHECK_ENV, "0")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, words", [
    ('[deployment]\ntype = "multi_node"\n', ["no [slurm] table", "add one"]),
    ('[slurm]\npartiton = "gpu"\n', ["unknown key 'slurm.partiton'", "partition"]),
    ('[slurm]\ntime = 30\n', ["slurm.time: expected str, got int"]),
    ('[slurm]\npartition = "gpu"\n[orchestrator]\nseed = 1\n', ["[orchestrator] does not belong", "--config"]),
])
def test_a_bad_overlay_is_refused_in_one_line_before_any_run_dir(cli, runs_dir, tmp_path, text, words):
    overlay = _write(tmp_path / "cluster.toml", text)
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", str(runs_dir), "--model", "selfimprove/tiny-arith",
              "--slurm", str(overlay))
    assert res.exit_code == 2, res.stdout
    line = res.stderr.strip()
    assert "\n" not in line and str(overlay) in line and all(w in line for w in words), line
    assert list(runs_dir.iterdir()) == []


def test_the_overlay_is_recorded_and_every_launch_gets_it_with_the_arms_job_name(new_run, tmp_path):
    overlay = _write(tmp_path / "cluster.toml", '[slurm]\npartition = "gpu"\ntime = "02:00:00"\n'
                                                '[deployment]\ntype = "multi_node"\nnum_train_nodes = 2\n')
    run_dir = new_run("selfimprove-arith", "--slurm", str(overlay))
    rd = RunDir(run_dir)
    cfg = rd.read_run()
    assert cfg.slurm == str(overlay.resolve()) and on_slurm(rd, cfg)
    files, overrides, name = launch_extras(rd, cfg, "run_a_best_from_iter0")
    assert files == [overlay.resolve()] and name == f"si-{cfg.run_id}-run_a_best_from_iter0"
    canonical = Path(__file__).resolve().parents[1] / "configs" / "selfimprove-arith" / "rl.toml"
    argv = SEED.rl_command_args([canonical, *files], overrides, rd.iter(0).prime_out)
    assert argv[:4] == ["@", str(canonical), "@", str(overlay.resolve())]
    assert argv[argv.index("--slurm.job-name") + 1] == name
    merged, _ = SEED.parse_rl_argv(argv)  # what the engine reads: the overlay's tables plus the job name
    assert merged["slurm"] == {"partition": "gpu", "time": "02:00:00", "job_name": name}
    assert merged["deployment"]["type"] == "multi_node"


def test_a_copied_run_dir_names_its_jobs_apart_from_the_original(new_run, tmp_path):
    """A copy of a run with live SLURM jobs must not submit under the original's job names (two live jobs
    of one name; the name lookup after a kill -9 could adopt the other run's job): its names carry a tag
    of its own path. The original keeps si-<run id>-<arm>, and so does a run.json from before `home`."""
    import shutil

    overlay = _write(tmp_path / "cluster.toml", '[slurm]\npartition = "gpu"\n')
    original = RunDir(new_run("selfimprove-arith", "--slurm", str(overlay)))
    cfg = original.read_run()
    assert cfg.home == str(original.root.resolve())
    copy = RunDir(shutil.copytree(original.root, tmp_path / "elsewhere" / original.root.name))
    in_original, in_copy = (launch_extras(rd, rd.read_run(), "iter_2")[2] for rd in (original, copy))
    assert in_original == f"si-{cfg.run_id}-iter_2"
    tag = in_copy.removeprefix(f"si-{cfg.run_id}-").removesuffix("-iter_2")
    assert len(tag) == 6 and in_copy != in_original
    assert launch_extras(copy, copy.read_run(), "iter_2")[2] == in_copy  # stable: re-runs find their job
    older = cfg.model_copy(update={"home": None})
    assert launch_extras(copy, older, "iter_2")[2] == f"si-{cfg.run_id}-iter_2"


def test_without_slurm_a_launch_gets_nothing(new_run):
    rd = RunDir(new_run())
    assert launch_extras(rd, rd.read_run(), "iter_0") == ([], {}, None)


def test_a_canonical_config_with_slurm_puts_every_later_arm_on_slurm(new_run):
    rd = RunDir(new_run())
    cfg = rd.read_run()
    keep_canonical_overlay(rd, cfg, {"model": {"name": "x"}, "slurm": {"partition": "gpu"}}, SEED)
    files, overrides, name = launch_extras(rd, cfg, "iter_3")
    assert files == [rd.root / CANONICAL_OVERLAY] and overrides == {"slurm": {"job_name": name}}
    assert SEED.read_toml(files[0]) == {"slurm": {"partition": "gpu"}}


def test_the_engines_default_script_runs_itself_without_the_table(tmp_path):
    script = render({"job_name": "si-abc-iter_1", "partition": "gpu", "time": "01:00:00", "account": "lab"},
                    tmp_path / "slurm" / "rl.toml", tmp_path)
    assert "#SBATCH --job-name=si-abc-iter_1" in script and "#SBATCH --partition=gpu" in script
    assert "#SBATCH --time=01:00:00" in script and "#SBATCH --account=lab" in script
    assert "--nodelist" not in script and f"#SBATCH --output={tmp_path}/job_%j.log" in script
    assert script.rstrip().endswith(f"-m selfimprove.rl.cli @ {tmp_path / 'slurm' / 'rl.toml'}")


def test_the_engines_script_syncs_then_runs_the_pre_run_command_then_itself(tmp_path):
    """As prime-rl's templates: the sync (the CPU engine's stand-in removes the run's env packages), then
    [slurm] pre_run_command, then the engine."""
    script = render({"pre_run_command": "echo pre"}, tmp_path / "slurm" / "rl.toml", tmp_path).splitlines()
    sync = next(i for i, ln in enumerate(script) if ln.endswith(f"-m selfimprove.rl.exact_sync {tmp_path}"))
    assert sync < script.index("echo pre") < next(i for i, ln in enumerate(script) if ln.startswith("exec "))


def test_every_slurm_launch_puts_the_runs_env_packages_back_after_the_sync(new_run, tmp_path):
    """Once the run has generated packages, a launch's pre_run_command puts their project dirs on PYTHONPATH
    and reinstalls them (prime-rl: `uv pip install` into the activated venv; the CPU engine: its pip), after
    the overlay's own pre_run_command; before any package exists there is nothing to add."""
    overlay = _write(tmp_path / "cluster.toml", '[slurm]\npartition = "gpu"\npre_run_command = "module load cuda"\n')
    rd = RunDir(new_run("selfimprove-arith", "--slurm", str(overlay)))
    cfg = rd.read_run()
    assert launch_extras(rd, cfg, "iter_0")[1] == {"slurm": {"job_name": f"si-{cfg.run_id}-iter_0"}}
    pkg = rd.root / "iter_1" / "pkg_iter_1"
    (pkg / "pkg_iter_1").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text("[project]\nname = 'pkg_iter_1'\n")
    pre = launch_extras(rd, cfg, "iter_1")[1]["slurm"]["pre_run_command"]
    assert pre.startswith(f"module load cuda; export PYTHONPATH={pkg.resolve()}${{PYTHONPATH:+:$PYTHONPATH}}; ")
    assert f"-m pip install --no-deps --no-build-isolation --force-reinstall --quiet {pkg.resolve()} ||" in pre
    gpu = launch_extras(rd, cfg.model_copy(update={"engine": "prime-rl"}), "iter_1")[1]["slurm"]["pre_run_command"]
    assert f"; uv pip install --no-deps --reinstall --quiet {pkg.resolve()} ||" in gpu


def test_the_sync_stand_in_removes_only_this_runs_packages(tmp_path):
    """selfimprove.rl.exact_sync: the installed env packages whose provenance names a run dir holding the
    job's output dir, and no other run's (nor a package without provenance)."""
    from selfimprove.rl import exact_sync

    site = tmp_path / "site-packages"
    run = tmp_path / "runs" / "r1"
    for name, run_dir in (("mine_iter_1", run), ("other_iter_1", tmp_path / "runs" / "r2"), ("numpy", None)):
        (site / name).mkdir(parents=True)
        if run_dir:
            (site / name / "provenance.json").write_text(json.dumps({"run_dir": str(run_dir)}))
    assert exact_sync.run_packages(run / "iter_1" / "prime_out", [site]) == ["mine_iter_1"]
    assert exact_sync.site_dirs()  # this interpreter's, what the job's sync step reads


def test_a_missing_template_path_is_named(tmp_path):
    from selfimprove.errors import ConfigError

    with pytest.raises(ConfigError, match="template_path .*nope.j2 does not exist"):
        render({"template_path": str(tmp_path / "nope.j2")}, tmp_path / "rl.toml", tmp_path)


def test_submitted_line_and_job_names():
    assert slurm.submitted_id("x\nSubmitted batch job 4242\n") == "4242"
    assert slurm.submitted_id("sbatch: error: Batch job submission failed") is None
    assert slurm.job_name("1a2b3c4d", "iter_2") == "si-1a2b3c4d-iter_2"


def test_read_overlay_returns_its_tables(tmp_path):
    overlay = _write(tmp_path / "c.toml", '[slurm]\nshared_fs = false\ncleanup_grace_period = 60\n')
    assert read_overlay(overlay, V1.keys_file) == {"slurm": {"shared_fs": False, "cleanup_grace_period": 60}}
    with pytest.raises(Exception, match="unknown key 'slurm.cleanup_grace_period' for prime-rl@09e297743"):  # the seed's SlurmConfig had no shared_fs
        read_overlay(overlay, SEED.keys_file)
    json.dumps(read_overlay(overlay, V1.keys_file))


# ---------------------------------------------------------------- each state's line


class _Rec:
    job_id, job_log = "77", "/runs/r/iter_2/prime_out/job_77.log"


@pytest.mark.parametrize("state, reason, words", [
    ("PENDING", "Resources", ["PENDING (Resources)", "next: wait", "never resubmit"]),
    ("RUNNING", None, ["RUNNING", "next: wait", "re-run the same command to attach"]),
    ("REQUEUED", None, ["REQUEUED: requeued, the same job continues", "next: wait"]),
    ("PREEMPTED", None, ["PREEMPTED: requeued, the same job continues", "next: wait"]),
    ("COMPLETED", None, ["COMPLETED", "without the final eval file", "--restart"]),
    ("FAILED", None, ["FAILED (exit 1:0)", "exited non-zero", "--restart"]),
    ("TIMEOUT", None, ["TIMEOUT (exit 1:0)", "time limit", "--resume"]),
    ("CANCELLED", None, ["CANCELLED (exit 1:0)", "scancel", "--resume"]),
    ("OUT_OF_MEMORY", None, ["OUT_OF_MEMORY (exit 1:0)", "more", "--restart"]),
    ("NODE_FAIL", None, ["NODE_FAIL (exit 1:0)", "node failed", "--resume"]),
])
def test_each_state_has_one_line_with_the_job_id_the_log_and_the_next_step(tmp_path, state, reason, words):
    from selfimprove.engines.slurm_jobs import state_line
    from selfimprove.rundir import ArmDir

    live = state in slurm.LIVE_STATES
    info = slurm.JobInfo("77", state, reason, None, None if live or state == "COMPLETED" else "1:0", "scontrol")
    line = state_line(ArmDir(tmp_path, "iter_2"), _Rec(), info)
    assert "\n" not in line and line.startswith("iter_2: SLURM job 77 ") and _Rec.job_log in line, line
    assert all(w in line for w in words), line


@pytest.mark.parametrize("state, exit_code", [("COMPLETED", "0:0"), ("FAILED", "1:0")])
def test_an_ended_job_with_its_final_eval_complete_is_called_done_not_missing(tmp_path, state, exit_code):
    """The watcher prints an ended job's line once; with the eval file complete it says so (no next step)."""
    from selfimprove.engines.slurm_jobs import state_line
    from selfimprove.rundir import ArmDir

    info = slurm.JobInfo("77", state, None, None, exit_code, "scontrol")
    line = state_line(ArmDir(tmp_path, "iter_2"), _Rec(), info, eval_complete=True)
    assert line.startswith(f"iter_2: SLURM job 77 {state}") and "final eval complete" in line, line
    assert "without the final eval file" not in line and "next:" not in line, line


def test_a_completed_job_s_eval_file_seen_late_on_a_shared_fs_is_waited_for(tmp_path):
    """await_rows re-reads the eval file until it is complete (NFS shows it late), up to its lag."""
    import threading

    from selfimprove.engines.rollouts import LineCounter
    from selfimprove.engines.slurm_jobs import await_rows

    path = tmp_path / "eval.jsonl"
    path.write_text("{}\n" * 3)
    threading.Timer(0.5, lambda: path.write_text("{}\n" * 10)).start()
    assert await_rows(LineCounter(path), 10, lag_s=10, poll_s=0.1) == 10
    assert await_rows(LineCounter(tmp_path / "missing.jsonl"), 10, lag_s=0.3, poll_s=0.1) == 0


def test_a_job_the_scheduler_forgot_is_judged_by_its_files(tmp_path):
    from selfimprove.engines.slurm_jobs import state_line
    from selfimprove.rundir import ArmDir

    line = state_line(ArmDir(tmp_path, "iter_2"), _Rec(), None)
    assert "no longer known to the scheduler" in line and "judged by its files" in line


def test_the_engine_without_sbatch_says_so_in_one_line(tmp_path):
    """selfimprove-rl with [slurm] on a machine without the SLURM client: exit 1, one line, nothing submitted."""
    import subprocess
    import sys

    overlay = _write(tmp_path / "s.toml", '[slurm]\npartition = "gpu"\n')
    canonical = Path(__file__).resolve().parents[1] / "configs" / "selfimprove-arith" / "rl.toml"
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "selfimprove.rl.cli", "@", str(canonical), "@", str(overlay),
                          "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert res.returncode == 1 and res.stderr.strip() == (
        "selfimprove-rl: sbatch is not on PATH: run this on a SLURM login node, or drop the [slurm] table"), res.stderr
    assert (tmp_path / "out" / "rl.sbatch").is_file() and "Submitted batch job" not in res.stdout


def test_a_requeued_job_resumes_from_the_first_runs_last_checkpoint(monkeypatch, tmp_path):
    """After a node failure SLURM runs the same script again: the CPU engine continues from the last complete
    checkpoint instead of refusing the output dir; a first run, or an explicit resume step, is left alone."""
    from selfimprove.rl.train import requeued_resume_step

    class Lay:
        def complete_steps(self):
            return [2, 4]

    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert requeued_resume_step(Lay(), None) is None
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert requeued_resume_step(Lay(), None) == -1
    assert requeued_resume_step(Lay(), 2) == 2
    Lay.complete_steps = lambda self: []
    assert requeued_resume_step(Lay(), None) is None


@pytest.mark.parametrize("dialect", [SEED, V1])
@pytest.mark.parametrize("name", ["cluster.toml", "multinode.toml"])
def test_the_shipped_example_overlays_pass_the_key_check_in_both_dialects(dialect, name):
    """examples/slurm/*.toml are what docs/how-to/slurm.md shows and what bench/prime_rl_parse.py checked
    with prime-rl's own parser: they must stay valid against both key snapshots."""
    path = Path(__file__).resolve().parents[1] / "examples" / "slurm" / name
    cfg = read_overlay(path, dialect.keys_file)
    assert cfg["slurm"]["partition"] == "h100"
    # cluster.toml: an arm's 2 GPUs (1 inference + 1 trainer), not prime-rl's default gpus_per_node = 8
    assert cfg["deployment"]["gpus_per_node"] == (2 if name == "cluster.toml" else 8)


def test_the_watcher_asks_the_scheduler_gently_and_at_once_when_the_files_say_done(tmp_path, monkeypatch):
    """The output files are read every POLL_S, the scheduler only every query_every_s (slurmctld serves
    the whole cluster), except that a complete final eval makes the watcher ask at once for the end."""
    import threading
    import time

    from selfimprove.engines import slurm_jobs, watch
    from selfimprove.engines.job_record import JobExpectation, JobRecord, write_job
    from selfimprove.rundir import ArmDir

    arm = ArmDir(tmp_path, "iter_0")
    arm.dir.mkdir(parents=True)
    expect = JobExpectation(max_steps=2, num_examples=5).for_arm(arm)
    write_job(arm, JobRecord(pid=0, pgid=0, proc_start=None, cmd=["rl"], cwd=str(tmp_path), host="h",
                             start_ts=time.time(), launch=1, log=str(arm.train_log), expect=expect,
                             scheduler="slurm", job_id="42", job_name="si-x-iter_0", job_log=str(tmp_path / "j.log")))
    asked: list[float] = []
    done = threading.Event()

    def query(job_id):
        asked.append(time.monotonic())
        state = "COMPLETED" if done.is_set() else "RUNNING"
        return slurm.JobInfo(job_id, state, None, None, "0:0" if done.is_set() else None, "squeue")

    def finish():  # the job writes its final eval, then ends
        Path(expect.eval_file).parent.mkdir(parents=True, exist_ok=True)
        Path(expect.eval_file).write_text("{}\n" * 5)
        done.set()

    monkeypatch.setattr(slurm, "query", query)
    monkeypatch.setattr(slurm_jobs, "POLL_S", 0.05)
    monkeypatch.setenv("SELFIMPROVE_SLURM_QUERY_S", "60")
    threading.Timer(1.0, finish).start()
    t0 = time.monotonic()
    res = watch.watch(arm, progress=False, poll_s=0.05)
    assert res.status == "succeeded" and res.rc == 0 and time.monotonic() - t0 < 10
    assert len(asked) <= 3, asked  # once at the start, then only for the end (not every 0.05 s poll)
