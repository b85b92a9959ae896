"""`selfimprove run` after the teacher's last failed attempt (issue 41, Why 8): the stop keeps the gate's exit
code (4) and every failing rule, and each command it names does what it says."""

from __future__ import annotations

import json
from pathlib import Path

from selfimprove.errors import SelfImproveError
from selfimprove.rundir import RunDir

from loop_helpers import TESTS, write_teacher_files

def stop_after_the_gates(monkeypatch) -> None:
    """The advice is followed up to the gates passing; packaging and training (minutes) are not what it is about."""
    def stop(*a, **k):
        raise SelfImproveError("test: stopped before packaging")
    monkeypatch.setattr("selfimprove.phases.iteration_steps.ensure_package", stop)


def gates_passed(it_dir: Path) -> bool:
    return json.loads((it_dir / "gate_report.json").read_text())["passed"] is True


TEACHER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from loop_helpers import write_teacher_files

class Teacher:
    def write(self, ctx):
        write_teacher_files(ctx.iter_dir, ("round_trip", "hard"))  # every attempt fails the same two rules
"""


def test_run_ends_with_the_gate_exit_code_every_rule_and_advice_that_works(run: RunDir, cli, tmp_path: Path,
                                                                          monkeypatch) -> None:
    monkeypatch.setattr("selfimprove.phases.run.MAX_TEACHER_ATTEMPTS", 1)  # one failed attempt is enough here
    teacher = tmp_path / "bad_teacher.py"
    teacher.write_text(TEACHER)
    res = cli("run", "--run-dir", run.root, "--teacher", f"{teacher}:Teacher")
    err = " ".join(res.stderr.split())
    assert res.exit_code == 4, res.stderr  # docs/reference/exit-codes.md: a gate failed
    assert "could not produce data that passes the gates in 1 attempts" in err
    gate = json.loads((run.iter(1).dir / "gate_report.json").read_text())
    failed = sorted({f["rule"] for f in gate["failures"]})
    assert len(failed) >= 2 and all(rule in err for rule in failed), (failed, err)  # the colon is followed by the rules
    assert f"re-run `selfimprove run --run-dir {run.root}`" in err
    assert f"`selfimprove iterate --run-dir {run.root}`" in err
    # the advice: fix gen_dataset.py yourself, then `selfimprove iterate --run-dir R` trains the iteration
    write_teacher_files(run.iter(1).dir)
    stop_after_the_gates(monkeypatch)
    res = cli("iterate", "--run-dir", run.root)
    assert "stopped before packaging" in res.stderr and gates_passed(run.iter(1).dir), res.stderr


def test_iterate_teacher_names_itself_not_run(run: RunDir, cli, tmp_path: Path) -> None:
    """`iterate --teacher` shares the loop with `run`: its lines name `iterate --teacher ...`, the command used."""
    teacher = tmp_path / "raising_teacher.py"
    teacher.write_text("class Teacher:\n    def write(self, ctx):\n        raise ValueError('<html>bad gateway</html>')\n")
    res = cli("iterate", "--run-dir", run.root, "--teacher", f"{teacher}:Teacher")
    err = " ".join(res.stderr.split())
    assert res.exit_code == 1 and f"re-run `selfimprove iterate --run-dir {run.root} --teacher {teacher}:Teacher`" in err, err
    assert "selfimprove run" not in err
    # the advice: fix the teacher and re-run that command; the fixed teacher is called (what it then writes
    # is the gates' business, followed in the test above)
    teacher.write_text("from selfimprove.errors import TeacherError\nclass Teacher:\n    def write(self, ctx):\n"
                       "        raise TeacherError('test: the fixed teacher was called for ' + ctx.iter_dir.name)\n")
    res = cli("iterate", "--run-dir", run.root, "--teacher", f"{teacher}:Teacher")
    assert "the fixed teacher was called for iter_1" in res.stderr, res.stderr
