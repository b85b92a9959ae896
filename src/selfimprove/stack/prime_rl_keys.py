"""The prime-rl seed dialect's key set: which dotted keys an `rl` config may hold, and their types.

The data lives in `prime_rl_seed_keys.json`, derived from prime-rl's own pydantic classes
(`RLConfig` of `packages/prime-rl-configs` at commit 09e297743); its `derived_from` header says
how. This module only reads it:

- `unknown_keys(cfg)`  keys prime-rl would reject with "extra inputs are not permitted";
- `type_errors(cfg)`   leaves whose TOML type clearly cannot validate;
- `gpu_only_keys(cfg)` sections present that only matter on GPUs (a CPU engine ignores them);
- `shared_conflicts(cfg)` a shared key set both at top level and inside a section;
- `alias_conflicts(cfg)` / `normalise_aliases(cfg)` a key given in two spellings of one table
  (`max_tokens` beside `max_completion_tokens`), and the rename of old spellings to canonical;
- `validate_config(cfg)` all of the above plus the cross-field rules prime-rl checks before
  it touches a GPU, as one ConfigError line naming the key and the fix;
- `parse_cli_overrides(args)` `--dotted.kebab-key value` tokens -> a nested dict, typed by
  the key set the way prime-rl's CLI types them.

What is not covered: value ranges of rarely used keys, rules that need prime-rl's runtime (GPU
counts, installed envs), and the members of discriminated unions are merged into one key set
(`trainer.optim` accepts the keys of every optimizer type; prime-rl would reject an AdamW-only
key under `type = "muon"`).
"""

from __future__ import annotations

import json
import tomllib
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import ConfigError

KEYS_FILE = "prime_rl_seed_keys.json"

# pydantic-config turns the string "None" into null before validation (TOML has no null).
NONE_LITERAL = "None"

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # prime-rl's default [model] name
CONFIG_ERROR = "Config file error"  # prime-rl's own heading for these errors


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
    """Dotted paths in `cfg` that are not in the seed-dialect key set, sorted.

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
    import copy

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


# ---------------------------------------------------------------- the other dialect's keys

# prime-rl >= 0.8 spellings the seed dialect refuses, and the seed's name for each: a config of
# the other dialect (a canonical rl.toml, a teacher's overrides.toml) is named as such.
V08_KEYS = {
    "orchestrator.group_size": "orchestrator.rollouts_per_example",
    "orchestrator.eval.group_size": "orchestrator.eval.rollouts_per_example",
    "orchestrator.train.source": "[[orchestrator.train.env]] with id and args",
    "orchestrator.eval.source": "[[orchestrator.eval.env]] with id and args",
    "orchestrator.eval.skip_first_step": "orchestrator.eval.eval_base_model (inverted)",
    "resume": "ckpt.resume_step",
    "clean": "clean_output_dir",
    "monitors": "[wandb]",
    "run": "--output-dir (the seed has no run name)",
}


def other_dialect_hint(path: str, table: dict[str, str] | None = None, other: str = "prime-rl >= 0.8") -> str | None:
    """"'x' is a <other> key; here it is y" when `path` (or a table above it) is in `table` (default V08_KEYS)."""
    table = V08_KEYS if table is None else table
    parts = path.split("[")[0].split(".")
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        if key in table:
            return f"'{path}' is a {other} key; here it is {table[key]}"
    return None


# ---------------------------------------------------------------- cross-field rules


def get_path(cfg: dict, path: str, default: Any = None) -> Any:
    """The value at a dotted path of `cfg`, or `default` when absent or set to "None"."""
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node or node[part] == NONE_LITERAL:
            return default
        node = node[part]
    return node


def _more(items: list[str]) -> str:
    return f" (and {len(items) - 1} more: {', '.join(items[1:4])}{', ...' if len(items) > 4 else ''})" if len(items) > 1 else ""


def validate_config(cfg: dict, *, partial: bool = False) -> None:
    """Raise ConfigError (one line naming the key and the fix) where prime-rl would refuse `cfg`.

    Checks: [trainer]/[orchestrator] present; no unknown keys; leaf types; one key in two alias
    spellings of a table (max_tokens beside max_completion_tokens); a shared key set at
    top level and in a section; batch_size divisible by rollouts_per_example; wandb offline vs
    shared; env names unique and ratios on all or none; ckpt resume_step < max_steps (the seed's
    KeyError 'perf/peak_memory' crash); the renderer 'auto' model rule. `partial=True` (an
    overlay file) checks only keys and types.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"{CONFIG_ERROR}: a config must be a table, got {type(cfg).__name__}")
    if not partial:
        for section in load_key_tree()["required_sections"]:
            if not isinstance(cfg.get(section), dict):
                raise ConfigError(f"{CONFIG_ERROR}: missing [{section}] section (prime-rl requires [trainer] and [orchestrator], even empty); add '[{section}]'")
    unknown = unknown_keys(cfg)
    if unknown:
        hint = next((h for h in (other_dialect_hint(u) for u in unknown) if h), None)
        if hint:
            raise ConfigError(f"{CONFIG_ERROR}: {hint} (this run writes the seed dialect, prime-rl < 0.8); rename it, "
                              f"or run with --stack v1 for prime-rl >= 0.8")
        raise ConfigError(f"{CONFIG_ERROR}: unknown key '{unknown[0]}' (extra inputs are not permitted){_more(unknown)}")
    bad = type_errors(cfg)
    if bad:
        raise ConfigError(f"{CONFIG_ERROR}: {bad[0]}{_more(bad)}")
    twice = alias_conflicts(cfg)
    if twice:
        raise ConfigError(f"{CONFIG_ERROR}: {twice[0]} are the same key in two spellings; keep one "
                          f"(prime-rl refuses both in one table){_more(twice)}")
    if partial:
        return
    conflicts = shared_conflicts(cfg)
    if conflicts:
        shared, sub = conflicts[0]
        raise ConfigError(f"{CONFIG_ERROR}: '{shared}' is set at top level and as '{sub}'; set it in one place (prime-rl refuses shared-field duplicates)")
    _check_batch(cfg)
    _check_wandb(cfg)
    for group in ("train", "eval"):
        _check_envs(cfg, group)
    _check_ckpt(cfg)
    _check_model_names(cfg)
    _check_renderer(cfg)


def _check_batch(cfg: dict) -> None:
    bs, tbs = get_path(cfg, "orchestrator.batch_size"), get_path(cfg, "orchestrator.token_batch_size")
    rpe = get_path(cfg, "orchestrator.rollouts_per_example", 1)
    if bs is not None and tbs is not None:
        raise ConfigError(f"{CONFIG_ERROR}: orchestrator.batch_size and orchestrator.token_batch_size are both set; set exactly one")
    for key, val in (("orchestrator.batch_size", bs), ("orchestrator.rollouts_per_example", rpe)):
        if val is not None and int(val) < 1:
            raise ConfigError(f"{CONFIG_ERROR}: {key} = {val}: must be >= 1")
    if bs is not None and int(bs) % int(rpe):
        raise ConfigError(
            f"{CONFIG_ERROR}: orchestrator.batch_size = {bs} is not divisible by orchestrator.rollouts_per_example = {rpe}; "
            f"batch_size counts rollouts, use a multiple such as {max(1, int(bs) // int(rpe)) * int(rpe)}"
        )


def _check_wandb(cfg: dict) -> None:
    if isinstance(cfg.get("wandb"), dict) and is_true(get_path(cfg, "wandb.offline")) and is_true(get_path(cfg, "wandb.shared", True)):
        raise ConfigError(f"{CONFIG_ERROR}: wandb.offline = true needs wandb.shared = false (shared W&B runs need a server)")


def is_true(v: Any) -> bool:
    """A TOML or CLI boolean that pydantic would read as True."""
    return v is True or (isinstance(v, str) and v.lower() in ("true", "1")) or (isinstance(v, int) and v == 1)


def _check_envs(cfg: dict, group: str) -> None:
    envs = get_path(cfg, f"orchestrator.{group}.env")
    if group == "train" and envs is None:
        envs = get_path(cfg, "orchestrator.env")  # deprecated spelling, still accepted
    if not envs:
        return
    key = f"orchestrator.{group}.env"
    names = [e.get("name") or str(e.get("id", "reverse-text")).split("@")[0] for e in envs]
    dupes = sorted({x for x in names if names.count(x) > 1})
    if dupes:
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] names are not unique ({', '.join(dupes)}); give each block a distinct name")
    if "all" in names:
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] name 'all' is reserved by prime-rl; pick another name")
    ratios = [e.get("ratio") for e in envs]
    if any(r is None for r in ratios) and any(r is not None for r in ratios):
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] ratio must be set on all blocks or none")
    if any(r is not None and float(r) <= 0 for r in ratios):
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] ratio must be > 0")


def _check_ckpt(cfg: dict) -> None:
    for side in ("trainer", "orchestrator"):
        other = "orchestrator" if side == "trainer" else "trainer"
        if get_path(cfg, f"{side}.ckpt") is not None and get_path(cfg, f"{other}.ckpt") is None and get_path(cfg, "ckpt") is None:
            raise ConfigError(f"{CONFIG_ERROR}: [{side}.ckpt] is set but [{other}.ckpt] is not; use the shared [ckpt] section")
    for scope, max_path in (("ckpt", "max_steps"), ("trainer.ckpt", "trainer.max_steps"), ("orchestrator.ckpt", "orchestrator.max_steps")):
        for knob, low in (("interval", 1), ("keep_last", 1), ("keep_interval", 1), ("resume_step", -1)):
            val = get_path(cfg, f"{scope}.{knob}")
            if val is not None and int(val) < low:
                raise ConfigError(f"{CONFIG_ERROR}: {scope}.{knob} = {val}: must be >= {low}")
        resume = get_path(cfg, f"{scope}.resume_step")
        max_steps = get_path(cfg, max_path, get_path(cfg, "max_steps"))
        if resume is not None and max_steps is not None and int(resume) >= 0 and int(resume) >= int(max_steps):
            raise ConfigError(
                f"{CONFIG_ERROR}: {scope}.resume_step = {resume} but max_steps = {max_steps}: max_steps is ABSOLUTE, "
                f"set it to resume_step + new steps (resuming at max_steps trains nothing and crashes prime-rl)"
            )


def model_name(cfg: dict) -> str:
    """The student model prime-rl's orchestrator would use for `cfg`."""
    for path in ("orchestrator.student.model.name", "orchestrator.model.model.name", "orchestrator.model.name",
                 "orchestrator.student.name", "model.name"):
        if (v := get_path(cfg, path)) is not None:
            return str(v)
    return DEFAULT_MODEL


def _check_model_names(cfg: dict) -> None:
    # prime-rl: the orchestrator must query the model the inference server serves (or, without
    # [inference], the one the trainer trains).
    orch = model_name(cfg)
    shared = get_path(cfg, "model.name", DEFAULT_MODEL)
    if isinstance(cfg.get("inference"), dict):
        other, where = get_path(cfg, "inference.model.name", shared), "inference.model.name"
    else:
        other, where = get_path(cfg, "trainer.model.name", shared), "trainer.model.name"
    if str(other) != orch:
        raise ConfigError(f"{CONFIG_ERROR}: orchestrator model '{orch}' differs from {where} '{other}'; set [model] name once")


def _check_renderer(cfg: dict) -> None:
    if get_path(cfg, "orchestrator.training_mode") == "sft" or not is_true(get_path(cfg, "orchestrator.use_renderer", True)):
        return
    if get_path(cfg, "orchestrator.renderer.name", "auto") != "auto":
        return
    model = get_path(cfg, "orchestrator.tokenizer.name") or get_path(cfg, "tokenizer.name") or model_name(cfg)
    if model not in renderer_auto_models():
        raise ConfigError(
            f"{CONFIG_ERROR}: orchestrator.renderer.name is 'auto' but '{model}' is not in prime-rl's renderer map; "
            f"set [orchestrator.renderer] name = \"default\""
        )


def needs_default_renderer(model: str, canonical: dict | None = None) -> bool:
    """True when `model` under `canonical` would hit the renderer 'auto' rejection (so write name='default')."""
    if canonical is not None and get_path(canonical, "orchestrator.renderer.name", "auto") != "auto":
        return False
    return model not in renderer_auto_models()


# ---------------------------------------------------------------- CLI tokens -> keys


def snake_path(flag: str) -> str:
    return ".".join(seg.replace("-", "_") for seg in flag.split("."))


def set_path(out: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = out
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value


def _literal(token: str) -> Any:
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
            set_path(out, path, NONE_LITERAL if raw == NONE_LITERAL else (_literal(raw) if raw is not None else {}))
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
            set_path(out, path, inline if kind == "str" else _literal(inline))
            i += 1
        elif takes_next:
            set_path(out, path, nxt if kind == "str" else _literal(nxt))
            i += 2
        elif kind is None:
            set_path(out, path, True)  # an unknown bare flag; validation names it
            i += 1
        else:
            raise ConfigError(f"{CONFIG_ERROR}: --{flag} requires a value")
    return out
