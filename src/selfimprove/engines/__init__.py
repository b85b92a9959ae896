"""Engines: how a training job is launched. An engine is a command with prime-rl's
`rl` contract (`@ a.toml @ b.toml --dotted.key value ... --output-dir D`, writes
the seed-dialect output layout, exits 0 on success). Two ship:

- `prime-rl`: `uv run rl` on a GPU machine (env SELFIMPROVE_PRIME_RL_CMD overrides,
  e.g. "uv run --project /opt/prime-rl rl");
- `local`: `selfimprove-rl`, the CPU engine of this package (env SELFIMPROVE_RL_CMD
  overrides; tests point it at a fake).

`engine_command` is the ONLY place the orchestrator branches on the engine; the
job runner (`engines.jobs`) and every phase treat the command as opaque.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from ..errors import SelfImproveError
from ..models import RunConfig

PRIME_RL_ENV = "SELFIMPROVE_PRIME_RL_CMD"
LOCAL_ENV = "SELFIMPROVE_RL_CMD"
PRIME_RL_DEFAULT = ["uv", "run", "rl"]
LOCAL_SCRIPT = "selfimprove-rl"


class EngineNotFound(SelfImproveError):
    """The engine's executable is not on PATH (or not executable)."""


def _split(env_var: str) -> list[str] | None:
    raw = os.environ.get(env_var, "").strip()
    return shlex.split(raw) if raw else None


def _local_default() -> list[str]:
    # Prefer the script next to the running interpreter: a venv's bin/ is often
    # not on PATH when selfimprove is called by its absolute path.
    beside = Path(sys.executable).parent / LOCAL_SCRIPT
    return [str(beside)] if beside.is_file() else [LOCAL_SCRIPT]


def engine_command(cfg: RunConfig) -> list[str]:
    """The argv prefix that launches `cfg.engine`; raises EngineNotFound if its executable is missing."""
    if cfg.engine_command:
        cmd, origin = list(cfg.engine_command), "run.json engine_command"
    elif cfg.engine == "prime-rl":
        env = _split(PRIME_RL_ENV)
        cmd, origin = (env, f"${PRIME_RL_ENV}") if env else (list(PRIME_RL_DEFAULT), "engine prime-rl")
    else:
        env = _split(LOCAL_ENV)
        cmd, origin = (env, f"${LOCAL_ENV}") if env else (_local_default(), "engine local")
    if not cmd:
        raise EngineNotFound(f"{origin}: empty command; set it to the engine's launcher, e.g. {PRIME_RL_DEFAULT}")
    if shutil.which(cmd[0]) is None:
        raise EngineNotFound(f"{origin}: '{cmd[0]}' is not on PATH or not executable; {_fix_hint(cfg, cmd[0])}")
    return cmd


def _fix_hint(cfg: RunConfig, exe: str) -> str:
    if cfg.engine == "local" and not cfg.engine_command:
        return f"install the CPU engine (pip install 'selfimprove[local]') or set ${LOCAL_ENV}"
    if exe == "uv":
        return f"install uv (https://docs.astral.sh/uv/) or set ${PRIME_RL_ENV} to prime-rl's launcher"
    return f"fix engine_command in run.json or set ${PRIME_RL_ENV if cfg.engine == 'prime-rl' else LOCAL_ENV}"
