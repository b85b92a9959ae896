"""--help at 80 and 200 columns (issue 43): no flag name is cut, and no example command wraps mid-command.

At 80 columns typer's options table left the description ~19 characters and cut flag names
("--teacher-base-u…"); commands/_help.py stacks the options below NARROW columns instead.
Example lines are held short in the source, so each renders on one line of its own.
"""

from __future__ import annotations

import re

import click
import pytest
from typer.testing import CliRunner

from selfimprove.cli import app
from selfimprove.commands._help import NARROW
from test_help_text import commands  # the same walk over every command and sub-app

EXAMPLE_MAX = 76  # an example line, with its 4-space indent: rich adds one column of padding at 80


def example_lines(cmd: click.Command) -> list[str]:
    """The indented lines of a command's help (its examples), as written in the source."""
    text = "\n".join(t for t in (cmd.help or "", cmd.epilog or "") if t)
    return [line for line in text.splitlines() if line.startswith("    ") and line.strip()]


def render(path: list[str], columns: int) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns), "TERMINAL_WIDTH": None})
    assert res.exit_code == 0, res.output
    return res.output


CASES = commands()
IDS = [" ".join(p) or "root" for p, _ in CASES]


def test_the_commands_have_examples_to_check() -> None:
    assert sum(bool(example_lines(cmd)) for _, cmd in CASES) >= 10
    assert NARROW > 80  # 80 columns is stacked


@pytest.mark.parametrize("path,cmd", CASES, ids=IDS)
def test_example_lines_fit_80_columns_in_the_source(path, cmd) -> None:
    long = [line for line in example_lines(cmd) if len(line.rstrip()) > EXAMPLE_MAX]
    assert not long, f"`selfimprove {' '.join(path)} --help`: example lines over {EXAMPLE_MAX} chars: {long}"


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("path,cmd", CASES, ids=IDS)
def test_no_flag_name_is_cut_and_no_example_wraps(path, cmd, columns) -> None:
    out = render(path, columns)
    lines = [re.sub(r"^[│\s]+|[│\s]+$", "", line) for line in out.splitlines()]
    for param in cmd.params:
        for opt in [*param.opts, *param.secondary_opts]:
            if not opt.startswith("--"):
                continue
            assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", out), (
                f"`selfimprove {' '.join(path)} --help` at {columns} columns does not show {opt} whole")
    cut = [line for line in lines if re.search(r"--[\w-]*…", line)]
    assert not cut, f"flag names cut at {columns} columns: {cut}"
    for example in example_lines(cmd):
        assert example.strip() in lines, (
            f"`selfimprove {' '.join(path)} --help` at {columns} columns wrapped the example {example.strip()!r}")
    if columns == 80:
        assert max(len(line) for line in out.splitlines()) <= 80


def test_the_top_level_example_is_the_one_line_run() -> None:
    out = render([], 80)
    first = next(line.strip() for line in out.splitlines() if line.strip().startswith(("selfimprove ", "RUN_DIR=")))
    assert first == "selfimprove run selfimprove-arith --model selfimprove/tiny-arith"


def test_the_cli_reference_page_has_no_literal_html_entities() -> None:
    """docs/reference/cli.md: code blocks and quotes read as the terminal shows them (issue 43)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs/reference/cli.md").read_text(encoding="utf-8")
    assert "&#x27;" not in text and "&quot;" not in text
    code = [line for line in text.splitlines() if line.startswith("    ")]
    assert code and not [line for line in code if re.search(r"&(lt|gt|amp|#x?\w+);", line)]
