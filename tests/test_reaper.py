"""Every subprocess a phase starts (installs, env probes, reward lint, ...) runs through `procs.run_child`:
subprocess.run's results and exceptions, but in its own session, dying with the phase (SIGKILL included), and
leaving nothing it started running when it exits, times out or the phase is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfimprove.engines import procs

from polling import wait_until

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="the reaper's prctl calls and /proc are Linux's")

SRC = Path(procs.__file__).resolve().parents[2]


def _running(pid: int) -> bool:
    st = procs._stat(pid)
    return st is not None and st[0] != "Z"


# A shell that starts a sleeper in a session of its own and one in its group, writes their pids, then `rest`.
def _spawner(pids: Path, rest: str) -> list[str]:
    return ["sh", "-c", f"setsid sleep 300 & a=$!; sleep 300 & b=$!; echo $a $b > {pids}.tmp; mv {pids}.tmp {pids}; {rest}"]


def _pids(path: Path) -> list[int]:
    assert wait_until(path.is_file), "the command never started its children"
    return [int(p) for p in path.read_text().split()]


def test_same_results_as_subprocess_run() -> None:
    r = procs.run_child(["sh", "-c", "echo out; echo err >&2; exit 3"], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert procs.run_child(["cat"], input="abc", capture_output=True, text=True).stdout == "abc"
    assert procs.run_child(["sh", "-c", "kill -9 $$"]).returncode == -signal.SIGKILL
    with pytest.raises(FileNotFoundError):
        procs.run_child(["no-such-command-selfimprove"])
    with pytest.raises(subprocess.CalledProcessError):
        procs.run_child(["false"], check=True)


def test_nothing_it_started_outlives_its_exit(tmp_path: Path) -> None:
    r = procs.run_child(_spawner(tmp_path / "pids", "exit 0"), capture_output=True, timeout=60)
    assert r.returncode == 0  # returned although both sleepers held its stdout open: they are gone
    assert [p for p in _pids(tmp_path / "pids") if _running(p)] == []


def test_nothing_it_started_outlives_a_timeout(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        procs.run_child(_spawner(tmp_path / "pids", "sleep 300"), timeout=2)
    assert [p for p in _pids(tmp_path / "pids") if _running(p)] == []


def test_nothing_it_started_outlives_a_sigkilled_phase(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    phase = subprocess.Popen([sys.executable, "-c", "import sys\nfrom selfimprove.engines import procs\n"
                              f"procs.run_child({_spawner(pids, 'sleep 300')!r})"],
                             env={**os.environ, "PYTHONPATH": str(SRC)})
    try:
        children = _pids(pids)
        os.kill(phase.pid, signal.SIGKILL)
        phase.wait()
        assert wait_until(lambda: not any(_running(p) for p in children)), \
            f"outlived the killed phase: {[p for p in children if _running(p)]}"
    finally:
        if phase.poll() is None:
            phase.kill()


def test_a_command_that_cannot_run_is_named_with_the_real_reason(tmp_path: Path) -> None:
    """A path that exists but is not executable is a PermissionError, not "No such file" (as Popen says)."""
    script = tmp_path / "not_executable.sh"
    script.write_text("echo hi\n")
    script.chmod(0o644)
    with pytest.raises(PermissionError):
        procs.run_child([str(script)])
    with pytest.raises(FileNotFoundError):
        procs.run_child([str(tmp_path / "missing")])
    with pytest.raises(FileNotFoundError):
        procs.run_child(["no-such-command-r3"])
