"""`selfimprove note`: record what the agent must log in run.json."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import PhaseOrderError, UsageError
from ..rundir import RunDir
from ..ui import out
from ._common import RunDirOpt, cli_errors


@cli_errors
def command(
    run_dir: RunDirOpt,
    compact_failed: Annotated[Optional[str], typer.Option(help="The /compact failure message to log (the run goes on).")] = None,
) -> None:
    """Log an agent-side event in run.json, e.g. a failed /compact between iterations.

    Example usage:

        selfimprove note --run-dir $RUN_DIR --compact-failed "timed out"
    """
    if not compact_failed:
        raise UsageError("nothing to note; pass --compact-failed \"message\"")
    try:  # bytes that are not UTF-8 reach Python as surrogates, which run.json (UTF-8) cannot hold
        compact_failed.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UsageError(f"--compact-failed: not UTF-8 text (character {e.start + 1} of the message); "
                         "pass the message as UTF-8") from None
    rd = RunDir(run_dir).require()
    _refuse_closed(rd, rd.read_run())  # before the lock: a refusal leaves the run dir untouched
    with rd.lock("note"):
        cfg = rd.read_run()
        _refuse_closed(rd, cfg)
        cfg.compact_warnings = [*cfg.compact_warnings, compact_failed]
        rd.write_run(cfg)
    out.print(f"logged to {rd.run_json} compact_warnings ({len(cfg.compact_warnings)} so far)", markup=False)


def _refuse_closed(rd: RunDir, cfg) -> None:
    """A closed run's records are final (issue 36): a /compact failure belongs to a run that goes on."""
    if cfg.finalized() or cfg.status == "aborted":
        raise PhaseOrderError(f"{rd.run_json}: the run is closed ({cfg.status}; it ended: {cfg.ended_as()}); "
                              "nothing logged: a /compact failure is noted only while the run goes on")
