"""The prime-rl engine's preflight (engines/preflight.py) against prime-rl main's real `rl --dry-run`, with the
dry-run checkout of tests/prime_rl_venvs.py standing in for $PRIME_RL_DIR; crash causes from prime-rl's own
messages (engines/crash_cause.py); the shipped canonical config's seq_len for a real model.

The preflight tests skip with one line where ../shared/upstream (prime-rl's archives) is absent.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from selfimprove.engines import preflight
from selfimprove.engines.crash_cause import setup_failure, telling_log
from selfimprove.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]
CANONICAL_V1 = REPO / "configs" / "basic" / "selfimprove-arith" / "rl.toml"
CLUSTER = REPO / "examples" / "slurm" / "cluster.toml"
# A [deployment] prime-rl refuses (SingleNodeDeploymentConfig.validate_gpu_count) and the tool's checks do not.
TOO_MANY = "\n[deployment]\nnum_train_gpus = 5\ngpus_per_node = 4\n"


@pytest.fixture
def prime_rl_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """prime-rl main's checkout with its dry-run venv as PRIME_RL_DIR; this checkout's src/ importable in it
    (the hub env's taskset module, as a user installs their env into prime-rl's venv)."""
    from prime_rl_venvs import prime_rl_checkout

    root = prime_rl_checkout("v1")
    monkeypatch.setenv("PRIME_RL_DIR", str(root))
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    return root


def iter0_argv(out: Path, *files: Path) -> list[str]:
    argv = ["@", str(CANONICAL_V1)]
    for f in files:
        argv += ["@", str(f)]
    return [*argv, "--run.name", "prime_out", "--output-dir", str(out)]


def test_preflight_states_two_gpus_per_arm_and_refuses_a_machine_with_one(prime_rl_dir, tmp_path, monkeypatch):
    """The default deployment resolved by prime-rl: 1 inference + 1 trainer GPU; CUDA_VISIBLE_DEVICES decides
    what the machine gives, as prime-rl's launcher reads it. Nothing is written to the output dir."""
    argv = iter0_argv(tmp_path / "arm")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    needs = preflight.preflight(argv, on_slurm=False)
    assert (needs.gpus, needs.nodes, needs.detail) == (2, 1, "1 inference + 1 trainer")
    assert needs.line() == "each arm needs 2 GPUs (1 inference + 1 trainer) on one node"
    assert not (tmp_path / "arm").exists()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(preflight.PreflightRefused) as e:
        preflight.preflight(argv, on_slurm=False)
    assert "each arm needs 2 GPUs" in str(e.value) and "this machine gives 1 (CUDA_VISIBLE_DEVICES='0')" in str(e.value)


def test_preflight_on_slurm_checks_the_overlays_deployment_not_this_machine(prime_rl_dir, tmp_path, monkeypatch):
    """With examples/slurm/cluster.toml the job's node gives gpus_per_node = 2: enough; this GPU-less machine is
    not asked. A [deployment] that cannot fit is refused by prime-rl itself, quoted from its boxed message."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    needs = preflight.preflight(iter0_argv(tmp_path / "arm", CLUSTER), on_slurm=True)
    assert (needs.gpus, needs.gpus_per_node) == (2, 2)
    bad = tmp_path / "bad.toml"
    bad.write_text(CLUSTER.read_text() + "num_train_gpus = 3\n")  # 1 + 3 > gpus_per_node 2
    with pytest.raises(preflight.PreflightRefused) as e:
        preflight.preflight(iter0_argv(tmp_path / "arm", bad), on_slurm=True)
    msg = str(e.value)
    assert "\n" not in msg and "prime-rl refused this config before any launch" in msg
    assert "1 validation error for RLConfig - --deployment.single-node - Value error, Total GPU count (4 = 3 train + 1 infer) " \
           "exceeds gpus_per_node - (2)." in msg and "│" not in msg


def test_baseline_refuses_a_config_prime_rl_refuses_before_any_launch(prime_rl_dir, new_run, cli, tmp_path, monkeypatch):
    """`selfimprove baseline` on the prime-rl engine: prime-rl's dry run of iter_0's exact argv refuses the
    canonical config's [deployment]; exit 1 with one line (what to fix + prime-rl's words); no job.json, no
    prime_out: no launch happened."""
    from test_baseline import SMALL, hub_env

    marker = tmp_path / "launched"
    monkeypatch.setenv("SELFIMPROVE_PRIME_RL_CMD", f"{sys.executable} -c \"open('{marker}', 'w')\"")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    run = new_run("selfimprove-arith", *SMALL, "--stack", "v1", "--engine", "prime-rl", "--model", "Qwen/Qwen3-0.6B",
                  "--env-python", sys.executable)
    hub_env(run, v1=True)
    bad = tmp_path / "rl.toml"
    bad.write_text(CANONICAL_V1.read_text() + TOO_MANY)
    res = cli("baseline", "--run-dir", run, "--config", bad)
    assert res.exit_code == 1, res.stdout + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, res.stderr  # one line, after the phase's own start line
    err = errors[0]
    assert "iter_0: prime-rl refused this config before any launch" in err and "fix it in the canonical config" in err
    assert "Total GPU count (6 = 5 train + 1 infer) exceeds gpus_per_node" in err
    arm = RunDir(run).iter(0)
    assert not marker.exists() and not (arm.dir / "job.json").exists() and not arm.prime_out.exists()


def test_preflight_needs_a_prime_rl_checkout(monkeypatch):
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)
    with pytest.raises(preflight.PreflightRefused, match="PRIME_RL_DIR is not set: set it to prime-rl's checkout"):
        preflight.preflight(["@", "x.toml"], on_slurm=False)


# ---------------------------------------------------------------- crash causes in prime-rl main's words


def _real_refusal(prime_rl_dir: Path, tmp_path: Path, extra: str) -> str:
    """What prime-rl main's `rl` prints when it refuses (its launcher's output goes to the arm's train.log)."""
    import subprocess

    cfg = tmp_path / "rl.toml"
    cfg.write_text(CANONICAL_V1.read_text() + extra)
    r = subprocess.run([str(prime_rl_dir / ".venv" / "bin" / "rl"), "@", str(cfg), "--output-dir", str(tmp_path / "o"),
                        "--dry-run"], capture_output=True, text=True, env={**os.environ}, timeout=600)
    assert r.returncode != 0
    return r.stdout + r.stderr


def test_boxed_validation_error_and_missing_taskset_are_setup_failures(prime_rl_dir, tmp_path, monkeypatch):
    """prime-rl main's rich panel `│ 1 validation error for RLConfig │`, and verifiers' "taskset 'x' not found",
    each as the real `rl` prints them, give the cause and its fix instead of --restart."""
    log = tmp_path / "train.log"
    log.write_text("[selfimprove] 2026-12-07 00:00:00 launch #1: uv run rl ...\n" + _real_refusal(prime_rl_dir, tmp_path, TOO_MANY))
    cause = setup_failure(log)
    assert cause and cause.startswith("the engine refused its config (1 validation error(s) for RLConfig; first: "
                                      "--deployment.single-node: Value error, Total GPU count"), cause
    monkeypatch.setenv("PYTHONPATH", "")  # the hub env's taskset is not installed in prime-rl's venv
    log.write_text("[selfimprove] 2026-12-07 00:00:00 launch #1: uv run rl ...\n" + _real_refusal(prime_rl_dir, tmp_path, ""))
    cause = setup_failure(log)
    assert cause and cause.startswith("the engine's Python cannot import taskset 'selfimprove_arith_v1'"), cause
    assert "$PRIME_RL_DIR/.venv" in cause


def test_a_trainer_crash_is_read_from_mains_latest_attempt_log(tmp_path):
    """Main's trainer writes to prime_out/logs/attempt_N/trainer.log, not train.log: the cause names that
    log (the latest attempt's, not an earlier one's), and an unrecognised crash quotes it."""
    prime_out = tmp_path / "prime_out"
    log = tmp_path / "train.log"
    log.write_text("[selfimprove] x launch #2: uv run rl ...\nINFO Starting RL run\nERROR Trainer failed\n")
    old, new = prime_out / "logs" / "attempt_1", prime_out / "logs" / "attempt_2"
    for d, text in ((old, "ModuleNotFoundError: No module named 'gguf'\n"),
                    (new, "Traceback (most recent call last):\nModuleNotFoundError: No module named 'flash_attn'\n")):
        d.mkdir(parents=True)
        (d / "trainer.log").write_text(text)
        (d / "inference.log").write_text("INFO vLLM ready\n")
    cause = setup_failure(log, prime_out)
    assert cause and "cannot import flash_attn" in cause and cause.endswith(f"(in {new / 'trainer.log'})"), cause
    assert setup_failure(log) is None  # train.log alone says nothing
    (new / "trainer.log").write_text("Traceback (most recent call last):\nRuntimeError: CUDA out of memory\n")
    assert setup_failure(log, prime_out) is None and telling_log(log, prime_out) == new / "trainer.log"


# ---------------------------------------------------------------- seq_len of a real model


def test_the_shipped_canonical_config_gives_a_real_model_its_own_seq_len(tmp_path):
    """configs/<dataset>/rl.toml is the tiny student's (seq_len 256): another model gets the seed's 2048,
    capped by its own context when its config.json is here; the tiny student keeps 256; a user's file is kept."""
    from selfimprove.phases.canonical_fit import shipped_for_another_model
    from selfimprove.stack.toml_paths import read_toml

    data = read_toml(CANONICAL_V1)
    assert data["seq_len"] == 256
    refit = shipped_for_another_model(CANONICAL_V1, data, "Qwen/Qwen3-0.6B")
    assert refit is not None and refit[0]["seq_len"] == 2048 and "selfimprove/tiny-arith's" in refit[1]
    seed = REPO / "configs" / "selfimprove-arith" / "rl.toml"  # the seed's has no [inference]: a GPU arm needs one
    refit = shipped_for_another_model(seed, read_toml(seed), "Qwen/Qwen3-0.6B")
    assert refit is not None and refit[0]["inference"] == {} and refit[0]["seq_len"] == 2048
    assert shipped_for_another_model(CANONICAL_V1, data, "selfimprove/tiny-arith") is None
    mine = tmp_path / "rl.toml"
    mine.write_text(CANONICAL_V1.read_text())
    assert shipped_for_another_model(mine, data, "Qwen/Qwen3-0.6B") is None
    assert json.loads(json.dumps(data))["seq_len"] == 256  # the shipped file's data is not changed in place
