"""`selfimprove run --stack v1` end to end on CPU with the REAL engine and the example teacher:
prime-rl main's dialect (559b44772) with the env as a verifiers v1 Taskset, bootstrap to finalize.

Every config and every launch argv the run wrote is checked against the v0.8 key snapshot (the
dialect of each is printed: `pytest -s` shows them), the real env is the hub's Taskset module and
generated data is a v1 Taskset package whose Task class is the hub's (by reference).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEACHER = f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher"
# The smallest loop that still runs every phase: one iteration, then Runs A, B and C.
SMALL = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "4", "--batch-size", "32",
         "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "50", "--budget", "30m"]
ARMS = ["iter_0", "iter_1", "run_a", "run_b", "run_c"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def v1_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole small v1 run. Where prime-rl's archives are here (tests/prime_rl_venvs.py), every launch first
    goes through prime-rl main's real `rl ARGV --dry-run` (tests/prime_rl_dry_run.py), and iter_0's first launch
    is crashed once checkpoint step 1 is whole, so `baseline --resume` relaunches it (through the dry run too) before
    `run --run-dir` goes on to finalize."""
    import os

    from prime_rl_venvs import ensure, missing_reason

    runs = tmp_path_factory.mktemp("run_v1")
    env = dict(os.environ)
    if missing_reason() is None:
        env.update(SELFIMPROVE_RL_CMD=f"{sys.executable} {REPO / 'tests' / 'prime_rl_dry_run.py'}",
                   SELFIMPROVE_DRY_RUN_RL=str(ensure("v1") / ".venv" / "bin" / "rl"),
                   SELFIMPROVE_DRY_RUN_CRASH="iter_0:1")
    selfimprove = [sys.executable, "-m", "selfimprove"]
    proc = subprocess.run([*selfimprove, "run", "selfimprove-arith", "--stack", "v1", *SMALL,
                           "--runs-dir", str(runs), "--teacher", TEACHER, "--json"],
                          capture_output=True, text=True, timeout=1500, cwd=REPO, env=env)
    if "SELFIMPROVE_DRY_RUN_CRASH" not in env:
        assert proc.returncode == 0, proc.stderr[-3000:]
        return Path(json.loads(proc.stdout)["run_dir"])
    assert proc.returncode != 0 and "iter_0" in proc.stderr, proc.stderr[-3000:]  # the crash, as a user meets it
    run_dir = next(runs.iterdir())
    resume = subprocess.run([*selfimprove, "baseline", "--run-dir", str(run_dir), "--resume"], capture_output=True,
                            text=True, timeout=1500, cwd=REPO, env=env)
    if resume.returncode != 0:
        # the relaunch prime-rl refused is test_the_crash_relaunch_uses_mains_resume_flag's failure; the rest of
        # the run goes on from a fresh iter_0, so every other check still runs
        (run_dir / "resume_refused.txt").write_text(resume.stderr)
        restart = subprocess.run([*selfimprove, "baseline", "--run-dir", str(run_dir), "--restart"],
                                 capture_output=True, text=True, timeout=1500, cwd=REPO, env=env)
        assert restart.returncode == 0, restart.stderr[-3000:]
    proc = subprocess.run([*selfimprove, "run", "--run-dir", str(run_dir), "--json"], capture_output=True, text=True,
                          timeout=1500, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def test_v1_run_finishes_with_the_summary(v1_run: Path) -> None:
    run = json.loads((v1_run / "run.json").read_text())
    assert run["stack"] == "v1" and (run["status"], run["end_reason"]) == ("finalized", "max_iters_reached") and run["phase4_errors"] == []
    assert [r["arm"] for r in json.loads((v1_run / "metrics.json").read_text())["iters"]] == ARMS
    assert "## Final summary" in (v1_run / "scratchpad.md").read_text()
    hub = json.loads((v1_run / "hub_env.json").read_text())
    assert hub["api"] == "verifiers.v1" and hub["taskset"]["taskset_id"] == "selfimprove_arith_v1"
    assert hub["taskset"]["eval_args"] == {"split": "eval"} and hub["taskset"]["train_args"] == {"split": "train"}


def test_every_written_config_and_argv_is_prime_rl_main(v1_run: Path) -> None:
    from selfimprove.stack import toml_paths
    from selfimprove.stack.dialects import V1, dialect_of_argv
    from selfimprove.stack.prime_rl_keys import unknown_keys

    tomls = sorted(p for p in v1_run.rglob("*.toml") if "prime_out" not in p.parts and p.parent.name.startswith(("iter_", "run_")))
    assert len(tomls) == 6  # iter_0 canonical + overlay; iter_1, run_a, run_b, run_c rl.toml
    for path in tomls:
        data = toml_paths.read_toml(path)
        assert unknown_keys(data, V1.keys_file) == [], path
        V1.validate_config(data, partial=path.name == "eval_overlay.toml")
        print(f"{path.relative_to(v1_run)}: {V1.DIALECT}")
    jobs = sorted(v1_run.glob("*/job.json"))
    assert len(jobs) == len(ARMS)
    for job in jobs:
        cmd = json.loads(job.read_text())["cmd"]
        argv = cmd[cmd.index("@"):]  # after the engine's command (one token, or the dry-run tier's two)
        assert dialect_of_argv(argv) is V1, job
        V1.parse_rl_argv(argv)  # merges the files and overrides and validates them as prime-rl main would
        print(f"{job.relative_to(v1_run)} argv: {V1.DIALECT}")


def test_real_env_is_the_taskset_and_generated_data_a_v1_package(v1_run: Path) -> None:
    from selfimprove.stack import toml_paths

    run_b = toml_paths.read_toml(v1_run / "run_b_combined_from_base" / "rl.toml")
    ids = [s["env"]["taskset"]["id"] for s in run_b["orchestrator"]["train"]["source"]]
    assert ids[0] == "selfimprove_arith_v1" and ids[1].endswith("_run_b") and len(ids) == 2  # real + generated sources
    for source in run_b["orchestrator"]["eval"]["source"]:
        assert source["env"]["taskset"] == {"id": "selfimprove_arith_v1", "split": "eval"}
    package = json.loads((v1_run / "iter_1" / "package.json").read_text())["package"]
    source = (v1_run / "iter_1" / package / package / "__init__.py").read_text()
    assert "class ArithTask" not in source and "correct_answer" not in source  # nothing of the hub copied
    from selfimprove.stack.verifiers_v1 import find_taskset
    from selfimprove_arith.v1 import ArithTask

    importlib.invalidate_caches()
    assert find_taskset(package).task_type() is ArithTask  # the installed package uses the hub's Task class


OTHER_VERIFIERS = "0.4.0"  # the v1 API alone (requires-python >=3.11: installs beside this venv's 3.11)
RESOLVE = """
import json, sys
import verifiers
from verifiers.v1.utils.loaders import taskset_class
out = {}
for taskset_id in sys.argv[1:]:
    try:
        out[taskset_id] = taskset_class(taskset_id).__name__
    except Exception as e:
        out[taskset_id] = f"{type(e).__name__}: {e}"
print(json.dumps({"version": verifiers.__version__, "resolved": out}))
"""


@pytest.fixture(scope="module")
def verifiers_040_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with verifiers 0.4.0 only (no selfimprove, no datasets). SELFIMPROVE_TEST_V040_VENV reuses one."""
    import os

    reuse = os.environ.get("SELFIMPROVE_TEST_V040_VENV")
    if reuse:
        return Path(reuse) / "bin" / "python"
    venv = tmp_path_factory.mktemp("verifiers-040") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"verifiers=={OTHER_VERIFIERS}"],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return venv / "bin" / "python"


def _written_sources(v1_run: Path) -> list[tuple[str, str]]:
    """(where, taskset id) of every [[orchestrator.train|eval.source]] of every config the run wrote."""
    from selfimprove.stack.toml_paths import read_toml

    uses = []
    for path in sorted(p for p in v1_run.rglob("*.toml") if "prime_out" not in p.parts and p.parent.name.startswith(("iter_", "run_"))):
        orchestrator = read_toml(path).get("orchestrator", {})
        for group in ("train", "eval"):
            for i, source in enumerate(orchestrator.get(group, {}).get("source", [])):
                uses.append((f"{path.relative_to(v1_run)} {group}.source[{i}]", source["env"]["taskset"]["id"]))
    return uses


@pytest.mark.parametrize("verifiers_version", ["0.3.1", OTHER_VERIFIERS])
def test_every_written_source_resolves_with_verifiers_own_loader(v1_run: Path, verifiers_version: str,
                                                                  request: pytest.FixtureRequest) -> None:
    """prime-rl main imports each source's env.taskset.id through verifiers.v1.utils.loaders.taskset_class while
    its config validates (a dotted id raises there). Every id the run wrote must resolve, with the project's
    verifiers (0.3.1) and with 0.4.0, the generated packages importable from their project dirs."""
    import os

    uses = _written_sources(v1_run)
    assert len(uses) >= 10 and {i for _, i in uses} >= {"selfimprove_arith_v1"}
    python = sys.executable if verifiers_version == "0.3.1" else request.getfixturevalue("verifiers_040_python")
    packages = [p.parent / json.loads(p.read_text())["package"] for p in v1_run.glob("*/package.json")]
    path = os.pathsep.join([str(REPO / "src"), *map(str, packages)])
    proc = subprocess.run([str(python), "-c", RESOLVE, *sorted({i for _, i in uses})], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": path}, cwd=v1_run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reply["version"].startswith(verifiers_version)
    refused = {where: reply["resolved"][i] for where, i in uses if not reply["resolved"][i].endswith("Taskset")}
    assert refused == {}
    print(f"verifiers {reply['version']}: {len(uses)} sources, ids {reply['resolved']}")


def test_arms_keep_main_s_layout_and_fork_iter0_with_its_own_resume(v1_run: Path) -> None:
    """prime-rl main's runtime contract on the whole loop: no weights/ anywhere, the base eval at step_1 (Run B
    skips its unused one), forks name iter_0's checkpoint in [resume] dir with skip_progress exactly when the
    sources differ, every source is plain chat in a subprocess, broadcasts are filesystem, every arm ended with a
    whole final checkpoint, and each record says which policy its final eval scored (main evaluates max_steps
    right after batch max_steps-1 ships: v{max_steps-2} on the CPU engine)."""
    from selfimprove.rundir import RunDir
    from selfimprove.stack import toml_paths

    rd = RunDir(v1_run)
    assert not list(v1_run.glob("*/prime_out/weights"))
    iter0 = rd.iter(0)
    assert iter0.eval_file(1).is_file() and not iter0.rollout_step(0).exists()
    ck = str(iter0.trainer_ckpt(4))
    for arm, skips in (("iter_1", True), ("run_a", True), ("run_c", False)):
        cfg = toml_paths.read_toml(rd.arm(arm).rl_toml)
        assert cfg["resume"] == {"dir": ck} and cfg["weight_broadcast"] == {"type": "filesystem"}, arm
        assert toml_paths.get_path(cfg, "orchestrator.ckpt.skip_progress", False) is skips, arm
        assert not (rd.arm(arm).dir / "stage.json").exists()
    run_b = toml_paths.read_toml(rd.arm("run_b").rl_toml)
    assert run_b["orchestrator"]["eval"]["skip_first_step"] is True and not rd.arm("run_b").eval_file(1).exists()
    for path in [*v1_run.glob("*/rl.toml"), iter0.eval_overlay]:
        cfg = toml_paths.read_toml(path)
        for src in [*toml_paths.get_path(cfg, "orchestrator.train.source", []), *cfg["orchestrator"]["eval"]["source"]]:
            assert src["env"]["agent"] == {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}, path
    records = {r["arm"]: r for r in json.loads((v1_run / "metrics.json").read_text())["iters"]}
    for arm in ARMS:
        final = records[arm]["final_step"]
        assert rd.arm(arm).checkpoint_missing(final) == [], arm
        assert records[arm]["eval_policy_step"] == final - 2, arm
    assert "the final eval is not the final checkpoint's" in (v1_run / "scratchpad.md").read_text()


def test_the_recommended_model_loads_with_transformers(v1_run: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    table = json.loads((v1_run / "metrics.json").read_text())["iters"]
    for rec in table:
        path = v1_run / rec["checkpoint"]
        assert path.parent.name == "model" and (path / "config.json").is_file(), rec
    path = v1_run / table[-1]["checkpoint"]
    AutoModelForCausalLM.from_pretrained(path)
    AutoTokenizer.from_pretrained(path)


# ---------------------------------------------------------------- prime-rl main's own verdict (the dry-run tier)
# Every launch of v1_run went through prime-rl 559b44772's real `rl ARGV --dry-run` (tests/prime_rl_dry_run.py)
# before the CPU engine trained it; these read what prime-rl resolved and wrote for each. Marked "r40-layout":
# the contract the builders and the relaunch keep once that branch lands (docs/how-to/gpu-prime-rl.md, table).


def _tier() -> None:
    from prime_rl_venvs import missing_reason

    why = missing_reason()
    if why:
        pytest.skip(why)


def _accepted(v1_run: Path) -> list[tuple[str, Path, dict]]:
    """The launches prime-rl accepted (a refused one wrote no configs; the test of that launch says why)."""
    from prime_rl_dry_run import launches

    return [x for x in launches(v1_run) if x[2]["rc"] == 0]


def _resolved(rec: Path) -> tuple[dict, dict]:
    return (json.loads((rec / "configs" / "trainer.json").read_text()),
            json.loads((rec / "configs" / "orchestrator.json").read_text()))


def test_every_launch_and_the_resume_relaunch_passed_prime_rl_mains_dry_run(v1_run: Path) -> None:
    from prime_rl_dry_run import launches

    _tier()
    got = launches(v1_run)
    arm_dirs = sorted(p.parent.name for p in v1_run.glob("*/job.json"))
    refused = (v1_run / "resume_refused.txt").is_file()  # then iter_0 was restarted: one launch more
    assert sorted({a for a, _, _ in got}) == arm_dirs and len(got) == len(arm_dirs) + 1 + refused
    for arm, rec, meta in got:
        if (arm, rec.name) == ("iter_0", "launch_2"):
            continue  # the resume relaunch: its own test below
        assert meta["rc"] == 0, (arm, rec.name, (rec / "rl.log").read_text()[-3000:])
        assert (rec / "configs" / "trainer.json").is_file() and (rec / "configs" / "orchestrator.json").is_file()
    for job in v1_run.glob("*/job.json"):  # what each arm last launched is what prime-rl last checked
        cmd = json.loads(job.read_text())["cmd"]
        last = [m for a, _, m in got if a == job.parent.name][-1]
        assert last["argv"] == cmd[cmd.index("@"):], job


def test_the_crash_relaunch_uses_mains_resume_flag(v1_run: Path) -> None:
    """r40-layout: main has no --ckpt.resume-step ("Extra inputs are not permitted ... did you mean --resume?");
    the relaunch of the crashed iter_0 resumes this run's own latest checkpoint, as prime-rl resolves it."""
    from prime_rl_dry_run import launches

    _tier()
    first, again = [(rec, m) for a, rec, m in launches(v1_run) if a == "iter_0"][:2]
    assert again[1]["rc"] == 0, (again[0] / "rl.log").read_text()[-2000:]
    assert "--ckpt.resume-step" not in again[1]["argv"] and any(t.startswith("--resume") for t in again[1]["argv"])
    trainer, orch = _resolved(again[0])
    assert trainer["resume"] is not None and orch["resume"] is not None
    assert _resolved(first[0])[0]["resume"] is None


def test_prime_rl_resolved_plain_chat_in_a_subprocess_for_every_source(v1_run: Path) -> None:
    """r40-layout: unset, main resolves verifiers' `bash` harness in a Prime sandbox VM (runtime type prime,
    vm = true); every source pins prime-rl's own example's harness id "null" and runtime "subprocess"."""
    from prime_rl_dry_run import env_configs

    _tier()
    for arm, rec, _ in _accepted(v1_run):
        envs = env_configs(rec / "configs")
        assert envs and any(k.startswith("eval/") for k in envs), (arm, rec.name)
        for name, cfg in envs.items():
            agent = cfg["env"]["agent"]
            assert (agent["harness"] or {}).get("id") == "null" and agent["runtime"]["type"] == "subprocess", \
                (arm, name, agent["harness"], agent["runtime"]["type"])


def test_prime_rl_resolved_filesystem_broadcast_one_final_eval_and_the_arm_paths(v1_run: Path, tmp_path: Path) -> None:
    """Output dir <arm>/prime_out for trainer and orchestrator (the tool's ArmDir.prime_out); logs under
    prime-rl's get_log_dir of it (what crash_cause.attempt_logs reads); eval interval = the arm's max_steps.
    r40-layout: weight broadcast "filesystem" (main's default with [inference] is nccl, which never writes
    broadcasts/step_{max_steps})."""
    from prime_rl_venvs import ensure

    from selfimprove.engines.crash_cause import attempt_logs

    _tier()
    got = _accepted(v1_run)
    for arm, rec, _ in got:
        trainer, orch = _resolved(rec)
        out = v1_run / arm / "prime_out"
        assert Path(trainer["output_dir"]) == Path(orch["output_dir"]) == out, arm
        assert orch["eval"]["interval"] == orch["max_steps"] == trainer["max_steps"], arm
        assert trainer["weight_broadcast"]["type"] == "filesystem" == orch["weight_broadcast"]["type"], arm
    python = ensure("v1") / ".venv" / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import sys; from pathlib import Path; from prime_rl.utils.pathing import "
                            "get_log_dir; print(get_log_dir(Path(sys.argv[1])))", str(tmp_path / "prime_out")],
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-2000:]
    logs = Path(probe.stdout.strip().splitlines()[-1])  # where prime-rl puts an attempt's logs for this output dir
    (logs / "attempt_1").mkdir(parents=True)
    (logs / "attempt_1" / "trainer.log").write_text("x\n")
    assert attempt_logs(tmp_path / "prime_out") == [logs / "attempt_1" / "trainer.log"]


def test_iter_n_and_run_a_fork_iter0_with_resume_dir_and_skip_its_progress(v1_run: Path) -> None:
    """r40-layout: main's orchestrator raises when the restored train-source names differ (train_source.py:73-82);
    iter_N and Run A train on generated packages, so they fork iter_0's final checkpoint with resume.dir
    and [orchestrator.ckpt] skip_progress. Run B trains from the base model (no resume)."""
    _tier()
    final = v1_run / "iter_0" / "prime_out" / "checkpoints" / f"step_{SMALL[SMALL.index('--steps-per-run') + 1]}"
    for arm, rec, _ in _accepted(v1_run):
        trainer, orch = _resolved(rec)
        if arm.startswith(("iter_1", "run_a")):
            assert Path(trainer["resume"]["dir"]) == final and orch["ckpt"]["skip_progress"] is True, (arm, trainer["resume"])
        elif arm.startswith("run_b"):
            assert trainer["resume"] is None, arm


def test_every_launch_with_the_slurm_overlay_renders_an_sbatch_that_reinstalls_the_env_packages(
        v1_run: Path, tmp_path: Path) -> None:
    """Each launch again, with examples/slurm/cluster.toml and the job name and pre_run_command a --slurm run adds
    (phases/slurm_launch.launch_extras), through prime-rl main's dry run (one process for all): rl.sbatch
    rendered with the job name and 2 GPUs; after its `uv sync --all-extras --all-packages`, which removes
    pip-installed packages, the pre-run command reinstalls every generated package the arm's sources import,
    before `uv run rl`."""
    from prime_rl_dry_run import env_configs, replay, with_overlay
    from prime_rl_venvs import ensure

    from selfimprove.engines.preflight import with_output_dir
    from selfimprove.phases.slurm_launch import launch_extras
    from selfimprove.rundir import RunDir

    _tier()
    overlay = REPO / "examples" / "slurm" / "cluster.toml"
    rd = RunDir(v1_run)
    cfg = rd.read_run().model_copy(update={"slurm": str(overlay), "engine": "prime-rl"})
    argvs, outs = [], []
    for arm, rec, meta in _accepted(v1_run):
        _files, extra, name = launch_extras(rd, cfg, arm)
        flags = ["--slurm.job-name", name, "--slurm.pre-run-command", extra["slurm"]["pre_run_command"]]
        out = tmp_path / f"{arm}-{rec.name}"
        argvs.append(with_output_dir(with_overlay(meta["argv"], overlay, flags), out))
        outs.append((arm, rec, out / "prime_out", name))
    packages = sorted(str(p.parent) for p in v1_run.glob("*/*/pyproject.toml"))
    results = replay(str(ensure("v1") / ".venv" / "bin" / "rl"), argvs, packages, tmp_path)
    for (arm, rec, out, name), res in zip(outs, results):
        assert res["ok"], (arm, rec.name, res.get("error"))
        script = (out / "rl.sbatch").read_text().splitlines()
        assert f"#SBATCH --job-name={name}" in script and "#SBATCH --gres=gpu:2" in script, arm
        sync = script.index("uv sync --all-extras --all-packages")
        pre = next(i for i, ln in enumerate(script) if "; uv pip install --no-deps --reinstall" in ln)
        run = next(i for i, ln in enumerate(script) if ln.startswith("uv run rl @"))
        assert sync < pre < run, arm
        ids = {c["env"]["taskset"]["id"] for c in env_configs(rec / "configs").values()} - {"selfimprove_arith_v1"}
        for taskset_id in ids:  # each generated package the arm trains on is put back after the sync
            dirs = [d for d in packages if (Path(d) / taskset_id).is_dir()]
            assert dirs and all(script[pre].count(d) == 2 for d in dirs), (arm, taskset_id)  # on PYTHONPATH, reinstalled
