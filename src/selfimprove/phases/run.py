"""`selfimprove run`: the whole loop, unattended, with a pluggable teacher.

    bootstrap -> introspect -> baseline -> iterate (teacher at each stop) -> compare -> finalize

`--budget` caps Phase 3 (iterate) only: its clock starts at the first iterate
(run.json phase3_start_ts), so bootstrap, introspect and baseline are never
charged, and compare/finalize run after it on their own time.

Everything it does is what the phase commands do; it only chains them and
answers the teacher stops by calling the teacher. Every phase is resumable on
its own, so re-running `selfimprove run --run-dir R` after a crash or a kill
picks the run up wherever it was, with no duplicated metrics entries.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ..engines.job_record import set_rerun
from ..errors import GateFailed, SelfImproveError, TeacherActionNeeded
from ..rundir import RunDir, atomic_write_json
from ..teacher import MAX_TEACHER_ATTEMPTS, TeacherContext, call_teacher, make_context
from ..ui import console, fmt_duration, phase_line, terminal_safe
from .baseline import run_baseline
from .bootstrap import BootstrapOptions, bootstrap
from .compare import check_parallel, check_seeds, compare, record_seeds
from .finalize import WORKED_BY_PROGRAM, finalize
from .introspect import introspect
from .iterate import IterateResult, current_iteration, iterate
from .phase4_state import pick_best

# Phases whose lines show the --budget clock. It caps Phase 3 only and starts at the
# first iterate, so introspect and baseline (with any first-use student build) say
# "budget clock not started"; compare and finalize run after it and show no budget.
BUDGET_SHOWN = ("introspect", "baseline", "iterate")


def _timed(rd: RunDir, name: str, fn: Callable[[], Any], timings: dict[str, float]) -> Any:
    def line(event: str) -> None:
        if name in BUDGET_SHOWN:
            cfg = rd.read_run()  # re-read: the first iterate starts the clock
            phase_line(event, name, cfg.phase3_start_ts, cfg.budget_seconds)
        else:
            phase_line(event, name)

    line("start")
    started = time.perf_counter()
    try:
        return fn()
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started
        line(f"end ({fmt_duration(timings[name])})")


def record_teacher(rd: RunDir, teacher_record: dict[str, Any] | None) -> None:
    """run.json `teacher` := `run --teacher` as given (spec and LLM flags, never a key), so that
    `run --run-dir R` without --teacher resumes with it. Written when it differs only."""
    if teacher_record is None or teacher_record == rd.read_run().teacher:
        return
    with rd.lock("run --teacher"), rd.updating():
        latest = rd.read_run()
        latest.teacher = teacher_record
        rd.write_run(latest)


def iterate_with_teacher(rd: RunDir, teacher: Callable[[TeacherContext], None], *, quiet: bool = False,
                         once: bool = False, timings: dict[str, float] | None = None,
                         teacher_record: dict[str, Any] | None = None, rerun: str | None = None,
                         **iterate_options: Any) -> IterateResult:
    """Phase 3 with the teacher answering its stops: call `iterate` until Phase 3 ends (with `once`,
    until one iteration is done), and at each teacher stop or failed gate call the teacher, with
    the failure list as feedback, at most MAX_TEACHER_ATTEMPTS times per iteration.
    `iterate_options` go to iterate; --restart / --resume only to its first call (the stuck job's).
    `teacher_record` is written to run.json when the teacher is about to act (a resumed run that
    fails before that, e.g. on a damaged analysis.json, leaves run.json as it was).
    `rerun`: the command that resumes this loop, named in the stop lines (default `run --run-dir R`;
    `iterate --teacher` passes its own, so a user is never told to re-run a command they did not use).

    After the last attempt the stop is raised again with its own exit code (4 for a gate, 3 for a
    teacher stop) and its whole message (every failing rule), plus what the user can do next."""
    rerun = rerun or f"selfimprove run --run-dir {rd.root}"
    timings = {} if timings is None else timings
    attempts: dict[int, int] = {}
    options = dict(iterate_options)
    while True:
        try:
            result = _timed(rd, "iterate", lambda: iterate(rd, quiet=quiet, once=once, **options), timings)
        except (TeacherActionNeeded, GateFailed) as stop:
            n = current_iteration(rd)
            attempts[n] = attempts.get(n, 0) + 1
            if attempts[n] > MAX_TEACHER_ATTEMPTS:
                raise type(stop)(
                    f"iter_{n}: the teacher could not produce data that passes the gates in "
                    f"{MAX_TEACHER_ATTEMPTS} attempts; the last one said: {stop}\n"
                    f"Next: re-run `{rerun}` to give the teacher {MAX_TEACHER_ATTEMPTS} more attempts, or fix "
                    f"what it names in {rd.iter(n).dir} yourself (the generator, never the rows) and run "
                    f"`selfimprove iterate --run-dir {rd.root}`"
                ) from None
            # A fresh skeleton is a first write; anything else is a fix request.
            fresh = isinstance(stop, TeacherActionNeeded) and str(stop).startswith("teacher: fill")
            feedback = None if fresh else str(stop)
            if not quiet:
                first = terminal_safe((str(stop).splitlines() or [""])[0])  # the teacher's text: shown, never acted on
                console.print(f"teacher: iter_{n} ({'write' if fresh else 'fix: ' + first})", markup=False, highlight=False)
            context = make_context(rd, n, feedback)
            record_teacher(rd, teacher_record)
            started = time.perf_counter()
            call_teacher(teacher, context, rerun=rerun)
            timings["teacher"] = timings.get("teacher", 0.0) + time.perf_counter() - started
            continue
        finally:
            options.pop("restart", None)
            options.pop("resume", None)
        if result.kind == "ended" or once:
            return result


def run_loop(rd: RunDir, teacher: Callable[[TeacherContext], None], *, control: bool = True,
             seeds: int | None = None, quiet: bool = False, allow_no_signal: bool = False,
             parallel: int | None = None, teacher_record: dict[str, Any] | None = None,
             restart: bool = False, resume: bool = False) -> dict[str, Any]:
    """Drive a bootstrapped run dir to the end. Returns finalize's result plus phase timings.
    `parallel`: Phase 4 arms trained at once (None: compare's default for the engine).
    `restart` / `resume` (what the job lines advise after a crashed, cancelled or timed-out job) go to the
    phase where the run stands: baseline while iter_0 has no eval, else iterate while Phase 3 runs, else
    compare; like the phase commands, they act only on a job that is gone, never on a live one.

    `seeds` (Phase 4 training seeds) is written to run.json first, so a resumed run keeps it."""
    timings: dict[str, float] = {}
    rd.require()
    check_seeds(seeds)
    check_parallel(parallel)
    cfg = rd.read_run()  # where the run stands; each phase below reads it again under its own lock
    if cfg.end_ts is not None:  # finalized (only more seeds give it work, else finalize: exit 5) or aborted
        if seeds is not None and seeds != cfg.seeds and cfg.finalized():
            _timed(rd, "compare", lambda: compare(rd, control=control, seeds=seeds, quiet=quiet, parallel=parallel), timings)
        return {**_timed(rd, "finalize", lambda: finalize(rd, worked=WORKED_BY_PROGRAM), timings), "timings_s": timings}
    record_seeds(rd, seeds)
    if not rd.hub_env_json.is_file():
        _timed(rd, "introspect", lambda: introspect(rd, announce=False), timings)
    if rd.read_run().status == "aborted":  # re-read: introspect records an env it cannot load as an abort
        return {**finalize(rd, worked=WORKED_BY_PROGRAM), "timings_s": timings}
    flags = {"restart": restart, "resume": resume}

    def take(here: bool) -> dict[str, bool]:
        """The recovery flags for the phase where the run stands (`here`), once; {} elsewhere."""
        if not here:
            return {}
        given, flags["restart"], flags["resume"] = dict(flags), False, False
        return given

    base_flags = take(not rd.iter(0).eval_summary.exists())
    _timed(rd, "baseline", lambda: run_baseline(rd, quiet=quiet, allow_no_signal=allow_no_signal, **base_flags),
           timings)

    iterate_with_teacher(rd, teacher, quiet=quiet, timings=timings, teacher_record=teacher_record,
                         **take(rd.read_run().status == "running"))
    if pick_best(rd.read_metrics().iters) is not None:
        compare_flags = take(True)
        _timed(rd, "compare", lambda: compare(rd, control=control, quiet=quiet, parallel=parallel, **compare_flags),
               timings)  # seeds: run.json
    elif not quiet:  # e.g. the budget ran out during iter_0: nothing to compare, still summarise
        console.print("compare skipped: no iteration >= 1 finished before Phase 3 ended")
    out = _timed(rd, "finalize", lambda: finalize(rd, worked=WORKED_BY_PROGRAM), timings)
    rounded = {k: round(v, 1) for k, v in timings.items()}
    atomic_write_json(rd.root / "timings.json", rounded)  # this invocation's wall time per phase
    return {**out, "timings_s": rounded}


def run(opts: BootstrapOptions | None, run_dir: Path | None, teacher: Callable[[TeacherContext], None],
        *, control: bool = True, seeds: int | None = None, quiet: bool = False,
        allow_no_signal: bool = False, parallel: int | None = None,
        teacher_record: dict[str, Any] | None = None, restart: bool = False,
        resume: bool = False) -> dict[str, Any]:
    """Bootstrap (unless resuming an existing run dir), then drive the run to its end.

    Inside `run DATASET ...` every line that says how to go on names `selfimprove run --run-dir R` (the
    same command would bootstrap a new run dir): job_record.set_rerun."""
    check_seeds(seeds)  # before bootstrap writes a run dir
    check_parallel(parallel)
    if run_dir is None:
        if opts is None:
            raise SelfImproveError("give a dataset to start a run, or --run-dir to resume one")
        rd = bootstrap(opts)
        set_rerun(f"selfimprove run --run-dir {rd.root}")
        record_teacher(rd, teacher_record)  # a new run is resumed with its teacher from the start
        if not quiet:
            console.print(f"run dir: {rd.root}")
    else:
        rd = RunDir(run_dir).require()
    interrupted = False
    try:
        return {"run_dir": str(rd.root), **run_loop(rd, teacher, control=control, seeds=seeds, quiet=quiet,
                                                    allow_no_signal=allow_no_signal, parallel=parallel,
                                                    teacher_record=teacher_record, restart=restart, resume=resume)}
    except KeyboardInterrupt:
        interrupted = True  # set_rerun still holds: the CLI's "interrupted" line names `run --run-dir R`
        raise
    finally:
        if not interrupted:
            set_rerun(None)
