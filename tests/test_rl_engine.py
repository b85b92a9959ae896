"""The CPU engine for real: short GRPO runs of the built-in student (its warm-up
is built once and cached in the default cache dir, shared by every test), the
whole output layout and record fields, resume == uninterrupted, mixed train
envs with ratios, and kill -9 then resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli_w

pytestmark = pytest.mark.slow

TRAIN_FIELDS = {"example_id", "prompt", "completion", "answer", "info", "reward", "metrics", "timing", "is_completed",
                "is_truncated", "stop_condition", "error", "token_usage", "sampling_args", "env_name", "advantage",
                "is_filtered"}
EVAL_FIELDS = TRAIN_FIELDS - {"advantage", "is_filtered"}


def cfg(**over) -> dict:
    c = {
        "max_steps": 3,
        "seq_len": 256,
        "model": {"name": "selfimprove/tiny-arith"},
        "ckpt": {"interval": 2},
        "orchestrator": {
            "batch_size": 32, "rollouts_per_example": 8, "seed": 1,
            "renderer": {"name": "default"},
            "train": {"sampling": {"max_completion_tokens": 24, "temperature": 1.0},
                      "env": [{"id": "selfimprove-arith"}]},
            "eval": {"interval": 2, "num_examples": 32,
                     "env": [{"id": "selfimprove-arith", "args": {"num_eval_examples": 32}}]},
        },
        "trainer": {"optim": {"lr": 3e-5}},
    }
    c.update(over)
    return c


def engine(tmp: Path, config: dict, *extra: str, name: str = "rl.toml") -> subprocess.CompletedProcess:
    path = tmp / name
    path.write_text(tomli_w.dumps(config))
    return subprocess.run([sys.executable, "-m", "selfimprove.rl.cli", "@", str(path), *extra],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def student() -> Path:
    """Build (or reuse) the cached built-in student once for the module."""
    from selfimprove.rl.student import resolve_model

    return resolve_model("selfimprove/tiny-arith", log=lambda s: None)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_short_run_writes_the_whole_layout(tmp_path, student):
    out = tmp_path / "out"
    res = engine(tmp_path, cfg(), "--output-dir", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("RL training finished!")
    for n in (2, 3):
        for f in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"):
            assert (out / "weights" / f"step_{n}" / f).is_file(), (n, f)
        assert (out / "checkpoints" / f"step_{n}" / "trainer" / "__0_0.distcp").is_file()
        assert (out / "checkpoints" / f"step_{n}" / "trainer" / ".metadata").is_file()
        assert (out / "run_default" / "checkpoints" / f"step_{n}" / "orchestrator" / "progress.pt").is_file()
        assert (out / "run_default" / "broadcasts" / f"step_{n}" / "STABLE").is_file()
        assert (out / "run_default" / "broadcasts" / f"step_{n}" / "model.safetensors").is_file()
    for n in (1, 2, 3):
        train = rows(out / "run_default" / "rollouts" / f"step_{n}" / "train_rollouts.jsonl")
        assert len(train) == 32
        for r in train:
            assert TRAIN_FIELDS <= set(r), TRAIN_FIELDS - set(r)
            assert 0.0 <= r["reward"] <= 1.0 and "correct_answer" in r["metrics"] and r["error"] is None
            assert [m["role"] for m in r["prompt"]] == ["user"]  # as the env renders it: no system turn
            assert r["completion"][0]["role"] == "assistant"
        ids = [r["example_id"] for r in train]
        assert all(ids[i] == ids[i - i % 8] for i in range(32))  # grouped by prompt, 8 rollouts each
    for n in (0, 2, 3):
        ev = rows(out / "run_default" / "rollouts" / f"step_{n}" / "eval_rollouts.jsonl")
        assert len(ev) == 32 and all(EVAL_FIELDS <= set(r) for r in ev)
    assert not (out / "run_default" / "rollouts" / "step_1" / "eval_rollouts.jsonl").exists()
    assert {p.name for p in (out / "configs").iterdir()} == {"trainer.toml", "orchestrator.toml"}
    tlog = (out / "logs" / "trainer.log").read_text()
    olog = (out / "logs" / "orchestrator.log").read_text()
    for n in (1, 2, 3):
        assert f"Step {n} | " in tlog and f"Step {n} | " in olog
    assert "Reward:" in olog and "Zero-var groups:" in olog and "Seq. Length:" in olog
    assert "RL trainer finished!" in tlog and "Orchestrator finished." in olog
    # the saved weights load with plain transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(out / "weights" / "step_3")
    assert AutoTokenizer.from_pretrained(out / "weights" / "step_3").chat_template


def test_resume_equals_uninterrupted(tmp_path, student):
    """Steps 3-4 after a resume from step 2 are bit-for-bit those of an uninterrupted 4-step run."""
    full, part = tmp_path / "full", tmp_path / "part"
    c = cfg(max_steps=4)
    c["orchestrator"]["eval"]["interval"] = 4
    assert engine(tmp_path, c, "--output-dir", str(full), name="a.toml").returncode == 0
    first = engine(tmp_path, c, "--max-steps", "2", "--output-dir", str(part), name="b.toml")
    assert first.returncode == 0, first.stderr
    res = engine(tmp_path, c, "--ckpt.resume-step", "2", "--output-dir", str(part), name="c.toml")
    assert res.returncode == 0, res.stderr
    for n in (3, 4):
        a = (full / "run_default" / "rollouts" / f"step_{n}" / "train_rollouts.jsonl").read_text()
        b = (part / "run_default" / "rollouts" / f"step_{n}" / "train_rollouts.jsonl").read_text()
        strip = lambda text: [{k: v for k, v in json.loads(l).items() if k != "timing"} for l in text.splitlines()]
        assert strip(a) == strip(b), f"train rollouts of step {n} differ"
    wa = (full / "weights" / "step_4" / "model.safetensors").read_bytes()
    wb = (part / "weights" / "step_4" / "model.safetensors").read_bytes()
    assert wa == wb


def test_resume_at_max_steps_refused(tmp_path, student):
    out = tmp_path / "out"
    c = cfg(max_steps=2)
    del c["orchestrator"]["eval"]
    assert engine(tmp_path, c, "--output-dir", str(out)).returncode == 0
    res = engine(tmp_path, c, "--ckpt.resume-step", "2", "--output-dir", str(out), name="b.toml")
    assert res.returncode == 1 and "resume_step = 2 but max_steps = 2" in res.stderr


def test_mixed_train_envs_with_ratios(tmp_path, student):
    out = tmp_path / "out"
    c = cfg(max_steps=2, ckpt={"interval": 2})
    del c["orchestrator"]["eval"]
    c["orchestrator"]["batch_size"] = 128  # 16 prompts x 8 per step
    c["orchestrator"]["train"]["env"] = [
        {"id": "selfimprove-arith", "name": "big", "ratio": 3.0},
        {"id": "selfimprove-arith", "name": "small", "ratio": 1.0, "args": {"num_train_examples": 50}},
    ]
    res = engine(tmp_path, c, "--output-dir", str(out))
    assert res.returncode == 0, res.stderr
    names = [r["env_name"] for n in (1, 2) for r in rows(out / "run_default" / "rollouts" / f"step_{n}" / "train_rollouts.jsonl")]
    big, small = names.count("big") // 8, names.count("small") // 8
    assert big + small == 32 and big > small > 0
    assert {r["example_id"] for n in (1, 2) for r in rows(out / "run_default" / "rollouts" / f"step_{n}" / "train_rollouts.jsonl")
            if r["env_name"] == "small"} <= set(range(50))


def test_kill_9_then_resume_latest(tmp_path, student):
    out = tmp_path / "out"
    c = cfg(max_steps=8, ckpt={"interval": 2})
    del c["orchestrator"]["eval"]
    path = tmp_path / "rl.toml"
    path.write_text(tomli_w.dumps(c))
    proc = subprocess.Popen([sys.executable, "-m", "selfimprove.rl.cli", "@", str(path), "--output-dir", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while not (out / "run_default" / "rollouts" / "step_5" / "train_rollouts.jsonl").exists():
            assert proc.poll() is None, "engine exited before it could be killed"
            assert time.time() < deadline
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    res = engine(tmp_path, c, "--ckpt.resume-step", "-1", "--output-dir", str(out), name="b.toml")
    assert res.returncode == 0, res.stderr
    assert "Resumed from step 4" in (out / "logs" / "orchestrator.log").read_text()
    assert (out / "weights" / "step_8" / "model.safetensors").is_file()
    assert (out / "run_default" / "rollouts" / "step_8" / "train_rollouts.jsonl").is_file()
    leftovers = [p for p in out.rglob(".*") if p.name not in (".metadata",)]
    assert not leftovers, leftovers  # no temp dirs/files left behind
