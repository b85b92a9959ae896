"""Find the project's shipped files (templates/, configs/, examples/).

In a source checkout (editable install) they sit at the repository root; in a
wheel they are force-included under `selfimprove/_data/` (see pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

from .errors import SelfImproveError

_PACKAGE_DIR = Path(__file__).resolve().parent


def project_file(relpath: str) -> Path:
    """Path of `templates/...` or `configs/...`, wherever this install keeps them."""
    for base in (_PACKAGE_DIR / "_data", _PACKAGE_DIR.parents[1]):
        candidate = base / relpath
        if candidate.exists():
            return candidate
    raise SelfImproveError(f"{relpath}: not found in this selfimprove install; reinstall selfimprove")


def project_configs_dirs() -> list[Path]:
    """Where the project's own canonical configs (configs/<dataset>/rl.toml) may live."""
    return [p for p in (_PACKAGE_DIR / "_data" / "configs", _PACKAGE_DIR.parents[1] / "configs") if p.is_dir()]
