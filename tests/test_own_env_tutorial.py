"""docs/how-to/own-env-tutorial.md, command by command, on the template env: `new-env` to a report (issue 43).

The tutorial's commands with the smallest settings that still run every phase for real (the CPU engine,
the generic student, the codegen teacher, the gates, Phase 4's arms, the summary and the page):

- `pip install -e` is replaced by PYTHONPATH, so the test leaves the venv as it was;
- `student build` stops at 50 steps (the tutorial's default cap is 3000), so the run is made with the
  id the build prints (`build:ENV@HASH`), and baseline gets `--allow-no-signal`, which the tutorial
  names for a student that has not learned the env yet;
- 2 iterations (iter_0 and iter_1), 2 steps per arm of 16 rollouts, 20 evaluated rows.

Each step's wall time is printed (run with -s to see it): what a run of these settings costs here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEACHER = "examples/codegen_teacher.py:CodegenTeacher"  # as the tutorial writes it: found from any cwd
SMALL = ["--max-iters", "2", "--steps-per-run", "2", "--batch-size", "16", "--rollouts-per-example", "4",
         "--allow-small-batch", "--eval-examples", "20", "--budget", "30m"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("own_env")
    env = {**os.environ, "PYTHONPATH": str(work / "tut-env"), "SELFIMPROVE_CACHE": str(work / "cache")}
    env.pop("SELFIMPROVE_NO_STUDENT_BUILD", None)  # `student build` is the step under test
    times: dict[str, float] = {}

    def step(name: str, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "selfimprove", *args], capture_output=True, text=True,
                              cwd=work, env=env, timeout=600)
        times[name] = times.get(name, 0.0) + time.monotonic() - start
        assert proc.returncode in ok, f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
        return proc

    made = json.loads(step("new-env", "new-env", "tut-env", "--json").stdout)
    build = json.loads(step("student build", "student", "build", "tut-env", "--max-steps", "50", "--json").stdout)
    run_dir = step("bootstrap", "bootstrap", "tut-env", "--model", build["model_id"], *SMALL,
                   "--runs-dir", str(work / "runs")).stdout.strip()
    step("introspect", "introspect", "--run-dir", run_dir)
    step("baseline", "baseline", "--run-dir", run_dir, "--allow-no-signal")
    step("iterate", "iterate", "--run-dir", run_dir, "--teacher", TEACHER)
    step("iterate", "iterate", "--run-dir", run_dir)  # iter_1 was the last iteration: Phase 3 ends
    step("compare", "compare", "--run-dir", run_dir)
    finalize = step("finalize", "finalize", "--run-dir", run_dir)
    step("report", "report", "--run-dir", run_dir)
    print("\nown-env tutorial, wall seconds per step: " + ", ".join(f"{k} {v:.0f}" for k, v in times.items())
          + f"; total {sum(times.values()):.0f}")
    return {"made": made, "build": build, "run_dir": Path(run_dir), "finalize": finalize, "times": times}


def test_new_env_prints_the_tutorials_next_commands(tutorial) -> None:
    assert [s.split()[:3] for s in tutorial["made"]["next"]] == [
        ["pip", "install", "-e"], ["selfimprove", "student", "build"], ["selfimprove", "run", "tut-env"]]


def test_the_generic_student_is_built_from_the_envs_rows(tutorial) -> None:
    build = tutorial["build"]
    assert build["model_id"].startswith("build:tut-env@") and build["stopped_at_step"] <= 50
    assert set(build["final_check"]["groups"]) == {f"task={t}" for t in ("copy", "reverse", "sort", "add")}


def test_the_loop_reaches_a_finalized_run_with_every_arm(tutorial) -> None:
    run_dir = tutorial["run_dir"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "finalized" and run["end_reason"] == "max_iters_reached" and run["phase4_errors"] == []
    arms = [r["arm"] for r in json.loads((run_dir / "metrics.json").read_text())["iters"]]
    assert {"iter_0", "iter_1", "run_a", "run_b", "run_c"} <= set(arms)
    assert "## Final summary" in (run_dir / "scratchpad.md").read_text()
    assert (run_dir / "report.html").is_file()


def test_the_codegen_teacher_aimed_at_the_envs_tasks_and_passed_every_gate(tutorial) -> None:
    it = tutorial["run_dir"] / "iter_1"
    gate = json.loads((it / "gate_report.json").read_text())
    assert gate["passed"] and gate["failures"] == []
    rows = [json.loads(ln) for ln in (it / "dataset.jsonl").read_text().splitlines()]
    assert 500 <= len(rows) <= 1000
    weak = {g["group"].removeprefix("task=") for g in json.loads((it / "weakness_stats.json").read_text())["real"]["groups"]
            if g["class"] != "solved"}  # the task grouping labels a group task=NAME
    assert {r["info"]["task"] for r in rows} <= {"copy", "reverse", "sort", "add"}
    assert {r["info"]["task"] for r in rows} & weak  # the rows aim at groups the student has not solved
