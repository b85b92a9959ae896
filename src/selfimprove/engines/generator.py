"""Running a teacher's generator: its own process group, a capped log, a timeout, and no orphans.

Unlike the detached training job, a generator must not outlive the `iterate` that started it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ..rundir import atomic_write_json, read_json_object
from . import procs

GEN_LOG_CAP_BYTES = 1_000_000  # gen.log keeps the first 1 MB of the generator's output, then drops the rest


def _copy_capped(src, log_path: Path, cap: int) -> None:
    """Copy the generator's output into gen.log up to `cap` bytes, then note the cut and
    keep draining (so a chatty generator never blocks on a full pipe nor fills the disk)."""
    written = dropped = 0
    with open(log_path, "wb") as log:
        for chunk in iter(lambda: src.read1(65536), b""):
            keep = chunk[: max(0, cap - written)]
            log.write(keep)
            log.flush()
            written += len(keep)
            dropped += len(chunk) - len(keep)
        if dropped:
            log.write(f"\n[gen.log capped at {cap} bytes; {dropped} more bytes of output dropped]\n".encode())


def run_generator(iter_dir: Path, log: Path, timeout: float, python: str) -> int | None:
    """Run gen_dataset.py with `python` (the env interpreter: it imports verifiers and reads the hub
    env there) in its own process group; return its exit code, or None after a timeout, when the
    whole group (the generator and any children it started) is killed.

    The generator dies with this process (PR_SET_PDEATHSIG), SIGKILL included, so a killed `iterate`
    leaves no generator looping beside the training; its children in the group are killed by the next
    `iterate`, which finds them by gen.pid (pid, pgid, start time) before it starts a new generator."""
    pid_file = iter_dir / "gen.pid"
    if procs.kill_recorded(read_json_object(pid_file)):  # an earlier iterate was killed while its generator ran
        print(f"{iter_dir.name}: killed the generator left running by an earlier, killed `iterate`", file=sys.stderr)
    proc = subprocess.Popen([python, "gen_dataset.py"], cwd=iter_dir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=procs.die_with_parent(), env={**os.environ, "PYTHONUNBUFFERED": "1"})
    atomic_write_json(pid_file, procs.record(proc.pid))
    copier = threading.Thread(target=_copy_capped, args=(proc.stdout, log, GEN_LOG_CAP_BYTES), daemon=True)
    copier.start()
    try:
        rc: int | None = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = None
    except BaseException:  # Ctrl-C or a kill of this CLI: take the generator's group down too
        _kill_group(proc)
        pid_file.unlink(missing_ok=True)
        raise
    _kill_group(proc)  # also after a normal exit: children left running in the background
    pid_file.unlink(missing_ok=True)
    copier.join(timeout=10)
    return rc


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
