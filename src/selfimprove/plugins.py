"""Entry points: how an installed package plugs a built-in student or a default teacher into selfimprove.

One loader for every group (`selfimprove.students`, `selfimprove.teachers`), so a broken plugin is
named the same way wherever it is read: the group, the entry point and its value, what is wrong,
and the fix. Imports nothing of selfimprove: the registries above it (rl/builtin_students.py,
commands/run.py) say what a valid object is.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any, Callable


def load_entry_points(group: str, problem: Callable[[str, Any], str | None], *,
                      error: type[Exception], fix: str = "") -> dict[str, Any]:
    """Every entry point of `group`, loaded, by name. The first of a name wins (the same distribution
    seen twice on sys.path), as for imports. `problem(name, obj)` says what is wrong with a loaded
    object, or None; a failed load or a problem raises `error` in one line ending with `fix`."""
    loaded: dict[str, Any] = {}
    for ep in importlib.metadata.entry_points(group=group):
        if ep.name in loaded:
            continue
        where = f"entry point {group} '{ep.name}' = {ep.value}"
        try:
            obj = ep.load()
        except Exception as e:  # a broken plugin is named, not a traceback from importlib
            raise error(f"{where}: cannot load it ({type(e).__name__}: {e}); fix or uninstall the package that "
                        f"declares it{fix}") from None
        wrong = problem(ep.name, obj)
        if wrong:
            raise error(f"{where}: {wrong}; fix the package that declares it{fix}")
        loaded[ep.name] = obj
    return loaded
