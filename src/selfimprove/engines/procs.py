"""Process signals for the job runner: is a detached job still alive? And children that must not outlive us.

Every subprocess a phase starts, except the detached training job, goes through `spawn_reaped` (or
`run_child`, its `subprocess.run`): it runs under engines/reaper.py, in its own session, dies with the
phase (SIGKILL of the phase included), and when it exits or is stopped nothing it started is left running.

A job is identified by (pid, pgid, start time, token), and a record counts only when all of them match
the live process (issue 41: a run dir is untrusted input). `pid` alone is not enough: after the job dies
the kernel may hand the same number to an unrelated process, and a child that exited but was not yet
reaped stays visible as a zombie. pid, pgid and start time are not enough either: /proc/<pid>/stat is
world-readable, so a forged job.json or gen.pid can copy them from any process (a forged iter_1/job.json
made `iterate` attach to another process and kill it at its cap). So every process the tool starts to
outlive it (the training job's wrapper, the generator's reaper) gets a random token in its environment
(SELFIMPROVE_JOB_TOKEN, inherited by everything it starts); /proc/<pid>/environ is readable only by the
process's owner (or root), and no process the tool did not start carries a token that a record names.

A job is ours and alive iff its leader exists, is not a zombie, has the recorded pgid and start time and
carries the token; or (leader gone: the engine's workers outliving the launcher keep writing into
prime_out, so relaunching then would corrupt it) the recorded pgid is the recorded pid (the tool always
starts a new session) and a non-zombie member of that group carries the token. A record without a start
time or token proves nothing: it is not ours, so nothing is ever attached to, waited on or signalled by it.

Linux reads /proc; elsewhere only os.kill(pid, 0) is available (no zombie, recycling or token check:
documented, accepted).
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

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


TOKEN_ENV = "SELFIMPROVE_JOB_TOKEN"


def new_token() -> str:
    """A fresh token for a process the tool starts to outlive it: put into its environment and its record."""
    return secrets.token_hex(16)


def token_env(token: str) -> dict[str, str]:
    """os.environ with `token`: the environment of a process started with it."""
    return {**os.environ, TOKEN_ENV: token}


def _has_token(pid: int, token: str) -> bool:
    """True iff /proc/<pid>/environ holds TOKEN_ENV=token (unreadable: another user's process, never ours).

    An empty environ is read again for up to a second: Popen returns once the child's execve has closed its
    close-on-exec pipe, which is before the kernel records where the new environment lies, so a check made
    at once can read nothing (measured on 2 cores: ~1 launch in 100 when read at once)."""
    for _ in range(20):
        try:
            env = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:
            return False
        if env:
            break
        time.sleep(0.05)
    return f"{TOKEN_ENV}={token}".encode() in env.split(b"\0")


def _members(pgid: int) -> list[int]:
    """Non-zombie processes of group `pgid`."""
    found = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st and st[1] == pgid and st[0] != "Z":
                found.append(int(entry.name))
    return found


def _group_alive(pgid: int) -> bool:
    """Some member of group `pgid` still runs (zombies do not count); only for a group already proven ours."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _PROC.is_dir() or bool(_members(pgid))


Identity = Literal["ours", "gone", "foreign"]


def identify(pid: int, pgid: int | None, started: int | None, token: str | None) -> Identity:
    """ours: the recorded job runs (see the module doc); gone: nothing of it runs; foreign: the pid (or
    group) is alive but not provably the recorded job's (recycled, or a forged or pre-token record)."""
    reap(pid)  # turns our own exited child from zombie into gone
    if not _PROC.is_dir():
        try:
            os.kill(pid, 0)
            return "ours"
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            return "foreign"
    if pid <= 0 or pgid is None:
        return "gone"
    st = _stat(pid)
    if st is not None and st[0] != "Z":
        if started is not None and token and st[1] == pgid and st[2] == started and _has_token(pid, token):
            return "ours"
        return "foreign"
    if pgid != pid:
        return "gone" if _stat(pgid) is None else "foreign"
    members = _members(pgid)
    if not members:
        return "gone"
    if started is not None and token and any(_has_token(m, token) for m in members):
        return "ours"
    return "foreign"


def alive(pid: int, pgid: int | None, started: int | None, token: str | None) -> bool:
    """True while the recorded job (leader or, with its token, any member of its process group) runs."""
    return identify(pid, pgid, started, token) == "ours"


def terminate_group(pgid: int, pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the job's process group, SIGKILL it after `grace_s`. Only for a group proven ours (identify)."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            reap(pid)
            if not _group_alive(pgid):
                return
            time.sleep(0.1)


class ProcRecord(BaseModel):
    """gen.pid: a process the tool started in its own session (pgid = pid) that must not outlive it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    pid: int
    pgid: int
    start: int
    token: str


def record(pid: int, token: str) -> dict:
    """What identifies a child started in its own session (pgid = pid) with `token` across our own death."""
    return ProcRecord(pid=pid, pgid=pid, start=start_time(pid) or 0, token=token).model_dump()


def recorded_identity(rec: ProcRecord | None) -> Identity:
    return "gone" if rec is None else identify(rec.pid, rec.pgid, rec.start, rec.token)


def kill_recorded(rec: ProcRecord | None) -> bool:
    """Kill the process group a record names if it is provably ours and runs (an orphan of a killed parent);
    True if something ran and now nothing does."""
    if recorded_identity(rec) != "ours":
        return False
    terminate_group(rec.pgid, rec.pid, grace_s=2.0)
    return recorded_identity(rec) != "ours"


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
