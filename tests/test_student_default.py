"""A bare `selfimprove bootstrap DATASET` on a machine with no GPU and no prime-rl (issue 43, item 5): the CPU
engine and a built-in student, said in one line on stderr, instead of the procedure's Qwen3-0.6B on prime-rl
chosen silently. On a GPU machine, with $PRIME_RL_DIR, --slurm, --engine prime-rl or --model, nothing changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfimprove.engines import preflight
from selfimprove.phases.student_default import POLICY_ENV, SEED_MODEL, default_student


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POLICY_ENV, raising=False)
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)
    monkeypatch.setattr(preflight, "gpus_visible", lambda: (0, "no nvidia-smi on PATH and CUDA_VISIBLE_DEVICES unset"))


def _run(run_dir: str) -> dict:
    return json.loads((Path(run_dir) / "run.json").read_text())


def test_bare_bootstrap_without_gpu_picks_the_cpu_engine_and_the_envs_student(cli, runs_dir: Path, no_gpu) -> None:
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", runs_dir)
    assert res.exit_code == 0, res.stderr
    run_dir = res.stdout.strip()
    assert len(res.stdout.strip().splitlines()) == 1  # stdout stays RUN_DIR alone
    run = _run(run_dir)
    assert (run["model"], run["engine"]) == ("selfimprove/tiny-arith", "local")
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("bootstrap: ")]
    assert len(lines) == 1, res.stderr
    assert all(w in lines[0] for w in ("no GPU", "selfimprove/tiny-arith", SEED_MODEL, "prime-rl", "--model"))
    assert "chosen by bootstrap" in (Path(run_dir) / "scratchpad.md").read_text()


def test_another_env_gets_its_generic_student(cli, runs_dir: Path, no_gpu) -> None:
    """An env without a student of its own gets build:ENV (the hub id's name when one is given)."""
    res = cli("bootstrap", "gsm8k", "--runs-dir", runs_dir)
    assert res.exit_code == 0, res.stderr
    assert (_run(res.stdout.strip())["model"], _run(res.stdout.strip())["engine"]) == ("build:gsm8k", "local")
    assert "build:gsm8k" in res.stderr and "generic student" in res.stderr
    assert default_student(None, "auto", "mine", "owner/my-env@1.0", None)[0] == "build:my-env"


def test_a_gpu_machine_keeps_the_procedures_default_silently(cli, runs_dir: Path, no_gpu, monkeypatch) -> None:
    monkeypatch.setattr(preflight, "gpus_visible", lambda: (2, "nvidia-smi -L"))
    res = cli("bootstrap", "gsm8k", "--runs-dir", runs_dir)
    assert res.exit_code == 0, res.stderr
    assert (_run(res.stdout.strip())["model"], _run(res.stdout.strip())["engine"]) == (SEED_MODEL, "prime-rl")
    assert "bootstrap: " not in res.stderr


@pytest.mark.parametrize("given, expected", [
    ((None, "prime-rl", None), (SEED_MODEL, "prime-rl")),            # the user asked for prime-rl
    ((None, "auto", "cluster.toml"), (SEED_MODEL, "auto")),          # SLURM: the GPUs are on other nodes
    (("Qwen/Qwen3-1.7B", "auto", None), ("Qwen/Qwen3-1.7B", "auto")),  # a model named: never replaced
    ((None, "local", None), ("selfimprove/tiny-arith", "local")),    # the CPU engine asked for: its student
])
def test_what_the_user_named_is_kept(no_gpu, given, expected) -> None:
    model, engine, slurm = given
    assert default_student(model, engine, "selfimprove-arith", None, slurm)[:2] == expected


def test_prime_rl_dir_or_the_procedure_policy_keeps_the_procedures_default(no_gpu, monkeypatch) -> None:
    monkeypatch.setenv("PRIME_RL_DIR", "/opt/prime-rl")
    assert default_student(None, "auto", "gsm8k", None, None) == (SEED_MODEL, "auto", None)
    monkeypatch.delenv("PRIME_RL_DIR")
    for value in ("procedure", "seed"):  # "seed": the value's first name, still honoured
        monkeypatch.setenv(POLICY_ENV, value)
        assert default_student(None, "auto", "gsm8k", None, None) == (SEED_MODEL, "auto", None)
