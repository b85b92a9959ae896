"""`selfimprove finalize`: Phase 5 summary."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import Phase4Incomplete
from ..phases.finalize import finalize, incomplete_message
from ..report.table import recommendation_line, summary_renderable
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
    """Phase 5: close the run, print the verdict, the table of arms with intervals and tests.

    First the verdict: "targeted data beat (or did not beat) equal compute on
    real data", Run A vs Run C under the test in force with its figures, and
    which model to use and why. Then per arm: eval accuracy (mean ± sd over
    training seeds when compare ran with --seeds N), its training seeds, a 95%
    interval and n eval examples; the seed-aware t-tests (Welch between arms,
    one-sample against iter_0), the paired McNemar tests per checkpoint, and
    the recommendation: an arm that beats iter_0 at p < 0.05 under the
    seed-aware test, or with one seed a provisional pick (seed variance
    unmeasured); Run C when the targeted data did not beat it and it beats
    iter_0 itself.

    A Phase 4 arm without a result (its job died, or compare never ran it) is
    named with the reason and the fix (`compare --restart`); the summary is
    then partial, the run stays open and the exit code is 6.

    Example usage:

        selfimprove finalize --run-dir $RUN_DIR
    """
    result = finalize(RunDir(run_dir), plot=plot, wandb=wandb)
    incomplete = incomplete_message(result)
    if json_:
        print_json(result)
        if incomplete:
            raise Phase4Incomplete(incomplete)
        return
    out.print(summary_renderable(result))
    total = result["total_duration_s"]  # None while the run stays open (an incomplete summary)
    total_text = f"total {fmt_duration(total)}" if total is not None else "run still open: summary incomplete"
    out.print(f"status {result['status']} (ended: {result['end_reason']}; {result['reason']}); {total_text}", markup=False)
    if line := recommendation_line(result):
        out.print(line, markup=False)
    if result["plot"]:
        out.print(f"plot: {result['plot']}", markup=False)
    if result.get("report"):
        out.print(f"report: {result['report']}", markup=False, highlight=False)
    for n in result["notes"]:
        out.print(n, markup=False)
    if incomplete:  # after the table, so the last line says the table is not the final one
        raise Phase4Incomplete(incomplete)
