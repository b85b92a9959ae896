"""Shared fixtures: a fresh runs dir per test and a CLI runner that returns
(exit code, stdout, stderr).

Every test uses the built-in student that ships with the package
(src/selfimprove_arith/student/tiny-arith/); none builds one. If the shipped
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
# The seed's default student on every test machine, GPU or not (tests/test_student_default.py unsets it
# to test the choice a machine without GPUs makes): fixtures that bootstrap bare keep their recorded defaults.
os.environ["SELFIMPROVE_STUDENT_DEFAULT"] = "procedure"
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # two test workers share 2 cores: idle torch threads must sleep, not spin
os.environ["SELFIMPROVE_CACHE"] = os.path.join(tempfile.gettempdir(), f"selfimprove-test-cache-{os.getpid()}")  # never created

# One iter_0-done run (fake engine) for the whole session, copied per test by `run`: defined here,
# not imported into each module, because a module-level import makes pytest build it once per module.
from loop_helpers import baseline_run, run  # noqa: E402,F401
# The one-node SLURM cluster (session-scoped, per worker; skips with one line where it cannot start).
from slurm_cluster import slurm_cluster  # noqa: E402,F401


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


# The longest test files, longest first (per-file sums of --durations on 2 cores, 2026-12-07). Under
# `make test` (pytest-xdist, --dist loadfile, --no-loadscope-reorder) files go to the two workers in
# collection order as each worker frees up, so starting the longest ones first keeps a 10-minute file
# from starting last and stretching the wall time. Without --no-loadscope-reorder, xdist 3.x orders
# files by their number of tests instead, and a long one-test file (the two-seed run, the own-env
# tutorial) starts last. Scheduling only: any order passes.
LONGEST_FIRST = ["test_slurm.py", "test_run.py", "test_iterate.py", "test_llm_teacher_server.py", "test_run_v1.py",
                 "test_faults.py", "test_own_env_tutorial.py", "test_compare_seeds_run.py", "test_run_v1_only.py",
                 "test_skill_rehearsal.py", "test_reasoning_gym_run.py", "test_compare.py", "test_llm_teacher.py",
                 "test_compare_parallel.py", "test_rl_engine.py", "test_report_drill.py", "test_v1_only_env.py",
                 "test_verifiers_v1.py", "test_env_python.py", "test_report_page.py", "test_row_fits_student.py",
                 "test_student_build.py", "test_baseline.py", "test_introspect.py", "test_decontam.py",
                 "test_prime_rl_preflight.py", "test_arith_v1.py", "test_no_eval_split.py"]


def pytest_collection_modifyitems(items) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


# The fault suite's figure, from the test reports: under xdist the tests run in worker
# processes, so the controller sees only reports, never tests/test_faults.py's globals.
FAULT_TEST = "test_faults.py::test_kill_at_point_then_rerun_ends_like_the_undisturbed_run["
_fault_outcomes: dict[str, bool] = {}


def pytest_runtest_logreport(report) -> None:
    if FAULT_TEST not in report.nodeid:
        return
    point = report.nodeid.split(FAULT_TEST, 1)[1].rstrip("]")
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _fault_outcomes[point] = report.passed and not hasattr(report, "wasxfail")


def pytest_terminal_summary(terminalreporter) -> None:
    """After the run: the fault suite's figure (tests/test_faults.py), when it ran."""
    if not _fault_outcomes:
        return
    survived = sum(_fault_outcomes.values())
    terminalreporter.write_line(f"fault suite: {survived}/{len(_fault_outcomes)} kill -9 points survived")
    for name, ok in _fault_outcomes.items():
        terminalreporter.write_line(f"  {'survived' if ok else 'FAILED  '}  {name}")
