"""`selfimprove skill install|show|uninstall`: the agent skill behind /synthetic-self-improve-rl."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import skill
from ..errors import UsageError
from ..ui import out
from ._common import cli_errors

app = typer.Typer(
    no_args_is_help=True,
    help=f"""The agent skill /{skill.SKILL_NAME}, shipped inside the package.

Claude Code (and agents that follow the Agent Skills layout) read skills from
<project>/.claude/skills/<name>/SKILL.md or ~/.claude/skills/<name>/SKILL.md; a
skill there becomes the /<name> slash command. `install` puts the packaged
SKILL.md and the reference file it names there; `show` prints the packaged text.
""",
)

UserOpt = Annotated[bool, typer.Option("--user", help="Use ~/.claude/skills/ (honours $HOME) instead of a project.")]
ProjectOpt = Annotated[
    Optional[Path],
    typer.Option("--project", help="Project directory whose .claude/skills/ gets the skill (default: the current directory).",
                 show_default=False),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite or remove a locally edited copy.")]


def _base(user: bool, project: Optional[Path]) -> Path:
    if user and project is not None:
        raise UsageError("--user and --project: give one of them (default: --project .)")
    if user:
        return skill.user_base()
    base = (project or Path.cwd()).expanduser().resolve()
    if not base.is_dir():
        raise UsageError(f"--project {project}: not a directory; pass an existing project directory")
    return base


@app.command("install")
@cli_errors
def install(user: UserOpt = False, project: ProjectOpt = None, force: ForceOpt = False) -> None:
    """Install the skill as <base>/.claude/skills/synthetic-self-improve-rl/SKILL.md.

    Idempotent: an up-to-date copy is left alone and an untouched older copy is
    replaced; a locally edited copy is refused unless --force.

    Example usage:

        selfimprove skill install --project .
        selfimprove skill install --user
    """
    res = skill.install(_base(user, project), force=force)
    state = f"wrote {', '.join(res.written)}" if res.written else "already up to date"
    out.print(f"skill {skill.SKILL_NAME}: {state} in {res.target}", markup=False)
    out.print(f"invoke it in your coding agent: /{skill.SKILL_NAME} <dataset> [--model=ID] [--budget=10h] ... "
              "(start a new agent session if none lists it yet)", markup=False)


@app.command("show")
@cli_errors
def show(
    name: Annotated[str, typer.Argument(help=f"Which file: {' or '.join(skill.SKILL_FILES)}.")] = "SKILL.md",
) -> None:
    """Print the packaged skill text (what `install` writes).

    Example usage:

        selfimprove skill show
        selfimprove skill show SKILL-reference.md
    """
    typer.echo(skill.packaged_text(name), nl=False)  # verbatim: no rich markup, emoji or wrapping


@app.command("uninstall")
@cli_errors
def uninstall(user: UserOpt = False, project: ProjectOpt = None, force: ForceOpt = False) -> None:
    """Remove the installed skill (a locally edited copy only with --force).

    Example usage:

        selfimprove skill uninstall --project .
    """
    res = skill.uninstall(_base(user, project), force=force)
    if res.written:
        out.print(f"removed {', '.join(res.written)} from {res.target}", markup=False)
    else:
        out.print(f"skill {skill.SKILL_NAME}: not installed in {res.target}; nothing to remove", markup=False)
