"""Phase 5, `finalize`: close the run and say honestly what it found.

Writes status/end_ts/total_duration_s, the final scratchpad summary, a PNG of
eval accuracy per arm, optional wandb runs, and returns the table (one row per
arm with its Wilson interval) plus paired comparisons. Every comparison pairs
arms on the eval examples they share (exact McNemar for correctness, paired
bootstrap for mean reward) and says "no detectable difference" when that is
what the data says.

A caveat printed with every table: BEST_ITER was chosen as the maximum of many
iterations on the same eval examples, which inflates its figure (winner's
curse). The Phase 4 arms, evaluated on the full split after the choice, are
the honest figures; Run A vs Run C is the equal-compute test of the data.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from datetime import datetime, timezone
from typing import Any

from ..models import EvalSummary
from ..rundir import RunDir
from ..stats import compare_arms
from .compare import ARM_LABELS, pick_best

SELECTION_CAVEAT = (
    "BEST_ITER is the maximum over {k} iteration(s) scored on the same {n} eval examples, so its own figure is "
    "optimistic; the Phase 4 arms (full eval split, run after the choice) are the honest figures, and "
    "run_a vs run_c is the equal-compute test of the targeted data."
)


def _summary(rd: RunDir, arm: str) -> EvalSummary | None:
    if arm.startswith("iter_"):
        path_arm = rd.iter(int(arm.split("_")[1]))
    else:
        path_arm = rd.control(arm)
    return rd.read_eval_summary(path_arm) if path_arm.eval_summary.is_file() else None


def _relative(path: str | None, rd: RunDir) -> str | None:
    """A checkpoint path relative to the run dir, for tables a person reads."""
    if not path:
        return None
    try:
        return str(Path(path).resolve().relative_to(rd.root))
    except ValueError:
        return path


def build_table(rd: RunDir) -> dict[str, Any]:
    metrics = rd.read_metrics()
    best = pick_best(metrics.iters)
    best_arm = f"iter_{best.iter}" if best else None
    order = sorted((r for r in metrics.iters if r.iter is not None), key=lambda r: r.iter)
    order += [r for key in ("run_a", "run_b", "run_c") if (r := metrics.get(key))]
    rows = []
    for r in order:
        label = ARM_LABELS.get(r.arm, r.arm + (" (real)" if r.arm == "iter_0" else ""))
        if r.arm == "run_b":
            data = f"real+{r.rows}" if r.rows else "real"
        else:
            data = str(r.rows) if r.rows else "real"
        rows.append({
            "arm": r.arm, "label": label, "rows": data, "eval_acc": r.eval_acc, "acc_ci95": list(r.acc_ci95),
            "n_eval": r.n_eval, "eval_reward_mean": r.eval_reward_mean, "checkpoint": r.checkpoint,
            "final_step": r.final_step, "best": r.arm == best_arm, "eval_split": r.eval_split,
            "checkpoint_rel": _relative(r.checkpoint, rd),
        })
    pairs = [(best_arm, "iter_0"), (best_arm, "run_c"), ("run_a", "run_c"), ("run_a", best_arm), ("run_b", "run_c")]
    comparisons = []
    for a, b in pairs:
        if not a or not b:
            continue
        sa, sb = _summary(rd, a), _summary(rd, b)
        if sa and sb:
            comparisons.append(compare_arms(sa, sb))
    # The recommendation compares like with like: among the arms scored on the
    # most eval examples (the full split after Phase 4), the highest eval_acc.
    recommended = None
    if rows:
        widest = max(r["n_eval"] for r in rows)
        recommended = max((r for r in rows if r["n_eval"] == widest), key=lambda r: (r["eval_acc"], r["eval_reward_mean"]))["arm"]
    n_iters = len([r for r in metrics.iters if r.iter and r.iter >= 1])
    caveat = SELECTION_CAVEAT.format(k=n_iters, n=best.n_eval if best else 0) if best else None
    return {"rows": rows, "best": best_arm, "recommended": recommended, "comparisons": comparisons, "caveat": caveat}


def _final_scratchpad(rd: RunDir, table: dict) -> str:
    ts = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"## Final summary — {ts}", "", "| arm | rows | eval_acc | 95% CI | n | checkpoint (in the run dir) |", "|---|---|---|---|---|---|"]
    for r in table["rows"]:
        mark = " **<- best**" if r["best"] else ""
        lines.append(f"| {r['label']}{mark} | {r['rows']} | {r['eval_acc']:.3f} | [{r['acc_ci95'][0]:.3f}, {r['acc_ci95'][1]:.3f}] | {r['n_eval']} | `{r['checkpoint_rel']}` |")
    lines.append("")
    for c in table["comparisons"]:
        p = c.get("mcnemar_p")
        lines.append(f"- {c['a']} vs {c['b']}: " + (f"delta {c['delta']:+.3f} on {c['n_paired']} paired examples, McNemar p={p:.3g} -> {c['verdict']}" if p is not None else "no shared examples"))
    if table["best"]:
        it = int(table["best"].split("_")[1])
        report = rd.iter(it).dir / "weakness_report.md"
        lines.append(f"\nWinning iteration: {table['best']}; its buckets are in `{report}` (section 2 of its entry above).")
    if table["caveat"]:
        lines.append(f"\nCaveat: {table['caveat']}")
    lines.append("\nWhat worked / what didn't / open questions: _teacher: fill in from the iteration entries above._")
    return "\n".join(lines) + "\n"


def finalize(rd: RunDir, *, plot: bool = True, wandb: bool = True) -> dict[str, Any]:
    rd.require()
    with rd.lock("finalize"):
        cfg = rd.read_run()
        if cfg.status == "running":
            cfg.status, cfg.reason = "completed", cfg.reason or "finalized"
        if cfg.end_ts is None:  # re-running finalize re-prints; it does not move the end
            cfg.end_ts = time.time()
            cfg.total_duration_s = round(cfg.end_ts - cfg.start_ts, 1)
        rd.write_run(cfg)
        table = build_table(rd)
        pad = rd.scratchpad.read_text(encoding="utf-8")
        if "## Final summary" not in pad:
            rd.append_scratchpad(_final_scratchpad(rd, table))
        notes = []
        if plot and table["rows"]:
            try:
                from ..report.plot import plot_eval_acc

                plot_eval_acc(table["rows"], rd.plot_png, f"{cfg.dataset}: eval accuracy per arm ({cfg.model})")
            except Exception as e:  # a missing matplotlib must not lose the summary
                notes.append(f"plot skipped: {str(e).splitlines()[0]}")
        if wandb and cfg.wandb_project and table["rows"]:
            from ..report.wandb_log import log_arms_to_wandb

            notes.append(log_arms_to_wandb(cfg.wandb_project, cfg.dataset, table["rows"],
                                           json.loads(cfg.model_dump_json()), table["rows"]))
        return {"run_dir": str(rd.root), "status": cfg.status, "reason": cfg.reason, "end_ts": cfg.end_ts,
                "total_duration_s": cfg.total_duration_s, **table,
                "plot": str(rd.plot_png) if rd.plot_png.exists() else None, "notes": notes,
                "phase4_errors": [e.model_dump(mode="json") for e in cfg.phase4_errors]}
