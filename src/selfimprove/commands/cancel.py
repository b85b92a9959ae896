"""`selfimprove cancel`: stop this run's own training jobs, SLURM and local (phases/cancel.py says which count)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import RunDirError
from ..phases.cancel import cancel
from ..rundir import RunDir
from ..ui import out
from ._common import JsonOpt, RunDirOpt, cli_errors, print_json


@cli_errors
def command(
    run_dir: RunDirOpt,
    arm: Annotated[Optional[str], typer.Option(help="Only this arm's job (its dir name, e.g. iter_2 or run_a_best_from_iter0, or run_a). Default: every live job of the run.")] = None,
    why: Annotated[str, typer.Option(help="Why, for the scratchpad (of a run not yet finalized).")] = "cancelled by the user",
    json_: JsonOpt = False,
) -> None:
    """Stop this run's live training jobs: SLURM ones (scancel by the recorded id, only while the scheduler
    still gives it this run's job name) and local ones (only a process whose pid, group, start time and
    token match its job.json). Never by user, pattern or a record that is not provably this run's.

    The run stays resumable: re-run the phase (or `selfimprove run --run-dir`) with --resume (from the
    last checkpoint) or --restart. Exit 1 when a job.json does not read, 75 when the scheduler does not answer.

    Example usage:

        selfimprove cancel --run-dir $RUN_DIR --arm iter_2 --why "wrong queue"
    """
    result = cancel(RunDir(run_dir), arm, why)
    if json_:
        print_json(result)
    else:
        for line in result["notes"]:
            out.print(line, markup=False, highlight=False)
        if not result["cancelled"]:
            out.print("no live job of this run to cancel", markup=False)
        for d in result["cancelled"]:
            what = f"scancel {d['job_id']}" if "job_id" in d else f"stopped pid {d['pid']} and its process group"
            out.print(f"{d['arm']}: {what} (was {d['state_before']})", markup=False)
    if result["damaged"]:  # after the others were cancelled: one line naming the file and what to do, exit 1
        more = len(result["damaged"]) - 1
        raise RunDirError(result["damaged"][0] + (f" (and {more} more job.json that do not read: `selfimprove status`"
                                                  " lists them)" if more else ""))
