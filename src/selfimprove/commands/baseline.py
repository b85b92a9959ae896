"""`selfimprove baseline`: Phase 2 (iter_0)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..phases.baseline import run_baseline
from ..rundir import RunDir
from ..phases.signal import not_a_result
from ..scratchpad import fmt_acc
from ..ui import out, phase_line
from ._common import check_job_flags, JsonOpt, RunDirOpt, cli_errors, print_json


@cli_errors
def command(
    run_dir: RunDirOpt,
    restart: Annotated[bool, typer.Option(help="After a crash: move prime_out aside (prime_out.failed-<time>) and train iter_0 again from step 0.")] = False,
    resume: Annotated[bool, typer.Option(help="After a crash: relaunch from the last saved checkpoint (prime-rl's resume: --ckpt.resume-step in the seed dialect, --resume.step in v1).")] = False,
    config: Annotated[Optional[Path], typer.Option(help="Canonical rl.toml for iter_0 (overrides run.json canonical_config).")] = None,
    cap_hours: Annotated[Optional[float], typer.Option(help="Stop the job after this many hours since launch (default: expected end + 2 h).")] = None,
    allow_no_signal: Annotated[bool, typer.Option(help="Continue even when iter_0's rewards do not spread (no GRPO signal; exit 4 otherwise). The verdict stays in run.json and the summary.")] = False,
    json_: JsonOpt = False,
) -> None:
    """Phase 2: train iter_0 on the real environment (or inherit it with --init-from) and score it.

    The training job runs detached: if this command is interrupted (Ctrl-C, kill,
    a shell time limit), the job keeps training; run the same command again to
    ATTACH to it. It never starts a second copy. After a crash it says what is on
    disk and offers --restart or --resume. Prints the eval summary on stdout
    (one JSON object with --json, without per-example scores, and no progress bar).

    Exit 4 when the student gets no reward signal (no spread in iter_0's first train
    steps' rewards): RL cannot learn on this env; use a stronger model, or pass
    --allow-no-signal to go on anyway.

    Not charged to --budget: it caps Phase 3 only, and its clock starts at the
    first `selfimprove iterate`.

    Example usage:

        selfimprove baseline --run-dir $RUN_DIR
        selfimprove baseline --run-dir $RUN_DIR --json  # quiet, for agents
        selfimprove baseline --run-dir $RUN_DIR --resume    # after a crash
    """
    check_job_flags(restart, resume, cap_hours)
    rd = RunDir(run_dir)
    cfg = rd.require().read_run()
    if not json_:  # before Phase 3 the budget clock has not started: the line says so
        phase_line("start", "baseline", cfg.phase3_start_ts, cfg.budget_seconds)
    res = run_baseline(rd, restart=restart, resume=resume, config=str(config) if config else None,
                       cap_hours=cap_hours, quiet=json_, allow_no_signal=allow_no_signal)
    s = res.summary
    if json_:
        print_json({**s.model_dump(mode="json", exclude={"per_example"}), "already_done": res.already_done})
        return
    phase_line("done", "baseline", cfg.phase3_start_ts, cfg.budget_seconds)
    train = f"{s.train_reward_mean:.3f}" if s.train_reward_mean is not None else "n/a"
    out.print(f"iter_0 ({s.source}): eval_acc {fmt_acc(s)} | eval reward mean {s.eval_reward_mean:.3f} | "
              f"train reward (last steps) {train} | step {s.final_step}", markup=False)
    out.print(f"checkpoint: {s.checkpoint or 'none'}", markup=False)
    if s.dropped_lines:
        out.print(f"note: {s.dropped_lines} torn eval line(s) dropped", markup=False)
    if warning := not_a_result(res.learning_signal):
        out.print(warning, markup=False)
    out.print(f"next: selfimprove iterate --run-dir {rd.root}", markup=False)
