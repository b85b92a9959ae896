"""Help strings are plain text: every `--help` shows them whole.

Typer renders help with rich markup when rich is installed, so a bracketed word in a help
string is read as a markup tag and vanishes ("pip install 'selfimprove[llm]'" prints as
"pip install 'selfimprove'"). Turning markup off (rich_markup_mode=None) would hand the
help to click's formatter, which rewraps the indented example lines into one. So the
commands keep typer's rich layout and escape their help strings (rich.markup.escape)
while the help is rendered, and put them back after: nothing persistent is changed, and a
command added later gets the same treatment through `plain_help(app)` in cli.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click
import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

_HELP_FIELDS = ("help", "short_help", "epilog")


@contextlib.contextmanager
def _escaped(command: click.Command, listed: list[click.Command]) -> Iterator[None]:
    """`command`'s help strings (its own, its parameters', and the listed subcommands') escaped for rich markup."""
    fields: list[tuple[Any, str]] = [(command, f) for f in _HELP_FIELDS] + [(p, "help") for p in command.params]
    fields += [(c, f) for c in listed for f in ("help", "short_help")]
    saved = []
    for obj, attr in fields:
        value = getattr(obj, attr, None)
        if isinstance(value, str):
            saved.append((obj, attr, value))
            setattr(obj, attr, escape(value))
    try:
        yield
    finally:
        for obj, attr, value in reversed(saved):
            setattr(obj, attr, value)


@contextlib.contextmanager
def escaped_tree(command: click.Command) -> Iterator[None]:
    """Every help string of `command` and all its subcommands escaped at once, for a renderer that walks
    the tree itself (docs/gen_reference.py's CLI page, through typer's own rich rendering)."""
    with contextlib.ExitStack() as stack:
        todo = [command]
        while todo:
            cmd = todo.pop()
            stack.enter_context(_escaped(cmd, []))
            todo.extend(getattr(cmd, "commands", {}).values())
        yield


class PlainHelpCommand(TyperCommand):
    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.rich_markup_mode != "rich":
            return super().format_help(ctx, formatter)
        with _escaped(self, []):
            return super().format_help(ctx, formatter)


class PlainHelpGroup(TyperGroup):
    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.rich_markup_mode != "rich":
            return super().format_help(ctx, formatter)
        with _escaped(self, list(self.commands.values())):
            return super().format_help(ctx, formatter)


def _default(cls: Any, default: type) -> bool:
    """No class chosen: None, typer's placeholder for "not given", or typer's own class."""
    return cls is None or isinstance(cls, DefaultPlaceholder) or cls is default


def plain_help(app: typer.Typer) -> typer.Typer:
    """Give every command and sub-app of `app` plain-text help (unless one chose its own class)."""
    if _default(app.info.cls, TyperGroup):
        app.info.cls = PlainHelpGroup
    for command in app.registered_commands:
        if _default(command.cls, TyperCommand):
            command.cls = PlainHelpCommand
    for group in app.registered_groups:
        if _default(group.cls, TyperGroup):
            group.cls = PlainHelpGroup
        if group.typer_instance is not None:
            plain_help(group.typer_instance)
    return app
