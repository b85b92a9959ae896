"""Phase 2 (`selfimprove baseline`): 2B with the fake engine, 2A --init-from, bad inputs, and one real run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from selfimprove.engines.jobs import read_job
from selfimprove.models import HubEnv, RewardFunc, RunConfig
from selfimprove.rundir import RunDir, write_model
from selfimprove.stack import prime_rl_keys, toml_paths
from selfimprove.stack.dialects import V1

FAKE = Path(__file__).parent / "fakes" / "fake_rl.py"
SMALL = ("--steps-per-run", "4", "--batch-size", "32", "--rollouts-per-example", "4", "--allow-small-batch",
         "--eval-examples", "20")


# hub_env.json's `taskset` section for a --stack v1 run (what stack.verifiers_v1.describe_taskset records)
V1_TASKSET = {"taskset_id": "selfimprove_arith_v1", "task_class": "ArithTask", "train_args": {"split": "train"},
              "eval_args": {"split": "eval"}, "rewards": [{"name": "correct_answer", "weight": 1.0}], "answer_field": "answer"}


def hub_env(run: Path, env_id: str = "selfimprove-arith", eval_size: int = 200, v1: bool = False) -> None:
    RunDir(run).write_hub_env(HubEnv(
        env_id=env_id, module="selfimprove_arith", source="local", env_class="SingleTurnEnv",
        parser_class="XMLParser", rubric_class="Rubric", rubric_funcs=[RewardFunc(name="correct_answer", weight=1.0)],
        system_prompt="Answer in <answer> tags.", answer_format_instruction=None, train_size=1000, eval_size=eval_size,
        **({"api": "verifiers.v1", "taskset": V1_TASKSET} if v1 else {}),
    ))


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the local engine at the fake; returns the launch log (one line per launch)."""
    log = tmp_path / "launches.log"
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_LAUNCH_LOG", str(log))
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)
    return log


@pytest.fixture
def run(new_run, fake_engine: Path) -> Path:
    r = new_run("selfimprove-arith", *SMALL)
    hub_env(r)
    return r


# ---------------------------------------------------------------- 2B


def test_engine_cut_of_the_eval_budget_is_one_console_line_and_stated_in_the_overlay(
        run: Path, cli, fake_engine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: the overlay said max_completion_tokens = 2048 while the engine gave 43, and the cut
    showed only in train.log. Baseline now says it on the console and in the overlay."""
    monkeypatch.setenv("FAKE_RL_EVAL_BUDGET", "43")
    monkeypatch.setenv("FAKE_RL_ANSWERS_OVER", "3")
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.output
    said = [ln for ln in res.output.splitlines() if "cut the completion budget" in ln]
    assert len(said) == 1 and "eval max_completion_tokens" in said[0] and "-> 43 in force" in said[0], said
    assert [ln for ln in res.output.splitlines() if "3 eval answers are longer than the 43-token budget" in ln]
    overlay = (run / "iter_0" / "eval_overlay.toml").read_text()
    assert "# In force: eval max_completion_tokens" in overlay and "-> 43 in force" in overlay
    assert toml_paths.read_toml(run / "iter_0" / "eval_overlay.toml")["orchestrator"]["eval"]["sampling"]


def test_no_budget_line_when_the_engine_cut_nothing(run: Path, cli, fake_engine: Path) -> None:
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.output
    assert "cut the completion budget" not in res.output
    assert "# In force" not in (run / "iter_0" / "eval_overlay.toml").read_text()




def test_2b_end_to_end(run: Path, cli, fake_engine: Path) -> None:
    """Canonical config + overlay + launch + sealed aggregation + metrics + run.json + scratchpad; re-run is a no-op."""
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    assert "iter_0 (trained): eval_acc" in res.stdout
    rd = RunDir(run)
    arm = rd.iter(0)
    s = rd.read_eval_summary(arm)
    assert (s.arm, s.n_eval, s.final_step, s.source) == ("iter_0", 20, 4, "trained")
    assert s.checkpoint == "iter_0/prime_out/weights/step_4" and s.train_reward_mean is not None  # run-dir relative
    overlay = arm.eval_overlay.read_text()
    assert "interval = 4" in overlay and "num_examples = 20" in overlay
    cmd = read_job(arm).cmd
    assert cmd[cmd.index("--max-steps") + 1] == "4" and cmd[cmd.index("--orchestrator.rollouts-per-example") + 1] == "4"
    assert cmd[cmd.index("--output-dir") + 1] == str(arm.prime_out)
    assert (arm.dir / "canonical_rl.toml").is_file()
    cfg = rd.read_run()
    assert (cfg.iter_0_source, cfg.iter_0_step, cfg.iter_0_path) == ("trained", 4, "iter_0/prime_out")
    pad = rd.scratchpad.read_text()
    assert pad.count("## Iteration 0") == 1 and "| 1-20 |" in pad

    again = cli("baseline", "--run-dir", run, "--json")
    assert again.exit_code == 0, again.stderr
    out = json.loads(again.stdout)
    assert out["already_done"] is True and "per_example" not in out and out["eval_acc"] == s.eval_acc
    assert len(fake_engine.read_text().splitlines()) == 1
    assert len(rd.read_metrics().iters) == 1 and rd.scratchpad.read_text().count("## Iteration 0") == 1


def test_2b_uses_explicit_config_and_records_it(run: Path, cli, tmp_path: Path) -> None:
    """--config is used verbatim (copied into iter_0/) and recorded in run.json canonical_config."""
    canon = tmp_path / "rl.toml"
    canon.write_text('[model]\nname = "x"\n[orchestrator.renderer]\nname = "default"\n'
                     '[[orchestrator.train.env]]\nid = "selfimprove-arith"\n[trainer]\n[inference]\n')
    res = cli("baseline", "--run-dir", run, "--config", canon)
    assert res.exit_code == 0, res.stderr
    assert (RunDir(run).iter(0).dir / "canonical_rl.toml").read_bytes() == canon.read_bytes()
    assert RunDir(run).read_run().canonical_config == str(canon.resolve())


def test_2b_canonical_max_tokens_is_renamed_not_doubled(run: Path, cli, tmp_path: Path) -> None:
    """A canonical [orchestrator.eval.sampling] max_tokens is moved to max_completion_tokens in the copy,
    so the overlay's value replaces it instead of landing beside it (prime-rl refuses both spellings)."""
    canon = tmp_path / "rl.toml"
    canon.write_text('[model]\nname = "x"\n[orchestrator.renderer]\nname = "default"\n'
                     '[orchestrator.eval.sampling]\nmax_tokens = 512\n'
                     '[[orchestrator.train.env]]\nid = "selfimprove-arith"\n[trainer]\n[inference]\n')
    res = cli("baseline", "--run-dir", run, "--config", canon)
    assert res.exit_code == 0, res.stderr
    copy = toml_paths.read_toml(RunDir(run).iter(0).dir / "canonical_rl.toml")
    assert copy["orchestrator"]["eval"]["sampling"] == {"max_completion_tokens": 512}
    merged = toml_paths.deep_merge(copy, toml_paths.read_toml(RunDir(run).iter(0).eval_overlay))
    assert prime_rl_keys.alias_conflicts(merged) == []


def test_canonical_config_with_both_spellings_is_refused(run: Path, cli, tmp_path: Path) -> None:
    bad = tmp_path / "both.toml"
    bad.write_text('[trainer]\n[orchestrator.eval.sampling]\nmax_tokens = 5\nmax_completion_tokens = 6\n')
    res = cli("baseline", "--run-dir", run, "--config", bad)
    assert res.exit_code == 1
    err = " ".join(res.stderr.split())
    assert "orchestrator.eval.sampling.max_tokens and orchestrator.eval.sampling.max_completion_tokens" in err
    assert str(bad) in err and "keep one" in err
    assert not (RunDir(run).iter(0).dir / "canonical_rl.toml").exists()


def test_2b_stack_v1_writes_main_keys_and_reads_main_layout(new_run, cli, fake_engine: Path) -> None:
    """--stack v1: iter_0's canonical, overlay and argv use prime-rl main's keys only; the engine's
    main-layout tree (no run_default/, traces.jsonl) is what the sealed aggregation reads."""
    from selfimprove.stack.prime_rl_keys import unknown_keys

    run = new_run("selfimprove-arith", *SMALL, "--stack", "v1")
    hub_env(run, v1=True)
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    rd = RunDir(run)
    arm = rd.iter(0)
    assert arm.layout is V1.layout and rd.read_run().stack == "v1"
    for f in (arm.dir / "canonical_rl.toml", arm.eval_overlay):
        assert unknown_keys(toml_paths.read_toml(f), V1.keys_file) == [], f
    assert rd.read_run().canonical_config.endswith("configs/basic/selfimprove-arith/rl.toml")  # main's config dir
    assert arm.eval_overlay.read_text().startswith(f"# Written by selfimprove ({V1.DIALECT} dialect)")
    cmd = read_job(arm).cmd
    assert cmd[cmd.index("--orchestrator.group-size") + 1] == "4" and "--orchestrator.rollouts-per-example" not in cmd
    assert cmd[cmd.index("--run.name") + 1] == "prime_out" and cmd[cmd.index("--output-dir") + 1] == str(arm.dir)
    overlay = toml_paths.read_toml(arm.eval_overlay)  # eval on the real taskset's eval rows, by its module id
    assert overlay["orchestrator"]["eval"]["source"][0]["env"]["taskset"] == {"id": "selfimprove_arith_v1", "split": "eval"}
    assert not (arm.prime_out / "run_default").exists()
    assert arm.eval_file(4).is_file() and (arm.orchestrator_ckpt(4) / "progress.pt").is_file()
    s = rd.read_eval_summary(arm)
    assert (s.n_eval, s.final_step) == (20, 4) and rd.root / s.eval_file == arm.eval_file(4)  # stored relative to the run dir


def test_2b_torn_last_line_is_reported_not_fatal(run: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_RL_TORN", "1")
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    assert "1 torn eval line(s) dropped" in res.stdout
    assert RunDir(run).read_eval_summary(RunDir(run).iter(0)).dropped_lines == 1


@pytest.mark.parametrize("dataset", ["nosuch-dataset", "selfimprove-arith"])
def test_baseline_before_introspect_is_phase_order(new_run, cli, fake_engine: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, dataset: str) -> None:
    """Baseline before introspect is a phase-order error (exit 5, nothing written), whether or not
    a canonical config exists for the dataset (issue 24: it was exit 1 without one, exit 0 with one)."""
    monkeypatch.setenv("PRIME_RL_DIR", str(tmp_path / "prime-rl"))
    run = new_run(dataset, *SMALL)
    before = sorted(p.name for p in run.iterdir())
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 5, res.stderr
    err = " ".join(res.stderr.split())
    assert "hub_env.json: missing" in err and f"selfimprove introspect --run-dir {run}" in err
    assert sorted(p.name for p in run.iterdir()) == before


def test_canonical_config_with_bad_key_is_named(run: Path, cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[trainer]\n[orchestrator]\nbogus_knob = 3\n')
    res = cli("baseline", "--run-dir", run, "--config", bad)
    assert res.exit_code == 1
    assert "orchestrator.bogus_knob" in res.stderr and str(bad) in " ".join(res.stderr.split())
    assert not (RunDir(run).iter(0).dir / "canonical_rl.toml").exists()  # a bad config is never frozen


def test_canonical_config_of_the_other_dialect_is_named(run: Path, cli, tmp_path: Path) -> None:
    """A prime-rl >= 0.8 rl.toml given to a seed-dialect run: one line naming the key, its seed name and --stack."""
    v1 = tmp_path / "v1.toml"
    v1.write_text('[trainer]\n[orchestrator]\ngroup_size = 4\n[[orchestrator.train.source]]\n'
                  '[orchestrator.train.source.env.taskset]\nid = "selfimprove-arith"\n')
    res = cli("baseline", "--run-dir", run, "--config", v1)
    assert res.exit_code == 1
    err = " ".join(res.stderr.split())
    assert str(v1) in err and "prime-rl >= 0.8 key" in err and "--stack v1" in err
    assert not (RunDir(run).iter(0).dir / "canonical_rl.toml").exists()


def test_engine_not_on_path(run: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", "/nonexistent/selfimprove-rl --x")
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 1
    assert "'/nonexistent/selfimprove-rl' is not on PATH" in res.stderr
    assert not RunDir(run).iter(0).job_file.exists()


def test_job_that_dies_at_once(run: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error shows the last lines of train.log and the way out."""
    monkeypatch.setenv("FAKE_RL_DIE_AT_ONCE", "1")
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 1
    assert "fake engine died at once" in res.stderr and "--restart" in res.stderr
    assert not RunDir(run).iter(0).eval_summary.exists()


def test_eval_with_too_few_rows_fails(run: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that exits with fewer final eval rows than expected is a failure, not a score."""
    monkeypatch.setenv("FAKE_RL_EVAL_ROWS", "7")
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 1
    assert "7/20 rows" in res.stderr


# ---------------------------------------------------------------- 2A


@pytest.fixture
def prior(tmp_path: Path) -> Path:
    """A prior training run dir in the seed's --init-from layout, made by the fake engine (F = 4)."""
    src = tmp_path / "prior"
    (src / "cfg.toml").parent.mkdir(parents=True)
    (src / "cfg.toml").write_text("[trainer]\n[orchestrator]\n[ckpt]\ninterval = 4\n"
                                  "[[orchestrator.eval.env]]\nid = 'x'\nnum_examples = 20\n")
    env = {**os.environ, "FAKE_RL_ACC": "0.5"}
    subprocess.run([sys.executable, str(FAKE), "@", str(src / "cfg.toml"), "--max-steps", "4",
                    "--output-dir", str(src / "prime_out")], check=True, env=env, capture_output=True)
    write_model(src / "run.json", RunConfig(dataset="selfimprove-arith", hub_id="selfimprove-arith", model="m",
                                            start_ts=0, budget_seconds=1, max_iters=1, batch_size=32))
    (src / "metrics.json").write_text(json.dumps({"iters": [
        {"arm": "iter_0", "eval_acc": 0.55, "eval_reward_mean": 0.56, "n_eval": 20, "final_step": 4}]}))
    return src


def test_2a_init_from_happy_path(new_run, cli, prior: Path) -> None:
    run = new_run("selfimprove-arith", *SMALL, "--init-from", str(prior))
    hub_env(run)
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    rd = RunDir(run)
    arm = rd.iter(0)
    s = rd.read_eval_summary(arm)
    assert (s.source, s.eval_acc, s.eval_reward_mean, s.final_step) == ("init-from", 0.55, 0.56, 4)
    assert len(s.per_example) == 20  # sealed aggregate of the inherited file, for paired tests
    assert os.readlink(arm.weights(4)) == str(prior / "prime_out" / "weights" / "step_4")
    assert os.readlink(arm.trainer_ckpt(4)) == str(prior / "prime_out" / "checkpoints" / "step_4")
    assert arm.rollout_step(0).is_symlink() and arm.rollout_step(4).is_symlink()
    assert arm.orchestrator_ckpt(4).is_symlink() and arm.broadcast(4).is_symlink()
    cfg = rd.read_run()
    assert (cfg.iter_0_source, cfg.iter_0_step, cfg.iter_0_path) == ("init-from", 4, str(prior / "prime_out"))
    # the inherited rollouts are checked for a learning signal (status never says "not checked yet" forever)
    assert cfg.learning_signal is not None and cfg.learning_signal["train_groups"] > 0
    assert "not checked yet" not in cli("status", "--run-dir", run).stdout
    # its seed is unknown (it trained elsewhere), never the canonical config's 0
    from selfimprove.phases.arms import recorded_seed
    from selfimprove.phases.context import RunContext
    assert recorded_seed(RunContext.load(rd), "iter_0") is None
    assert rd.read_metrics().get("iter_0").source == "init-from"
    pad = rd.scratchpad.read_text()
    assert "Inherited via --init-from" in pad and "trajectory" not in pad
    assert not arm.job_file.exists()  # nothing was trained
    assert (arm.dir / "canonical_rl.toml").is_file()  # later arms are built on it
    assert cli("baseline", "--run-dir", run).exit_code == 0  # idempotent
    assert rd.scratchpad.read_text().count("## Iteration 0") == 1


def test_2a_step_dirs_disagree(new_run, cli, prior: Path) -> None:
    run = new_run("selfimprove-arith", *SMALL, "--init-from", str(prior))
    hub_env(run)
    (prior / "prime_out" / "run_default" / "rollouts" / "step_6").mkdir()
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 2
    assert "final step dirs disagree" in res.stderr and "rollouts/ step_6" in " ".join(res.stderr.split())


def test_2a_missing_artefact(new_run, cli, prior: Path) -> None:
    run = new_run("selfimprove-arith", *SMALL, "--init-from", str(prior))
    hub_env(run)
    (prior / "prime_out" / "weights" / "step_4" / "tokenizer.json").unlink()
    res = cli("baseline", "--run-dir", run)
    assert res.exit_code == 2
    assert "missing" in res.stderr and "tokenizer.json" in res.stderr


# ---------------------------------------------------------------- the real local engine


def _engine_ready() -> str | None:
    if importlib.util.find_spec("selfimprove.rl.cli") is None:
        return "the local engine (selfimprove.rl.cli) is not in this tree yet"
    for mod in ("torch", "transformers", "safetensors"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install 'selfimprove[local]')"
    return None


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_2b_real_local_engine(new_run, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """`baseline` trains iter_0 for real with selfimprove-rl on selfimprove-arith (small explicit overrides)."""
    reason = _engine_ready()
    if reason:
        pytest.skip(reason)
    monkeypatch.delenv("SELFIMPROVE_RL_CMD", raising=False)
    run = new_run("selfimprove-arith", "--hub-id", "selfimprove-arith", "--steps-per-run", "4", "--batch-size", "32",
                  "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "50")
    res = cli("introspect", "--run-dir", run)
    assert res.exit_code == 0, res.stderr
    res = cli("baseline", "--run-dir", run, "--json")
    rd = RunDir(run)
    assert res.exit_code == 0, res.stderr + rd.iter(0).train_log.read_text()[-3000:]
    s = json.loads(res.stdout)
    assert s["n_eval"] == 50 and s["final_step"] == 4 and 0.0 <= s["eval_acc"] <= 1.0
    assert rd.read_metrics().get("iter_0") is not None
    assert "## Iteration 0" in rd.scratchpad.read_text()
    assert rd.iter(0).trainer_ckpt(4).is_dir() and rd.iter(0).weights(4).is_dir()
