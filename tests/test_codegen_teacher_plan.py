"""The generic scripted teacher's allocation (examples/codegen_teacher.py plan_buckets): rows go where GRPO gets a
gradient. On si-reasoning-gym it gave 560 of 800 rows to a task the student never solved, and 80% of the prompt
groups of those steps had no reward variance (docs/results.md#generic-student-rg-phase4)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from codegen_teacher import MIN_BUCKET_ROWS, TOTAL_ROWS, plan_buckets  # noqa: E402

TASKS = ["spell_backward", "letter_counting", "sentence_reordering"]


def _groups(never: str, learning: str, solved: str) -> list[dict]:
    return [{"group": f"task={t}", "class": c, "solve_rate": r, "rollouts": 2000}
            for t, c, r in ((never, "never", 0.0), (learning, "learning", 0.07), (solved, "solved", 0.55))]


def rows_per_task(buckets: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in buckets:
        out[b["task"]] = out.get(b["task"], 0) + b["rows"]
    return out


def test_never_and_filler_solved_groups_get_the_gate_minimum_while_a_learning_group_takes_the_rest():
    rows = rows_per_task(plan_buckets(_groups("sentence_reordering", "spell_backward", "letter_counting"), TASKS, [], {}))
    assert rows["sentence_reordering"] == rows["letter_counting"] == 2 * MIN_BUCKET_ROWS
    assert rows["spell_backward"] == TOTAL_ROWS - 4 * MIN_BUCKET_ROWS


def test_with_nothing_but_never_groups_they_share_the_rows():
    groups = [dict(g, **{"class": "never"}) for g in _groups(*TASKS)]
    rows = rows_per_task(plan_buckets(groups, TASKS, [], {}))
    assert len(set(rows.values())) == 1 and sum(rows.values()) >= TOTAL_ROWS - 6


def test_rare_beats_learning_and_never_stays_at_the_minimum():
    groups = _groups("sentence_reordering", "spell_backward", "letter_counting")
    groups[1]["class"], groups[2]["class"] = "rare", "learning"
    rows = rows_per_task(plan_buckets(groups, TASKS, [], {}))
    assert rows["sentence_reordering"] == 2 * MIN_BUCKET_ROWS
    assert rows["spell_backward"] > rows["letter_counting"] > 2 * MIN_BUCKET_ROWS
