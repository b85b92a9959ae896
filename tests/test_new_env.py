"""`selfimprove new-env NAME` (issue 43, item 1): a working env package from the shipped template, or a
one-line refusal with nothing written."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest


def _load(env_dir: Path, module: str, monkeypatch: pytest.MonkeyPatch):
    """Import the written env's module for this test only (it leaves sys.path and sys.modules as they were)."""
    monkeypatch.syspath_prepend(str(env_dir))
    monkeypatch.setitem(sys.modules, module, None)  # recorded, so the import below is undone after the test
    del sys.modules[module]
    return importlib.import_module(module)


def test_new_env_writes_a_loadable_env_and_the_next_commands(cli, tmp_path: Path, monkeypatch) -> None:
    """The package loads as a single-turn env with train and eval splits whose rows name their task,
    no eval question is a train question, and the command prints install, student build and run."""
    res = cli("new-env", "tut-env", "--dir", str(tmp_path), "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    env_dir = tmp_path / "tut-env"
    assert out["env_dir"] == str(env_dir)
    assert sorted(str(p.relative_to(env_dir)) for p in env_dir.rglob("*") if p.is_file()) == [
        "pyproject.toml", "tut_env/__init__.py"]
    assert 'name = "tut-env"' in (env_dir / "pyproject.toml").read_text()
    assert [s.split()[:3] for s in out["next"]] == [["pip", "install", "-e"], ["selfimprove", "student", "build"],
                                                   ["selfimprove", "run", "tut-env"]]
    assert "examples/codegen_teacher.py:CodegenTeacher" in out["next"][2]

    module = _load(env_dir, "tut_env", monkeypatch)
    env = module.load_environment(num_train_examples=200, num_eval_examples=40)
    train, held = list(env.dataset), list(env.eval_dataset)
    assert (len(train), len(held)) == (200, 40)
    assert {r["info"]["task"] for r in train} == set(module.TASKS)
    assert not {r["question"] for r in train} & {r["question"] for r in held}
    assert len({r["question"] for r in train}) == 200


def test_the_template_reward_is_exact_and_zero_one(tmp_path: Path, monkeypatch) -> None:
    """1.0 for the reference inside <answer></answer>, 0.0 for a near miss or no tags."""
    from selfimprove.new_env import write_env_package

    module = _load(write_env_package("tut-reward-env", tmp_path), "tut_reward_env", monkeypatch)
    import verifiers as vf

    parser = vf.XMLParser(["answer"], answer_field="answer")

    def score(text: str) -> float:
        return module.exact_answer([{"role": "assistant", "content": text}], "95", parser)

    assert (score("<answer>95</answer>"), score("<answer>96</answer>"), score("95")) == (1.0, 0.0, 0.0)


@pytest.mark.parametrize("name", ["My Env", "1env", "my--env", "my-env-", "class", "json", "x" * 61])
def test_a_bad_name_is_refused_in_one_line_and_nothing_is_written(cli, tmp_path: Path, name: str) -> None:
    res = cli("new-env", name, "--dir", str(tmp_path))
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "new-env NAME" in lines[0] and ("use " in lines[0] or "pick " in lines[0]), res.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_existing_target_is_refused_and_left_as_it_was(cli, tmp_path: Path) -> None:
    (tmp_path / "tut-exists-env").mkdir()
    (tmp_path / "tut-exists-env" / "mine.txt").write_text("keep")
    res = cli("new-env", "tut-exists-env", "--dir", str(tmp_path))
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0 and "already exists" in res.stderr and "--dir" in res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["tut-exists-env"]
    assert [p.name for p in (tmp_path / "tut-exists-env").iterdir()] == ["mine.txt"]
