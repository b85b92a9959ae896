"""`si-reasoning-gym`: three reasoning-gym tasks as a classic verifiers SingleTurnEnv.

    import verifiers as vf
    env = vf.load_environment("si-reasoning-gym")

A test fixture for outside tasks (issue 15): the instances and the scores come from
reasoning-gym (PyPI), which no one here wrote; this module only frames them.

- spell_backward: a text answer, partial credit (a near miss scores ~0.8)
- letter_counting: an integer answer, exact
- sentence_reordering: a text answer, partial credit

Rows are `question` / `answer` / `info`, where info holds what the reward needs:
the task name and the reasoning-gym entry (JSON). The reward calls
`reasoning_gym.get_score_answer_fn(task)(parsed_answer, entry)`.

There is NO eval split: verifiers then evaluates on the first train rows.

`make_row(task, rng)` draws one fresh row from reasoning-gym's generator (TASKS names the tasks), so
a teacher that makes rows by code (examples/codegen_teacher.py) serves this env.

Questions use a short frame of their own instead of reasoning-gym's preambles:
the built-in student has 256 positions, and a fixed preamble of eight words or
more makes every fresh instance share most of its word 8-grams with any
evaluated row of the same task (spell_backward: 4 of 5), which the tool's
decontamination gate rightly reads as overlap.
"""

from __future__ import annotations

import functools
import json

import verifiers as vf
from datasets import Dataset

__all__ = ["load_environment", "make_rows", "make_row", "frame", "score", "TASKS", "SYSTEM_PROMPT"]

# reasoning-gym dataset name -> its config (sizes that fit a 256-position student)
TASKS: dict[str, dict] = {
    "spell_backward": {"min_word_len": 3, "max_word_len": 8},
    "letter_counting": {"min_words": 3, "max_words": 6},
    "sentence_reordering": {"min_words_in_sentence": 3, "max_words_in_sentence": 8},
}
SYSTEM_PROMPT = "Answer inside <answer></answer>."
MAX_QUESTION_CHARS = 90
_REORDER_PREFIX = "in the following sentence: "


def frame(task: str, entry: dict) -> str:
    """The env's short question for one reasoning-gym entry."""
    meta = entry["metadata"]
    if task == "spell_backward":
        return f"Spell backward: {meta['word']}"
    if task == "letter_counting":
        return f"Count the letter {meta['target_letter']} in: {' '.join(meta['span'])}"
    if task == "sentence_reordering":
        return f"Reorder the words: {entry['question'].partition(_REORDER_PREFIX)[2]}"
    raise ValueError(f"unknown task {task!r}")


def _row(task: str, entry: dict) -> dict | None:
    """The env's row for one reasoning-gym entry, or None if it is not ASCII or its question is over
    MAX_QUESTION_CHARS."""
    entry = json.loads(json.dumps(entry))  # tuples -> lists: what the reward will see
    q = frame(task, entry)
    if not (q + entry["answer"]).isascii() or len(q) > MAX_QUESTION_CHARS:
        return None
    return {"question": q, "answer": str(entry["answer"]), "info": {"task": task, "entry": json.dumps(entry)}}


def make_rows(n: int, seed: int = 0, tasks: dict[str, dict] | None = None) -> list[dict]:
    """n rows, tasks in turn, from reasoning-gym's generators seeded with `seed` (per task: seed + k).

    Skips entries that are not ASCII or whose question is over MAX_QUESTION_CHARS.
    """
    import reasoning_gym

    tasks = TASKS if tasks is None else tasks
    per_task: dict[str, list[dict]] = {}
    for k, (task, config) in enumerate(tasks.items()):
        want = n // len(tasks) + 1
        data = reasoning_gym.create_dataset(task, size=3 * want + 10, seed=seed + k, **config)
        rows = []
        for entry in data:
            row = _row(task, entry)
            if row is not None:
                rows.append(row)
            if len(rows) == want:
                break
        per_task[task] = rows
    out = [row for group in zip(*per_task.values()) for row in group]
    return out[:n]


_GENERATOR_SIZE = 2**30


@functools.cache
def _generator(task: str):
    """reasoning-gym's dataset of `task`: it makes entry i on demand from its seed and i, so a huge size is
    free and one draw is an index (a dataset per draw cost ~40 ms in word-list loading)."""
    import reasoning_gym

    return reasoning_gym.create_dataset(task, size=_GENERATOR_SIZE, seed=7_777_777, **TASKS[task])


def make_row(task: str, rng) -> dict:
    """One fresh row of `task` from reasoning-gym's generator, seeded from `rng` (a random.Random): the
    generator a teacher may call (examples/codegen_teacher.py). Same frame and filters as make_rows."""
    for _ in range(100):
        row = _row(task, _generator(task)[rng.randrange(_GENERATOR_SIZE)])
        if row is not None:
            return row
    raise ValueError(f"{task}: no instance within {MAX_QUESTION_CHARS} ASCII characters in 100 draws")


def score(task: str, entry: dict | str, answer: str | None) -> float:
    """reasoning-gym's own scorer for `task` on one entry."""
    import reasoning_gym

    entry = json.loads(entry) if isinstance(entry, str) else entry
    return float(reasoning_gym.get_score_answer_fn(task)(answer, entry))


def reasoning_gym_score(completion, answer, info, parser, **kwargs) -> float:
    """The <answer> field, scored by reasoning-gym (partial credit where the task gives it)."""
    parsed = parser.parse_answer(completion)
    return score(info["task"], info["entry"], parsed.strip() if isinstance(parsed, str) else None)


def load_environment(num_train_examples: int = 300, seed: int = 0, **kwargs) -> vf.Environment:
    parser = vf.XMLParser(["answer"], answer_field="answer")
    rubric = vf.Rubric(funcs=[reasoning_gym_score], weights=[1.0], parser=parser)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(make_rows(num_train_examples, seed)),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        **kwargs,
    )
