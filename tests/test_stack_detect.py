"""Dialect detection: from $PRIME_RL_DIR's config schema and from the env's API; --stack overrides;
a mismatch fails at bootstrap, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfimprove.errors import ConfigError, UsageError
from selfimprove.stack.detect import SCHEMA_FILE, choose_stack, env_api, prime_rl_stack

# Just the field lines detection reads (written here, shaped like each schema's declarations).
SEED_SCHEMA = "class TrainConfig:\n    env: list[TrainEnvConfig] = []\n    rollouts_per_example: int = 1\n"
V1_SCHEMA = "class TrainConfig:\n    source: list[TrainSourceConfig] = []\n    group_size: int = 1\n"


def checkout(root: Path, schema: str, version: str) -> Path:
    (root / SCHEMA_FILE).parent.mkdir(parents=True)
    (root / SCHEMA_FILE).write_text(schema)
    (root / "pyproject.toml").write_text(f'[project]\nname = "prime-rl"\nversion = "{version}"\n')
    return root


@pytest.fixture
def envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two importable env modules: a classic one and a v1 Taskset one."""
    d = tmp_path / "envs"
    d.mkdir()
    (d / "classic_env.py").write_text("def load_environment(**kw):\n    return None\n")
    (d / "taskset_env.py").write_text("import verifiers.v1 as vf\n\nclass Arith(vf.Taskset):\n    pass\n\n__all__ = ['Arith']\n")
    monkeypatch.syspath_prepend(str(d))
    return d


def test_prime_rl_checkout_schema_decides(tmp_path: Path):
    assert prime_rl_stack(checkout(tmp_path / "a", SEED_SCHEMA, "0.5.0"))[0] == "seed"
    stack, seen = prime_rl_stack(checkout(tmp_path / "b", V1_SCHEMA, "0.8.0"))
    assert stack == "v1" and "prime-rl 0.8.0" in seen
    assert prime_rl_stack(None) == (None, "no PRIME_RL_DIR")
    with pytest.raises(UsageError, match="matches neither supported dialect"):
        prime_rl_stack(checkout(tmp_path / "c", "class X:\n    pass\n", "0.7.0"))


def test_env_api_from_source(envs: Path):
    assert env_api("classic_env")[0] == "seed"
    assert env_api("taskset_env")[0] == "v1"
    assert env_api("no_such_env_module")[0] is None


def test_choose_stack(tmp_path: Path, envs: Path):
    v1 = str(checkout(tmp_path / "v1", V1_SCHEMA, "0.8.0"))
    assert choose_stack(None, v1, "taskset_env").stack == "v1"
    no_checkout = choose_stack(None, None, "taskset_env")
    assert no_checkout.stack == "v1" and "following the env's API" in no_checkout.source
    assert choose_stack(None, None, "no_such_env_module").stack == "seed"
    # --stack overrides detection where the evidence allows it: the local engine never runs the checkout
    forced = choose_stack("seed", v1, "classic_env", engine="local")
    assert forced.stack == "seed" and forced.source.startswith("--stack seed")
    with pytest.raises(UsageError, match=r"--stack seed: prime-rl 0.8.0 .* speaks the v1 dialect; use --stack v1"):
        choose_stack("seed", v1, "classic_env")  # ... and refused where the checkout contradicts it
    with pytest.raises(ConfigError, match=r"#3226.*v1 Taskset.*--stack seed"):
        choose_stack(None, v1, "classic_env")
    both = choose_stack(None, v1, "selfimprove_arith")  # a classic env with a v1 Taskset named by <module>_v1
    assert both.stack == "v1" and "a v1 Taskset in 'selfimprove_arith_v1'" in both.source
    assert choose_stack(None, None, "selfimprove_arith").stack == "seed"  # no checkout: the classic API, as before
    with pytest.raises(UsageError, match="--stack v2"):
        choose_stack("v2", None, None)


def test_bootstrap_records_the_stack_and_refuses_a_mismatch(cli, tmp_path: Path, envs: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("PRIME_RL_DIR", str(checkout(tmp_path / "prl", V1_SCHEMA, "0.8.0")))
    res = cli("bootstrap", "classic-env", "--hub-id", "classic-env", "--runs-dir", runs, "--model", "selfimprove/tiny-arith")
    assert res.exit_code != 0
    err = " ".join(res.stderr.split())
    assert "#3226" in err and "load_environment" in err
    assert not runs.exists() or not any(runs.iterdir())  # nothing written
    res = cli("bootstrap", "taskset-env", "--hub-id", "taskset-env", "--runs-dir", runs,
              "--model", "selfimprove/tiny-arith", "--json")
    assert res.exit_code == 0, res.stderr
    run = json.loads(res.stdout)
    assert run["stack"] == "v1" and "prime-rl 0.8.0" in run["stack_source"] and "inference.vllm.seed" in run["stack_seed_note"]
