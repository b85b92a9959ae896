"""`selfimprove run --stack v1` end to end on an env with ONLY a verifiers v1 Taskset
(tests/envs/v1_only_arith: no load_environment), with the REAL CPU engine and the example teacher.

Every step that reads the env goes through the Taskset: introspect, the round trip (the hub
Task's rewards on each generated row's reasoning), decontamination (hashed v1 eval prompts),
the teacher's train questions, the generated v1 package and training/eval.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "envs" / "v1_only_arith"
TEACHER = f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher"
SMALL = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "4", "--batch-size", "32",
         "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "50", "--budget", "30m"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("run_v1_only")
    env = {**os.environ, "PYTHONPATH": str(FIXTURE), "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run([sys.executable, "-m", "selfimprove", "run", "v1-only-arith", "--stack", "v1", *SMALL,
                           "--runs-dir", str(runs), "--teacher", TEACHER, "--json"],
                          capture_output=True, text=True, timeout=1500, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(json.loads(proc.stdout)["run_dir"])


def test_taskset_only_run_finishes(run_dir: Path) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    assert run["stack"] == "v1" and (run["status"], run["end_reason"]) == ("finalized", "max_iters_reached") and run["phase4_errors"] == []
    assert "## Final summary" in (run_dir / "scratchpad.md").read_text()
    hub = json.loads((run_dir / "hub_env.json").read_text())
    assert (hub["api"], hub["env_class"], hub["rubric_class"]) == ("verifiers.v1", "ArithOnlyTaskset", "ArithOnlyTask")
    assert (hub["train_size"], hub["eval_size"], len(hub["train_samples"])) == (20000, 1000, 3)


def test_gates_read_the_taskset(run_dir: Path) -> None:
    gate = json.loads((run_dir / "iter_1" / "gate_report.json").read_text())
    rows = sum(1 for line in (run_dir / "iter_1" / "dataset.jsonl").open() if line.strip())
    assert gate["passed"] and gate["stats"]["round_trip"]["round_trip_ok"] == rows > 0
    cache = json.loads((run_dir / "eval_ngrams.json").read_text())
    assert cache["key"] == {"api": "verifiers.v1", "taskset_id": "v1_only_arith", "args": {"split": "eval"}, "limit": None}
    assert cache["index"]["n_questions"] == 1000 and cache["index"]["source"] == "eval_split"


def test_generated_package_uses_the_hub_task(run_dir: Path) -> None:
    package = json.loads((run_dir / "iter_1" / "package.json").read_text())["package"]
    source = (run_dir / "iter_1" / package / package / "__init__.py").read_text()
    assert "HUB_MODULE = 'v1_only_arith'" in source and "exact_answer" not in source  # by reference, not copied
