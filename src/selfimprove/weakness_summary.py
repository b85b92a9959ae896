"""The weakness measure as one stable markdown text: what every teacher reads first.

    summary_text(stats["real"], title="real")                 # one source: header, class counts, a row per group
    summary_text(stats["real"], title="real", max_groups=40)  # capped by class order, one line says what is left out

`selfimprove weaknesses` prints it and the LLM teacher's opening request carries it (llm_teacher/
prompt.py), so the agent and the model read the same figures in the same form. It is a table
of the groups only (class, prompts, rollouts, solve rate with its Wilson interval, early and
late rates, trend): about 70 characters a group, where weakness_stats.json spends thousands
on per-prompt records. Rows come in the statistics' own order (class never -> solved, then
solve rate), so a cap drops the solved groups first, and a cap is always stated.
"""

from __future__ import annotations

from .weakness import CLASS_MEANING, CLASSES

COLUMNS = ("class", "group", "prompts", "rollouts", "solve rate [95% CI]", "guess prior", "early", "late", "trend")


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _trend(x: float | None) -> str:
    return "-" if x is None else f"{x + 0.0 if round(x, 2) else 0.0:+.2f}"  # never "-0.00"


def _cell(text: str) -> str:
    """A group label as one table cell: pipes escaped, on one line."""
    return " ".join(str(text).replace("|", "\\|").split())


def group_row(g: dict) -> str:
    lo, hi = g["solve_rate_ci95"]
    flag = " COLLAPSE?" if g.get("collapse_suspect") else ""  # rising, but no higher than guessing the commonest answer
    cells = (g["class"] + flag, f"`{_cell(g['group'])}`", str(g["prompts"]), str(g["rollouts"]),
             f"{g['solve_rate']:.3f} [{lo:.3f}, {hi:.3f}]", _rate(g.get("guess_prior")), _rate(g["early_rate"]),
             _rate(g["late_rate"]), _trend(g["trend"]))
    return "| " + " | ".join(cells) + " |"


def header_lines(stats: dict, title: str) -> list[str]:
    src, w, g = stats.get("source") or {}, stats["window"], stats["grouping"]
    steps = f"{w['steps'][0]}-{w['steps'][-1]}" if w.get("steps") else "-"
    share = g.get("singleton_share")
    counts = ", ".join(f"{cls} {c['groups']} groups / {c['prompts']} prompts / {c['rollouts']} rollouts"
                       for cls, c in ((cls, stats["by_class"][cls]) for cls in CLASSES))
    lines = [
        f"### {title}: {src.get('arm', '?')} on {src.get('rows', '?')}",
        f"TRAIN rollouts of steps {steps} (n={w['rollouts']}; early = the first half of the steps, late = from step "
        f"{w.get('late_from_step')}); solved = {stats['solved_rule']}",
        f"grouping {g['name']}" + (f" ({g['rule']})" if g.get("rule") else "") + f": {g['groups']} groups of "
        f"{g['prompts']} prompts; singleton share {'-' if share is None else f'{share:.2f}'} (groups holding one prompt)",
    ]
    if g.get("degenerate"):
        lines.append(f"DEGENERATE GROUPS: {g['degenerate']}; these groups tell little: {g.get('note') or ''}".rstrip())
    elif g.get("note"):
        lines.append(f"grouping fallback: {g['note']}")
    lines.append("guess prior = the share of the group's prompts whose answer is its commonest answer (what always "
                 "answering it scores); COLLAPSE? = the rate rose but stays within "
                 f"{stats.get('thresholds', {}).get('collapse_margin', 0.05)} of that prior: guessing, not skill")
    lines.append(f"class counts: {counts}")
    return lines


def summary_text(stats: dict, title: str, max_groups: int | None = None) -> str:
    """One source's summary (stats = weakness_stats.json's `real` or `previous`), every group unless
    `max_groups` caps them; the cap keeps the first groups in class order and says how many are left out."""
    groups = stats["groups"]
    shown = groups if max_groups is None else groups[:max(0, max_groups)]
    lines = header_lines(stats, title)
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += [group_row(g) for g in shown]
    left = groups[len(shown):]
    if left:
        by_class = ", ".join(f"{cls} {n}" for cls in CLASSES if (n := sum(1 for g in left if g["class"] == cls)))
        lines.append(f"[{len(left)} of {len(groups)} groups not shown ({by_class}), the last in class order; "
                     "`selfimprove weaknesses --json` lists them]")
    return "\n".join(lines)


def class_meaning_lines() -> str:
    """What each class asks of the data (stated once, above the tables)."""
    return "\n".join(f"- {cls}: {CLASS_MEANING[cls]}" for cls in CLASSES)


def sources(weakness: dict | None) -> list[tuple[str, dict]]:
    """(title, stats) of weakness_stats.json's sources present: real, and from iteration 2 previous."""
    if not weakness:
        return []
    return [(name, weakness[name]) for name in ("real", "previous") if isinstance(weakness.get(name), dict)]


def full_summary(weakness: dict | None, max_groups: int | None = None) -> str:
    """Every source of weakness_stats.json, real first: the text `selfimprove weaknesses` prints."""
    parts = [f"## Weakness summary of iter_{weakness.get('iteration', '?')}" if weakness else "## Weakness summary",
             "Classes, on the later half of the run (all steps when it holds < 16 rollouts of the group):",
             class_meaning_lines()]
    parts += [summary_text(stats, title, max_groups) for title, stats in sources(weakness)]
    return "\n\n".join(parts)


def capped_summary(weakness: dict | None, budget: int) -> str:
    """The whole summary when it fits `budget` characters, else the most groups per source that fit
    (one cap for every source), each cap stated."""
    text = full_summary(weakness)
    if len(text) <= budget:
        return text
    lo, hi = 0, max((len(s["groups"]) for _, s in sources(weakness)), default=0)
    while lo < hi:  # the largest cap that fits
        mid = (lo + hi + 1) // 2
        if len(full_summary(weakness, mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return full_summary(weakness, lo)
