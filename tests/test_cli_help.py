"""`selfimprove --help` and every subcommand's `--help`: exit 0, a real description,
an example, and the key flags."""

from __future__ import annotations

import pytest

from selfimprove.cli import app

COMMANDS = [c.name for c in app.registered_commands]

KEY_FLAGS = {
    "bootstrap": ["--model", "--budget", "--hub-id", "--max-iters", "--batch-size", "--init-from", "--runs-dir",
                  "--env-args", "--env-path", "--engine", "--steps-per-run", "--rollouts-per-example",
                  "--eval-examples", "--allow-small-batch", "--json"],
    "introspect": ["--run-dir", "--env-path", "--timeout", "--json"],
    "status": ["--run-dir", "--json"],
}


def test_root_help_is_a_small_tutorial(cli):
    """The root help says what the tool is, shows an example and lists the commands."""
    res = cli("--help")
    assert res.exit_code == 0
    text = res.stdout
    assert "Teacher/student self-improvement" in text
    assert "selfimprove run selfimprove-arith" in text  # a worked example
    for name in COMMANDS:
        assert name in text


def test_no_args_shows_help(cli):
    """Running `selfimprove` alone prints the usage instead of failing silently."""
    res = cli()
    assert "Usage" in res.stdout + res.stderr


def test_phase_commands_are_registered():
    """Phases 0 and 1 and the status view exist."""
    assert {"bootstrap", "introspect", "status"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_subcommand_help(cli, name):
    """Each subcommand's --help exits 0, describes it, shows an example and its key flags."""
    res = cli(name, "--help")
    assert res.exit_code == 0, res.stderr
    text = res.stdout
    assert f"Usage: selfimprove {name}" in " ".join(text.split())
    assert "Example usage" in text
    for flag in KEY_FLAGS.get(name, []):
        assert flag in text, f"{name} --help does not mention {flag}"


def test_cli_starts_without_torch() -> None:
    """Importing the CLI loads neither torch nor transformers (they cost ~13 s of CPU per command), and
    neither does the built-in student registry it consults (bootstrap, `student build`), nor verifiers."""
    import subprocess
    import sys

    heavy = "('torch', 'transformers', 'verifiers', 'datasets')"
    probe = ("import sys, selfimprove.cli; from selfimprove.commands.student import rebuildable; "
             f"print(rebuildable(None)[0].id, sorted(m for m in {heavy} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "selfimprove/tiny-arith []"


def test_run_help_shows_the_llm_extra():
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "250"})
    assert "pip install 'selfimprove[llm]'" in res.stdout, res.stdout
