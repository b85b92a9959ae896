"""Rehearse SKILL.md: take its fenced ```bash commands in order, fill in the variables the
way its "Arguments" section says, and run them with the REAL CPU engine on the embedded
default (selfimprove-arith, selfimprove/tiny-arith, the cheapest settings of the slow e2e
tests, one iteration). The teacher's two files come from the scripted teacher
(examples/arith_teacher.py), called at each stop of `iterate` as the skill tells the agent
to act. The run must reach finalize: if the skill's commands stop working, this fails.

Measured on 2026-12-01: 2563 s wall (iter_0, iter_1, Runs A/B/C, finalize) on 2 cores
shared with ~5 other test runs (load average 8-14); most of it is waiting for a core."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from selfimprove.phases.iterate import current_iteration
from selfimprove.rundir import RunDir
from selfimprove.teacher import load_teacher, make_context

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TEACHER = f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher"
# What a user would type after the dataset: /synthetic-self-improve-rl selfimprove-arith <these>
FLAGS = ["--model=selfimprove/tiny-arith", "--max-iters=2", "--steps-per-run=6", "--batch-size=64",
         "--rollouts-per-example=4", "--allow-small-batch", "--eval-examples=100", "--budget=30m",
         '--env-args={"num_eval_examples": 100}']
PHASES = ["bootstrap", "introspect", "baseline", "iterate", "compare", "finalize"]
MAX_TEACHER_ATTEMPTS = 4


def procedure(text: str) -> list[str]:
    """The skill's ```bash blocks as commands, in order (continuations joined, comments dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def fill(command: str, values: dict[str, str]) -> str:
    for var, value in values.items():
        command = command.replace(var, value)
    assert "$" not in command.replace("$(", ""), f"unfilled variable in: {command}"
    return command


def bash(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=REPO, timeout=1500)


def test_skill_commands_reach_finalize(tmp_path: Path) -> None:
    commands = procedure((REPO / "SKILL.md").read_text(encoding="utf-8"))
    assert [re.search(r"selfimprove (\w+)", c).group(1) for c in commands] == PHASES
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    values = {'"${FLAGS[@]}"': shlex.join([*FLAGS, f"--runs-dir={tmp_path}"]), "$DATASET": "selfimprove-arith",
              "$SEEDS": "1"}
    teacher = load_teacher(TEACHER)
    rd: RunDir | None = None
    for command in commands:
        if command.startswith("RUN_DIR=$("):  # Phase 0: capture the printed run dir
            proc = bash(fill(command, values) + '; echo "$RUN_DIR"', env)
            assert proc.returncode == 0, proc.stderr
            rd = RunDir(proc.stdout.strip().splitlines()[-1])
            values["$RUN_DIR"] = shlex.quote(str(rd.root))
            continue
        line = fill(command, values)
        if " iterate " not in f"{line} ":
            proc = bash(line, env)
            assert proc.returncode == 0, f"{line}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
            continue
        attempts: dict[int, int] = {}
        while True:  # the skill's Phase 3 loop: act on each stop, re-run until "Phase 3 ended"
            proc = bash(line, env)
            if proc.returncode == 0 and "Phase 3 ended" in proc.stdout:
                break
            assert proc.returncode in (0, 3, 4), f"{line}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
            if proc.returncode == 0:
                continue  # an iteration finished and the next one is prepared
            n = current_iteration(rd)
            attempts[n] = attempts.get(n, 0) + 1
            assert attempts[n] <= MAX_TEACHER_ATTEMPTS, proc.stderr[-3000:]
            fresh = proc.returncode == 3 and "teacher: fill" in proc.stderr
            teacher(make_context(rd, n, None if fresh else proc.stderr))
    cfg = rd.read_run()
    assert (cfg.status, cfg.end_reason) == ("finalized", "max_iters_reached") and cfg.end_ts is not None  # finalize closed the run
    assert [r.arm for r in rd.read_metrics().iters] == ["iter_0", "iter_1", "run_a", "run_b", "run_c"]
    assert (rd.iter(1).dir / "gen_dataset.py").is_file() and "## Final summary" in rd.scratchpad.read_text()
    assert json.loads((rd.root / "best_iter.json").read_text())["best_iter"] == 1
