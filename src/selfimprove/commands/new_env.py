"""`selfimprove new-env`: write a working env package to start your own env from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..new_env import next_commands, write_env_package
from ..ui import out
from ._common import JsonOpt, cli_errors, print_json


@cli_errors
def command(
    name: Annotated[str, typer.Argument(help="The env's name: lowercase letters, digits, '-' or '_' (e.g. my-env); the module is the name with '_' for '-'.")],
    dir_: Annotated[Path, typer.Option("--dir", help="Where to write the package directory NAME/ (created if missing).")] = Path("."),
    json_: JsonOpt = False,
) -> None:
    """Write a working single-turn verifiers env package, NAME/, to copy and change.

    Its rows come from a seeded generator (four tasks named in info.task),
    its reward is 1.0 for the exact answer inside <answer></answer>, and it
    has train and eval splits. Prints the commands to install it, build its
    student and run the loop (docs/how-to/own-env-tutorial.md).

    Example usage:

        selfimprove new-env my-env
        selfimprove new-env my-env --dir ~/envs
    """
    target = write_env_package(name, dir_)
    steps = next_commands(name, target)
    if json_:
        print_json({"env_dir": str(target), "next": steps})
        return
    out.print(f"wrote {target} (pyproject.toml, {name.replace('-', '_')}/__init__.py)", markup=False)
    out.print("next:\n" + "\n".join(f"  {s}" for s in steps), markup=False)
