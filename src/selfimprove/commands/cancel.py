"""`selfimprove cancel`: scancel this run's own SLURM jobs (by the ids job.json recorded)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..phases.cancel import cancel
from ..rundir import RunDir
from ..ui import out
from ._common import JsonOpt, RunDirOpt, cli_errors, print_json


@cli_errors
def command(
    run_dir: RunDirOpt,
    arm: Annotated[Optional[str], typer.Option(help="Only this arm's job (its dir name, e.g. iter_2 or run_a_best_from_iter0, or run_a). Default: every live job of the run.")] = None,
    why: Annotated[str, typer.Option(help="Why, for the scratchpad.")] = "cancelled by the user",
    json_: JsonOpt = False,
) -> None:
    """Cancel this run's live SLURM jobs (scancel by the recorded job ids, never by user or name).

    The run stays resumable: re-run the phase with --resume (from the last checkpoint) or --restart.

    Example usage:

        selfimprove cancel --run-dir $RUN_DIR --arm iter_2 --why "wrong queue"
    """
    done = cancel(RunDir(run_dir), arm, why)
    if json_:
        print_json({"cancelled": done})
        return
    if not done:
        out.print("no live SLURM job of this run to cancel", markup=False)
    for d in done:
        out.print(f"{d['arm']}: scancel {d['job_id']} (was {d['state_before']})", markup=False)
