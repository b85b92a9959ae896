"""Options shared by every command and the error edge of the CLI."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import stat
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Annotated, Any, Callable

import click
import typer

from rich.markup import escape

from ..errors import SelfImproveError, TeacherActionNeeded, UsageError
from ..ui import console, out, terminal_safe

RunDirOpt = Annotated[
    Path,
    typer.Option(
        "--run-dir",
        envvar="SELFIMPROVE_RUN_DIR",
        help="Run directory made by `selfimprove bootstrap` (env: SELFIMPROVE_RUN_DIR).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout instead of tables.")]


# What to do about an OS error the run dir's file system raised (the file is named in the line).
_OS_FIXES = {
    errno.EACCES: "permission denied; make the run dir writable by you (chmod u+w) or copy it somewhere writable",
    errno.EPERM: "operation not permitted; make the run dir writable by you or copy it somewhere writable",
    errno.EROFS: "read-only file system; copy the run dir to a writable place and use that --run-dir",
    errno.ENOSPC: "no space left on the device; free some space and re-run the same command (it resumes)",
    errno.EDQUOT: "disk quota exceeded; free some space and re-run the same command (it resumes)",
    errno.ENAMETOOLONG: "file name too long; use a shorter dataset name or --runs-dir",
}


def _error_line(label: str, text: str) -> None:
    """Print an error or stop line. Every message may quote the run dir (a generator's output, a
    teacher's labels): its control characters are shown escaped (`ui.terminal_safe`), its rich markup as text."""
    console.print(f"{label} {escape(terminal_safe(text))}", markup=True, highlight=False, soft_wrap=True)


def _run_is_closed(run_dir: Path) -> bool:
    """True for a finalized or aborted run (run.json has end_ts): nothing is appended to it, errors.log
    included. A run.json that cannot be read counts as open (the log is what explains it)."""
    try:
        data = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("end_ts") is not None


def _append_no_follow(path: Path, text: str) -> None:
    """Append to a regular file, never through a symlink (O_NOFOLLOW: a run dir from elsewhere may plant
    errors.log -> ~/.bashrc) and never into a FIFO or device (a non-regular file is refused)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def _crash_log(run_dir: Any, command: str) -> Path | None:
    """Append the current traceback to <run dir>/errors.log (or a temp file); return where it went.
    A closed run gets nothing (its files are final); the temp file is used instead."""
    text = f"--- {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} selfimprove {command}\n{traceback.format_exc()}\n"
    root = Path(run_dir) if run_dir else None
    candidates = [root / "errors.log"] if root and root.is_dir() and not _run_is_closed(root) else []
    candidates.append(Path(tempfile.gettempdir()) / f"selfimprove-error-{os.getpid()}.log")
    for path in candidates:
        try:
            _append_no_follow(path, text)
            return path
        except OSError:
            continue
    return None


def cli_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The CLI's error edge: every failure becomes one line on stderr and a non-zero exit, never a traceback.

    An expected SelfImproveError prints its message with its exit code; an OS error of the
    file system (permissions, read-only, full disk, name too long) names the file and the
    fix (exit 1); anything else is a bug: one line naming the error and the log file that
    holds the full traceback (the run dir's errors.log when there is one), exit 1.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SelfImproveError as e:
            # Teacher stops are expected outcomes of `iterate`, not errors.
            label = "[yellow]stop:[/yellow]" if isinstance(e, TeacherActionNeeded) else "[red]error:[/red]"
            _error_line(label, str(e))
            raise typer.Exit(e.exit_code) from None
        except BrokenPipeError:
            # The reader of stdout went away (`selfimprove weaknesses | head -1`): not a bug, nothing to log.
            # stdout is pointed at /dev/null so the interpreter's exit flush cannot fail again; exit as SIGPIPE would.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(141) from None
        except KeyboardInterrupt:
            from ..engines.job_record import rerun_same, set_rerun

            console.print(f"interrupted; {rerun_same()} to resume", markup=False)
            set_rerun(None)
            raise typer.Exit(130) from None
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise  # typer's own exits and usage errors
        except OSError as e:
            if e.errno in _OS_FIXES:
                where = e.filename or kwargs.get("run_dir") or "the run dir"
                _error_line("[red]error:[/red]", f"{where}: {_OS_FIXES[e.errno]}")
                raise typer.Exit(1) from None
            _report_bug(e, kwargs.get("run_dir"), fn.__module__)
        except Exception as e:  # noqa: BLE001  (the last resort: a bug, reported in one line)
            _report_bug(e, kwargs.get("run_dir"), fn.__module__)

    return wrapper


def _report_bug(e: Exception, run_dir: Any, module: str) -> None:
    command = module.rsplit(".", 1)[-1]
    log = _crash_log(run_dir, command)
    first = (str(e).splitlines() or [""])[0]
    where = f"full traceback in {log}" if log else "no log could be written"
    # No "re-run to resume" here: a bug met once is usually met again by the same command.
    _error_line("[red]error:[/red]", f"unexpected {type(e).__name__}: {first} ({where}); a bug in selfimprove: "
                "please report it with that file (what the command finished before it stays written)")
    raise typer.Exit(1) from None


def check_job_flags(restart: bool, resume: bool, cap_hours: float | None) -> None:
    """Flags of the commands that launch training jobs, refused before anything runs (exit 2)."""
    if restart and resume:
        raise UsageError("--restart and --resume: give one of them (--resume continues from the last "
                         "checkpoint, --restart starts the arm over)")
    if cap_hours is not None and not cap_hours > 0:  # also refuses nan
        raise UsageError(f"--cap-hours {cap_hours}: must be a number of hours > 0 (default: 2)")


def print_json(obj: Any) -> None:
    out.print(json.dumps(obj, indent=2, default=str), markup=False, highlight=False)
