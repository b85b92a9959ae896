"""verifiers v1 introspection (stack/verifiers_v1.py) and its record in hub_env.json.

The arith env's taskset is described (API named, Task class, rewards, train/eval config, how the
answer is read); bad taskset modules each get one line naming the module and the fix, in a fresh
interpreter as `selfimprove introspect` runs it, and through the CLI with a non-zero exit.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from selfimprove.errors import ConfigError
from selfimprove.rundir import RunDir
from selfimprove.stack.taskset_probe import probe_taskset
from selfimprove.stack.verifiers_v1 import describe_taskset, find_taskset, taskset_for_env

HEAD = "import verifiers.v1 as vf\n"
TASK = textwrap.dedent("""
    class D(vf.TaskData):
        answer: str
    class T(vf.Task[D]):
        @vf.reward(weight=1.0)
        async def exact(self, task, trace) -> float:
            {body}
    class S(vf.Taskset[T, vf.TasksetConfig]):
        def load(self):
            yield T(D(idx=0, prompt="1+1", answer="2"), self.config.task)
    __all__ = ["S"]
""")
MODULES = {
    "v1_none": "__all__ = ['x']\nx = 1\n",
    "v1_two": HEAD + "class A(vf.Taskset):\n    def load(self):\n        return []\nclass B(vf.Taskset):\n"
              "    def load(self):\n        return []\n__all__ = ['A', 'B']\n",
    "v1_noreward": HEAD + "class T(vf.Task[vf.TaskData]):\n    pass\nclass S(vf.Taskset[T, vf.TasksetConfig]):\n"
                   "    def load(self):\n        yield T(vf.TaskData(idx=0, prompt='1+1'), self.config.task)\n__all__ = ['S']\n",
    # an extractor that raises on a reply it cannot read (here: any reply without digits)
    "v1_raises": HEAD + TASK.format(body="return float(int(''.join(c for c in trace.last_message.content if c.isdigit())) == int(task.answer))"),
    "v1_good": HEAD + TASK.format(body="return float(trace.last_message.content.strip() == task.answer)"),
}
SAYS = {
    "v1_none": "env module 'v1_none' exports no verifiers v1 Taskset and has no 'v1_none_v1' module; prime-rl >= 0.8",
    "v1_two": "taskset id 'v1_two' refused by verifiers' loader: taskset module 'v1_two' exports 2 Taskset subclasses",
    "v1_noreward": "taskset module 'v1_noreward': task T has no @vf.reward method; add one",
    "v1_raises": "taskset module 'v1_raises': a reward of task T raised on the probe reply '' (ValueError",
}


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the probe's fresh interpreter sees them too
    return tmp_path


def test_arith_taskset_is_described_for_hub_env():
    d = describe_taskset(taskset_for_env("selfimprove_arith"))
    assert d["api"] == "verifiers.v1" and d["taskset_id"] == "selfimprove_arith_v1"
    assert (d["taskset_class"], d["task_class"], d["answer_field"]) == ("ArithTaskset", "ArithTask", "answer")
    assert d["rewards"] == [{"name": "correct_answer", "weight": 1.0}]
    assert (d["train_args"], d["eval_args"]) == ({"split": "train"}, {"split": "eval"})
    assert (d["train_rows"], d["eval_rows"]) == (20000, 1000)  # eval counted, never read
    parser = d["answer_extraction"]["parsers"][0]
    assert (parser["class"], parser["fields"], parser["answer_field"]) == ("AnswerTagParser", ["answer"], "answer")
    assert d["answer_extraction"]["probe_rewards"][""] == {"correct_answer": 0.0}


def test_a_module_that_is_its_own_taskset(modules: Path):
    assert taskset_for_env("v1_good") == "v1_good"
    d = describe_taskset("v1_good")
    assert d["eval_args"] == d["train_args"] == {} and d["eval_rows"] is None and d["answer_extraction"]["parsers"] == []


@pytest.mark.parametrize("module", sorted(SAYS))
def test_bad_taskset_modules_get_one_line_in_the_probe(modules: Path, module: str):
    with pytest.raises(ConfigError) as e:
        probe_taskset(module, {})
    assert SAYS[module] in str(e.value) and "\n" not in str(e.value)


def test_a_classic_module_without_a_v1_wrapper_is_named(modules: Path):
    (modules / "classic_only.py").write_text("def load_environment(**kw):\n    return None\n")
    with pytest.raises(ConfigError, match=r"env module 'classic_only' exports no verifiers v1 Taskset and has no "
                                          r"'classic_only_v1' module; .*#3226.*--stack seed"):
        taskset_for_env("classic_only")


def test_introspect_v1_run_records_the_api_in_hub_env(new_run, cli):
    run = new_run("selfimprove-arith", "--stack", "v1")
    res = cli("introspect", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    hub = json.loads(RunDir(run).hub_env_json.read_text())
    assert hub["api"] == "verifiers.v1" and hub["taskset"]["task_class"] == "ArithTask"
    assert hub["parser_class"] == "XMLParser"  # the classic probe's fields stay (the env has both APIs)
    assert "trained through verifiers.v1: taskset `selfimprove_arith_v1`" in RunDir(run).read_scratchpad()


def test_introspect_refuses_a_raising_reward_with_exit_1(new_run, cli, modules: Path, monkeypatch: pytest.MonkeyPatch):
    """A classic env whose v1 wrapper's reward raises: introspect exits 1 with the one line, writes no hub_env.json."""
    pkg = modules / "arith_like"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import verifiers as vf\nfrom datasets import Dataset\n__all__ = ['load_environment']\n"
        "def load_environment(**kw):\n    rows = Dataset.from_list([{'question': '1+1', 'answer': '2'}])\n"
        "    return vf.SingleTurnEnv(dataset=rows, eval_dataset=rows, rubric=vf.Rubric(funcs=[lambda completion, answer, **k: 0.0]))\n")
    (modules / "arith_like_v1.py").write_text(MODULES["v1_raises"])
    run = new_run("arith-like", "--stack", "v1")
    res = cli("introspect", "--run-dir", run)
    assert res.exit_code == 1
    assert "taskset module 'arith_like_v1': a reward of task T raised" in " ".join(res.stderr.split())
    assert not RunDir(run).hub_env_json.exists()


def test_a_taskset_kept_under_a_dotted_id_is_refused_with_the_fix(modules: Path):
    """`<env>.v1` was this project's layout: verifiers' loader looks up `verifiers.v1.tasksets.<id>` first,
    which raises on the dot, so prime-rl >= 0.8 could never load it. Both doors say so in one line."""
    pkg = modules / "dotted_env"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def load_environment(**kw):\n    return None\n")
    (pkg / "v1.py").write_text(MODULES["v1_good"])
    with pytest.raises(ConfigError) as e:
        taskset_for_env("dotted_env")
    assert ("'dotted_env.v1', a dotted id that verifiers' loader (and so prime-rl >= 0.8) cannot import; "
            "re-export it from a top-level module 'dotted_env_v1'") in str(e.value)
    with pytest.raises(ConfigError) as e:
        find_taskset("dotted_env.v1")
    assert "'verifiers.v1.tasksets.dotted_env.v1' first" in str(e.value) and "'dotted_env_v1'" in str(e.value)
    assert find_taskset("v1_good").__name__ == "S"  # the same taskset, dot-free, resolves


def test_introspect_describes_a_taskset_only_env_from_its_taskset(new_run, cli, modules: Path):
    """No load_environment: every hub_env.json field comes from the Taskset (tests/test_v1_only_env.py goes further)."""
    (modules / "ts_only.py").write_text(MODULES["v1_good"])
    run = new_run("ts-only", "--stack", "v1")
    res = cli("introspect", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    hub = json.loads(RunDir(run).hub_env_json.read_text())
    assert (hub["env_class"], hub["rubric_class"], hub["parser_class"]) == ("S", "T", "none")
    # no eval split: its one train row is the evaluated row, so it is sealed and never shown as a train sample
    assert hub["eval_size"] is None and hub["evaluated_example_ids"] == [0] and hub["train_samples"] == []


def test_introspect_refuses_a_canonical_config_whose_taskset_id_does_not_load(new_run, cli, tmp_path: Path):
    """The canonical config's source ids go through verifiers' loader in the env's Python at introspect (prime-rl
    imports them while it validates): the old dotted id is refused in one line naming the file, the field, the id
    and the fix, exit 1, and nothing is written."""
    repo = Path(__file__).resolve().parents[1]
    text = (repo / "configs" / "basic" / "selfimprove-arith" / "rl.toml").read_text()
    config = tmp_path / "rl.toml"
    config.write_text(text.replace('id = "selfimprove_arith_v1"', 'id = "selfimprove_arith.v1"', 1))
    run = new_run("selfimprove-arith", "--stack", "v1", "--config", str(config))
    res = cli("introspect", "--run-dir", run)
    assert res.exit_code == 1
    said = " ".join(res.stderr.split())
    assert (f"canonical config {config}: orchestrator.train.source[0].env.taskset.id: taskset module "
            f"'selfimprove_arith.v1': a dotted id") in said and "'selfimprove_arith_v1'" in said
    assert not RunDir(run).hub_env_json.exists()
