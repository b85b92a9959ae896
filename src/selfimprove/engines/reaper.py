"""A supervisor for one command of a phase: it runs the command and leaves no descendant of it alive.

    python -I -S reaper.py <parent pid> <command> [args...]

Run by path with the standard library only (engines/procs.py `spawn_reaped`), in its own session, by the
phase's CLI. Why a separate process: a process group or a PR_SET_PDEATHSIG on the command reach only the
command itself and the children that stay in its group. A generator can start a child in its own session
(`start_new_session=True`), which survived the timeout kill and appended to dataset.jsonl after the
generator had exited. Here:

- this process is a child subreaper (PR_SET_CHILD_SUBREAPER): every descendant the command orphans,
  whatever its session or group, is re-parented to us instead of to init, so we can always find it;
- when the command exits, every descendant still running is SIGKILLed (until none is left) before we exit
  with the command's status, so "the command is done" means "nothing it started still writes";
- the command dies with us (PR_SET_PDEATHSIG SIGKILL), and we get SIGTERM when the phase dies
  (PR_SET_PDEATHSIG, SIGKILL of the phase included): on SIGTERM, SIGINT or SIGHUP we kill every
  descendant and exit. Only a SIGKILL of this supervisor itself leaves escaped descendants to init.

Linux only (prctl, /proc); procs.py falls back to a plain process group elsewhere.
"""

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_DEADLINE_S = 10.0  # a descendant stuck in uninterruptible I/O dies when the I/O ends; we do not wait longer
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _parents() -> dict[int, int]:
    """pid -> ppid of every live (non-zombie) process, from /proc/<pid>/stat."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue  # exited meanwhile
        fields = raw[raw.rfind(b")") + 2:].split()  # the command name may hold spaces and parentheses
        if fields and fields[0] != b"Z":
            out[int(entry)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    """Collect every exited child (orphans re-parented to us included) so none stays a zombie."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants() -> None:
    """SIGKILL every descendant, again until none is left: a process forking while we kill has its child
    re-parented to us, and the next round finds it."""
    me = os.getpid()
    deadline = time.monotonic() + KILL_DEADLINE_S
    while time.monotonic() < deadline:
        pids = descendants(me)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
        _reap()
    _reap()


def _on_stop(signum, _frame) -> None:
    kill_descendants()
    os._exit(128 + signum)


def main(argv: list[str]) -> int:
    parent, cmd = int(argv[1]), argv[2:]
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop)
    _prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # the phase died before the line above: nobody would signal us
        return 1
    me = os.getpid()
    pid = os.fork()
    if pid == 0:  # the command: dies with us, then becomes the command
        try:
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != me:
                os._exit(1)
            os.execvp(cmd[0], cmd)
        except BaseException as e:  # exec failed: say why where the command's output goes
            os.write(2, f"{cmd[0]}: {e}\n".encode(errors="replace"))
        os._exit(127)
    while True:  # any child: orphans re-parented to us are reaped as they exit, not left as zombies
        done, status = os.waitpid(-1, 0)
        if done == pid:
            break
    kill_descendants()
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # the command died of a signal: so do we, so the phase sees the same status
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # the two that cannot be handled
            signal.signal(-code, signal.SIG_DFL)
        os.kill(me, -code)
        time.sleep(1)
    return code


if __name__ == "__main__":
    os._exit(main(sys.argv))
