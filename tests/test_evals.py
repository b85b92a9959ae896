"""Sealed eval aggregation (phases.evals) and the canary test: eval row content reaches no file but the engine's own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from selfimprove.errors import EvalAggregationError
from selfimprove.models import HubEnv, Metrics, RewardFunc
from selfimprove.rundir import MAIN_LAYOUT, ArmDir, RunDir, write_model
from selfimprove.stats import wilson_interval
from selfimprove.phases.evals import aggregate_eval, summarize, train_reward_mean, train_trajectory

FAKE = Path(__file__).parent / "fakes" / "fake_rl.py"
SECRET = "prompt text that must stay sealed"


def eval_row(ex: int, reward: float | None, is_correct: float | None = None) -> dict:
    r: dict = {"example_id": ex, "prompt": [{"role": "user", "content": SECRET}], "completion": SECRET,
               "answer": SECRET, "info": {"s": SECRET}}
    if reward is not None:
        r["reward"] = reward
    if is_correct is not None:
        r["metrics"] = {"is_correct": is_correct}
    return r


def write_lines(path: Path, rows: list, tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join((json.dumps(r) if not isinstance(r, str) else r) + "\n" for r in rows)
    path.write_text(body + tail)
    return path


@pytest.fixture
def rd(tmp_path: Path) -> RunDir:
    rd = RunDir(tmp_path / "run")
    rd.root.mkdir()
    write_model(rd.metrics_json, Metrics())
    return rd


def efile(arm: ArmDir, step: int = 4) -> Path:
    return arm.rollout_step(step) / "eval_rollouts.jsonl"


def test_accuracy_reward_and_wilson(rd: RunDir) -> None:
    """eval_acc, eval_reward_mean and the Wilson 95% interval over the examples."""
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(i, 1.0 if i < 7 else 0.2, 1 if i < 7 else 0) for i in range(20)])
    s = summarize(arm, step=4, expected_examples=20)
    assert s.eval_acc == pytest.approx(7 / 20)
    assert s.eval_reward_mean == pytest.approx((7 * 1.0 + 13 * 0.2) / 20)
    assert s.acc_ci95 == pytest.approx(wilson_interval(7, 20))
    assert (s.n_eval, s.n_examples, s.dropped_lines, s.correct_rule) == (20, 20, 0, "metrics.is_correct")


def test_is_correct_wins_over_reward_threshold(rd: RunDir) -> None:
    """metrics.is_correct decides when present; reward >= 0.5 only for rows without it."""
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(0, 0.9, 0), eval_row(1, 0.1, 1), eval_row(2, 0.5), eval_row(3, 0.49)])
    s = summarize(arm, step=4, expected_examples=4)
    assert [e.correct for e in s.per_example] == [0.0, 1.0, 1.0, 0.0]
    assert "where present" in s.correct_rule
    write_lines(efile(arm), [eval_row(0, 0.5), eval_row(1, 0.4)])
    assert summarize(arm, step=4, expected_examples=2).correct_rule == "reward >= 0.5"


def test_per_example_means_over_rollouts(rd: RunDir) -> None:
    """Several rollouts of one example are averaged into one ExampleScore, in first-seen order."""
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(5, 1.0, 1), eval_row(5, 0.0, 0), eval_row(9, 1.0, 1), eval_row(5, 1.0, 1)])
    s = summarize(arm, step=4, expected_examples=4)
    assert [(e.example_id, round(e.reward, 4), round(e.correct, 4)) for e in s.per_example] == [(5, 0.6667, 0.6667), (9, 1.0, 1.0)]
    assert s.n_eval == 4 and s.n_examples == 2 and s.eval_acc == pytest.approx(0.75)


@pytest.mark.parametrize("tail", ['{"example_id": 3, "rew', '{"example_id": 3, "rew\n'])
def test_torn_last_line_dropped(rd: RunDir, tail: str) -> None:
    """A half-written last line (with or without newline) is dropped and counted, not fatal."""
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(i, 1.0, 1) for i in range(3)], tail=tail)
    s = summarize(arm, step=4, expected_examples=3)
    assert s.n_eval == 3 and s.dropped_lines == 1


def test_non_json_middle_line_is_an_error_without_content(rd: RunDir) -> None:
    """A corrupt line before the last is fatal; the message names the line, never its content."""
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(0, 1.0, 1), f"{{garbage {SECRET}", eval_row(2, 1.0, 1)])
    with pytest.raises(EvalAggregationError, match=r"line 2: not JSON") as e:
        summarize(arm, step=4, expected_examples=3)
    assert SECRET not in str(e.value)


def test_row_without_reward_names_the_line(rd: RunDir) -> None:
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(0, 1.0, 1), eval_row(1, None, 1)])
    with pytest.raises(EvalAggregationError, match=r"line 2: no numeric 'reward'") as e:
        summarize(arm, step=4, expected_examples=2)
    assert SECRET not in str(e.value)


def test_fewer_rows_than_expected(rd: RunDir) -> None:
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(i, 1.0, 1) for i in range(5)])
    with pytest.raises(EvalAggregationError, match="5 complete eval rows.*expected at least 200"):
        summarize(arm, step=4, expected_examples=200)


@pytest.mark.parametrize("empty", [False, True])
def test_missing_or_empty_eval_file_aborts(rd: RunDir, empty: bool) -> None:
    """The seed's 'Missing/empty eval_rollouts.jsonl -> abort'."""
    arm = rd.iter(0)
    if empty:
        write_lines(efile(arm), [])
    with pytest.raises(EvalAggregationError, match="Missing/empty eval_rollouts.jsonl -> abort"):
        summarize(arm, step=4, expected_examples=1)


def test_aggregate_writes_summary_and_records_once(rd: RunDir) -> None:
    """eval_summary.json is written and metrics.json holds one record per arm however often it runs."""
    arm = rd.iter(0)
    write_lines(efile(arm), [eval_row(i, 1.0, i % 2) for i in range(10)])
    aggregate_eval(arm, step=4, expected_examples=10)
    aggregate_eval(arm, step=4, expected_examples=10)
    assert [r.arm for r in rd.read_metrics().iters] == ["iter_0"]
    assert rd.read_eval_summary(arm).eval_acc == pytest.approx(0.5)
    ctrl = rd.control("run_a")
    write_lines(efile(ctrl, 8), [eval_row(i, 1.0, 1) for i in range(10)])
    aggregate_eval(ctrl, step=8, expected_examples=10, rows=700)
    rec = rd.read_metrics().get("run_a")
    assert rec is not None and rec.rows == 700 and rec.iter is None


def test_train_mean_and_trajectory(rd: RunDir) -> None:
    """Train rewards (fair game): mean over the last 10 steps, and 20-step buckets."""
    arm = rd.iter(0)
    for s in range(1, 46):
        write_lines(arm.rollout_step(s) / "train_rollouts.jsonl", [{"reward": s / 100}, {"reward": s / 100}])
    mean, steps = train_reward_mean(arm, 45)
    assert steps == list(range(36, 46)) and mean == pytest.approx(sum(range(36, 46)) / 1000)
    traj = train_trajectory(arm)
    assert [(b["steps"], b["n_steps"]) for b in traj] == [("1-20", 20), ("21-40", 20), ("41-60", 5)]
    assert traj[0]["reward_mean"] == pytest.approx(sum(range(1, 21)) / 2000)


# ---------------------------------------------------------------- the canary test


def test_canary_never_leaves_the_engines_eval_file(new_run, cli, capfd, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a full baseline whose eval rows carry a unique string in prompt/completion/answer/info, the
    string is in no file of the run dir except the engine's eval_rollouts.jsonl, and in no output."""
    canary = "CANARY-7f3a9c1e-sealed"
    run = new_run("selfimprove-arith", "--steps-per-run", "4", "--batch-size", "32", "--rollouts-per-example", "4",
                  "--allow-small-batch", "--eval-examples", "30")
    RunDir(run).write_hub_env(HubEnv(
        env_id="selfimprove-arith", module="selfimprove_arith", source="local", env_class="SingleTurnEnv",
        parser_class="XMLParser", rubric_class="Rubric", rubric_funcs=[RewardFunc(name="correct_answer", weight=1.0)],
        system_prompt="Answer in <answer> tags.", answer_format_instruction=None, train_size=1000, eval_size=200,
    ))
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_CANARY", canary)
    monkeypatch.setenv("FAKE_RL_TORN", "1")  # the torn line path must not leak either
    outputs = []
    for args in (("baseline", "--run-dir", run), ("baseline", "--run-dir", run, "--json"), ("status", "--run-dir", run)):
        res = cli(*args)
        assert res.exit_code == 0, res.stderr
        outputs += [res.stdout, res.stderr]
    captured = capfd.readouterr()
    outputs += [captured.out, captured.err]
    assert not any(canary in o for o in outputs)

    seen_in_engine_eval = 0
    for path in run.rglob("*"):
        if path.is_dir():
            continue
        data = path.read_bytes()
        if path.name == "eval_rollouts.jsonl" and "prime_out" in path.parts:
            seen_in_engine_eval += canary.encode() in data
            continue
        assert canary.encode() not in data, f"canary leaked into {path.relative_to(run)}"
    assert seen_in_engine_eval >= 1  # the fake really did put it into the eval rows
    summary = json.loads((run / "iter_0" / "eval_summary.json").read_text())
    assert summary["dropped_lines"] == 1 and summary["n_eval"] == 30


# ---------------------------------------------------------------- v1 layout: Episode records


def fake_episode(ex: int, reward: float, kind: str = "eval", step: int = 4) -> dict:
    """verifiers v1 Episode.to_record() of a row whose text fields all hold SECRET (the fake engine's builder)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_rl", FAKE)
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    row = {"example_id": ex, "prompt": [{"role": "user", "content": SECRET}],
           "completion": [{"role": "assistant", "content": SECRET}], "answer": SECRET, "info": {"s": SECRET},
           "reward": reward, "metrics": {"is_correct": reward}}
    return fake.as_episode(row, kind, step)


def test_v1_episode_rows_are_aggregated_sealed(rd: RunDir) -> None:
    """A v1 arm's eval/all/traces.jsonl of Episode records: ids from task.data.idx, reward from the trace's
    rewards, is_correct from its metrics; the summary holds none of the rows' text."""
    arm = ArmDir(rd.root, "iter_0", MAIN_LAYOUT)
    path = write_lines(arm.eval_file(4), [fake_episode(i, 1.0 if i < 3 else 0.0) for i in range(10)],
                       tail=json.dumps(fake_episode(10, 1.0))[:40])
    assert SECRET in path.read_text()
    s = summarize(arm, step=4, expected_examples=10)
    assert (s.eval_acc, s.n_eval, s.dropped_lines, s.correct_rule) == (0.3, 10, 1, "metrics.is_correct")
    assert SECRET not in s.model_dump_json()


def test_v1_train_rows_feed_the_reward_mean_and_the_teachers_failures(rd: RunDir, tmp_path: Path) -> None:
    """Train Episode records give the same train-reward mean and failures.jsonl fields as seed records."""
    from selfimprove.phases.analyze import analyze_failures

    arm = ArmDir(rd.root, "iter_0", MAIN_LAYOUT)
    write_lines(arm.train_file(1), [fake_episode(i, float(i % 2), "train", 1) for i in range(4)])
    assert train_reward_mean(arm, 1) == (0.5, [1])
    analyze_failures(arm, tmp_path, prev_eval_acc=0.3, prev_final_step=1)
    failures = [json.loads(x) for x in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert [(f["rank"], f["step"], f["idx"], f["example_id"], f["reward"]) for f in failures] == [(0, 1, 0, 0, 0.0), (1, 1, 2, 2, 0.0)]
    assert set(failures[0]) == {"rank", "step", "idx", "example_id", "reward", "question", "completion", "answer",
                                "is_truncated", "completion_chars", "completion_tokens", "metrics"}
    assert (failures[0]["question"], failures[0]["completion"], failures[0]["answer"]) == (SECRET, SECRET, SECRET)
    assert (failures[0]["completion_tokens"], failures[0]["is_truncated"], failures[0]["metrics"]["is_correct"]) == (5, False, 0.0)


def test_canary_sealed_in_the_v1_layout(new_run, cli, capfd, monkeypatch: pytest.MonkeyPatch) -> None:
    """--stack v1: the canary in the Episode records' prompt/completion/answer/info reaches no file but the
    engine's own traces.jsonl, and no output."""
    from test_baseline import SMALL, hub_env

    canary = "CANARY-5b1e-sealed-v1"
    run = new_run("selfimprove-arith", *SMALL, "--stack", "v1")
    hub_env(run, v1=True)
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_CANARY", canary)
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    captured = capfd.readouterr()
    assert canary not in res.stdout + res.stderr + captured.out + captured.err
    seen = 0
    for path in run.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "traces.jsonl" and "eval" in path.parts and "prime_out" in path.parts:
                seen += canary.encode() in data
                continue
            assert canary.encode() not in data, f"canary leaked into {path.relative_to(run)}"
    assert seen >= 1


def test_v1_learning_signal_groups_episodes_by_their_group(rd: RunDir) -> None:
    """The baseline's signal check reads v1 train Episode records, grouped by the episode's group id."""
    from selfimprove.phases.signal import learning_signal

    arm = ArmDir(rd.root, "iter_0", MAIN_LAYOUT)
    # two prompts x 2 rollouts: prompt 0 disagrees (1.0, 0.0), prompt 1 does not (0.0, 0.0)
    write_lines(arm.train_file(1), [fake_episode(ex, r, "train", 1) for ex, r in ((0, 1.0), (0, 0.0), (1, 0.0), (1, 0.0))])
    # main's steps are 1-indexed: its base-model eval is rollouts/step_1/eval (a step_0 one is not main's)
    write_lines(arm.eval_file(0), [fake_episode(i, 1.0, "eval", 0) for i in range(4)])
    write_lines(arm.eval_file(1), [fake_episode(i, float(i % 2), "eval", 1) for i in range(4)])
    sig = learning_signal(arm)
    assert (sig["train_steps"], sig["train_groups"], sig["train_groups_with_spread"]) == ([1], 2, 1)
    assert sig["has_signal"] and (sig["eval_step0_examples"], sig["eval_step0_reward_mean"]) == (4, 0.5)
