"""`si-letter-count`: a small plain-text task for the SmolLM2 benchmark (bench/smollm2.py).

    "How many times does the letter r appear in: carrot river? Answer with a number."

The reward is 1.0 when the LAST integer in the reply is the right count, else 0.0:
no answer tags to learn, because SmolLM2-135M-Instruct never writes the <answer>
tags that envs/si_reasoning_gym parses (measured: reward 0.0 on 24 of 24 rows, so
every GRPO group has zero variance and nothing can be learned in a few steps).
Counts are 1-4, so a fresh pretrained student is right on some rows and wrong on
others: the groups carry a gradient. Train and eval splits are disjoint seeds.
"""

from __future__ import annotations

import random
import re

import verifiers as vf
from datasets import Dataset

WORDS = ("apple banana cherry orange lemon carrot river bottle paper letter summer winter hammer mirror "
         "window garden pepper butter coffee rabbit yellow little middle puzzle balloon tomato potato "
         "library morning evening between problem teacher student picture").split()
SYSTEM_PROMPT = "Answer with a number."


def make_rows(n: int, seed: int) -> list[dict]:
    """n questions with a count of 1-4 (the letter appears in the words at least once)."""
    rng = random.Random(seed)
    rows = []
    while len(rows) < n:
        words = rng.sample(WORDS, rng.randint(2, 3))
        text = " ".join(words)
        letter = rng.choice(sorted(set(text) - {" "}))
        count = text.count(letter)
        if count <= 4:
            rows.append({"question": f"How many times does the letter {letter} appear in: {text}?",
                         "answer": str(count)})
    return rows


def last_integer_reward(completion, answer, **kwargs) -> float:
    text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
    numbers = re.findall(r"\d+", text)
    return 1.0 if numbers and numbers[-1] == answer else 0.0


def load_environment(num_train_examples: int = 200, num_eval_examples: int = 50, seed: int = 0,
                     **kwargs) -> vf.Environment:
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(make_rows(num_train_examples, seed)),
        eval_dataset=Dataset.from_list(make_rows(num_eval_examples, seed + 1_000_003)),
        system_prompt=SYSTEM_PROMPT,
        rubric=vf.Rubric(funcs=[last_integer_reward], weights=[1.0]),
        **kwargs,
    )
