"""Which Python interpreter loads the env: the engine's, as on a GPU box.

prime-rl runs from its own checkout and venv (`uv run rl` in $PRIME_RL_DIR) with its own
verifiers, so every step that imports verifiers or the hub env (the introspection probe,
the teacher's gen_dataset.py, the round trip, reward lint, decontamination, the generated
package install + verify) runs there, in a subprocess: the env is installed once, and the
verifiers that scores training is the one that checked the data. selfimprove itself never
needs the env importable.

    choose_env_python(None, "prime-rl", "/opt/prime-rl")   -> /opt/prime-rl/.venv/bin/python
    choose_env_python(None, "local", None)                 -> null: this interpreter (the CPU engine's)
    choose_env_python("/v/bin/python", "prime-rl", None)   -> /v/bin/python (--env-python), checked
    env_python_of(run_config)                              -> the path to run, never None
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..engines import procs
from ..errors import SelfImproveError, UsageError
from .detect import SCHEMA_FILE  # the file that marks a prime-rl checkout

ENGINE_VENV_PYTHON = Path(".venv") / "bin" / "python"  # where `uv sync` puts prime-rl's interpreter
CHECK_TIMEOUT_S = 120  # importing verifiers takes a few seconds; a cold disk, more

# Prints a marker only a running Python computes ("ok-42"; `echo` would print the source),
# then what we record. Importing verifiers last: a python without it still says it is one.
_CHECK = ("import json, sys; print('ok-' + str(6 * 7), flush=True); import verifiers; "
          "print(json.dumps({'prefix': sys.prefix, 'verifiers': getattr(verifiers, '__version__', None)}))")


@dataclass
class EnvPython:
    path: str | None  # None: selfimprove's own interpreter (sys.executable)
    source: str  # how it was picked, for run.json and the user
    verifiers_version: str | None = None  # the env interpreter's verifiers, when checked


def env_python_of(cfg) -> str:
    """The interpreter to run env work in for this run (run.json env_python, else this one).

    Checked at bootstrap; gone since (a venv rebuilt or deleted), it is named here, not through
    whatever fails first inside it (the `prime` CLI, an import)."""
    path = getattr(cfg, "env_python", None)
    if not path:
        return sys.executable
    if not os.access(path, os.X_OK) or not Path(path).is_file():
        source = getattr(cfg, "env_python_source", None) or "run.json"
        rebuild = (f"`uv sync` in {Path(path).parent.parent.parent}" if source.startswith("prime-rl's venv")
                   else "recreate that venv")
        raise SelfImproveError(f"run.json env_python {path}: {'not found' if not os.path.lexists(path) else 'not an executable file'} "
                         f"(picked at bootstrap: {source}); {rebuild} with verifiers and the env, then re-run this "
                         "command (or start a new run with `selfimprove bootstrap --env-python PATH`)")
    return path


def probe_python(path: str, what: str, fix: str) -> dict:
    """{'prefix', 'verifiers'} of interpreter `path`; UsageError (one line: `what`, the problem, `fix`) otherwise."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{what}: file not found; {fix}")
    if not p.is_file() or not os.access(p, os.X_OK):
        raise UsageError(f"{what}: not an executable file; {fix}")
    try:
        proc = procs.run_child([path, "-c", _CHECK], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S,
                               stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{what}: `python -c 'import verifiers'` took longer than {CHECK_TIMEOUT_S} s; {fix}") from None
    except OSError as e:
        raise UsageError(f"{what}: cannot run it ({e.strerror}); is it a Python interpreter? {fix}") from None
    lines = proc.stdout.strip().splitlines()
    if not lines or lines[0].strip() != "ok-42":
        raise UsageError(f"{what}: not a Python interpreter (it did not run `python -c`); {fix}")
    try:
        return json.loads(lines[-1])
    except (json.JSONDecodeError, IndexError):
        err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"{what}: cannot import verifiers ({err}); install it there "
                         f"(`{path} -m pip install verifiers`), or {fix}") from None


def _is_checkout(prime_rl_dir: str | None) -> bool:
    return bool(prime_rl_dir) and (Path(prime_rl_dir).expanduser() / SCHEMA_FILE).is_file()


def choose_env_python(explicit: str | None, engine: str, prime_rl_dir: str | None) -> EnvPython:
    """The run's env interpreter: --env-python wins; else, for prime-rl with a checkout in
    $PRIME_RL_DIR, its `.venv/bin/python`; else this interpreter. Checked before anything is
    written: it must run and import verifiers (UsageError, one line naming the fix)."""
    if explicit:
        path = os.path.abspath(os.path.expanduser(explicit))  # not resolved: a venv's python is a symlink
        fix = "pass --env-python the python of a venv that has verifiers and the env (e.g. $PRIME_RL_DIR/.venv/bin/python)"
        info = probe_python(path, f"--env-python {explicit}", fix)
        if engine == "local" and info.get("prefix") != sys.prefix:
            raise UsageError(f"--env-python {explicit}: the local CPU engine trains in selfimprove's own interpreter "
                             f"({sys.executable}) and loads the envs there; drop --env-python, or use --engine prime-rl")
        return EnvPython(path, "--env-python", info.get("verifiers"))
    if engine == "prime-rl" and _is_checkout(prime_rl_dir):
        root = Path(prime_rl_dir).expanduser()  # type: ignore[arg-type]
        path = str(root / ENGINE_VENV_PYTHON)
        fix = (f"run `uv sync` in {root} to make prime-rl's venv (where its verifiers loads the env), "
               "or pass --env-python PATH")
        info = probe_python(path, f"PRIME_RL_DIR={root}: {path}", fix)
        return EnvPython(path, f"prime-rl's venv (PRIME_RL_DIR={root})", info.get("verifiers"))
    why = ("the local CPU engine trains here" if engine == "local"
           else "no prime-rl checkout in PRIME_RL_DIR; pass --env-python for the engine's venv")
    return EnvPython(None, f"selfimprove's own interpreter {sys.executable} ({why})")


_MODULES = ("import json, pkgutil, sys; print(json.dumps(sorted({m.name for m in pkgutil.iter_modules() "
            "if not m.name.startswith('_') and m.name not in sys.stdlib_module_names})))")


def installed_modules(python: str | None = None) -> set[str]:
    """Top-level non-stdlib modules `python` can import (a listing of its sys.path: nothing imported)."""
    if not python or python == sys.executable:
        import pkgutil

        return {m.name for m in pkgutil.iter_modules()
                if not m.name.startswith("_") and m.name not in sys.stdlib_module_names}
    try:
        proc = procs.run_child([python, "-c", _MODULES], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
        return set(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (subprocess.TimeoutExpired, OSError, json.JSONDecodeError, IndexError):
        return set()
