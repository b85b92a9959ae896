"""The eval-accuracy plot: one point per arm with its 95% interval.

Iterations (iter_0, iter_1, ...) run left to right; controls (run_a, run_b,
run_c) sit apart on the right in another colour, so nobody reads them as
iteration N+1. A dashed line marks iter_0, the reference every arm beats or not.
An arm trained with several training seeds is drawn as its mean over seeds
with the t interval of that mean, and each seed as a small grey dot; a
one-seed arm as its accuracy with the Wilson interval. The axis labels say
what was measured: eval examples per arm, split, training seeds per arm.

matplotlib is an optional extra (`pip install selfimprove[plots]`), imported
inside the function. We draw on a bare Figure with the Agg canvas instead of
pyplot: no global backend switch, no figure registry to leak in long runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from ..errors import SelfImproveError
from ..stats import wilson_interval

ITER_COLOR = "#1f77b4"  # blue: the iteration sequence
CONTROL_COLOR = "#d95f02"  # orange: Phase 4 controls
CONTROL_ORDER = ["run_a", "run_b", "run_c"]


def _iter_index(arm: dict) -> int | None:
    if arm.get("iter") is not None:
        return int(arm["iter"])
    m = re.fullmatch(r"iter_(\d+)", str(arm["arm"]))
    return int(m.group(1)) if m else None


def _ci(arm: dict) -> tuple[float, float]:
    ci = arm.get("acc_ci95")
    if ci is not None:
        return (float(ci[0]), float(ci[1]))
    n = int(arm.get("n_eval") or 0)  # older records: recompute rather than draw no bar
    return wilson_interval(min(arm["eval_acc"] * n, n), n)


def _n_seeds(arm: dict) -> int:
    return int(arm.get("n_seeds") or len(arm.get("members") or []) or 1)


def _order(arms: list[dict]) -> tuple[list[dict], list[dict]]:
    """(iterations by index, controls in run_a/run_b/run_c order then by name)."""
    iters = sorted((a for a in arms if _iter_index(a) is not None), key=_iter_index)
    rank = {name: i for i, name in enumerate(CONTROL_ORDER)}
    controls = sorted((a for a in arms if _iter_index(a) is None),
                      key=lambda a: (rank.get(a["arm"], len(rank)), str(a["arm"])))
    return iters, controls


def plot_eval_acc(arms: list[dict], path: Path, title: str) -> Path:
    """Write a PNG of eval accuracy per arm to `path` (atomically) and return `path`.

    `arms` are IterRecord.model_dump() dicts (arm, eval_acc, acc_ci95, n_eval,
    eval_split; iter optional) or finalize's table rows, which add n_seeds and
    members (one dict with eval_acc per seed); an optional "best": True marks the chosen arm.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise SelfImproveError(
            f"plotting needs matplotlib ({e}); pip install selfimprove[plots]"
        ) from None
    if not arms:
        raise SelfImproveError(f"nothing to plot for {path}: no finished arm")

    iters, controls = _order(arms)
    # A one-slot gap between the groups keeps controls visually apart.
    xs = list(range(len(iters))) + [len(iters) + 1 + i for i in range(len(controls))]
    ordered = iters + controls
    sizes = {(a.get("n_eval"), a.get("eval_split", "eval")) for a in ordered}
    same_eval = len(sizes) == 1

    fig = Figure(figsize=(max(6.0, 1.0 * len(xs) + 2.5), 4.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for x, arm in zip(xs, ordered):
        acc = float(arm["eval_acc"])
        lo, hi = _ci(arm)
        color = ITER_COLOR if arm in iters else CONTROL_COLOR
        best = bool(arm.get("best"))
        ax.errorbar(x, acc, yerr=[[max(0.0, acc - lo)], [max(0.0, hi - acc)]], fmt="*" if best else "o",
                    color=color, ecolor=color, capsize=5, markersize=16 if best else 7,
                    markeredgecolor="black" if best else color, zorder=3)
        ax.annotate(f"{acc:.3f}" + ("  best" if best else ""), (x, hi), textcoords="offset points",
                    xytext=(0, 5), ha="center", fontsize=8, fontweight="bold" if best else "normal")
        seeds = [float(m["eval_acc"]) for m in arm.get("members") or []]
        if len(seeds) > 1:  # each seed beside the mean, so the spread is seen, not only summarised
            ax.plot([x + 0.18] * len(seeds), seeds, ".", color="grey", markersize=5, zorder=2)
    handles, labels = [], []
    if iters and iters[0]["arm"] == "iter_0":
        handles.append(ax.axhline(float(iters[0]["eval_acc"]), color="grey", linestyle="--", linewidth=0.8,
                                  zorder=1))
        labels.append("iter_0 (reference)")
    if iters and controls:
        ax.axvline(len(iters), color="lightgrey", linestyle=":", linewidth=1)
    ticks = [(a["arm"] if same_eval else f"{a['arm']}\nn={a.get('n_eval')} {a.get('eval_split', 'eval')}")
             + (f"\n{_n_seeds(a)} seeds" if _n_seeds(a) > 1 else "") for a in ordered]
    ax.set_xticks(xs, ticks)
    ax.set_xlim(-0.7, xs[-1] + 0.7)
    top = max(_ci(a)[1] for a in ordered)
    bottom = min(_ci(a)[0] for a in ordered)
    ax.set_ylim(max(0.0, bottom - 0.05), min(1.0, top + 0.08) if top < 0.92 else 1.05)
    several = any(_n_seeds(a) > 1 for a in ordered)
    ax.set_ylabel("eval accuracy (95% CI)")
    n, split = next(iter(sizes))
    measured = f"n_eval={n} per arm, split={split}" if same_eval else "n_eval and split differ per arm"
    seeds_text = ("training seeds under each name, 1 where none (grey dots: each seed)\n"
                  "CI: Wilson over examples (1 seed), t interval of the mean (several seeds)" if several
                  else "1 training seed per arm: seed variance unmeasured\nCI: Wilson over eval examples")
    ax.set_xlabel(f"{measured}; {seeds_text}", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    for group, color, label in [(iters, ITER_COLOR, "iterations"), (controls, CONTROL_COLOR, "controls")]:
        if group:
            handles.append(ax.plot([], [], "o", color=color)[0])
            labels.append(label)
    ax.legend(handles, labels, loc="best", fontsize=8, frameon=False)
    ax.set_title(title)
    fig.tight_layout()

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # readers see the old plot or the new one, never half a PNG
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
