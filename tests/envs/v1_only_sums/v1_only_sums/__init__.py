"""v1_only_sums: a tiny verifiers v1 Taskset with NO classic `load_environment` (a test fixture).

What `pip install verifiers` (0.4.x, v1 API only) envs look like: the module's `__all__` exports
one Taskset; the reward reads `<answer>N</answer>` from the reply with a regex (no parser object).
Train and eval problems are disjoint by construction (different items and names), so a generated
row copying an eval problem is the decontamination gate's to catch, not an accident of the data.

    [orchestrator.train.source.env.taskset]
    id = "v1_only_sums"
    split = "train"      # 300 tasks, or "eval": 60 tasks
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import verifiers.v1 as vf
from verifiers.v1.types import content_text

__all__ = ["SumsTaskset"]

SYSTEM_PROMPT = ("Solve the word problem. Think step by step, then give the final number "
                 "inside <answer></answer> tags.")
SPLITS = {  # split: (size, names, items)
    "train": (300, ("Ana", "Ben", "Cleo", "Dev"), ("apples", "pencils", "stamps", "marbles")),
    "eval": (60, ("Omar", "Pia", "Quin"), ("shells", "coins", "books")),
}
_ANSWER = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")


def make_split(split: str) -> Iterator[tuple[str, str]]:
    """(question, answer) pairs of a split, the same every time."""
    size, names, items = SPLITS[split]
    rng = random.Random(f"v1_only_sums/{split}")
    for _ in range(size):
        name, item, a, b = rng.choice(names), rng.choice(items), rng.randint(2, 90), rng.randint(2, 90)
        yield f"{name} has {a} {item} and is given {b} more. How many {item} does {name} have now?", str(a + b)


class SumsData(vf.TaskData):
    answer: str
    """The sum, as text."""


class SumsTask(vf.Task[SumsData]):
    @vf.reward(weight=1.0)
    async def exact_answer(self, task: SumsData, trace) -> float:
        """1.0 when the last <answer>N</answer> of the reply is the sum."""
        found = _ANSWER.findall(content_text(trace.last_message.content) or "")
        return float(bool(found) and found[-1] == task.answer.strip())


class SumsTasksetConfig(vf.TasksetConfig):
    split: str = "train"
    """"train" (300 tasks) or "eval" (60 tasks, disjoint)."""
    num_examples: int = -1
    """Tasks to load from the split; -1 = all."""


class SumsTaskset(vf.Taskset[SumsTask, SumsTasksetConfig]):
    def load(self) -> Iterator[SumsTask]:
        if self.config.split not in SPLITS:
            raise ValueError(f"v1_only_sums: split '{self.config.split}': use 'train' or 'eval'")
        for i, (question, answer) in enumerate(make_split(self.config.split)):
            if 0 <= self.config.num_examples <= i:
                return
            yield SumsTask(SumsData(idx=i, prompt=question, system_prompt=SYSTEM_PROMPT, answer=answer), self.config.task)
