"""selfimprove-arith as a verifiers v1 Taskset: same rows and reward as the classic env, one Taskset exported."""

from __future__ import annotations

import asyncio
import importlib
from types import SimpleNamespace

import pytest


def _reply(text: str):
    return SimpleNamespace(last_message=SimpleNamespace(content=text))


def test_module_exports_exactly_one_taskset():
    import verifiers.v1 as vf

    mod = importlib.import_module("selfimprove_arith.v1")
    exported = [getattr(mod, n) for n in mod.__all__]
    assert [c for c in exported if isinstance(c, type) and issubclass(c, vf.Taskset)] == [mod.ArithTaskset]


def test_rows_and_reward_match_the_classic_env():
    from selfimprove_arith import make_split
    from selfimprove_arith.v1 import ArithTaskset, ArithTasksetConfig

    tasks = list(ArithTaskset(ArithTasksetConfig(id="selfimprove_arith.v1", split="eval", num_examples=5)))
    assert [(t.data.prompt, t.data.answer) for t in tasks] == [(q, str(a)) for q, a in make_split("eval", 5)]
    assert [f.__name__ for f in tasks[0].hooks("reward")] == ["correct_answer"]
    t = tasks[0]
    score = lambda text: asyncio.run(t.correct_answer(task=t.data, trace=_reply(text)))  # noqa: E731
    assert score(f"<answer>{t.data.answer}</answer>") == 1.0
    assert score(f"<answer>{t.data.answer}1</answer>") == 0.0 and score("no tags") == 0.0


def test_bad_split_is_named():
    from selfimprove_arith.v1 import ArithTaskset, ArithTasksetConfig

    with pytest.raises(ValueError, match="split 'dev'"):
        list(ArithTaskset(ArithTasksetConfig(id="selfimprove_arith.v1", split="dev")))
