"""A prime-rl key snapshot: which dotted keys an `rl` config may hold, and their types.

Each dialect has one snapshot (`prime_rl_seed_keys.json` for prime-rl 09e297743,
`prime_rl_v08_keys.json` for main at 559b44772), derived from prime-rl's own pydantic classes
(`RLConfig` of `packages/prime-rl-configs`); its `derived_from` header says how. Every function
takes the snapshot's file name (the seed dialect's by default). This module only reads it:

- `unknown_keys(cfg)`  keys prime-rl would reject with "extra inputs are not permitted";
- `type_errors(cfg)`   leaves whose TOML type clearly cannot validate;
- `gpu_only_keys(cfg)` sections present that only matter on GPUs (a CPU engine ignores them);
- `shared_conflicts(cfg)` a shared key set both at top level and inside a section;
- `alias_conflicts(cfg)` / `normalise_aliases(cfg)` a key given in two spellings of one table
  (`max_tokens` beside `max_completion_tokens`), and the rename of old spellings to canonical;
- `parse_cli_overrides(args)` `--dotted.kebab-key value` tokens -> a nested dict, typed by
  the key set the way prime-rl's CLI types them.

The cross-field rules built on these are `prime_rl_checks.py`'s.

What is not covered: value ranges of rarely used keys, rules that need prime-rl's runtime (GPU
counts, installed envs), and the members of discriminated unions are merged into one key set
(`trainer.optim` accepts the keys of every optimizer type; prime-rl would reject an AdamW-only
key under `type = "muon"`).
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import ConfigError
from .toml_paths import CONFIG_ERROR, NONE_LITERAL, cli_literal, get_path, set_path, snake_path

KEYS_FILE = "prime_rl_seed_keys.json"

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # prime-rl's default [model] name


# A table whose keys belong to the user's code, not to prime-rl (a v1 taskset's config fields):
# in a snapshot, this key stands for "any other key, of any type".
OPEN_KEY = "*"


@lru_cache(maxsize=4)
def load_key_tree(keys_file: str = KEYS_FILE) -> dict:
    """The whole JSON document (header + `keys` tree) of one dialect's snapshot, read once from the package data."""
    text = resources.files("selfimprove.stack").joinpath(keys_file).read_text(encoding="utf-8")
    return json.loads(text)


def _keys(keys_file: str = KEYS_FILE) -> dict:
    return load_key_tree(keys_file)["keys"]


def _child(node: dict, key: str) -> Any:
    return node[key] if key in node else node.get(OPEN_KEY)


def renderer_auto_models() -> frozenset[str]:
    """Model ids that prime-rl's `[orchestrator.renderer] name = "auto"` accepts (a conservative subset)."""
    return frozenset(load_key_tree()["renderer_auto_models"])


def node_at(path: str, keys_file: str = KEYS_FILE) -> Any:
    """The key-tree node of a dotted path (list-of-table nodes are entered transparently), or None."""
    node: Any = _keys(keys_file)
    for part in path.split("."):
        if isinstance(node, list):
            node = node[0]
        if not isinstance(node, dict) or _child(node, part) is None:
            return None
        node = _child(node, part)
    return node


def leaf_type(path: str, keys_file: str = KEYS_FILE) -> str | None:
    """The type string of a leaf ("int", "str|int", ...), "table"/"tables" for sections, None if unknown."""
    node = node_at(path, keys_file)
    if node is None:
        return None
    if isinstance(node, dict):
        return "table"
    if isinstance(node, list):
        return "tables"
    return node


# ---------------------------------------------------------------- unknown keys


def unknown_keys(cfg: dict, keys_file: str = KEYS_FILE) -> list[str]:
    """Dotted paths in `cfg` that are not in the snapshot, sorted.

    List-of-table entries are checked element by element and named with their index,
    e.g. `orchestrator.train.env[1].bogus`.
    """
    out: list[str] = []
    _walk_unknown(cfg, _keys(keys_file), "", out)
    return sorted(out)


def _walk_unknown(value: Any, node: Any, path: str, out: list[str]) -> None:
    if isinstance(node, dict) and isinstance(value, dict):
        for key, sub in value.items():
            p = f"{path}.{key}" if path else str(key)
            if _child(node, key) is None:
                out.append(p)
            else:
                _walk_unknown(sub, _child(node, key), p, out)
    elif isinstance(node, list) and isinstance(value, list):
        for i, item in enumerate(value):
            _walk_unknown(item, node[0], f"{path}[{i}]", out)
    # leaves, and shape mismatches (reported by type_errors), end the walk


# ---------------------------------------------------------------- types


def type_errors(cfg: dict, keys_file: str = KEYS_FILE) -> list[str]:
    """"orchestrator.batch_size: expected int, got str" for every leaf whose type clearly mismatches.

    Mirrors pydantic's lax mode where prime-rl relies on it (CLI values arrive as strings, so a
    numeric string for an int is fine), but flags booleans given for numbers: TOML has real
    booleans, and `batch_size = true` is a mistake even though pydantic would read it as 1.
    """
    out: list[str] = []
    _walk_types(cfg, _keys(keys_file), "", out)
    return out


def _tname(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "table"
    return type(v).__name__


def _walk_types(value: Any, node: Any, path: str, out: list[str]) -> None:
    if value == NONE_LITERAL:
        return
    if isinstance(node, dict):
        if not isinstance(value, dict):
            out.append(f"{path}: expected a table, got {_tname(value)}")
            return
        for key, sub in value.items():
            if _child(node, key) is not None:
                _walk_types(sub, _child(node, key), f"{path}.{key}" if path else key, out)
    elif isinstance(node, list):
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            out.append(f"{path}: expected an array of tables ([[{path}]]), got {_tname(value)}")
            return
        for i, item in enumerate(value):
            _walk_types(item, node[0], f"{path}[{i}]", out)
    elif not any(_fits(value, t) for t in node.split("|")):
        out.append(f"{path}: expected {node}, got {_tname(value)}")


def _fits(v: Any, t: str) -> bool:
    if t == "any":
        return True
    if t == "str":
        return isinstance(v, str)
    if t == "bool":
        if isinstance(v, bool):
            return True
        if isinstance(v, int):
            return v in (0, 1)
        return isinstance(v, str) and v.lower() in ("true", "false", "1", "0", "yes", "no", "on", "off")
    if t == "int":
        if isinstance(v, bool):
            return False
        if isinstance(v, int):
            return True
        if isinstance(v, float):
            return v.is_integer()
        return isinstance(v, str) and _parses(v.strip(), int)
    if t == "float":
        if isinstance(v, bool):
            return False
        if isinstance(v, (int, float)):
            return True
        return isinstance(v, str) and _parses(v.strip(), float)
    if t == "list":
        return isinstance(v, list)
    if t == "dict":
        return isinstance(v, dict)
    return True  # a type string this module does not know: let prime-rl judge


def _parses(s: str, conv: type) -> bool:
    try:
        conv(s)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- GPU-only and shared keys


def gpu_only_keys(cfg: dict, keys_file: str = KEYS_FILE) -> list[str]:
    """Sections or keys present in `cfg` that only matter on GPUs (vLLM, parallelism, kernels), sorted."""
    return sorted(p for p in load_key_tree(keys_file)["gpu_only"] if _present(cfg, p))


def _present(cfg: dict, path: str) -> bool:
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return node is not None


def shared_conflicts(cfg: dict, keys_file: str = KEYS_FILE) -> list[tuple[str, str]]:
    """(shared, sub) pairs set in both places; prime-rl refuses these (see propagate_shared_fields)."""
    out = []
    for shared, subs in load_key_tree(keys_file)["shared_fields"].items():
        if get_path(cfg, shared) is None:
            continue
        out.extend((shared, sub) for sub in subs if get_path(cfg, sub) is not None)
    return out


# ---------------------------------------------------------------- alias spellings


def _alias_pairs(keys_file: str) -> list[tuple[str, str]]:
    """(old, canonical) dotted paths from the snapshot's `aliases`, `[]` marking an array of tables.

    The `<model field>` entries and the [orchestrator.model] -> [orchestrator.student] rename are
    left out: prime-rl reshapes those tables (flat model keys move one level down), which is not
    a rename, and `orchestrator.model.name` equal to `model.name` is accepted as it is.
    """
    return [(old, new) for old, new in load_key_tree(keys_file).get("aliases", {}).items()
            if "<" not in old and old != "orchestrator.model"]


def _tables_at(cfg: Any, parts: list[str], where: str):
    """(table, display path) for each table a `[]`-marked dotted prefix reaches in `cfg`."""
    if not parts:
        if isinstance(cfg, dict):
            yield cfg, where
        return
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    key = head[:-2] if many else head
    if not isinstance(cfg, dict) or key not in cfg:
        return
    p = f"{where}.{key}" if where else key
    if many:
        for i, item in enumerate(cfg[key] if isinstance(cfg[key], list) else []):
            yield from _tables_at(item, rest, f"{p}[{i}]")
    else:
        yield from _tables_at(cfg[key], rest, p)


def _alias_sites(cfg: dict, keys_file: str):
    """(table, display prefix, old leaf, table path of the canonical spelling, canonical leaf) per alias present."""
    for old, new in _alias_pairs(keys_file):
        old_parts, new_parts = old.split("."), new.split(".")
        common = 0
        while common < min(len(old_parts), len(new_parts)) - 1 and old_parts[common] == new_parts[common]:
            common += 1
        for table, where in _tables_at(cfg, old_parts[:common], ""):
            old_rest, new_rest = old_parts[common:], new_parts[common:]
            if len(old_rest) == 1 and old_rest[0] in table:
                yield table, where, old_rest[0], new_rest


def alias_conflicts(cfg: dict, keys_file: str = KEYS_FILE) -> list[str]:
    """"a.max_tokens and a.max_completion_tokens" for each table holding a key in two spellings.

    prime-rl reads both spellings into one field and refuses a table that gives both.
    """
    out = []
    for table, where, old_leaf, new_rest in _alias_sites(cfg, keys_file):
        if get_path(table, ".".join(new_rest)) is not None:
            pre = f"{where}." if where else ""
            out.append(f"{pre}{old_leaf} and {pre}{'.'.join(new_rest)}")
    return out


def normalise_aliases(cfg: dict, keys_file: str = KEYS_FILE) -> tuple[dict, list[str]]:
    """(a copy of `cfg` with old spellings moved to prime-rl's canonical names, "old -> new" notes).

    A key given in both spellings is a ConfigError naming both: prime-rl refuses it, and picking
    one silently would train with a value the user may not have meant.
    """
    conflicts = alias_conflicts(cfg, keys_file)
    if conflicts:
        raise ConfigError(f"{CONFIG_ERROR}: {conflicts[0]} are the same key in two spellings; keep one "
                          f"(prime-rl refuses both in one table){_more(conflicts)}")
    out = copy.deepcopy(cfg)
    notes: list[str] = []
    while True:  # re-scan after each move: a moved table may itself hold an old spelling
        site = next(iter(_alias_sites(out, keys_file)), None)
        if site is None:
            return out, notes
        table, where, old_leaf, new_rest = site
        pre = f"{where}." if where else ""
        set_path(table, ".".join(new_rest), table.pop(old_leaf))
        notes.append(f"{pre}{old_leaf} -> {pre}{'.'.join(new_rest)}")



def _more(items: list[str]) -> str:
    return f" (and {len(items) - 1} more: {', '.join(items[1:4])}{', ...' if len(items) > 4 else ''})" if len(items) > 1 else ""



def model_name(cfg: dict) -> str:
    """The student model prime-rl's orchestrator would use for `cfg`."""
    for path in ("orchestrator.student.model.name", "orchestrator.model.model.name", "orchestrator.model.name",
                 "orchestrator.student.name", "model.name"):
        if (v := get_path(cfg, path)) is not None:
            return str(v)
    return DEFAULT_MODEL



def needs_default_renderer(model: str, canonical: dict | None = None) -> bool:
    """True when `model` under `canonical` would hit the renderer 'auto' rejection (so write name='default')."""
    if canonical is not None and get_path(canonical, "orchestrator.renderer.name", "auto") != "auto":
        return False
    return model not in renderer_auto_models()



# ---------------------------------------------------------------- CLI tokens -> keys

_BOOL_WORDS = {"true": True, "True": True, "1": True, "false": False, "False": False, "0": False}


def parse_cli_overrides(args: list[str], keys_file: str = KEYS_FILE) -> dict:
    """`--a.b-c value` tokens -> nested dict with snake_case keys.

    Values are TOML literals when they parse as one, except where the key set says the leaf
    is a string: there the raw token is kept, as prime-rl does (`--model.name 123` is "123").
    Bare `--flag` is True and `--no-flag` False; a bare table flag (`--wandb`) enables the
    table with defaults, `--no-wandb` disables it. `--flag=value` works too.
    """
    out: dict = {}
    i, n = 0, len(args)
    while i < n:
        token = args[i]
        if not token.startswith("--") or token == "--":
            raise ConfigError(f"{CONFIG_ERROR}: unrecognized argument '{token}' (expected --dotted.key value or @ file.toml)")
        flag, _, inline = token[2:].partition("=")
        has_inline = "=" in token[2:]
        path = snake_path(flag)
        nxt = args[i + 1] if i + 1 < n else None
        takes_next = nxt is not None and not nxt.startswith("--") and not has_inline

        if path.startswith("no_") and not has_inline and leaf_type(path, keys_file) is None:
            target = path[3:]
            kind = leaf_type(target, keys_file)
            set_path(out, target, NONE_LITERAL if kind == "table" else False)
            i += 1
            continue

        kind = leaf_type(path, keys_file)
        if kind == "table":
            raw = inline if has_inline else (nxt if takes_next else None)
            set_path(out, path, NONE_LITERAL if raw == NONE_LITERAL else (cli_literal(raw) if raw is not None else {}))
            i += 2 if (takes_next and not has_inline) else 1
            continue
        if kind == "bool":
            if has_inline:
                set_path(out, path, _BOOL_WORDS.get(inline, inline))
            elif takes_next and nxt in _BOOL_WORDS:
                set_path(out, path, _BOOL_WORDS[nxt])
                i += 1
            else:
                set_path(out, path, True)
            i += 1
            continue
        if has_inline:
            set_path(out, path, inline if kind == "str" else cli_literal(inline))
            i += 1
        elif takes_next:
            set_path(out, path, nxt if kind == "str" else cli_literal(nxt))
            i += 2
        elif kind is None:
            set_path(out, path, True)  # an unknown bare flag; validation names it
            i += 1
        else:
            raise ConfigError(f"{CONFIG_ERROR}: --{flag} requires a value")
    return out
