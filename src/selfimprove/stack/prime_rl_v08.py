"""prime-rl's `rl` config, v0.8 dialect (prime-rl main at 559b44772, 2026-08-21, v0.8.1.dev67).

The same builders as the seed dialect (`prime_rl.py`), under the same names and keyword
arguments, so no phase branches on the version: a phase asks the run's dialect object
(`stack.dialects.dialect_for`) and calls `resume_config(...)` whichever prime-rl it drives.
What differs, read from prime-rl's source at that commit:

- `rollouts_per_example` is `group_size` (orchestrator, eval and per source);
- `[[orchestrator.train.env]]` / `[[orchestrator.eval.env]]` are `[[...source]]` blocks whose
  `env.taskset.id` names a module exporting one verifiers v1 Taskset, and the env args are
  fields of that taskset's config (`env.taskset.<field>`);
- `ckpt.resume_step` is `[resume] step`, `clean_output_dir` is `clean`, `[wandb]` is
  `[monitors.wandb]` (shared-level `offline` is refused there);
- `orchestrator.seed`, `orchestrator.eval.eval_base_model` and `wandb.shared` are gone
  (see SEED_NOTE for what fixes a run's randomness now);
- `[orchestrator.renderer]` is a union discriminated by `name`: a table always carries it;
- the run directory is `output_dir / run.name` (no `run_default/`): the argv passes the arm's
  output dir as `--output-dir <parent> --run.name <name>`, so the layout stays `<out>/...`.

Callers hand in env blocks in either shape: seed-shaped `{"id", "args", "name", "ratio"}`
(what the phases build for generated packages) become sources; blocks that already hold
`env` (a v0.8 canonical config's sources) are kept verbatim.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import env_api_v1 as env_api  # the verifiers API this dialect's envs speak (v1 Tasksets)
from ..rundir import atomic_write_text
from . import prime_rl as seed_dialect
from .prime_rl_keys import (
    CONFIG_ERROR, NONE_LITERAL, _more, alias_conflicts as _alias_conflicts, get_path, is_true,
    load_key_tree, model_name, other_dialect_hint, needs_default_renderer, normalise_aliases as _normalise, parse_cli_overrides as _cli,
    set_path, snake_path, type_errors, unknown_keys,
)

DIALECT = "prime-rl@559b44772"
NAME = "v1"  # the --stack value: prime-rl >= 0.8 with verifiers v1 Tasksets
KEYS_FILE = "prime_rl_v08_keys.json"
SEED_TRAIN_MAX_TOKENS = seed_dialect.SEED_TRAIN_MAX_TOKENS
SEED_SEQ_LEN = seed_dialect.SEED_SEQ_LEN
EVAL_MAX_TOKENS = seed_dialect.EVAL_MAX_TOKENS

# What fixes a run's randomness in this dialect (recorded in run.json): orchestrator.seed is gone.
SEED_NOTE = (
    "prime-rl >= 0.8 has no orchestrator.seed: a seed replicate sets inference.vllm.seed (the sampling seed of the "
    "inference server; the CPU engine seeds sampling and its torch RNG with it). Not fixed by any key: the order "
    "in which asynchronous rollouts complete and so which groups form a batch (the default sampler cycles the "
    "taskset in source order), and GPU kernel nondeterminism."
)

# Seed-dialect spellings prime-rl >= 0.8 refuses, and what it calls them now. Used to name the
# fix when a config of the other dialect arrives (a canonical config, a teacher's overrides.toml).
SEED_KEYS = {
    "orchestrator.rollouts_per_example": "orchestrator.group_size",
    "orchestrator.eval.rollouts_per_example": "orchestrator.eval.group_size",
    "orchestrator.train.env": "[[orchestrator.train.source]] with env.taskset.id",
    "orchestrator.eval.env": "[[orchestrator.eval.source]] with env.taskset.id",
    "orchestrator.env": "[[orchestrator.train.source]] with env.taskset.id",
    "ckpt.resume_step": "resume.step",
    "clean_output_dir": "clean",
    "wandb": "[monitors.wandb]",
    "orchestrator.seed": "inference.vllm.seed (orchestrator.seed was removed)",
    "orchestrator.eval.eval_base_model": "orchestrator.eval.skip_first_step (inverted; eval_base_model was removed)",
    "orchestrator.eval.skip_eval_on_resume": "orchestrator.eval.skip_first_step",
}


# ---------------------------------------------------------------- validation


def validate_config(cfg: dict, *, partial: bool = False) -> None:
    """Raise ConfigError (one line naming the key and the fix) where prime-rl main would refuse `cfg`.

    Checks: [trainer]/[orchestrator] present; no unknown keys (a seed-dialect key is named as
    such, with its new name); leaf types; two alias spellings in one table; a shared key set to
    different values at top level and in a section; batch_size divisible by group_size; sources
    name their taskset, have unique names and positive ratios; resume.step < max_steps and not
    with resume.dir; shared-level monitors.wandb.offline; a renderer table without `name`; the
    renderer 'auto' model rule. `partial=True` (an overlay) checks only keys and types.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"{CONFIG_ERROR}: a config must be a table, got {type(cfg).__name__}")
    if not partial:
        for section in load_key_tree(KEYS_FILE)["required_sections"]:
            if not isinstance(cfg.get(section), dict):
                raise ConfigError(f"{CONFIG_ERROR}: missing [{section}] section (prime-rl requires [trainer] and [orchestrator], even empty); add '[{section}]'")
    unknown = unknown_keys(cfg, KEYS_FILE)
    if unknown:
        hint = next((h for h in (other_dialect_hint(u, SEED_KEYS, "seed-dialect (prime-rl < 0.8)") for u in unknown) if h), None)
        if hint:
            raise ConfigError(f"{CONFIG_ERROR}: {hint} (prime-rl >= 0.8, {DIALECT}); rename it, or run with --stack seed for an older prime-rl")
        raise ConfigError(f"{CONFIG_ERROR}: unknown key '{unknown[0]}' (extra inputs are not permitted){_more(unknown)}")
    bad = type_errors(cfg, KEYS_FILE)
    if bad:
        raise ConfigError(f"{CONFIG_ERROR}: {bad[0]}{_more(bad)}")
    twice = _alias_conflicts(cfg, KEYS_FILE)
    if twice:
        raise ConfigError(f"{CONFIG_ERROR}: {twice[0]} are the same key in two spellings; keep one (prime-rl refuses both in one table){_more(twice)}")
    if partial:
        return
    for shared, subs in load_key_tree(KEYS_FILE)["shared_fields"].items():
        value = get_path(cfg, shared)
        for sub in subs:
            if value is not None and get_path(cfg, sub) is not None and get_path(cfg, sub) != value:
                raise ConfigError(f"{CONFIG_ERROR}: '{shared}' = {value!r} at top level but '{sub}' = {get_path(cfg, sub)!r}; set it in one place")
    _check_batch(cfg)
    for group in ("train", "eval"):
        _check_sources(cfg, group)
    _check_resume(cfg)
    if is_true(get_path(cfg, "monitors.wandb.offline")):
        raise ConfigError(f"{CONFIG_ERROR}: monitors.wandb.offline = true is refused at the shared level; set it under [trainer.monitors.wandb] and [orchestrator.monitors.wandb]")
    renderer = get_path(cfg, "orchestrator.renderer")
    if isinstance(renderer, dict) and "name" not in renderer:
        raise ConfigError(f"{CONFIG_ERROR}: [orchestrator.renderer] has no 'name' (prime-rl >= 0.8 picks the renderer class by it); add name = \"auto\" or \"default\"")
    if get_path(cfg, "orchestrator.renderer.name", "auto") == "auto" and needs_default_renderer(model_name(cfg)):
        raise ConfigError(
            f"{CONFIG_ERROR}: orchestrator.renderer.name is 'auto' but '{model_name(cfg)}' is not in prime-rl's renderer map; "
            f"set [orchestrator.renderer] name = \"default\""
        )


def _check_batch(cfg: dict) -> None:
    bs, gs = get_path(cfg, "orchestrator.batch_size"), get_path(cfg, "orchestrator.group_size", 1)
    for key, val in (("orchestrator.batch_size", bs), ("orchestrator.group_size", gs)):
        if val is not None and int(val) < 1:
            raise ConfigError(f"{CONFIG_ERROR}: {key} = {val}: must be >= 1")
    if bs is not None and int(bs) % int(gs):
        raise ConfigError(
            f"{CONFIG_ERROR}: orchestrator.batch_size = {bs} is not divisible by orchestrator.group_size = {gs}; "
            f"batch_size counts rollouts, use a multiple such as {max(1, int(bs) // int(gs)) * int(gs)}"
        )


def _check_sources(cfg: dict, group: str) -> None:
    key = f"orchestrator.{group}.source"
    sources = get_path(cfg, key) or []
    names = []
    for i, src in enumerate(sources):
        tid = get_path(src, "env.taskset.id") or get_path(src, "env.id")
        if not tid:
            raise ConfigError(f"{CONFIG_ERROR}: {key}[{i}] names no env; set env.taskset.id to the taskset's module")
        names.append(src.get("name") or tid)
        if src.get("ratio") is not None and float(src["ratio"]) <= 0:
            raise ConfigError(f"{CONFIG_ERROR}: {key}[{i}].ratio must be > 0")
    dupes = sorted({x for x in names if names.count(x) > 1})
    if dupes:
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] names are not unique ({', '.join(dupes)}); give each block a distinct name")
    if "agg" in names:
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] name 'agg' is reserved by prime-rl; pick another name")


def _check_resume(cfg: dict) -> None:
    step, rdir = get_path(cfg, "resume.step"), get_path(cfg, "resume.dir")
    if step is not None and rdir is not None:
        raise ConfigError(f"{CONFIG_ERROR}: resume.step and resume.dir are both set; set one (the step is taken from the dir's name)")
    if step is not None and int(step) < 1:
        raise ConfigError(f"{CONFIG_ERROR}: resume.step = {step}: must be >= 1")
    max_steps = get_path(cfg, "max_steps")
    if step is not None and max_steps is not None and int(step) >= int(max_steps):
        raise ConfigError(
            f"{CONFIG_ERROR}: resume.step = {step} but max_steps = {max_steps}: max_steps is ABSOLUTE, "
            f"set it to resume.step + new steps"
        )


def alias_conflicts(cfg: dict) -> list[str]:
    return _alias_conflicts(cfg, KEYS_FILE)


def normalise_aliases(cfg: dict) -> tuple[dict, list[str]]:
    return _normalise(cfg, KEYS_FILE)


def parse_cli_overrides(args: list[str]) -> dict:
    return _cli(args, KEYS_FILE)


# ---------------------------------------------------------------- the rl command line

deep_merge = seed_dialect.deep_merge
read_toml = seed_dialect.read_toml


def rl_command_args(toml_files: list[Path], overrides: dict, output_dir: Path) -> list[str]:
    """The seed's argv shape, with the run directory named as main wants it.

    prime-rl main writes a run to `output_dir / run.name`; passing the arm's output dir as
    `--output-dir <parent> --run.name <name>` keeps every artefact under `<out>/` (and a fixed
    run name is what resuming needs).
    """
    output_dir = Path(output_dir)
    argv = seed_dialect.rl_command_args(toml_files, overrides, output_dir.parent, keys_file=KEYS_FILE)
    return argv + ["--run.name", output_dir.name]


def parse_rl_argv(argv: list[str]) -> tuple[dict, list[Path]]:
    """A full v0.8 `rl` argv -> (merged, validated config, files); output_dir is resolved to the run dir."""
    merged, files = seed_dialect.parse_rl_argv(argv, keys_file=KEYS_FILE, validate=validate_config)
    name = get_path(merged, "run.dir") or get_path(merged, "run.name")
    if name and merged.get("output_dir"):
        merged["output_dir"] = str(Path(merged["output_dir"]) / name)
    return merged, files


def write_toml(path: Path, cfg: dict, *, partial: bool = False) -> None:
    """Validate `cfg` against the v0.8 snapshot, render it with tomli_w and write it atomically."""
    import tomli_w

    validate_config(cfg, partial=partial)
    if seed_dialect._has_none(cfg):
        raise ConfigError(f"{CONFIG_ERROR}: {path}: a value is None (TOML has no null); drop the key instead")
    header = f"# Written by selfimprove ({DIALECT} dialect). Regenerated by the tool; edit the run, not this file.\n"
    atomic_write_text(Path(path), header + tomli_w.dumps(cfg))


# ---------------------------------------------------------------- canonical configs


def find_canonical_config(dataset: str, explicit: str | None, prime_rl_dir: str | None,
                          project_configs: list[Path]) -> tuple[Path | None, list[Path]]:
    """As the seed's, but main keeps its configs under `configs/basic/<env>/rl.toml` (so does this project)."""
    if explicit:
        return seed_dialect.find_canonical_config(dataset, explicit, None, [])
    prime_rl_dir = prime_rl_dir or os.environ.get("PRIME_RL_DIR")
    roots = [Path(prime_rl_dir).expanduser() / "configs" / "basic"] if prime_rl_dir else []
    roots += [Path(p) / "basic" for p in project_configs]
    with _no_prime_rl_dir():  # the seed's search would add <PRIME_RL_DIR>/configs again
        return seed_dialect.find_canonical_config(dataset, None, None, roots)


class _no_prime_rl_dir:
    def __enter__(self):
        self.saved = os.environ.pop("PRIME_RL_DIR", None)

    def __exit__(self, *exc):
        if self.saved is not None:
            os.environ["PRIME_RL_DIR"] = self.saved


def source(block: dict, *, group_size: int | None = None, num_examples: int | None = None) -> dict:
    """One [[...source]] block from a seed-shaped env block ({"id", "args", "name", "ratio"}).

    A block that already holds `env` is a v0.8 source and is kept verbatim. The env args become
    fields of the taskset's config, beside its id; the harness is prime-rl's plain chat (null).
    """
    if "env" in block:
        return copy.deepcopy(block)
    unknown = sorted(set(block) - {"id", "args", "name", "ratio", "num_examples", "rollouts_per_example"})
    if unknown:
        raise ConfigError(f"{CONFIG_ERROR}: env block key '{unknown[0]}' has no v0.8 source equivalent; drop it")
    args = block.get("args") or {}
    if "id" in args:
        raise ConfigError(f"{CONFIG_ERROR}: env args of '{block['id']}' have a key 'id', which would replace env.taskset.id; rename the argument")
    out: dict[str, Any] = {}
    if block.get("name"):
        out["name"] = block["name"]
    out["env"] = {"taskset": {"id": block["id"], **copy.deepcopy(args)}}
    if block.get("ratio") is not None:
        out["ratio"] = block["ratio"]
    if num_examples is not None:
        out["num_examples"] = num_examples
    if group_size is not None:
        out["group_size"] = group_size
    return out


def canonical_from_hub_env(hub_id: str, env_args: dict, model: str, context: int | None = None) -> dict:
    """A minimal canonical config in main's shape for an env without configs/basic/<env>/rl.toml.
    `context` caps seq_len and the train completion budget as in the seed dialect."""
    seq_len, train_tokens = seed_dialect.canonical_lengths(context)
    orch: dict[str, Any] = {"train": {"sampling": {"max_completion_tokens": train_tokens},
                                      "source": [source({"id": hub_id, "args": env_args})]}}
    orch["renderer"] = {"name": "default" if needs_default_renderer(model) else "auto"}
    return {"seq_len": seq_len, "model": {"name": model}, "orchestrator": orch, "trainer": {}, "inference": {}}


def canonical_train_envs(canonical: dict) -> list[dict]:
    """The canonical config's [[orchestrator.train.source]] blocks, verbatim (deep copies)."""
    sources = get_path(canonical, "orchestrator.train.source")
    if not sources:
        raise ConfigError(f"{CONFIG_ERROR}: the canonical config has no [[orchestrator.train.source]]; add the real dataset's source block")
    return copy.deepcopy(sources)


def canonical_knobs(canonical: dict) -> dict:
    """The seed's canonical_knobs, read from main's keys (the seed knob is inference.vllm.seed)."""
    picks = {
        "seq_len": get_path(canonical, "seq_len"),
        "train_max_tokens": get_path(canonical, "orchestrator.train.sampling.max_completion_tokens"),
        "temperature": get_path(canonical, "orchestrator.train.sampling.temperature"),
        "lr": get_path(canonical, "trainer.optim.lr"),
        "renderer": copy.deepcopy(get_path(canonical, "orchestrator.renderer")),
        "seed": get_path(canonical, "inference.vllm.seed"),
    }
    return {k: v for k, v in picks.items() if v is not None}


def other_dialect_key(path: str) -> str | None:
    """"'x' is a seed-dialect key; here it is y" for a key of the seed dialect, else None."""
    return other_dialect_hint(path, SEED_KEYS, "seed-dialect (prime-rl < 0.8)")


def training_seed_key() -> str:
    """Where this dialect keeps the training seed (a seed replicate changes only this key)."""
    return "inference.vllm.seed"


def eval_sources(config: dict) -> list[dict]:
    """The eval source blocks of a written arm config."""
    return get_path(config, "orchestrator.eval.source") or []


# ---------------------------------------------------------------- builders


def eval_overlay(*, max_steps: int, eval_env_id: str, eval_env_args: dict, num_examples: int,
                 max_completion_tokens: int = EVAL_MAX_TOKENS) -> dict:
    """iter_0's eval_overlay.toml in main's keys: one checkpoint at max_steps, eval on the hub env only."""
    seed_dialect._positive(max_steps=max_steps, max_completion_tokens=max_completion_tokens)
    return {
        "ckpt": {"interval": max_steps},
        "orchestrator": {"eval": {
            "interval": max_steps,
            "sampling": {"max_completion_tokens": max_completion_tokens},
            "source": [_eval_source(eval_env_id, eval_env_args, num_examples)],
        }},
    }


def baseline_overrides(*, model: str, max_steps: int, batch_size: int, rollouts_per_example: int,
                       canonical: dict | None = None) -> dict:
    """iter_0's CLI overrides: --model.name, --max-steps, --orchestrator.batch-size, --orchestrator.group-size."""
    seed_dialect._positive(max_steps=max_steps, batch_size=batch_size, rollouts_per_example=rollouts_per_example)
    orch: dict[str, Any] = {"batch_size": batch_size, "group_size": rollouts_per_example}
    if needs_default_renderer(model, canonical):
        orch["renderer"] = {"name": "default"}
    return {"model": {"name": model}, "max_steps": max_steps, "orchestrator": orch}


def resume_config(*, model: str, resume_step: int, new_steps: int, batch_size: int, rollouts_per_example: int,
                  train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                  seq_len: int | None = None, train_max_tokens: int | None = None, eval_max_tokens: int | None = None,
                  lr: float | None = None, wandb: dict | None = None, renderer: str | dict | None = None,
                  seed: int | None = None, temperature: float | None = None) -> dict:
    """rl.toml of an arm resumed from iter_0's checkpoint, as the seed's, with [resume] step."""
    if not isinstance(resume_step, int) or isinstance(resume_step, bool) or resume_step < 1:
        raise ConfigError(f"{CONFIG_ERROR}: resume.step = {resume_step!r}: must be the integer step of iter_0's checkpoint (>= 1)")
    return _arm_config(start_step=resume_step, **_arm_kwargs(locals()))


def fresh_config(*, model: str, new_steps: int, batch_size: int, rollouts_per_example: int,
                 train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                 seq_len: int | None = None, train_max_tokens: int | None = None, eval_max_tokens: int | None = None,
                 lr: float | None = None, wandb: dict | None = None, renderer: str | dict | None = None,
                 seed: int | None = None, temperature: float | None = None, clean_output_dir: bool = False) -> dict:
    """rl.toml of an arm trained from the base model (Run B); `clean_output_dir` writes main's `clean`."""
    return _arm_config(start_step=0, clean=clean_output_dir, **_arm_kwargs(locals()))


def _arm_kwargs(args: dict) -> dict:
    return {k: v for k, v in args.items() if k not in ("resume_step", "clean_output_dir")}


def _arm_config(*, start_step: int, model: str, new_steps: int, batch_size: int, rollouts_per_example: int,
                train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                seq_len: int | None, train_max_tokens: int | None, eval_max_tokens: int | None, lr: float | None,
                wandb: dict | None, renderer: str | dict | None, seed: int | None, temperature: float | None,
                clean: bool = False) -> dict:
    seed_dialect._positive(new_steps=new_steps, batch_size=batch_size, rollouts_per_example=rollouts_per_example)
    if not train_envs:
        raise ConfigError(f"{CONFIG_ERROR}: no training env given; [[orchestrator.train.source]] needs at least one block")
    max_steps = start_step + new_steps
    # `is None`, not `or`: a 0 must be refused by name, never silently become the default
    seq_len = SEED_SEQ_LEN if seq_len is None else seq_len
    train_max_tokens = SEED_TRAIN_MAX_TOKENS if train_max_tokens is None else train_max_tokens
    eval_max_tokens = EVAL_MAX_TOKENS if eval_max_tokens is None else eval_max_tokens
    seed_dialect._positive(seq_len=seq_len, max_completion_tokens=train_max_tokens, eval_max_completion_tokens=eval_max_tokens)
    sampling: dict[str, Any] = {"max_completion_tokens": train_max_tokens}
    if temperature is not None:
        sampling["temperature"] = temperature
    orch: dict[str, Any] = {"batch_size": batch_size, "group_size": rollouts_per_example}
    orch["train"] = {"sampling": sampling, "source": [source(b) for b in train_envs]}
    orch["eval"] = {
        "interval": max_steps,
        "sampling": {"max_completion_tokens": eval_max_tokens},
        "source": [_eval_source(eval_env_id, eval_env_args, num_examples)],
    }
    table = copy.deepcopy(renderer) if isinstance(renderer, dict) else ({"name": renderer} if renderer else {})
    if table.get("name", "auto") == "auto":
        table["name"] = "default" if needs_default_renderer(model) else "auto"  # main: a table always carries name
    orch["renderer"] = table

    cfg: dict[str, Any] = {"max_steps": max_steps, "seq_len": seq_len}
    if clean:
        cfg["clean"] = True
    if wandb:
        w = {k: v for k, v in wandb.items() if v is not None and k != "shared"}  # no shared in main: always shared
        if is_true(w.pop("offline", False)):
            raise ConfigError(f"{CONFIG_ERROR}: W&B offline is refused at prime-rl >= 0.8's shared level; drop offline or log online")
        cfg["monitors"] = {"wandb": w}
    cfg["model"] = {"name": model}
    cfg["ckpt"] = {"interval": new_steps}
    if start_step:
        cfg["resume"] = {"step": start_step}
    cfg["orchestrator"] = orch
    cfg["trainer"] = {"optim": {"lr": lr}} if lr is not None else {}
    cfg["inference"] = {"vllm": {"seed": seed}} if seed is not None else {}
    validate_config(cfg)
    return cfg


def _eval_source(env_id: str, env_args: dict, num_examples: int) -> dict:
    """One [[orchestrator.eval.source]]; num_examples = -1 is prime-rl's "the whole split"."""
    if not isinstance(num_examples, int) or isinstance(num_examples, bool) or (num_examples < 1 and num_examples != -1):
        raise ConfigError(f"{CONFIG_ERROR}: num_examples = {num_examples!r}: must be >= 1, or -1 for the whole eval split")
    return source({"id": env_id, "args": env_args}, group_size=1, num_examples=num_examples)


__all__ = [
    "env_api",
    "DIALECT", "NAME", "SEED_NOTE", "SEED_KEYS", "validate_config", "read_toml", "write_toml", "rl_command_args",
    "parse_rl_argv", "parse_cli_overrides", "deep_merge", "normalise_aliases", "alias_conflicts",
    "find_canonical_config", "canonical_from_hub_env", "canonical_train_envs", "canonical_knobs", "source",
    "eval_overlay", "baseline_overrides", "resume_config", "fresh_config", "training_seed_key", "eval_sources", "other_dialect_key",
    "get_path", "set_path", "snake_path", "NONE_LITERAL",
]
