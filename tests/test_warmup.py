"""The built-in student's supervised warm-up: seeded, prompts rendered as the env renders them, habits scored wrong."""

from __future__ import annotations

import random

import torch
import verifiers as vf

from selfimprove_arith.student.warmup import HABIT_REPLIES, HABITS, warm_up


def _weights(**kwargs) -> dict[str, torch.Tensor]:
    model, _ = warm_up(steps=2, batch=8, log=lambda *_: None, **kwargs)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_same_arguments_same_weights_and_a_system_prompt_reaches_training():
    seen: list[int] = []
    default = _weights(callback=lambda step, *_: seen.append(step))
    assert seen == [1, 2]
    assert _same(default, _weights())
    assert not _same(default, _weights(system_prompt="Compute the expression."))


def test_every_habit_reply_is_scored_wrong_by_the_env_and_the_right_reply_right():
    from selfimprove_arith.student.warmup import sample_any

    env = vf.load_environment("selfimprove-arith")
    parser = env.parser
    rng = random.Random(0)
    for kind, (habit, share) in HABITS.items():
        assert 0 < share < 1, kind
        for _ in range(20):
            q, value = sample_any(kind, rng)
            assert parser.parse_answer(HABIT_REPLIES[habit](q, value)) != str(value), (kind, q)
            assert parser.parse_answer(f"<answer>{value}</answer>") == str(value)


def test_practice_kinds_are_not_in_the_env_splits():
    """The warm-up's practice kinds (what a teacher's easier variants land on) are absent from the real
    env's splits, so real-data RL never sees them."""
    from selfimprove_arith.student.warmup import PRACTICE_KINDS
    from selfimprove_arith import KINDS, make_split

    assert not set(PRACTICE_KINDS) & set(KINDS)
    rng = random.Random(1)
    practice = {PRACTICE_KINDS[k](rng)[0] for k in PRACTICE_KINDS for _ in range(300)}
    assert not practice & {q for q, _ in make_split("train", 4000)}
