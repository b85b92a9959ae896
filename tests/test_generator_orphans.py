"""A teacher's generator and everything it starts die with the `iterate` that started it, SIGKILL included; when
the generator exits or times out nothing it started runs on (a child in its own session once appended to
dataset.jsonl after the generator had exited); and the next `iterate` never starts a second generator beside
a live one (an LLM agent's looping gen_dataset.py kept a core busy for 29 minutes after its shell killed
`iterate`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfimprove.engines import procs
from selfimprove.engines.generator import run_generator
from selfimprove.errors import SelfImproveError, TeacherActionNeeded
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir

from loop_helpers import GENERATOR, write_teacher_files
from polling import wait_until

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="the reaper's prctl calls and /proc are Linux's")

# Starts a child in its process group and one in a session of its own (out of reach of any group kill and of
# PR_SET_PDEATHSIG), writes the three pids, then loops forever.
LOOPING = """
import os, subprocess, sys, time
loop = [sys.executable, "-c", "import time\\nwhile True: time.sleep(0.2)"]
child = subprocess.Popen(loop)
escaped = subprocess.Popen(loop, start_new_session=True)
with open("pids.json.tmp", "w") as f:
    f.write('{"generator": %d, "child": %d, "escaped": %d}' % (os.getpid(), child.pid, escaped.pid))
os.replace("pids.json.tmp", "pids.json")
while True:
    time.sleep(0.2)
"""

# Writes its rows, starts a child in its own session that appends to dataset.jsonl by path once the
# generator has exited, and exits 0.
APPENDS_LATER = """
import os, subprocess, sys
open("dataset.jsonl", "w").write('{"a": 1}\\n')
late = subprocess.Popen([sys.executable, "-c", "import time\\ntime.sleep(1)\\nwhile True:\\n"
                         "    open('dataset.jsonl', 'a').write('late\\\\n')\\n    time.sleep(0.05)"],
                        start_new_session=True)
open("late.pid", "w").write(str(late.pid))
"""


def _running(pid: int) -> bool:
    st = procs._stat(pid)
    return st is not None and st[0] != "Z"


TOKEN = procs.new_token()


def _looping_group(token: str | None = TOKEN) -> subprocess.Popen:
    """A process group as a killed iterate's generator left it: a leader in its own session, looping, with the
    token its gen.pid records (token None: a process the tool did not start)."""
    return subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.2)"], start_new_session=True,
                            env=procs.token_env(token) if token else None)


def test_a_child_in_its_own_session_is_killed_when_the_generator_exits(tmp_path: Path) -> None:
    (tmp_path / "gen_dataset.py").write_text(APPENDS_LATER)
    assert run_generator(tmp_path, tmp_path / "gen.log", 60, sys.executable) == 0
    late = int((tmp_path / "late.pid").read_text())
    assert not _running(late), "a child in its own session outlived the generator"
    time.sleep(1.5)  # when it would have appended
    assert (tmp_path / "dataset.jsonl").read_text() == '{"a": 1}\n'
    assert not (tmp_path / "gen.pid").exists()


def test_a_child_in_its_own_session_is_killed_at_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "gen_dataset.py").write_text(LOOPING)
    assert run_generator(tmp_path, tmp_path / "gen.log", 3, sys.executable) is None
    pids = json.loads((tmp_path / "pids.json").read_text())
    assert [name for name, pid in pids.items() if _running(pid)] == []


def test_the_next_iterate_kills_a_left_generator_before_it_starts_its_own(tmp_path: Path, capsys) -> None:
    left = _looping_group()
    try:
        (tmp_path / "gen.pid").write_text(json.dumps(procs.record(left.pid, TOKEN)))
        # the new generator writes whether the old one still ran when it started
        (tmp_path / "gen_dataset.py").write_text(
            f"import os\nalive = os.path.exists('/proc/{left.pid}') and open('/proc/{left.pid}/stat').read().split()[2] != 'Z'\n"
            f"open('old_alive.txt', 'w').write(str(alive))\n")
        assert run_generator(tmp_path, tmp_path / "gen.log", 60, sys.executable) == 0
        assert (tmp_path / "old_alive.txt").read_text() == "False"
        assert "killed the generator left running" in capsys.readouterr().err
    finally:
        left.kill()
        left.wait()


def test_never_a_second_generator_beside_one_that_cannot_be_killed(tmp_path: Path, monkeypatch) -> None:
    left = _looping_group()
    try:
        (tmp_path / "gen.pid").write_text(json.dumps(procs.record(left.pid, TOKEN)))
        (tmp_path / "gen_dataset.py").write_text("open('started.txt', 'w').write('yes')\n")
        monkeypatch.setattr(procs, "terminate_group", lambda *a, **k: None)  # a group our signals do not stop
        with pytest.raises(SelfImproveError, match=rf"gen\.pid: .* still runs .*kill -9 -{left.pid}"):
            run_generator(tmp_path, tmp_path / "gen.log", 60, sys.executable)
        assert not (tmp_path / "started.txt").exists(), "a second generator started beside the live one"
        assert json.loads((tmp_path / "gen.pid").read_text())["pid"] == left.pid  # still recorded for the next try
    finally:
        left.kill()
        left.wait()


def test_generator_and_all_it_started_die_with_a_killed_iterate(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    write_teacher_files(it)
    (it / "gen_dataset.py").write_text(LOOPING)
    cli = subprocess.Popen([sys.executable, "-m", "selfimprove", "iterate", "--run-dir", str(run.root)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        assert wait_until(lambda: (it / "pids.json").is_file()), "the generator never started"
        pids = json.loads((it / "pids.json").read_text())
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
        assert wait_until(lambda: not any(_running(p) for p in pids.values()), 10), \
            f"outlived the killed iterate: {[n for n, p in pids.items() if _running(p)]}"
    finally:
        if cli.poll() is None:
            cli.kill()

    (it / "gen_dataset.py").write_text(GENERATOR.format(break_rules=[]))  # the teacher fixes its generator
    proc = subprocess.run([sys.executable, "-m", "selfimprove", "iterate", "--run-dir", str(run.root), "--once"],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert not (it / "gen.pid").exists()


@pytest.mark.parametrize("forged", ["pid1_foreign_group", "copied_ids_no_token", "not_a_record"])
def test_a_forged_gen_pid_signals_nothing_and_is_dropped_with_one_line(tmp_path: Path, capsys, forged: str) -> None:
    """issue 41: gen.pid {"pid": 1, "pgid": V} made iterate SIGKILL group V, then every later iterate stopped on
    "could not be killed". Now a record that is not provably this tool's generator is dropped, never signalled."""
    victim = _looping_group(token=None)
    try:
        start = procs.start_time(victim.pid)
        record = {"pid1_foreign_group": {"pid": 1, "pgid": victim.pid},
                  "copied_ids_no_token": {"pid": victim.pid, "pgid": victim.pid, "start": start,
                                          "token": procs.new_token()},
                  "not_a_record": ["x"]}[forged]
        (tmp_path / "gen.pid").write_text(json.dumps(record))
        (tmp_path / "gen_dataset.py").write_text("open('ran.txt', 'w').write('yes')\n")
        assert run_generator(tmp_path, tmp_path / "gen.log", 60, sys.executable) == 0
        assert (tmp_path / "ran.txt").read_text() == "yes"
        assert victim.poll() is None, "a process the tool did not start was signalled"
        err = capsys.readouterr().err
        assert err.count("gen.pid") == 1 and "dropped" in err and "nothing was signalled" in err, err
        assert not (tmp_path / "gen.pid").exists()
        # the next run says nothing more: the stale record is gone, not retried
        assert run_generator(tmp_path, tmp_path / "gen.log", 60, sys.executable) == 0
        assert "gen.pid" not in capsys.readouterr().err
    finally:
        victim.kill()
        victim.wait()
