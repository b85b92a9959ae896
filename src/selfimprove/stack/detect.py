"""Which dialect a run speaks: from the user's prime-rl checkout and from the env's API.

- prime-rl: `$PRIME_RL_DIR` (or the path given). Its config schema decides, read as text from
  `packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py` (no import: it needs
  Python 3.12 and prime-rl's own deps): `[[...train.source]]` + `group_size` is v1 (prime-rl
  >= 0.8), `[[...train.env]]` + `rollouts_per_example` is seed; the version in its
  pyproject.toml is reported beside it (without the schema file, a pyproject.toml naming prime-rl
  decides by that version). A checkout that matches neither is refused, and so is a damaged
  pyproject.toml. An empty PRIME_RL_DIR counts as unset, and is reported so.
- the env: its module's source, found with importlib without importing it (by the env
  interpreter, stack/env_python.py, in a subprocess when that is another venv's). `load_environment`
  is the classic API (the seed dialect); a `Taskset` subclass in the module is verifiers v1.
- `--stack seed|v1` overrides detection, not the evidence: a checkout of the other dialect (with
  the prime-rl engine) or an env without the API that dialect loads is refused at bootstrap.
- a mismatch (a classic env with prime-rl >= 0.8, which dropped `load_environment` envs in
  prime-rl #3226) fails before anything trains.
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
from .verifiers_v1 import companion_id

SEED, V1 = "seed", "v1"
SCHEMA_FILE = Path("packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py")
API_OF = {SEED: "classic verifiers (load_environment)", V1: "verifiers v1 (Taskset)"}


@dataclass
class Detected:
    stack: str  # "seed" | "v1"
    source: str  # how it was picked, for run.json and the user


def prime_rl_stack(prime_rl_dir: str | os.PathLike | None) -> tuple[str | None, str]:
    """(stack or None, what was seen) for a prime-rl checkout; None stack when there is no checkout.

    The config schema decides; a dir without it whose pyproject.toml names prime-rl and its
    version (a partial checkout) is judged by that version (>= 0.8 is v1). A pyproject.toml that
    is there but damaged is refused: it is what `uv run rl` reads first."""
    if prime_rl_dir is None:
        return None, "no PRIME_RL_DIR"
    if not str(prime_rl_dir).strip():  # `export PRIME_RL_DIR=` is not a checkout in the cwd
        return None, "PRIME_RL_DIR is set but empty, treated as unset"
    root = Path(prime_rl_dir).expanduser()
    name, version = project_name_version(root)
    schema = root / SCHEMA_FILE
    seen = f"prime-rl {version or '(version unknown)'} at {root}"
    if not schema.is_file():  # not (yet) a checkout: canonical-config discovery still looks there
        by_version = stack_of_version(version) if name == "prime-rl" else None
        if by_version:
            return by_version, f"{seen} (its pyproject.toml version; no {SCHEMA_FILE})"
        return None, f"PRIME_RL_DIR={root} holds no {SCHEMA_FILE}"
    text = schema.read_text(encoding="utf-8", errors="replace")
    has_source = re.search(r"^\s+source:\s*list\[", text, re.M) is not None
    has_group = re.search(r"^\s+group_size:", text, re.M) is not None
    has_env_list = re.search(r"^\s+env:\s*list\[", text, re.M) is not None
    has_rpe = re.search(r"^\s+rollouts_per_example:", text, re.M) is not None
    if has_source and has_group and not has_env_list:
        return V1, f"{seen} (config schema: [[orchestrator.train.source]], group_size)"
    if has_env_list and has_rpe and not has_source:
        return SEED, f"{seen} (config schema: [[orchestrator.train.env]], rollouts_per_example)"
    raise UsageError(
        f"{seen}: its config schema matches neither supported dialect (seed: prime-rl 09e297743, May 2026; "
        f"v1: prime-rl 559b44772, Aug 2026); check out one of those commits, or pass --stack seed|v1 to force one"
    )


def stack_of_version(version: str | None) -> str | None:
    """The dialect of a prime-rl version: v1 from 0.8 on (main's config schema), seed before; None if unparsable."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)", version or "")
    if not m:
        return None
    return V1 if (int(m.group(1)), int(m.group(2))) >= (0, 8) else SEED


def project_name_version(root: Path) -> tuple[str | None, str | None]:
    """([project] name, version) of root/pyproject.toml; (None, None) when the file or the keys are absent.
    A file that is there but unreadable, not UTF-8, not TOML, or of the wrong shape: UsageError naming it."""
    path = root / "pyproject.toml"
    fix = (f"restore it (`git -C {root} checkout -- pyproject.toml`), or point PRIME_RL_DIR at a prime-rl "
           "checkout (or unset it)")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        raise UsageError(f"PRIME_RL_DIR={root}: cannot read {path} ({e.strerror}); {fix}") from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"PRIME_RL_DIR={root}: {path} is not UTF-8 text; {fix}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"PRIME_RL_DIR={root}: {path} is not valid TOML ({e}); {fix}") from None
    project = doc.get("project")
    if project is None:
        return None, None
    if not isinstance(project, dict):
        raise UsageError(f"PRIME_RL_DIR={root}: {path} [project] is a {type(project).__name__}, not a table; {fix}")
    name, version = project.get("name"), project.get("version")
    for key, value in (("name", name), ("version", version)):
        if value is not None and not isinstance(value, str):
            raise UsageError(f"PRIME_RL_DIR={root}: {path} project.{key} is a {type(value).__name__}, "
                             f"not a string; {fix}")
    return name, version


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


def _project_source(module: str, project: Path) -> str | None:
    """A module's source text inside an env project (`--env-path`) not installed yet: the layouts a
    pyproject.toml build finds (flat or src/, a module file or a package)."""
    for base in (project, project / "src"):
        for candidate in (base / f"{module}.py", base / module / "__init__.py"):
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8", errors="replace")
    return None


def _source(module: str, python: str | None = None, project: Path | None = None) -> str | None:
    """A module's source text, found without importing it (None when `python` cannot import it). With
    `project` (an --env-path project), its own files first: the env's API is then known before the install,
    as for an importable env (issue 36: --stack seed with a Taskset-only --env-path env was accepted)."""
    if project is not None and (text := _project_source(module, project)) is not None:
        return text
    origin = _origin(module, python)
    if not origin or not origin.endswith(".py"):
        return None
    return Path(origin).read_text(encoding="utf-8", errors="replace")


def _defines_taskset(text: str) -> bool:
    return bool(re.search(r"class\s+\w+\s*\([^)]*Taskset[^)]*\)", text) or re.search(r"\bTaskset\s*\(", text))


def has_v1_wrapper(module: str, python: str | None = None, project: Path | None = None) -> bool:
    """True when `<module>_v1` names a Taskset (a classic env that also ships as a v1 taskset, like
    selfimprove_arith beside selfimprove_arith_v1). That module may only re-export the Taskset, so
    its source counts when it defines one or imports one from the env's package."""
    text = _source(companion_id(module), python, project)
    return text is not None and (_defines_taskset(text) or re.search(r"Taskset\b", text) is not None)


def env_api(module: str, python: str | None = None, project: Path | None = None) -> tuple[str | None, str]:
    """(stack or None, what was seen) for an env module, from its source text, without importing it."""
    text = _source(module, python, project)
    if text is None:
        return None, f"env module '{module}' is not importable here"
    if _defines_taskset(text):
        return V1, f"env module '{module}' defines a verifiers v1 Taskset"
    if re.search(r"^def\s+load_environment\s*\(", text, re.M):
        return SEED, f"env module '{module}' has load_environment (classic verifiers)"
    return None, f"env module '{module}' shows neither load_environment nor a v1 Taskset"


def choose_stack(explicit: str | None, prime_rl_dir: str | None, env_module: str | None,
                 python: str | None = None, engine: str = "prime-rl", project: Path | None = None) -> Detected:
    """The run's dialect: --stack wins; else prime-rl's checkout; else the env's API (as the env
    interpreter `python` finds it; this one when None); else seed.

    A prime-rl checkout and an env that disagree fail here, before training, with the fix; so does
    a --stack that the evidence contradicts (the checkout's dialect, which only `engine` prime-rl
    runs, or an env without the API that dialect loads).
    """
    if explicit is not None and explicit not in (SEED, V1):
        raise UsageError(f"--stack {explicit}: use 'seed' (prime-rl < 0.8, classic envs) or 'v1' (prime-rl >= 0.8, verifiers v1 Tasksets)")
    prime, prime_seen = prime_rl_stack(prime_rl_dir)
    env, env_seen = env_api(env_module, python, project) if env_module else (None, "no env module")
    if explicit:
        check_explicit(explicit, engine, prime, prime_seen, env, env_seen, env_module, python, project)
        return Detected(explicit, f"--stack {explicit} ({prime_seen}; {env_seen})")
    if prime == V1 and env == SEED and has_v1_wrapper(env_module, python, project):  # the classic env's v1 Taskset is what runs
        return Detected(V1, f"{prime_seen}; {env_seen}, and a v1 Taskset in '{companion_id(env_module)}'")
    if prime and env and prime != env:
        raise ConfigError(mismatch(prime, env, prime_seen, env_seen))
    if prime:
        return Detected(prime, f"{prime_seen}; {env_seen}")
    unset = "PRIME_RL_DIR unset" if prime_rl_dir is None else prime_seen
    if env:
        return Detected(env, f"no prime-rl checkout found ({unset}): following the env's API, {env_seen}")
    return Detected(SEED, f"no prime-rl checkout ({unset}) and {env_seen}: the seed dialect")


PRIME_RL_OF = {SEED: "a prime-rl < 0.8 checkout (09e297743)", V1: "a prime-rl >= 0.8 checkout (559b44772)"}


def check_explicit(explicit: str, engine: str, prime: str | None, prime_seen: str, env: str | None, env_seen: str,
                   env_module: str | None, python: str | None, project: Path | None = None) -> None:
    """--stack is an override, not a way past the evidence: refuse (one line, the fix) a dialect that
    the prime-rl checkout the job will run cannot speak, or that cannot load the env."""
    other = V1 if explicit == SEED else SEED
    if engine == "prime-rl" and prime is not None and prime != explicit:
        raise UsageError(f"--stack {explicit}: {prime_seen} speaks the {prime} dialect; use --stack {prime} "
                         f"(or drop --stack), or point PRIME_RL_DIR at {PRIME_RL_OF[explicit]}")
    if explicit == V1 and env == SEED and not has_v1_wrapper(env_module, python, project):  # type: ignore[arg-type]
        raise UsageError(f"--stack v1: {env_seen} and no v1 Taskset (none in '{companion_id(env_module)}' either), and the v1 "
                         "dialect loads only verifiers v1 Tasksets; use --stack seed (or drop --stack), or wrap the "
                         "env as a v1 Taskset (see selfimprove_arith_v1)")
    if explicit == SEED and env == V1 and not has_load_environment(env_module, python, project):  # type: ignore[arg-type]
        raise UsageError(f"--stack seed: {env_seen} and no load_environment, and the seed dialect loads only classic "
                         f"envs; use --stack {other} (or drop --stack), or give the env a load_environment")


def has_load_environment(module: str, python: str | None = None, project: Path | None = None) -> bool:
    text = _source(module, python, project)
    return text is not None and re.search(r"^def\s+load_environment\s*\(", text, re.M) is not None


def mismatch(prime: str, env: str, prime_seen: str, env_seen: str) -> str:
    """One line: why the env can't run under this prime-rl, and what to do."""
    if prime == V1:
        return (f"{env_seen}, but {prime_seen} runs only verifiers v1 Tasksets (classic load_environment envs were "
                f"dropped in prime-rl #3226); wrap the env as a v1 Taskset (see selfimprove_arith_v1), or use "
                f"prime-rl 09e297743 with --stack seed")
    return (f"{env_seen}, but {prime_seen} runs only classic load_environment envs; use prime-rl >= 0.8 "
            f"(559b44772) with --stack v1, or give the env a load_environment")
