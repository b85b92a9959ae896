"""`selfimprove-arith` as a verifiers v1 Taskset (what prime-rl >= 0.8 loads: prime-rl #3226).

    [orchestrator.train.source.env.taskset]
    id = "selfimprove_arith.v1"
    split = "train"          # or "eval"
    num_examples = -1        # -1 = the whole split

The same rows, reply format and reward as the classic env in `selfimprove_arith`: the
problems come from `make_split`, the answer is read from `<answer>N</answer>` with the
same XMLParser the classic rubric uses, and `correct_answer` is the classic reward
function itself, called by reference (never copied). This module's `__all__` exports
exactly one Taskset, as prime-rl main requires of a taskset id.
"""

from __future__ import annotations

from collections.abc import Iterator

import verifiers as vf_classic
import verifiers.v1 as vf
from verifiers.v1.types import content_text

from . import PARSER_FIELDS, SYSTEM_PROMPT, correct_answer, make_split

__all__ = ["ArithTaskset"]

_PARSER = vf_classic.XMLParser(PARSER_FIELDS, answer_field="answer")


class ArithData(vf.TaskData):
    answer: str
    """The exact integer result, as text."""


class ArithTask(vf.Task[ArithData]):
    @vf.reward(weight=1.0)
    async def correct_answer(self, task: ArithData, trace) -> float:
        """1.0 when <answer> equals the result exactly: the classic rubric's function, unchanged."""
        reply = [{"role": "assistant", "content": content_text(trace.last_message.content)}]
        return correct_answer(reply, task.answer, _PARSER)


class ArithTasksetConfig(vf.TasksetConfig):
    split: str = "train"
    """"train" (20k rows) or "eval" (1k rows, disjoint)."""
    num_examples: int = -1
    """Rows to load from the split; -1 = all."""


class ArithTaskset(vf.Taskset[ArithTask, ArithTasksetConfig]):
    def load(self) -> Iterator[ArithTask]:
        if self.config.split not in ("train", "eval"):
            raise ValueError(f"selfimprove_arith.v1: split '{self.config.split}': use 'train' or 'eval'")
        n = None if self.config.num_examples < 0 else self.config.num_examples
        for i, (question, answer) in enumerate(make_split(self.config.split, n)):
            yield ArithTask(ArithData(idx=i, prompt=question, system_prompt=SYSTEM_PROMPT, answer=str(answer)),
                            self.config.task)
