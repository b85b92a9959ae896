"""Phase 4's state on disk: the best iteration, the arms Phase 4 needs, and the ones still missing.

Read by compare (what to train), the phase order (may finalize run?), status (what next?)
and finalize (is the summary complete?); it imports none of them, so none of them
imports another through it.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import MAX_SEEDS, IterRecord, Metrics, RunConfig
from ..rundir import RunDir, seed_key, split_seed_key


def pick_best(iters: list[IterRecord]) -> IterRecord | None:
    """Highest eval_acc among iterations >= 1; ties by eval_reward_mean, then the earlier iteration."""
    candidates = [r for r in iters if r.iter is not None and r.iter >= 1]
    if not candidates:
        return None
    return min(candidates, key=lambda r: (-r.eval_acc, -r.eval_reward_mean, r.iter))


def control_in_phase4(rd: RunDir, done: set[str]) -> bool:
    """Run C belongs to this Phase 4: it finished, it started (its dir), or compare has not run at all
    (--control is compare's default; only a compare run with --no-control, which writes best_iter.json
    and no run_c dir, leaves it out)."""
    return "run_c" in done or rd.control("run_c").dir.is_dir() or not rd.best_iter_json.exists()


def phase4_arms(rd: RunDir, cfg: RunConfig, done: set[str]) -> set[str]:
    """The metrics.json keys Phase 4 must finish: Runs A and B, Run C when it belongs (control_in_phase4),
    and with --seeds N the seed replicates of Run A, the best iteration and Run C, so that `status` never
    points at finalize while a replicate is missing (Run C's were left out until Run C itself finished)."""
    control = control_in_phase4(rd, done)
    need = {"run_a", "run_b"} | ({"run_c"} if control else set())
    try:
        best_arm = f"iter_{json.loads(rd.best_iter_json.read_text(encoding='utf-8'))['best_iter']}"
    except (OSError, ValueError, KeyError, TypeError):
        best_arm = None
    for k in range(1, max(1, cfg.seeds)):
        need.add(seed_key("run_a", k))
        need |= {seed_key("run_c", k)} if control else set()
        need |= {seed_key(best_arm, k)} if best_arm else set()
    return need


def phase4_expected(rd: RunDir, cfg: RunConfig) -> bool:
    """Phase 4 belongs in this run's summary: Phase 3 ended by its gates (compare is next), or compare
    has started (best_iter.json). Not for aborted runs, runs still in Phase 3, runs finalized early
    without compare, and runs where no iteration >= 1 finished (there is no best dataset)."""
    if cfg.ended_as() in ("running", "aborted"):
        return False
    if cfg.ended_as() == "completed" and not rd.best_iter_json.exists():
        return False
    return pick_best(rd.read_metrics().iters) is not None


def missing_phase4_arms(rd: RunDir, cfg: RunConfig) -> list[dict[str, Any]]:
    """The Phase 4 arms the summary lacks, in run order: [{"arm", "why", "failed", "fix"}].

    An arm is missing when Phase 4 needs it (Runs A and B, the seed replicates, Run C once it was
    started or logged a failure) and metrics.json has no record of it. `failed` is True when its
    job failed (run.json phase4_errors); the fix then restarts it (`compare --restart`)."""
    if not phase4_expected(rd, cfg):
        return []
    done = {r.arm for r in rd.read_metrics().iters}
    errors = {e.arm: e.error for e in cfg.phase4_errors}
    need = phase4_arms(rd, cfg, done) | set(errors)
    order = {"run_a": 0, "run_b": 1, "run_c": 2}
    out = []
    for arm in sorted(need - done, key=lambda a: (split_seed_key(a)[1], order.get(split_seed_key(a)[0], 3), a)):
        failed = arm in errors
        why = f"its job failed: {errors[arm]}" if failed else "not trained yet (compare did not run, or stopped before it)"
        fix = (f"selfimprove compare --run-dir {rd.root}" + (f" --seeds {cfg.seeds}" if cfg.seeds > 1 else "")
               + (" --restart" if failed else ""))
        out.append({"arm": arm, "why": why, "failed": failed, "fix": fix})
    return out


def trained_seeds(metrics: Metrics) -> int:
    """How many training seeds Phase 4 has already trained (1 + the highest replicate index in metrics.json)."""
    indices = [split_seed_key(r.arm)[1] for r in metrics.iters if r.replicate_of or split_seed_key(r.arm)[1]]
    return 1 + max(indices, default=0)


def reopen_advice(rd: RunDir, have: int) -> str:
    """How to reopen a closed run on purpose: more training seeds (a compare that trains, then finalize)."""
    more = max(3, have + 1)
    if more > MAX_SEEDS:
        return f"it has the most training seeds compare trains ({MAX_SEEDS}): start a new run to measure more"
    return (f"to reopen it on purpose with more training seeds: `selfimprove compare --run-dir {rd.root} "
            f"--seeds {more}`, then `selfimprove finalize --run-dir {rd.root}`")
