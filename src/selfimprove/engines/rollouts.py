"""Cheap, content-free readers of the engine's rollout files.

`LineCounter` counts newline-terminated lines of a growing file without parsing
it (the completion signal: eval rows are sealed, so the watcher never decodes
them). `train_rewards` decodes TRAIN rows, which are fair game, and keeps only
their rewards (the progress bar and the scratchpad trajectory need nothing else); a
line is a seed-dialect record or a v1 Episode record (`rollout_rows` maps both).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..rundir import ArmDir
from .rollout_rows import train_rewards_of

TRAIN_FILE = "train_rollouts.jsonl"
EVAL_FILE = "eval_rollouts.jsonl"


class LineCounter:
    """Counts complete lines of a file that only grows; reads each byte once.

    A truncated or replaced file (size shrinks or inode changes) is recounted
    from the start, so a relaunch that rewrites the file is handled.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._ino: int | None = None
        self._offset = 0
        self._lines = 0

    def count(self) -> int:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._ino, self._offset, self._lines = None, 0, 0
            return 0
        if st.st_ino != self._ino or st.st_size < self._offset:
            self._ino, self._offset, self._lines = st.st_ino, 0, 0
        if st.st_size > self._offset:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                while chunk := f.read(1 << 20):
                    self._lines += chunk.count(b"\n")
                    self._offset += len(chunk)
        return self._lines


def count_complete_lines(path: Path) -> int:
    return LineCounter(path).count()


def train_rewards(path: Path) -> list[float]:
    """Rewards of the complete, decodable rows of a TRAIN rollouts file (others skipped)."""
    out: list[float] = []
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return out
    end = data.rfind(b"\n")
    for line in data[: end + 1].splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(row, dict):
            out.extend(train_rewards_of(row))
    return out


def train_steps(arm: ArmDir, up_to: int | None = None) -> list[int]:
    """Steps that have a train rollouts file, ascending (optionally <= up_to)."""
    return [
        s for s in arm.rollout_steps()
        if (up_to is None or s <= up_to) and arm.train_file(s).is_file()
    ]


class TrainRewardTracker:
    """Mean reward of the newest train rollouts file; re-decodes only when it changes."""

    def __init__(self, arm: ArmDir):
        self.arm = arm
        self._key: tuple[str, int] | None = None
        self.mean: float | None = None
        self.step: int | None = None

    def update(self) -> float | None:
        for step in reversed(self.arm.rollout_steps()):
            path = self.arm.train_file(step)
            try:
                key = (str(path), path.stat().st_size)
            except FileNotFoundError:
                continue  # e.g. a step dir holding only eval rows
            if key != self._key:
                self._key = key
                rewards = train_rewards(path)
                if rewards:
                    self.mean, self.step = sum(rewards) / len(rewards), step
            break
        return self.mean


# What the CPU engine logs while it builds a built-in student on first use (selfimprove_arith's
# warm-up: "warm-up step 400/2000 | loss ..."); the job has no rollouts step until it is done.
_WARMUP_STEP = re.compile(r"warm-up step (\d+)/(\d+)")
_BUILD_BYTES = 4096


def student_build_note(log: Path) -> str | None:
    """Before the job's first rollouts step, what the progress line says instead of `step 0/N`: the
    built-in student's build (`building the built-in student (warm-up step 400/2000, once, ~5 min)`),
    or a slow model's sampling (`sampling step 1: 8/16 completions, 40 s`). None when the log shows
    neither."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - _BUILD_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    steps = _WARMUP_STEP.findall(text)
    if steps:
        done, total = steps[-1]
        return f"building the built-in student (warm-up step {done}/{total}, once, ~5 min)"
    if "building it from the recipe" in text:
        return "building the built-in student (warm-up starting, once, ~5 min)"
    return _sampling_note(text)


# The CPU engine's sampling progress for a slow model ("Sampling step 1: 8/16 completions (40s)",
# rl/train.py), and the lines that end a sampling (a step's or an eval's summary).
_SAMPLING = re.compile(r"Sampling (.+?): (\d+)/(\d+) completions \((\d+)s\)")
_SAMPLING_DONE = re.compile(r"\bStep \d+ \| Time|\bEvaluated \S+ at step")


def _sampling_note(text: str) -> str | None:
    """`sampling step 1: 8/16 completions, 40 s` while the latest sampling has not ended yet; else None."""
    last = None
    for line in text.splitlines():
        if m := _SAMPLING.search(line):
            last = m
        elif _SAMPLING_DONE.search(line):
            last = None
    if last is None:
        return None
    what, done, total, secs = last.groups()
    return f"sampling {what}: {done}/{total} completions, {secs} s"
