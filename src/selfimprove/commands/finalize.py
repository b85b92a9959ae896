"""`selfimprove finalize`: Phase 5 summary."""

from __future__ import annotations

from typing import Annotated

import typer

from ..phases.finalize import finalize
from ..report.table import summary_renderable
from ..rundir import RunDir
from ..ui import fmt_duration, out
from ._common import JsonOpt, RunDirOpt, cli_errors, print_json


@cli_errors
def command(
    run_dir: RunDirOpt,
    plot: Annotated[bool, typer.Option("--plot/--no-plot", help="Write eval_acc.png in the run dir.")] = True,
    wandb: Annotated[bool, typer.Option("--wandb/--no-wandb", help="Log arms to W&B when run.json names a project.")] = True,
    json_: JsonOpt = False,
) -> None:
    """Phase 5: close the run, print the table of arms with intervals and paired tests.

    Example usage:

        selfimprove finalize --run-dir $RUN_DIR
    """
    result = finalize(RunDir(run_dir), plot=plot, wandb=wandb)
    if json_:
        print_json(result)
        return
    out.print(summary_renderable(result))
    out.print(f"status {result['status']} ({result['reason']}); total {fmt_duration(result['total_duration_s'])}", markup=False)
    if result["recommended"]:
        rec = next(r for r in result["rows"] if r["arm"] == result["recommended"])
        out.print(f"recommended model: {rec['label']} (eval_acc {rec['eval_acc']:.3f} on n={rec['n_eval']}) -> {rec['checkpoint']}", markup=False)
    if result["plot"]:
        out.print(f"plot: {result['plot']}", markup=False)
    for n in result["notes"]:
        out.print(n, markup=False)
