"""A reverse-text env WITHOUT an eval split (like verifiers' reverse_text example, smaller):
verifiers then evaluates on the first train rows. Put on PYTHONPATH by the tests (not installed)."""

import random

import verifiers as vf
from datasets import Dataset

LETTERS = "abcdefghij"


def question(i: int) -> str:
    rng = random.Random(i)
    return "".join(rng.choice(LETTERS) for _ in range(6)) + f"{i:03d}"  # unique per row


def reversed_exactly(completion, answer, parser, **kwargs) -> float:
    return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0


def load_environment(num_train: int = 30, **kwargs):
    parser = vf.XMLParser(["answer"], answer_field="answer")
    rows = [{"question": f"Reverse the text: {question(i)}", "answer": question(i)[::-1]} for i in range(num_train)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt="Answer inside <answer></answer>.",
                            parser=parser, rubric=vf.Rubric(funcs=[reversed_exactly], parser=parser), **kwargs)
