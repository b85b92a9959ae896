"""Shared fixtures: a fresh runs dir per test and a CLI runner that returns
(exit code, stdout, stderr)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfimprove.cli import app

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    return d


class Cli:
    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None):
        return self.runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture
def new_run(cli: Cli, runs_dir: Path):
    """Factory: bootstrap a run dir with small smoke-run settings; returns its Path."""

    def make(dataset: str = "selfimprove-arith", *extra: str) -> Path:
        res = cli(
            "bootstrap", dataset, "--runs-dir", str(runs_dir), "--model", "selfimprove/tiny-arith",
            "--budget", "15m", "--json", *extra,
        )
        assert res.exit_code == 0, res.stderr
        return Path(json.loads(res.stdout)["run_dir"])

    return make
