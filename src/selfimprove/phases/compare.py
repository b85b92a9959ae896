"""Phase 4, `compare`: is the best iteration's gain real?

BEST_ITER = highest eval_acc among iterations >= 1 (ties: higher
eval_reward_mean, then the earlier iteration). Then three control arms, each
evaluated on the FULL eval split of the real env and each resumable like an
iteration (same packaging, staging, job runner, sealed aggregation):

- Run A (run_a_best_from_iter0): the best dataset replayed from iter_0's
  checkpoint with other training seeds than the best iteration's. Does the
  gain reproduce from the same anchor, free of the pick of the best iteration?
- Run B (run_b_combined_from_base): the real train env (copied verbatim from
  the canonical config) mixed with the best dataset, trained from the base
  model. Does mixing beat either alone?
- Run C (run_c_real_from_iter0, ours, on by default): iter_0 resumed for the
  same number of steps on the REAL train env. The equal-compute control:
  without it, "targeted data helped" is indistinguishable from "more steps helped".

Training seeds (`--seeds N`, run.json `seeds`, default 1): Run A, Run C and the
best iteration are each trained with N training seeds, from `arms.arm_seed`
(offsets from the canonical config's orchestrator.seed, which every iteration
trains with): best iteration member k = canonical + 2k (member 0 is iter_N
itself), Run A and Run C member k = canonical + 2k + 1, Run B canonical + 1.
So Run A never repeats a seed of the best iteration (on the deterministic CPU
engine it would be iter_N again, bit for bit, and as optimistic as the pick of
the best of N iterations), and Run A vs Run C differs by the data only.
Members k >= 1 are their own arms, "<arm>_seed<k>" in metrics.json and in
their own dirs (RunDir.arm). The best iteration's replicates retrain iter_N's
exact rl.toml (data, package, knobs, teacher overrides, eval examples) from
iter_0's checkpoint with only the seed changed. Run B, trained from the base
model, stays at one seed: it answers a side question (does mixing help from
scratch?) and is not in the verdicts that need seeds (best vs iter_0, Run A vs
Run C).

Arms at once (`--parallel N`, default `default_parallel`): the arms are
independent jobs, so up to N train at the same time, each watched by a thread
of this process. On the CPU engine two at once finish 1.6-1.7x sooner than one
after another on 2 cores (bench/parallel_arms.py), and the figures do not
change: each engine run's numbers depend on its seed and thread count, never
on what else runs. With prime-rl the default is 1: one run takes every GPU.
Packaging (pip installs into the env Python) stays one arm at a time, and
run.json/metrics.json updates go through `RunDir.updating()`.

A failing arm is logged in run.json.phase4_errors; the others proceed.
Re-running compare attaches to a live job, keeps finished arms (by their
metrics.json record) and retries the rest.
"""

from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, Callable

from ..engines.jobs import watch_together
from ..errors import PhaseOrderError, SelfImproveError, UsageError
from ..gates.report import WeaknessReport, check_weakness_report
from ..models import MAX_PARALLEL, MAX_SEEDS, IterRecord, Metrics, Phase4Error, RunConfig
from ..rundir import ArmDir, RunDir, atomic_write_json, seed_key, split_seed_key
from ..stack.env_package import count_rows
from ..ui import console
from . import iteration_steps as steps
from .arms import arm_seed, fresh_arm_config, recorded_seed, retrain_with_seed, train_arm, train_resumed_arm
from .context import RunContext
from .holdout import held_out_train_envs
from .order import require_phase_order
from .phase4_state import pick_best, reopen_advice, trained_seeds
from .slurm_launch import on_slurm

# pip installs of the arms' packages into one env Python, one at a time (pip has no lock of its own);
# also orders Run A's seed members after member 0, which makes the package they share.
_PACKAGING = threading.Lock()

ARM_LABELS = {
    "run_a": "run_a (best @iter0)",
    "run_b": "run_b (real+best @base)",
    "run_c": "run_c (real @iter0)",
}


def write_best_iter(ctx: RunContext, best: IterRecord) -> dict:
    rd = ctx.rd
    it = rd.iter(best.iter)
    pkg = steps.package_name_for(ctx.cfg, f"iter_{best.iter}")
    record = {
        "best_iter": best.iter,
        "eval_acc": best.eval_acc,
        "acc_ci95": list(best.acc_ci95),
        "n_eval": best.n_eval,
        "eval_split": best.eval_split,  # "train (no eval split)" for an env without one
        "eval_reward_mean": best.eval_reward_mean,
        "BEST_DATASET": str(it.dir / "dataset.jsonl"),
        "BEST_ENV_DIR": str(it.dir / pkg),
        "BEST_RL_TOML": str(it.rl_toml),
        "rows": best.rows,
    }
    atomic_write_json(rd.best_iter_json, record)
    return record


def _log_arm_error(rd: RunDir, arm: str, error: str) -> None:
    with rd.updating():
        cfg = rd.read_run()  # afresh, not the context's: arms training at once log theirs in turn
        kept = [e for e in cfg.phase4_errors if e.arm != arm]
        cfg.phase4_errors = kept + [Phase4Error(arm=arm, error=error, ts=time.time())]
        rd.write_run(cfg)


def _clear_arm_error(rd: RunDir, arm: str) -> None:
    with rd.updating():
        cfg = rd.read_run()  # afresh: see _log_arm_error
        if any(e.arm == arm for e in cfg.phase4_errors):
            cfg.phase4_errors = [e for e in cfg.phase4_errors if e.arm != arm]
            rd.write_run(cfg)


def _package_best(ctx: RunContext, arm_key: str, best_iter: int) -> tuple[str, int]:
    """Copy the best dataset into the arm dir and install it under <dataset>_<arm>."""
    rd = ctx.rd
    arm = rd.control(arm_key)
    src_it = rd.iter(best_iter)
    arm.dir.mkdir(parents=True, exist_ok=True)
    dataset = arm.dir / "dataset.jsonl"
    name = steps.package_name_for(ctx.cfg, arm_key)
    with _PACKAGING:
        if not dataset.is_file():
            shutil.copy2(src_it.dir / "dataset.jsonl", dataset)
        # Packages it if needed, and checks the installed copy is this run's before the arm trains.
        steps.ensure_package(ctx, arm, name, _best_report(src_it), origin=f"{arm_key}: best dataset of iter_{best_iter}",
                             dataset=dataset, rewards_dir=src_it.dir, note=_print)
    return name, count_rows(dataset)


def _best_report(src_it: ArmDir) -> WeaknessReport | None:
    """The best iteration's report passed its gate; read it (for custom rewards) without re-gating."""
    path = src_it.dir / "weakness_report.md"
    return check_weakness_report(path)[0] if path.is_file() else None


def _print(message: str) -> None:
    console.print(message, highlight=False)


def _retrain_best(ctx: RunContext, best_iter: int, k: int, **job: Any) -> None:
    """Seed member k >= 1 of the best iteration: iter_N's exact config with seed `arm_seed(ctx, "best", k)`."""
    rd = ctx.rd
    src = rd.iter(best_iter)
    name = steps.package_name_for(ctx.cfg, src.name)
    if not steps.package_is_current(src, name):
        raise SelfImproveError(f"{src.dir / 'package.json'}: missing or made from another dataset.jsonl; "
                               f"the best iteration's package cannot be reused for its seed replicates")
    with _PACKAGING:
        steps.ensure_package(ctx, src, name, _best_report(src), origin=f"iteration {best_iter}", note=_print)
    key = seed_key(src.name, k)
    record = rd.read_metrics().get(src.name)
    retrain_with_seed(ctx, src, rd.arm(key), seed=arm_seed(ctx, "best", k), record_name=key,
                      rows=record.rows if record else None, resume_step=steps.iter0_final_step(rd), **job)


def run_arm(ctx: RunContext, arm_key: str, best_iter: int, n_eval: int, seed_index: int = 0, **job: Any) -> IterRecord:
    """Train seed member `seed_index` of `arm_key` ("best", "run_a", "run_b", "run_c"); returns its record."""
    rd = ctx.rd
    key = seed_key(f"iter_{best_iter}" if arm_key == "best" else arm_key, seed_index)
    if arm_key == "best":
        if seed_index < 1:
            raise SelfImproveError(f"iter_{best_iter} is the best iteration's own run (seed member 0); nothing to train")
        _retrain_best(ctx, best_iter, seed_index, **job)
        return rd.read_metrics().get(key)
    if arm_key == "run_b" and seed_index:
        raise SelfImproveError("run_b trains from the base model with one seed only")
    arm = rd.control(arm_key, seed_index)
    arm.dir.mkdir(parents=True, exist_ok=True)
    f = steps.iter0_final_step(rd)
    # the real env's blocks point at the hold-out wrapper when the env has no eval split (phases/holdout.py)
    real_envs = held_out_train_envs(ctx, ctx.dialect.canonical_train_envs(ctx.canonical_config()))
    # Runs A and C replay the best iteration's overrides.toml (the teacher's knobs) and share their seeds
    # (arm_seed, none of them the best iteration's): Run A repeats the best iteration with other seeds, and
    # Run A vs Run C differs by the training data only.
    best_overrides = rd.iter(best_iter).dir / "overrides.toml"
    if arm_key == "run_a":
        name, rows = _package_best(ctx, arm_key, best_iter)  # one package, in member 0's dir, for every seed
        train_resumed_arm(ctx, arm, train_envs=[{"id": name}], resume_step=f, wandb_name=key,
                          overrides_file=best_overrides, rows=rows, num_examples=n_eval, record_name=key,
                          seed=arm_seed(ctx, "run_a", seed_index), **job)
    elif arm_key == "run_b":
        name, rows = _package_best(ctx, arm_key, best_iter)
        envs = [*real_envs, {"id": name}]
        if all("ratio" in e for e in real_envs):  # prime-rl: ratio on all blocks or none
            envs[-1]["ratio"] = sum(e["ratio"] for e in real_envs) / len(real_envs)
        config = fresh_arm_config(ctx, train_envs=envs, num_examples=n_eval, wandb_name=arm_key,
                                  seed=arm_seed(ctx, "run_b"))
        train_arm(ctx, arm, config, record_name=arm_key, num_examples=n_eval, rows=rows, **job)
    elif arm_key == "run_c":
        train_resumed_arm(ctx, arm, train_envs=real_envs, resume_step=f, wandb_name=key,
                          overrides_file=best_overrides, rows=None, num_examples=n_eval, record_name=key,
                          seed=arm_seed(ctx, "run_c", seed_index), **job)
    else:
        raise SelfImproveError(f"unknown arm {arm_key}")
    return rd.read_metrics().get(key)


def compare_units(best_iter: int, *, control: bool, seeds: int) -> list[tuple[str, int, str]]:
    """(arm, seed index, metrics key) in run order: seed 0 of Runs A, B, C first (the single-seed
    comparison as before), then per further seed the best iteration, Run A and Run C."""
    units = [("run_a", 0), ("run_b", 0)] + ([("run_c", 0)] if control else [])
    for k in range(1, seeds):
        units += [("best", k), ("run_a", k)] + ([("run_c", k)] if control else [])
    return [(arm, k, seed_key(f"iter_{best_iter}" if arm == "best" else arm, k)) for arm, k in units]


def seed_members(metrics: Metrics, arm: str) -> list[IterRecord]:
    """The finished records of `arm` and of its seed replicates, member 0 first."""
    found = [(split_seed_key(r.arm)[1], r) for r in metrics.iters if split_seed_key(r.arm)[0] == arm]
    return [r for _, r in sorted(found, key=lambda kr: kr[0])]


def _stamp_seed(ctx: RunContext, key: str) -> None:
    """Record in metrics.json which training seed `key` ran with (read from its rl.toml) and, for a
    replicate, which arm it repeats. Idempotent, keeps the records' order; repairs a record left
    unstamped by a kill between its eval and this call."""
    base, k = split_seed_key(key)
    rd = ctx.rd
    fields = {"seed": recorded_seed(ctx, key), "replicate_of": base if k else None}
    with rd.updating():
        metrics = rd.read_metrics()
        rec = metrics.get(key)
        if rec is None or all(getattr(rec, f) == v for f, v in fields.items()):
            return
        metrics.iters = [r.model_copy(update=fields) if r.arm == key else r for r in metrics.iters]
        rd.write_metrics(metrics)


def _record_seeds(ctx: RunContext, seeds: int | None) -> RunContext:
    """Write --seeds into run.json (when given); the context then holds the run's number of training seeds."""
    if seeds is None:
        return ctx
    check_seeds(seeds)
    if ctx.cfg.seeds == seeds:
        return ctx
    cfg = ctx.cfg.model_copy(update={"seeds": seeds})
    ctx.rd.write_run(cfg)
    return ctx.with_cfg(cfg)


def check_seeds(seeds: int | None) -> None:
    """--seeds in range, checked before anything is written (run.json would keep a huge value)."""
    if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
        raise UsageError(f"--seeds {seeds}: must be between 1 and {MAX_SEEDS} (1 = one training seed per arm; "
                         f"each seed trains Run A, Run C and the best iteration again)")


def check_parallel(parallel: int | None) -> None:
    if parallel is not None and not 1 <= parallel <= MAX_PARALLEL:
        raise UsageError(f"--parallel {parallel}: must be between 1 and {MAX_PARALLEL} (1 = one arm after another)")


def check_keeps_records(ctx: RunContext, *, control: bool, seeds: int | None) -> None:
    """Refuse, before anything is written, a compare that would rewrite what is already on record (issue 36).

    A closed (finalized) run: a compare with no arm to train (the same, fewer --seeds, or --no-control) would
    only rewrite run.json and metrics.json under a summary that describes them: exit 5, naming the compare
    that reopens the run on purpose (more seeds). An open run: fewer --seeds than the arms already trained
    would make run.json disagree with the records that stay: exit 2."""
    rd, cfg = ctx.rd, ctx.cfg
    metrics = rd.read_metrics()
    have = trained_seeds(metrics)
    if cfg.finalized() and cfg.ended_as() != "aborted":
        best = pick_best(metrics.iters)
        n = max(seeds if seeds is not None else cfg.seeds, 1)
        units = compare_units(best.iter, control=control, seeds=n) if best is not None else []
        if units and (seeds is None or seeds >= have) and any(metrics.get(key) is None for _a, _k, key in units):
            return  # new arms: compare reopens the run, and the next finalize rewrites the summary
        raise PhaseOrderError(f"{rd.run_json}: the run is closed (finalized; it ended: {cfg.ended_as()}) and this "
                              f"compare has no arm to train: nothing changed; its summary is the '## Final summary' "
                              f"of {rd.scratchpad}; {reopen_advice(rd, have)}")
    if seeds is not None and seeds < have:
        raise UsageError(f"--seeds {seeds}: this run already trained {have} training seeds per arm (metrics.json); "
                         f"their records stay in the summary: use --seeds {have} or more, or leave --seeds out")


def _reopen_for(ctx: RunContext, units: list[tuple[str, int, str]]) -> RunContext:
    """A finalized run that gets new Phase 4 arms (compare --seeds N after finalize) is open again until the
    next finalize, which rewrites its summary: status never calls it finished while arms are missing."""
    metrics = ctx.rd.read_metrics()
    if ctx.cfg.end_ts is None or all(metrics.get(key) is not None for _a, _k, key in units):
        return ctx
    cfg = ctx.cfg.model_copy(deep=True)
    cfg.reopen()
    ctx.rd.write_run(cfg)
    return ctx.with_cfg(cfg)


def record_seeds(rd: RunDir, seeds: int | None) -> None:
    """`selfimprove run --seeds N`: record N before the loop starts, so a resumed run keeps it."""
    if seeds is not None:
        with rd.lock("run --seeds"):
            ctx = RunContext.load(rd)
            if ctx.cfg.end_ts is None:  # a closed run: `run --run-dir` refuses it with its own line
                check_keeps_records(ctx, control=True, seeds=seeds)  # never fewer seeds than trained
            _record_seeds(ctx, seeds)


def default_parallel(cfg: RunConfig, rd: RunDir | None = None, pending: int = 1) -> int:
    """Arms trained at once when --parallel is not given: 2 on the CPU engine (2 cores; measured in
    bench/parallel_arms.py), 1 on prime-rl, whose run takes every GPU of the machine. On SLURM every
    pending arm at once: each is its own job, and the scheduler queues what does not fit."""
    if rd is not None and on_slurm(rd, cfg):
        return max(1, pending)
    return 2 if cfg.engine == "local" else 1


def _train_unit(ctx: RunContext, unit: tuple[str, int, str], best_iter: int, n_eval: int,
                note: Callable[[str, str], None], job: dict[str, Any]) -> str | None:
    """Train one (arm, seed index, metrics key) unless metrics.json has it; its error line, or None."""
    rd = ctx.rd
    arm_key, k, key = unit
    if rd.read_metrics().get(key) is None:
        note(key, "start")
        try:
            run_arm(ctx, arm_key, best_iter, n_eval, seed_index=k, **job)
            _clear_arm_error(rd, key)
            note(key, "done")
        except SelfImproveError as e:
            error = str(e).splitlines()[0]
            _log_arm_error(rd, key, error)
            note(key, f"failed: {error}")
            return error
    _stamp_seed(ctx, key)
    return None


def _train_units(units: list, train: Callable[[Any], str | None], parallel: int, progress: bool) -> list[str | None]:
    """`train` every unit, up to `parallel` at once (threads: each mostly waits on its engine job).
    Started in the given order; an interrupt or a bug in one stops the others' watchers (their jobs keep
    running, and re-running compare attaches to them) and is raised here."""
    if parallel <= 1 or len(units) <= 1:
        return [train(u) for u in units]
    with watch_together(progress) as group, ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(train, u) for u in units]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)  # not in unit order: a late unit may fail first
            failed = next((f.exception() for f in futures if f.done() and not f.cancelled() and f.exception()), None)
            if failed is not None:
                raise failed
            return [f.result() for f in futures]
        except BaseException:
            group.stop()
            for f in futures:
                f.cancel()
            raise


def _order_records(rd: RunDir, keys: list[str]) -> Metrics:
    """metrics.json lists the compare arms in run order (seed 0 of A, B, C, then the replicates), not in the
    order they happened to finish when several trained at once; every other record keeps its place before them."""
    rank = {key: i for i, key in enumerate(keys)}
    with rd.updating():
        metrics = rd.read_metrics()
        ordered = sorted(metrics.iters, key=lambda r: (r.arm in rank, rank.get(r.arm, 0)))  # stable sort
        if [r.arm for r in ordered] != [r.arm for r in metrics.iters]:
            metrics.iters = ordered
            rd.write_metrics(metrics)
        return metrics


def compare(
    rd: RunDir, *, control: bool = True, seeds: int | None = None, restart: bool = False, resume: bool = False,
    quiet: bool = False, cap_hours: float | None = None, on_arm: Callable[[str, str], None] | None = None,
    parallel: int | None = None,
) -> dict:
    """Pick BEST_ITER and run the control arms with `seeds` training seeds (None: run.json's `seeds`),
    `parallel` arms at a time (None: `default_parallel`).

    Returns {"best", "n_eval_full_split", "seeds", "parallel", "arms": {key: record}, "errors": {key: message},
    "seed_members": {"iter_N"|"run_a"|"run_b"|"run_c": [keys of its finished members]}}.
    """
    rd.require()
    note = on_arm or (lambda _a, _e: None)
    check_parallel(parallel)
    check_seeds(seeds)
    before = RunContext.load(rd)  # one read: the checks before the lock leave a refused run dir untouched
    require_phase_order(before, "compare")
    check_keeps_records(before, control=control, seeds=seeds)
    with rd.lock("compare"):
        ctx = RunContext.load(rd)
        require_phase_order(ctx, "compare")  # again under the lock: Phase 3 may have been running
        check_keeps_records(ctx, control=control, seeds=seeds)
        best = pick_best(rd.read_metrics().iters)
        if best is None:
            raise SelfImproveError("no iteration >= 1 finished; there is no best dataset to compare (run iterate first)")
        ctx = _record_seeds(ctx, seeds)
        n_seeds = ctx.cfg.seeds
        best_rec = write_best_iter(ctx, best)
        n_eval = ctx.required_hub().eval_size or ctx.cfg.eval_examples  # Phase 4 evaluates on the full eval split
        _stamp_seed(ctx, f"iter_{best.iter}")  # seed member 0 of the best iteration
        units = compare_units(best.iter, control=control, seeds=n_seeds)
        pending = sum(rd.read_metrics().get(key) is None for _a, _k, key in units)
        n_parallel = parallel or default_parallel(ctx.cfg, rd, pending)
        ctx = _reopen_for(ctx, units)
        job = {"restart": restart, "resume": resume, "quiet": quiet, "cap_hours": cap_hours}
        failures = _train_units(units, lambda u: _train_unit(ctx, u, best.iter, n_eval, note, job), n_parallel,
                                progress=not quiet)
        errors = {key: err for (_a, _k, key), err in zip(units, failures) if err is not None}
        # every compare arm on record, not only this call's (--no-control must not move run_c's records)
        on_record = compare_units(best.iter, control=True, seeds=max(n_seeds, trained_seeds(rd.read_metrics())))
        metrics = _order_records(rd, [key for _a, _k, key in on_record])
        done = {key: metrics.get(key).model_dump(mode="json") for _a, _k, key in units if key not in errors}
        members = {arm: [r.arm for r in seed_members(metrics, arm)]
                   for arm in (f"iter_{best.iter}", "run_a", "run_b", "run_c")}
        return {"best": best_rec, "n_eval_full_split": n_eval, "seeds": n_seeds, "parallel": n_parallel,
                "arms": done, "errors": errors, "seed_members": members}
