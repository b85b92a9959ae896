"""Environments nobody here wrote for the built-in student (issue 15): a text task
with an XMLParser and NO eval split, written below (verifiers then evaluates on
the first train rows), and the checks that make such a run honest: what is
evaluated is decontaminated, configs fit the student's context, text it cannot
encode is refused, and a run without reward signal is stopped and never
presented as a result."""

from __future__ import annotations

import json
import os
import random
import sys
import textwrap
from pathlib import Path

import pytest
import tomli_w

from selfimprove.errors import ConfigError
from selfimprove.phases.context import RunContext
from selfimprove.phases.status import run_status
from test_baseline import hub_env
from selfimprove.gates.dedup import check_eval_overlap, find_eval_overlap
from selfimprove.models import HubEnv
from selfimprove.phases.finalize import build_table
from selfimprove.phases.introspect import evaluated_rows_note
from selfimprove.phases.iteration_steps import eval_index
from selfimprove.phases.signal import NO_SIGNAL_VERDICT, learning_signal
from selfimprove.rundir import RunDir
from selfimprove.stack import toml_paths
from selfimprove.stack import verifiers_classic as vc
from selfimprove.stack.dialects import SEED
from selfimprove.student_limits import check_env_text, check_token_budget, model_context

from loop_helpers import FAKE

REPO = Path(__file__).resolve().parents[1]
ENV_ID = "si_outside_copy_env"
WORDS = ("amber birch cedar delta ember fjord grove harbor island juniper kettle lantern meadow nectar orchard "
         "pebble quartz river saddle thicket umber valley willow yarrow zephyr").split()


def train_question(i: int) -> str:
    """The i-th train question of the env below (its rows differ in every 8-word window)."""
    rng = random.Random(i)
    return "Copy these words in order: " + " ".join(rng.choice(WORDS) for _ in range(10))


TEXT_ENV_SOURCE = textwrap.dedent(
    f'''
    """A copy task: text answers, an XMLParser, no eval split."""
    import random

    import verifiers as vf
    from datasets import Dataset

    WORDS = {WORDS!r}


    def copied_exactly(completion, answer, parser, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0


    def load_environment(num_train: int = 30, **kwargs):
        parser = vf.XMLParser(["answer"], answer_field="answer")
        rows = []
        for i in range(num_train):
            rng = random.Random(i)
            words = " ".join(rng.choice(WORDS) for _ in range(10))
            rows.append({{"question": "Copy these words in order: " + words, "answer": words}})
        return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), system_prompt="Answer inside <answer></answer>.",
                                parser=parser, rubric=vf.Rubric(funcs=[copied_exactly], parser=parser), **kwargs)
    '''
)


def _hub(system_prompt: str, question: str = "Copy: abc", answer: str = "abc", env_id: str = "e") -> HubEnv:
    return HubEnv(env_id=env_id, module=env_id, source="local", env_class="SingleTurnEnv", parser_class="XMLParser",
                  rubric_class="Rubric", rubric_funcs=[], system_prompt=system_prompt, answer_format_instruction=None,
                  train_size=3, eval_size=None, train_samples=[{"question": question, "answer": answer}])


@pytest.fixture
def text_env(tmp_path, monkeypatch) -> str:
    """The copy env importable by the probe subprocesses (PYTHONPATH)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{ENV_ID}.py").write_text(TEXT_ENV_SOURCE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return ENV_ID


# ---------------------------------------------------------------- 1. decontamination without an eval split


def test_no_eval_split_gate_indexes_the_train_rows_that_are_evaluated(text_env, new_run):
    """With no eval split the gate indexes exactly the first N train rows (what verifiers evaluates):
    a generated row equal to an evaluated row fails it, one equal to a later train row passes."""
    run_dir = new_run("copy", "--hub-id", text_env, "--eval-examples", "5")
    rd = RunDir(run_dir)
    rd.write_hub_env(_hub("Answer inside <answer></answer>.", env_id=text_env))  # as introspect records it
    index = eval_index(RunContext.load(rd))  # loads the env in a fresh interpreter, hashes what it evaluates
    assert (index.source, index.n_questions) == ("train_fallback", 5)
    rows = [{"question": train_question(3)}, {"question": train_question(20)}]  # evaluated; not evaluated
    report = check_eval_overlap(rows, index)
    assert not report.passed
    assert find_eval_overlap(rows, index).rows == [0]  # the report itself names no row (issue 23.5)
    assert "train rows the engine evaluates (the env has no eval split)" in report.failures[0].message
    assert report.stats["indexed"].startswith("the 5 train rows")


def test_hub_env_says_which_rows_are_evaluated():
    assert evaluated_rows_note(12, 30, 200) == "eval split (12 rows)"
    assert evaluated_rows_note(None, 30, 5).startswith("the first 5 train rows: the env has no eval split")
    assert evaluated_rows_note(None, 3, 200).startswith("the first 3 train rows")


def test_env_args_change_after_bootstrap_only_before_baseline(new_run, cli, monkeypatch):
    """introspect --env-args replaces run.json env_args and introspects with them; refused once baseline started."""
    from selfimprove.phases import introspect as phase

    seen = []

    def fake_introspect_env(env_id, env_args, **kwargs):  # the env's real loading is tested in test_introspect
        seen.append(env_args)
        return {"module": env_id, "env_class": "SingleTurnEnv", "parser_class": "XMLParser", "rubric_class": "Rubric",
                "rubric_funcs": [], "system_prompt": None, "train_size": env_args.get("num_train"), "eval_size": None}

    monkeypatch.setattr(phase.vc, "is_importable", lambda env_id, python=None: True)
    monkeypatch.setattr(phase.vc, "introspect_env", fake_introspect_env)
    run_dir = new_run("copy", "--hub-id", ENV_ID)
    res = cli("introspect", "--run-dir", run_dir, "--env-args", '{"num_train": 12}', "--json")
    assert res.exit_code == 0, res.stderr
    assert seen == [{"num_train": 12}] and json.loads(res.stdout)["env_args"] == {"num_train": 12}
    assert RunDir(run_dir).read_run().env_args == {"num_train": 12}
    (run_dir / "iter_0").mkdir(exist_ok=True)
    (run_dir / "iter_0" / "canonical_rl.toml").write_text("")  # baseline has started
    res = cli("introspect", "--run-dir", run_dir, "--env-args", '{"num_train": 20}')
    assert res.exit_code == 2 and "fixed once baseline has started" in res.stderr
    assert RunDir(run_dir).read_run().env_args == {"num_train": 12} and len(seen) == 1


# ---------------------------------------------------------------- 2. configs that fit the student


def test_generated_canonical_config_is_capped_by_the_students_context():
    """canonical_from_hub_env: the built-in student's 256 positions cap seq_len and the completion budget."""
    context, source = model_context("selfimprove/tiny-arith")
    assert context == 256 and source.endswith("max_position_embeddings")
    small = SEED.canonical_from_hub_env("x", {}, "selfimprove/tiny-arith", context=context)
    assert small["seq_len"] == 256
    assert small["orchestrator"]["train"]["sampling"]["max_completion_tokens"] == 128
    big = SEED.canonical_from_hub_env("x", {}, "Qwen/Qwen3-0.6B", context=model_context("Qwen/Qwen3-0.6B")[0])
    assert big["seq_len"] == 2048  # a hub model not on disk: context unknown, the seed's values stay


def test_over_long_canonical_config_fails_baseline_in_one_line_naming_the_key(new_run, cli, tmp_path):
    """A canonical config asking 2048 positions of a 256-position student: exit 1, one line, nothing launched."""
    canonical = toml_paths.read_toml(REPO / "configs/selfimprove-arith/rl.toml")
    canonical["seq_len"] = 2048
    path = tmp_path / "rl.toml"
    path.write_text(tomli_w.dumps(canonical))
    run_dir = new_run("selfimprove-arith", "--config", str(path))
    hub_env(run_dir)  # introspect's output: baseline needs it first (exit 5 otherwise)
    res = cli("baseline", "--run-dir", run_dir)
    assert res.exit_code == 1
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "seq_len = 2048" in errors[0] and "256 positions" in errors[0]
    assert not (run_dir / "iter_0" / "prime_out").exists()


def test_train_budget_that_leaves_no_room_for_the_prompt_names_its_key():
    config = {"seq_len": 256, "orchestrator": {"train": {"sampling": {"max_completion_tokens": 256}}}}
    with pytest.raises(ConfigError, match=r"orchestrator\.train\.sampling\.max_completion_tokens = 256"):
        check_token_budget(config, "selfimprove/tiny-arith", "rl.toml")


def test_engine_caps_completions_by_the_models_context_not_seq_len_only():
    """seq_len 2048 on a 256-position model: the budget is what the prompt leaves of 256."""
    from selfimprove.rl.rollouts import EnvSpec
    from selfimprove.rl.student import build_tokenizer, render_prompt
    from selfimprove.rl.train import _max_tokens

    tok = build_tokenizer()
    prompt = [{"role": "user", "content": "x" * 40}]
    spec = EnvSpec(id="e", name="e", args={}, ratio=None, env=None, rows=[{"prompt": prompt}])
    room = 256 - len(render_prompt(tok, prompt))
    assert _max_tokens(1024, 2048, 256, tok, [spec], "k")[0] == room
    assert _max_tokens(None, None, 256, tok, [spec], "k")[0] == room
    spec.rows = [{"prompt": [{"role": "user", "content": "x" * 300}]}]
    with pytest.raises(ConfigError, match="no room for k"):
        _max_tokens(24, 2048, 256, tok, [spec], "k")


def test_engine_budget_covers_a_long_prompt_beyond_the_first_200_rows():
    """Issue 24: the cap came from the first 200 rows, so prompts of row 201+ overran the context.
    Every row counts now, and an answer longer than the budget is counted."""
    from selfimprove.rl.rollouts import EnvSpec
    from selfimprove.rl.student import build_tokenizer, render_prompt
    from selfimprove.rl.train import _max_tokens, answers_over

    tok = build_tokenizer()
    short, long = [{"role": "user", "content": "x" * 20}], [{"role": "user", "content": "y" * 170}]
    rows = [{"prompt": short, "answer": "1"} for _ in range(300)] + [{"prompt": long, "answer": "z" * 95}]
    spec = EnvSpec(id="e", name="e", args={}, ratio=None, env=None, rows=rows)
    budget, longest = _max_tokens(1024, 256, 256, tok, [spec], "k")
    assert longest == len(render_prompt(tok, long))
    assert budget == 256 - longest and budget + longest <= 256
    assert answers_over(tok, [spec], budget) == (1, 301)


# ---------------------------------------------------------------- 3. text the student cannot encode


def test_builtin_student_refuses_text_it_cannot_encode_before_launch():
    with pytest.raises(ConfigError, match=r"system prompt has characters selfimprove/tiny-arith cannot encode \('é'\)"):
        check_env_text(_hub("Réponds entre <answer></answer>."), "selfimprove/tiny-arith", 256, "hub_env.json")
    with pytest.raises(ConfigError, match="seq_len: a train prompt"):
        check_env_text(_hub("S" * 300), "selfimprove/tiny-arith", 256, "hub_env.json")
    check_env_text(_hub("Answer inside <answer></answer>."), "selfimprove/tiny-arith", 256, "hub_env.json")


def test_engine_refuses_rows_its_tokenizer_maps_to_unk():
    """Instead of decoding <unk> away (dropping the characters), the engine stops at load time."""
    from selfimprove.rl.rollouts import EnvSpec, check_encodable
    from selfimprove.rl.student import build_tokenizer

    tok = build_tokenizer()
    ok = EnvSpec(id="e", name="e", args={}, ratio=None, env=None,
                 rows=[{"prompt": [{"role": "user", "content": "2+2?"}], "answer": "4"}])
    check_encodable(tok, ok, "train")
    bad = EnvSpec(id="e", name="e", args={}, ratio=None, env=None,
                  rows=[{"prompt": [{"role": "user", "content": "Übersetze"}], "answer": "naïve"}])
    with pytest.raises(ConfigError, match=r"cannot encode 'Ü'"):
        check_encodable(tok, bad, "train")


# ---------------------------------------------------------------- 4. no reward signal


def test_zero_signal_env_ends_in_the_verdict_not_a_table(new_run, cli, monkeypatch):
    """All rewards 0: baseline exits 4 with the verdict and iterate refuses; --allow-no-signal goes on,
    and the summary leads with NOT A RESULT and recommends nothing."""
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.001")
    monkeypatch.setenv("FAKE_RL_NO_SIGNAL", "1")
    monkeypatch.setenv("FAKE_RL_ACC", "0")
    run_dir = new_run("selfimprove-arith", "--steps-per-run", "4", "--batch-size", "32", "--rollouts-per-example",
                      "4", "--allow-small-batch", "--eval-examples", "20")
    hub_env(run_dir)
    res = cli("baseline", "--run-dir", run_dir)
    assert res.exit_code == 4, res.stderr
    assert NO_SIGNAL_VERDICT in res.stderr and "--allow-no-signal" in res.stderr
    rd = RunDir(run_dir)
    signal = rd.read_run().learning_signal
    assert signal["has_signal"] is False and signal["train_groups_with_spread"] == 0 and signal["train_groups"] > 0
    res = cli("iterate", "--run-dir", run_dir)
    assert res.exit_code == 4 and NO_SIGNAL_VERDICT in res.stderr
    status = run_status(rd)  # the user's choice next, not iterate
    assert status["learning_signal"] == "none" and "--allow-no-signal" in status["next"]
    assert not status["next"].startswith("selfimprove iterate")
    assert rd.scratchpad.read_text().count("## Stopped after iter_0: no learning signal") == 1  # issue 36
    res = cli("compare", "--run-dir", run_dir)  # no loop back to iterate (which refuses with exit 4)
    assert res.exit_code == 5 and "--allow-no-signal" in res.stderr and "selfimprove iterate" not in res.stderr

    res = cli("baseline", "--run-dir", run_dir, "--allow-no-signal")
    assert res.exit_code == 0, res.stderr
    assert rd.read_run().learning_signal["allowed"] is True
    assert "NOT A RESULT" in res.stdout and "**NOT A RESULT" in rd.scratchpad.read_text()  # the iter_0 entry
    assert run_status(rd)["not_a_result"].startswith("NOT A RESULT")
    table = build_table(RunContext.load(rd))
    assert table["no_signal"].startswith(NO_SIGNAL_VERDICT)
    assert table["recommendation"]["arm"] is None and "no model recommended" in table["recommendation"]["text"]


def test_learning_signal_sees_spread_within_groups(baseline_run):
    """The fake engine's usual run (random rewards per rollout) has signal."""
    sig = learning_signal(RunDir(baseline_run).iter(0))
    assert sig["has_signal"] and sig["train_groups_with_spread"] > 0


# ---------------------------------------------------------------- 6. small ones


def test_failures_completion_tokens_come_from_output_tokens():
    from selfimprove.phases.analyze import completion_tokens

    assert completion_tokens({"input_tokens": 30.0, "output_tokens": 12.0}) == 12
    assert completion_tokens({"completion_tokens": 7}) == 7
    assert completion_tokens(None) is None


def test_run_without_teacher_on_another_env_names_the_teachers(cli, runs_dir):
    res = cli("run", "copy", "--runs-dir", runs_dir, "--model", "selfimprove/tiny-arith", "--hub-id", ENV_ID)
    assert res.exit_code == 2
    assert "no teacher for 'si_outside_copy_env'" in res.stderr and "write(ctx)" in res.stderr
    assert not any(runs_dir.iterdir())  # nothing bootstrapped


def test_summary_names_the_split_and_the_accuracy_rule_it_used(run):
    """No eval split: the table's split says so. No is_correct metric: it says eval_acc is reward >= 0.5."""
    table = build_table(RunContext.load(run))
    assert table["rows"][0]["eval_split"] == "eval" and table["accuracy_rule"] is None
    hub = run.read_hub_env()
    hub.eval_size = None
    run.write_hub_env(hub)
    summary = json.loads(run.iter(0).eval_summary.read_text())
    summary["correct_rule"] = "reward >= 0.5"
    for e in summary["per_example"]:  # a 0/1 reward: the threshold is exact correctness, no note (issue 43)
        e["reward"] = e["correct"] = float(e["correct"] >= 0.5)
    run.iter(0).eval_summary.write_text(json.dumps(summary))
    table = build_table(RunContext.load(run))
    assert {r["eval_split"] for r in table["rows"]} == {"train (no eval split)"}
    assert table["accuracy_rule"] is None
    summary["per_example"][0]["reward"] = 0.7  # a continuous reward: the note says what eval_acc means
    summary["per_example"][0]["correct"] = 1.0
    run.iter(0).eval_summary.write_text(json.dumps(summary))
    table = build_table(RunContext.load(run))
    assert table["accuracy_rule"].startswith("eval_acc = share of eval examples with reward >= 0.5")


def _train_rollouts(arm_dir: Path, groups_per_step: list[list[list[float]]]) -> None:
    """Seed-layout train rollouts: one list of groups (rewards of one prompt's rollouts) per step 1, 2, ..."""
    for step, groups in enumerate(groups_per_step, 1):
        d = arm_dir / "prime_out" / "run_default" / "rollouts" / f"step_{step}"
        d.mkdir(parents=True)
        lines = [json.dumps({"env_name": "e", "example_id": step * 100 + i, "reward": r})
                 for i, g in enumerate(groups) for r in g]
        (d / "train_rollouts.jsonl").write_text("\n".join(lines) + "\n")


def test_a_format_floor_in_a_few_groups_is_near_zero_signal(tmp_path):
    """Measured on reasoning-gym with the arithmetic student: 2 of 32 groups spread by a 0.05 format
    floor. Some spread, nothing to learn: NO SIGNAL. A student solving one prompt in ~40 has signal."""
    from selfimprove.phases.signal import NEAR_ZERO_GROUP_SD

    rd = RunDir(tmp_path / "floor")
    floor = [[[0.0] * 4] * 8] * 4
    floor[0] = [[0.0, 0.0, 0.0, 0.05]] + [[0.0] * 4] * 7
    floor[2] = [[0.05, 0.0, 0.0, 0.0]] + [[0.0] * 4] * 7
    _train_rollouts(rd.iter(0).dir, floor)
    sig = learning_signal(rd.iter(0))
    assert sig["train_groups_with_spread"] == 2 and sig["train_groups"] == 32
    assert sig["train_mean_group_reward_sd"] < NEAR_ZERO_GROUP_SD and sig["has_signal"] is False

    rd = RunDir(tmp_path / "weak")
    weak = [[[0.0] * 4] * 8] * 5
    weak[1] = [[1.0, 0.0, 0.0, 0.0]] + [[0.0] * 4] * 7  # 1 correct rollout in 160
    _train_rollouts(rd.iter(0).dir, weak)
    sig = learning_signal(rd.iter(0))
    assert sig["train_mean_group_reward_sd"] >= NEAR_ZERO_GROUP_SD and sig["has_signal"] is True
