"""The summary table of a run, as the terminal shows it (finalize, run, status)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text


def summary_renderable(table: dict) -> Group:
    """One row per arm (rows, eval_acc with Wilson 95% CI, n, checkpoint), best marked, then paired tests."""
    t = Table(title="eval accuracy on the real environment", title_justify="left")
    for col, kw in (("run", {}), ("rows", {"justify": "right"}), ("eval_acc", {"justify": "right"}),
                    ("95% CI", {}), ("n_eval", {"justify": "right"}), ("ckpt (in run dir)", {"overflow": "fold"})):
        t.add_column(col, **kw)
    for r in table["rows"]:
        lo, hi = r["acc_ci95"]
        label = r["label"] + ("  <- BEST_ITER" if r["best"] else "")
        style = "bold green" if r["best"] else None
        t.add_row(label, r["rows"], f"{r['eval_acc']:.3f}", f"[{lo:.3f}, {hi:.3f}]", str(r["n_eval"]),
                  str(r.get("checkpoint_rel") or r["checkpoint"] or ""), style=style)
    parts: list = [t]
    if table.get("comparisons"):
        lines = ["paired comparisons (same eval examples; exact McNemar on correctness, bootstrap CI on reward):"]
        for c in table["comparisons"]:
            if c.get("mcnemar_p") is None:
                lines.append(f"  {c['a']} vs {c['b']}: no shared eval examples")
                continue
            lo, hi = c["reward_diff_ci95"]
            lines.append(
                f"  {c['a']} vs {c['b']}: acc {c['acc_a']:.3f} vs {c['acc_b']:.3f} (delta {c['delta']:+.3f}, "
                f"n={c['n_paired']}, discordant {c['b_only_a']}/{c['c_only_b']}, p={c['mcnemar_p']:.3g}) "
                f"reward diff {c['reward_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] -> {c['verdict']}"
            )
        parts.append(Text("\n".join(lines)))
    if table.get("caveat"):
        parts.append(Text("note: " + table["caveat"], style="dim"))
    return Group(*parts)
