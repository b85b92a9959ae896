"""Options shared by every command and the error edge of the CLI."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any, Callable

import typer

from rich.markup import escape

from ..errors import SelfImproveError, TeacherActionNeeded
from ..ui import console, out

RunDirOpt = Annotated[
    Path,
    typer.Option(
        "--run-dir",
        envvar="SELFIMPROVE_RUN_DIR",
        help="Run directory made by `selfimprove bootstrap` (env: SELFIMPROVE_RUN_DIR).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout instead of tables.")]


def cli_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn an expected SelfImproveError into one red line on stderr and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SelfImproveError as e:
            # Teacher stops are expected outcomes of `iterate`, not errors.
            label = "[yellow]stop:[/yellow]" if isinstance(e, TeacherActionNeeded) else "[red]error:[/red]"
            console.print(f"{label} {escape(str(e))}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            console.print("interrupted; re-run the same command to resume")
            raise typer.Exit(130) from None

    return wrapper


def print_json(obj: Any) -> None:
    out.print(json.dumps(obj, indent=2, default=str), markup=False, highlight=False)
