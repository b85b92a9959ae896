"""Which dialect a run speaks: from the user's prime-rl checkout and from the env's API.

- prime-rl: `$PRIME_RL_DIR` (or the path given). Its config schema decides, read as text from
  `packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py` (no import: it needs
  Python 3.12 and prime-rl's own deps): `[[...train.source]]` + `group_size` is v1 (prime-rl
  >= 0.8), `[[...train.env]]` + `rollouts_per_example` is seed; the version in its
  pyproject.toml is reported beside it. A checkout that matches neither is refused.
- the env: its module's source, found with importlib without importing it (by the env
  interpreter, stack/env_python.py, in a subprocess when that is another venv's). `load_environment`
  is the classic API (seed); a `Taskset` subclass in the module is verifiers v1.
- `--stack seed|v1` overrides both; a mismatch (a classic env with prime-rl >= 0.8, which
  dropped `load_environment` envs in prime-rl #3226) fails before anything trains.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..engines import procs
from ..errors import ConfigError, UsageError

SEED, V1 = "seed", "v1"
SCHEMA_FILE = Path("packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py")
API_OF = {SEED: "classic verifiers (load_environment)", V1: "verifiers v1 (Taskset)"}


@dataclass
class Detected:
    stack: str  # "seed" | "v1"
    source: str  # how it was picked, for run.json and the user


def prime_rl_stack(prime_rl_dir: str | os.PathLike | None) -> tuple[str | None, str]:
    """(stack or None, what was seen) for a prime-rl checkout; None stack when there is no checkout."""
    if not prime_rl_dir:
        return None, "no PRIME_RL_DIR"
    root = Path(prime_rl_dir).expanduser()
    version = _version(root)
    schema = root / SCHEMA_FILE
    if not schema.is_file():  # not (yet) a checkout: canonical-config discovery still looks there
        return None, f"PRIME_RL_DIR={root} holds no {SCHEMA_FILE}"
    text = schema.read_text(encoding="utf-8", errors="replace")
    has_source = re.search(r"^\s+source:\s*list\[", text, re.M) is not None
    has_group = re.search(r"^\s+group_size:", text, re.M) is not None
    has_env_list = re.search(r"^\s+env:\s*list\[", text, re.M) is not None
    has_rpe = re.search(r"^\s+rollouts_per_example:", text, re.M) is not None
    seen = f"prime-rl {version} at {root}"
    if has_source and has_group and not has_env_list:
        return V1, f"{seen} (config schema: [[orchestrator.train.source]], group_size)"
    if has_env_list and has_rpe and not has_source:
        return SEED, f"{seen} (config schema: [[orchestrator.train.env]], rollouts_per_example)"
    raise UsageError(
        f"{seen}: its config schema matches neither supported dialect (seed: prime-rl 09e297743, May 2026; "
        f"v1: prime-rl 559b44772, Aug 2026); check out one of those commits, or pass --stack seed|v1 to force one"
    )


def _version(root: Path) -> str:
    try:
        return str(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "(version unknown)"


_ORIGIN = ("import importlib.util, sys\n"
           "try:\n    spec = importlib.util.find_spec(sys.argv[1])\n"
           "except (ImportError, ValueError):\n    spec = None\n"
           "print(spec.origin if spec is not None and spec.origin else '')")


def _origin(module: str, python: str | None) -> str | None:
    """Where `module`'s source lies for `python` (this interpreter when None), found without importing it."""
    if python is None or python == sys.executable:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # find_spec imports the parent package of a dotted name
            spec = None
        return spec.origin if spec is not None else None
    try:  # the env interpreter (stack/env_python.py): the env may be installed only there
        proc = procs.run_child([python, "-c", _ORIGIN, module], capture_output=True, text=True, timeout=120)
    except (subprocess.TimeoutExpired, OSError):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if proc.returncode == 0 and lines and lines[-1] else None


def _source(module: str, python: str | None = None) -> str | None:
    """A module's source text, found without importing it (None when `python` cannot import it)."""
    origin = _origin(module, python)
    if not origin or not origin.endswith(".py"):
        return None
    return Path(origin).read_text(encoding="utf-8", errors="replace")


def _defines_taskset(text: str) -> bool:
    return bool(re.search(r"class\s+\w+\s*\([^)]*Taskset[^)]*\)", text) or re.search(r"\bTaskset\s*\(", text))


def has_v1_wrapper(module: str, python: str | None = None) -> bool:
    """True when `<module>.v1` defines a Taskset (a classic env that also ships as a v1 taskset, like selfimprove_arith)."""
    text = _source(f"{module}.v1", python)
    return text is not None and _defines_taskset(text)


def env_api(module: str, python: str | None = None) -> tuple[str | None, str]:
    """(stack or None, what was seen) for an env module, from its source text, without importing it."""
    text = _source(module, python)
    if text is None:
        return None, f"env module '{module}' is not importable here"
    if _defines_taskset(text):
        return V1, f"env module '{module}' defines a verifiers v1 Taskset"
    if re.search(r"^def\s+load_environment\s*\(", text, re.M):
        return SEED, f"env module '{module}' has load_environment (classic verifiers)"
    return None, f"env module '{module}' shows neither load_environment nor a v1 Taskset"


def choose_stack(explicit: str | None, prime_rl_dir: str | None, env_module: str | None,
                 python: str | None = None) -> Detected:
    """The run's dialect: --stack wins; else prime-rl's checkout; else the env's API (as the env
    interpreter `python` finds it; this one when None); else seed.

    A prime-rl checkout and an env that disagree fail here, before training, with the fix.
    """
    if explicit is not None and explicit not in (SEED, V1):
        raise UsageError(f"--stack {explicit}: use 'seed' (prime-rl < 0.8, classic envs) or 'v1' (prime-rl >= 0.8, verifiers v1 Tasksets)")
    prime, prime_seen = prime_rl_stack(prime_rl_dir)
    env, env_seen = env_api(env_module, python) if env_module else (None, "no env module")
    if explicit:
        return Detected(explicit, f"--stack {explicit} ({prime_seen}; {env_seen})")
    if prime == V1 and env == SEED and has_v1_wrapper(env_module, python):  # the classic env's v1 Taskset is what runs
        return Detected(V1, f"{prime_seen}; {env_seen}, and a v1 Taskset in '{env_module}.v1'")
    if prime and env and prime != env:
        raise ConfigError(mismatch(prime, env, prime_seen, env_seen))
    if prime:
        return Detected(prime, f"{prime_seen}; {env_seen}")
    if env:
        return Detected(env, f"no prime-rl checkout found (PRIME_RL_DIR unset): following the env's API, {env_seen}")
    return Detected(SEED, f"no prime-rl checkout and {env_seen}: the seed dialect")


def mismatch(prime: str, env: str, prime_seen: str, env_seen: str) -> str:
    """One line: why the env can't run under this prime-rl, and what to do."""
    if prime == V1:
        return (f"{env_seen}, but {prime_seen} runs only verifiers v1 Tasksets (classic load_environment envs were "
                f"dropped in prime-rl #3226); wrap the env as a v1 Taskset (see selfimprove_arith.v1), or use "
                f"prime-rl 09e297743 with --stack seed")
    return (f"{env_seen}, but {prime_seen} runs only classic load_environment envs; use prime-rl >= 0.8 "
            f"(559b44772) with --stack v1, or give the env a load_environment")
