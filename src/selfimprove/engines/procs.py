"""Process signals for the job runner: is a detached job still alive? And children that must not outlive us.

Every subprocess a phase starts, except the detached training job, goes through `spawn_reaped` (or
`run_child`, its `subprocess.run`): it runs under engines/reaper.py, in its own session, dies with the
phase (SIGKILL of the phase included), and when it exits or is stopped nothing it started is left running.

A job is identified by (pid, pgid, start time). `pid` alone is not enough: after
the job dies the kernel may hand the same number to an unrelated process, and a
child that exited but was not yet reaped stays visible as a zombie. So a job is
alive iff its leader exists, is not a zombie and has the recorded start time, or
(leader gone) some non-zombie process still belongs to its process group (the
engine's workers outliving the launcher keep writing into prime_out, so
relaunching then would corrupt it). Linux never reuses a pid while it is still
somebody's process-group id, so a live group with that pgid is ours.

Linux reads /proc; elsewhere only os.kill(pid, 0) is available (no zombie or
recycling check: documented, accepted).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

_PROC = Path("/proc")

# Jobs this process launched: we are their parent, so we must reap them
# (otherwise they linger as zombies) and only we can read their exit code.
_CHILDREN: dict[int, subprocess.Popen] = {}


def register_child(proc: subprocess.Popen) -> None:
    _CHILDREN[proc.pid] = proc


def reap(pid: int) -> int | None:
    """Exit code of a child we launched that has exited (reaping it), else None."""
    proc = _CHILDREN.get(pid)
    return proc.poll() if proc is not None else None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgrp, starttime ticks) from /proc/<pid>/stat, or None if the pid is gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    # The comm field may hold spaces and parentheses: split after the LAST ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    # fields[0] = state (field 3), fields[2] = pgrp (5), fields[19] = starttime (22)
    return fields[0], int(fields[2]), int(fields[19])


def start_time(pid: int) -> int | None:
    st = _stat(pid)
    return st[2] if st else None


def _group_has_live_member(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    if not _PROC.is_dir():
        return True
    # killpg also succeeds for zombies: look for a member that is really running.
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st and st[1] == pgid and st[0] != "Z":
                return True
    return False


def alive(pid: int, pgid: int | None, started: int | None) -> bool:
    """True while the job (leader or any member of its process group) runs."""
    reap(pid)  # turns our own exited child from zombie into gone
    if not _PROC.is_dir():
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    st = _stat(pid)
    if st is not None and started is not None and st[2] != started:
        return False  # pid recycled: our leader and, by the kernel's rule, its group are gone
    if st is not None and st[0] != "Z":
        return True
    return pgid is not None and _group_has_live_member(pgid)


def terminate_group(pgid: int, pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the job's process group, SIGKILL it after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid, pgid, None):
                return
            time.sleep(0.1)


def record(pid: int) -> dict:
    """What identifies a child started in its own session (pgid = pid) across our own death: pid, start time."""
    return {"pid": pid, "pgid": pid, "start": start_time(pid)}


def _recorded(rec: dict | None) -> tuple[int, int, int | None] | None:
    if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int) or not isinstance(rec.get("pgid"), int):
        return None
    return rec["pid"], rec["pgid"], rec.get("start") if isinstance(rec.get("start"), int) else None


def recorded_alive(rec: dict | None) -> bool:
    """True while anything of the process group a `record` names still runs."""
    ids = _recorded(rec)
    return ids is not None and alive(*ids)


def kill_recorded(rec: dict | None) -> bool:
    """Kill the process group a `record` names if any of it still runs (an orphan of a killed parent);
    True if something ran and now nothing does."""
    if not recorded_alive(rec):
        return False
    terminate_group(rec["pgid"], rec["pid"], grace_s=2.0)
    return not recorded_alive(rec)


REAPER = Path(__file__).with_name("reaper.py")
STOP_GRACE_S = 15.0  # the reaper's own kill rounds take at most 10 s (reaper.KILL_DEADLINE_S)


def _reaper_available() -> bool:
    return sys.platform.startswith("linux") and _PROC.is_dir()


def spawn_reaped(cmd: list[str], **popen_kw) -> subprocess.Popen:
    """Popen `cmd` under engines/reaper.py in a new session (pgid = the returned pid): the command dies with
    this process, and no descendant of it outlives the command's exit (see reaper.py). Raises
    FileNotFoundError for a missing executable, as Popen does. Elsewhere than Linux: a plain new session."""
    if shutil.which(cmd[0], path=(popen_kw.get("env") or os.environ).get("PATH")) is None:
        if os.sep in cmd[0]:  # a path: say why it cannot run (missing, or not ours to stat or execute)
            try:
                os.stat(cmd[0])
            except OSError as e:
                raise type(e)(e.errno, e.strerror, cmd[0]) from None
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), cmd[0])
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
    if _reaper_available():
        # -I -S: the reaper imports the standard library only, whatever the caller's PYTHONPATH holds
        cmd = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), *cmd]
    return subprocess.Popen(cmd, start_new_session=True, **popen_kw)


def _exited_unreaped(pid: int) -> bool:
    """True once our child `pid` has exited, without reaping it (its pid, hence its group id, stays ours)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def stop_reaped(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Stop a `spawn_reaped` command and everything it started: SIGTERM to the reaper (it kills every
    descendant and exits), SIGKILL to its whole group if it has not exited within `grace_s`; then reap it."""
    if proc.returncode is None and not _exited_unreaped(proc.pid):
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and not _exited_unreaped(proc.pid):
            time.sleep(0.02)
    if proc.returncode is None:
        try:  # before reaping: until then no other process can get this group id
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def run_child(cmd: list[str], *, input: str | bytes | None = None, timeout: float | None = None,
              capture_output: bool = False, text: bool = False, check: bool = False,
              **popen_kw) -> subprocess.CompletedProcess:
    """`subprocess.run` for a phase's subprocesses (installs, probes, helpers): same arguments, results and
    exceptions, but the command runs under `spawn_reaped`, and on a timeout, Ctrl-C or any other exception
    it is stopped with all it started (subprocess.run kills the direct child only)."""
    if capture_output:
        popen_kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        popen_kw["stdin"] = subprocess.PIPE
    elif "stdin" not in popen_kw:
        popen_kw["stdin"] = subprocess.DEVNULL  # a phase's subprocess never reads the user's terminal
    proc = spawn_reaped(cmd, text=text, **popen_kw)
    try:
        stdout, stderr = proc.communicate(input, timeout=timeout)
    except BaseException:  # TimeoutExpired, KeyboardInterrupt, ...: nothing of it may go on running
        stop_reaped(proc)
        raise
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if check:
        result.check_returncode()
    return result
