"""The completion budget (issue 43 item 2): a config generated for a new env follows its reference answers'
lengths and says so in a comment; `--max-completion-tokens` caps every arm's train and eval budget."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from selfimprove.models import HubEnv
from selfimprove.phases.arms import resumed_arm_config
from selfimprove.phases.completion_budget import eval_completion_tokens, generated_budget, thinks_before_answering
from selfimprove.phases.context import RunContext
from selfimprove.rundir import RunDir
from selfimprove.stack import toml_paths
from selfimprove.stack import verifiers_classic as vc
from selfimprove.stack.prime_rl import EVAL_MAX_TOKENS

from loop_helpers import FAKE
from test_baseline import SMALL, fake_engine, hub_env  # noqa: F401  (fake_engine: fixture)
from test_outside_envs import text_env  # noqa: F401  (fixture)

TRAIN_KEY = "orchestrator.train.sampling.max_completion_tokens"
EVAL_KEY = "orchestrator.eval.sampling.max_completion_tokens"


def _hub(longest: int | None) -> HubEnv:
    return HubEnv(env_id="e", module="e", source="local", env_class="SingleTurnEnv", parser_class="XMLParser",
                  rubric_class="Rubric", rubric_funcs=[], system_prompt=None, answer_format_instruction=None,
                  train_size=100, eval_size=None,
                  train_answer_chars=None if longest is None else {"rows": 100, "longest": longest, "median": 2})


def test_budget_follows_the_longest_answer_and_states_its_rule():
    b = generated_budget(_hub(3), "build:my-env", context=256, cap=None)
    assert (b["train"], b["eval"]) == (48, 96)  # 2 x 3 + 32 = 38 -> 48; eval twice that
    assert b["rule"].startswith("train 48 / eval 96 tokens: train = 2 x 3 (the longest of 100 TRAIN reference answers")
    assert b["rule"].endswith("; eval = 2 x train")
    long = generated_budget(_hub(400), "build:my-env", context=256, cap=None)
    assert long["train"] == 128 and "= 832, capped at half of the student's 256 positions" in long["rule"]
    big = generated_budget(_hub(700), "HuggingFaceTB/SmolLM2-135M-Instruct", context=None, cap=None)
    assert (big["train"], big["eval"]) == (1024, EVAL_MAX_TOKENS) and "the procedure's 1024" in big["rule"]


def test_a_model_that_reasons_or_unmeasured_answers_get_the_ceiling():
    assert thinks_before_answering("Qwen/Qwen3-0.6B") and thinks_before_answering("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B")
    assert not thinks_before_answering("HuggingFaceTB/SmolLM2-135M-Instruct") and not thinks_before_answering("build:arith")
    assert not thinks_before_answering("build:si_reasoning_gym") and thinks_before_answering("Qwen/QwQ-32B")
    qwen = generated_budget(_hub(3), "Qwen/Qwen3-0.6B", context=None, cap=None)
    assert (qwen["train"], qwen["eval"]) == (1024, 2048) and "reasons before it answers" in qwen["rule"]
    unmeasured = generated_budget(_hub(None), "build:arith", context=256, cap=None)
    assert unmeasured["train"] == 128 and "were not measured" in unmeasured["rule"]


def test_cap_lowers_both_budgets_and_says_so():
    b = generated_budget(_hub(3), "Qwen/Qwen3-0.6B", context=None, cap=300)
    assert (b["train"], b["eval"]) == (300, 300) and b["rule"].endswith("(1024 / 2048); --max-completion-tokens 300 caps both")
    assert "caps both" not in generated_budget(_hub(3), "build:x", context=256, cap=500)["rule"]  # nothing to cap


def test_probe_measures_the_train_answers_only(text_env):
    """The classic probe measures the TRAIN reference answers (never the sealed evaluated rows)."""
    info = vc.introspect_env(text_env, {"num_train": 40}, evaluated_examples=10)
    lengths = info["train_answer_chars"]
    assert lengths["rows"] == 30  # 40 train rows, the first 10 are what verifiers evaluates (sealed)
    assert 40 <= lengths["median"] <= lengths["longest"] <= 90  # ten words of 4-7 letters and their spaces


def test_generated_config_states_its_budget_and_the_cap_reaches_every_arm(text_env, new_run, cli, monkeypatch):
    """bootstrap --max-completion-tokens 40 on an env with no canonical config: iter_0's generated config states
    the rule in its comment, run.json records it, and iter_0's eval overlay and a later arm's config ask <= 40."""
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.001")
    run_dir = new_run("copy", "--hub-id", text_env, "--env-args", '{"num_train": 40}', "--eval-examples", "5",
                      "--steps-per-run", "4", "--batch-size", "32", "--rollouts-per-example", "4",
                      "--allow-small-batch", "--max-completion-tokens", "40")
    assert cli("introspect", "--run-dir", run_dir).exit_code == 0
    res = cli("baseline", "--run-dir", run_dir, "--allow-no-signal")
    assert res.exit_code == 0, res.stderr
    rd = RunDir(run_dir)
    cfg = rd.read_run()
    assert cfg.max_completion_tokens == 40 and cfg.generated_budget["train"] == 40
    assert "--max-completion-tokens 40 caps both" in cfg.generated_budget["rule"]
    assert "iter_0: completion budget train 40 / eval 40 tokens: train = 2 x " in res.output
    canonical = rd.iter(0).dir / "canonical_rl.toml"
    assert f"# Completion budget: {cfg.generated_budget['rule']}." in canonical.read_text()
    assert toml_paths.get_path(toml_paths.read_toml(canonical), TRAIN_KEY) == 40
    assert toml_paths.get_path(toml_paths.read_toml(rd.iter(0).eval_overlay), EVAL_KEY) == 40
    ctx = RunContext.load(rd)
    arm = resumed_arm_config(ctx, train_envs=[{"id": "x"}], resume_step=4, num_examples=5, wandb_name="iter_1")
    assert toml_paths.get_path(arm, TRAIN_KEY) == 40 and toml_paths.get_path(arm, EVAL_KEY) == 40


def test_a_found_canonical_config_keeps_its_budget_unless_capped(new_run, cli, fake_engine: Path):
    """The embedded config (train 24 tokens) and the procedure's eval 2048: unchanged without the flag."""
    run = new_run("selfimprove-arith", *SMALL)
    hub_env(run)
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    rd = RunDir(run)
    assert rd.read_run().generated_budget is None and eval_completion_tokens(rd.read_run()) == EVAL_MAX_TOKENS
    assert toml_paths.get_path(toml_paths.read_toml(rd.iter(0).eval_overlay), EVAL_KEY) == EVAL_MAX_TOKENS
    assert toml_paths.get_path(toml_paths.read_toml(rd.iter(0).eval_overlay), TRAIN_KEY) is None


def test_cap_on_a_found_canonical_config_lands_in_iter0_overlay(new_run, cli, fake_engine: Path):
    run = new_run("selfimprove-arith", *SMALL, "--max-completion-tokens", "16")
    hub_env(run)
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    overlay = toml_paths.read_toml(RunDir(run).iter(0).eval_overlay)
    assert toml_paths.get_path(overlay, TRAIN_KEY) == 16 and toml_paths.get_path(overlay, EVAL_KEY) == 16


@pytest.mark.parametrize("value", ["0", "-3"])
def test_bootstrap_refuses_a_cap_below_one(cli, runs_dir, value):
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", runs_dir, "--model", "selfimprove/tiny-arith",
              "--max-completion-tokens", value)
    assert res.exit_code == 2 and f"--max-completion-tokens {value}: must be >= 1" in res.stderr
    assert not any(runs_dir.iterdir())


def test_baseline_notes_print_toml_table_names_verbatim():
    """A note naming `[inference]` (the refit of the shipped config for another model) lost the table name
    to rich markup: it printed ";  added (prime-rl starts ...". Notes print with markup off."""
    from selfimprove.phases.baseline import _note
    from selfimprove.ui import console

    with console.capture() as captured:
        _note(False, "iter_0: canonical config X: [inference] added (prime-rl starts its inference server only with it)")
    assert "[inference] added" in captured.get()
