"""The CPU engine's config side: prime-rl's merge rules as the engine sees them,
the honoured subset, GPU-only keys noted once, and every bad input of issue 3.
Fast: a random-init student (no warm-up), tiny shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomli_w

from selfimprove.rl.cli import main
from selfimprove.rl.config import ignored_keys, resolve
from selfimprove.stack.dialects import SEED

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def rand_student(tmp_path_factory) -> Path:
    """A tiny RANDOM-init student directory (no warm-up)."""
    from selfimprove.rl.student import new_student, save_student

    d = tmp_path_factory.mktemp("students") / "rand"
    model, tok = new_student(0)
    save_student(model, tok, d)
    return d


def small_cfg(model: Path, **over) -> dict:
    cfg = {
        "max_steps": 1,
        "model": {"name": str(model)},
        "ckpt": {"interval": 1},
        "orchestrator": {
            "batch_size": 8, "rollouts_per_example": 4, "seed": 3,
            "renderer": {"name": "default"},
            "train": {"sampling": {"max_completion_tokens": 8, "temperature": 1.0},
                      "env": [{"id": "selfimprove-arith", "args": {"num_train_examples": 64}}]},
            "eval": {"interval": 1, "num_examples": 4, "eval_base_model": False,
                     "env": [{"id": "selfimprove-arith", "args": {"num_eval_examples": 4}}]},
        },
        "trainer": {"optim": {"lr": 1e-4}},
    }
    for k, v in over.items():
        cfg[k] = v
    return cfg


def write(path: Path, cfg: dict) -> Path:
    path.write_text(tomli_w.dumps(cfg))
    return path


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


# ------------------------------------------------------------------ mapping


def test_canonical_config_is_valid_and_honoured():
    """configs/selfimprove-arith/rl.toml validates and maps to the demo shape."""
    raw, _ = SEED.parse_rl_argv(["@", str(REPO / "configs/selfimprove-arith/rl.toml"), "--output-dir", "/tmp/unused"])
    cfg = resolve(raw)
    assert cfg.model_name == "selfimprove/tiny-arith"
    assert (cfg.batch_size, cfg.rollouts_per_example, cfg.prompts_per_step) == (256, 16, 16)
    assert cfg.train_envs[0].id == "selfimprove-arith" and cfg.eval.envs[0].id == "selfimprove-arith"
    assert raw["orchestrator"]["renderer"]["name"] == "default"
    assert ignored_keys(raw) == []


def test_honoured_keys_and_overrides(tmp_path, rand_student):
    """Files merge left to right, CLI wins (kebab -> snake), lists replaced whole, every honoured key lands."""
    a = write(tmp_path / "a.toml", small_cfg(rand_student))
    b = write(tmp_path / "b.toml", {"orchestrator": {"train": {"env": [
        {"id": "selfimprove-arith", "name": "x", "ratio": 3.0},
        {"id": "selfimprove-arith", "name": "y", "ratio": 1.0, "args": {"num_train_examples": 10}}]}}})
    raw, files = SEED.parse_rl_argv(["@", str(a), "@", str(b), "--max-steps", "7", "--orchestrator.batch-size", "16",
                                "--ckpt.keep-last", "2", "--ckpt.resume-step", "3", "--trainer.optim.lr", "2e-4",
                                "--orchestrator.eval.sampling.temperature", "0.5", "--output-dir", str(tmp_path / "o")])
    cfg = resolve(raw)
    assert files == [a, b]
    assert cfg.max_steps == 7 and cfg.batch_size == 16 and cfg.rollouts_per_example == 4 and cfg.seed == 3
    assert cfg.keep_last == 2 and cfg.resume_step == 3 and cfg.ckpt_interval == 1 and cfg.lr == 2e-4
    assert [(e.name, e.ratio) for e in cfg.train_envs] == [("x", 3.0), ("y", 1.0)]  # list replaced, not merged
    assert cfg.train_envs[1].args == {"num_train_examples": 10}
    assert cfg.max_tokens == 8 and cfg.temperature == 1.0
    assert cfg.eval.temperature == 0.5 and cfg.eval.num_examples == 4 and cfg.eval.eval_base_model is False
    assert cfg.output_dir == tmp_path / "o"


def test_eval_greedy_by_default(tmp_path, rand_student):
    raw, _ = SEED.parse_rl_argv(["@", str(write(tmp_path / "a.toml", small_cfg(rand_student))), "--output-dir", str(tmp_path / "o")])
    assert resolve(raw).eval.temperature == 0.0


def test_gpu_only_keys_noted_once(tmp_path, rand_student, capsys):
    """[inference], parallelism and [wandb] are accepted; the log names them once; the run trains."""
    cfg = small_cfg(rand_student)
    cfg["inference"] = {"gpu_memory_utilization": 0.5}
    cfg["wandb"] = {"project": "p"}
    cfg["trainer"]["model"] = {"compile": {}}
    out = tmp_path / "o"
    rc, stdout, err = run_cli(capsys, "@", write(tmp_path / "a.toml", cfg), "--output-dir", out)
    assert rc == 0, err
    assert "RL training finished!" in stdout
    log = (out / "logs" / "orchestrator.log").read_text()
    assert log.count("ignores these keys") == 1
    for key in ("inference", "trainer.model.compile", "wandb"):
        assert key in log


# ------------------------------------------------------------------ bad inputs


@pytest.mark.parametrize("mutate, needle", [
    (lambda c: c.update(bogus_key=1), "unknown key 'bogus_key'"),
    (lambda c: c["orchestrator"].update(batch_size="many"), "orchestrator.batch_size: expected int"),
    (lambda c: c.pop("trainer"), "missing [trainer]"),
    (lambda c: c.pop("orchestrator"), "missing [orchestrator]"),
    (lambda c: c["orchestrator"].update(batch_size=10), "not divisible"),
    (lambda c: c.update(ckpt={"resume_step": 1}), "resume_step = 1 but max_steps = 1"),
    # issue 24 round 3: ranges and finiteness of the knobs a run varies (TOML spells nan and inf)
    (lambda c: c.update(seq_len=-5), "seq_len = -5: must be an integer >= 1"),
    (lambda c: c["orchestrator"]["train"]["sampling"].update(temperature=float("nan")),
     "orchestrator.train.sampling.temperature = nan: must be a finite number >= 0"),
    (lambda c: c["orchestrator"]["train"]["sampling"].update(max_completion_tokens=0),
     "orchestrator.train.sampling.max_completion_tokens = 0: must be an integer >= 1"),
    (lambda c: c["trainer"]["optim"].update(lr=float("inf")), "trainer.optim.lr = inf: must be a finite number"),
])
def test_bad_config_refused(tmp_path, rand_student, capsys, mutate, needle):
    cfg = small_cfg(rand_student)
    mutate(cfg)
    rc, _, err = run_cli(capsys, "@", write(tmp_path / "a.toml", cfg), "--output-dir", tmp_path / "o")
    assert rc == 1
    assert needle in err
    assert len(err.strip().splitlines()) == 1  # one clear line, no traceback
    assert not (tmp_path / "o").exists()


def test_unknown_env_id(tmp_path, rand_student, capsys):
    cfg = small_cfg(rand_student)
    cfg["orchestrator"]["train"]["env"] = [{"id": "no-such-env-xyz"}]
    rc, _, err = run_cli(capsys, "@", write(tmp_path / "a.toml", cfg), "--output-dir", tmp_path / "o")
    assert rc == 1 and "no-such-env-xyz" in err and len(err.strip().splitlines()) == 1


def test_unknown_model(tmp_path, capsys):
    cfg = small_cfg(Path("someone/not-a-builtin"))
    rc, _, err = run_cli(capsys, "@", write(tmp_path / "a.toml", cfg), "--output-dir", tmp_path / "o")
    assert rc == 1 and "someone/not-a-builtin" in err


def test_resume_names_missing_tree(tmp_path, rand_student, capsys):
    out = tmp_path / "o"
    (out / "checkpoints" / "step_2" / "trainer").mkdir(parents=True)
    (out / "checkpoints" / "step_2" / "trainer" / "__0_0.distcp").write_bytes(b"x")
    cfg = small_cfg(rand_student, max_steps=4, ckpt={"resume_step": 2})
    rc, _, err = run_cli(capsys, "@", write(tmp_path / "a.toml", cfg), "--output-dir", out)
    assert rc == 1
    assert str(out / "run_default" / "checkpoints" / "step_2" / "orchestrator") in err


def test_resume_latest_without_checkpoints(tmp_path, rand_student, capsys):
    cfg = small_cfg(rand_student, max_steps=4, ckpt={"resume_step": -1})
    rc, _, err = run_cli(capsys, "@", write(tmp_path / "a.toml", cfg), "--output-dir", tmp_path / "o")
    assert rc == 1 and "no complete checkpoint" in err


def test_fresh_run_into_dir_with_checkpoints(tmp_path, rand_student, capsys):
    """Refused without clean_output_dir; with it the old tree is deleted and the run trains."""
    out = tmp_path / "o"
    (out / "checkpoints" / "step_5" / "trainer").mkdir(parents=True)
    a = write(tmp_path / "a.toml", small_cfg(rand_student))
    rc, _, err = run_cli(capsys, "@", a, "--output-dir", out)
    assert rc == 1 and "already holds checkpoints" in err and "--clean-output-dir" in err
    rc, stdout, err = run_cli(capsys, "@", a, "--clean-output-dir", "--output-dir", out)
    assert rc == 0, err
    assert not (out / "checkpoints" / "step_5").exists()
    assert (out / "checkpoints" / "step_1" / "trainer" / "__0_0.distcp").is_file()


def test_raising_reward_scores_zero_with_error_recorded():
    """A reward function that raises scores 0 (verifiers' rule) and the row records the error."""
    import verifiers as vf
    from datasets import Dataset

    from selfimprove.rl.rollouts import score_completions, split_rows

    def exploding(completion, answer, **kwargs) -> float:
        raise RuntimeError("boom in reward")

    def fine(completion, answer, **kwargs) -> float:
        return 1.0

    rows = [{"question": "1+1", "answer": "2"}]
    env = vf.SingleTurnEnv(dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(rows),
                           system_prompt="s", rubric=vf.Rubric(funcs=[exploding, fine], weights=[1.0, 0.5]))
    r = split_rows(env, "train")
    [res] = score_completions(env, r, ["<answer>2</answer>"])
    assert res["metrics"]["exploding"] == 0.0 and res["metrics"]["fine"] == 1.0
    assert res["reward"] == 0.5
    assert res["error"] is not None and "boom in reward" in res["error"]["message"]
    assert "num_turns" in res["metrics"]  # the MultiTurnEnv metric works on our State
    json.dumps(res)


def test_project_file_finds_canonical_config():
    from selfimprove.rl.resources import project_file

    assert project_file("configs/selfimprove-arith/rl.toml").is_file()
