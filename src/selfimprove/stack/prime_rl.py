"""prime-rl's `rl` config: the Dialect type and the one set of builders every dialect runs.

A `Dialect` (its two instances and what differs between them are `dialects.py`'s) holds the
data; the builders are its methods, written once in the seed dialect's key names, with every key the
other dialect renames looked up through `Dialect.key` (the one rename map) and each real
difference behind a named field:

1. The `rl` contract: `@ a.toml @ b.toml --dotted.kebab-key value --output-dir D`.
   `parse_rl_argv` reads it the way prime-rl does (files deep-merge left to right, CLI wins,
   lists are replaced whole), `rl_command_args` writes it, `validate_config`
   (`prime_rl_checks.py`) applies the checks prime-rl would apply before touching a GPU.
2. TOML writing: `write_toml` (validated first, a header naming the dialect, atomic).
3. Config builders for the phases: `eval_overlay` + `baseline_overrides` (iter_0),
   `resume_config` (iter_N, Run A, Run C), `fresh_config` (Run B), `canonical_*` helpers.

What is not covered: checks that need prime-rl's runtime (GPU counts, installed envs,
whether a checkpoint exists) and the value ranges of rarely used keys.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ..errors import ConfigError
from ..rundir import OutputLayout
from . import prime_rl_checks
from .prime_rl_keys import leaf_type, needs_default_renderer, normalise_aliases, parse_cli_overrides
from .toml_paths import CONFIG_ERROR, deep_merge, get_path, kebab, merge_argv_files, read_toml, set_path, write_toml_text

SEED_SEQ_LEN = 2048  # the skill's procedure's iter_N template
SEED_TRAIN_MAX_TOKENS = 1024  # the skill's procedure's iter_N template
# One eval budget for every arm (the skill's procedure's iter_0 overlay value), so eval numbers compare.
EVAL_MAX_TOKENS = 2048
ITER0_CHECKPOINTS = 5  # iter_0 saves a checkpoint every max_steps / 5 steps: a crash loses at most a fifth


@dataclass(frozen=True)
class Rename:
    """One key the two prime-rl dialects spell differently: its seed path and its v0.8 path.

    `kind`: "move" (the value moves as is), "shape" (env blocks <-> sources, `Dialect.shape_env`),
    "invert" (a boolean that means the opposite), "hint" (only named when a config of the other
    dialect arrives; the builders never write it). `as_seed` / `as_v08` are how an error names
    the other spelling when its bare path would not say enough.
    """

    seed: str | None
    v08: str | None
    kind: str = "move"
    as_seed: str = ""
    as_v08: str = ""


@dataclass(frozen=True)
class Dialect:
    """One prime-rl (+ verifiers) version: what the builders below need to write and read its configs."""

    NAME: str  # the --stack value, run.json `stack`
    DIALECT: str  # prime-rl@<commit>: named in every written file's header and in errors
    SEED_NOTE: str  # what fixes a run's randomness here (recorded in run.json)
    keys_file: str  # the key snapshot (prime_rl_keys.py reads it)
    renames: tuple[Rename, ...]  # the one rename map, shared by both dialects
    spells_v08: bool  # this dialect writes the v08 side of `renames` (else the seed-dialect side)
    env_api: ModuleType  # the verifiers API this dialect's envs speak
    trains_tasksets: bool  # a train source is a verifiers v1 Taskset (its rows cannot be held out)
    layout: OutputLayout  # where prime-rl writes a run under --output-dir
    shape_env: Callable[[dict], dict]  # a seed-shaped env block {"id", "args", ...} -> this dialect's block
    shape_wandb: Callable[[dict], dict]  # a W&B table as the run gives it -> what this dialect accepts
    renderer_always_named: bool  # [orchestrator.renderer] is a union picked by `name`: always write one
    names_run: bool  # the run dir is output_dir / run.name: the argv passes --run.name
    canonical_subdir: str  # where prime-rl keeps its example configs under configs/
    checks: tuple[Callable[..., None], ...]  # this dialect's cross-field rules (prime_rl_checks.py)
    foreign_key_fix: str  # the fix named when a key of the other dialect arrives
    foreign_name: str  # how that error names the other dialect
    # [weight_broadcast] every arm pins ({} = prime-rl's default): main's default with [inference] is NCCL,
    # which writes no broadcasts/step_N files (configs/rl.py:456-460); filesystem writes every step's
    # HF-named safetensors, the final one included (rl/train.py:582-586), legal on one node with
    # [inference] (entrypoints/rl.py:490-494).
    weight_broadcast: dict = field(default_factory=dict)
    # an arm resumed from iter_0 forks iter_0's checkpoint with prime-rl's own [resume] dir
    # (main configs/shared.py:55-72) instead of having iter_0's trees staged into its output dir
    forks_with_resume_dir: bool = False

    # Phases read and merge configs through the run's dialect object; both are dialect-neutral.
    read_toml = staticmethod(read_toml)
    deep_merge = staticmethod(deep_merge)

    # ------------------------------------------------------------ keys

    def key(self, seed_path: str) -> str:
        """This dialect's spelling of a key the builders name by its seed path."""
        if self.spells_v08:
            for r in self.renames:
                if r.seed == seed_path and r.v08 and r.kind != "hint":
                    return r.v08
        return seed_path

    def other_dialect_key(self, path: str) -> str | None:
        """"'x' is a <other dialect> key; here it is y" when `path` (or a table above it) is the other dialect's."""
        table: dict[str, str] = {}
        for r in self.renames:
            theirs, ours = (r.seed, r.as_v08 or r.v08) if self.spells_v08 else (r.v08, r.as_seed or r.seed)
            if theirs and ours:
                table.setdefault(theirs, ours)
        parts = path.split("[")[0].split(".")
        for i in range(len(parts), 0, -1):
            if (key := ".".join(parts[:i])) in table:
                return f"'{path}' is a {self.foreign_name} key; here it is {table[key]}"
        return None

    def resume_step_of(self, config: dict) -> int:
        """The step an arm config resumes from (0 = a fresh run): ckpt.resume_step / resume.step, or the
        step of main's resume.dir (its name is step_N: configs/shared.py:63-72)."""
        step = get_path(config, self.key("ckpt.resume_step"))
        rdir = get_path(config, "resume.dir") if self.spells_v08 else None
        if step is None and rdir is not None:
            step = int(Path(str(rdir)).name.removeprefix("step_"))
        return int(step or 0)

    def resume_flags(self, config: dict, step: int, own_checkpoint: Path) -> list[str]:
        """The flags a crashed arm is relaunched with to resume from its own checkpoint `step`.

        The seed dialect: --ckpt.resume-step N. Main has no ckpt.resume_step ("Extra inputs are not permitted ...
        did you mean --resume?"): --resume.step N (docs/training.md:289-299), or, for an arm that forks
        another run with resume.dir (which excludes resume.step: configs/shared.py:58-63), resume.dir
        pointed at its own checkpoints/step_N with the train-source state restored (its own sources)."""
        if not self.spells_v08:
            return ["--ckpt.resume-step", str(step)]
        if get_path(config, "resume.dir") is not None:
            return ["--resume.dir", str(own_checkpoint), "--no-orchestrator.ckpt.skip-progress"]
        return ["--resume.step", str(step)]

    def training_seed_key(self) -> str:
        """Where this dialect keeps the training seed (a seed replicate changes only this key)."""
        return self.key("orchestrator.seed")

    def eval_sources(self, config: dict) -> list[dict]:
        """The eval env blocks of a written arm config."""
        return get_path(config, self.key("orchestrator.eval.env")) or []

    def validate_config(self, cfg: dict, *, partial: bool = False) -> None:
        prime_rl_checks.validate_config(self, cfg, partial=partial)

    def normalise_aliases(self, cfg: dict) -> tuple[dict, list[str]]:
        return normalise_aliases(cfg, self.keys_file)

    # ------------------------------------------------------------ the rl command line

    def rl_command_args(self, toml_files: list[Path], overrides: dict, output_dir: Path) -> list[str]:
        """['@', 'a.toml', ..., '--model.name', 'X', '--max-steps', '100', ..., '--output-dir', 'D'].

        Flags are kebab-case dotted paths in the override dict's order; booleans are `--flag` /
        `--no-flag`; arrays and dict-valued keys (env args) are one JSON token, which prime-rl's
        CLI decodes. Arrays of tables can't be passed on prime-rl's CLI: put them in a TOML file.
        Where prime-rl writes a run to `output_dir / run.name` (`names_run`), the arm's dir is
        passed as `--output-dir <parent> --run.name <name>`, so every artefact stays under it
        (and a fixed run name is what resuming needs).
        """
        if "output_dir" in overrides:
            raise ConfigError(f"{CONFIG_ERROR}: output_dir is passed as --output-dir; remove it from the overrides")
        argv: list[str] = []
        for f in toml_files:
            argv += ["@", str(f)]
        for path, value in self._flatten(overrides, ""):
            flag = "--" + kebab(path)
            if value is True:
                argv.append(flag)
            elif value is False:
                argv.append("--no-" + kebab(path))
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
        output_dir = Path(output_dir)
        if self.names_run:
            return argv + ["--output-dir", str(output_dir.parent), "--run.name", output_dir.name]
        return argv + ["--output-dir", str(output_dir)]

    def _flatten(self, d: dict, prefix: str):
        for key, value in d.items():
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict) and value and leaf_type(path, self.keys_file) not in ("dict", "any"):
                yield from self._flatten(value, path)
            else:
                yield path, value

    def parse_rl_argv(self, argv: list[str]) -> tuple[dict, list[Path]]:
        """A full `rl` argv -> (merged, validated config dict, the TOML files in order).

        Files deep-merge left to right, then the CLI overrides (incl. --output-dir) go on top.
        Where the run dir is `output_dir / run.name`, output_dir is resolved to it.
        """
        merged, files, flags = merge_argv_files(argv)
        merged = deep_merge(merged, parse_cli_overrides(flags, self.keys_file))
        self.validate_config(merged)
        name = get_path(merged, "run.dir") or get_path(merged, "run.name")
        if self.names_run and name and merged.get("output_dir"):
            merged["output_dir"] = str(Path(merged["output_dir"]) / name)
        return merged, files

    def write_toml(self, path: Path, cfg: dict, *, partial: bool = False, note: str = "") -> None:
        """Validate `cfg`, render it with tomli_w and write it atomically.

        `partial=True` is for overlays that are only valid merged with another file (eval_overlay.toml).
        `note` is written as comment lines under the header (e.g. where a generated budget came from).
        """
        self.validate_config(cfg, partial=partial)
        comments = "".join(f"# {line}\n" for line in note.splitlines())
        write_toml_text(path, cfg, f"# Written by selfimprove ({self.DIALECT} dialect). Regenerated by the tool; edit the run, not this file.\n{comments}")

    # ------------------------------------------------------------ canonical configs

    def find_canonical_config(self, dataset: str, explicit: str | None, prime_rl_dir: str | None,
                              project_configs: list[Path]) -> tuple[Path | None, list[Path]]:
        """(found, paths tried): --config, then <PRIME_RL_DIR>/configs/[<subdir>/]<dataset>/rl.toml, then each
        project configs dir (the same subdir below it).

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
            roots.append(Path(prime_rl_dir).expanduser() / "configs" / self.canonical_subdir)
        roots += [Path(p) / self.canonical_subdir for p in project_configs]
        tried: list[Path] = []
        for root in roots:
            for name in names:
                cand = root / name / "rl.toml"
                tried.append(cand)
                if cand.is_file():
                    return cand, tried
        return None, tried

    def canonical_from_hub_env(self, hub_id: str, env_args: dict, model: str, context: int | None = None,
                               train_tokens: int | None = None) -> dict:
        """A minimal canonical config for an env that has no configs/<dataset>/rl.toml.

        Shaped like prime-rl's own example configs: seq_len, [model], one train env block (id + the
        args the hub env is loaded with), train sampling tokens, empty [trainer] and [inference].
        max_steps, batch size and rollouts come from the CLI overrides, as in the skill's procedure. Models
        outside prime-rl's renderer map get name = "default". `context` (the student's positions,
        when known) caps seq_len, and the train completion budget to half of it, so the prompt
        keeps the other half: the procedure's 2048 / 1024 ask a 256-position CPU student for 8x what
        it can attend over. `train_tokens`, when given, is the budget itself (phases/completion_budget.py
        derives it from the env's reference answers).
        """
        seq_len = SEED_SEQ_LEN
        if context:
            seq_len = min(seq_len, context)
        if train_tokens is None:
            train_tokens = min(SEED_TRAIN_MAX_TOKENS, max(1, seq_len // 2))
        env: dict[str, Any] = {"id": hub_id}
        if env_args:
            env["args"] = copy.deepcopy(env_args)
        train: dict[str, Any] = {"sampling": {"max_completion_tokens": train_tokens}}
        train[self.key("orchestrator.train.env").rsplit(".", 1)[1]] = [self.shape_env(env)]
        orch: dict[str, Any] = {"train": train}
        if renderer := self._renderer(None, model):
            orch["renderer"] = renderer
        return {"seq_len": seq_len, "model": {"name": model}, "orchestrator": orch, "trainer": {}, "inference": {}}

    def canonical_train_envs(self, canonical: dict) -> list[dict]:
        """The canonical config's train env blocks, verbatim (deep copies)."""
        key = self.key("orchestrator.train.env")
        envs = get_path(canonical, key)
        if envs is None:
            envs = get_path(canonical, self.key("orchestrator.env"))  # the seed dialect's deprecated spelling
        if not envs:
            raise ConfigError(f"{CONFIG_ERROR}: the canonical config has no [[{key}]]; add the real dataset's {key.rsplit('.', 1)[1]} block")
        return copy.deepcopy(envs)

    def canonical_knobs(self, canonical: dict) -> dict:
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
            "seed": get_path(canonical, self.training_seed_key()),
        }
        return {k: v for k, v in picks.items() if v is not None}

    # ------------------------------------------------------------ builders

    def eval_overlay(self, *, max_steps: int, eval_env_id: str, eval_env_args: dict, num_examples: int,
                     max_completion_tokens: int = EVAL_MAX_TOKENS) -> dict:
        """iter_0's eval_overlay.toml: checkpoints, one eval at max_steps on the hub env only.

        The skill's procedure saves exactly one checkpoint (interval = max_steps), which left nothing to
        `--resume` from after a crash mid-iter_0 (issue 13, which wins here): the overlay saves
        every max_steps / 5 steps and keeps only the latest (keep_last = 1), so disk use stays
        one extra checkpoint and the final step, the one every arm resumes from, is always kept.
        Its eval env list replaces any eval envs of the canonical config (lists are replaced
        whole), so iter_0 is evaluated on exactly what every later arm is.
        """
        _positive(max_steps=max_steps, max_completion_tokens=max_completion_tokens)
        overlay: dict[str, Any] = {"ckpt": {"interval": max(1, max_steps // ITER0_CHECKPOINTS), "keep_last": 1}}
        if self.weight_broadcast:
            overlay["weight_broadcast"] = copy.deepcopy(self.weight_broadcast)
        overlay["orchestrator"] = {"eval": self._eval_table(max_steps, max_completion_tokens, eval_env_id, eval_env_args,
                                                            num_examples)}
        return overlay

    def train_sources_overlay(self, canonical: dict) -> dict:
        """iter_0's overlay fragment that re-writes the canonical config's train blocks through `shape_env`
        (main: each source pinned to plain chat in a subprocess), or {} when that changes nothing (the seed dialect).
        A list in an overlay replaces the canonical list whole."""
        envs = self.canonical_train_envs(canonical)
        shaped = [self.shape_env(b) for b in envs]
        overlay: dict[str, Any] = {}
        if shaped != envs:
            set_path(overlay, self.key("orchestrator.train.env"), shaped)
        return overlay

    def baseline_overrides(self, *, model: str, max_steps: int, batch_size: int, rollouts_per_example: int,
                           canonical: dict | None = None) -> dict:
        """iter_0's CLI overrides (--model.name, --max-steps, --orchestrator.batch-size, the group size);
        output_dir is passed separately.

        Adds --orchestrator.renderer.name default when `model` would fail prime-rl's renderer
        'auto' check and `canonical` (if given) does not pick a renderer itself.
        """
        _positive(max_steps=max_steps, batch_size=batch_size, rollouts_per_example=rollouts_per_example)
        cfg: dict[str, Any] = {"model": {"name": model}, "max_steps": max_steps, "orchestrator": {"batch_size": batch_size}}
        set_path(cfg, self.key("orchestrator.rollouts_per_example"), rollouts_per_example)
        if needs_default_renderer(model, canonical):
            cfg["orchestrator"]["renderer"] = {"name": "default"}
        return cfg

    def resume_config(self, *, model: str, resume_step: int, new_steps: int, batch_size: int, rollouts_per_example: int,
                      train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                      seq_len: int | None = None, train_max_tokens: int | None = None, eval_max_tokens: int | None = None,
                      lr: float | None = None, wandb: dict | None = None, renderer: str | dict | None = None,
                      seed: int | None = None, temperature: float | None = None,
                      fork_from: Path | None = None, skip_progress: bool = False) -> dict:
        """rl.toml of an arm that resumes from iter_0's checkpoint (iter_N, Run A, Run C).

        Main (`forks_with_resume_dir`): `fork_from` = iter_0's `checkpoints/step_<resume_step>` becomes
        [resume] dir (the fork, configs/shared.py:55-72), and `skip_progress` sets [orchestrator.ckpt]
        skip_progress = true: the arm's train sources differ from iter_0's and main's orchestrator
        refuses to restore their state otherwise (orchestrator/train_source.py:78-82, ckpt.py:58-67).
        Without `fork_from` (or in the seed dialect) the arm resumes with the resume step, from staged trees.

        max_steps = resume_step + new_steps (ABSOLUTE); the resume step, [ckpt] interval = new_steps
        (prime-rl also saves at max_steps); [orchestrator.eval] interval = max_steps, so the arm is
        evaluated once, at the end. Optional knobs, when None: seq_len 2048 and train tokens 1024
        (the skill's procedure's iter_N template), eval tokens EVAL_MAX_TOKENS (iter_0's overlay value, so every
        arm is evaluated alike), prime-rl's defaults for lr / temperature / seed, no W&B, and
        renderer "default" only for models outside prime-rl's renderer map. A user expects an arm
        to train like iter_0 did, with only the data changed: callers pass
        `**canonical_knobs(canonical)` and put the teacher's choices on top. `renderer` is a name
        or a whole [orchestrator.renderer] table (as canonical_knobs returns it).
        """
        if not isinstance(resume_step, int) or isinstance(resume_step, bool) or resume_step < 1:
            raise ConfigError(f"{CONFIG_ERROR}: {self.key('ckpt.resume_step')} = {resume_step!r}: must be the integer step of iter_0's checkpoint (>= 1)")
        _positive(new_steps=new_steps)
        if fork_from is not None and Path(fork_from).name != f"step_{resume_step}":
            raise ConfigError(f"{CONFIG_ERROR}: resume dir {fork_from} is not the checkpoint of step {resume_step}")
        return self._arm_config(
            fork_from=Path(fork_from) if fork_from is not None and self.forks_with_resume_dir else None,
            skip_progress=skip_progress, start_step=resume_step, model=model, new_steps=new_steps, batch_size=batch_size,
            rollouts_per_example=rollouts_per_example, train_envs=train_envs, eval_env_id=eval_env_id,
            eval_env_args=eval_env_args, num_examples=num_examples, seq_len=seq_len, train_max_tokens=train_max_tokens,
            eval_max_tokens=eval_max_tokens, lr=lr, wandb=wandb, renderer=renderer, seed=seed, temperature=temperature,
        )

    def fresh_config(self, *, model: str, new_steps: int, batch_size: int, rollouts_per_example: int,
                     train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                     seq_len: int | None = None, train_max_tokens: int | None = None, eval_max_tokens: int | None = None,
                     lr: float | None = None, wandb: dict | None = None, renderer: str | dict | None = None,
                     seed: int | None = None, temperature: float | None = None, clean_output_dir: bool = False,
                     base_eval: bool = True) -> dict:
        """rl.toml of an arm trained from the base model (Run B): no resume step, max_steps = new_steps.
        `base_eval=False` skips the start-up eval of the base model (main's skip_first_step, the seed
        dialect's eval_base_model = false).

        Knobs and defaults as in `resume_config`. `clean_output_dir=True` lets a retried run start
        over in an output dir that already holds checkpoints (prime-rl then deletes that dir).
        """
        return self._arm_config(
            start_step=0, model=model, new_steps=new_steps, batch_size=batch_size,
            rollouts_per_example=rollouts_per_example, train_envs=train_envs, eval_env_id=eval_env_id,
            eval_env_args=eval_env_args, num_examples=num_examples, seq_len=seq_len, train_max_tokens=train_max_tokens,
            eval_max_tokens=eval_max_tokens, lr=lr, wandb=wandb, renderer=renderer, seed=seed, temperature=temperature,
            clean_output_dir=clean_output_dir, base_eval=base_eval,
        )

    def _arm_config(self, *, start_step: int, model: str, new_steps: int, batch_size: int, rollouts_per_example: int,
                    train_envs: list[dict], eval_env_id: str, eval_env_args: dict, num_examples: int,
                    seq_len: int | None, train_max_tokens: int | None, eval_max_tokens: int | None, lr: float | None,
                    wandb: dict | None, renderer: str | dict | None, seed: int | None, temperature: float | None,
                    clean_output_dir: bool = False, fork_from: Path | None = None, skip_progress: bool = False,
                    base_eval: bool = True) -> dict:
        _positive(new_steps=new_steps, batch_size=batch_size, rollouts_per_example=rollouts_per_example)
        if not train_envs:
            raise ConfigError(f"{CONFIG_ERROR}: no training env given; [[{self.key('orchestrator.train.env')}]] needs at least one block")
        max_steps = start_step + new_steps
        # `is None`, not `or`: a 0 must be refused by name, never silently become the default
        seq_len = SEED_SEQ_LEN if seq_len is None else seq_len
        train_max_tokens = SEED_TRAIN_MAX_TOKENS if train_max_tokens is None else train_max_tokens
        eval_max_tokens = EVAL_MAX_TOKENS if eval_max_tokens is None else eval_max_tokens
        _positive(seq_len=seq_len, max_completion_tokens=train_max_tokens, eval_max_completion_tokens=eval_max_tokens)

        # Top-level tables first, in the order the files have always been written: a key the
        # v0.8 dialect moves to another table (the seed dialect's -> [inference.vllm]) lands in its place.
        cfg: dict[str, Any] = {"max_steps": max_steps, "seq_len": seq_len}
        if clean_output_dir:
            set_path(cfg, self.key("clean_output_dir"), True)
        if wandb:
            set_path(cfg, self.key("wandb"), self.shape_wandb(wandb))
        cfg["model"] = {"name": model}
        cfg["ckpt"] = {"interval": new_steps}
        if fork_from is not None:
            cfg["resume"] = {"dir": str(fork_from)}
        elif start_step:
            set_path(cfg, self.key("ckpt.resume_step"), start_step)
        if self.weight_broadcast:
            cfg["weight_broadcast"] = copy.deepcopy(self.weight_broadcast)
        orch: dict[str, Any] = cfg.setdefault("orchestrator", {})
        if fork_from is not None and skip_progress:
            orch["ckpt"] = {"skip_progress": True}
        cfg["trainer"] = {"optim": {"lr": lr}} if lr is not None else {}
        cfg["inference"] = {}  # prime-rl starts its vLLM server only when [inference] is present

        orch["batch_size"] = batch_size
        set_path(cfg, self.key("orchestrator.rollouts_per_example"), rollouts_per_example)
        if seed is not None:
            set_path(cfg, self.key("orchestrator.seed"), seed)
        sampling: dict[str, Any] = {"max_completion_tokens": train_max_tokens}
        if temperature is not None:
            sampling["temperature"] = temperature
        orch["train"] = {"sampling": sampling}
        set_path(cfg, self.key("orchestrator.train.env"), [self.shape_env(b) for b in train_envs])
        orch["eval"] = self._eval_table(max_steps, eval_max_tokens, eval_env_id, eval_env_args, num_examples)
        if not base_eval:  # main: skip_first_step = true; the seed dialect: eval_base_model = false (the inverted key)
            orch["eval"][self.key("orchestrator.eval.eval_base_model").rsplit(".", 1)[1]] = self.spells_v08
        if table := self._renderer(renderer, model):
            orch["renderer"] = table
        self.validate_config(cfg)
        return cfg

    def _renderer(self, renderer: str | dict | None, model: str) -> dict:
        """The [orchestrator.renderer] table to write ({} for none): 'auto' (also inherited from a
        canonical table) rejects a model outside prime-rl's renderer map, so such a model gets 'default'."""
        table = copy.deepcopy(renderer) if isinstance(renderer, dict) else ({"name": renderer} if renderer else {})
        if table.get("name", "auto") == "auto":
            if needs_default_renderer(model):
                table["name"] = "default"
            elif self.renderer_always_named:
                table["name"] = "auto"
        return table

    def _eval_table(self, max_steps: int, max_tokens: int, env_id: str, env_args: dict, num_examples: int) -> dict:
        """[orchestrator.eval]: one eval, at max_steps, of `num_examples` rows (-1 = prime-rl's "the whole split")."""
        if not isinstance(num_examples, int) or isinstance(num_examples, bool) or (num_examples < 1 and num_examples != -1):
            raise ConfigError(f"{CONFIG_ERROR}: num_examples = {num_examples!r}: must be >= 1, or -1 for the whole eval split")
        env: dict[str, Any] = {"id": env_id}
        if env_args:
            env["args"] = copy.deepcopy(env_args)
        env["num_examples"] = num_examples
        env["rollouts_per_example"] = 1
        table: dict[str, Any] = {"interval": max_steps, "sampling": {"max_completion_tokens": max_tokens}}
        table[self.key("orchestrator.eval.env").rsplit(".", 1)[1]] = [self.shape_env(env)]
        return table


def _positive(**values: Any) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{CONFIG_ERROR}: {name} = {v!r}: must be an integer >= 1")

