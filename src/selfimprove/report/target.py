"""Where `selfimprove report --out` may write the page: only a file the tool owns (issue 41).

`--out RUN/metrics.json` used to replace the run's metrics with a page and exit 0; `--out
/dev/null` as root replaced the device node; a 0600 file came back 0644. Now:

- a symbolic link, a directory, a device, a pipe or a socket is refused: the page is one regular
  file, and writing through a link would replace a file somewhere the user did not name;
- inside a run dir (this one or another: a dir holding run.json) only that run's report.html is
  written: its other files are the run's records;
- an existing file is replaced only when it is a page this tool wrote (it starts with
  `page.PAGE_PREFIX`), or with `--force`; a replaced file keeps its permission bits.

The write itself is atomic (a temp file in the same directory, then a rename), so a reader never
meets half a page and a failed write leaves the old file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UsageError
from ..rundir import RunDir
from .page import PAGE_PREFIX


def is_own_page(path: Path) -> bool:
    """Whether `path` starts with the bytes every page this tool writes starts with."""
    try:
        with open(path, "rb") as f:
            return f.read(len(PAGE_PREFIX.encode())) == PAGE_PREFIX.encode()
    except OSError:
        return False


def _run_dir_of(path: Path) -> Path | None:
    """The run dir `path` lies in (the nearest parent holding run.json), or None."""
    for parent in path.parents:
        if (parent / "run.json").is_file():
            return parent
    return None


def checked_target(rd: RunDir, out: Path | None, *, force: bool = False) -> tuple[Path, int | None]:
    """(the path to write, the mode to keep or None for a new file), or a one-line UsageError.
    `out` None: the run's own report.html (replaced whatever it holds, but still a regular file)."""
    default = out is None
    if out is None:
        out, force = rd.report_html, True
        flag = str(out)
    else:
        flag = f"--out {out}"
    path = Path(os.path.abspath(out.expanduser()))
    if not path.parent.is_dir():
        raise UsageError(f"{flag}: its directory {path.parent} does not exist; create it or name a file in an "
                         "existing directory")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"{flag}: cannot be checked ({e.strerror}); name a file you can write") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{flag}: a symbolic link (the page is never written through a link); "
                         + ("remove it, or write the page elsewhere with --out" if default else "name the file itself"))
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, pipe or socket)"
        raise UsageError(f"{flag}: {kind}; " + ("move it aside, or write the page elsewhere with --out" if default else
                         f"name a file for the page, e.g. {path / 'report.html' if stat.S_ISDIR(st.st_mode) else '/tmp/report.html'}"))
    real = path.parent.resolve() / path.name
    run = _run_dir_of(real)
    if run is not None and real != run / "report.html":
        raise UsageError(f"{flag}: inside the run dir {run}, whose files are the run's records; write the page "
                         f"outside it, or leave out --out to write {run / 'report.html'}")
    if st is not None and not force and not is_own_page(path):
        raise UsageError(f"{flag}: exists and is not a report page selfimprove wrote; name another file, or add "
                         "--force to replace it")
    return path, (stat.S_IMODE(st.st_mode) if st is not None else None)
