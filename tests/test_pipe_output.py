"""Output that survives a pipe (issue 24, round 3): when stdout/stderr are not a terminal (an
agent's shell, a log file) no path or log line is wrapped, and a training job prints a plain
progress line (arm, step, train reward) at least every PLAIN_PROGRESS_S seconds instead of a
progress bar that draws nothing until the job ends."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from selfimprove.ui import PlainProgress

from loop_helpers import FAKE

DEEP = "a_rather_long_directory_name_that_would_be_split_by_rich_at_eighty_columns"


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "SELFIMPROVE_RL_CMD": f"{sys.executable} {FAKE}", **env}
    full.pop("COLUMNS", None)  # rich's default for a pipe: 80 columns
    return subprocess.run([sys.executable, "-m", "selfimprove", *args], cwd=cwd, capture_output=True, text=True,
                          env=full, timeout=300)


SUMMARY_SCRIPT = """
from selfimprove.report.table import summary_renderable
from selfimprove.ui import out
ckpt = "run_a_best_from_iter0/prime_out/weights/step_200_with_a_name_long_enough_to_be_folded_by_rich"
row = {"label": "run_a_best_from_iter0", "rows": "900", "eval_acc": 0.5, "acc_ci95": [0.4, 0.6], "best": True,
       "checkpoint": ckpt, "n_eval": 200, "eval_split": "eval", "n_seeds": 1, "seeds": [1]}
out.print(summary_renderable({"rows": [row]}))
"""


def test_a_long_path_is_printed_whole_on_one_line_through_a_pipe(tmp_path: Path) -> None:
    """A CLI line and the summary table's checkpoint column, stdout piped (rich would use 80 columns)."""
    project = tmp_path / DEEP / DEEP
    project.mkdir(parents=True)
    res = _cli(["skill", "install", "--project", str(project)], tmp_path)
    assert res.returncode == 0, res.stderr
    target = str(project / ".claude" / "skills" / "synthetic-self-improve-rl")
    assert any(target in line for line in res.stdout.splitlines()), res.stdout
    table = subprocess.run([sys.executable, "-c", SUMMARY_SCRIPT], capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    assert table.returncode == 0, table.stderr
    ckpt = "run_a_best_from_iter0/prime_out/weights/step_200_with_a_name_long_enough_to_be_folded_by_rich"
    assert any(ckpt in line for line in table.stdout.splitlines()), table.stdout


def test_training_without_a_terminal_prints_plain_progress_and_whole_log_paths(baseline_run: Path,
                                                                               tmp_path: Path) -> None:
    """baseline through a pipe, the fake engine slowed down and the interval lowered: several
    `iter_0: step i/N, train reward r` lines while it trains, and the log path on one line.
    (The session's baseline run, copied under a long path with its iter_0 removed, trains again.)"""
    run = tmp_path / DEEP / baseline_run.name
    shutil.copytree(baseline_run, run, symlinks=True)
    shutil.rmtree(run / "iter_0")
    started = time.monotonic()
    res = _cli(["baseline", "--run-dir", str(run)], tmp_path, FAKE_RL_STEP_S="0.5", SELFIMPROVE_PROGRESS_S="0.3")
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - started > 2  # 4 steps of 0.5 s: the job ran long enough for several lines
    lines = res.stderr.splitlines()
    progress = [ln for ln in lines if re.fullmatch(r"\d\d:\d\d:\d\d iter_0: step \d+/4, train reward (-|\d\.\d{3})", ln)]
    assert len(progress) >= 3 and progress[-1].split(" ", 1)[1].startswith("iter_0: step 4/4"), res.stderr
    log = str(run / "iter_0" / "train.log")
    assert any(log in ln for ln in lines), res.stderr  # the launch line names it, unbroken


def test_plain_progress_prints_on_add_on_interval_and_on_completion_only() -> None:
    buf = io.StringIO()
    bar = PlainProgress(Console(file=buf, width=40, soft_wrap=True), interval=3600)
    task = bar.add_task("run_a_best_from_iter0_with_a_long_name", total=4, reward="-")
    for step in range(1, 4):
        bar.update(task, completed=step, reward="0.250")  # within the interval: silent
    bar.update(task, completed=4, reward="0.500")
    bar.update(task, completed=4, reward="0.500")  # completion is reported once
    lines = buf.getvalue().splitlines()
    assert [ln.split(" ", 1)[1] for ln in lines] == [
        "run_a_best_from_iter0_with_a_long_name: step 0/4, train reward -",
        "run_a_best_from_iter0_with_a_long_name: step 4/4, train reward 0.500",
    ]
