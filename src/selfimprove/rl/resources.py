"""Where the shipped `configs/...` and `templates/...` live: the repo root in an
editable install, `selfimprove/_data/` in a wheel. One implementation exists
(`selfimprove.resources`); this module re-exports it for the engine's callers."""

from __future__ import annotations

from ..resources import project_configs_dirs, project_file

__all__ = ["project_file", "project_configs_dirs"]
