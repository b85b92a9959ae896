"""SKILL.md cannot drift from the code: every command, every flag the teacher uses and every
exit code of the Typer app is named in it, every `selfimprove` command it shows uses real
flags, and every file the teacher writes (and every field of failures.jsonl, every
overrides.toml key) is named in the skill. The rehearsal (test_skill_rehearsal.py) runs
its commands for real."""

from __future__ import annotations

import ast
import inspect
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from typer.main import get_command
from typer.testing import CliRunner

import selfimprove.phases.iterate as iterate_module
import selfimprove.phases.iteration_steps as steps_module
from selfimprove import errors
from selfimprove.cli import app
from selfimprove.errors import TeacherActionNeeded
from selfimprove.phases.arms import TEACHER_KEYS
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir
from selfimprove.skill import SKILL_FILES, SKILL_NAME


REPO = Path(__file__).resolve().parents[1]
SKILL = (REPO / "SKILL.md").read_text(encoding="utf-8")
REFERENCE = (REPO / "SKILL-reference.md").read_text(encoding="utf-8")
SRC = REPO / "src" / "selfimprove"

# The commands the agent runs during a run; their every flag must be in SKILL.md itself.
TEACHER_COMMANDS = ("bootstrap", "introspect", "baseline", "iterate", "compare", "finalize", "status", "note")
MAX_LINES = 500


def walk(cmd, path: tuple[str, ...] = ()):
    """(path, command) for the root and every subcommand, depth first (duck-typed: typer may vendor click)."""
    yield path, cmd
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from walk(sub, (*path, name))


ROOT = get_command(app)
COMMANDS = {path: cmd for path, cmd in walk(ROOT) if path}


def flag_names(cmd, *, all_forms: bool = False) -> list[str]:
    """The option names a user types. Of an on/off pair only the form that changes the default
    counts (--no-control, not typer's automatic --no-resume), unless `all_forms`."""
    names = []
    for p in cmd.params:
        if p.param_type_name == "option":
            names += p.opts
            if p.secondary_opts and (all_forms or p.default is True):
                names += p.secondary_opts
    return names


def mentions(text: str, token: str) -> bool:
    """`token` occurs as a whole flag/word (so --seeds does not count for --seed)."""
    return re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", text) is not None


def test_every_command_is_named():
    """Each command path of the Typer app (e.g. `student profile`, `skill install`) is in SKILL.md."""
    assert {("bootstrap",), ("iterate",), ("skill", "install")} <= set(COMMANDS), "the walk of the Typer app is broken"
    missing = [" ".join(p) for p in COMMANDS if not mentions(SKILL, " ".join(p))]
    missing += [f"selfimprove {p[0]}" for p in COMMANDS if len(p) == 1 and f"selfimprove {p[0]}" not in SKILL]
    assert not missing, f"SKILL.md does not name: {missing}"


@pytest.mark.parametrize("name", TEACHER_COMMANDS)
def test_every_teacher_flag_is_in_the_skill(name):
    """Every flag of the commands the teacher runs appears in SKILL.md (and in the reference's flag table)."""
    cmd = COMMANDS[(name,)]
    flags = flag_names(cmd)
    assert flags, f"{name} has no flags? the walk is broken"
    assert not [f for f in flags if not mentions(SKILL, f)], f"SKILL.md lacks {name} flags"
    row = next(line for line in REFERENCE.splitlines() if line.startswith(f"| `{name}"))
    assert not [f for f in flags if not mentions(row, f)], f"SKILL-reference.md flag table lacks {name} flags"


def shown_commands(text: str) -> list[list[str]]:
    """Every `selfimprove ...` command line in fenced blocks and inline code, as argv (variables kept)."""
    pieces = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S) + re.findall(r"`([^`\n]*selfimprove [^`\n]*)`", text)
    out = []
    for piece in pieces:
        for line in piece.replace("\\\n", " ").splitlines():
            m = re.search(r"selfimprove ([a-z].*)", line.split(" #")[0])
            if m and not line.lstrip().startswith("/"):
                out.append(shlex.split(m.group(1).rstrip(")").replace("$(", ""), posix=True))
    return out


def test_commands_shown_use_real_flags():
    """A `--flag` in any `selfimprove ...` command shown by SKILL.md or the reference exists on that command."""
    bad, checked = [], 0
    for argv in shown_commands(SKILL) + shown_commands(REFERENCE):
        path: tuple[str, ...] = ()
        while argv and (*path, argv[0]) in COMMANDS:
            path, argv = (*path, argv[0]), argv[1:]
        if not path:
            continue
        known = set(flag_names(COMMANDS[path], all_forms=True))
        for word in argv:
            flag = word.split("=", 1)[0]
            if flag.startswith("--") and flag not in known:
                bad.append(f"selfimprove {' '.join(path)} {flag}")
        checked += 1
    assert checked >= 10, "the command scan found too little; is the fence syntax still ```bash?"
    assert not bad, f"flags shown in the skill that the CLI does not have: {bad}"


def code_exit_codes() -> set[int]:
    """0, the CLI's usage error for an unknown flag, every SelfImproveError subclass's exit_code,
    and every literal typer.Exit(N) in the command modules."""
    import pkgutil
    import importlib

    import selfimprove

    for mod in pkgutil.walk_packages(selfimprove.__path__, "selfimprove."):
        if not mod.name.startswith("selfimprove.rl") and not mod.name.endswith("__main__"):  # the engine is its own program
            importlib.import_module(mod.name)
    codes = {0, CliRunner().invoke(app, ["bootstrap", "x", "--no-such-flag"]).exit_code}
    todo = [errors.SelfImproveError]
    while todo:
        cls = todo.pop()
        codes.add(cls.exit_code)
        todo.extend(cls.__subclasses__())
    for path in [*SRC.glob("commands/*.py"), SRC / "cli.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Exit" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                codes.add(node.args[0].value)
    return codes


def test_exit_code_table_matches_the_code():
    """SKILL.md's exit-code table lists exactly the codes the CLI can return."""
    table = {int(m) for m in re.findall(r"^\| (\d+) \|", SKILL, flags=re.M)}
    assert table == code_exit_codes()


def test_teacher_files_are_named(run: RunDir):  # noqa: F811
    """The files the teacher stop asks for (and whose skeletons it writes), the optional ones the
    tool reads, every failures.jsonl field and every overrides.toml key are named in the skill."""
    with pytest.raises(TeacherActionNeeded) as stop:
        iterate(run, quiet=True)
    asked = set(re.findall(r"iter_1/([\w.]+\.\w+)", str(stop.value)))
    skeletons = set(json.loads((run.iter(1).dir / "skeletons.json").read_text()))
    assert asked == skeletons == {"weakness_report.md", "gen_dataset.py"}
    # Optional teacher files: the names the tool reads them under.
    assert '"overrides.toml"' in inspect.getsource(iterate_module)
    assert '"rewards.py"' in inspect.getsource(steps_module)
    section = SKILL.split("## Files you write", 1)[1].split("\n## ", 1)[0]
    for name in (*sorted(skeletons), "overrides.toml", "rewards.py", "scratchpad.md"):
        assert mentions(section, name), f"'Files you write' does not name {name}"
    fields = {k for line in (run.iter(1).dir / "failures.jsonl").read_text().splitlines() for k in json.loads(line)}
    assert fields and not [f for f in fields if f"`{f}`" not in REFERENCE], "SKILL-reference.md lacks failures.jsonl fields"
    assert not [k for k in TEACHER_KEYS if f"`{k}`" not in SKILL], "SKILL.md lacks overrides.toml keys"


def test_front_matter_arguments_and_size():
    """The front matter names the slash command and its argument hint; the body reads $ARGUMENTS;
    SKILL.md stays readable (<= 500 lines) and names every other skill file."""
    head = yaml.safe_load(SKILL.split("---", 2)[1])
    assert head["name"] == SKILL_NAME
    assert head["argument-hint"].startswith("<dataset>") and head["description"]
    assert "$ARGUMENTS" in SKILL
    assert len(SKILL.splitlines()) <= MAX_LINES
    for name in SKILL_FILES[1:]:
        assert f"]({name})" in SKILL, f"SKILL.md does not link {name}"
    links = set(re.findall(r"\]\(([\w.-]+\.md)\)", SKILL))
    assert links <= set(SKILL_FILES), f"SKILL.md links files the install does not ship: {links - set(SKILL_FILES)}"
