"""A teacher's generator dies with the `iterate` that started it, SIGKILL included, and the next `iterate` kills
whatever it left in its process group before starting a new generator (an LLM agent's looping gen_dataset.py kept
a core busy for 29 minutes after its shell killed `iterate`)."""

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
from selfimprove.errors import TeacherActionNeeded
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir

from loop_helpers import GENERATOR, write_teacher_files

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="PR_SET_PDEATHSIG and /proc are Linux's")

# Writes its own pid, starts a child in its own process group (no new session: PDEATHSIG does not reach it),
# writes that pid too, then loops forever.
LOOPING = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.2)"])
with open("pids.json.tmp", "w") as f:
    f.write('{"generator": %d, "child": %d}' % (os.getpid(), child.pid))
os.replace("pids.json.tmp", "pids.json")
while True:
    time.sleep(0.2)
"""


def _running(pid: int) -> bool:
    st = procs._stat(pid)
    return st is not None and st[0] != "Z"


def _wait(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def test_generator_dies_with_a_killed_iterate_and_its_orphans_die_at_the_next(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    write_teacher_files(it)
    (it / "gen_dataset.py").write_text(LOOPING)
    cli = subprocess.Popen([sys.executable, "-m", "selfimprove", "iterate", "--run-dir", str(run.root)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        assert _wait(lambda: (it / "pids.json").is_file()), "the generator never started"
        pids = json.loads((it / "pids.json").read_text())
        assert json.loads((it / "gen.pid").read_text())["pid"] == pids["generator"]
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
        assert _wait(lambda: not _running(pids["generator"]), 10), "the generator outlived the killed iterate"
        assert _running(pids["child"])  # in the generator's group, not its direct child: left for the next run
    finally:
        if cli.poll() is None:
            cli.kill()

    (it / "gen_dataset.py").write_text(GENERATOR.format(break_rules=[]))  # the teacher fixes its generator
    (it / "pids.json").unlink()
    proc = subprocess.run([sys.executable, "-m", "selfimprove", "iterate", "--run-dir", str(run.root), "--once"],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=600)
    assert not _running(pids["child"]), "the next iterate left the orphan running"
    assert "killed the generator left running" in proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert not (it / "gen.pid").exists()
