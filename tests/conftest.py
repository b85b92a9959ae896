"""Shared fixtures: a fresh runs dir per test and a CLI runner that returns
(exit code, stdout, stderr).

Every test uses the built-in student that ships with the package
(src/selfimprove/rl/students/tiny-arith/); none builds one. If the shipped
student is stale (the warm-up recipe changed without `selfimprove student build`),
resolve_model fails at once with that message instead of running a 5-minute
warm-up inside some test, and a student in the user's cache never stands in for
it. The environment is set here, at import, so engine subprocesses inherit it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selfimprove.cli import app


REPO = Path(__file__).resolve().parents[1]

os.environ["SELFIMPROVE_NO_STUDENT_BUILD"] = "1"
os.environ["SELFIMPROVE_CACHE"] = os.path.join(tempfile.gettempdir(), f"selfimprove-test-cache-{os.getpid()}")  # never created

# One iter_0-done run (fake engine) for the whole session, copied per test by `run`: defined here,
# not imported into each module, because a module-level import makes pytest build it once per module.
from loop_helpers import baseline_run, run  # noqa: E402,F401


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


def pytest_terminal_summary(terminalreporter) -> None:
    """After the run: the fault suite's figure (tests/test_faults.py), when it ran."""
    import sys

    faults = next((m for name, m in list(sys.modules.items()) if name.rpartition(".")[2] == "test_faults"), None)
    for line in faults.figure_lines() if faults is not None else []:
        terminalreporter.write_line(line)
