"""Process signals for the job runner: is a detached job still alive? And children that must not outlive us.

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

import os
import signal
import subprocess
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


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent():
    """A `preexec_fn` for a child that must not outlive this process (a teacher's generator, unlike the
    detached training job): on Linux the kernel SIGKILLs it when we die, SIGKILL of us included
    (prctl PR_SET_PDEATHSIG). Elsewhere None: the next run's orphan check (`kill_recorded`) still applies.
    libc is loaded here, in the parent: the child between fork and exec runs only the returned closure."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above: nobody will signal us
            os._exit(1)

    return arm


def record(pid: int) -> dict:
    """What identifies a child started in its own session (pgid = pid) across our own death: pid, start time."""
    return {"pid": pid, "pgid": pid, "start": start_time(pid)}


def kill_recorded(rec: dict | None) -> bool:
    """Kill the process group a `record` names if any of it still runs (an orphan of a killed parent);
    True if something was killed."""
    if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int) or not isinstance(rec.get("pgid"), int):
        return False
    start = rec.get("start") if isinstance(rec.get("start"), int) else None
    if not alive(rec["pid"], rec["pgid"], start):
        return False
    terminate_group(rec["pgid"], rec["pid"], grace_s=2.0)
    return True
