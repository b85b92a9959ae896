"""Phase 2, baseline: iter_0 is either inherited (2A, --init-from) or trained here (2B).

2B steps, each done iff its artefact exists and validates, so a re-run resumes:
  1. iter_0/canonical_rl.toml: a verbatim copy of the canonical config (--config / run.json
     canonical_config, else <PRIME_RL_DIR>/configs/<dataset>/rl.toml, else the project's
     configs/<dataset>/rl.toml), or one generated from hub_env.json when none exists;
     validated against the seed dialect (the bad key is named);
  2. iter_0/eval_overlay.toml (the skill's procedure's overlay: one checkpoint and one eval at max_steps);
  3. the training job (`engines.jobs.run_training`: launch detached, or ATTACH to the live one);
  4. iter_0/eval_summary.json (sealed aggregation) + metrics.json (idempotent);
  5. run.json iter_0_source/path/step, and the scratchpad entry (written once).

2A validates the prior run (the skill's procedure's artefact list, step dirs agreeing), symlinks its
trees as the procedure says (plus run_default/checkpoints and broadcasts of step F when present: Phase 3's
resume needs them), freezes iter_0/canonical_rl.toml as 2B does (best effort: later arms are
built on it), and takes eval_acc from the prior run's metrics.json.

The run dir is locked for the whole phase. A CLI killed with -9 drops the lock but not the
job (its own session); re-running attaches.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .. import scratchpad
from ..engines import engine_command
from ..engines import preflight
from ..engines.jobs import JobExpectation, JobResult, read_job, run_training
from ..errors import ConfigError, EvalAggregationError, JobFailed, NoLearningSignal, RunDirError, UsageError
from ..models import EvalSummary
from ..resources import project_configs_dirs
from ..rundir import ArmDir, RunDir, atomic_write_text, sorted_steps, write_model
from ..stack.toml_paths import get_path
from ..stats import wilson_interval
from ..student_limits import check_env_text, answers_over_budget, check_token_budget, completion_budget_cuts, model_context
from ..ui import console
from . import holdout
from .arms import note_budget_in_force
from .bootstrap import check_init_from, init_from_source
from .canonical_fit import shipped_for_another_model
from .completion_budget import capped_train_tokens, eval_completion_tokens, generated_budget
from .context import RunContext
from .evals import EVAL_FILE, abort_run_on_unparseable_eval, evaluated_split, aggregate_eval, expected_eval_examples, record_summary, summarize, train_reward_mean, train_trajectory
from .order import require_phase_order
from .overrides import check_canonical_knobs
from .signal import NEAR_ZERO_GROUP_SD, NO_SIGNAL_VERDICT, learning_signal, not_a_result
from .slurm_launch import keep_canonical_overlay, launch_extras

CANONICAL_COPY = "canonical_rl.toml"  # iter_0/: the config iter_0 trained with


@dataclass
class BaselineResult:
    summary: EvalSummary
    already_done: bool  # eval_summary.json was there before this call
    job: JobResult | None = None  # None for --init-from and for an already finished phase
    learning_signal: dict | None = None  # run.json learning_signal as the phase left it


def _note(quiet: bool, msg: str) -> None:
    if not quiet:  # markup off: notes carry TOML table names ("[inference] added") and paths, never rich tags
        console.print(msg, highlight=False, markup=False)


def _note_line(quiet: bool, msg: str) -> None:
    """One console line however wide (a note a user greps for, e.g. 'in-sample', never wrapped)."""
    if not quiet:
        console.print(msg, highlight=False, markup=False, soft_wrap=True)


def run_baseline(rd: RunDir, *, restart: bool = False, resume: bool = False, config: str | None = None,
                 cap_hours: float | None = None, quiet: bool = False, allow_no_signal: bool = False) -> BaselineResult:
    """Run Phase 2 to completion (or attach to its running job); idempotent.

    Raises NoLearningSignal when iter_0's rewards do not spread (phases/signal.py), unless
    `allow_no_signal`; the verdict is kept in run.json either way."""
    rd.require()
    if cap_hours is not None and cap_hours <= 0:
        raise UsageError(f"--cap-hours {cap_hours}: must be > 0")
    require_phase_order(RunContext.load(rd), "baseline")
    with rd.lock("baseline"):
        ctx = RunContext.load(rd)
        arm = rd.iter(0)
        summary = _valid_summary(rd, arm)
        already, job = summary is not None, None
        if already and (restart or resume):
            _note(quiet, f"iter_0 is already done ({arm.eval_summary}); --restart/--resume ignored")
        # each step that writes run.json hands back the context holding what it wrote
        if summary is None and ctx.cfg.init_from:
            summary, ctx = _inherit(ctx, arm, quiet)
        elif summary is None:
            summary, job, ctx = _train(ctx, arm, restart=restart, resume=resume, config=config,
                                       cap_hours=cap_hours, quiet=quiet)
        if summary.source in ("trained", "init-from"):  # an inherited iter_0's rollouts are linked in: check them too
            ctx = check_learning_signal(ctx, arm, allow_no_signal, quiet)
        ctx = _bookkeep(ctx, arm, summary)
        return BaselineResult(summary=summary, already_done=already, job=job,
                              learning_signal=ctx.cfg.learning_signal)


def check_learning_signal(ctx: RunContext, arm: ArmDir, allow: bool, quiet: bool) -> RunContext:
    """Record iter_0's learning signal in run.json; stop the run (exit 4) when there is none,
    unless `allow` (then the verdict stays recorded, and finalize prints it instead of a result)."""
    rd, cfg = ctx.rd, ctx.cfg
    signal = cfg.learning_signal or learning_signal(arm)
    if not signal.get("has_signal") and allow and not signal.get("allowed"):
        signal = {**signal, "allowed": True}
    if signal != cfg.learning_signal:
        cfg = cfg.model_copy(update={"learning_signal": signal})
        rd.write_run(cfg)
    if signal.get("has_signal"):
        return ctx.with_cfg(cfg)
    evidence = (f"{signal['train_groups_with_spread']}/{signal['train_groups']} prompt groups of train steps "
                f"{signal['train_steps'] or 'none'} have any reward spread, mean group reward sd "
                f"{signal.get('train_mean_group_reward_sd')} (near zero below {NEAR_ZERO_GROUP_SD}); step-0 eval reward sd "
                f"{signal['eval_step0_reward_sd']} over {signal['eval_step0_examples']} examples")
    if not signal.get("allowed"):
        heading = "## Stopped after iter_0: no learning signal"
        if heading not in rd.read_scratchpad():  # the run's own record of the stop (issue 36), once
            rd.append_scratchpad(f"{heading}\n\n{NO_SIGNAL_VERDICT}: {evidence}. The run waits for a choice: a "
                                 "stronger student or another env (a new run), or, on request only, "
                                 "`selfimprove baseline --allow-no-signal` (then nothing is a result).\n")
        raise NoLearningSignal(f"iter_0: {NO_SIGNAL_VERDICT} ({evidence}); recorded in {rd.run_json} learning_signal; "
                               f"to continue anyway: selfimprove baseline --run-dir {rd.root} --allow-no-signal")
    _note(quiet, f"warning: {NO_SIGNAL_VERDICT} ({evidence}); continuing because of --allow-no-signal: "
                 "no result of this run is evidence of learning")
    return ctx.with_cfg(cfg)


def _valid_summary(rd: RunDir, arm: ArmDir) -> EvalSummary | None:
    if not arm.eval_summary.is_file():
        return None
    try:
        return rd.read_eval_summary(arm)
    except RunDirError:
        return None  # corrupt: redo the step that writes it


def _bookkeep(ctx: RunContext, arm: ArmDir, summary: EvalSummary) -> RunContext:
    """metrics.json, run.json iter_0_*, scratchpad: each written only if missing or different."""
    rd, cfg = ctx.rd, ctx.cfg
    metrics = rd.read_metrics()
    if metrics.get("iter_0") is None:
        record_summary(rd, summary, key="iter_0")
    inherited = summary.source == "init-from"
    src = "init-from" if inherited else "trained"
    path = str(Path(cfg.init_from) / "prime_out") if inherited and cfg.init_from else rd.rel(arm.prime_out)
    if (cfg.iter_0_source, cfg.iter_0_path, cfg.iter_0_step) != (src, path, summary.final_step):
        cfg = cfg.model_copy(update={"iter_0_source": src, "iter_0_path": path, "iter_0_step": summary.final_step})
        rd.write_run(cfg)
    text = rd.read_scratchpad()
    if not scratchpad.has_entry(text, "iter_0"):
        traj = None if inherited else train_trajectory(arm)
        held = holdout.scratchpad_line(holdout.read_record(rd)) if not inherited else None
        rd.append_scratchpad(scratchpad.render_iter0(summary, trajectory=traj, init_from=cfg.init_from if inherited else None,
                                                     warning=not_a_result(cfg.learning_signal),
                                                     split=evaluated_split(ctx.introspected_hub()),
                                                     notes=(held,) if held else ()))
    return ctx.with_cfg(cfg)


# ---------------------------------------------------------------- 2B: train iter_0


def find_canonical(ctx: RunContext, arm: ArmDir, explicit: str | None, quiet: bool) -> tuple[Path, RunContext]:
    """iter_0/canonical_rl.toml: a verbatim copy of the canonical config, made once; and the context with
    run.json canonical_config recording where it came from.

    Search order: --config, run.json canonical_config, <PRIME_RL_DIR>/configs/<dataset>/rl.toml,
    the project's configs/<dataset>/rl.toml; if none exists, one is generated from hub_env.json.
    The copy freezes what iter_0 trained with (iterate and compare build every later arm on
    it); a --config given on this call replaces a copy whose bytes differ. The origin is
    recorded in run.json canonical_config.
    """
    rd, cfg, hub = ctx.rd, ctx.cfg, ctx.introspected_hub()
    frozen = arm.dir / CANONICAL_COPY
    dialect = ctx.dialect
    if frozen.is_file() and not explicit:
        _check_canonical(frozen, dialect)
        return frozen, ctx
    found, tried = dialect.find_canonical_config(cfg.dataset, explicit or cfg.canonical_config, None,
                                                  project_configs_dirs())
    if found is not None:
        renamed = _check_canonical(found, dialect)  # before copying: a bad file is named as the user's, and never frozen
        refit = shipped_for_another_model(found, dialect.read_toml(found), cfg.model)
        if refit is not None:
            # the project's embedded config is the tiny student's (seq_len 256): a real model gets its own
            data, why = refit
            normalised, _ = dialect.normalise_aliases(data)
            dialect.write_toml(frozen, normalised)
            _note(quiet, f"iter_0: canonical config {found}: {why} in {frozen}")
        elif renamed:
            # Old spellings (max_tokens) are moved to prime-rl's names in the copy, so the overlay's
            # max_completion_tokens replaces the value instead of landing beside it (refused by prime-rl).
            normalised, _ = dialect.normalise_aliases(dialect.read_toml(found))
            dialect.write_toml(frozen, normalised)
            _note(quiet, f"iter_0: canonical config {found}: renamed {', '.join(renamed)} in {frozen}")
        else:
            data = found.read_bytes()
            if not frozen.is_file() or frozen.read_bytes() != data:
                atomic_write_bytes(frozen, data)
        origin = str(found.resolve())
    elif explicit or cfg.canonical_config:
        raise ConfigError(f"--config {explicit or cfg.canonical_config}: file not found; pass an existing rl.toml")
    elif hub is None:
        raise ConfigError(
            f"no canonical config for dataset '{cfg.dataset}'; tried: {', '.join(map(str, tried)) or '(no configs dirs)'}; "
            f"pass --config PATH, set PRIME_RL_DIR, or run `selfimprove introspect --run-dir {rd.root}` so one is generated from hub_env.json"
        )
    else:
        context, _ = model_context(cfg.model)  # caps seq_len and the completion budget for a small student
        budget = generated_budget(hub, cfg.model, context, cfg.max_completion_tokens)
        generated = dialect.canonical_from_hub_env(*dialect.env_api.real_env(hub, "train"), cfg.model, context=context,
                                                   train_tokens=budget["train"])
        # The budget goes to run.json before the copy is written: a kill in between regenerates both (the
        # budget is deterministic), while a copy without its recorded budget (a re-run keeps an existing copy)
        # would leave every arm's eval budget at the procedure's.
        cfg = _record(rd, cfg, generated_budget=budget)
        dialect.write_toml(frozen, generated, note=f"Completion budget: {budget['rule']}.")
        _note(quiet, f"iter_0: no canonical config found (tried {len(tried)} path{'' if len(tried) == 1 else 's'}); generated {frozen} from hub_env.json")
        _note_line(quiet, f"iter_0: completion budget {budget['rule']}")
        origin = str(frozen)
    if origin != str(frozen):  # a config found or given keeps its own budget
        cfg = _record(rd, cfg, generated_budget=None)
    # where iter_0's config came from (the copy is what runs)
    return frozen, ctx.with_cfg(_record(rd, cfg, canonical_config=origin))


def _record(rd: RunDir, cfg, **fields):
    """`cfg` with `fields` set, written to run.json when that changes anything."""
    if any(getattr(cfg, k) != v for k, v in fields.items()):
        cfg = cfg.model_copy(update=fields)
        rd.write_run(cfg)
    return cfg


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write_text(path, data.decode("utf-8"))  # TOML is UTF-8 text (read_toml refuses anything else)


def _check_canonical(path: Path, dialect) -> list[str]:
    """Validate a canonical config in the run's dialect; returns the alias renames ("old -> new") its copy needs."""
    try:
        canonical, renamed = dialect.normalise_aliases(dialect.read_toml(path))
        dialect.validate_config(canonical)
    except ConfigError as e:
        raise ConfigError(f"canonical config {path}: {e}; fix the file or pass another with --config") from None
    check_canonical_knobs(canonical, f"canonical config {path}")  # every arm inherits its knobs: ranges too
    return renamed


def _train(ctx: RunContext, arm: ArmDir, *, restart: bool, resume: bool, config: str | None,
           cap_hours: float | None, quiet: bool) -> tuple[EvalSummary, JobResult, RunContext]:
    rd, cfg, hub = ctx.rd, ctx.cfg, ctx.introspected_hub()
    steps = cfg.steps_per_run  # max_steps is ABSOLUTE: iter_0 trains steps 1..steps
    n_eval = expected_eval_examples(cfg, hub)
    dialect = ctx.dialect
    eval_id, eval_args = dialect.env_api.real_env(hub, "eval") if hub else (cfg.hub_id, cfg.env_args)
    expect = JobExpectation(max_steps=steps, num_examples=n_eval, cap_hours=cap_hours)
    # Built on every call (cheap, deterministic): identical files when attaching to a live job.
    canonical_path, ctx = find_canonical(ctx, arm, config, quiet)
    canonical = dialect.read_toml(canonical_path)
    overlay = dialect.eval_overlay(max_steps=steps, eval_env_id=eval_id, eval_env_args=eval_args, num_examples=n_eval,
                                   max_completion_tokens=eval_completion_tokens(ctx.cfg))
    asked = dialect.canonical_knobs(canonical).get("train_max_tokens")
    if (train_cap := capped_train_tokens(ctx.cfg, asked)) != asked:  # --max-completion-tokens over the canonical's
        overlay = dialect.deep_merge(overlay, {"orchestrator": {"train": {"sampling": {"max_completion_tokens": train_cap}}}})
    # No eval split: the n_eval train rows that are scored are held out of training (or the run says it is in-sample).
    held = holdout.prepare(rd, cfg, hub, n_eval)
    if held is not None and held["in_sample"]:
        _note_line(quiet, f"iter_0: {holdout.in_sample_line(held)}")
    elif held is not None:
        overlay = dialect.deep_merge(overlay, holdout.train_envs_overlay(ctx, dialect.canonical_train_envs(canonical)))
        _note_line(quiet, f"iter_0: the env has no eval split: its first {n_eval} train rows are scored, so they are "
                          f"held out of training ({held['package']}, {held.get('train_rows_left')} train rows left)")
    if held is None or held["in_sample"]:  # main: the canonical train sources, pinned to plain chat (stack/dialects.py)
        overlay = dialect.deep_merge(overlay, dialect.train_sources_overlay(canonical))
    overrides = dialect.baseline_overrides(model=cfg.model, max_steps=steps, batch_size=cfg.batch_size,
                                           rollouts_per_example=cfg.rollouts_per_example, canonical=canonical)
    merged = dialect.deep_merge(dialect.deep_merge(canonical, overlay), overrides)
    try:  # what the engine will see: canonical <- overlay <- CLI
        dialect.validate_config(merged)
    except ConfigError as e:
        raise ConfigError(f"iter_0 config (canonical {canonical_path} + overlay + overrides): {e}") from None
    # Before launch: the config fits the student's context, and (for a character-level
    # student) the env's text is encodable and its prompts leave room for a completion.
    check_token_budget(merged, cfg.model, f"canonical config {canonical_path}")
    if hub is not None:
        check_env_text(hub, cfg.model, get_path(merged, "seq_len"), f"{rd.hub_env_json}")
    dialect.write_toml(arm.eval_overlay, overlay, partial=True)
    keep_canonical_overlay(rd, cfg, canonical, dialect)
    slurm_files, slurm_overrides, job_name = launch_extras(rd, cfg, arm.name)  # empty off SLURM
    cmd = engine_command(cfg) + dialect.rl_command_args([canonical_path, arm.eval_overlay, *slurm_files],
                                                        {**overrides, **slurm_overrides}, arm.prime_out)
    if cfg.engine == "prime-rl" and read_job(arm) is None:  # before the first launch: prime-rl's own verdict, the GPUs
        run_preflight(cmd[len(engine_command(cfg)):], on_slurm=job_name is not None, quiet=quiet)
    job = run_training(arm, cmd, expect, restart=restart, resume=resume, quiet=quiet, job_name=job_name)
    note_budget_cuts(arm, quiet)
    # done = the job ended (the watcher waits for it) AND its final checkpoint is whole: every later arm forks it
    if arm.checkpoint_missing(steps):
        raise JobFailed(
            f"iter_0: the job finished but its final checkpoint is not whole ({arm.checkpoint_missing(steps)[0]} "
            f"missing); Phase 3 has nothing to resume from; check [ckpt] interval in {arm.eval_overlay}, move "
            f"{arm.prime_out} aside and re-run"
        )
    with abort_run_on_unparseable_eval(ctx, "iter_0"):
        summary = aggregate_eval(arm, step=steps, expected_examples=n_eval, source="trained", rd=rd, key="iter_0")
    return summary, job, ctx


def run_preflight(argv: list[str], *, on_slurm: bool, quiet: bool) -> None:
    """engines/preflight.py on iter_0's exact argv; PreflightRefused (one line) stops the run before any launch."""
    if os.environ.get(preflight.SKIP_ENV, "").strip() not in ("", "0"):
        _note_line(quiet, f"iter_0: preflight skipped ({preflight.SKIP_ENV} is set): prime-rl's `rl --dry-run` and "
                          "the GPU check did not run")
        return
    needs = preflight.preflight(argv, on_slurm=on_slurm)
    _note_line(quiet, f"iter_0: preflight: prime-rl's `rl --dry-run` accepts iter_0's config; {needs.line()}"
                      + (f", weight broadcast {needs.weight_broadcast}" if needs.weight_broadcast else ""))


def note_budget_cuts(arm: ArmDir, quiet: bool) -> list[str]:
    """When the engine gave a split fewer completion tokens than the config asked (the longest prompt
    left less room), say so on the console in one line and state the value in force in
    iter_0/eval_overlay.toml: the overlay alone said 2048 where the engine gave 43, and the cut showed
    only as an INFO line in train.log. Later arms ask for the same values, so the same cut holds."""
    cuts, too_long = completion_budget_cuts(arm.prime_out), answers_over_budget(arm.prime_out)
    if too_long:  # a row whose answer alone does not fit can never be solved: say so beside the cut
        _note_line(quiet, f"iter_0: {'; '.join(too_long)} (those rows cannot be answered in full; "
                          f"{arm.prime_out / 'completion_budget.json'})")
    return note_budget_in_force(arm, arm.eval_overlay, quiet) if cuts else []


# ---------------------------------------------------------------- 2A: --init-from


def _link(target: Path, link: Path) -> None:
    """Symlink `link` -> `target`; an existing correct link is kept, anything else there is an error."""
    if link.is_symlink():
        if Path(os.readlink(link)) == target:
            return
        raise RunDirError(f"{link}: links to {os.readlink(link)}, expected {target}; remove it and re-run")
    if link.exists():
        raise RunDirError(f"{link}: exists and is not a link to {target}; move it aside and re-run")
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)


def _prior_metrics(src: Path, step: int) -> dict:
    """The prior run's metrics.json entry for its final step (else its last entry with eval_acc); in a
    selfimprove run's metrics.json, the entry of the reused arm."""
    _dir, path, key = init_from_source(src)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"--init-from {src}: cannot read {path} ({getattr(e, 'msg', e)})") from None
    entries = [e for e in (data.get("iters") if isinstance(data, dict) else None) or []
               if isinstance(e, dict) and isinstance(e.get("eval_acc"), (int, float))
               and (key is None or e.get("arm") == key)]
    if not entries:
        raise UsageError(f"--init-from {src}: {path} has no iters[] entry{f' of {key}' if key else ''} with a numeric eval_acc")
    at_step = [e for e in entries if step in (e.get("final_step"), e.get("step"))]
    return (at_step or entries)[-1]


def _inherit(ctx: RunContext, arm: ArmDir, quiet: bool) -> tuple[EvalSummary, RunContext]:
    rd, cfg = ctx.rd, ctx.cfg
    assert cfg.init_from
    final = check_init_from(cfg.init_from)
    src = Path(cfg.init_from).expanduser()
    po = src / "prime_out"
    tops = {name: sorted_steps(po / rel) for name, rel in
            (("weights", "weights"), ("checkpoints", "checkpoints"), ("rollouts", "run_default/rollouts"))}
    finals = {name: (s[-1] if s else None) for name, s in tops.items()}
    if len(set(finals.values())) != 1:
        shown = ", ".join(f"{n}/ step_{v}" if v is not None else f"{n}/ none" for n, v in finals.items())
        raise UsageError(f"--init-from {src}: the final step dirs disagree ({shown}); reuse a run whose weights, "
                         "checkpoints and rollouts all end at the same step")
    _link(po / "weights" / f"step_{final}", arm.weights(final))
    _link(po / "checkpoints" / f"step_{final}", arm.trainer_ckpt(final))
    for s in tops["rollouts"]:
        _link(po / "run_default" / "rollouts" / f"step_{s}", arm.rollout_step(s))
    missing = []
    for rel, mine in ((f"run_default/checkpoints/step_{final}", arm.orchestrator_ckpt(final)),
                      (f"run_default/broadcasts/step_{final}", arm.broadcast(final))):
        if (po / rel).exists():
            _link(po / rel, mine)
        else:
            missing.append(rel)
    if missing:
        _note(quiet, f"warning: --init-from has no {', '.join(missing)}; Phase 3 cannot resume from it without them")

    try:  # iterate/compare build every later arm on iter_0/canonical_rl.toml, inherited or not
        _frozen, ctx = find_canonical(ctx, arm, None, quiet)
    except ConfigError as e:
        _note(quiet, f"warning: no canonical config frozen for the inherited iter_0 ({e}); iterate will need one")
    # Runs B and C train on the real env here: without an eval split they need the hold-out too (what the
    # inherited iter_0 trained on is the prior run's business: its own iter_0/heldout.json says)
    hub = ctx.introspected_hub()
    held = holdout.prepare(rd, cfg, hub, expected_eval_examples(cfg, hub))
    if held is not None and held["in_sample"]:
        _note_line(quiet, f"iter_0 (inherited): {holdout.in_sample_line(held)}")
    prior = _prior_metrics(src, final)
    try:  # the sealed aggregate of the inherited eval file gives per-example scores for paired tests
        agg: EvalSummary | None = summarize(arm, step=final, expected_examples=1, source="init-from", key="iter_0")
    except (EvalAggregationError, OSError, ValueError) as e:  # metrics.json is the procedure's source of truth
        _note(quiet, f"note: inherited eval file not aggregated ({type(e).__name__}); using metrics.json only")
        agg = None
    acc = float(prior["eval_acc"])
    reward = prior.get("eval_reward_mean", agg.eval_reward_mean if agg else None)
    n = prior.get("n_eval", agg.n_eval if agg else None)
    if reward is None or n is None:
        raise UsageError(f"--init-from {src}: metrics.json lacks eval_reward_mean/n_eval and the eval file could not be aggregated")
    if agg is not None and abs(agg.eval_acc - acc) > 0.5 / max(agg.n_eval, 1):
        _note(quiet, f"warning: metrics.json eval_acc {acc:.3f} differs from the inherited eval file's {agg.eval_acc:.3f}; using metrics.json (the skill's procedure, Phase 2A)")
    n_ex = agg.n_examples if agg else int(n)
    lo, hi = wilson_interval(min(acc * n_ex, n_ex), n_ex)
    train_mean, train_steps_used = (agg.train_reward_mean, agg.train_reward_steps) if agg else train_reward_mean(arm, final)
    summary = EvalSummary(
        arm="iter_0", eval_acc=acc, eval_reward_mean=float(reward), n_eval=int(n), n_examples=n_ex, acc_ci95=(lo, hi),
        train_reward_mean=train_mean, train_reward_steps=train_steps_used, checkpoint=str(arm.weights(final)),
        final_step=final, source="init-from", eval_file=str(arm.rollout_step(final) / EVAL_FILE),
        dropped_lines=agg.dropped_lines if agg else 0, correct_rule=agg.correct_rule if agg else "metrics.json eval_acc",
        per_example=agg.per_example if agg else [],
    )
    write_model(arm.eval_summary, summary)
    return summary, ctx
