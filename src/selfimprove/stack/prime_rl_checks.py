"""`validate_config`: the rules prime-rl applies to an `rl` config before it touches a GPU.

One function for both dialects: the shared checks (sections, unknown keys with a hint when the
key is the other dialect's, leaf types, alias spellings) run once; the cross-field rules that
differ are the dialect's `checks` (a tuple of the functions below, listed in `dialects.py`).
Each failure is one ConfigError line naming the key and the fix. `d` is the run's Dialect
(`prime_rl.Dialect`); this module reads its fields and never imports it.
"""

from __future__ import annotations

from ..errors import ConfigError
from .prime_rl_keys import (
    DEFAULT_MODEL, _more, alias_conflicts, load_key_tree, model_name, needs_default_renderer, renderer_auto_models,
    shared_conflicts, type_errors, unknown_keys,
)
from .toml_paths import CONFIG_ERROR, get_path, is_true


def validate_config(d, cfg: dict, *, partial: bool = False) -> None:
    """Raise ConfigError where prime-rl (at `d`'s commit) would refuse `cfg`.

    Shared: [trainer]/[orchestrator] present; no unknown keys (a key of the other dialect is
    named as such, with its name here); leaf types; one key in two alias spellings of a table
    (max_tokens beside max_completion_tokens). Then `d.checks`, in order. `partial=True` (an
    overlay file, valid only merged with another) checks only keys and types.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"{CONFIG_ERROR}: a config must be a table, got {type(cfg).__name__}")
    if not partial:
        for section in load_key_tree(d.keys_file)["required_sections"]:
            if not isinstance(cfg.get(section), dict):
                raise ConfigError(f"{CONFIG_ERROR}: missing [{section}] section (prime-rl requires [trainer] and [orchestrator], even empty); add '[{section}]'")
    unknown = unknown_keys(cfg, d.keys_file)
    if unknown:
        hint = next((h for h in map(d.other_dialect_key, unknown) if h), None)
        if hint:  # prime-rl's own words first: main answers a seed key with pydantic's "Extra inputs are not permitted"
            raise ConfigError(f"{CONFIG_ERROR}: {hint} (Extra inputs are not permitted) {d.foreign_key_fix}")
        raise ConfigError(f"{CONFIG_ERROR}: unknown key '{unknown[0]}' (extra inputs are not permitted){_more(unknown)}")
    bad = type_errors(cfg, d.keys_file)
    if bad:
        raise ConfigError(f"{CONFIG_ERROR}: {bad[0]}{_more(bad)}")
    twice = alias_conflicts(cfg, d.keys_file)
    if twice:
        raise ConfigError(f"{CONFIG_ERROR}: {twice[0]} are the same key in two spellings; keep one "
                          f"(prime-rl refuses both in one table){_more(twice)}")
    if partial:
        return
    for check in d.checks:
        check(d, cfg)


# ---------------------------------------------------------------- rules both dialects apply


def check_batch(d, cfg: dict) -> None:
    """batch_size counts rollouts, so it must be a multiple of the group size (rollouts_per_example / group_size)."""
    group_key = d.key("orchestrator.rollouts_per_example")
    bs, tbs = get_path(cfg, "orchestrator.batch_size"), get_path(cfg, "orchestrator.token_batch_size")
    rpe = get_path(cfg, group_key, 1)
    if bs is not None and tbs is not None:
        raise ConfigError(f"{CONFIG_ERROR}: orchestrator.batch_size and orchestrator.token_batch_size are both set; set exactly one")
    for key, val in (("orchestrator.batch_size", bs), (group_key, rpe)):
        if val is not None and int(val) < 1:
            raise ConfigError(f"{CONFIG_ERROR}: {key} = {val}: must be >= 1")
    if bs is not None and int(bs) % int(rpe):
        raise ConfigError(
            f"{CONFIG_ERROR}: orchestrator.batch_size = {bs} is not divisible by {group_key} = {rpe}; "
            f"batch_size counts rollouts, use a multiple such as {max(1, int(bs) // int(rpe)) * int(rpe)}"
        )


def _refuse_auto_renderer(model: str) -> None:
    raise ConfigError(
        f"{CONFIG_ERROR}: orchestrator.renderer.name is 'auto' but '{model}' is not in prime-rl's renderer map; "
        f"set [orchestrator.renderer] name = \"default\""
    )


# ---------------------------------------------------------------- seed-only rules (prime-rl 09e297743)


def check_shared_once(d, cfg: dict) -> None:
    """prime-rl at the seed commit refuses a shared key set at top level and in a section, even to the same value."""
    conflicts = shared_conflicts(cfg, d.keys_file)
    if conflicts:
        shared, sub = conflicts[0]
        raise ConfigError(f"{CONFIG_ERROR}: '{shared}' is set at top level and as '{sub}'; set it in one place (prime-rl refuses shared-field duplicates)")


def check_wandb_offline_shared(d, cfg: dict) -> None:
    if isinstance(cfg.get("wandb"), dict) and is_true(get_path(cfg, "wandb.offline")) and is_true(get_path(cfg, "wandb.shared", True)):
        raise ConfigError(f"{CONFIG_ERROR}: wandb.offline = true needs wandb.shared = false (shared W&B runs need a server)")


def check_env_blocks(d, cfg: dict) -> None:
    """[[orchestrator.{train,eval}.env]]: unique names ('all' reserved), ratios on all blocks or none, > 0."""
    for group in ("train", "eval"):
        envs = get_path(cfg, f"orchestrator.{group}.env")
        if group == "train" and envs is None:
            envs = get_path(cfg, "orchestrator.env")  # deprecated spelling, still accepted
        if not envs:
            continue
        key = f"orchestrator.{group}.env"
        names = [e.get("name") or str(e.get("id", "reverse-text")).split("@")[0] for e in envs]
        _unique_names(key, names, reserved="all")
        ratios = [e.get("ratio") for e in envs]
        if any(r is None for r in ratios) and any(r is not None for r in ratios):
            raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] ratio must be set on all blocks or none")
        if any(r is not None and float(r) <= 0 for r in ratios):
            raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] ratio must be > 0")


def _unique_names(key: str, names: list[str], reserved: str) -> None:
    dupes = sorted({x for x in names if names.count(x) > 1})
    if dupes:
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] names are not unique ({', '.join(dupes)}); give each block a distinct name")
    if reserved in names:
        raise ConfigError(f"{CONFIG_ERROR}: [[{key}]] name '{reserved}' is reserved by prime-rl; pick another name")


def check_ckpt(d, cfg: dict) -> None:
    """One shared [ckpt]; knob floors; resume_step < max_steps (the seed dialect's KeyError 'perf/peak_memory' crash)."""
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


def check_model_names(d, cfg: dict) -> None:
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


def check_renderer_auto_seed(d, cfg: dict) -> None:
    """prime-rl at the seed commit checks the renderer 'auto' rule against the tokenizer's name, unless no renderer is used."""
    if get_path(cfg, "orchestrator.training_mode") == "sft" or not is_true(get_path(cfg, "orchestrator.use_renderer", True)):
        return
    if get_path(cfg, "orchestrator.renderer.name", "auto") != "auto":
        return
    model = get_path(cfg, "orchestrator.tokenizer.name") or get_path(cfg, "tokenizer.name") or model_name(cfg)
    if model not in renderer_auto_models():
        _refuse_auto_renderer(model)


# ---------------------------------------------------------------- v0.8-only rules (prime-rl main 559b44772)


def check_shared_agree(d, cfg: dict) -> None:
    """main accepts a shared key set at top level and in a section when the values agree."""
    for shared, subs in load_key_tree(d.keys_file)["shared_fields"].items():
        value = get_path(cfg, shared)
        for sub in subs:
            if value is not None and get_path(cfg, sub) is not None and get_path(cfg, sub) != value:
                raise ConfigError(f"{CONFIG_ERROR}: '{shared}' = {value!r} at top level but '{sub}' = {get_path(cfg, sub)!r}; set it in one place")


def check_sources(d, cfg: dict) -> None:
    """[[orchestrator.{train,eval}.source]]: each names its taskset; unique names ('agg' reserved); ratios > 0."""
    for group in ("train", "eval"):
        key = f"orchestrator.{group}.source"
        names = []
        for i, src in enumerate(get_path(cfg, key) or []):
            tid = get_path(src, "env.taskset.id") or get_path(src, "env.id")
            if not tid:
                raise ConfigError(f"{CONFIG_ERROR}: {key}[{i}] names no env; set env.taskset.id to the taskset's module")
            names.append(src.get("name") or tid)
            if src.get("ratio") is not None and float(src["ratio"]) <= 0:
                raise ConfigError(f"{CONFIG_ERROR}: {key}[{i}].ratio must be > 0")
        _unique_names(key, names, reserved="agg")


def check_resume(d, cfg: dict) -> None:
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


def check_monitors_offline(d, cfg: dict) -> None:
    if is_true(get_path(cfg, "monitors.wandb.offline")):
        raise ConfigError(f"{CONFIG_ERROR}: monitors.wandb.offline = true is refused at the shared level; set it under [trainer.monitors.wandb] and [orchestrator.monitors.wandb]")


def check_renderer_named(d, cfg: dict) -> None:
    """main's [orchestrator.renderer] is a union discriminated by `name`; then the 'auto' model rule."""
    renderer = get_path(cfg, "orchestrator.renderer")
    if isinstance(renderer, dict) and "name" not in renderer:
        raise ConfigError(f"{CONFIG_ERROR}: [orchestrator.renderer] has no 'name' (prime-rl >= 0.8 picks the renderer class by it); add name = \"auto\" or \"default\"")
    if get_path(cfg, "orchestrator.renderer.name", "auto") == "auto" and needs_default_renderer(model_name(cfg)):
        _refuse_auto_renderer(model_name(cfg))
