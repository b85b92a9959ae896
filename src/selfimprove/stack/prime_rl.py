"""prime-rl's `rl` config, seed dialect (prime-rl main at 09e297743, May 2026).

Everything this project knows about prime-rl's config schema and its command line lives
here (and in `prime_rl_keys.py` + `prime_rl_seed_keys.json`), so a later dialect can sit
beside it. Three parts:

1. The `rl` contract: `@ a.toml @ b.toml --dotted.kebab-key value --output-dir D`.
   `parse_rl_argv` reads it the way prime-rl does (files deep-merge left to right, CLI wins,
   lists are replaced whole), `rl_command_args` writes it, `validate_config` applies the
   schema checks prime-rl would apply before touching a GPU.
2. TOML IO: `read_toml` / `write_toml` (tomllib / tomli_w, atomic, validated first).
3. Config builders for the phases: `eval_overlay` + `baseline_overrides` (iter_0),
   `resume_config` (iter_N, Run A, Run C), `fresh_config` (Run B), `canonical_*` helpers.

What is not covered: checks that need prime-rl's runtime (GPU counts, installed envs,
whether a checkpoint exists) and the value ranges of rarely used keys.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from ..errors import ConfigError
from . import verifiers_classic as env_api  # the verifiers API this dialect's envs speak
from ..rundir import atomic_write_text
from .prime_rl_keys import (  # re-exported: the dialect's whole API is importable from here
    CONFIG_ERROR,
    KEYS_FILE,
    NONE_LITERAL,
    alias_conflicts,
    normalise_aliases,
    other_dialect_hint,
    set_path,
    snake_path,
    get_path,
    is_true,
    gpu_only_keys,
    leaf_type,
    load_key_tree,
    model_name,
    needs_default_renderer,
    parse_cli_overrides,
    type_errors,
    unknown_keys,
    validate_config,
)

__all__ = [
    "env_api",
    "SEED_DIALECT", "DIALECT", "NAME", "SEED_NOTE", "training_seed_key", "eval_sources", "other_dialect_key", "load_key_tree", "unknown_keys", "type_errors", "gpu_only_keys", "deep_merge",
    "parse_cli_overrides", "parse_rl_argv", "validate_config", "normalise_aliases", "alias_conflicts", "read_toml", "write_toml", "rl_command_args",
    "find_canonical_config", "canonical_from_hub_env", "canonical_train_envs", "canonical_knobs",
    "needs_default_renderer", "model_name", "eval_overlay", "baseline_overrides", "resume_config", "fresh_config",
    # small helpers other modules share (rl/config.py reads configs with them)
    "CONFIG_ERROR", "NONE_LITERAL", "get_path", "is_true", "leaf_type",
]

SEED_DIALECT = "prime-rl@09e297743"
DIALECT = SEED_DIALECT
NAME = "seed"  # the --stack value: prime-rl as of the seed (<= 0.7) with classic verifiers envs
SEED_NOTE = (
    "orchestrator.seed seeds the orchestrator's sampling (the CPU engine: sampling and its torch RNG); a seed "
    "replicate changes only that key. Not fixed by it: the order in which asynchronous rollouts complete, and GPU "
    "kernel nondeterminism."
)

SEED_SEQ_LEN = 2048  # the seed's iter_N template
SEED_TRAIN_MAX_TOKENS = 1024  # the seed's iter_N template
# One eval budget for every arm (the seed's iter_0 overlay value), so eval numbers compare.
EVAL_MAX_TOKENS = 2048


# ---------------------------------------------------------------- the rl command line


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


def _kebab(path: str) -> str:
    return ".".join(seg.replace("_", "-") for seg in path.split("."))


def rl_command_args(toml_files: list[Path], overrides: dict, output_dir: Path, *, keys_file: str = KEYS_FILE) -> list[str]:
    """['@', 'a.toml', ..., '--model.name', 'X', '--max-steps', '100', ..., '--output-dir', 'D'].

    Flags are kebab-case dotted paths in the override dict's order; booleans are `--flag` /
    `--no-flag`; arrays and dict-valued keys (env args) are one JSON token, which prime-rl's
    CLI decodes. Arrays of tables can't be passed on prime-rl's CLI: put them in a TOML file.
    """
    if "output_dir" in overrides:
        raise ConfigError(f"{CONFIG_ERROR}: output_dir is passed as --output-dir; remove it from the overrides")
    argv: list[str] = []
    for f in toml_files:
        argv += ["@", str(f)]
    for path, value in _flatten(overrides, "", keys_file):
        flag = "--" + _kebab(path)
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append("--no-" + _kebab(path))
        elif value is None:
            continue
        elif isinstance(value, dict) and not value:
            argv.append(flag)  # enable a table with its defaults
        elif isinstance(value, (list, dict)):
            if isinstance(value, list) and any(isinstance(v, dict) for v in value):
                raise ConfigError(f"{CONFIG_ERROR}: '{path}' is an array of tables; prime-rl's CLI can't set it, put it in a TOML overlay")
            argv += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            text = str(value) if not isinstance(value, float) else repr(value)
            if text.startswith(("--", "@")):
                raise ConfigError(f"{CONFIG_ERROR}: value of '{path}' starts with '{text[:2]}' and would be read as a flag")
            argv += [flag, text]
    return argv + ["--output-dir", str(output_dir)]


def _flatten(d: dict, prefix: str, keys_file: str):
    for key, value in d.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value and leaf_type(path, keys_file) not in ("dict", "any"):
            yield from _flatten(value, path, keys_file)
        else:
            yield path, value


def parse_rl_argv(argv: list[str], *, keys_file: str = KEYS_FILE, validate=validate_config) -> tuple[dict, list[Path]]:
    """A full `rl` argv -> (merged, validated config dict, the TOML files in order).

    Files deep-merge left to right, then the CLI overrides (incl. --output-dir) go on top;
    `--key @ file.toml` nests a file under `key`, as in prime-rl.
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
    merged = deep_merge(merged, parse_cli_overrides(rest, keys_file))
    validate(merged)
    return merged, files


# ---------------------------------------------------------------- TOML IO


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


def write_toml(path: Path, cfg: dict, *, partial: bool = False) -> None:
    """Validate `cfg`, render it with tomli_w and write it atomically.

    `partial=True` is for overlays that are only valid merged with another file (eval_overlay.toml).
    """
    validate_config(cfg, partial=partial)
    if _has_none(cfg):
        raise ConfigError(f"{CONFIG_ERROR}: {path}: a value is None (TOML has no null); drop the key instead")
    header = f"# Written by selfimprove ({SEED_DIALECT} dialect). Regenerated by the tool; edit the run, not this file.\n"
    atomic_write_text(Path(path), header + tomli_w.dumps(cfg))


def _has_none(v: Any) -> bool:
    if isinstance(v, dict):
        return any(_has_none(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_none(x) for x in v)
    return v is None


# ---------------------------------------------------------------- canonical configs


def find_canonical_config(dataset: str, explicit: str | None, prime_rl_dir: str | None,
                          project_configs: list[Path]) -> tuple[Path | None, list[Path]]:
    """(found, paths tried): --config, then <PRIME_RL_DIR>/configs/<dataset>/rl.toml, then each project configs dir.

    An explicit --config is authoritative: if it is missing nothing else is tried. prime-rl
    names config dirs with underscores (alphabet_sort) while hub ids use hyphens, so both
    spellings of <dataset> are tried. PRIME_RL_DIR comes from the argument or the environment.
    """
    if explicit:
        p = Path(explicit).expanduser()
        return (p if p.is_file() else None), [p]
    names = list(dict.fromkeys([dataset, dataset.replace("-", "_"), dataset.replace("_", "-")]))
    roots: list[Path] = []
    prime_rl_dir = prime_rl_dir or os.environ.get("PRIME_RL_DIR")
    if prime_rl_dir:
        roots.append(Path(prime_rl_dir).expanduser() / "configs")
    roots += [Path(p) for p in project_configs]
    tried: list[Path] = []
    for root in roots:
        for name in names:
            cand = root / name / "rl.toml"
            tried.append(cand)
            if cand.is_file():
                return cand, tried
    return None, tried


def canonical_lengths(context: int | None) -> tuple[int, int]:
    """(seq_len, train completion tokens) of a generated canonical config: the seed's 2048 / 1024,
    capped by the student's context (when known) with half of it left for the prompt."""
    seq_len, train_tokens = SEED_SEQ_LEN, SEED_TRAIN_MAX_TOKENS
    if context:
        seq_len = min(seq_len, context)
        train_tokens = min(train_tokens, max(1, seq_len // 2))
    return seq_len, train_tokens


def canonical_from_hub_env(hub_id: str, env_args: dict, model: str, context: int | None = None) -> dict:
    """A minimal canonical config for an env that has no configs/<dataset>/rl.toml.

    Shaped like prime-rl's own configs/<dataset>/rl.toml: seq_len, [model], one
    [[orchestrator.train.env]] (id + the args the hub env is loaded with), train sampling
    tokens, empty [trainer] and [inference]. max_steps, batch size and rollouts come from the
    CLI overrides, as in the seed. Models outside prime-rl's renderer map get name = "default".
    `context` (the student's positions, when known) caps seq_len, and the train completion
    budget to half of it, so the prompt keeps the other half: the seed's 2048 / 1024 ask a
    256-position CPU student for 8x what it can attend over.
    """
    seq_len, train_tokens = canonical_lengths(context)
    env: dict[str, Any] = {"id": hub_id}
    if env_args:
        env["args"] = copy.deepcopy(env_args)
    orch: dict[str, Any] = {"train": {"sampling": {"max_completion_tokens": train_tokens}, "env": [env]}}
    if needs_default_renderer(model):
        orch["renderer"] = {"name": "default"}
    return {"seq_len": seq_len, "model": {"name": model}, "orchestrator": orch, "trainer": {}, "inference": {}}


def canonical_train_envs(canonical: dict) -> list[dict]:
    """The canonical config's [[orchestrator.train.env]] blocks, verbatim (deep copies)."""
    envs = get_path(canonical, "orchestrator.train.env")
    if envs is None:
        envs = get_path(canonical, "orchestrator.env")  # deprecated spelling
    if not envs:
        raise ConfigError(f"{CONFIG_ERROR}: the canonical config has no [[orchestrator.train.env]]; add the real dataset's env block")
    return copy.deepcopy(envs)


def canonical_knobs(canonical: dict) -> dict:
    """The optional training knobs a canonical config sets, as resume_config/fresh_config kwargs.

    Pass these to resume_config/fresh_config so iter_N, Run A and Run B train under the same
    seq_len / train sampling / lr / renderer / seed as iter_0 did (only the data varies);
    teacher overrides go on top: `resume_config(..., **{**canonical_knobs(c), **teacher_knobs})`.
    The eval budget is deliberately not inherited: iter_0's eval_overlay replaces the canonical
    eval tokens with EVAL_MAX_TOKENS, and every later arm uses the same value.
    """
    picks = {
        "seq_len": get_path(canonical, "seq_len"),
        "train_max_tokens": get_path(canonical, "orchestrator.train.sampling.max_completion_tokens",
                                 get_path(canonical, "orchestrator.train.sampling.max_tokens")),
        "temperature": get_path(canonical, "orchestrator.train.sampling.temperature"),
        "lr": get_path(canonical, "trainer.optim.lr"),
        "renderer": copy.deepcopy(get_path(canonical, "orchestrator.renderer")),
        "seed": get_path(canonical, "orchestrator.seed"),
    }
    return {k: v for k, v in picks.items() if v is not None}


def other_dialect_key(path: str) -> str | None:
    """"'x' is a prime-rl >= 0.8 key; here it is y" for a key of the v0.8 dialect, else None."""
    return other_dialect_hint(path)


def training_seed_key() -> str:
    """Where this dialect keeps the training seed (a seed replicate changes only this key)."""
    return "orchestrator.seed"


def eval_sources(config: dict) -> list[dict]:
    """The eval env blocks of a written arm config."""
    return get_path(config, "orchestrator.eval.env") or []


# ---------------------------------------------------------------- builders


ITER0_CHECKPOINTS = 5  # iter_0 saves a checkpoint every max_steps / 5 steps: a crash loses at most a fifth


def iter0_ckpt_interval(max_steps: int) -> int:
    return max(1, max_steps // ITER0_CHECKPOINTS)


def eval_overlay(*, max_steps: int, eval_env_id: str, eval_env_args: dict, num_examples: int,
                 max_completion_tokens: int = EVAL_MAX_TOKENS) -> dict:
    """The seed's iter_0 eval_overlay.toml: checkpoints, one eval at max_steps on the hub env only.

    The seed saves exactly one checkpoint (interval = max_steps), which left nothing to
    `--resume` from after a crash mid-iter_0 (issue 13, which wins here): the overlay saves
    every max_steps / 5 steps and keeps only the latest (keep_last = 1), so disk use stays
    one extra checkpoint and the final step, the one every arm resumes from, is always kept.
    Its [[orchestrator.eval.env]] list replaces any eval envs of the canonical config (lists
    are replaced whole), so iter_0 is evaluated on exactly what every later arm is.
    """
    _positive(max_steps=max_steps, max_completion_tokens=max_completion_tokens)
    return {
        "ckpt": {"interval": iter0_ckpt_interval(max_steps), "keep_last": 1},
        "orchestrator": {"eval": {
            "interval": max_steps,
            "sampling": {"max_completion_tokens": max_completion_tokens},
            "env": [_eval_env(eval_env_id, eval_env_args, num_examples)],
        }},
    }


def baseline_overrides(*, model: str, max_steps: int, batch_size: int, rollouts_per_example: int,
                       canonical: dict | None = None) -> dict:
    """The seed's iter_0 CLI overrides (--model.name, --max-steps, --orchestrator.batch-size,
    --orchestrator.rollouts-per-example); output_dir is passed separately.

    Adds --orchestrator.renderer.name default when `model` would fail prime-rl's renderer
    'auto' check and `canonical` (if given) does not pick a renderer itself.
    """
    _positive(max_steps=max_steps, batch_size=batch_size, rollouts_per_example=rollouts_per_example)
    orch: dict[str, Any] = {"batch_size": batch_size, "rollouts_per_example": rollouts_per_example}
    if needs_default_renderer(model, canonical):
        orch["renderer"] = {"name": "default"}
    return {"model": {"name": model}, "max_steps": max_steps, "orchestrator": orch}


def resume_config(*, model: str, resume_step: int, new_steps: int, batch_size: int, rollouts_per_example: int,
                  train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                  seq_len: int | None = None, train_max_tokens: int | None = None, eval_max_tokens: int | None = None,
                  lr: float | None = None, wandb: dict | None = None, renderer: str | dict | None = None,
                  seed: int | None = None, temperature: float | None = None) -> dict:
    """rl.toml of an arm that resumes from iter_0's checkpoint (iter_N, Run A, Run C).

    max_steps = resume_step + new_steps (ABSOLUTE); [ckpt] resume_step, interval = new_steps
    (prime-rl also saves at max_steps); [orchestrator.eval] interval = max_steps, so the arm is
    evaluated once, at the end. Optional knobs, when None: seq_len 2048 and train tokens 1024
    (the seed's iter_N template), eval tokens EVAL_MAX_TOKENS (iter_0's overlay value, so every
    arm is evaluated alike), prime-rl's defaults for lr / temperature / seed, no W&B, and
    renderer "default" only for models outside prime-rl's renderer map. A user expects an arm
    to train like iter_0 did, with only the data changed: callers pass
    `**canonical_knobs(canonical)` and put the teacher's choices on top. `renderer` is a name
    or a whole [orchestrator.renderer] table (as canonical_knobs returns it).
    """
    if not isinstance(resume_step, int) or isinstance(resume_step, bool) or resume_step < 1:
        raise ConfigError(f"{CONFIG_ERROR}: ckpt.resume_step = {resume_step!r}: must be the integer step of iter_0's checkpoint (>= 1)")
    _positive(new_steps=new_steps)
    return _arm_config(
        start_step=resume_step, model=model, new_steps=new_steps, batch_size=batch_size,
        rollouts_per_example=rollouts_per_example, train_envs=train_envs, eval_env_id=eval_env_id,
        eval_env_args=eval_env_args, num_examples=num_examples, seq_len=seq_len, train_max_tokens=train_max_tokens,
        eval_max_tokens=eval_max_tokens, lr=lr, wandb=wandb, renderer=renderer, seed=seed, temperature=temperature,
    )


def fresh_config(*, model: str, new_steps: int, batch_size: int, rollouts_per_example: int,
                 train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                 seq_len: int | None = None, train_max_tokens: int | None = None, eval_max_tokens: int | None = None,
                 lr: float | None = None, wandb: dict | None = None, renderer: str | dict | None = None,
                 seed: int | None = None, temperature: float | None = None, clean_output_dir: bool = False) -> dict:
    """rl.toml of an arm trained from the base model (Run B): no resume_step, max_steps = new_steps.

    Knobs and defaults as in `resume_config`. `clean_output_dir=True` lets a retried run start
    over in an output dir that already holds checkpoints (prime-rl then deletes that dir).
    """
    return _arm_config(
        start_step=0, model=model, new_steps=new_steps, batch_size=batch_size,
        rollouts_per_example=rollouts_per_example, train_envs=train_envs, eval_env_id=eval_env_id,
        eval_env_args=eval_env_args, num_examples=num_examples, seq_len=seq_len, train_max_tokens=train_max_tokens,
        eval_max_tokens=eval_max_tokens, lr=lr, wandb=wandb, renderer=renderer, seed=seed, temperature=temperature,
        clean_output_dir=clean_output_dir,
    )


def _arm_config(*, start_step: int, model: str, new_steps: int, batch_size: int, rollouts_per_example: int,
                train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                seq_len: int | None, train_max_tokens: int | None, eval_max_tokens: int | None, lr: float | None,
                wandb: dict | None, renderer: str | dict | None, seed: int | None, temperature: float | None,
                clean_output_dir: bool = False) -> dict:
    _positive(new_steps=new_steps, batch_size=batch_size, rollouts_per_example=rollouts_per_example)
    if not train_envs:
        raise ConfigError(f"{CONFIG_ERROR}: no training env given; [[orchestrator.train.env]] needs at least one block")
    max_steps = start_step + new_steps
    # `is None`, not `or`: a 0 must be refused by name, never silently become the default
    seq_len = SEED_SEQ_LEN if seq_len is None else seq_len
    train_max_tokens = SEED_TRAIN_MAX_TOKENS if train_max_tokens is None else train_max_tokens
    eval_max_tokens = EVAL_MAX_TOKENS if eval_max_tokens is None else eval_max_tokens
    _positive(seq_len=seq_len, max_completion_tokens=train_max_tokens, eval_max_completion_tokens=eval_max_tokens)
    sampling: dict[str, Any] = {"max_completion_tokens": train_max_tokens}
    if temperature is not None:
        sampling["temperature"] = temperature
    orch: dict[str, Any] = {"batch_size": batch_size, "rollouts_per_example": rollouts_per_example}
    if seed is not None:
        orch["seed"] = seed
    orch["train"] = {"sampling": sampling, "env": copy.deepcopy(train_envs)}
    orch["eval"] = {
        "interval": max_steps,
        "sampling": {"max_completion_tokens": eval_max_tokens},
        "env": [_eval_env(eval_env_id, eval_env_args, num_examples)],
    }
    table = copy.deepcopy(renderer) if isinstance(renderer, dict) else ({"name": renderer} if renderer else {})
    if table.get("name", "auto") == "auto" and needs_default_renderer(model):
        table["name"] = "default"  # 'auto' (also inherited from a canonical table) rejects this model
    if table:
        orch["renderer"] = table

    cfg: dict[str, Any] = {"max_steps": max_steps, "seq_len": seq_len}
    if clean_output_dir:
        cfg["clean_output_dir"] = True
    if wandb:
        w = {k: v for k, v in wandb.items() if v is not None}
        if is_true(w.get("offline")) and "shared" not in w:
            w["shared"] = False  # prime-rl refuses offline with its default shared = true
        cfg["wandb"] = w
    cfg["model"] = {"name": model}
    cfg["ckpt"] = {"interval": new_steps, "resume_step": start_step} if start_step else {"interval": new_steps}
    cfg["orchestrator"] = orch
    cfg["trainer"] = {"optim": {"lr": lr}} if lr is not None else {}
    cfg["inference"] = {}  # prime-rl starts its vLLM server only when [inference] is present
    validate_config(cfg)
    return cfg


def _eval_env(env_id: str, env_args: dict, num_examples: int) -> dict:
    """One [[orchestrator.eval.env]] block; num_examples = -1 is prime-rl's "the whole split"."""
    if not isinstance(num_examples, int) or isinstance(num_examples, bool) or (num_examples < 1 and num_examples != -1):
        raise ConfigError(f"{CONFIG_ERROR}: num_examples = {num_examples!r}: must be >= 1, or -1 for the whole eval split")
    env: dict[str, Any] = {"id": env_id}
    if env_args:
        env["args"] = copy.deepcopy(env_args)
    env["num_examples"] = num_examples
    env["rollouts_per_example"] = 1
    return env


def _positive(**values: Any) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{CONFIG_ERROR}: {name} = {v!r}: must be an integer >= 1")
