"""`selfimprove-arith`: the embedded default environment (classic verifiers API).

    import verifiers as vf
    env = vf.load_environment("selfimprove-arith")

A SingleTurnEnv over procedurally generated arithmetic expressions (a 20k-row
train split and a 1k-row eval split, disjoint, deterministic). The student must
reply `<answer>N</answer>`; an XMLParser extracts N and the rubric's one reward
function checks it exactly. Rows carry no structural labels: whoever analyses
failures must read the question text, as on a real dataset.

Importing this package imports neither verifiers nor datasets (load_environment
does): the selfimprove CLI loads its registrations (DEFAULT_TEACHER here, the
built-in student in `selfimprove_arith.student`) and never imports verifiers itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .problems import KINDS, make_split, sample

if TYPE_CHECKING:
    import verifiers as vf

__all__ = ["load_environment", "KINDS", "make_split", "sample", "SYSTEM_PROMPT", "PARSER_FIELDS"]

# The default `selfimprove run --teacher` for this env (pyproject.toml: the `selfimprove.teachers`
# entry point named after the env id): the scripted teacher written for these problems.
DEFAULT_TEACHER = "examples/arith_teacher.py:ArithTeacher"

# No system turn: the prompt is the bare expression. The reply format
# (`<answer>N</answer>`, see PARSER_FIELDS) is the convention the parser checks and
# the built-in student learns in its warm-up. Why none: on the ~1M-parameter CPU
# student any system text slows the warm-up several-fold (bench/warmup.py).
SYSTEM_PROMPT: str | None = None
PARSER_FIELDS = ["answer"]


def correct_answer(completion, answer, parser, **kwargs) -> float:
    """1.0 when the <answer> field equals the ground truth exactly (after trimming spaces)."""
    parsed = parser.parse_answer(completion)
    return 1.0 if parsed is not None and parsed.strip() == str(answer).strip() else 0.0


def _rows(split: str, n: int) -> list[dict]:
    return [{"question": q, "answer": str(a), "info": {}} for q, a in make_split(split, n)]


def load_environment(num_train_examples: int = -1, num_eval_examples: int = -1, **kwargs) -> vf.Environment:
    # Imported here, not at the top: the CLI reads this package's registrations without loading verifiers,
    # and the v1 taskset module, selfimprove_arith_v1, imports this package and must load under verifiers 0.4,
    # whose venv need not hold `datasets` (only the classic env uses it).
    import verifiers as vf
    from datasets import Dataset

    parser = vf.XMLParser(PARSER_FIELDS, answer_field="answer")
    rubric = vf.Rubric(funcs=[correct_answer], weights=[1.0], parser=parser)
    return vf.SingleTurnEnv(
        dataset=lambda: Dataset.from_list(_rows("train", num_train_examples)),
        eval_dataset=lambda: Dataset.from_list(_rows("eval", num_eval_examples)),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        **kwargs,
    )
