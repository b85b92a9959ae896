"""A slow student shows life within a minute: the CPU engine samples a large model in small chunks and
logs `Sampling ...: done/total completions`, and the watcher's progress line says so before step 1
(issue: a pretrained CPU student finished no step in 15 min and printed nothing)."""

from __future__ import annotations

import io
from pathlib import Path

import torch

from selfimprove.engines.rollouts import student_build_note
from selfimprove.rl.logs import Log
from selfimprove.rl.rollouts import (LARGE_MODEL_PARAMS, SAMPLING_CHUNK, SAMPLING_CHUNK_LARGE, EnvSpec,
                                     load_env, run_rollouts, sampling_chunk, sampling_line, split_rows)
from selfimprove.rl.student import new_student


def test_a_large_model_samples_in_small_chunks_and_the_tiny_student_keeps_its_own():
    """The chunk decides the random draws' order, so the tiny student's (and the README's figures) stays 512."""
    model, _ = new_student(0)
    assert sampling_chunk(sum(p.numel() for p in model.parameters())) == SAMPLING_CHUNK == 512
    assert sampling_chunk(LARGE_MODEL_PARAMS) == SAMPLING_CHUNK_LARGE < 16  # SmolLM2-135M: ~20 s per chunk here


def test_run_rollouts_reports_each_chunk():
    model, tok = new_student(0)
    env = load_env("selfimprove-arith", {})
    spec = EnvSpec(id="selfimprove-arith", name="arith", args={}, ratio=None, env=env)
    rows = split_rows(env, "train", n=3)
    seen: list[tuple[int, int]] = []
    recs = run_rollouts(model, tok, [(spec, r) for r in rows], n=2, temperature=1.0, max_tokens=4,
                        generator=torch.Generator().manual_seed(0), chunk=4, on_chunk=lambda d, t: seen.append((d, t)))
    assert len(recs) == 6 and seen == [(4, 6), (6, 6)]


def test_run_rollouts_reports_inside_a_chunk_without_changing_the_samples():
    """on_token: progress while one chunk of long completions is sampled (the done count is the chunks'
    so far); the draws are the same with and without it."""
    model, tok = new_student(0)
    env = load_env("selfimprove-arith", {})
    spec = EnvSpec(id="selfimprove-arith", name="arith", args={}, ratio=None, env=env)
    rows = split_rows(env, "train", n=3)
    ticks: list[tuple[int, int]] = []

    def sample(**kw):
        return run_rollouts(model, tok, [(spec, r) for r in rows], n=2, temperature=1.0, max_tokens=6,
                            generator=torch.Generator().manual_seed(0), chunk=4, **kw)
    with_ticks, without = sample(on_token=lambda d, t: ticks.append((d, t))), sample()
    assert [r["completion"] for r in with_ticks] == [r["completion"] for r in without]
    assert ticks and {t for _, t in ticks} == {6} and {d for d, _ in ticks} <= {0, 4}
    assert (0, 6) in ticks and (4, 6) in ticks  # during the first chunk and during the second


def test_the_progress_note_shows_the_sampling_until_the_step_ends(tmp_path: Path):
    log_path = tmp_path / "train.log"
    log = Log(log_path)  # the engine's own log format
    log.info("Loaded model x (135.00M parameters)")
    assert student_build_note(log_path) is None
    log.info(sampling_line("the eval of step 1 (arith)", 8, 200, 21.4))
    assert student_build_note(log_path) == "sampling the eval of step 1 (arith): 8/200 completions, 21 s"
    log.info("Evaluated arith at step 1 | Avg@1: 0.1000 | Examples: 200 | Policy: v0 | Time: 500.00s")
    assert student_build_note(log_path) is None  # that sampling ended
    log.info(sampling_line("step 1", 8, 16, 20.2))
    assert student_build_note(log_path) == "sampling step 1: 8/16 completions, 20 s"
    log.info("Step 1 | Time: 41.00s | Reward: 0.2500 | Zero-var groups: 50.0%")
    assert student_build_note(log_path) is None
    log.close()


def test_the_plain_progress_line_carries_the_note():
    from rich.console import Console

    from selfimprove.ui import PlainProgress

    out = io.StringIO()
    bar = PlainProgress(Console(file=out, width=200), interval=0.0)
    task = bar.add_task("iter_0", total=50, reward="-", note="")
    bar.update(task, completed=0, reward="-", note="sampling step 1: 8/16 completions, 20 s")
    assert out.getvalue().splitlines()[-1].endswith("iter_0: sampling step 1: 8/16 completions, 20 s")


def test_the_first_note_is_printed_at_once_then_the_interval_holds():
    """The first sign of life (a slow model's first sampling line) does not wait for the 30 s interval;
    later notes do."""
    from rich.console import Console

    from selfimprove.ui import PlainProgress

    out = io.StringIO()
    bar = PlainProgress(Console(file=out, width=200), interval=3600.0)
    task = bar.add_task("iter_0", total=50, reward="-", note="")
    bar.update(task, completed=0, reward="-", note="")
    assert len(out.getvalue().splitlines()) == 1  # the start line only
    bar.update(task, completed=0, reward="-", note="sampling step 1: 0/16 completions, 5 s")
    bar.update(task, completed=0, reward="-", note="sampling step 1: 4/16 completions, 25 s")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].endswith("iter_0: sampling step 1: 0/16 completions, 5 s")

