"""The dataset gate's row_fits_student rule (issue 36): a row whose prompt, counted with the engine's
tokenizer, chat template and the env's system prompt, leaves no room for the completion budget in the
student's positions fails the gate (exit 4) instead of being packaged and refused at launch."""

from __future__ import annotations

import json

import pytest

from selfimprove.errors import GateFailed
from selfimprove.gates.dataset import check_rows_fit_student
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir
from selfimprove.student_limits import chat_prompt_lengths, engine_tokenizer, prompt_token_counts

from loop_helpers import write_teacher_files


def test_rule_names_the_rows_the_longest_prompt_and_the_bound():
    rows = [{"question": "q"}] * 4
    gate = check_rows_fit_student(rows, [100, 240, None, 233], counted="x", positions=256, room=24,
                                  model="m", room_from="the train budget the config asks")
    assert not gate.passed and gate.failures[0].rows == [1, 3]
    msg = gate.failures[0].message
    assert "2 row(s)" in msg and "240 tokens" in msg and "256 positions" in msg and "at most 232" in msg
    assert check_rows_fit_student(rows, [232, 1, None, 0], counted="x", positions=256, room=24, model="m",
                                  room_from="").passed


def test_counts_are_the_engines():
    """The gate counts with the tokenizer the CPU engine loads and the same rendering (system prompt included)."""
    tok = engine_tokenizer("selfimprove/tiny-arith")
    assert tok is not None
    counts, how = prompt_token_counts("selfimprove/tiny-arith", "Be brief.", ["1+1?", "12*3?"])
    engine = chat_prompt_lengths(tok, [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": q}]
                                       for q in ("1+1?", "12*3?")])
    assert counts == engine and counts[1] == counts[0] + 1 and "system prompt" in how


@pytest.mark.slow
def test_too_long_rows_fail_the_gate_and_shorter_ones_pass(run: RunDir) -> None:
    """gen_dataset.py writes two questions that leave fewer than the 24 completion tokens the arith config asks
    in tiny-arith's 256 positions: GateFailed (exit 4) naming the rule and the bound; nothing is packaged.
    The fixed generator passes on the next iterate."""
    with pytest.raises(Exception):
        iterate(run, quiet=True)  # the teacher stop
    it = run.iter(1)
    write_teacher_files(it.dir, break_rules=("too_long",))
    with pytest.raises(GateFailed) as exc:
        iterate(run, quiet=True)
    assert exc.value.exit_code == 4
    report = json.loads((it.dir / "gate_report.json").read_text())
    fit = [f for f in report["failures"] if f["rule"] == "row_fits_student"]
    assert fit and fit[0]["rows"] == [5, 9], report["failures"]
    assert "at most 232" in fit[0]["message"] and "gen_dataset.py" in fit[0]["message"]
    assert not (it.dir / "package.json").exists()
    write_teacher_files(it.dir)  # the teacher's fix
    result = iterate(run, quiet=True)
    assert result.kind == "ended", result


@pytest.mark.slow
def test_a_regenerated_dataset_clears_the_stale_launch_failure(run: RunDir, cli, monkeypatch) -> None:
    """The engine dies at launch on iter_1; `status` names the failure and the fix; the teacher changes the
    generator; the next plain `iterate` regenerates, repackages and launches afresh (no --restart), where
    before issue 36 it reported the old launch failure until --restart."""
    with pytest.raises(Exception):
        iterate(run, quiet=True)
    it = run.iter(1)
    write_teacher_files(it.dir)
    monkeypatch.setenv("FAKE_RL_DIE_AT_ONCE", "1")
    res = cli("iterate", "--run-dir", run.root)
    assert res.exit_code == 1 and "died at once" in res.stderr, res.stderr
    shown = json.loads(cli("status", "--run-dir", run.root, "--json").stdout)
    assert "iter_1's training job failed" in shown["next"] and "gen_dataset.py" in shown["next"], shown["next"]
    monkeypatch.delenv("FAKE_RL_DIE_AT_ONCE")
    res = cli("iterate", "--run-dir", run.root)  # the same data: the failure stands (its own advice: --restart)
    assert res.exit_code == 1, res.stderr
    write_teacher_files(it.dir, break_rules=("reverse",))  # the teacher's fix: a changed generator
    monkeypatch.setenv("FAKE_RL_EVAL_BUDGET", "43")  # the engine cuts the eval budget: said in rl.toml and printed
    res = cli("iterate", "--run-dir", run.root)
    assert res.exit_code == 0, res.stderr
    out = res.stdout + res.stderr
    assert "starts afresh" in out and list(it.dir.glob("prime_out.failed-*"))
    assert run.read_metrics().get("iter_1") is not None
    assert "iter_1: the engine cut the completion budget" in out and "-> 43 in force" in out
    assert "# In force: eval max_completion_tokens" in it.rl_toml.read_text()
    assert "Phase 3 ended" in res.stdout and "iter_1 eval_acc" in res.stdout and "n=20 examples" in res.stdout


def test_the_engines_launch_check_counts_the_same_tokens():
    """rl/train.longest_prompt (the engine's refusal "the longest prompt of ... is N tokens and the model attends
    over M positions") and the gate agree on every prompt: the gate refuses what the engine would."""
    from types import SimpleNamespace

    from selfimprove.rl.train import longest_prompt

    tok = engine_tokenizer("selfimprove/tiny-arith")
    questions = ["1+1?", "What is 123 * 456? Show the working." * 4]
    counts, _how = prompt_token_counts("selfimprove/tiny-arith", "Be brief.", questions)
    spec = SimpleNamespace(name="gen", rows=[{"prompt": [{"role": "system", "content": "Be brief."},
                                                         {"role": "user", "content": q}]} for q in questions])
    assert longest_prompt(tok, [spec]) == (max(counts), "gen")


def test_an_iter_0_taken_with_init_from_lends_its_budget_in_force(run: RunDir, tmp_path) -> None:
    """With --init-from, iter_0's completion_budget.json is in the prior run (run.json iter_0_path, absolute):
    the room is the budget it trained with there, not the config's alone (the gate refused rows the engine
    had trained the env's own rows with: si-reasoning-gym, 136-token prompts where iter_0 ran with 140)."""
    from selfimprove.phases.context import RunContext
    from selfimprove.phases.student_fit import fits_student_gate

    prior = tmp_path / "prior_prime_out"
    prior.mkdir()
    (prior / "completion_budget.json").write_text(json.dumps({"positions": 256, "train": {"in_force": 8}}))
    cfg = run.read_run()
    counts, _ = prompt_token_counts(cfg.model, RunContext.load(run).required_hub().system_prompt, ["1"])
    row = {"question": "1" * (256 - 12 - counts[0] + 1)}  # a 244-token prompt: room for 12 completion tokens
    run.write_run(cfg.model_copy(update={"iter_0_path": str(prior), "iter_0_source": "init-from"}))
    gate = fits_student_gate(RunContext.load(run), run.iter(1), [row])
    assert gate is not None and gate.passed, gate
    run.write_run(cfg.model_copy(update={"iter_0_path": str(tmp_path / "nowhere")}))  # no record: the config's budget
    gate = fits_student_gate(RunContext.load(run), run.iter(1), [row])
    assert gate is not None and not gate.passed and "at most" in gate.failures[0].message
