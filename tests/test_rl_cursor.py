"""The engine's walk over a train source: seeded random order without replacement, epoch after
epoch, and independent of the source's NAME (a generated package's name carries a per-run token;
two runs of the same data from the same checkpoint must train on the same rows in the same order)."""

from __future__ import annotations

from selfimprove.rl.rollouts import EnvSpec
from selfimprove.rl.train import Cursor, source_cursors


def spec(name: str, n: int) -> EnvSpec:
    return EnvSpec(id=name, name=name, args={}, ratio=None, env=None, rows=[{"i": i} for i in range(n)])


def walk(cursor: Cursor, k: int) -> list[int]:
    return [cursor.next() for _ in range(k)]


def test_order_does_not_depend_on_the_generated_package_name():
    a = source_cursors(0, [spec("selfimprove_arith_ra0b451d7_iter_1", 800)])
    b = source_cursors(0, [spec("selfimprove_arith_rec89a164_iter_1", 800)])
    assert walk(a["selfimprove_arith_ra0b451d7_iter_1"], 900) == walk(b["selfimprove_arith_rec89a164_iter_1"], 900)


def test_order_depends_on_the_seed_and_the_source_position():
    one = walk(source_cursors(0, [spec("x", 100)])["x"], 100)
    assert walk(source_cursors(1, [spec("x", 100)])["x"], 100) != one
    mixed = source_cursors(0, [spec("real", 100), spec("gen", 100)])
    assert walk(mixed["real"], 100) == one and walk(mixed["gen"], 100) != one


def test_each_epoch_is_a_permutation_and_resume_continues_it():
    c = Cursor(50, "0:source0")
    first, second = walk(c, 50), walk(c, 50)
    assert sorted(first) == sorted(second) == list(range(50)) and first != second
    resumed = Cursor(50, "0:source0", epoch=1, pos=20)
    assert walk(resumed, 30) == second[20:]
