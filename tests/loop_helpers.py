"""Helpers shared by the loop tests: a baseline run made once with the fake engine
(tests/fakes/fake_rl.py) and copied per test, and a small scripted teacher."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from selfimprove.rundir import RunDir

TESTS = Path(__file__).parent
FAKE = TESTS / "fakes" / "fake_rl.py"

# A small scripted generator (the teacher's file): valid rows from gate_fixtures,
# whose reasoning ends in the arith env's <answer>N</answer> format.
GENERATOR = f"""
import json, sys
sys.path.insert(0, {str(TESTS)!r})
from gate_fixtures import make_rows, valid_report
BREAK = {{break_rules!r}}
# Skeleton rows name real failed prompts of this iteration (step, idx from failures.jsonl).
failed = [json.loads(line) for line in open("failures.jsonl")]
rows = make_rows(valid_report(), skeleton_origins=[(f["step"], f["idx"]) for f in failed] or None)
if "hard" in BREAK:
    for r in rows:
        r["info"]["difficulty"] = "med"
if "round_trip" in BREAK:
    rows[3]["info"]["reasoning"] = "no tag here"
if "reverse" in BREAK:  # not a break: the same rows in another order (a regenerated, different dataset.jsonl)
    rows.reverse()
if "too_long" in BREAK:  # two questions longer than tiny-arith's 256 positions leave room for (issue 36)
    for i in (5, 9):
        rows[i]["question"] += " Show every step of the working before you answer." * 3
with open("dataset.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\\n")
"""


def write_teacher_files(it_dir: Path, break_rules: tuple[str, ...] = (), notes: bool = True) -> None:
    """The teacher's two files and (with notes) its scratchpad sections of this iteration."""
    sys.path.insert(0, str(TESTS))
    from gate_fixtures import report_dict, write_report

    from selfimprove.scratchpad import fill_teacher_sections

    write_report(it_dir / "weakness_report.md", report_dict())
    (it_dir / "gen_dataset.py").write_text(GENERATOR.format(break_rules=list(break_rules)))
    if notes:
        n = int(it_dir.name.removeprefix("iter_"))
        fill_teacher_sections(it_dir.parent / "scratchpad.md", n,
                              {1: "Failures drop a step.", 3: "One template per bucket.", 4: "None."},
                              worked_prev="The fixture teacher has nothing to carry over.")


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="session")
def baseline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose iter_0 is done (fake engine), made once and copied per test."""
    root = tmp_path_factory.mktemp("iterbase")
    env = {**os.environ, "SELFIMPROVE_RL_CMD": f"{sys.executable} {FAKE}", "FAKE_RL_STEP_S": "0.001"}
    cli = [sys.executable, "-m", "selfimprove"]
    boot = subprocess.run(
        [*cli, "bootstrap", "selfimprove-arith", "--runs-dir", str(root), "--model", "selfimprove/tiny-arith",
         "--max-iters", "2", "--steps-per-run", "4", "--batch-size", "32", "--rollouts-per-example", "4",
         "--allow-small-batch", "--eval-examples", "20", "--budget", "5h"],
        capture_output=True, text=True, env=env, check=True,
    )
    run = Path(boot.stdout.strip().splitlines()[-1])
    for phase in ("introspect", "baseline"):
        proc = subprocess.run([*cli, phase, "--run-dir", str(run)], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
    return run


@pytest.fixture
def run(baseline_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunDir:
    dst = tmp_path / baseline_run.name
    shutil.copytree(baseline_run, dst, symlinks=True)
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.001")
    return RunDir(dst)


