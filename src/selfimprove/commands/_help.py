"""Help strings are plain text: every `--help` shows them whole.

Typer renders help with rich markup when rich is installed, so a bracketed word in a help
string is read as a markup tag and vanishes ("pip install 'selfimprove[llm]'" prints as
"pip install 'selfimprove'"). Turning markup off (rich_markup_mode=None) would hand the
help to click's formatter, which rewraps the indented example lines into one. So the
commands keep typer's rich layout and escape their help strings (rich.markup.escape)
while the help is rendered, and put them back after: nothing persistent is changed, and a
command added later gets the same treatment through `plain_help(app)` in cli.py.

Below NARROW columns typer's options table gives the description a column of ~19 characters
and cuts long flag names ("--teacher-input-…"). There each option is stacked instead: its flag
names and type on a line of their own, the description indented below it at the full width.
Example lines are kept short in the source (tests/test_help_text.py holds them to 76 characters),
so no example command wraps mid-command at 80 columns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click
import typer
import typer.rich_utils as rich_utils
from rich.console import Group
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

_HELP_FIELDS = ("help", "short_help", "epilog")

# Below this width the options table squeezes flag names; at 100 its description column holds ~35 characters.
NARROW = 100
_TABLE_PANEL = rich_utils._print_options_panel  # typer's own renderer, used at NARROW columns and wider


def _stacked_options_panel(*, name, params, ctx, markup_mode, console) -> None:
    """typer's options panel, one option per block (flags + type, then the description below)."""
    if console.width >= NARROW or not params:
        return _TABLE_PANEL(name=name, params=params, ctx=ctx, markup_mode=markup_mode, console=console)
    blocks = []
    for param in params:
        names = list(param.opts) + list(param.secondary_opts)
        if isinstance(param, click.Argument):
            names = [getattr(param, "display_name_raw", None) or param.human_readable_name]
        head = Text(overflow="fold")  # fold, never ellipsis: a flag name is shown whole however narrow
        if param.required:
            head.append("* ", style=rich_utils.STYLE_REQUIRED_SHORT)
        head.append(", ".join(names), style="bold cyan")
        type_str = param.display_type_rich(ctx=ctx) if hasattr(param, "display_type_rich") else None
        if type_str:
            head.append(f"  {type_str}", style=rich_utils.STYLE_TYPES)
        body = rich_utils._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode)
        blocks += [head, Padding(body, (0, 0, 0, 4))]
    console.print(Panel(Group(*blocks), border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER, title=name,
                        title_align=rich_utils.ALIGN_OPTIONS_PANEL))


@contextlib.contextmanager
def _narrow_layout() -> Iterator[None]:
    """typer's rich help with options stacked below NARROW columns (restored after the render)."""
    rich_utils._print_options_panel = _stacked_options_panel
    try:
        yield
    finally:
        rich_utils._print_options_panel = _TABLE_PANEL


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
        with _escaped(self, []), _narrow_layout():
            return super().format_help(ctx, formatter)


class PlainHelpGroup(TyperGroup):
    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.rich_markup_mode != "rich":
            return super().format_help(ctx, formatter)
        with _escaped(self, list(self.commands.values())), _narrow_layout():
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
