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

    mod = importlib.import_module("selfimprove_arith_v1")
    exported = [getattr(mod, n) for n in mod.__all__]
    assert [c for c in exported if isinstance(c, type) and issubclass(c, vf.Taskset)] == [mod.ArithTaskset]


def test_rows_and_reward_match_the_classic_env():
    from selfimprove_arith import make_split
    from selfimprove_arith.v1 import ArithTaskset, ArithTasksetConfig

    tasks = list(ArithTaskset(ArithTasksetConfig(id="selfimprove_arith_v1", split="eval", num_examples=5)))
    assert [(t.data.prompt, t.data.answer) for t in tasks] == [(q, str(a)) for q, a in make_split("eval", 5)]
    assert [f.__name__ for f in tasks[0].hooks("reward")] == ["correct_answer"]
    t = tasks[0]
    score = lambda text: asyncio.run(t.correct_answer(task=t.data, trace=_reply(text)))  # noqa: E731
    assert score(f"<answer>{t.data.answer}</answer>") == 1.0
    assert score(f"<answer>{t.data.answer}1</answer>") == 0.0 and score("no tags") == 0.0


def test_bad_split_is_named():
    from selfimprove_arith.v1 import ArithTaskset, ArithTasksetConfig

    with pytest.raises(ValueError, match="split 'dev'"):
        list(ArithTaskset(ArithTasksetConfig(id="selfimprove_arith_v1", split="dev")))


def test_describe_taskset_for_hub_env():
    from selfimprove.stack.verifiers_v1 import describe_taskset

    d = describe_taskset("selfimprove_arith_v1", {"split": "eval", "num_examples": 2})
    assert d["api"] == "verifiers.v1" and (d["taskset_class"], d["task_class"]) == ("ArithTaskset", "ArithTask")
    assert d["rewards"] == [{"name": "correct_answer", "weight": 1.0}] and d["answer_field"] == "answer"
    # split "eval" for training too: every task is evaluated, so sealed, and none is shown as the example
    assert d["config_fields"] == ["num_examples", "split"] and d["example_prompt"] is None
    assert describe_taskset("selfimprove_arith_v1", {"split": "eval", "num_examples": 2},
                            evaluated_examples=1)["example_prompt"]


BAD = {
    "none_ts": "__all__ = ['x']\nx = 1\n",
    "two_ts": ("import verifiers.v1 as vf\nclass A(vf.Taskset):\n    def load(self):\n        return []\n"
               "class B(vf.Taskset):\n    def load(self):\n        return []\n__all__ = ['A', 'B']\n"),
    "noreward_ts": ("import verifiers.v1 as vf\nclass T(vf.Task[vf.TaskData]):\n    pass\n"
                    "class S(vf.Taskset[T, vf.TasksetConfig]):\n    def load(self):\n"
                    "        yield T(vf.TaskData(idx=0, prompt='1+1'), self.config.task)\n__all__ = ['S']\n"),
}


@pytest.mark.parametrize(("module", "says"), [
    ("none_ts", "exports no Taskset subclass via `__all__` (found ['x']); export exactly one"),
    ("two_ts", "exports 2 Taskset subclasses via `__all__` (['A', 'B'])"),
    ("noreward_ts", "task T has no @vf.reward method"),
])
def test_bad_taskset_modules_are_named(tmp_path, monkeypatch, module, says):
    from selfimprove.errors import ConfigError
    from selfimprove.stack.verifiers_v1 import describe_taskset

    (tmp_path / f"{module}.py").write_text(BAD[module])
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=f"taskset module '{module}'") as e:
        describe_taskset(module)
    assert says in str(e.value)


def test_generated_data_as_a_v1_taskset_uses_the_hub_task_by_reference(tmp_path, monkeypatch):
    """The generated package exports one Taskset over dataset.jsonl whose Task class IS the hub's."""
    import json

    from selfimprove.stack.env_package import build_taskset_package
    from selfimprove.stack.verifiers_v1 import describe_taskset, find_taskset
    from selfimprove_arith.v1 import ArithTask

    data = tmp_path / "dataset.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i}+1", "answer": str(i + 1), "info": {}}) + "\n" for i in range(7)))
    proj = build_taskset_package(tmp_path / "pkg", "arith_iter_1", data, hub_module="selfimprove_arith_v1",
                                 answer_field="answer", origin="iter_1")
    monkeypatch.syspath_prepend(str(proj))
    ts = find_taskset("arith_iter_1")
    import verifiers.v1 as vf

    tasks = list(ts(vf.TasksetConfig(id="arith_iter_1")))
    assert ts.task_type() is ArithTask and len(tasks) == 7 and tasks[2].data.prompt == "2+1"
    assert describe_taskset("arith_iter_1")["rewards"] == [{"name": "correct_answer", "weight": 1.0}]
    t = tasks[2]
    assert asyncio.run(t.correct_answer(task=t.data, trace=_reply("<answer>3</answer>"))) == 1.0


REPLIES = ["<answer>42</answer>", "<answer> 7 </answer>", "x <answer>1</answer> y <answer>2</answer>", "no tag",
           "<answer>\n-3\n</answer>", "<answer></answer>", "<answer>5", "<ANSWER>5</ANSWER>", ""]


@pytest.mark.parametrize("reply", REPLIES)
def test_the_v1_answer_parser_reads_as_the_classic_xmlparser(reply):
    """The v1 Taskset reads <answer> without verifiers' classic XMLParser (gone in verifiers 0.4); on 0.3 both
    must agree on a reply string and on a message list, so the v1 reward is the classic one."""
    import verifiers as vf

    from selfimprove_arith import PARSER_FIELDS
    from selfimprove_arith.v1 import ANSWER_PARSER

    classic = vf.XMLParser(PARSER_FIELDS, answer_field="answer")
    messages = [{"role": "assistant", "content": "<answer>0</answer>"}, {"role": "user", "content": "again"},
                {"role": "assistant", "content": reply}]
    assert ANSWER_PARSER.parse_answer(reply) == classic.parse_answer(reply)
    assert ANSWER_PARSER.parse_answer(messages) == classic.parse_answer(messages)


def test_the_embedded_taskset_id_resolves_with_verifiers_own_loader():
    """What prime-rl main calls while its config validates; the old dotted id raises there."""
    from verifiers.v1.utils.loaders import taskset_class

    from selfimprove_arith.v1 import ArithTaskset

    assert taskset_class("selfimprove_arith_v1") is ArithTaskset
    with pytest.raises(ModuleNotFoundError, match="verifiers.v1.tasksets.selfimprove_arith"):
        taskset_class("selfimprove_arith.v1")


def test_a_generated_package_is_checked_with_verifiers_own_loader(tmp_path, monkeypatch):
    """The install check resolves the package's id as prime-rl does: a package whose hub id is dotted (the old
    `selfimprove_arith.v1`) cannot load, and that is said in one line naming the id, not as a row-count mismatch."""
    import json
    import os

    from selfimprove.errors import SelfImproveError
    from selfimprove.stack import env_package

    data = tmp_path / "dataset.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i}+1", "answer": str(i + 1), "info": {}}) + "\n" for i in range(3)))
    for package, hub in (("good_iter_1", "selfimprove_arith_v1"), ("dotted_iter_1", "selfimprove_arith.v1")):
        env_package.build_taskset_package(tmp_path / package, package, data, hub_module=hub, answer_field="answer",
                                          origin="iter_1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(tmp_path / "good_iter_1"),
                                                      str(tmp_path / "dotted_iter_1")]))
    assert env_package.verify_rows("good_iter_1", api="verifiers.v1")["rows"] == 3
    assert "verifiers.v1.tasksets.selfimprove_arith" in env_package.verify_rows("dotted_iter_1", api="verifiers.v1")["error"]
    # install_and_verify with the install itself stubbed (PYTHONPATH already holds the project)
    monkeypatch.setattr(env_package, "install_package", lambda *a, **k: None)
    monkeypatch.setattr(env_package, "cleanup_stale", lambda *a, **k: [])
    with pytest.raises(SelfImproveError) as e:
        env_package.install_and_verify(tmp_path / "dotted_iter_1", "dotted_iter_1", 3, api="verifiers.v1")
    assert str(e.value).startswith("generated taskset id 'dotted_iter_1' (") and "verifiers' loader cannot load it" in str(e.value)
    assert "\n" not in str(e.value)
