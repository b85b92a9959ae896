"""Every command's --help renders its source's help strings whole (issue 35): typer reads help as
rich markup, which took a bracketed word such as [llm] for a tag and printed
"pip install selfimprove with )". commands/_help.py escapes the help while it renders."""

from __future__ import annotations

import re

import click
import pytest
import typer.main
from typer.testing import CliRunner

from selfimprove.cli import app

BRACKETED = re.compile(r"\[[^\[\]\s]+\]")  # a bracketed word: [llm], [local], [default]


def commands() -> list[tuple[list[str], click.Command]]:
    """(argv to reach it, the click command) for the root, every command and every sub-app's command."""
    root = typer.main.get_command(app)
    out, todo = [], [([], root)]
    while todo:
        path, cmd = todo.pop(0)
        out.append((path, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():
            todo.append(([*path, name], sub))
    return out


def help_strings(cmd: click.Command) -> list[str]:
    """The source's help strings a --help shows: the command's own, its parameters', its subcommands'."""
    texts = [cmd.help or "", cmd.epilog or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    texts += [sub.short_help or sub.help or "" for sub in getattr(cmd, "commands", {}).values()]
    return [t for t in texts if t]


def flat(text: str) -> str:
    """The rendered help without whitespace and panel borders, so a word wrapped across lines reads whole."""
    return re.sub(r"[\s│╭╮╰╯─]", "", text)


CASES = [(path, cmd) for path, cmd in commands() if any(BRACKETED.search(t) for t in help_strings(cmd))]


def test_the_source_has_bracketed_words_to_check() -> None:
    """The test below checks something: `run --teacher`'s help names the llm extra as selfimprove[llm]."""
    names = {" ".join(path) for path, _ in CASES}
    assert "run" in names
    run = dict((" ".join(p), c) for p, c in CASES)["run"]
    assert any("[llm]" in t for t in help_strings(run))


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("path,cmd", CASES, ids=[" ".join(p) or "root" for p, _ in CASES])
def test_help_renders_each_bracketed_word(path: list[str], cmd: click.Command, columns: int) -> None:
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns), "TERMINAL_WIDTH": None})
    assert res.exit_code == 0, res.output
    rendered = flat(res.output)
    wanted = sorted({w for t in help_strings(cmd) for w in BRACKETED.findall(t)})
    lost = [w for w in wanted if w not in rendered]
    assert not lost, f"`selfimprove {' '.join(path)} --help` at {columns} columns lost {lost}"
    if columns == 80:
        assert max(len(line) for line in res.output.splitlines()) <= 80


def test_the_generated_cli_page_keeps_each_bracketed_word() -> None:
    """docs/reference/cli.md, made from the same help strings through typer's rich rendering, keeps them too."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "gen_reference.py"
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    page = flat(gen.cli_markdown())
    wanted = sorted({w for _, cmd in CASES for t in help_strings(cmd) for w in BRACKETED.findall(t)})
    assert wanted and not [w for w in wanted if w not in page]
