"""Phase 3, `iterate`: the resumable state machine of one iteration, looped.

Each call works on the current iteration N (the lowest N >= 1 without
`iter_N/record.json`) and runs its next incomplete step. A step is done iff
its durable artefact exists and validates (hashes tie every artefact to the
inputs it was made from), so re-invoking after a crash continues where it
stopped, and editing the generator re-runs exactly what depends on it.

    1 gate       pre-iteration budget gate (the ONLY way Phase 3 ends; the budget
                 clock starts at the first iterate, run.json phase3_start_ts)
    2 analyze    weakness_stats.json + failures.jsonl + analysis.json + skeletons + scratchpad entry
                 -> stop for the teacher
    3 report     overrides.toml's keys and ranges (phases/overrides.py, nothing written), then the
                 weakness_report.md front matter gate, teacher's scratchpad sections -> report_gate.json
    4 generate   run gen_dataset.py in a subprocess, then drop the rows that overlap the evaluated
                 questions (a count is reported, never which)     -> dataset.jsonl + generate.json
    5 gate       every dataset rule, round trip, dedup, eval overlap, provenance vs failures.jsonl,
                 diversity axes                                  -> gate_report.json
    6 package    env package mirroring the real env, installed   -> package.json
    7 stage      iter_0's final-step trees into prime_out        -> stage.json (seed; v1 forks with resume.dir)
    8 train      rl.toml, detached job, sealed eval aggregation  -> eval_summary.json
    9 record     scratchpad results, verdict vs noise            -> record.json

The teacher acts at exactly two points: after step 2 (write the report and
the generator) and when a gate fails (fix the generator, never the rows).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from ..errors import GateFailed, NoLearningSignal, PhaseOrderError, TeacherActionNeeded
from ..faults import fault_point
from ..models import RunConfig
from ..rundir import ArmDir, RunDir, atomic_write_json
from ..ui import console
from . import iteration_steps as steps
from .analyze import analyze_failures, sealed_train_ids, write_weakness_stats
from .knobs import KNOBS_FILE, knobs_in_force
from .context import RunContext
from .evals import abort_run_on_unparseable_eval, record_summary
from .order import require_phase_order
from .signal import NO_SIGNAL_VERDICT, not_a_result

StopKind = Literal["teacher", "ended", "iteration_done"]


@dataclass
class IterateResult:
    """Why `iterate` stopped and what to do next."""

    kind: StopKind
    iteration: int
    message: str
    details: dict[str, Any] = field(default_factory=dict)


def current_iteration(rd: RunDir) -> int:
    """The lowest N >= 1 whose record.json is missing."""
    n = 1
    while (rd.iter(n).dir / "record.json").is_file():
        n += 1
    return n


def start_phase3_clock(rd: RunDir, cfg: RunConfig) -> RunConfig:
    """Record when Phase 3 began (run.json phase3_start_ts), once: the --budget clock.

    `--budget` caps Phase 3 only (the "Phase 3 cap" of the skill's procedure), so the clock starts at
    the first `iterate` after the baseline, never at bootstrap: introspection,
    iter_0 training or --init-from, and any first-use build of a student are not
    charged. Re-runs and resumes keep the recorded time. A run whose Phase 3 began
    under an older selfimprove (iteration dirs, no phase3_start_ts) keeps the clock
    it started with, start_ts, rather than getting its budget back.
    """
    if cfg.phase3_start_ts is None:
        started_before = any(i > 0 for i in rd.iter_indices())
        cfg.phase3_start_ts = cfg.start_ts if started_before else time.time()
        rd.write_run(cfg)
    return cfg


def budget_gate(rd: RunDir, cfg: RunConfig, n: int) -> IterateResult | None:
    """The skill's procedure's pre-iteration gate. Ends Phase 3 (status + reason) or returns None.

    Budget time is measured from phase3_start_ts (see start_phase3_clock)."""
    elapsed = time.time() - cfg.phase3_start_ts if cfg.phase3_start_ts is not None else 0.0
    fired = []  # every gate that fired, so the reason never hides one behind the other
    if elapsed >= cfg.budget_seconds:
        fired.append(("budget_exhausted", f"Phase 3 budget of {cfg.budget_seconds} s used "
                      f"({elapsed:.0f} s since Phase 3 started) before iter_{n}"))
    if n >= cfg.max_iters:
        fired.append(("max_iters_reached", f"max_iters={cfg.max_iters} reached (iter_0..iter_{n - 1} done)"))
    if not fired:
        return None
    status = fired[0][0]  # the budget first: it is the one that cut the run short
    reason = "; ".join(why for _s, why in fired)
    # The scratchpad entry first, then run.json: run.json's status is what ends Phase 3, so a
    # kill in between re-runs this gate, which then finds its entry and does not repeat it.
    heading = f"## Phase 3 ended: {' + '.join(gate for gate, _why in fired)}"
    if heading not in rd.read_scratchpad():
        rd.append_scratchpad(f"{heading}\n\n{reason}. Next: `selfimprove compare`, then `selfimprove finalize`.\n")
    fault_point("phase3-end")
    cfg.status, cfg.reason = status, reason
    rd.write_run(cfg)
    return IterateResult("ended", n, f"Phase 3 ended: {status} ({reason}){_last_score(rd, cfg, n - 1)}; "
                                     f"next: selfimprove compare --run-dir {rd.root}")


def set_budget(rd: RunDir, cfg: RunConfig, seconds: int) -> RunConfig:
    """`iterate --budget`: Phase 3's cap from now on (run.json budget_seconds), with a scratchpad line saying
    who changed it from what. A lower cap than the time used ends Phase 3 at the next gate, before the next
    iteration starts (a started one is finished first): the way to stop early for a deadline."""
    if cfg.budget_seconds == seconds:
        return cfg
    if cfg.status != "running":
        raise PhaseOrderError(f"{rd.run_json}: Phase 3 has ended ({cfg.ended_as()}); --budget changes the cap of a running "
                              f"Phase 3 only; nothing changed; next: selfimprove compare --run-dir {rd.root}")
    used = time.time() - cfg.phase3_start_ts if cfg.phase3_start_ts is not None else 0.0
    change = f"Phase 3 budget changed from {cfg.budget_seconds} s to {seconds} s"
    if change not in rd.read_scratchpad():  # a kill before run.json was written: the re-run does not repeat it
        rd.append_scratchpad(f"- {change} (`iterate --budget`, {used:.0f} s used so far).\n")
    cfg = cfg.model_copy(update={"budget_seconds": seconds})
    rd.write_run(cfg)
    return cfg


def _last_score(rd: RunDir, cfg: RunConfig, last: int) -> str:
    """"; iter_2 eval_acc 0.610 [95% CI 0.52, 0.69] (n=100 examples, split: eval)" for the last iteration, with NOT A RESULT on a
    run that went on without a learning signal (issue 36: the end line said neither)."""
    rec = rd.read_metrics().get(f"iter_{last}") if last >= 1 else None
    if rec is None:
        return ""
    lo, hi = rec.acc_ci95
    warn = not_a_result(cfg.learning_signal)
    return (f"; iter_{last} eval_acc {rec.eval_acc:.3f} [95% CI {lo:.2f}, {hi:.2f}] (n={rec.n_eval} examples, split: {rec.eval_split})"
            + (f" [{warn}]" if warn else ""))


def iterate(
    rd: RunDir,
    *,
    restart: bool = False,
    resume: bool = False,
    quiet: bool = False,
    once: bool = False,
    gen_timeout: float = 900.0,
    cap_hours: float | None = None,
    on_step: Callable[[int, str], None] | None = None,
    group_by: str | None = None,
    budget_seconds: int | None = None,
) -> IterateResult:
    """Run iterations until the teacher must act, Phase 3 ends, or (with once) one iteration is done.

    `group_by` (a grouping.py rule or FILE.py:FUNC) is recorded in run.json and groups the weakness
    statistics of the iterations analysed from now on (an iteration already analysed keeps its own).
    `budget_seconds` replaces Phase 3's cap (see set_budget)."""
    rd.require()
    require_phase_order(RunContext.load(rd), "iterate")
    with rd.lock("iterate"):
        ctx = RunContext.load(rd)
        if group_by is not None and group_by != ctx.cfg.group_by:
            cfg = ctx.cfg.model_copy(update={"group_by": group_by})
            rd.write_run(cfg)
            ctx = ctx.with_cfg(cfg)
        if budget_seconds is not None:
            ctx = ctx.with_cfg(set_budget(rd, ctx.cfg, budget_seconds))
        while True:
            cfg = ctx.cfg
            if cfg.status != "running":
                return IterateResult("ended", current_iteration(rd), f"Phase 3 is over (it ended: {cfg.ended_as()}); next: selfimprove compare --run-dir {rd.root}")
            signal = cfg.learning_signal or {}
            if signal and not signal.get("has_signal") and not signal.get("allowed"):
                raise NoLearningSignal(f"iter_0: {NO_SIGNAL_VERDICT} ({rd.run_json} learning_signal); to continue "
                                       f"anyway: selfimprove baseline --run-dir {rd.root} --allow-no-signal")
            ctx = ctx.with_cfg(start_phase3_clock(rd, cfg))
            n = current_iteration(rd)
            result = run_one_iteration(ctx, n, restart=restart, resume=resume, quiet=quiet,
                                       gen_timeout=gen_timeout, cap_hours=cap_hours, on_step=on_step)
            restart = resume = False  # flags apply to the job that was stuck, not to later ones
            if result.kind != "iteration_done" or once:
                return result


def run_one_iteration(
    ctx: RunContext, n: int, *, restart: bool, resume: bool, quiet: bool,
    gen_timeout: float, cap_hours: float | None, on_step: Callable[[int, str], None] | None,
) -> IterateResult:
    """One iteration's next steps. Its writes to run.json (budget_gate's end of Phase 3, an abort on an
    unparseable eval) end the call, so `iterate` never goes on with the copy in `ctx` once it is stale."""
    rd, cfg = ctx.rd, ctx.cfg
    it = rd.iter(n)
    note = on_step or (lambda _n, _s: None)

    # 1-2. gate + analyze (only before an iteration starts: a started one is finished)
    # skeletons.json is written last in this step: its existence means the step is done.
    if not (it.dir / "skeletons.json").is_file():
        if not it.dir.is_dir():
            ended = budget_gate(rd, cfg, n)
            if ended:
                return ended
        note(n, "analyze")
        prev = rd.iter(n - 1)
        prev_summary = rd.read_eval_summary(prev)
        it.dir.mkdir(parents=True, exist_ok=True)
        final_steps = {0: steps.iter0_final_step(rd), n - 1: prev_summary.final_step or 0}
        weakness = write_weakness_stats(rd, n, final_steps=final_steps, group_by=cfg.group_by)
        analysis = analyze_failures(prev, it.dir, prev_eval_acc=prev_summary.eval_acc, prev_final_step=prev_summary.final_step or 0,
                                    weakness=weakness["previous"] or weakness["real"],
                                    sealed=sealed_train_ids(rd) if n == 1 else frozenset())  # iter_0: the real env
        steps.append_iteration_entry(rd, n, analysis, weakness["real"])
        atomic_write_json(it.dir / KNOBS_FILE, knobs_in_force(ctx, n))  # before any overrides.toml: the base values
        steps.write_skeletons(ctx, n, analysis)
    if steps.teacher_files_untouched(it):
        compact = (f" iter_{n - 1} just finished (results in scratchpad.md): run /compact before reading the new "
                   "failures (if it fails: selfimprove note --compact-failed \"...\")." if n > 1 else "")
        raise TeacherActionNeeded(
            f"teacher: fill {it.dir}/weakness_report.md and {it.dir}/gen_dataset.py "
            f"(inputs: `selfimprove weaknesses --run-dir {rd.root}` (weakness_stats.json), failures.jsonl, analysis.json, knobs.json, "
            f"hub_env.json), then re-run `selfimprove iterate --run-dir {rd.root}`."
            + compact
        )

    # 3a. the teacher's overrides.toml (if any), before anything is generated, packaged or trained:
    # a bad knob is a failed gate now, not a job the engine refuses after minutes
    if not it.eval_summary.is_file():
        steps.overrides_gate(ctx, it)

    # 3b. report gate
    note(n, "report gate")
    report = steps.report_gate(rd, it, n)

    # 4. generate
    if not steps.generated_is_current(it):
        note(n, "generate")
        steps.generate(ctx, it, timeout=gen_timeout, python=ctx.env_python, quiet=quiet)

    # 5. dataset gate
    if not steps.dataset_gate_is_current(it):
        note(n, "dataset gate")
        steps.dataset_gate(ctx, it, n, report)

    # 6. package, and before training: the installed package must be this run's (ensure_package)
    fault_point("gate-to-package")
    package = steps.package_name_for(cfg, f"iter_{n}")
    if not steps.package_is_current(it, package) or not it.eval_summary.is_file():
        note(n, "package")
        steps.ensure_package(ctx, it, package, report, origin=f"iteration {n}",
                             note=None if quiet else lambda m: console.print(m, highlight=False))

    # 7. stage + 8. train
    if not it.eval_summary.is_file():
        note(n, "stage + train")
        f = steps.iter0_final_step(rd)
        if not restart and steps.launch_is_stale(it):
            restart = True  # the failed job trained the previous dataset: this one launches afresh
            if not quiet:
                console.print(f"iter_{n}: the last launch failed on the previous dataset; the new one is "
                              "packaged, so training starts afresh (its output is kept as prime_out.failed-*)",
                              highlight=False)
        with abort_run_on_unparseable_eval(ctx, it.name):
            steps.train_resumed_arm(
                ctx, it, train_envs=[{"id": package}], resume_step=f, restart=restart, resume=resume,
                quiet=quiet, cap_hours=cap_hours, wandb_name=f"iter_{n}", overrides_file=it.dir / "overrides.toml",
                rows=steps.dataset_rows(it),
            )
    elif rd.read_metrics().get(it.name) is None:  # killed between eval_summary.json and its metrics row
        record_summary(rd, rd.read_eval_summary(it), key=it.name, rows=steps.dataset_rows(it))

    # 9. record
    note(n, "record")
    record = steps.record_iteration(ctx, n)
    fault_point("record")
    atomic_write_json(it.dir / "record.json", record)
    return IterateResult(
        "iteration_done", n,
        f"iter_{n} done: eval_acc {record['eval_acc']:.3f} ({record['verdict']})"
        + (f" [{record['not_a_result']}]. " if record.get("not_a_result") else ". ") +
        "Agent: /compact now (on failure: selfimprove note --compact-failed \"...\"), then re-run iterate.",
        record,
    )


__all__ = ["iterate", "IterateResult", "current_iteration", "budget_gate", "start_phase3_clock", "GateFailed", "ArmDir"]
