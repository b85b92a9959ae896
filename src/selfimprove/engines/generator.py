"""Running a teacher's generator: under the reaper (engines/reaper.py), a capped log, a timeout, and no orphans.

Unlike the detached training job, a generator must not outlive the `iterate` that started it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from pydantic import ValidationError

from ..errors import SelfImproveError
from ..faults import fault_point
from ..rundir import atomic_write_json, read_json_object
from . import procs
from .gen_reads import BOOTSTRAP, READS_ENV, READS_FILE

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


def _left_generator(pid_file: Path) -> "procs.ProcRecord | None":
    """gen.pid, validated; a record that is not one this tool wrote, or that names no process of ours
    (gone, recycled, forged), is dropped with one line: it is never signalled and never blocks a later run."""
    if not pid_file.exists():
        return None
    data = read_json_object(pid_file)
    try:
        rec = procs.ProcRecord.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        print(f"{pid_file}: not a generator record this tool wrote (field '{field}': {err['msg']}); dropped it, "
              f"nothing was signalled", file=sys.stderr)
        pid_file.unlink(missing_ok=True)
        return None
    who = procs.recorded_identity(rec)
    if who == "foreign":
        print(f"{pid_file}: pid {rec.pid} / process group {rec.pgid} is not the generator this run started (another "
              f"process now, or a forged record); dropped the record, nothing was signalled", file=sys.stderr)
    if who != "ours":
        pid_file.unlink(missing_ok=True)
        return None
    return rec


def run_generator(iter_dir: Path, log: Path, timeout: float, python: str) -> int | None:
    """Run gen_dataset.py with `python` (the env interpreter: it imports verifiers and reads the hub
    env there) under engines/reaper.py; return its exit code, or None after a timeout.

    When this returns or raises (timeout, Ctrl-C), nothing the generator started is still running, even a
    child it put in its own session (the reaper is a child subreaper and kills every descendant). The
    generator and its reaper die with this process, SIGKILL included. gen.pid records the reaper's group;
    the next `iterate` kills what is left of it (a SIGKILLed reaper) and refuses to start a second
    generator while the first one still runs."""
    pid_file = iter_dir / "gen.pid"
    left = _left_generator(pid_file)
    if procs.kill_recorded(left):  # an earlier iterate was killed while its generator ran
        print(f"{iter_dir.name}: killed the generator left running by an earlier, killed `iterate`", file=sys.stderr)
    if left is not None and procs.recorded_identity(left) == "ours":
        raise SelfImproveError(f"{pid_file}: the generator an earlier `iterate` started (process group {left.pgid}) "
                               f"still runs and could not be killed; stop it (kill -9 -{left.pgid}) and re-run iterate")
    (iter_dir / READS_FILE).unlink(missing_ok=True)  # an older run's list must not pass for this one's
    token = procs.new_token()
    # BOOTSTRAP runs gen_dataset.py as `python gen_dataset.py` would, and lists the files it read (gen_reads.py)
    proc = procs.spawn_reaped([python, "-c", BOOTSTRAP], cwd=iter_dir, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env={**procs.token_env(token), "PYTHONUNBUFFERED": "1",
                                   READS_ENV: str(iter_dir.resolve() / READS_FILE)})
    atomic_write_json(pid_file, procs.record(proc.pid, token))
    fault_point("generator-running")
    copier = threading.Thread(target=_copy_capped, args=(proc.stdout, log, GEN_LOG_CAP_BYTES), daemon=True)
    copier.start()
    try:
        rc: int | None = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = None
    except BaseException:  # Ctrl-C or a kill of this CLI: take the generator and all it started down too
        procs.stop_reaped(proc)
        pid_file.unlink(missing_ok=True)
        raise
    procs.stop_reaped(proc)  # after a timeout; after an exit, a no-op: the reaper has killed what was left
    pid_file.unlink(missing_ok=True)
    copier.join(timeout=10)
    return rc
