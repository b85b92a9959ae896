"""`selfimprove-arith` as a verifiers v1 Taskset (what prime-rl >= 0.8 loads: prime-rl #3226).

    [orchestrator.train.source.env.taskset]
    id = "selfimprove_arith_v1"  # the dot-free module that exports this Taskset
    split = "train"          # or "eval"
    num_examples = -1        # -1 = the whole split

The same rows, reply format and reward as the classic env in `selfimprove_arith`: the
problems come from `make_split`, and `correct_answer` is the classic reward function itself,
called by reference (never copied). Its taskset id is `selfimprove_arith_v1` (a top-level
module re-exporting `ArithTaskset`), not this module's dotted name: verifiers' loader cannot
import a dotted taskset id (see selfimprove_arith_v1).

The reply is read by `AnswerTagParser`, not verifiers' classic XMLParser: verifiers 0.4 keeps
only `verifiers.v1`, and this Taskset must load there too. It reads `<answer>` exactly as
XMLParser(["answer"]) does (tests/test_arith_v1.py compares them on verifiers 0.3).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import verifiers.v1 as vf
from verifiers.v1.types import content_text

from . import PARSER_FIELDS, SYSTEM_PROMPT, correct_answer, make_split

__all__ = ["ArithTaskset"]


class AnswerTagParser:
    """XMLParser(PARSER_FIELDS, answer_field="answer").parse_answer, for the one `<answer>` field."""

    answer_field = "answer"

    def __init__(self, fields: list[str]):
        self._fields = list(fields)
        self._pattern = re.compile(rf"<{self.answer_field}>\s*(.*?)\s*</{self.answer_field}>", re.DOTALL)

    def parse_answer(self, completion) -> str | None:
        """A string: its last `<answer>`; a message list: the first `<answer>` of the latest assistant
        message that has one (XMLParser's two rules)."""
        if isinstance(completion, str):
            matches = self._pattern.findall(completion)
            return matches[-1].strip() if matches else None
        for message in reversed([m for m in completion if _field(m, "role") == "assistant"]):
            match = self._pattern.search(content_text(_field(message, "content") or ""))
            if match:
                return match.group(1).strip()
        return None


def _field(message, name: str):
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


ANSWER_PARSER = AnswerTagParser(PARSER_FIELDS)


class ArithData(vf.TaskData):
    answer: str
    """The exact integer result, as text."""


class ArithTask(vf.Task[ArithData]):
    @vf.reward(weight=1.0)
    async def correct_answer(self, task: ArithData, trace) -> float:
        """1.0 when <answer> equals the result exactly: the classic rubric's function, unchanged."""
        reply = [{"role": "assistant", "content": content_text(trace.last_message.content)}]
        return correct_answer(reply, task.answer, ANSWER_PARSER)


class ArithTasksetConfig(vf.TasksetConfig):
    split: str = "train"
    """"train" (20k rows) or "eval" (1k rows, disjoint)."""
    num_examples: int = -1
    """Rows to load from the split; -1 = all."""


class ArithTaskset(vf.Taskset[ArithTask, ArithTasksetConfig]):
    def load(self) -> Iterator[ArithTask]:
        if self.config.split not in ("train", "eval"):
            raise ValueError(f"selfimprove_arith_v1: split '{self.config.split}': use 'train' or 'eval'")
        n = None if self.config.num_examples < 0 else self.config.num_examples
        for i, (question, answer) in enumerate(make_split(self.config.split, n)):
            yield ArithTask(ArithData(idx=i, prompt=question, system_prompt=SYSTEM_PROMPT, answer=str(answer)),
                            self.config.task)
