"""A hub env with ONLY a verifiers v1 Taskset (no classic `load_environment`), in a `--stack v1` run.

The fixture is tests/envs/v1_only_sums (a package, put on PYTHONPATH rather than installed, so the
fresh interpreters selfimprove starts see it too). Introspect fills hub_env.json from the Taskset
(eval tasks counted, never shown); the round trip scores each generated row's reasoning with the
hub Task's own rewards; decontamination hashes the v1 eval tasks' prompts; the teacher's
generator skeleton names the taskset module instead of load_environment.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from selfimprove.errors import ConfigError
from selfimprove.gates.dedup import check_eval_overlap, find_eval_overlap
from selfimprove.gates.roundtrip import check_reward_round_trip
from selfimprove.models import HubEnv
from selfimprove.phases.iteration_steps import render_generator_skeleton
from selfimprove.rundir import RunDir
from selfimprove.stack import env_api_v1, verifiers_classic

FIXTURE = Path(__file__).parent / "envs" / "v1_only_sums"


@pytest.fixture
def sums_env(monkeypatch: pytest.MonkeyPatch):
    """The fixture package importable here and in every fresh interpreter; returns its module."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    monkeypatch.setenv("PYTHONPATH", str(FIXTURE))
    import v1_only_sums

    return v1_only_sums


@pytest.fixture
def sums_hub(sums_env, new_run, cli) -> HubEnv:
    """hub_env.json of an introspected `--stack v1` run on the fixture."""
    run = new_run("v1-only-sums", "--stack", "v1")
    res = cli("introspect", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    return RunDir(run).read_hub_env()


def _row(question: str, answer: str, reasoning: str | None) -> dict:
    return {"question": question, "answer": answer, "info": {} if reasoning is None else {"reasoning": reasoning}}


def test_fixture_has_no_classic_side(sums_env):
    assert not hasattr(sums_env, "load_environment") and sums_env.__all__ == ["SumsTaskset"]
    assert not env_api_v1.has_classic_side("v1_only_sums")


def test_introspect_fills_hub_env_from_the_taskset(sums_env, sums_hub: HubEnv):
    h = sums_hub
    assert (h.api, h.module, h.env_class, h.rubric_class) == ("verifiers.v1", "v1_only_sums", "SumsTaskset", "SumsTask")
    assert [(f.name, f.weight) for f in h.rubric_funcs] == [("exact_answer", 1.0)]
    assert h.system_prompt == sums_env.SYSTEM_PROMPT
    assert h.answer_format_instruction == "Think step by step, then give the final number inside <answer></answer> tags."
    assert (h.train_size, h.eval_size) == (300, 60)
    train = dict(sums_env.make_split("train"))
    assert len(h.train_samples) == 3 and all(train[s.question] == s.answer for s in h.train_samples)
    assert h.taskset["train_args"] == {"split": "train"} and h.taskset["eval_args"] == {"split": "eval"}
    assert "train_samples" not in h.taskset  # moved to the classic-shaped field the teacher reads
    # sealed: no eval task's text anywhere in what the teacher reads
    text = h.model_dump_json()
    assert not any(q in text for q, _ in sums_env.make_split("eval"))
    assert not any(name in text for name in sums_env.SPLITS["eval"][1])


def test_a_taskset_only_run_skips_the_classic_probe(sums_env, new_run, cli, monkeypatch: pytest.MonkeyPatch):
    def no_classic(*a, **k):
        raise AssertionError("the classic probe ran for a Taskset-only env")

    monkeypatch.setattr(verifiers_classic, "introspect_env", no_classic)
    run = new_run("v1-only-sums", "--stack", "v1")
    assert cli("introspect", "--run-dir", run).exit_code == 0


def test_round_trip_scores_reasoning_with_the_hub_tasks_rewards(sums_hub: HubEnv):
    q = "Ana has 40 apples and is given 2 more. How many apples does Ana have now?"
    rows = [
        _row(q, "42", "40 + 2 = 42. <answer>42</answer>"),   # round-trips
        _row(q, "43", "40 + 2 = 42. <answer>42</answer>"),   # the answer is not what the reasoning says
        _row(q, "42", "40 + 2 = 42, so the answer is 42."),  # not in the hub answer format
        _row(q, "42", None),                                 # no reasoning
    ]
    report = env_api_v1.round_trip_gate(sums_hub, rows, python=sys.executable)
    by_rule = {f.rule: f.rows for f in report.failures}
    assert by_rule == {"round_trip_not_full_marks": [1, 2], "round_trip_input": [3]}
    assert report.stats["round_trip_ok"] == 1 and not report.passed
    assert env_api_v1.round_trip_gate(sums_hub, rows[:1]).passed


def test_round_trip_rules_on_scores():
    rows = [_row("q", str(i), "r") for i in range(4)]
    weights = {"correct": 1.0, "length_penalty": -0.5, "shown": 0.0}
    scored = [{"rewards": {"correct": 1.0, "length_penalty": 1.0, "shown": 0.0}},  # penalties / metrics don't count
              {"rewards": {"correct": 0.0}}, {"error": "ValidationError: answer"}, None]
    report = check_reward_round_trip(rows, scored, weights)
    assert {f.rule: f.rows for f in report.failures} == {
        "round_trip_not_full_marks": [1], "round_trip_reward_error": [2], "round_trip_input": [3]}
    assert "correct=0.0" in report.summary()


def test_eval_index_is_built_from_the_v1_eval_tasks(sums_env, sums_hub: HubEnv):
    index = env_api_v1.eval_ngrams(sums_hub, eval_examples=200)
    assert (index.n_questions, index.source) == (60, "eval_split")
    eval_q = next(iter(sums_env.make_split("eval")))[0]
    train_q = next(iter(sums_env.make_split("train")))[0]
    rows = [_row(eval_q, "1", "r"), _row(train_q, "1", "r")]
    assert not check_eval_overlap(rows, index).passed
    assert find_eval_overlap(rows, index).rows == [0]
    # without an eval split (eval args = train args) the engine scores the first eval_examples train tasks
    no_split = sums_hub.model_copy(deep=True)
    no_split.taskset["eval_args"] = no_split.taskset["train_args"]
    index = env_api_v1.eval_ngrams(no_split, eval_examples=25)
    assert (index.n_questions, index.source) == (25, "train_fallback")
    assert env_api_v1.eval_ngrams_key(no_split, 25)["limit"] == 25 and env_api_v1.eval_ngrams_key(sums_hub, 25)["limit"] is None


def test_generator_skeleton_names_the_taskset_not_load_environment(sums_hub: HubEnv):
    text = render_generator_skeleton(sums_hub, 1, env_api_v1)
    ast.parse(text)
    assert "REAL_TASKSET = importlib.import_module('v1_only_sums')" in text and "load_environment" not in text
    assert "api: verifiers.v1" in text and "inside <answer></answer> tags" in text
    classic = sums_hub.model_copy(update={"api": "verifiers.classic", "taskset": None, "env_id": "selfimprove-arith"})
    text = render_generator_skeleton(classic, 1, verifiers_classic)
    ast.parse(text)
    assert "REAL_ENV = vf.load_environment('selfimprove-arith', **{})" in text and "REAL_ENV.parser.parse_answer" in text


def test_a_taskset_only_env_with_a_raising_reward_is_refused(new_run, cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "ts_raises.py").write_text(
        "import verifiers.v1 as vf\nclass D(vf.TaskData):\n    answer: str\nclass T(vf.Task[D]):\n"
        "    @vf.reward(weight=1.0)\n    async def exact(self, task, trace) -> float:\n"
        "        return float(int(trace.last_message.content) == int(task.answer))\n"
        "class S(vf.Taskset[T, vf.TasksetConfig]):\n    def load(self):\n"
        "        yield T(D(idx=0, prompt='1+1', answer='2'), self.config.task)\n__all__ = ['S']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    run = new_run("ts-raises", "--stack", "v1")
    res = cli("introspect", "--run-dir", run)
    err = " ".join(res.stderr.split())
    assert res.exit_code == 1 and "taskset module 'ts_raises': a reward of task T raised on the probe reply ''" in err
    last = res.stderr.strip().splitlines()[-1]  # the lines before it are progress
    assert "taskset module 'ts_raises'" in last and "make it return 0.0" in last and not RunDir(run).hub_env_json.exists()


def test_round_trip_of_a_missing_taskset_is_one_line(sums_hub: HubEnv):
    gone = sums_hub.model_copy(deep=True)
    gone.taskset["taskset_id"] = "no_such_taskset_module"
    with pytest.raises(ConfigError) as e:
        env_api_v1.round_trip_gate(gone, [_row("q", "1", "<answer>1</answer>")])
    assert "no_such_taskset_module" in str(e.value) and "\n" not in str(e.value)
    assert json.dumps(gone.taskset["rewards"])  # the section stays JSON


def test_v1_skeleton_with_a_parser_object_runs(sums_hub: HubEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """When the taskset module holds a parser (v1_only_arith's PARSER), the skeleton asserts the round trip with it."""
    arith = Path(__file__).parent / "envs" / "v1_only_arith"
    hub = sums_hub.model_copy(deep=True)
    hub.taskset["taskset_id"] = "v1_only_arith"
    hub.taskset["answer_extraction"]["parsers"] = [{"attr": "PARSER", "class": "XMLParser"}]
    text = render_generator_skeleton(hub, 1, env_api_v1)
    assert "REAL_PARSER = REAL_TASKSET.PARSER" in text and "REAL_PARSER.parse_answer([{\"role\": \"assistant\", \"content\": row[\"info\"][\"reasoning\"]}])" in text
    (tmp_path / "gen_dataset.py").write_text(text)
    proc = subprocess.run([sys.executable, "gen_dataset.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(arith)})
    assert proc.returncode == 0 and "wrote 0 rows" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.skipif(not os.environ.get("SELFIMPROVE_TEST_VERIFIERS_04_PYTHON"),
                    reason="set SELFIMPROVE_TEST_VERIFIERS_04_PYTHON to a Python with verifiers 0.4.x (v1 API only)")
def test_the_env_steps_under_verifiers_04(sums_env, sums_hub: HubEnv):
    """The same describe / round trip / eval hashing in a `pip install verifiers` (0.4.x) interpreter."""
    py = os.environ["SELFIMPROVE_TEST_VERIFIERS_04_PYTHON"]
    api, info, taskset = env_api_v1.describe_env("v1-only-sums", {}, timeout=300, python=py)
    assert info["verifiers_version"].startswith("0.4") and (info["train_size"], info["eval_size"]) == (300, 60)
    assert info["train_samples"] == [s.model_dump() for s in sums_hub.train_samples]
    hub = sums_hub.model_copy(update={"taskset": taskset})
    q = "Ana has 40 apples and is given 2 more. How many apples does Ana have now?"
    report = env_api_v1.round_trip_gate(hub, [_row(q, "42", "<answer>42</answer>"), _row(q, "43", "<answer>42</answer>")], python=py)
    assert {f.rule: f.rows for f in report.failures} == {"round_trip_not_full_marks": [1]}
    assert env_api_v1.eval_ngrams(hub, 50, python=py).n_questions == 60
