"""The engine's config: prime-rl's `rl` dict (seed-dialect keys) -> the subset this CPU engine honours.

The generic contract (argv parsing, deep merge, unknown keys, types, cross-field
rules) is `stack/`'s (the run's Dialect), derived from prime-rl's own source; a
prime-rl >= 0.8 config is first read in seed-dialect keys through the same rename map
(`engine_view`). A config prime-rl would reject is rejected here with the same
words. This module then maps the merged dict onto `EngineConfig`. Keys prime-rl accepts but this engine
does not use are listed once in the log as ignored (`ignored_keys`).

Honoured keys (everything else valid is ignored with a note):

    max_steps (required, ABSOLUTE), seq_len, output_dir, clean_output_dir
    [model] name                         local HF dir or a built-in id (student.py)
    [ckpt] interval, resume_step, keep_last, keep_interval
    [orchestrator] batch_size, rollouts_per_example, seed
    [orchestrator.train.sampling] max_completion_tokens (or max_tokens), temperature
    [[orchestrator.train.env]] id, name, args, ratio
    [orchestrator.eval] interval, num_examples, rollouts_per_example, eval_base_model, skip_eval_on_resume
    [orchestrator.eval.sampling] max_completion_tokens (or max_tokens), temperature
    [[orchestrator.eval.env]] id, name, args, num_examples, rollouts_per_example
    [orchestrator.renderer] name         accepted; prompts always use the tokenizer's chat template
    [trainer.optim] lr, weight_decay, betas1, betas2, max_norm

Engine defaults where prime-rl's are GPU-scale: lr 3e-5 (prime-rl's 1e-6 does
nothing to a 1M-parameter student in 100 steps). No env-specific defaults: [model]
name is required (prime-rl's default, a hub model, cannot be downloaded here), and
max_completion_tokens unset means, as in prime-rl, whatever room the prompt leaves
in min(seq_len, the model's context) (train.py caps every budget by that room).
Eval sampling: greedy unless [orchestrator.eval.sampling] temperature > 0.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from ..rundir import SEED_LAYOUT, OutputLayout
from ..stack.dialects import SEED
from ..stack.prime_rl_keys import gpu_only_keys
from ..stack.toml_paths import CONFIG_ERROR, get_path, is_true, set_path

DEFAULT_LR = 3e-5
DEFAULT_MAX_TOKENS = None  # None = the room the longest prompt leaves in min(seq_len, model context)
DEFAULT_BATCH = 128  # prime-rl's default [orchestrator] batch_size
DEFAULT_ROLLOUTS = 1  # prime-rl's default rollouts_per_example
DEFAULT_EVAL_INTERVAL = 100

HONOURED = {
    "max_steps", "seq_len", "output_dir", "clean_output_dir",
    "model.name",
    "ckpt.interval", "ckpt.resume_step", "ckpt.keep_last", "ckpt.keep_interval",
    "orchestrator.batch_size", "orchestrator.rollouts_per_example", "orchestrator.seed",
    "orchestrator.train.sampling.max_completion_tokens", "orchestrator.train.sampling.max_tokens",
    "orchestrator.train.sampling.temperature",
    "orchestrator.train.env.id", "orchestrator.train.env.name", "orchestrator.train.env.args",
    "orchestrator.train.env.ratio",
    "orchestrator.eval.interval", "orchestrator.eval.num_examples", "orchestrator.eval.rollouts_per_example",
    "orchestrator.eval.eval_base_model", "orchestrator.eval.skip_eval_on_resume",
    "orchestrator.eval.sampling.max_completion_tokens", "orchestrator.eval.sampling.max_tokens",
    "orchestrator.eval.sampling.temperature",
    "orchestrator.eval.env.id", "orchestrator.eval.env.name", "orchestrator.eval.env.args",
    "orchestrator.eval.env.num_examples", "orchestrator.eval.env.rollouts_per_example",
    "orchestrator.renderer.name",
    "trainer.optim.lr", "trainer.optim.weight_decay", "trainer.optim.betas1", "trainer.optim.betas2",
    "trainer.optim.max_norm",
}
# Harmless bookkeeping keys: accepted silently (they change nothing a CPU run could do).
SILENT = {"dry_run", "log", "orchestrator.log", "trainer.log"}


class EnvBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    ratio: float | None = None
    num_examples: int | None = None  # eval blocks only
    rollouts_per_example: int | None = None  # eval blocks only


class EvalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    interval: int = DEFAULT_EVAL_INTERVAL  # steps between evals (also at max_steps)
    num_examples: int = -1  # -1 = the whole eval split
    rollouts_per_example: int = 1
    eval_base_model: bool = True  # also evaluate at step 0
    skip_eval_on_resume: bool = True  # no eval at the resume step itself
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    temperature: float = 0.0  # 0 = greedy
    envs: list[EnvBlock]


class EngineConfig(BaseModel):
    """What the CPU engine runs, resolved from a prime-rl seed-dialect config."""

    model_config = ConfigDict(extra="forbid")
    output_dir: Path
    clean_output_dir: bool = False
    max_steps: int  # ABSOLUTE step count
    seq_len: int | None = None  # caps prompt + completion tokens
    model_name: str
    ckpt: bool = False  # [ckpt] present: save checkpoints
    ckpt_interval: int | None = None  # also saves at max_steps
    resume_step: int | None = None  # -1 = latest
    keep_last: int | None = None
    keep_interval: int | None = None
    batch_size: int  # rollouts per step
    rollouts_per_example: int
    seed: int = 0
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    temperature: float = 1.0
    train_envs: list[EnvBlock]
    eval: EvalConfig | None = None
    lr: float = DEFAULT_LR
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.99)
    max_norm: float = 1.0
    layout: OutputLayout = SEED_LAYOUT  # the output tree of the config's prime-rl version (the dialect's)
    resume_dir: Path | None = None  # main's resume.dir: another run's checkpoints/step_N to fork (main_extras)
    skip_progress: bool = False  # main's [orchestrator.ckpt] skip_progress: do not restore the train-source state
    tasksets: bool = False  # sources are verifiers v1 Tasksets (the v1 dialect), not classic envs
    kl_coef: float = 0.0  # k3 KL to the start-of-run weights (engine knob, off by default)
    clip_eps: float = 0.2  # PPO ratio clip (one update per batch: ratio is 1, clip inactive)

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size // self.rollouts_per_example


def _leaves(d: Any, prefix: str = ""):
    if isinstance(d, dict):
        for k, v in d.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            if (isinstance(v, dict) and v and not p.endswith(".env.args")) or (isinstance(v, list) and v and all(isinstance(x, dict) for x in v)):
                yield from _leaves(v, p)
            else:
                yield p, v
    elif isinstance(d, list):
        for item in d:
            yield from _leaves(item, prefix)


def ignored_keys(cfg: dict) -> list[str]:
    """prime-rl-valid keys present in `cfg` that this engine does not honour, sorted (GPU-only first)."""
    gpu = gpu_only_keys(cfg)
    other = set()
    for path, value in _leaves(cfg):
        if value is None or path in HONOURED or any(path == s or path.startswith(s + ".") for s in SILENT):
            continue
        if path.startswith("wandb"):
            other.add("wandb")
            continue
        if any(path == g or path.startswith(g + ".") for g in gpu):
            continue
        if path in ("inference", "trainer", "orchestrator", "ckpt", "model") and value == {}:
            continue  # an empty table: nothing to honour or ignore
        other.add(path)
    return gpu + sorted(other)


def _int(cfg: dict, path: str, default: Any = None) -> Any:
    v = get_path(cfg, path, default)
    return int(v) if v is not None else None


def _float(cfg: dict, path: str, default: Any = None) -> Any:
    v = get_path(cfg, path, default)
    return float(v) if v is not None else None


def _env_blocks(envs: list[dict] | None, where: str) -> list[EnvBlock]:
    out = []
    for e in envs or []:
        if "id" not in e:
            raise ConfigError(f"{CONFIG_ERROR}: [[{where}]] block without 'id'; name the verifiers environment to load")
        out.append(EnvBlock(
            id=str(e["id"]), name=str(e.get("name") or str(e["id"]).split("@")[0]), args=dict(e.get("args") or {}),
            ratio=float(e["ratio"]) if e.get("ratio") is not None else None,
            num_examples=int(e["num_examples"]) if e.get("num_examples") is not None else None,
            rollouts_per_example=int(e["rollouts_per_example"]) if e.get("rollouts_per_example") is not None else None,
        ))
    return out


def resolve(cfg: dict) -> EngineConfig:
    """Validate `cfg` (prime-rl's rules, seed-dialect keys: `engine_view` gives a v0.8 config in them) and map it
    onto EngineConfig; ConfigError names the key."""
    SEED.validate_config(cfg)
    if get_path(cfg, "output_dir") is None:
        raise ConfigError(f"{CONFIG_ERROR}: no output directory; pass --output-dir D")
    max_steps = _int(cfg, "max_steps", get_path(cfg, "trainer.max_steps", get_path(cfg, "orchestrator.max_steps")))
    if max_steps is None or max_steps < 1:
        raise ConfigError(f"{CONFIG_ERROR}: max_steps is not set (or < 1); the CPU engine needs a finite, absolute max_steps")
    train = get_path(cfg, "orchestrator.train.env") or get_path(cfg, "orchestrator.env")
    train_envs = _env_blocks(train, "orchestrator.train.env")
    if not train_envs:
        raise ConfigError(f"{CONFIG_ERROR}: no [[orchestrator.train.env]]; add at least one training environment (id = ...)")
    rpe = _int(cfg, "orchestrator.rollouts_per_example", DEFAULT_ROLLOUTS)
    batch = _int(cfg, "orchestrator.batch_size", DEFAULT_BATCH)
    if batch is None:
        raise ConfigError(f"{CONFIG_ERROR}: orchestrator.token_batch_size is not supported by the CPU engine; set orchestrator.batch_size")

    model_name = get_path(cfg, "model.name")
    if not model_name:
        from .builtin_students import ids  # the registry: no torch, no verifiers
        raise ConfigError(f"{CONFIG_ERROR}: model.name is not set; name a local Hugging Face directory or a built-in "
                          f"id ({', '.join(ids()) or 'none registered'}): the CPU engine downloads nothing")

    eval_cfg = None
    if isinstance(get_path(cfg, "orchestrator.eval"), dict):
        ev = get_path(cfg, "orchestrator.eval")
        envs = _env_blocks(ev.get("env"), "orchestrator.eval.env")
        if not envs:
            envs = [EnvBlock(**b.model_dump()) for b in train_envs]  # no eval env given: eval on the train env(s)
        eval_cfg = EvalConfig(
            interval=_int(cfg, "orchestrator.eval.interval", DEFAULT_EVAL_INTERVAL),
            num_examples=_int(cfg, "orchestrator.eval.num_examples", -1),
            rollouts_per_example=_int(cfg, "orchestrator.eval.rollouts_per_example", 1),
            eval_base_model=is_true(get_path(cfg, "orchestrator.eval.eval_base_model", True)),
            skip_eval_on_resume=is_true(get_path(cfg, "orchestrator.eval.skip_eval_on_resume", True)),
            max_tokens=_int(cfg, "orchestrator.eval.sampling.max_completion_tokens",
                            get_path(cfg, "orchestrator.eval.sampling.max_tokens", DEFAULT_MAX_TOKENS)),
            temperature=_float(cfg, "orchestrator.eval.sampling.temperature", 0.0),
            envs=envs,
        )
        if eval_cfg.interval < 1:
            raise ConfigError(f"{CONFIG_ERROR}: orchestrator.eval.interval = {eval_cfg.interval}: must be >= 1")

    ckpt = isinstance(cfg.get("ckpt"), dict)
    b1, b2 = _float(cfg, "trainer.optim.betas1", 0.9), _float(cfg, "trainer.optim.betas2", 0.99)
    return _in_range(EngineConfig(
        output_dir=Path(str(get_path(cfg, "output_dir"))),
        clean_output_dir=is_true(get_path(cfg, "clean_output_dir", False)),
        max_steps=max_steps,
        seq_len=_int(cfg, "seq_len"),
        model_name=str(model_name),
        ckpt=ckpt,
        ckpt_interval=_int(cfg, "ckpt.interval"),
        resume_step=_int(cfg, "ckpt.resume_step"),
        keep_last=_int(cfg, "ckpt.keep_last"),
        keep_interval=_int(cfg, "ckpt.keep_interval"),
        batch_size=batch,
        rollouts_per_example=rpe,
        seed=_int(cfg, "orchestrator.seed", 0) or 0,
        max_tokens=_int(cfg, "orchestrator.train.sampling.max_completion_tokens",
                        get_path(cfg, "orchestrator.train.sampling.max_tokens", DEFAULT_MAX_TOKENS)),
        temperature=_float(cfg, "orchestrator.train.sampling.temperature", 1.0),
        train_envs=train_envs,
        eval=eval_cfg,
        lr=_float(cfg, "trainer.optim.lr", DEFAULT_LR),
        weight_decay=_float(cfg, "trainer.optim.weight_decay", 0.01),
        betas=(b1, b2),
        max_norm=_float(cfg, "trainer.optim.max_norm", 1.0),
    ))


def _in_range(e: EngineConfig) -> EngineConfig:
    """prime-rl's bounds on the knobs a run varies, plus finiteness (TOML spells nan and inf): a
    config that breaks them is refused before any step, naming the key, instead of training
    (`temperature = nan` sampled garbage that was recorded as a flat result, `seq_len = -5` ran
    until the tokenizer refused)."""
    checks = [
        ("seq_len", e.seq_len, "an integer >= 1", lambda v: v >= 1),
        ("orchestrator.train.sampling.max_completion_tokens", e.max_tokens, "an integer >= 1", lambda v: v >= 1),
        ("orchestrator.train.sampling.temperature", e.temperature, "a finite number >= 0",
         lambda v: math.isfinite(v) and v >= 0),
        ("trainer.optim.lr", e.lr, "a finite number >= 0", lambda v: math.isfinite(v) and v >= 0),
    ]
    if e.eval is not None:
        checks += [
            ("orchestrator.eval.sampling.max_completion_tokens", e.eval.max_tokens, "an integer >= 1", lambda v: v >= 1),
            ("orchestrator.eval.sampling.temperature", e.eval.temperature, "a finite number >= 0",
             lambda v: math.isfinite(v) and v >= 0),
        ]
    for key, value, allowed, ok in checks:
        if value is not None and not ok(value):
            raise ConfigError(f"{CONFIG_ERROR}: {key} = {value}: must be {allowed}")
    return e


# ---------------------------------------------------------------- the v0.8 dialect


def engine_view(cfg: dict, dialect) -> dict:
    """A validated config of `dialect` as the seed-dialect dict `resolve` maps (same meaning).

    A seed-dialect config is already that. A prime-rl >= 0.8 one is read through the dialect's
    rename map (`stack.dialects.RENAMES`): every renamed key the engine honours moves back to its
    seed path (group_size -> rollouts_per_example, resume.step -> ckpt.resume_step, clean ->
    clean_output_dir, inference.vllm.seed -> orchestrator.seed; skip_first_step becomes
    eval_base_model, inverted); sources become env blocks (id = env.taskset.id, args = the
    taskset's other fields); a bare [resume] is resume_step -1 (the latest). Keys the engine does
    not use in either dialect ([monitors], [run], env agent/serve blocks) are dropped;
    `output_dir` is already the run dir (parse_rl_argv).
    """
    if not dialect.spells_v08:
        return cfg
    src = copy.deepcopy(cfg)
    out: dict[str, Any] = {k: src[k] for k in ("max_steps", "seq_len", "output_dir", "model", "trainer", "log", "dry_run") if k in src}
    orch = {k: v for k, v in (src.get("orchestrator") or {}).items() if k in ("batch_size", "renderer", "log")}
    out["orchestrator"] = orch
    if isinstance(src.get("ckpt"), dict) or isinstance(src.get("resume"), dict):
        out["ckpt"] = dict(src.get("ckpt") or {})
        if isinstance(src.get("resume"), dict) and get_path(src, "resume.dir") is None:
            out["ckpt"]["resume_step"] = -1  # replaced below when [resume] names a step (a dir: main_extras)
    for group in ("train", "eval"):
        table = get_path(src, f"orchestrator.{group}")
        if isinstance(table, dict):
            orch[group] = {k: v for k, v in table.items() if k in ("sampling", "interval", "num_examples")}
            orch[group]["env"] = [_env_block(s) for s in table.get("source") or []]
    for r in dialect.renames:
        value = get_path(src, r.v08) if r.seed in HONOURED and r.v08 else None
        if value is not None and r.kind == "move":
            set_path(out, r.seed, value)
        elif value is not None and r.kind == "invert":
            set_path(out, r.seed, not is_true(value))
    if isinstance(src.get("inference"), dict):
        out.setdefault("inference", {})
    return out


def _env_block(source: dict) -> dict:
    """A v0.8 source as the seed-dialect env block `stack.dialects.source` would have made it from."""
    taskset = dict(get_path(source, "env.taskset") or {})
    block: dict[str, Any] = {"id": taskset.pop("id", "")}
    if taskset:
        block["args"] = taskset
    for key, new in (("name", "name"), ("ratio", "ratio"), ("num_examples", "num_examples"), ("group_size", "rollouts_per_example")):
        if source.get(key) is not None:
            block[new] = source[key]
    return block


def resolved_tomls(cfg: dict) -> dict[str, dict]:
    """The configs/<name>.toml files prime-rl writes: trainer, orchestrator (+ inference when present)."""
    shared = {k: cfg[k] for k in ("max_steps", "seq_len", "model", "ckpt", "wandb", "output_dir") if k in cfg}
    out = {
        "trainer": {**shared, **(cfg.get("trainer") or {})},
        "orchestrator": {**shared, **(cfg.get("orchestrator") or {})},
    }
    if isinstance(cfg.get("inference"), dict):
        out["inference"] = {"model": cfg.get("model", {}), **cfg["inference"]}
    return out



def main_extras(cfg: dict) -> dict:
    """EngineConfig fields that only a prime-rl >= 0.8 config has, read from it before `engine_view`:
    `resume_dir` (resume.dir, configs/shared.py:55-72) and `skip_progress` ([orchestrator.ckpt]
    skip_progress, orchestrator/ckpt.py:58-67).

    Refuses a source whose agent is not pinned to plain chat in a subprocess: in main an unset
    harness resolves to the taskset's bundled one, else verifiers' `bash` (verifiers a60a606ec
    v1/configs/env.py:159-166), in a Prime sandbox VM (runtime default `prime`, vm = true). This
    engine only samples one chat reply, so accepting such a config would train on something the
    GPU run would not do; the tool's builders pin plain chat in every source (stack/dialects.PLAIN_CHAT).
    """
    for group in ("train", "eval"):
        for i, source in enumerate(get_path(cfg, f"orchestrator.{group}.source") or []):
            agent = get_path(source, "env.agent") or {}
            harness = get_path(agent, "harness.id")
            runtime = get_path(agent, "runtime.type")
            if harness != "null" or runtime != "subprocess":
                where = f"[[orchestrator.{group}.source]] #{i + 1} ({get_path(source, 'env.taskset.id')})"
                raise ConfigError(
                    f"{CONFIG_ERROR}: {where}: env.agent.harness.id = {harness!r}, env.agent.runtime.type = {runtime!r}: "
                    "the CPU engine runs plain chat only; unpinned, prime-rl main runs verifiers' bash harness in a "
                    "Prime sandbox VM; set [...env.agent.harness] id = \"null\" and [...env.agent.runtime] "
                    "type = \"subprocess\" (as prime-rl's examples/basic/reverse-text/rl.toml)")
    rdir = get_path(cfg, "resume.dir")
    return {"resume_dir": Path(str(rdir)) if rdir is not None else None,
            "skip_progress": is_true(get_path(cfg, "orchestrator.ckpt.skip_progress", False))}
