"""`selfimprove run`: the whole loop, unattended."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from ..errors import Phase4Incomplete
from ..phases.finalize import incomplete_message
from ..phases.run import run
from ..report.table import recommendation_line, summary_renderable
from ..teacher import load_teacher
from ..ui import out
from ._common import JsonOpt, cli_errors, print_json
from .bootstrap import options_from_params


@cli_errors
def command(
    ctx: typer.Context,
    dataset: Annotated[Optional[str], typer.Argument(help="Dataset to start a new run on (omit with --run-dir).")] = None,
    teacher: Annotated[str, typer.Option(help="MODULE:OBJECT or path/to/file.py:OBJECT with write(ctx) (see selfimprove.teacher).")] = "examples/arith_teacher.py:ArithTeacher",
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", envvar="SELFIMPROVE_RUN_DIR", help="Resume this run dir instead of bootstrapping a new one.")] = None,
    control: Annotated[bool, typer.Option("--control/--no-control", help="Phase 4 Run C, the equal-compute control.")] = True,
    seeds: Annotated[Optional[int], typer.Option(min=1, help="Phase 4 training seeds for Run A, Run C and the best iteration (see `selfimprove compare --help`); recorded in run.json. Default: run.json's value, 1 for a new run.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Run the whole loop unattended: bootstrap, introspect, baseline, iterate, compare, finalize.

    Every `selfimprove bootstrap` flag is accepted after the dataset (see
    `selfimprove bootstrap --help`). The teacher is called at each teacher stop of
    `iterate` (and again with the failure list when a gate fails). Re-run with
    --run-dir to resume a crashed or killed run wherever it was.

    --budget caps Phase 3 only: its clock starts at the first iterate, after the
    baseline, so setup, introspection and iter_0 are never charged to it, and
    the controls and summary run after it on their own time.

    Example usage:

        selfimprove run selfimprove-arith --model selfimprove/tiny-arith --budget 8m \\
            --batch-size 256 --teacher examples/arith_teacher.py:ArithTeacher
        selfimprove run --run-dir runs/selfimprove-arith-2026-11-29T150000Z
    """
    write = load_teacher(teacher)
    opts = None
    if run_dir is None:
        if not dataset:
            raise UsageError("give a dataset to start a run (e.g. selfimprove-arith), or --run-dir to resume one")
        boot = ctx.parent.command.get_command(ctx.parent, "bootstrap")  # one source of truth for the flags
        bctx = boot.make_context("bootstrap", [dataset, *ctx.args], parent=ctx.parent)
        opts = options_from_params(bctx.params)
    elif dataset or ctx.args:
        raise UsageError("--run-dir resumes a run with its recorded settings; drop the dataset and bootstrap flags")
    result = run(opts, run_dir, write, control=control, seeds=seeds, quiet=json_)
    incomplete = incomplete_message(result)
    if json_:
        print_json(result)
        if incomplete:
            raise Phase4Incomplete(incomplete)
        return
    out.print(summary_renderable(result))
    timings = ", ".join(f"{k} {v:.0f}s" for k, v in result["timings_s"].items())
    out.print(f"run dir: {result['run_dir']} | status {result['status']} ({result['reason']}) | {timings}", markup=False)
    if line := recommendation_line(result):
        out.print(line, markup=False)
    if incomplete:  # a dead Phase 4 arm: the summary above is partial (exit 6)
        raise Phase4Incomplete(incomplete)
