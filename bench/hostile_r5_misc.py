"""Round 5 (issue 41), the misc area: a fixed teacher module regenerates, `run` says what the gate said
(exit 4), and the lesser items (recorded settings, `weaknesses --iter 99`, `--group-by` exiting, a note
that is not UTF-8, a hand-made iter_0001, the report's advice on an aborted run). Loaded by bench/hostile.py; select with `-k "r5 misc:"`.

Cases start from hostile.py's stop1 template (iter_0 trained by the fake engine, stopped at iter_1's
teacher stop). A case whose setup follows a piece of advice asserts what the advice promised before the
runner runs the last command."""

from __future__ import annotations

import json
from pathlib import Path

from hostile import case, cli, copy_run, edit_json

P = "r5 misc: "


def _teacher_module_generator(run: Path, tmp: Path, breaks: list[str]) -> Path:
    """iter_1's teacher files, with a generator that takes its BREAK list from the teacher's own module
    (as examples/minimal_teacher.py recommends) instead of its own text."""
    from loop_helpers import GENERATOR, write_teacher_files

    write_teacher_files(run / "iter_1")
    module = tmp / "teacher_mod" / "my_rows.py"
    module.parent.mkdir()
    module.write_text(f"BREAK = {breaks!r}\n")
    gen = GENERATOR.format(break_rules=[]).replace(
        "BREAK = []", f"sys.path.insert(0, {str(module.parent)!r})\nfrom my_rows import BREAK")
    (run / "iter_1" / "gen_dataset.py").write_text(gen)
    return module


@case(f"{P}iterate after the teacher's module is fixed regenerates (no stale rows)", bad=False)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    module = _teacher_module_generator(run, tmp, ["hard"])
    p = cli(["iterate", "--run-dir", str(run)], tmp)
    assert p.returncode == 4 and "hard" in p.stderr, p.stderr
    module.write_text("BREAK = []\n")  # the fix is in the module; gen_dataset.py's text is unchanged
    return ["iterate", "--run-dir", str(run)], run


TEACHER = """
import sys
sys.path.insert(0, {tests!r})
from loop_helpers import write_teacher_files

class Teacher:
    def write(self, ctx):
        write_teacher_files(ctx.iter_dir, ("round_trip",))
"""


@case(f"{P}run whose teacher never passes the gate: exit 4 with every rule", ("round_trip", "re-run"), code=4,
      may_change=True)
def _(tmp, t):
    from hostile import TESTS

    run = copy_run(t.stop1, tmp)
    teacher = tmp / "bad_teacher.py"
    teacher.write_text(TEACHER.format(tests=str(TESTS)))
    return ["run", "--run-dir", str(run), "--teacher", f"{teacher}:Teacher"], run


for _label, _settings in (("teacher_input_chars -5", {"teacher_input_chars": -5}),
                          ("teacher_input_chars 1", {"teacher_input_chars": 1}),
                          ("teacher_timeout 'abc'", {"teacher_timeout": "abc"}),
                          ("settings a list", [1, 2])):
    @case(f"{P}run: recorded {_label}", "teacher.settings", code=1)
    def _(tmp, t, settings=_settings):
        run = copy_run(t.stop1, tmp)
        edit_json(teacher={"spec": "llm:m", "settings": settings})(run / "run.json")
        return ["run", "--run-dir", str(run)], run


@case(f"{P}weaknesses --iter 99 does not say to wait for iter_98", "--source real", code=5)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    return ["weaknesses", "--run-dir", str(run), "--iter", "99"], run


@case(f"{P}weaknesses --group-by a function calling sys.exit(3)", "--group-by", code=1)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    f = tmp / "groups.py"
    f.write_text("import sys\ndef group(q):\n    sys.exit(3)\n")
    return ["weaknesses", "--run-dir", str(run), "--group-by", f"{f}:group"], run


@case(f"{P}note with bytes that are not UTF-8", "--compact-failed", code=2)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    return ["note", "--run-dir", str(run), "--compact-failed", b"timed out \xff".decode("utf-8", "surrogateescape")], run


@case(f"{P}a hand-made iter_0001 beside iter_1 is not iter_1 twice", bad=False, ok_codes=(0,))
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    (run / "iter_0001").mkdir()
    p = cli(["status", "--run-dir", str(run), "--json"], tmp)
    assert p.returncode == 0, p.stderr
    assert "iter_0001" not in p.stdout, p.stdout
    return ["weaknesses", "--run-dir", str(run)], run


@case(f"{P}report on an aborted run advises no phase command it refuses", bad=False)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    edit_json(status="aborted", end_ts=json.loads((run / "run.json").read_text())["start_ts"] + 60,
              reason="the env would not load")(run / "run.json")
    out = tmp / "page.html"
    p = cli(["report", "--run-dir", str(run), "--out", str(out)], tmp)
    assert p.returncode == 0, p.stderr
    page = out.read_text()
    assert "Not in this report yet" in page and "the run was aborted" in page, page[-2000:]
    assert not any(f"selfimprove {c} --run-dir" in page for c in ("introspect", "baseline", "iterate", "compare"))
    return ["status", "--run-dir", str(run)], run
