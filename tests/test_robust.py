"""Bad inputs and damaged run dirs (issue 13, items 5 and 6): each ends in one line that
names the file or flag and the fix, a non-zero exit and no traceback, and what can be
repaired is repaired without retraining. Fast: the fake engine (tests/fakes/fake_rl.py),
no real training. The cases that need a trained iteration (a deleted scratchpad.md, a
copied run dir) are in tests/test_iterate.py, which has a baseline run to copy."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from selfimprove.errors import GateFailed, TeacherActionNeeded, TeacherError
from selfimprove.engines import generator as generator_mod
from selfimprove.phases import iteration_steps
from selfimprove.models import RunConfig
from selfimprove.phases.context import RunContext
from selfimprove.rundir import ArmDir, RunDir

from loop_helpers import write_teacher_files

REPO = Path(__file__).resolve().parents[1]


def one_line_error(res) -> str:
    """The error a command printed: its last stderr line (after any progress lines), no traceback."""
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr
    assert res.exit_code != 0
    err = res.stderr.strip().splitlines()[-1]
    assert err.startswith(("error:", "stop:")), res.stderr
    return err


# ---------------------------------------------------------------- damaged files


def test_non_utf8_run_json_is_one_line(new_run, cli) -> None:
    run_json = new_run() / "run.json"
    run_json.write_bytes(b"\xff\xfe" + run_json.read_bytes())
    err = one_line_error(cli("status", "--run-dir", run_json.parent))
    assert "run.json: not UTF-8" in err and "restore" in err


def test_non_utf8_weakness_report_is_a_gate_rule(tmp_path: Path) -> None:
    it = ArmDir(tmp_path, "iter_1")
    it.dir.mkdir()
    write_teacher_files(it.dir, notes=False)
    report = it.dir / "weakness_report.md"
    report.write_bytes(report.read_bytes() + b"\n\xff\xfe broken\n")
    with pytest.raises(GateFailed, match="weakness_report.md: not UTF-8 text"):
        iteration_steps.report_gate(RunDir(tmp_path), it, 1)


def test_non_utf8_scratchpad_at_the_report_gate_writes_nothing(tmp_path: Path) -> None:
    """Found by bench/hostile.py: a non-UTF-8 scratchpad.md passed the report gate's lenient read,
    report_gate.json was written, and the run failed later. Now the gate refuses it first."""
    from selfimprove.errors import RunDirError

    it = ArmDir(tmp_path, "iter_1")
    it.dir.mkdir()
    write_teacher_files(it.dir, notes=False)
    (tmp_path / "scratchpad.md").write_bytes(b"# run\n\xff\xfe broken\n")
    with pytest.raises(RunDirError, match="scratchpad.md: not UTF-8"):
        iteration_steps.report_gate(RunDir(tmp_path), it, 1)
    assert not (it.dir / "report_gate.json").exists()


def test_step_records_of_the_wrong_top_level_type_mean_step_not_done(tmp_path: Path) -> None:
    """A step record that is a JSON list (not an object) counts as "step not done": redone, no traceback."""
    it = ArmDir(tmp_path, "iter_1")
    it.dir.mkdir()
    write_teacher_files(it.dir, notes=False)
    (it.dir / "dataset.jsonl").write_text("{}\n")
    for name in ("skeletons.json", "generate.json", "gate_report.json", "package.json"):
        (it.dir / name).write_text("[1, 2]\n")
    assert not iteration_steps.teacher_files_untouched(it)
    assert not iteration_steps.generated_is_current(it)
    assert not iteration_steps.dataset_gate_is_current(it)
    assert not iteration_steps.package_is_current(it)


def test_metrics_json_of_the_wrong_top_level_type_is_one_line(new_run, cli) -> None:
    run_dir = new_run()
    (run_dir / "metrics.json").write_text("[]\n")
    err = one_line_error(cli("status", "--run-dir", run_dir))
    assert "metrics.json" in err and "(top level)" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_run_dir_is_one_line(new_run, cli) -> None:
    run_dir = new_run()
    mode = run_dir.stat().st_mode
    run_dir.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        err = one_line_error(cli("note", "--run-dir", run_dir, "--compact-failed", "x"))
    finally:
        run_dir.chmod(mode)
    assert str(run_dir) in err and "permission denied" in err


@pytest.mark.parametrize("code, words", [
    ("ENOSPC", "no space left on the device; free some space and re-run"),
    ("EACCES", "permission denied; make the run dir writable"),
    ("EROFS", "read-only file system; copy the run dir"),
])
def test_file_system_errors_name_the_file_and_the_fix(new_run, cli, monkeypatch: pytest.MonkeyPatch,
                                                      code: str, words: str) -> None:
    """A full disk, an unwritable or a read-only run dir (injected into the temp file of an
    atomic write, as the kernel would raise it): one line naming run.json, exit 1, run.json intact."""
    import errno
    import tempfile

    run_dir = new_run()
    before = (run_dir / "run.json").read_bytes()

    def refuse(*args, **kwargs):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)), f"{kwargs.get('dir')}/.tmpXYZ")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    res = cli("note", "--run-dir", run_dir, "--compact-failed", "x")
    err = one_line_error(res)
    assert res.exit_code == 1 and f"{run_dir / 'run.json'}: {words}" in err
    assert (run_dir / "run.json").read_bytes() == before


def test_an_unexpected_exception_is_one_line_and_logged(new_run, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last resort: a bug prints one line naming the log; the log holds the traceback."""
    def boom(*a, **k):
        raise ZeroDivisionError("division by zero")

    run_dir = new_run()
    monkeypatch.setattr("selfimprove.commands.iterate.iterate", boom)
    res = cli("iterate", "--run-dir", run_dir)
    err = one_line_error(res)
    assert res.exit_code == 1
    assert "unexpected ZeroDivisionError: division by zero" in err and str(run_dir / "errors.log") in err
    assert "Traceback" in (run_dir / "errors.log").read_text()


# ---------------------------------------------------------------- the unattended teacher


def teacher_file(tmp_path: Path, body: str) -> str:
    p = tmp_path / "my_teacher.py"
    p.write_text(body)
    return f"{p}:Teacher"


@pytest.mark.parametrize("body, words", [
    ("class Teacher:\n    def write(self, ctx)\n        pass\n", "SyntaxError"),
    ("import no_such_module_xyz\nclass Teacher: pass\n", "ModuleNotFoundError"),
    ("class Teacher:\n    def __init__(self):\n        raise KeyError('api key')\n", "KeyError"),
    ("import sys\nsys.exit(7)\n", "SystemExit"),  # used to end the CLI with exit 7 and no message
])
def test_teacher_that_does_not_load_is_one_line(new_run, cli, tmp_path: Path, body: str, words: str) -> None:
    err = one_line_error(cli("run", "--run-dir", new_run(), "--teacher", teacher_file(tmp_path, body)))
    assert "--teacher" in err and words in err and ("line" in err or "constructor" in err)


def test_teacher_whose_write_raises_is_one_line_with_a_log(tmp_path: Path) -> None:
    from selfimprove.teacher import TeacherContext, call_teacher

    def write(ctx):
        raise RuntimeError("model API down")

    ctx = TeacherContext(iteration=1, iter_dir=tmp_path, run_dir=tmp_path, failures_path=tmp_path / "f.jsonl",
                         analysis={}, hub_env={})
    with pytest.raises(TeacherError, match=r"write\(\) raised RuntimeError: model API down .*re-run"):
        call_teacher(write, ctx)
    assert "RuntimeError" in (tmp_path / "teacher_error.log").read_text()


def test_teacher_whose_write_calls_sys_exit_is_one_line_with_a_log(tmp_path: Path) -> None:
    from selfimprove.teacher import TeacherContext, call_teacher

    ctx = TeacherContext(iteration=1, iter_dir=tmp_path, run_dir=tmp_path, failures_path=tmp_path / "f.jsonl",
                         analysis={}, hub_env={})
    with pytest.raises(TeacherError, match=r"write\(\) raised SystemExit: 3 .*re-run"):
        call_teacher(lambda ctx: sys.exit(3), ctx)


@pytest.mark.parametrize("name, damage", [("analysis.json", b'{"eval_acc_pr'), ("hub_env.json", b"[]"),
                                          ("analysis.json", b"\xff\xfe{}")])
def test_teacher_context_names_a_damaged_input(tmp_path: Path, name: str, damage: bytes) -> None:
    """`selfimprove run` builds the teacher's context from analysis.json and hub_env.json: damaged, each is
    one line naming the file and the fix (it was an 'unexpected JSONDecodeError' bug line)."""
    from selfimprove.errors import RunDirError
    from selfimprove.teacher import make_context

    it = tmp_path / "iter_1"
    it.mkdir()
    (it / "analysis.json").write_text("{}")
    (tmp_path / "hub_env.json").write_text("{}")
    (it / name if name == "analysis.json" else tmp_path / name).write_bytes(damage)
    with pytest.raises(RunDirError, match=rf"{name}: .*(re-run|delete|restore)"):
        make_context(RunDir(tmp_path), 1)


def test_default_teacher_is_found_from_any_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default --teacher (examples/arith_teacher.py) is resolved from the install, not the cwd."""
    from selfimprove.teacher import load_teacher

    monkeypatch.chdir(tmp_path)
    assert callable(load_teacher("examples/arith_teacher.py:ArithTeacher"))


# ---------------------------------------------------------------- bootstrap refusals


@pytest.mark.parametrize("args, words", [
    (["x" * 230], "230 characters, at most"),
    (["selfimprove-arith", "--model", "selfimprove/tiny-arithh"], "no such built-in student"),
    (["selfimprove-arith", "--model", "Qwen/Qwen3-0.6B", "--engine", "local"], "does not download hub models"),
    (["selfimprove-arith", "--config", str(REPO / "README.md")], "--config"),  # not TOML: baseline would fail later
    (["selfimprove-arith", "--env-args", '{"n": NaN}'], "NaN is not JSON"),
    (["selfimprove-arith", "--rollouts-per-example", "1"], "must be >= 2"),  # GRPO: every advantage 0
])
def test_bootstrap_refuses_before_any_job(cli, runs_dir: Path, args: list[str], words: str) -> None:
    err = one_line_error(cli("bootstrap", *args, "--runs-dir", runs_dir))
    assert words in err
    assert list(runs_dir.iterdir()) == []  # nothing written


def test_bootstrap_refuses_a_misspelt_env(cli, runs_dir: Path) -> None:
    """A dataset whose module is not installed but spelled like an installed one: refused with the fix."""
    err = one_line_error(cli("bootstrap", "selfimprove-arihth", "--runs-dir", runs_dir))
    assert "no environment module 'selfimprove_arihth' is installed; did you mean selfimprove-arith?" in err
    assert list(runs_dir.iterdir()) == []
    res = cli("bootstrap", "selfimprove-arihth", "--hub-id", "someone/selfimprove-arihth", "--runs-dir", runs_dir)
    assert res.exit_code == 0, res.stderr  # an explicit hub id is taken as meant (introspect checks it)


# ---------------------------------------------------------------- the generator


@pytest.mark.parametrize("phase", ["baseline", "iterate", "compare"])
@pytest.mark.parametrize("flags, words", [(["--cap-hours", "-1"], "--cap-hours -1.0: must be"),
                                          (["--cap-hours", "nan"], "--cap-hours nan: must be"),
                                          (["--restart", "--resume"], "--restart and --resume: give one")])
def test_job_flags_are_refused_before_anything_runs(new_run, cli, monkeypatch: pytest.MonkeyPatch, phase: str,
                                                    flags: list[str], words: str) -> None:
    """These were accepted: baseline launched a job with them (a negative cap)."""
    from loop_helpers import FAKE, tree_digest

    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")  # old code trained: never the real engine
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.001")
    run_dir = new_run()
    before = tree_digest(run_dir)
    res = cli(phase, "--run-dir", run_dir, *flags)
    assert res.exit_code == 2 and words in one_line_error(res)
    assert tree_digest(run_dir) == before


def test_a_non_utf8_dataset_is_counted_not_a_crash(tmp_path: Path) -> None:
    """generate() counts the rows of whatever the generator wrote; a non-UTF-8 file was an
    'unexpected UnicodeDecodeError' there, before the dataset gate could name its lines."""
    from selfimprove.stack.env_package import count_rows

    ds = tmp_path / "dataset.jsonl"
    ds.write_bytes(b"\xff\xfe{}\n" * 3 + b"\n" + b'{"a": 1}\n')
    assert count_rows(ds) == 4


def test_gen_timeout_must_be_positive(new_run, cli) -> None:
    run_dir = new_run()
    for bad in ("-5", "0", "nan"):
        err = one_line_error(cli("iterate", "--run-dir", run_dir, "--gen-timeout", bad))
        assert "--gen-timeout" in err and "> 0" in err


def _context_without_env(root: Path) -> RunContext:
    """A run dir with only run.json: enough for a step that stops before it needs the env."""
    rd = RunDir(root)
    rd.write_run(RunConfig(dataset="d", hub_id="owner/d", model="m", start_ts=0.0, budget_seconds=60, max_iters=2,
                           batch_size=8))
    return RunContext.load(rd)


def test_timed_out_generator_and_its_children_are_killed_and_gen_log_capped(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    it = ArmDir(tmp_path, "iter_1")
    it.dir.mkdir()
    pid_file = tmp_path / "child.pid"
    (it.dir / "gen_dataset.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "sys.stdout.write('x' * 3_000_000); sys.stdout.flush()\n"
        "time.sleep(60)\n"
    )
    monkeypatch.setattr(generator_mod, "GEN_LOG_CAP_BYTES", 100_000)
    started = time.monotonic()
    with pytest.raises(TeacherActionNeeded, match="still running after 2 s"):
        iteration_steps.generate(_context_without_env(tmp_path), it, timeout=2)
    assert time.monotonic() - started < 15
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the killed child is reaped by init
    state = Path(f"/proc/{child}/stat").read_text().split()[2] if Path(f"/proc/{child}").exists() else "gone"
    assert state in ("gone", "Z"), state
    log = (it.dir / "gen.log").read_bytes()
    assert len(log) < 100_200 and b"gen.log capped at 100000 bytes" in log


# ---------------------------------------------------------------- the dataset gate


def test_non_json_dataset_gives_one_grouped_rule(tmp_path: Path) -> None:
    from selfimprove.gates.dataset import load_dataset_jsonl

    path = tmp_path / "dataset.jsonl"
    path.write_text("".join(f"question {i}, answer {i}\n" for i in range(914)))
    rows, failures = load_dataset_jsonl(path)
    assert rows == [] and len(failures) == 1
    line = failures[0].line()
    assert "914 lines are not JSON" in line and "+906 more" in line and "first: line 1" in line


# ---------------------------------------------------------------- iter_0 resumable after a crash


def test_iter0_crash_can_resume_from_an_intermediate_checkpoint(new_run, cli, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """iter_0 saves checkpoints before its last step, so --resume continues instead of starting over."""
    from test_baseline import FAKE, SMALL, hub_env

    launches_log = tmp_path / "launches.log"
    monkeypatch.setenv("SELFIMPROVE_RL_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_RL_LAUNCH_LOG", str(launches_log))
    monkeypatch.setenv("FAKE_RL_CRASH_AFTER", "3")
    run_dir = new_run("selfimprove-arith", *SMALL)  # 4 steps
    hub_env(run_dir)
    res = cli("baseline", "--run-dir", run_dir)
    assert res.exit_code == 1 and "--resume (continue from checkpoint step 3)" in " ".join(res.stderr.split())
    monkeypatch.delenv("FAKE_RL_CRASH_AFTER")
    res = cli("baseline", "--run-dir", run_dir, "--resume")
    assert res.exit_code == 0, res.stderr
    assert launches_log.read_text().splitlines()[-1].endswith("--ckpt.resume-step 3")
