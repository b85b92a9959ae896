"""The engine's "cut the completion budget" line is said once per run, not once per arm (issue 43: the
demo printed it for all six arms); every arm's rl.toml still states the budget in force."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from selfimprove.phases import arms
from selfimprove.rundir import RunDir

CUT = {"positions": 256, "train": {"requested": 2048, "in_force": 90, "longest_prompt": 166},
       "eval": {"requested": 2048, "in_force": 90, "longest_prompt": 166}}


def _arm_with_cut(rd: RunDir, n: int, record: dict) -> tuple:
    arm = rd.iter(n)
    arm.prime_out.mkdir(parents=True)
    (arm.prime_out / "completion_budget.json").write_text(json.dumps(record))
    arm.rl_toml.write_text("max_steps = 4\n")
    return arm


def test_the_cut_is_printed_for_the_first_arm_only_and_noted_in_every_toml(tmp_path: Path, monkeypatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(arms, "console", Console(file=out, width=300))
    rd = RunDir(tmp_path / "run")
    first, second = _arm_with_cut(rd, 0, CUT), _arm_with_cut(rd, 1, CUT)
    assert arms.note_budget_in_force(first, first.rl_toml, quiet=False)
    assert arms.note_budget_in_force(second, second.rl_toml, quiet=False)
    said = [ln for ln in out.getvalue().splitlines() if "cut the completion budget" in ln]
    assert len(said) == 1 and said[0].startswith("iter_0:"), said
    for arm in (first, second):
        assert "# In force: train max_completion_tokens 2048 -> 90 in force" in arm.rl_toml.read_text()
    # an arm whose cut differs from iter_0's is said: it is news
    other = _arm_with_cut(rd, 2, {**CUT, "train": {**CUT["train"], "in_force": 60}})
    arms.note_budget_in_force(other, other.rl_toml, quiet=False)
    assert sum("cut the completion budget" in ln for ln in out.getvalue().splitlines()) == 2
