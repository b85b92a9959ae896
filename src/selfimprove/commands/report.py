"""`selfimprove report`: write the run's report page (one self-contained HTML file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..errors import RunDirError
from ..phases.finalize import report_table
from ..report.page import write_report
from ..report.target import checked_target
from ..rundir import RunDir
from ..ui import console, out, terminal_safe
from ._common import RunDirOpt, cli_errors


def table_or_error(rd: RunDir) -> dict[str, Any] | None:
    """`phases.finalize.report_table`, or {"error": line} when a record it rests on fails its model
    (a damaged hub_env.json): the page is then written without the table, saying why."""
    try:
        return report_table(rd)
    except RunDirError as e:
        return {"error": str(e)}


@cli_errors
def command(
    run_dir: RunDirOpt,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="Where to write the page (default: report.html in the run dir). "
                                                     "An existing file is replaced only when it is a page selfimprove wrote.",
                                                     show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file that is not a page selfimprove "
                                        "wrote (never a directory, link, device or a file in a run dir).")] = False,
) -> None:
    """Write the run's report page: one HTML file that opens offline in any browser.

    It shows the verdict and the recommended checkpoint, the summary table
    (intervals, n, split, seeds) with its tests, each arm's learning curve
    (train reward per step) with its eval point, the weakness groups' solve
    rates, each iteration's buckets, gates, refused teacher replies and
    tokens, and the phases' timeline. It works on a run at any stage and
    says what is missing. Read-only on the run (it writes only the page);
    it reads no eval rows, only their numeric aggregates. `finalize` writes
    the same page.

    --out refuses an existing file that is not a page selfimprove wrote
    (--force replaces it), anything that is not a regular file, and any
    file of a run dir but its report.html; a replaced page keeps its mode.

    Example usage:

        selfimprove report --run-dir $RUN_DIR
        selfimprove report --run-dir $RUN_DIR --out /tmp/report.html
    """
    rd = RunDir(run_dir).require()
    # The run's own report.html is the tool's file (replaced whatever it holds); it is still checked to
    # be a regular file, so a directory or a planted link there is refused in one line.
    path, mode = checked_target(rd, out_file, force=force)
    problems: list[str] = []
    path = write_report(rd, table_or_error(rd), path, mode=mode, problems=problems)
    for line in problems:  # a record that failed its model: the page shows the line in that part's place
        console.print(f"warning: {terminal_safe(line)}", markup=False, highlight=False)
    out.print(f"report: {path}", markup=False, highlight=False)
