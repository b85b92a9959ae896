"""Where built-in students are built or converted on first use, and how: once, atomically.

    ${SELFIMPROVE_CACHE:-~/.cache/selfimprove}/students/<id with / as -->-<tag>/

(<tag> names what made the copy, e.g. a recipe hash, so a changed recipe or conversion never
reuses a stale one.) Standard library only: the orchestrator asks where a copy lives before
any job starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def cache_root() -> Path:
    return Path(os.environ.get("SELFIMPROVE_CACHE") or Path.home() / ".cache" / "selfimprove")


def cache_dir(model_id: str, tag: str) -> Path:
    """The cache directory of built-in `model_id` made by `tag`."""
    return cache_root() / "students" / f"{model_id.replace('/', '--')}-{tag}"


def build_into_cache(final: Path, model_id: str, build: Callable[[Path], None]) -> Path:
    """`final`, built once by `build(tmp)` into a temporary sibling and renamed into place.

    Under a lock file, so concurrent first uses wait for one builder; READY (the
    done-marker) is written last, so a killed build leaves no directory that
    passes for finished, only a temporary one that the next build ignores."""
    if (final / "READY").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "READY").is_file():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            build(tmp)
            (tmp / "READY").write_text(model_id + "\n")
            if not (final / "READY").is_file():  # never swap out a finished student under a reader
                with contextlib.suppress(FileNotFoundError):
                    shutil.rmtree(final)  # a half-copied leftover without READY
                os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final
