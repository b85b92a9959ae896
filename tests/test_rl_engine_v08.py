"""The CPU engine reads prime-rl >= 0.8 configs (main at 559b44772) and writes main's output layout."""

from __future__ import annotations

from pathlib import Path

from selfimprove.rl.config import engine_view, resolve
from selfimprove.rundir import MAIN_LAYOUT, ArmDir
from selfimprove.stack.dialects import SEED, V1, dialect_of_argv

ARM = dict(model="selfimprove/tiny-arith", new_steps=3, batch_size=32, rollouts_per_example=8,
           train_envs=[{"id": "selfimprove-arith"}], eval_env_id="selfimprove-arith",
           eval_env_args={"num_eval_examples": 32}, num_examples=32, seq_len=256, train_max_tokens=24, seed=1)


def test_engine_view_maps_main_keys_to_what_the_engine_honours(tmp_path: Path):
    cfg = V1.resume_config(resume_step=2, **{**ARM, "train_envs": [{"id": "a", "args": {"k": 1}, "ratio": 2.0}]})
    toml = tmp_path / "rl.toml"
    V1.write_toml(toml, cfg)
    argv = V1.rl_command_args([toml], {}, tmp_path / "arm" / "prime_out")
    assert dialect_of_argv(argv) is V1 and dialect_of_argv(["@", str(toml)]) is V1
    raw, _ = V1.parse_rl_argv(argv)
    eng = resolve(engine_view(raw, V1))
    assert eng.output_dir == tmp_path / "arm" / "prime_out"
    assert (eng.resume_step, eng.max_steps, eng.rollouts_per_example, eng.seed) == (2, 5, 8, 1)
    assert [(b.id, b.args, b.ratio) for b in eng.train_envs] == [("a", {"k": 1}, 2.0)]
    assert eng.eval.envs[0].args == {"num_eval_examples": 32} and eng.eval.rollouts_per_example == 1
    seed_toml = tmp_path / "seed.toml"
    SEED.write_toml(seed_toml, SEED.resume_config(resume_step=2, **ARM))
    assert dialect_of_argv(SEED.rl_command_args([seed_toml], {}, tmp_path / "o")) is SEED


def test_arm_dir_reads_main_layout(tmp_path: Path):
    arm = ArmDir(tmp_path, "iter_1", MAIN_LAYOUT)
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

    env = load_taskset("selfimprove_arith_v1", {"split": "eval"})
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


# ---------------------------------------------------------------- episode rows (verifiers v1 Episode.to_record())


def verifiers_episode(*, idx: int = 3, rewards: dict | None = None, metrics: dict | None = None,
                      finish_reason: str = "stop", traces: int = 1, secret: str = "sealed text") -> dict:
    """An Episode record built with verifiers' own classes, independent of the engine's builder."""
    import verifiers.v1 as vf
    from verifiers.v1.task import WireTaskData
    from verifiers.v1.trace import ModelCall
    from verifiers.v1.types import AssistantMessage, SystemMessage, UserMessage, Usage

    task = vf.TraceTask(type="T", data=WireTaskData(idx=idx, prompt=f"Q {secret}", system_prompt="Be brief.",
                                                    answer=f"A {secret}"))
    out = []
    for _ in range(traces):
        t = vf.Trace(task=task, agent=vf.AgentInfo(config=vf.AgentConfig()), ok=True, metrics=metrics or {},
                     rewards={k: vf.Reward(score=s, weight=w) for k, (s, w) in (rewards or {}).items()})
        t.nodes = [vf.MessageNode(message=SystemMessage(content="Be brief.")),
                   vf.MessageNode(parent=0, message=UserMessage(content=f"Q {secret}"), token_ids=[1, 2], mask=[0, 0]),
                   vf.MessageNode(parent=1, message=AssistantMessage(content=f"reply {secret}"), sampled=True,
                                  token_ids=[3, 4, 5], mask=[1, 1, 1])]
        t.calls = [ModelCall(node=2, finish_reason=finish_reason, usage=Usage(prompt_tokens=2, completion_tokens=3))]
        out.append(t)
    return vf.Episode(task=task, ok=True, traces=out).to_record()


def test_episode_record_maps_to_the_readers_fields():
    """Where things sit in a real record: task.data.idx / prompt / answer, nodes (sampled = completion),
    rewards {name: {score, weight}} (reward = sum score*weight), metrics, calls[].usage, finish_reason."""
    from selfimprove.engines.rollout_rows import is_episode, sealed_scores, train_rewards_of, train_rows

    rec = verifiers_episode(rewards={"correct": (1.0, 0.5), "fmt": (1.0, 0.25)}, metrics={"is_correct": 1.0})
    assert is_episode(rec) and not is_episode({"example_id": 1, "reward": 1.0})
    [row] = train_rows(rec)
    assert row["example_id"] == 3 and row["reward"] == 0.75 and row["answer"] == "A sealed text"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and row["prompt"][1]["content"] == "Q sealed text"
    assert row["completion"] == [{"role": "assistant", "content": "reply sealed text"}]
    assert row["metrics"] == {"is_correct": 1.0, "correct": 1.0, "fmt": 1.0}
    assert row["token_usage"] == {"output_tokens": 3} and row["is_truncated"] is False
    assert sealed_scores(rec) == [(3, 0.75, 1.0)] and train_rewards_of(rec) == [0.75]
    # one rollout per trace; a length finish is truncation; a trace-less (errored) episode scores 0
    two = verifiers_episode(rewards={"r": (0.0, 1.0)}, finish_reason="length", traces=2)
    assert [(r["reward"], r["is_truncated"]) for r in train_rows(two)] == [(0.0, True), (0.0, True)]
    assert sealed_scores(two) == [(3, 0.0, None), (3, 0.0, None)]
    empty = {**two, "traces": [], "ok": False}
    assert sealed_scores(empty) == [(3, 0.0, None)] and train_rows(empty)[0]["prompt"][-1]["content"] == "Q sealed text"


def test_sealed_scores_return_numbers_and_ids_only():
    """The sealed view of an Episode record carries no text of it (the eval rows' seal)."""
    from selfimprove.engines.rollout_rows import sealed_scores

    rec = verifiers_episode(rewards={"correct": (1.0, 1.0)}, secret="SEAL-canary-v1")
    out = sealed_scores(rec)
    assert "SEAL-canary-v1" not in repr(out)
    assert all(isinstance(x, (int, float, type(None))) and not isinstance(x, bool) for t in out for x in t)


def test_engine_builds_episode_records_verifiers_can_load(tmp_path: Path):
    """The engine's rows are Episode.to_record() of a scored trace: they load back as a verifiers
    WireEpisode, carry the token ids, usage, truncation and (effective train rows) the advantage."""
    from verifiers.v1.episode import WireEpisode

    from selfimprove.engines.rollout_rows import train_rows
    from selfimprove.rl.episodes import episode_rows, write_episodes
    from selfimprove.rl.tasksets import load_taskset, score_tasks, taskset_rows

    env = load_taskset("selfimprove_arith_v1", {"split": "eval"})
    rows = taskset_rows(env, 1) * 2
    texts = [f"<answer>{rows[0]['answer']}</answer>", "<answer>x</answer>"]
    scored = score_tasks(env, rows, texts)
    recs = [{"completion": [{"role": "assistant", "content": text}], "is_truncated": i == 1, "error": None,
             "sampling_args": {"temperature": 1.0, "max_tokens": 8}, "env_name": "arith",
             "_env_id": "selfimprove_arith_v1", "_ids": ([7, 8, 9], [1, 2, 3, 4][: 4 - i]),
             "_task": rows[0]["_task"], "_trace": score["trace"], "advantage": 1.0 - 2 * i, "_trained": i == 0}
            for i, (text, score) in enumerate(zip(texts, scored))]
    all_rows, effective = episode_rows(recs, "train", 2, 2, [bool(r["_trained"]) for r in recs])
    assert len(all_rows) == 2 and len(effective) == 1 and all_rows[0]["group"] == all_rows[1]["group"]
    ep = WireEpisode.model_validate(all_rows[1])
    assert ep.traces[0].is_truncated and ep.num_output_tokens == 3 and ep.traces[0].reward == 0.0
    assert ep.traces[0].branches[0].token_ids == [7, 8, 9, 1, 2, 3] and ep.run.work.step == 2
    assert effective[0]["traces"][0]["info"] == {"advantage": 1.0} and "advantage" not in all_rows[0]["traces"][0]["info"]
    read = [train_rows(record)[0] for record in all_rows]
    assert [(r["example_id"], r["reward"], r["completion"][0]["content"]) for r in read] \
        == [(rows[0]["example_id"], 1.0, texts[0]), (rows[0]["example_id"], 0.0, texts[1])]
    write_episodes(tmp_path / "step_2", "train", all_rows, effective)
    assert [len((tmp_path / "step_2/train" / d / "traces.jsonl").read_text().splitlines()) for d in ("all", "effective")] == [2, 1]


def test_engine_run_writes_all_and_effective_episode_files(tmp_path: Path):
    """A one-step v1 run of the real engine: rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl hold
    Episode records; train effective = the rollouts the update trained on, eval effective = the non-errored."""
    import json
    import subprocess
    import sys

    from verifiers.v1.episode import WireEpisode

    from selfimprove.phases.evals import read_sealed

    cfg = V1.fresh_config(model="selfimprove/tiny-arith", new_steps=1, batch_size=32, rollouts_per_example=8,
                           train_envs=[{"id": "selfimprove_arith_v1", "args": {"split": "train"}}],
                           eval_env_id="selfimprove_arith_v1", eval_env_args={"split": "eval"}, num_examples=8,
                           seq_len=256, train_max_tokens=24, eval_max_tokens=24, seed=1)
    toml = tmp_path / "rl.toml"
    V1.write_toml(toml, cfg)
    out = tmp_path / "arm" / "prime_out"
    proc = subprocess.run([sys.executable, "-m", "selfimprove.rl.cli", *V1.rl_command_args([toml], {}, out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    step = out / "rollouts" / "step_1"
    lines = {(k, s): [json.loads(x) for x in (step / k / s / "traces.jsonl").read_text().splitlines()]
             for k in ("train", "eval") for s in ("all", "effective")}
    assert len(lines["train", "all"]) == 32 and len(lines["eval", "all"]) == 8 == len(lines["eval", "effective"])
    for rec in lines["train", "all"] + lines["eval", "all"]:
        WireEpisode.model_validate(rec)
    trained = lines["train", "effective"]
    assert all(r["traces"][0]["info"]["advantage"] != 0.0 for r in trained)
    ids = {r["id"] for r in lines["train", "all"]}
    assert len(ids) == 32 and trained and all(r["id"] in ids for r in trained)  # a subset of all, same episode ids
    scores, dropped, _ = read_sealed(ArmDir(tmp_path, "arm", MAIN_LAYOUT).eval_file(1))
    assert len(scores) == 8 and dropped == 0
    # main's layout and timing: no weights/, the start-up broadcast of v0 and every step's, progress.pt; the
    # base eval is step 1 (v0) and the eval of step 2 fired right after batch 1 shipped, on v0 as well
    assert not (out / "weights").exists() and (out / "checkpoints/step_1/orchestrator/progress.pt").is_file()
    assert all((out / f"broadcasts/step_{n}/STABLE").is_file() for n in (0, 1))
    second = [json.loads(x) for x in (out / "rollouts/step_2/eval/all/traces.jsonl").read_text().splitlines()]
    assert {r["run"]["work"]["policy"]["start"] for r in second + lines["eval", "all"]} == {0}
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "eval/selfimprove_arith_v1/policy_version" in m] == [1, 2]


def test_engine_refuses_what_main_refuses(tmp_path: Path):
    """v1: the seed's --ckpt.resume-step gets main's "Extra inputs are not permitted"; a source whose agent is
    not pinned to plain chat in a subprocess (main would run verifiers' bash harness in a Prime VM) is refused."""
    import pytest

    from selfimprove.errors import ConfigError
    from selfimprove.rl.config import main_extras

    cfg = V1.fresh_config(**{k: v for k, v in ARM.items()})
    toml = tmp_path / "rl.toml"
    V1.write_toml(toml, cfg)
    argv = V1.rl_command_args([toml], {}, tmp_path / "arm" / "prime_out")
    with pytest.raises(ConfigError, match=r"'ckpt.resume_step' .*here it is resume.step \(Extra inputs are not permitted\)"):
        V1.parse_rl_argv([*argv, "--ckpt.resume-step", "2"])
    raw, _ = V1.parse_rl_argv([*argv, "--resume.dir", str(tmp_path / "iter_0/prime_out/checkpoints/step_2"),
                               "--orchestrator.ckpt.skip-progress"])
    assert main_extras(raw) == {"resume_dir": tmp_path / "iter_0/prime_out/checkpoints/step_2", "skip_progress": True}
    del raw["orchestrator"]["train"]["source"][0]["env"]["agent"]["harness"]
    with pytest.raises(ConfigError, match=r"train.source\]\] #1 .*harness.id = None.*Prime sandbox VM"):
        main_extras(raw)
