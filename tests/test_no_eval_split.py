"""Envs without an eval split are honest (issue 24): verifiers scores every arm on the first
`eval_examples` TRAIN rows, so those rows are held out of training (a wrapper env), never reach the
teacher (failures.jsonl, analysis.json, weakness_stats.json), and every label reads
"train (no eval split)". Where the hold-out is impossible, one line says the scores are in-sample.

The env is tests/envs/si_no_eval_reverse (reverse text, 30 train rows, no eval split), put on
PYTHONPATH; training is the fake engine's (the wrapper is loaded by the CPU engine's own loader)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import sys
from pathlib import Path

import pytest

from selfimprove.errors import TeacherActionNeeded
from selfimprove.models import HubEnv, RewardFunc
from selfimprove.phases import holdout
from selfimprove.phases.analyze import arm_weakness
from selfimprove.phases.context import RunContext
from selfimprove.phases.evals import NO_EVAL_SPLIT
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir
from selfimprove.stack import toml_paths
from selfimprove.stack import verifiers_classic as vc
from selfimprove.stack.env_package import cleanup_stale, site_packages

from loop_helpers import FAKE

ENV_DIR = Path(__file__).parent / "envs" / "si_no_eval_reverse"
ENV_ID = "si-no-eval-reverse"
SMALL = ("--steps-per-run", "4", "--batch-size", "32", "--rollouts-per-example", "4", "--allow-small-batch")


def no_eval_hub(env_id: str = ENV_ID, train_size: int = 30, evaluated: int = 5) -> HubEnv:
    """hub_env.json as introspect records this env (see test_introspect_records_the_evaluated_ids)."""
    return HubEnv(env_id=env_id, module=env_id.replace("-", "_"), source="local", env_class="SingleTurnEnv",
                  parser_class="XMLParser", rubric_class="Rubric",
                  rubric_funcs=[RewardFunc(name="reversed_exactly", weight=1.0)],
                  system_prompt="Answer inside <answer></answer>.", answer_format_instruction=None,
                  train_size=train_size, eval_size=None, evaluated_example_ids=list(range(evaluated)),
                  evaluated_rows=f"the first {evaluated} train rows: the env has no eval split")


@pytest.fixture
def env_on_path(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ENV_DIR), os.environ.get("PYTHONPATH")])))
    return ENV_ID


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.001")
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)


def test_introspect_records_the_evaluated_ids_and_samples_none_of_those_rows(env_on_path):
    info = vc.introspect_env(env_on_path, {}, evaluated_examples=5)
    assert (info["train_size"], info["eval_size"]) == (30, None)
    assert info["evaluated_example_ids"] == [0, 1, 2, 3, 4]
    evaluated = {f"Reverse the text: {q}" for q in _questions(range(5))}
    assert info["train_samples"] and not {s["question"] for s in info["train_samples"]} & evaluated


def _questions(ids) -> list[str]:
    sys.path.insert(0, str(ENV_DIR))
    try:
        import si_no_eval_reverse as env
    finally:
        sys.path.remove(str(ENV_DIR))
    return [env.question(i) for i in ids]


def test_baseline_holds_the_evaluated_rows_out_of_training(env_on_path, fake_engine, new_run, cli):
    """iter_0 trains on a wrapper without the 5 evaluated rows (the CPU engine's own loader sees 25 train
    rows, ids 5..29, and the same 5 eval rows as the real env); the eval block stays on the real env;
    Run B/C blocks are swapped the same way; the console and the scratchpad say so."""
    run_dir = new_run("reverse", "--hub-id", env_on_path, "--eval-examples", "5", *SMALL)
    rd = RunDir(run_dir)
    rd.write_hub_env(no_eval_hub())
    package = None
    try:
        res = cli("baseline", "--run-dir", run_dir)
        assert res.exit_code == 0, res.output
        record = json.loads((run_dir / "iter_0" / "heldout.json").read_text())
        package = record["package"]
        assert record["in_sample"] is False and record["train_rows_left"] == 25
        said = [ln for ln in res.output.splitlines() if "held out of training" in ln]
        assert len(said) == 1 and package in said[0], res.output
        overlay = toml_paths.read_toml(run_dir / "iter_0" / "eval_overlay.toml")
        assert [e["id"] for e in overlay["orchestrator"]["train"]["env"]] == [package]
        assert [e["id"] for e in overlay["orchestrator"]["eval"]["env"]] == [ENV_ID]
        assert holdout.held_out_train_envs(RunContext.load(rd), [{"id": ENV_ID, "ratio": 0.5}, {"id": "other"}]) == [
            {"id": package, "ratio": 0.5}, {"id": "other"}]
        pad = rd.read_scratchpad()
        assert f"on {NO_EVAL_SPLIT}" in pad and "held out of training" in pad
        assert rd.read_metrics().get("iter_0").eval_split == NO_EVAL_SPLIT
        # what the CPU engine would train and evaluate on, through its own loader
        probe = ("import json, sys; from selfimprove.rl.rollouts import load_env, split_rows\n"
                 "w = load_env(sys.argv[1], {}); r = load_env(sys.argv[2], {})\n"
                 "print(json.dumps([[x['example_id'] for x in split_rows(w, 'train')],"
                 " [x['example_id'] for x in split_rows(r, 'eval', 5)],"
                 " [x['prompt'][-1]['content'] for x in split_rows(w, 'train')][:1]]))")
        out = subprocess.run([sys.executable, "-c", probe, package, ENV_ID], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        train_ids, eval_ids, first = json.loads(out.stdout.strip().splitlines()[-1])
        assert train_ids == list(range(5, 30)) and eval_ids == [0, 1, 2, 3, 4]
        assert first == [f"Reverse the text: {_questions([5])[0]}"]
    finally:
        if package:
            cleanup_stale(package, site_packages())


def test_in_sample_when_no_row_is_left_to_train_on(env_on_path, fake_engine, new_run, cli):
    run_dir = new_run("reverse", "--hub-id", env_on_path, "--eval-examples", "30", *SMALL)
    RunDir(run_dir).write_hub_env(no_eval_hub(evaluated=30))
    res = cli("baseline", "--run-dir", run_dir)
    assert res.exit_code == 0, res.output
    said = [ln for ln in res.output.splitlines() if "in-sample" in ln]
    assert len(said) == 1 and "lower --eval-examples" in said[0], res.output
    record = json.loads((run_dir / "iter_0" / "heldout.json").read_text())
    assert record["in_sample"] is True and "package" not in record
    overlay = toml_paths.read_toml(run_dir / "iter_0" / "eval_overlay.toml")
    assert "train" not in overlay["orchestrator"]  # the canonical config's real env trains, as said
    assert "in-sample" in RunDir(run_dir).read_scratchpad()


def test_v1_runs_say_in_sample(tmp_path):
    hub = no_eval_hub()
    hub.api = "verifiers.v1"

    class Cfg:
        dataset, run_id, stack = "reverse", "x1", "v1"

    record = holdout._decide(Cfg(), hub, 5)
    assert record["in_sample"] is True and "--stack v1" in holdout.in_sample_line(record)


def test_evaluated_train_rows_never_reach_the_teacher(run: RunDir):
    """iter_1/failures.jsonl once held rollouts of an evaluated row. The fake engine's train rows have
    example ids 0..7; with ids 0..4 evaluated, only 5..7 may reach failures.jsonl and the statistics."""
    hub = run.read_hub_env()
    hub.eval_size, hub.evaluated_example_ids = None, [0, 1, 2, 3, 4]
    run.write_hub_env(hub)
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    failures = [json.loads(line) for line in (it / "failures.jsonl").read_text().splitlines()]
    assert failures and {f["example_id"] for f in failures} <= {5, 6, 7}
    analysis = json.loads((it / "analysis.json").read_text())
    assert analysis["n_evaluated_train_rollouts_left_out"] > 0 and "evaluates are sealed too" in analysis["note"]
    stats = json.loads((it / "weakness_stats.json").read_text())
    assert "sealed too" in stats["note"]
    everything = arm_weakness(run.iter(0), run.read_eval_summary(run.iter(0)).final_step)
    assert 0 < stats["real"]["window"]["rollouts"] < everything["window"]["rollouts"]


V1_FIVE = textwrap.dedent("""
    import verifiers.v1 as vf
    class D(vf.TaskData):
        answer: str
    class T(vf.Task[D]):
        @vf.reward(weight=1.0)
        async def exact(self, task, trace) -> float:
            return float(trace.last_message.content.strip() == task.answer)
    class S(vf.Taskset[T, vf.TasksetConfig]):
        def load(self):
            for i in range(8):
                yield T(D(idx=100 + i, prompt=f"{i}+{i}", answer=str(2 * i)), self.config.task)
    __all__ = ["S"]
""")


def test_v1_taskset_without_eval_split_records_the_evaluated_ids(tmp_path, monkeypatch):
    """A Taskset with no eval split is scored on its first tasks: their ids are recorded (the analysis drops
    their train rollouts by id) and no train sample is one of them."""
    from selfimprove.stack.verifiers_v1 import describe_taskset

    (tmp_path / "v1_no_eval_five.py").write_text(V1_FIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    d = describe_taskset("v1_no_eval_five", {}, evaluated_examples=5)
    assert d["eval_rows"] is None and d["evaluated_example_ids"] == [100, 101, 102, 103, 104]
    assert d["train_samples"] and {s["question"] for s in d["train_samples"]} <= {"5+5", "6+6", "7+7"}
    # hub_env.json reaches the teacher: its example prompt and the probe with a real answer are unsealed tasks
    assert "5+5" in str(d["example_prompt"]) and not set(d["answer_extraction"]["probe_rewards"]) & {"0", "2", "4", "6", "8"}
    assert "10" in d["answer_extraction"]["probe_rewards"]


def test_iteration_results_say_train_no_eval_split(run: RunDir):
    """The scratchpad's iteration results said "examples of the real eval split" on an env without one."""
    from selfimprove.phases.record import record_iteration

    hub = run.read_hub_env()
    hub.eval_size, hub.evaluated_example_ids = None, [0, 1, 2, 3, 4]
    run.write_hub_env(hub)
    run.iter(1).dir.mkdir(parents=True, exist_ok=True)
    run.iter(1).eval_summary.write_bytes(run.iter(0).eval_summary.read_bytes())  # iter_1 scored like iter_0
    record_iteration(RunContext.load(run), 1)
    results = run.read_scratchpad().split("iter_1 results")[-1]
    assert f"examples: {NO_EVAL_SPLIT})" in results and "real eval split" not in results


def test_a_damaged_or_stale_record_is_made_again(env_on_path, fake_engine, new_run, tmp_path):
    """heldout.json without a package, or for other env args, is never trusted: prepare decides again."""
    run_dir = new_run("reverse", "--hub-id", env_on_path, "--eval-examples", "30", *SMALL)
    rd = RunDir(run_dir)
    hub = no_eval_hub(evaluated=30)
    (run_dir / "iter_0").mkdir(exist_ok=True)
    for stale in ({"held_out": 30, "in_sample": False}, {"env_id": ENV_ID, "env_args": {"num_train": 9},
                                                         "held_out": 30, "in_sample": True, "reason": "x"}):
        (run_dir / "iter_0" / "heldout.json").write_text(json.dumps(stale))
        record = holdout.prepare(rd, rd.read_run(), hub, 30)
        assert record["in_sample"] is True and record["env_args"] == {} and "lower --eval-examples" in record["reason"]
