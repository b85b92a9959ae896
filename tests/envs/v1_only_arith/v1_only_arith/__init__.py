"""v1_only_arith: selfimprove-arith's problems as a verifiers v1 Taskset with NO classic `load_environment`
(a test fixture for `selfimprove run --stack v1` end to end, which examples/arith_teacher.py can teach).

Unlike `selfimprove_arith_v1` there is no classic env beside it: selfimprove must read everything
from the Taskset. The reward reads `<answer>N</answer>` with a module-level XMLParser (the parser
object hub_env.json names, which the scripted teacher writes its tags for).

    [orchestrator.train.source.env.taskset]
    id = "v1_only_arith"
    split = "train"      # 20000 tasks, or "eval": 1000 tasks (disjoint)
"""

from __future__ import annotations

from collections.abc import Iterator

import verifiers as vf_classic
import verifiers.v1 as vf
from verifiers.v1.types import content_text

from selfimprove_arith import SYSTEM_PROMPT, make_split

__all__ = ["ArithOnlyTaskset"]

SIZES = {"train": 20000, "eval": 1000}  # selfimprove-arith's splits: the example teacher is tuned to them
PARSER = vf_classic.XMLParser(["answer"], answer_field="answer")


class ArithOnlyData(vf.TaskData):
    answer: str


class ArithOnlyTask(vf.Task[ArithOnlyData]):
    @vf.reward(weight=1.0)
    async def exact_answer(self, task: ArithOnlyData, trace) -> float:
        """1.0 when the reply's <answer> is the exact result."""
        got = PARSER.parse_answer(content_text(trace.last_message.content) or "")
        return float(got is not None and got.strip() == task.answer.strip())


class ArithOnlyTasksetConfig(vf.TasksetConfig):
    split: str = "train"
    num_examples: int = -1


class ArithOnlyTaskset(vf.Taskset[ArithOnlyTask, ArithOnlyTasksetConfig]):
    def load(self) -> Iterator[ArithOnlyTask]:
        if self.config.split not in SIZES:
            raise ValueError(f"v1_only_arith: split '{self.config.split}': use 'train' or 'eval'")
        n = SIZES[self.config.split] if self.config.num_examples < 0 else min(self.config.num_examples, SIZES[self.config.split])
        for i, (question, answer) in enumerate(make_split(self.config.split, n)):
            yield ArithOnlyTask(ArithOnlyData(idx=i, prompt=question, system_prompt=SYSTEM_PROMPT, answer=str(answer)),
                                self.config.task)
