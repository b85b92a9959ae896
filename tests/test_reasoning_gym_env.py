"""Outside tasks from a package no one here wrote (issue 15, item 5): envs/si_reasoning_gym, a
thin verifiers env over three reasoning-gym generators scored by reasoning-gym's own scorers,
with NO eval split. Fast checks here; the whole loop on it is tests/test_reasoning_gym_run.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from selfimprove.gates.dedup import check_eval_overlap, find_eval_overlap
from selfimprove.models import HubEnv
from selfimprove.phases.context import RunContext
from selfimprove.phases.iteration_steps import eval_index
from selfimprove.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]
ENV_DIR = REPO / "envs" / "si_reasoning_gym"
ENV_ID = "si_reasoning_gym"


@pytest.fixture
def rg_env(monkeypatch):
    """The env module importable here and by the probe subprocesses (PYTHONPATH), without installing it."""
    monkeypatch.syspath_prepend(str(ENV_DIR))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ENV_DIR), os.environ.get("PYTHONPATH")])))
    sys.modules.pop(ENV_ID, None)
    import si_reasoning_gym

    return si_reasoning_gym


def test_env_loads_with_no_eval_split_and_rows_that_fit_the_student(rg_env):
    env = rg_env.load_environment(num_train_examples=30)
    assert env.eval_dataset is None and len(env.dataset) == 30
    assert type(env.parser).__name__ == "XMLParser"
    tasks = [json.loads(json.dumps(r["info"]))["task"] for r in env.dataset]
    assert tasks[:3] == list(rg_env.TASKS) and set(tasks) == set(rg_env.TASKS)
    questions = [r["prompt"][-1]["content"] for r in env.dataset]
    assert all(q.isascii() and len(q) <= rg_env.MAX_QUESTION_CHARS for q in questions)
    assert len(set(questions)) == 30
    assert not any(r["answer"].isdigit() for r in env.dataset if r["info"]["task"] != "letter_counting")  # text answers


def test_reward_is_reasoning_gyms_scorer_with_partial_credit(rg_env):
    """Right 1.0; a near miss on a text task earns partial credit; wrong or unparsed 0."""
    env = rg_env.load_environment(num_train_examples=9)
    from selfimprove.stack._env_probe import leaf_rubrics, rubric_funcs

    weighted = [f for r in leaf_rubrics(env.rubric) for f in rubric_funcs(r) if f["weight"]]
    assert weighted == [{"name": "reasoning_gym_score", "weight": 1.0}]
    func = rg_env.reasoning_gym_score
    by_task = {}
    for row in env.dataset:
        by_task.setdefault(row["info"]["task"], row)

    def reward(row, reply: str) -> float:
        return func(completion=[{"role": "assistant", "content": reply}], answer=row["answer"], info=row["info"],
                    parser=env.parser)

    for task, row in by_task.items():
        ans = row["answer"]
        assert reward(row, f"<answer>{ans}</answer>") == 1.0, task
        assert reward(row, ans) == 0.0, task  # no <answer> tag: the parser finds nothing
    spell, count, order = by_task["spell_backward"], by_task["letter_counting"], by_task["sentence_reordering"]
    near = reward(spell, f"<answer>{spell['answer'][:-1]}</answer>")
    assert 0.5 < near < 1.0  # one letter short: partial credit from reasoning-gym's scorer
    words = order["answer"].split()
    swapped = " ".join(words[1:2] + words[:1] + words[2:])
    assert 0.0 < reward(order, f"<answer>{swapped}</answer>") < 1.0
    wrong = str(int(count["answer"]) + 1)
    assert reward(count, f"<answer>{wrong}</answer>") == 0.0  # integer task: exact


def test_generated_row_equal_to_an_evaluated_row_fails_the_gate(rg_env, new_run):
    """Done-when of issue 15: no eval split, so the gate indexes the first N train rows (what
    verifiers evaluates) through the tool's own eval_index on the real env. A generated row equal
    to one of them fails; a fresh reasoning-gym instance (another seed) of each task passes."""
    run_dir = new_run("rgym", "--hub-id", ENV_ID, "--eval-examples", "12")
    rd = RunDir(run_dir)
    rd.write_hub_env(HubEnv(env_id=ENV_ID, module=ENV_ID, source="local", env_class="SingleTurnEnv",
                            parser_class="XMLParser", rubric_class="Rubric", rubric_funcs=[],
                            system_prompt=rg_env.SYSTEM_PROMPT, answer_format_instruction=None, train_size=300,
                            eval_size=None, train_samples=[]))  # as introspect records it
    index = eval_index(RunContext.load(rd))
    assert (index.source, index.n_questions) == ("train_fallback", 12)
    evaluated = rg_env.make_rows(12)
    fresh = [r for r in rg_env.make_rows(30, seed=1000) if r["question"] not in {e["question"] for e in evaluated}]
    rows = [{"question": evaluated[7]["question"]}, *({"question": r["question"]} for r in fresh[:3])]
    report = check_eval_overlap(rows, index)
    assert not report.passed
    assert find_eval_overlap(rows, index).rows == [0]  # the report itself names no row (issue 23.5)
    assert "train rows the engine evaluates (the env has no eval split)" in report.failures[0].message
    assert check_eval_overlap(rows[1:], index).passed
