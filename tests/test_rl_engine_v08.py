"""The CPU engine reads prime-rl >= 0.8 configs (main at 559b44772) and writes main's output layout."""

from __future__ import annotations

from pathlib import Path

from selfimprove.rl.config import engine_view, resolve
from selfimprove.rundir import ArmDir
from selfimprove.stack import prime_rl as seed
from selfimprove.stack import prime_rl_v08 as v08
from selfimprove.stack.dialects import dialect_of_argv

ARM = dict(model="selfimprove/tiny-arith", new_steps=3, batch_size=32, rollouts_per_example=8,
           train_envs=[{"id": "selfimprove-arith"}], eval_env_id="selfimprove-arith",
           eval_env_args={"num_eval_examples": 32}, num_examples=32, seq_len=256, train_max_tokens=24, seed=1)


def test_engine_view_maps_main_keys_to_what_the_engine_honours(tmp_path: Path):
    cfg = v08.resume_config(resume_step=2, **{**ARM, "train_envs": [{"id": "a", "args": {"k": 1}, "ratio": 2.0}]})
    toml = tmp_path / "rl.toml"
    v08.write_toml(toml, cfg)
    argv = v08.rl_command_args([toml], {}, tmp_path / "arm" / "prime_out")
    assert dialect_of_argv(argv) is v08 and dialect_of_argv(["@", str(toml)]) is v08
    raw, _ = v08.parse_rl_argv(argv)
    eng = resolve(engine_view(raw))
    assert eng.output_dir == tmp_path / "arm" / "prime_out"
    assert (eng.resume_step, eng.max_steps, eng.rollouts_per_example, eng.seed) == (2, 5, 8, 1)
    assert [(b.id, b.args, b.ratio) for b in eng.train_envs] == [("a", {"k": 1}, 2.0)]
    assert eng.eval.envs[0].args == {"num_eval_examples": 32} and eng.eval.rollouts_per_example == 1
    seed_toml = tmp_path / "seed.toml"
    seed.write_toml(seed_toml, seed.resume_config(resume_step=2, **ARM))
    assert dialect_of_argv(seed.rl_command_args([seed_toml], {}, tmp_path / "o")) is seed


def test_arm_dir_reads_main_layout(tmp_path: Path):
    arm = ArmDir(tmp_path, "iter_1", "v1")
    assert arm.eval_file(4) == tmp_path / "iter_1/prime_out/rollouts/step_4/eval/all/traces.jsonl"
    assert arm.orchestrator_ckpt(4) == tmp_path / "iter_1/prime_out/checkpoints/step_4/orchestrator"
    assert arm.broadcast(4) == tmp_path / "iter_1/prime_out/broadcasts/step_4"
    old = ArmDir(tmp_path, "iter_1")
    assert old.eval_file(4) == tmp_path / "iter_1/prime_out/run_default/rollouts/step_4/eval_rollouts.jsonl"


def test_engine_scores_a_v1_source_with_the_tasks_own_rewards(tmp_path: Path, monkeypatch):
    """A source is loaded as a Taskset (its config picks the rows) and each reply is scored by Task.score;
    a reward that raises scores 0 with the error kept in the row."""
    import pytest

    from selfimprove.errors import EnvNotFound
    from selfimprove.rl.tasksets import load_taskset, score_tasks, taskset_rows
    from selfimprove_arith import make_split

    env = load_taskset("selfimprove_arith.v1", {"split": "eval"})
    rows = taskset_rows(env, 3)
    assert [r["prompt"][-1]["content"] for r in rows] == [q for q, _ in make_split("eval", 3)]
    good, bad = f"<answer>{rows[0]['answer']}</answer>", "<answer>x</answer>"
    scored = score_tasks(env, rows[:1] * 2, [good, bad])
    assert [s["reward"] for s in scored] == [1.0, 0.0] and scored[0]["metrics"] == {"correct_answer": 1.0}
    (tmp_path / "raising_ts.py").write_text(
        "import verifiers.v1 as vf\nclass T(vf.Task[vf.TaskData]):\n    @vf.reward(weight=1.0)\n"
        "    async def r(self, task, trace) -> float:\n        raise KeyError('no answer tag')\n"
        "class S(vf.Taskset[T, vf.TasksetConfig]):\n    def load(self):\n"
        "        yield T(vf.TaskData(idx=0, prompt='1+1'), self.config.task)\n__all__ = ['S']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = load_taskset("raising_ts", {})
    [res] = score_tasks(env, taskset_rows(env), ["2"])
    assert res["reward"] == 0.0 and res["error"]["error"] == "KeyError" and "no answer tag" in res["error"]["message"]
    with pytest.raises(EnvNotFound, match="taskset id 'selfimprove-arith': no such module"):
        load_taskset("selfimprove-arith", {})
