"""`selfimprove report`: write the run's report page (one self-contained HTML file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from ..phases.finalize import report_table
from ..report.page import write_report
from ..rundir import RunDir
from ..ui import out
from ._common import RunDirOpt, cli_errors


@cli_errors
def command(
    run_dir: RunDirOpt,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="Where to write the page (default: report.html in the run dir).",
                                                     show_default=False)] = None,
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

    Example usage:

        selfimprove report --run-dir $RUN_DIR
        selfimprove report --run-dir $RUN_DIR --out /tmp/report.html
    """
    rd = RunDir(run_dir).require()
    if out_file is not None and not out_file.expanduser().resolve().parent.is_dir():
        raise UsageError(f"--out {out_file}: its directory {out_file.expanduser().resolve().parent} does not exist; "
                         "create it or name a file in an existing directory")
    path = write_report(rd, report_table(rd), out_file.expanduser() if out_file else None)
    out.print(f"report: {path}", markup=False, highlight=False)
