"""Training arms shared by iterate (iter_N) and compare (Runs A, B, C).

An arm = an rl.toml, a detached engine job writing the prime-rl layout into
the arm's prime_out/, and a sealed eval aggregation. The rl.toml holds the
skill's procedure's mandates for the arm (resume step, absolute max_steps, batch, rollouts,
train envs, eval env = the real env) plus the training knobs of the canonical
config iter_0 trained with (seq_len, train sampling, lr, renderer, seed), so
an arm trains like iter_0 with only the data changed; the teacher's optional
per-iteration overrides go on top. The Phase 4 arms change the seed too, each
to its own (`arm_seed`: Run A never repeats a seed of the best iteration). Eval sampling is never overridden: every
arm is evaluated alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..engines import engine_command
from ..engines.jobs import JobExpectation, run_training
from ..errors import JobFailed, SelfImproveError
from ..models import EvalSummary, RunConfig
from ..rundir import ArmDir, RunDir, atomic_write_text
from ..stack.dialects import SEED
from ..stack.toml_paths import get_path, set_path
from ..student_limits import completion_budget_cuts
from ..ui import console
from .completion_budget import capped_train_tokens, eval_completion_tokens
from .context import RunContext
from .evals import aggregate_eval, expected_eval_examples
from .overrides import TEACHER_KEYS, read_overrides  # noqa: F401  (TEACHER_KEYS: re-exported)
from .slurm_launch import launch_extras
from .staging import check_fork_source, is_staged, stage_checkpoints


def stage(rd: RunDir, arm: ArmDir, step: int, dialect=SEED) -> None:
    """Make iter_0's step-`step` checkpoint available to `arm` before it launches.

    The seed dialect: stage iter_0's trees into the arm's output dir unless they are already there. Main
    (`forks_with_resume_dir`): nothing is copied, the arm's [resume] dir names iter_0's checkpoint
    (prime-rl's own fork, configs/shared.py:55-72); this only checks that checkpoint is whole."""
    if dialect.forks_with_resume_dir:
        check_fork_source(rd.iter(0), step)
    elif not is_staged(arm, step):
        stage_checkpoints(rd.iter(0), arm, step)


def teacher_overrides(path: Path | None, dialect=SEED, *, model: str | None = None,
                      canonical: dict | None = None) -> dict:
    """iter_N/overrides.toml, checked (phases/overrides.py: keys, types, ranges, the student's context)."""
    return read_overrides(path, dialect, model=model, canonical=canonical)


def _wandb(cfg: RunConfig, name: str) -> dict | None:
    return {"project": cfg.wandb_project, "name": name} if cfg.wandb_project else None


def arm_knobs(ctx: RunContext, overrides: dict, seed: int | None = None) -> dict:
    """Canonical knobs with the teacher's overrides on top (same keys, same mapping), the train budget under
    --max-completion-tokens, and every arm's one eval budget; `seed` (from `arm_seed`) replaces the canonical
    training seed, None keeps it (the iterations)."""
    knobs = {**ctx.dialect.canonical_knobs(ctx.canonical_config()), **ctx.dialect.canonical_knobs(overrides)}
    if (train := capped_train_tokens(ctx.cfg, knobs.get("train_max_tokens"))) is not None:
        knobs["train_max_tokens"] = train
    knobs["eval_max_tokens"] = eval_completion_tokens(ctx.cfg)
    if seed is not None:
        knobs["seed"] = seed
    return knobs


def canonical_seed(ctx: RunContext) -> int:
    """The canonical config's training seed (orchestrator.seed), which every iteration trains with.

    0 when the canonical config sets none: the iterations then run with the engine's default,
    which is 0 on the CPU engine but not necessarily on another engine.
    """
    return int(ctx.dialect.canonical_knobs(ctx.canonical_config()).get("seed") or 0)


# Phase 4 arms whose training seeds `seed_offset` assigns; "best" is the best iteration.
SEEDED_ARMS = ("best", "run_a", "run_b", "run_c")


def seed_offset(arm: str, k: int = 0) -> int:
    """Training seed of seed member k of a Phase 4 arm, as an offset from the canonical seed (issue 23).

    Every iteration trains with the canonical seed (offset 0), so the best iteration is that
    seed's run. Its replicates take the other even offsets (member k: 2k), Runs A and C the odd
    ones (member k: 2k + 1). So Run A is an independent replicate of the best iteration, not a
    rerun of it with the same seed (bit-identical on the deterministic CPU engine, and as
    optimistic as the pick of the best of N iterations); Run C shares Run A's seeds, so Run A
    vs Run C differs by the training data only; and raising --seeds later adds members without
    renumbering the finished ones or ever meeting an iteration's seed.

    Run B (one seed) takes offset 1, seed 0 of Runs A and C: it trains from the base model,
    where the canonical seed would replay iter_0's walk over the real rows, and with the
    controls' seed none of the three control arms repeats a seed the iterations ran with.
    """
    if k < 0:
        raise ValueError(f"seed index must be >= 0, got {k}")
    if arm == "best":
        return 2 * k
    if arm in ("run_a", "run_c"):
        return 2 * k + 1
    if arm == "run_b":
        if k:
            raise SelfImproveError("run_b trains from the base model with one seed only")
        return 1
    raise ValueError(f"unknown arm {arm!r}: one of {', '.join(SEEDED_ARMS)}")


def arm_seed(ctx: RunContext, arm: str, k: int = 0) -> int:
    """The training seed of seed member k of `arm` ("best", "run_a", "run_b", "run_c"):
    the canonical seed + `seed_offset(arm, k)`."""
    return canonical_seed(ctx) + seed_offset(arm, k)


def recorded_seed(ctx: RunContext, key: str) -> int | None:
    """The training seed an arm ran with, read from its rl.toml (iter_0: the canonical config it
    trained with). None: no such file, or no seed key in it (the engine's default), or an iter_0
    inherited with --init-from (it trained elsewhere, with a seed this run never saw: unknown)."""
    if key == "iter_0" and ctx.cfg.init_from:
        return None
    toml = ctx.rd.iter(0).dir / "canonical_rl.toml" if key == "iter_0" else ctx.rd.arm(key).rl_toml
    if not toml.is_file():
        return None
    return get_path(ctx.dialect.read_toml(toml), ctx.dialect.training_seed_key())


def with_seed(config: dict, seed: int, seed_key: str = "orchestrator.seed") -> dict:
    """`config` with the dialect's training seed key = `seed` and nothing else changed (a seed replicate)."""
    set_path(config, seed_key, seed)
    return config


def _eval_like_iter0(ctx: RunContext, config: dict) -> dict:
    """Every arm is evaluated with iter_0's eval sampling (e.g. greedy): the canonical
    config's [orchestrator.eval.sampling] under the arm's own (which only sets the token cap,
    the same value iter_0's overlay set). Otherwise eval numbers would not be comparable."""
    canonical_sampling = get_path(ctx.canonical_config(), "orchestrator.eval.sampling") or {}
    evals = config.setdefault("orchestrator", {}).setdefault("eval", {})
    evals["sampling"] = {**canonical_sampling, **evals.get("sampling", {})}
    return config


def source_names(dialect, blocks: list[dict]) -> list[str]:
    """The train-source names prime-rl keys a checkpoint's train-source state by: `name`, else the env id
    (main: the taskset id), as the seed-dialect or v0.8 block gives them."""
    names = []
    for b in blocks:
        shaped = dialect.shape_env(b)
        names.append(str(shaped.get("name") or get_path(shaped, "env.taskset.id") or shaped.get("id") or ""))
    return sorted(names)


def resumed_arm_config(ctx: RunContext, *, train_envs: list[dict], resume_step: int, num_examples: int,
                       wandb_name: str, overrides: dict | None = None, seed: int | None = None) -> dict:
    """An arm forked from iter_0's checkpoint `resume_step`. Main: [resume] dir = iter_0's checkpoint, and
    [orchestrator.ckpt] skip_progress when the arm's train sources are not iter_0's (iter_N and Run A train
    on generated packages; main refuses to restore another source set's state: train_source.py:78-82)."""
    cfg = ctx.cfg
    eval_id, eval_args = ctx.dialect.env_api.real_env(ctx.required_hub(), "eval")
    fork: dict = {}
    if ctx.dialect.forks_with_resume_dir:
        iter0_sources = source_names(ctx.dialect, ctx.dialect.canonical_train_envs(ctx.canonical_config()))
        fork = {"fork_from": ctx.rd.iter(0).trainer_ckpt(resume_step),
                "skip_progress": source_names(ctx.dialect, train_envs) != iter0_sources}
    return _eval_like_iter0(ctx, ctx.dialect.resume_config(
        model=cfg.model, resume_step=resume_step, new_steps=cfg.steps_per_run, batch_size=cfg.batch_size,
        rollouts_per_example=cfg.rollouts_per_example, train_envs=train_envs, eval_env_id=eval_id,
        eval_env_args=eval_args, num_examples=num_examples, wandb=_wandb(cfg, wandb_name),
        **fork, **arm_knobs(ctx, overrides or {}, seed),
    ))


def fresh_arm_config(ctx: RunContext, *, train_envs: list[dict], num_examples: int, wandb_name: str,
                     seed: int | None = None) -> dict:
    """Run B: from the base model. Its base-model eval would score the same v0 iter_0's did, and nothing reads
    it, so it is skipped (main: skip_first_step, orchestrator/eval_source.py:51-52; the seed dialect: eval_base_model)."""
    cfg = ctx.cfg
    eval_id, eval_args = ctx.dialect.env_api.real_env(ctx.required_hub(), "eval")
    return _eval_like_iter0(ctx, ctx.dialect.fresh_config(
        model=cfg.model, new_steps=cfg.steps_per_run, batch_size=cfg.batch_size,
        rollouts_per_example=cfg.rollouts_per_example, train_envs=train_envs, eval_env_id=eval_id,
        eval_env_args=eval_args, num_examples=num_examples, wandb=_wandb(cfg, wandb_name), base_eval=False,
        **arm_knobs(ctx, {}, seed),
    ))


def train_arm(
    ctx: RunContext, arm: ArmDir, config: dict, *, record_name: str, num_examples: int,
    rows: int | None, restart: bool = False, resume: bool = False, quiet: bool = False,
    cap_hours: float | None = None, before_launch: Callable[[], None] | None = None,
) -> EvalSummary:
    """Write rl.toml, launch or attach to the job, aggregate its final eval, record it in metrics.json.

    `before_launch` runs before every fresh launch: resuming arms stage iter_0's
    trees there, because --restart moves the whole prime_out aside.
    """
    max_steps = int(config["max_steps"])
    ctx.dialect.write_toml(arm.rl_toml, config)  # deterministic from the run's files: rewriting is a no-op
    slurm_files, slurm_overrides, job_name = launch_extras(ctx.rd, ctx.cfg, arm.name)  # empty off SLURM
    cmd = engine_command(ctx.cfg) + ctx.dialect.rl_command_args([arm.rl_toml, *slurm_files], slurm_overrides, arm.prime_out)
    start_step = ctx.dialect.resume_step_of(config)  # a resumed (or forked) arm's progress starts there
    expect = JobExpectation(max_steps=max_steps, start_step=start_step, num_examples=num_examples, cap_hours=cap_hours)
    run_training(arm, cmd, expect, restart=restart, resume=resume, quiet=quiet, before_launch=before_launch,
                 job_name=job_name)
    require_final_checkpoint(arm, max_steps, f"move {arm.prime_out} aside and re-run with --restart")
    note_budget_in_force(arm, arm.rl_toml, quiet)
    return aggregate_eval(arm, step=max_steps, expected_examples=num_examples, rd=ctx.rd, key=record_name, rows=rows)


def require_final_checkpoint(arm: ArmDir, step: int, fix: str) -> None:
    """An arm is done when its job ended AND its final checkpoint is whole (the watcher waits for the end;
    prime-rl writes that checkpoint last, after the final eval: `ArmDir.checkpoint_missing`)."""
    missing = arm.checkpoint_missing(step)
    if missing:
        raise JobFailed(f"{arm.name}: the job ended after its final eval but its final checkpoint is not whole "
                        f"({missing[0]} missing); later arms resume from it; {fix}")


def note_budget_in_force(arm: ArmDir, toml: Path, quiet: bool) -> list[str]:
    """When the engine gave a split fewer completion tokens than the config asked (the longest prompt left
    less room; prime_out/completion_budget.json), say so in one console line and state the value in force
    at the end of `toml`, the file that asks for more: an rl.toml that says 2048 where 90 were in force
    misleads whoever reads it (issue 36: only iter_0's overlay said so)."""
    cuts = completion_budget_cuts(arm.prime_out)
    if not cuts:
        return []
    # One console line per run, not per arm (issue 43: the demo printed it for all six arms): an arm whose
    # cut is iter_0's says nothing more; its rl.toml is still annotated below.
    first = RunDir(arm.dir.parent).iter(0)
    said = arm.dir != first.dir and completion_budget_cuts(first.prime_out) == cuts
    if not quiet and not said:
        console.print(f"{arm.name}: the engine cut the completion budget: {'; '.join(cuts)}; see {toml} "
                      "(every arm with the same cut gets the same note in its rl.toml, without this line)",
                      highlight=False, markup=False, soft_wrap=True)
    try:
        text = toml.read_text(encoding="utf-8")
    except OSError:
        return cuts
    if "# In force:" not in text:
        lines = "".join(f"# In force: {c}.\n" for c in cuts)
        atomic_write_text(toml, text.rstrip("\n") + "\n\n# The engine caps each budget by the room the longest "
                          "prompt leaves (prime_out/completion_budget.json):\n" + lines)
    return cuts


def train_resumed_arm(ctx: RunContext, arm: ArmDir, *, train_envs: list[dict], resume_step: int,
                      restart: bool, resume: bool, quiet: bool, cap_hours: float | None, wandb_name: str,
                      overrides_file: Path | None, rows: int | None,
                      num_examples: int | None = None, record_name: str | None = None,
                      seed: int | None = None) -> EvalSummary:
    """An arm resumed from iter_0's final checkpoint (iter_N, Run A, Run C); stages it before launch.
    `seed`: the training seed (`arm_seed`); None keeps the canonical one (the iterations)."""
    n_eval = num_examples or expected_eval_examples(ctx.cfg, ctx.required_hub())  # capped like iter_0's
    config = resumed_arm_config(ctx, train_envs=train_envs, resume_step=resume_step, num_examples=n_eval,
                                wandb_name=wandb_name,
                                overrides=teacher_overrides(overrides_file, ctx.dialect, model=ctx.cfg.model,
                                                            canonical=ctx.canonical_config()),
                                seed=seed)
    return train_arm(ctx, arm, config, record_name=record_name or arm.name, num_examples=n_eval,
                     rows=rows, restart=restart, resume=resume, quiet=quiet, cap_hours=cap_hours,
                     before_launch=lambda: stage(ctx.rd, arm, resume_step, ctx.dialect))


def retrain_with_seed(ctx: RunContext, src: ArmDir, dst: ArmDir, *, seed: int, record_name: str,
                      rows: int | None, resume_step: int, restart: bool = False, resume: bool = False,
                      quiet: bool = False, cap_hours: float | None = None) -> EvalSummary:
    """Train `src`'s exact rl.toml again in `dst` with only the training seed (and the W&B run name) changed.

    For the best iteration's seed replicates: same data, same package, same knobs and teacher
    overrides, same eval examples, from the same iter_0 checkpoint (staged before launch).
    """
    dialect = ctx.dialect
    config = dialect.read_toml(src.rl_toml)
    with_seed(config, seed, dialect.training_seed_key())
    for table in ("wandb", "monitors.wandb"):  # the seed dialect's and main's spelling; a config holds one
        if isinstance(get_path(config, table), dict):
            get_path(config, table)["name"] = record_name
    evals = dialect.eval_sources(config)
    n_eval = sum(int(e.get("num_examples", 0)) for e in evals) if evals else 0
    n_eval = n_eval if n_eval > 0 else ctx.cfg.eval_examples
    return train_arm(ctx, dst, config, record_name=record_name, num_examples=n_eval, rows=rows,
                     restart=restart, resume=resume, quiet=quiet, cap_hours=cap_hours,
                     before_launch=lambda: stage(ctx.rd, dst, resume_step, ctx.dialect))
