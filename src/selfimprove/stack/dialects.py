"""The two prime-rl / verifiers dialects a run can speak, and the run's dialect object.

Phases never branch on the version: they call `dialect_for(cfg).resume_config(...)`, and the
one set of builders (`prime_rl.Dialect`'s methods) writes whichever prime-rl the run drives:

- SEED ("seed", --stack seed): prime-rl main at 09e297743 (May 2026, <= v0.7) + classic
  verifiers envs (`load_environment`, `stack/verifiers_classic.py`);
- V1 ("v1", --stack v1): prime-rl main at 559b44772 (2026-08-21, v0.8.1.dev67) + verifiers v1
  Tasksets (`stack/env_api_v1.py`).

What differs, read from prime-rl's source at those commits, and where each is handled:

- key names: RENAMES below, the one map from a seed path to its v0.8 path. The builders name
  keys by their seed path through `Dialect.key`; validation names a key of the other dialect
  with its name here (`Dialect.other_dialect_key`); the CPU engine reads a v0.8 config through
  the same map (`rl/config.engine_view`). `rollouts_per_example` is `group_size`,
  `ckpt.resume_step` is `[resume] step`, `clean_output_dir` is `clean`, `[wandb]` is
  `[monitors.wandb]`, `orchestrator.seed` is `inference.vllm.seed` (see SEED_NOTE), and
  `eval_base_model` is gone (`skip_first_step`, inverted).
- env blocks: `[[orchestrator.train.env]]` {id, args} are `[[...source]]` blocks whose
  `env.taskset.id` names a module exporting one verifiers v1 Taskset, with the env args as
  fields of that taskset's config: `shape_env` (`seed_env_block` / `source`).
- W&B: the seed dialect needs shared = false beside offline; main has no `shared` and refuses a
  shared-level offline: `shape_wandb` (`seed_wandb` / `v08_wandb`).
- the renderer table: main's is a union picked by `name`, so a table always carries one:
  `renderer_always_named`.
- the run directory: main writes to `output_dir / run.name` (no `run_default/`, traces.jsonl):
  `names_run` (the argv passes --run.name) and `layout` (`rundir.OutputLayout`, which rundir.py
  and the CPU engine's rl/checkpoint.py both consult).
- where prime-rl keeps its example configs: `configs/<env>` vs `configs/basic/<env>`:
  `canonical_subdir`.
- validation: the shared rules run once (`prime_rl_checks.validate_config`); the rules that
  differ (shared keys, env blocks vs sources, ckpt vs resume, W&B, renderer) are `checks`.
- the env API (probe, rows, round trip) and whether a source is a Taskset: `env_api`,
  `trains_tasksets`.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import ConfigError
from ..rundir import MAIN_LAYOUT, SEED_LAYOUT
from . import env_api_v1, verifiers_classic
from . import prime_rl_checks as checks
from .prime_rl import Dialect, Rename
from .toml_paths import CONFIG_ERROR, get_path, is_true, kebab, read_toml

_SOURCE_HINT = "[[orchestrator.{}.source]] with env.taskset.id"
_ENV_HINT = "[[orchestrator.{}.env]] with id and args"

# Seed path -> prime-rl >= 0.8 path. The one rename map: builders, hints (both ways), the engine's view.
RENAMES: tuple[Rename, ...] = (
    Rename("orchestrator.rollouts_per_example", "orchestrator.group_size"),
    Rename("orchestrator.eval.rollouts_per_example", "orchestrator.eval.group_size"),
    Rename("orchestrator.train.env", "orchestrator.train.source", "shape",
           as_seed=_ENV_HINT.format("train"), as_v08=_SOURCE_HINT.format("train")),
    Rename("orchestrator.eval.env", "orchestrator.eval.source", "shape",
           as_seed=_ENV_HINT.format("eval"), as_v08=_SOURCE_HINT.format("eval")),
    Rename("orchestrator.env", "orchestrator.train.source", "shape", as_v08=_SOURCE_HINT.format("train")),
    Rename("ckpt.resume_step", "resume.step"),
    Rename("clean_output_dir", "clean"),
    Rename("wandb", "monitors.wandb", as_seed="[wandb]", as_v08="[monitors.wandb]"),
    Rename("orchestrator.seed", "inference.vllm.seed", as_v08="inference.vllm.seed (orchestrator.seed was removed)"),
    Rename("orchestrator.eval.eval_base_model", "orchestrator.eval.skip_first_step", "invert",
           as_seed="orchestrator.eval.eval_base_model (inverted)",
           as_v08="orchestrator.eval.skip_first_step (inverted; eval_base_model was removed)"),
    Rename("orchestrator.eval.skip_eval_on_resume", "orchestrator.eval.skip_first_step", "hint"),
    # tables only prime-rl >= 0.8 has, named when one arrives in a seed config
    Rename(None, "resume", "hint", as_seed="ckpt.resume_step"),
    Rename(None, "monitors", "hint", as_seed="[wandb]"),
    Rename(None, "run", "hint", as_seed="--output-dir (the seed dialect has no run name)"),
)


def seed_env_block(block: dict) -> dict:
    """The seed dialect writes env blocks as the callers build them ({"id", "args", "name", "ratio", ...})."""
    return copy.deepcopy(block)


# verifiers' plain single-turn chat run in a local subprocess: what prime-rl's own example pins
# (examples/basic/reverse-text/rl.toml:18-28). Unpinned, main resolves a source's harness to the taskset's
# bundled one, else verifiers' `bash` (verifiers a60a606ec v1/configs/env.py:159-166), in a Prime sandbox VM
# (runtime default `prime`, vm = true): another task, which fails without Prime credentials.
PLAIN_CHAT = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}


def pin_plain_chat(src: dict) -> dict:
    """`src` (a v0.8 source) with env.agent.harness / env.agent.runtime set to PLAIN_CHAT where it sets
    none; an agent the config pins itself is kept (the CPU engine refuses any other)."""
    agent = src.setdefault("env", {}).setdefault("agent", {})
    for key, table in PLAIN_CHAT.items():
        if not agent.get(key):
            agent[key] = dict(table)
    return src


def source(block: dict) -> dict:
    """One [[...source]] block from a seed-shaped env block ({"id", "args", "name", "ratio",
    "num_examples", "rollouts_per_example"}).

    A block that already holds `env` is a v0.8 source (a v0.8 canonical config's) and is kept
    verbatim but for the agent. The env args become fields of the taskset's config, beside its id;
    the agent is pinned to plain chat in a subprocess (PLAIN_CHAT) unless the block pins one.
    """
    if "env" in block:
        return pin_plain_chat(copy.deepcopy(block))
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
    pin_plain_chat(out)
    for seed_key, key in (("ratio", "ratio"), ("num_examples", "num_examples"), ("rollouts_per_example", "group_size")):
        if block.get(seed_key) is not None:
            out[key] = block[seed_key]
    return out


def seed_wandb(wandb: dict) -> dict:
    """The seed dialect's [wandb]: prime-rl 09e297743 refuses offline with its default shared = true."""
    w = {k: v for k, v in wandb.items() if v is not None}
    if is_true(w.get("offline")) and "shared" not in w:
        w["shared"] = False
    return w


def v08_wandb(wandb: dict) -> dict:
    """main's [monitors.wandb]: no `shared` (always shared), and offline is refused at that level."""
    w = {k: v for k, v in wandb.items() if v is not None and k != "shared"}
    if is_true(w.pop("offline", False)):
        raise ConfigError(f"{CONFIG_ERROR}: W&B offline is refused at prime-rl >= 0.8's shared level; drop offline or log online")
    return w


SEED = Dialect(
    NAME="seed",
    DIALECT="prime-rl@09e297743",
    SEED_NOTE=(
        "orchestrator.seed seeds the orchestrator's sampling (the CPU engine: sampling and its torch RNG); a seed "
        "replicate changes only that key. Not fixed by it: the order in which asynchronous rollouts complete, and GPU "
        "kernel nondeterminism."
    ),
    keys_file="prime_rl_seed_keys.json",
    renames=RENAMES,
    spells_v08=False,
    env_api=verifiers_classic,
    trains_tasksets=False,
    layout=SEED_LAYOUT,
    shape_env=seed_env_block,
    shape_wandb=seed_wandb,
    renderer_always_named=False,
    names_run=False,
    canonical_subdir="",
    checks=(checks.check_shared_once, checks.check_batch, checks.check_wandb_offline_shared, checks.check_env_blocks,
            checks.check_ckpt, checks.check_model_names, checks.check_renderer_auto_seed),
    foreign_key_fix="(this run writes the seed dialect, prime-rl < 0.8); rename it, or run with --stack v1 for prime-rl >= 0.8",
    foreign_name="prime-rl >= 0.8",
)

V1 = Dialect(
    NAME="v1",
    DIALECT="prime-rl@559b44772",
    SEED_NOTE=(
        "prime-rl >= 0.8 has no orchestrator.seed: a seed replicate sets inference.vllm.seed (the sampling seed of the "
        "inference server; the CPU engine seeds sampling and its torch RNG with it). Not fixed by any key: the order "
        "in which asynchronous rollouts complete and so which groups form a batch (the default sampler cycles the "
        "taskset in source order), and GPU kernel nondeterminism."
    ),
    keys_file="prime_rl_v08_keys.json",
    renames=RENAMES,
    spells_v08=True,
    env_api=env_api_v1,
    trains_tasksets=True,
    layout=MAIN_LAYOUT,
    shape_env=source,
    shape_wandb=v08_wandb,
    renderer_always_named=True,
    names_run=True,
    canonical_subdir="basic",
    checks=(checks.check_shared_agree, checks.check_batch, checks.check_sources, checks.check_resume,
            checks.check_monitors_offline, checks.check_renderer_named),
    foreign_key_fix="(prime-rl >= 0.8, prime-rl@559b44772); rename it, or run with --stack seed for an older prime-rl",
    foreign_name="seed-dialect (prime-rl < 0.8)",
    weight_broadcast={"type": "filesystem"},
    forks_with_resume_dir=True,
)

DIALECTS: dict[str, Dialect] = {d.NAME: d for d in (SEED, V1)}


def dialect_named(name: str | None) -> Dialect:
    """The dialect of a --stack value; None (an older run.json) is the seed dialect."""
    return DIALECTS[name or SEED.NAME]


def dialect_for(cfg) -> Dialect:
    """The dialect of a run (its run.json `stack`)."""
    return dialect_named(getattr(cfg, "stack", None))


def dialect_of_argv(argv: list[str]) -> Dialect:
    """The dialect an `rl` argv is written in: v0.8 when it names a run (--run.name, which the
    v0.8 writer always passes), sets the group size or a resume on the CLI, or any of its files
    holds a key of the v0.8 side of RENAMES; else the seed dialect."""
    v08_paths = {r.v08 for r in RENAMES if r.v08}
    flags = {"--" + kebab(p) for p in v08_paths}
    if any(tok.split("=", 1)[0] in flags or tok.startswith(("--run.", "--resume")) for tok in argv):
        return V1
    for i, tok in enumerate(argv[:-1]):
        if tok == "@":
            try:
                data = read_toml(argv[i + 1])
            except Exception:  # the dialect's own parser names a bad file
                continue
            if any(get_path(data, p) is not None for p in v08_paths):
                return V1
    return SEED

