"""Every example teacher says which envs it serves and refuses any other in one line (issue 43): on a
word env the minimal teacher died with ZeroDivisionError deep in its allocation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from selfimprove.errors import TeacherError
from selfimprove.teacher import call_teacher, load_teacher

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "minimal_teacher.py": f"{REPO / 'examples' / 'minimal_teacher.py'}:MinimalTeacher",
    "arith_teacher.py": f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher",
    "codegen_teacher.py": f"{REPO / 'examples' / 'codegen_teacher.py'}:CodegenTeacher",
}


def _ctx(tmp_path: Path, questions: list[str]) -> SimpleNamespace:
    iter_dir = tmp_path / "iter_1"
    iter_dir.mkdir()
    (iter_dir / "failures.jsonl").write_text("")
    hub_env = {"env_id": "word-env", "train_samples": [{"question": q, "answer": "3"} for q in questions],
               "parser_config": {"answer_field": "answer"}}
    return SimpleNamespace(iteration=1, iter_dir=iter_dir, run_dir=tmp_path, failures_path=iter_dir / "failures.jsonl",
                           analysis={"eval_acc_prev": 0.5}, hub_env=hub_env, prior_iterations=[], feedback=None,
                           weakness={"real": {"groups": []}})


def test_every_example_teacher_is_covered() -> None:
    assert {p.name for p in (REPO / "examples").glob("*teacher*.py")} == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_an_example_teacher_refuses_a_word_env_in_one_line(tmp_path: Path, name: str) -> None:
    ctx = _ctx(tmp_path, ["How many r's are in the word strawberry?", "Spell 'cat' backward."])
    with pytest.raises(TeacherError) as err:
        call_teacher(load_teacher(EXAMPLES[name]), ctx)
    message = str(err.value)
    assert "\n" not in message and f"examples/{name} serves" in message and "word-env" in message
    assert "--teacher llm:MODEL" in message  # what to do instead
    assert sorted(p.name for p in ctx.iter_dir.iterdir()) == ["failures.jsonl"]  # nothing written


@pytest.mark.parametrize("name", ["minimal_teacher.py", "arith_teacher.py"])
def test_an_example_teacher_accepts_its_own_env(name: str) -> None:
    """The check passes the embedded env's questions (the refusal is not a blanket one)."""
    import importlib.util

    module_path = REPO / "examples" / ("minimal_teacher.py" if name == "minimal_teacher.py" else "arith_teacher_parts/teacher.py")
    if name == "arith_teacher.py":
        import sys

        sys.path.insert(0, str(REPO / "examples"))
        from arith_teacher_parts.teacher import refuse_other_envs
    else:
        spec = importlib.util.spec_from_file_location("minimal_teacher_check", module_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        refuse_other_envs = module.refuse_other_envs
    refuse_other_envs({"env_id": "selfimprove-arith", "train_samples": [{"question": "47+38", "answer": "85"},
                                                                        {"question": "903-4", "answer": "899"}]})


def _codegen_teacher():
    import importlib.util

    spec = importlib.util.spec_from_file_location("codegen_teacher_check", REPO / "examples" / "codegen_teacher.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_codegen_teacher_accepts_a_new_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The env `selfimprove new-env` writes is one the codegen teacher serves: it finds TASKS and make_row."""
    from selfimprove.new_env import write_env_package

    write_env_package("cg-accept-env", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "cg-accept-env"))
    module = _codegen_teacher().refuse_other_envs({"env_id": "owner/cg-accept-env@0.1"})
    assert module.__name__ == "cg_accept_env" and "add" in module.TASKS


def test_the_codegen_teacher_refuses_an_env_without_a_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An importable env module without TASKS / make_row (a dataset-backed env) is refused like a missing one."""
    (tmp_path / "plain_env.py").write_text("def load_environment(**kwargs):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TeacherError, match="plain-env' has no such module"):
        _codegen_teacher().refuse_other_envs({"env_id": "plain-env"})


def test_the_codegen_teacher_serves_reasoning_gym_through_its_make_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """envs/si_reasoning_gym exposes its tasks (a dict of reasoning-gym configs) and make_row: the codegen
    teacher serves it, and its rows are fresh reasoning-gym instances in the env's own frame, which
    reasoning-gym's scorer gives full marks with their own answer."""
    import random

    monkeypatch.syspath_prepend(str(REPO / "envs" / "si_reasoning_gym"))
    module = _codegen_teacher().refuse_other_envs({"env_id": "si-reasoning-gym"})
    rows = [module.make_row(task, random.Random(3)) for task in module.TASKS]
    assert [r["info"]["task"] for r in rows] == list(module.TASKS)
    for row in rows:
        assert len(row["question"]) <= module.MAX_QUESTION_CHARS
        assert module.score(row["info"]["task"], row["info"]["entry"], row["answer"]) == 1.0
    assert rows == [module.make_row(task, random.Random(3)) for task in module.TASKS]  # seeded by the rng
