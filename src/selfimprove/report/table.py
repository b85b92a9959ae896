"""The summary table of a run, as the terminal shows it (finalize, run, status), and the
one-line renderings of its tests that the scratchpad summary reuses."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text


def seeds_text(seeds: list[int | None]) -> str:
    """An arm's training seeds for a table cell: "0", "1,3,5", "1,3,...,19" beyond four seeds; "-" for a
    seed not recorded (an older run dir, or a config without one: the engine's default)."""
    shown = ["-" if s is None else str(s) for s in seeds]
    return ",".join(shown if len(shown) <= 4 else [shown[0], shown[1], "...", shown[-1]])


def verdict_lines(table: dict) -> list[str]:
    """The summary's opening lines: did the targeted data beat equal compute (the sentence, then the
    figures), and which model to use and why. Empty when the run has no Run A (no Phase 4)."""
    v = table.get("verdict")
    if not v:
        return []
    return [f"{v['sentence']}: {v['figures']}", v["use_line"]]


def _side(mean: float, sd: float | None, n: int, fixed: bool) -> str:
    if fixed:
        return f"{mean:.3f} (fixed checkpoint)"
    if sd is None:
        return f"{mean:.3f} (1 seed)"
    return f"{mean:.3f} ± {sd:.3f} ({n} seeds)"


def seed_test_lines(tests: list[dict]) -> list[str]:
    """One line per seed-aware test that ran: both sides as mean ± sd (n seeds), n examples, delta, CI, t, df,
    p, verdict. The pairs with no test (one seed on a side, or every seed scored alike) share one line that
    names them and why, instead of a line each that says no test ran."""
    lines, untested = [], []
    for c in tests:
        head = f"{c['a']} vs {c['b']}"
        if c.get("test") is None or c["p"] is None:
            untested.append((head, c.get("note") or "no test"))
            continue
        sides = (f"{_side(c['mean_a'], c['sd_a'], c['n_a'], False)} vs "
                 f"{_side(c['mean_b'], c['sd_b'], c['n_b'], c['test'] == 'one-sample')} "
                 f"on {c['n_examples']} shared eval examples, delta {c['delta']:+.3f}")
        lo, hi = c["ci95"]
        name = "Welch t-test" if c["test"] == "welch" else "one-sample t-test"
        lines.append(f"{head}: {sides} [95% CI {lo:+.3f}, {hi:+.3f}], {name} t={c['t']:.2f}, df={c['df']:.1f}, "
                     f"p={c['p']:.3g} -> {c['verdict']}")
    if untested:
        by_why: dict[str, list[str]] = {}
        for head, why in untested:
            by_why.setdefault(why, []).append(head)
        lines += [f"not tested ({why}): {', '.join(heads)}" for why, heads in by_why.items()]
    return lines


def comparison_lines(comparisons: list[dict]) -> list[str]:
    """One line per paired McNemar + bootstrap comparison of two checkpoints."""
    lines = []
    for c in comparisons:
        if c.get("mcnemar_p") is None:
            lines.append(f"{c['a']} vs {c['b']}: no shared eval examples")
            continue
        lo, hi = c["reward_diff_ci95"]
        lines.append(
            f"{c['a']} vs {c['b']}: acc {c['acc_a']:.3f} vs {c['acc_b']:.3f} (delta {c['delta']:+.3f}, "
            f"n={c['n_paired']}, discordant {c['b_only_a']}/{c['c_only_b']}, p={c['mcnemar_p']:.3g}) "
            f"reward diff {c['reward_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] -> {c['verdict']}"
        )
    return lines


def recommendation_line(table: dict) -> str | None:
    """The closing line: which model to use, how sure, and where its checkpoint is."""
    rec = table.get("recommendation")
    if not rec:
        return None
    if rec["status"] == "none":
        return rec["text"]
    return f"recommended model ({rec['status']}): {rec['text']} -> {rec['checkpoint']}"


def _measured_on(rows: list[dict]) -> str:
    """What the figures were measured on: split(s), eval example counts, training seeds."""
    splits = sorted({r["eval_split"] for r in rows})
    sizes = sorted({r["n_eval"] for r in rows})
    seeds = sorted({r["n_seeds"] for r in rows})
    n = f"n_eval={sizes[0]} per arm" if len(sizes) == 1 else f"n_eval {'/'.join(map(str, sizes))} (see column)"
    s = "1 training seed per arm" if seeds == [1] else f"{'/'.join(map(str, seeds))} training seeds per arm (see column)"
    return f"split {'/'.join(splits)}, {n}, {s}"


def teacher_tokens_line(tokens: dict[str, int]) -> str | None:
    """'LLM teacher tokens (prompt + completion, paid requests only): iter_1 5120, iter_2 4800; total 9920',
    from run.json teacher_tokens; None when no LLM teacher ran."""
    if not tokens:
        return None
    per_iter = sorted(tokens.items(), key=lambda kv: int(kv[0].split("_")[-1]) if kv[0].split("_")[-1].isdigit() else 0)
    return ("LLM teacher tokens (prompt + completion, paid requests only): "
            + ", ".join(f"{arm} {n}" for arm, n in per_iter) + f"; total {sum(tokens.values())}")


def summary_renderable(table: dict) -> Group:
    """The verdict first (did the targeted data beat equal compute; which model to use), then one row
    per arm (rows, eval_acc mean ± sd over seeds, training seeds, 95% CI, n, checkpoint), best marked;
    then the seed-aware tests, the paired tests per checkpoint, caveats."""
    rows = table["rows"]
    title = "eval accuracy on the real environment" + (f" ({_measured_on(rows)})" if rows else "")
    t = Table(title=title, title_justify="left")
    for col, kw in (("run", {}), ("rows", {"justify": "right"}), ("eval_acc", {"justify": "right"}),
                    ("± sd", {"justify": "right"}), ("seed ids", {"justify": "right"}), ("95% CI", {}),
                    ("n_eval", {"justify": "right"}), ("ckpt (in run dir)", {"overflow": "fold"})):
        t.add_column(col, **kw)
    for r in rows:
        lo, hi = r["acc_ci95"]
        label = r["label"] + ("  <- BEST_ITER" if r["best"] else "")
        style = "bold green" if r["best"] else None
        sd = f"{r['eval_acc_sd']:.3f}" if r.get("eval_acc_sd") is not None else "-"
        ckpt = str(r.get("checkpoint_rel") or r["checkpoint"] or "")
        if r.get("n_seeds", 1) > 1:
            ckpt += f" (seed 0 of {r['n_seeds']})"
        seeds = seeds_text(r.get("seeds") or [None])
        t.add_row(label, r["rows"], f"{r['eval_acc']:.3f}", sd, seeds, f"[{lo:.3f}, {hi:.3f}]", str(r["n_eval"]), ckpt,
                  style=style)
    parts: list = [t]
    if verdict := verdict_lines(table):  # the answer before the figures it rests on
        parts.insert(0, Text("\n".join(verdict), style="bold"))
    if table.get("no_signal"):  # never let a run without a learning signal read like a result
        parts.insert(0, Text(f"NOT A RESULT: {table['no_signal']}", style="bold red"))
    if table.get("accuracy_rule"):
        parts.append(Text("note: " + table["accuracy_rule"], style="dim"))
    if tokens := teacher_tokens_line(table.get("teacher_tokens") or {}):
        parts.append(Text(tokens, style="dim"))
    if rows:
        parts.append(Text("95% CI: Wilson over eval examples for a one-seed arm; t interval of the mean over seeds "
                          "for an arm with several seeds. seeds: each arm's training seeds; run_a and run_c share "
                          "theirs, none of them an iteration's.", style="dim"))
    if table.get("seed_tests"):
        lines = ["seed-aware tests (per-seed eval accuracy on the examples all runs share; two-sided Welch t-test "
                 "between arms, one-sample t-test against iter_0; verdicts at p < 0.05):"]
        lines += [f"  {line}" for line in seed_test_lines(table["seed_tests"])]
        parts.append(Text("\n".join(lines)))
    if table.get("comparisons"):
        lines = ["paired comparisons per checkpoint (same eval examples; exact McNemar on correctness, bootstrap CI "
                 "on reward; eval-sample noise only):"]
        lines += [f"  {line}" for line in comparison_lines(table["comparisons"])]
        parts.append(Text("\n".join(lines)))
    if table.get("missing_arms"):  # finalize: the summary is partial until these are recovered
        lines = ["INCOMPLETE: Phase 4 arm(s) missing from this table, so it is not the final summary:"]
        lines += [f"  {m['arm']}: {m['why']}; recover with `{m['fix']}`, then finalize again" for m in table["missing_arms"]]
        parts.append(Text("\n".join(lines), style="bold yellow"))
    elif table.get("phase4_errors"):
        lines = ["Phase 4 arms that failed (not in the table; re-run `selfimprove compare` to retry them):"]
        lines += [f"  {e['arm']}: {e['error']}" for e in table["phase4_errors"]]
        parts.append(Text("\n".join(lines), style="yellow"))
    if table.get("seed_caveat"):
        parts.append(Text("note: " + table["seed_caveat"], style="dim"))
    if table.get("caveat"):
        parts.append(Text("note: " + table["caveat"], style="dim"))
    return Group(*parts)
