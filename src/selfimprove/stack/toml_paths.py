"""TOML files and dotted key paths: the dialect-neutral helpers every prime-rl config goes through.

Nothing here knows a prime-rl key: reading and atomically writing TOML, the deep merge prime-rl
(pydantic-config) applies to `@` files and CLI overrides, dotted-path access (`a.b.c`), the
kebab/snake spelling of CLI flags, and splitting an `rl` argv into its `@ file` and flag parts.
The dialect modules (`prime_rl.py`, `dialects.py`) and the phases import them from here.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from ..errors import ConfigError
from ..rundir import atomic_write_text

CONFIG_ERROR = "Config file error"  # prime-rl's own heading for these errors

# pydantic-config turns the string "None" into null before validation (TOML has no null).
NONE_LITERAL = "None"


def read_toml(path: Path) -> dict:
    """Parse a TOML file; a missing file or a syntax error is a ConfigError naming file and line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{CONFIG_ERROR}: config file not found: {path}") from None
    except OSError as e:
        raise ConfigError(f"{CONFIG_ERROR}: cannot read {path} ({e.strerror})") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{CONFIG_ERROR}: {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        lines = raw.count(b"\n") + 1
        where = f"line {m.group(1)}, column {m.group(2)}" if m else f"line {lines} (end of file)"
        msg = re.sub(r"\s*\(at .*\)$", "", str(e))
        raise ConfigError(f"{CONFIG_ERROR}: invalid TOML in {path} at {where}: {msg}") from None


def write_toml_text(path: Path, cfg: dict, header: str) -> None:
    """`header` + `cfg` rendered by tomli_w, written atomically; a None value is refused (TOML has no null)."""
    if _has_none(cfg):
        raise ConfigError(f"{CONFIG_ERROR}: {path}: a value is None (TOML has no null); drop the key instead")
    atomic_write_text(Path(path), header + tomli_w.dumps(cfg))


def _has_none(v: Any) -> bool:
    if isinstance(v, dict):
        return any(_has_none(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_none(x) for x in v)
    return v is None


def deep_merge(base: dict, override: dict) -> dict:
    """`override` on top of `base`: tables merge recursively, lists and scalars are replaced whole.

    prime-rl (pydantic-config) merges `@` files and CLI overrides exactly so; inputs are not mutated.
    """
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def get_path(cfg: dict, path: str, default: Any = None) -> Any:
    """The value at a dotted path of `cfg`, or `default` when absent or set to "None"."""
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node or node[part] == NONE_LITERAL:
            return default
        node = node[part]
    return node


def set_path(out: dict, path: str, value: Any) -> None:
    """Set a dotted path of `out`, creating (or replacing non-table values with) tables on the way."""
    parts = path.split(".")
    node = out
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value


def pop_path(cfg: dict, path: str) -> Any:
    """Remove a dotted path from `cfg` and return its value (None when absent); parent tables stay."""
    *parents, leaf = path.split(".")
    node: Any = cfg
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    return node.pop(leaf, None) if isinstance(node, dict) else None


def snake_path(flag: str) -> str:
    """A CLI flag's dotted path in TOML spelling: `orchestrator.batch-size` -> `orchestrator.batch_size`."""
    return ".".join(seg.replace("-", "_") for seg in flag.split("."))


def kebab(path: str) -> str:
    """A dotted TOML path in CLI spelling: `orchestrator.batch_size` -> `orchestrator.batch-size`."""
    return ".".join(seg.replace("_", "-") for seg in path.split("."))


def is_true(v: Any) -> bool:
    """A TOML or CLI boolean that pydantic would read as True."""
    return v is True or (isinstance(v, str) and v.lower() in ("true", "1")) or (isinstance(v, int) and v == 1)


def cli_literal(token: str) -> Any:
    """A CLI token as a TOML literal (int, float, bool, array, inline table), else JSON, else the string."""
    try:
        value = tomllib.loads(f"v = {token}")["v"]
        if isinstance(value, (bool, int, float, str, list, dict)):
            return value  # dates and times stay strings
    except tomllib.TOMLDecodeError:
        pass
    if token[:1] in ("{", "["):
        try:
            return json.loads(token)
        except json.JSONDecodeError:
            pass
    return token


def merge_argv_files(argv: list[str]) -> tuple[dict, list[Path], list[str]]:
    """An `rl` argv -> (its `@` files deep-merged left to right, the files in order, the other tokens).

    `--key @ file.toml` nests a file under `key`, as in prime-rl; the flags are left for the
    dialect to type (their types come from its key snapshot).
    """
    merged: dict = {}
    files: list[Path] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "@" or (tok.startswith("--") and i + 1 < len(argv) and argv[i + 1] == "@"):
            at = i if tok == "@" else i + 1
            if at + 1 >= len(argv):
                raise ConfigError(f"{CONFIG_ERROR}: @ must be followed by a config file path")
            path = Path(argv[at + 1])
            data = read_toml(path)
            if tok != "@":
                nested: dict = {}
                set_path(nested, snake_path(tok[2:]), data)
                data = nested
            merged = deep_merge(merged, data)
            files.append(path)
            i = at + 2
        else:
            rest.append(tok)
            i += 1
    return merged, files, rest
