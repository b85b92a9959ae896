"""--env-path envs are checked like importable ones (issue 36): the env's API is read from the project's
files before anything is written or installed, so `--stack seed` with a Taskset-only env is refused at
bootstrap whichever way the env is found."""

from __future__ import annotations

from pathlib import Path

from selfimprove.stack.detect import env_api

V1_ONLY = Path(__file__).parent / "envs" / "v1_only_sums"


def test_the_api_of_an_uninstalled_env_project_is_read_from_its_files(monkeypatch) -> None:
    import sys

    # not importable here: another test file of the same worker may have imported the fixture package
    # (tests/test_v1_only_env.py puts it on sys.path for its own tests); its module object must not count
    monkeypatch.delitem(sys.modules, "v1_only_sums", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p).resolve() != V1_ONLY.resolve()])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert env_api("v1_only_sums", None)[0] is None
    stack, seen = env_api("v1_only_sums", None, V1_ONLY)
    assert stack == "v1" and "Taskset" in seen


def test_stack_seed_with_a_taskset_only_env_path_is_refused_before_anything_is_written(cli, tmp_path) -> None:
    runs = tmp_path / "runs"
    res = cli("bootstrap", "v1-only-sums", "--env-path", V1_ONLY, "--stack", "seed", "--runs-dir", runs,
              "--model", "selfimprove/tiny-arith")
    err = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "--stack seed" in err and "--stack v1" in err, err
    assert not runs.exists() or not any(runs.iterdir())
    res = cli("bootstrap", "v1-only-sums", "--env-path", V1_ONLY, "--stack", "v1", "--runs-dir", runs,
              "--model", "selfimprove/tiny-arith")  # the advice
    assert res.exit_code == 0, res.stderr


def test_a_failed_env_path_introspect_records_what_it_installed(cli, tmp_path) -> None:
    """--env-path installs the project, then the env fails on bad --env-args: run.json keeps env_path, so the
    next introspect (with good args, no --env-path) installs from it again ("source env-path", not "local")."""
    import json

    env_dir = Path(__file__).parent / "envs" / "si_no_eval_reverse"
    res = cli("bootstrap", "si-no-eval-reverse", "--runs-dir", tmp_path / "runs", "--model", "selfimprove/tiny-arith",
              "--json")
    assert res.exit_code == 0, res.stderr
    run = Path(json.loads(res.stdout)["run_dir"])
    res = cli("introspect", "--run-dir", run, "--env-path", env_dir, "--env-args", '{"num_train": "many"}')
    assert res.exit_code != 0
    assert json.loads((run / "run.json").read_text())["env_path"] == str(env_dir.resolve())
    res = cli("introspect", "--run-dir", run, "--env-args", "{}")
    assert res.exit_code == 0, res.stderr
    assert json.loads((run / "hub_env.json").read_text())["source"] == "env-path"
