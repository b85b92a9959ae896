"""The registry of built-in students: `model.name` ids the CPU engine resolves to a local
model directory itself (shipped weights, or built/converted once into the cache).

A student package registers one `BuiltinStudent` per id under the entry point group
`selfimprove.students` (name = the id, value = `module:ATTRIBUTE`), so the core names
no student and a plugin needs no edit here; this project's pyproject.toml registers the
embedded env's student and the generic selfimprove/smollm2-135m (rl/gguf_student.py).
An entry point is read from the installed metadata: a new one is seen after
`pip install -e .`.

Imports neither torch nor transformers, and neither does loading a registered object: the
orchestrator asks here, at bootstrap and before each launch, which ids exist, which extras
they need and where their directory lies.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from ..errors import ConfigError
from ..plugins import load_entry_points

GROUP = "selfimprove.students"

# From a checkout (the README's install); the extra's modules are what the engine imports.
LOCAL_INSTALL_FIX = 'pip install -e ".[local]"'
LOCAL_MODULES = ("torch", "transformers", "tokenizers", "safetensors")


@dataclass(frozen=True)
class Extra:
    """What a student needs installed in the engine's Python: a name for messages, the modules
    the engine imports for it, and the command that installs them."""

    what: str
    modules: tuple[str, ...]
    fix: str


LOCAL_EXTRA = Extra("the `local` extra", LOCAL_MODULES, LOCAL_INSTALL_FIX)


class StudentMaker(Protocol):
    """What `selfimprove student build|profile` needs of a student made from a recipe
    (the embedded env's student package has one): rebuild it, and measure its profile.json."""

    PROFILE_FILE: str
    PROFILE_N_PER_KIND: int
    PROFILE_K: int
    PROFILE_SEED: int

    def shipped_dir(self, model_id: str) -> Path: ...
    def build_and_save(self, out: Path, *, profile: bool, log: Callable[[str], None]) -> dict[str, Any]: ...
    def measure_profile(self, model_path: Path, *, n_per_kind: int, k: int, seed: int) -> dict[str, Any]: ...
    def compare_profiles(self, measured: dict[str, Any], reference: dict[str, Any]) -> list[str]: ...
    def read_json(self, path: Path) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class BuiltinStudent:
    """One built-in id.

    resolve(log)  the local model dir, built or converted into the cache on first use
                  (may import torch; only the engine calls it)
    on_disk()     that dir when it exists now, else None: no build, no torch (the
                  orchestrator reads its config.json and tokenizer for the limits it checks)
    extras        what must be importable in the engine's Python, in the order to report
    maker         None, or a zero-argument function returning the StudentMaker that rebuilds
                  and profiles it (imported on use: `selfimprove student build|profile`)
    """

    id: str
    resolve: Callable[[Callable[[str], None]], Path]
    on_disk: Callable[[], Path | None]
    extras: tuple[Extra, ...] = (LOCAL_EXTRA,)
    maker: Callable[[], StudentMaker] | None = None


@functools.cache
def registered() -> dict[str, BuiltinStudent]:
    """Every registered built-in student by id (entry points read and loaded once per process)."""
    return load_entry_points(GROUP, _not_a_student, error=ConfigError)


def _not_a_student(name: str, obj: Any) -> str | None:
    return None if isinstance(obj, BuiltinStudent) and obj.id == name else f"not a BuiltinStudent with id '{name}'"


def ids() -> list[str]:
    return sorted(registered())


BUILD_PREFIX = "build:"  # `build:ENV`: the generic recipe's student of ENV (rl/student_build.py), built on first use


def find(model_id: str) -> BuiltinStudent | None:
    if model_id.startswith(BUILD_PREFIX):
        from .student_build import entry  # light: imports neither torch nor verifiers

        found = entry(model_id)
        return None if found is None else BuiltinStudent(id=model_id, resolve=found[0], on_disk=found[1])
    return registered().get(model_id)



def get(model_id: str, label: str = "model.name") -> BuiltinStudent:
    """The registered student `model_id`, else one line listing the registered ids."""
    student = find(model_id)
    if student is None:
        raise ConfigError(f"{label} '{model_id}': no such built-in student; built-in: {', '.join(ids()) or 'none'} "
                          f"(registered under the entry point group {GROUP}; reinstall with `pip install -e .` "
                          "if one is missing)")
    return student


def importable(module: str) -> bool:
    """True when this interpreter (the local engine's: selfimprove-rl runs from this install) finds `module`."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_extra(model_id: str) -> tuple[str, list[str], str] | None:
    """The first extra of a built-in student whose modules are not importable: (what, missing, install command)."""
    student = find(model_id)
    for extra in student.extras if student else ():
        missing = [m for m in extra.modules if not importable(m)]
        if missing:
            return extra.what, missing, extra.fix
    return None


def all_extras() -> list[Extra]:
    """Every extra any registered student needs (crash_cause maps a missing module to its install command)."""
    return [extra for student in registered().values() for extra in student.extras]
