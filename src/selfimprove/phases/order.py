"""Phase order: what each phase needs done before it runs, in one place.

    introspect   the run is not closed
    baseline     introspect is done (hub_env.json); the run is not closed
    iterate      iter_0 is done (baseline); the run is not closed
    compare      iter_0 is done; Phase 3 is over (run.json status is no longer "running")
    finalize     iter_0 is done, unless the run was aborted (finalize then records why it ended);
                 the run is not closed (a closed run has its summary: nothing to do), unless
                 Phase 4 arms are missing (then finalize reopens it with a partial summary)

"Closed" means finalize has completed the run (run.json end_ts is set, status
"finalized"). A closed run refuses every phase that trains or rewrites Phase 1-3
artefacts, and finalize itself (exit 5, nothing changed); `compare` stays open
after finalize because the summary itself suggests `compare --seeds 3` to
measure seed variance: when it trains an arm it reopens the run, and the next
finalize rewrites the summary.
Every refusal is one line naming the phase to run first, raised before the
phase takes the lock or writes anything, so the run dir is left unchanged.
"""

from __future__ import annotations

from typing import Literal

from ..errors import PhaseOrderError
from ..rundir import RunDir
from .context import RunContext
from .phase4_state import missing_phase4_arms, reopen_advice, trained_seeds
from .signal import signal_state

Phase = Literal["introspect", "baseline", "iterate", "compare", "finalize"]

NEEDS_BASELINE = ("iterate", "compare", "finalize")
REFUSED_WHEN_CLOSED = ("introspect", "baseline", "iterate")


def baseline_done(rd: RunDir) -> bool:
    """iter_0 is scored: its eval_summary.json exists, or metrics.json holds its record."""
    return rd.iter(0).eval_summary.is_file() or rd.read_metrics().get("iter_0") is not None


def _phase4_missing(rd: RunDir, cfg) -> bool:
    """A closed run lacks Phase 4 arms (compare --seeds N stopped before it reopened the run): finalize
    then has work, the partial summary that reopens the run (exit 6), so it is not refused."""
    return bool(missing_phase4_arms(rd, cfg))


def require_phase_order(ctx: RunContext, phase: Phase) -> None:
    """Raise PhaseOrderError (exit 5) when `phase` may not run on this run dir now.

    Phases call it twice: before the lock with a context of their own (a refusal then leaves the
    run dir untouched, not even a lock file) and again under the lock with the context they act on
    (another process may have moved the run on in between)."""
    rd, cfg = ctx.rd, ctx.cfg
    root = rd.root
    if phase in REFUSED_WHEN_CLOSED and cfg.end_ts is not None:
        raise PhaseOrderError(
            f"{rd.run_json}: the run is closed (finalized; it ended: {cfg.ended_as()}); `{phase}` would change a "
            f"finished run; start a new run with `selfimprove bootstrap {cfg.dataset} --init-from {root}` to start "
            f"from its iter_0 checkpoint (or without --init-from to start afresh)"
        )
    if phase == "finalize" and cfg.finalized() and not _phase4_missing(rd, cfg):
        raise PhaseOrderError(
            f"{rd.run_json}: the run is already finalized (it ended: {cfg.ended_as()}); nothing changed; its summary "
            f"is the '## Final summary' of {rd.scratchpad}; {reopen_advice(rd, trained_seeds(rd.read_metrics()))}"
        )
    if phase == "finalize" and cfg.ended_as() == "aborted":
        return  # an aborted run is summarised with whatever it has
    if phase == "baseline" and not rd.hub_env_json.is_file():
        raise PhaseOrderError(
            f"{rd.hub_env_json}: missing; `baseline` needs introspect first: run `selfimprove introspect --run-dir {root}`"
        )
    if phase in NEEDS_BASELINE and not baseline_done(rd):
        first = "introspect" if not rd.hub_env_json.is_file() else "baseline"
        raise PhaseOrderError(
            f"{rd.iter(0).eval_summary}: missing; `{phase}` needs iter_0 first: run "
            f"`selfimprove {first} --run-dir {root}`" + (" then baseline" if first == "introspect" else "")
        )
    if phase == "compare" and cfg.status == "running":
        if signal_state(cfg.learning_signal) == "none":  # iterate refuses too (exit 4): name the way out, no loop
            raise PhaseOrderError(
                f"{rd.run_json}: status is still 'running' and Phase 3 never started: baseline stopped because iter_0 "
                f"gets no reward signal (learning_signal); Phase 4 compares iterations, so there is nothing to compare: "
                f"start a new run with a stronger student or another env, or on request only "
                f"`selfimprove baseline --run-dir {root} --allow-no-signal` (then nothing is a result)"
            )
        raise PhaseOrderError(
            f"{rd.run_json}: status is still 'running'; Phase 4 starts after Phase 3 ends "
            f"(re-run `selfimprove iterate --run-dir {root}` until the budget or max_iters gate fires)"
        )
