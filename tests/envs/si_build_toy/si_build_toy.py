"""A small single-turn env for the generic student recipe's tests (put on PYTHONPATH by the tests, not installed).

Three tasks of unequal difficulty for a character model, each row's info naming its task:
copy a letter (easy), the letter after a letter (a 26-entry table), the sum of two digits (harder).
The eval split holds CANARY, whose question also appears among the train rows: the recipe must
never train on it. `mode` makes the env one the recipe must refuse.
"""

import random
import string

import verifiers as vf
from datasets import Dataset

CANARY_QUESTION = "Sum: 7+8 canary"
CANARY = {"question": CANARY_QUESTION, "answer": "15", "info": {"task": "add"}}


def row(kind: str, rng: random.Random) -> dict:
    if kind == "copy":
        c = rng.choice(string.ascii_lowercase)
        return {"question": f"Copy: {c}", "answer": c, "info": {"task": kind}}
    if kind == "next":
        i = rng.randrange(25)
        return {"question": f"Next: {string.ascii_lowercase[i]}", "answer": string.ascii_lowercase[i + 1],
                "info": {"task": kind}}
    a, b = rng.randrange(10), rng.randrange(10)
    return {"question": f"Sum: {a}+{b}", "answer": str(a + b), "info": {"task": "add"}}


def exact(completion, answer, parser, **kwargs) -> float:
    return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0


def five(completion, answer, parser, **kwargs) -> float:  # a reward that is not 0/1 or partial credit
    return 5.0 * exact(completion, answer, parser)


def by_index(rows: list[dict]):
    """A reward that reads the answer column as an index into the env's own rows, as verifiers' ReasoningGymEnv
    does (its answer column is str(i)): the column is not an answer the student could write."""
    def lookup(completion, answer, parser, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == rows[int(answer)]["answer"] else 0.0
    return lookup


def load_environment(num_train: int = 600, seed: int = 0, mode: str = "ok", **kwargs):
    rng = random.Random(seed)
    rows = [row(("copy", "next", "add")[i % 3], rng) for i in range(num_train)]
    rows.insert(5, dict(CANARY))  # the canary's question in TRAIN too: decontamination must drop it
    if mode == "no_answer":
        rows = [{**r, "answer": ""} for r in rows]
    if mode == "long":
        rows[7] = {**rows[7], "answer": "x" * 200}
    if mode == "accented":
        rows[9] = {**rows[9], "question": "Copie: é", "answer": "é"}
    reward = five if mode == "reward5" else exact
    if mode == "index":
        reward, rows = by_index(list(rows)), [{**r, "answer": str(i)} for i, r in enumerate(rows)]
    eval_rows = [dict(CANARY)] + [row(("copy", "next", "add")[i % 3], random.Random(10_000 + i)) for i in range(20)]
    parser = vf.XMLParser(["answer"], answer_field="answer")
    rubric = vf.Rubric(funcs=[reward], parser=parser)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(eval_rows),
                            system_prompt="Answer inside <answer></answer>.", parser=parser, rubric=rubric, **kwargs)
