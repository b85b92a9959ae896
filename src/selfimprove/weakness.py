"""Weakness statistics: how often the student solves each train prompt, and each kind of prompt, over a run.

The teacher's most useful fact is not "which rollouts failed last step" but "which structures
does the student solve rarely". GRPO learns only from groups whose rollouts disagree, so:

- a structure solved in a few % of its rollouts gives almost no signal diluted in the real
  mix, but its rare successes do carry signal once concentrated in the teacher's rows (drill it);
- a structure never solved gives no signal however many rows are written: it needs stepping
  stones (easier variants the student sometimes solves);
- a structure solved half the time or more already teaches itself on real data.

This is SwS's definition of a weakness (per-problem accuracy across the RL run, never reaching
50%, with its trend), computed by the tool for every teacher from TRAIN rollouts only.

A rollout counts as solved by the rule the eval uses: its `is_correct` metric where the env
writes one, else reward >= 0.5.

Prompt groups (grouping.py states the rules). By default (`auto`) a prompt's group is the
env's own task/category field when its rows carry one, else its template: the text with every
number replaced by one `#` per digit (`347+8` -> `###+#`, `3.25` -> `#.##`) and every quoted
literal by `"…"`, else its answer's type and length. Digit widths are kept on purpose: on the
embedded env `347+8` is hopeless while `47+38` is solved, and a bare `#+#` would average the
two into a harmless-looking rate. A rule whose groups are degenerate (one group, or mostly
groups of one prompt: word problems' templates) is not used silently: the next rule is, and
`grouping.note` says so. A teacher's own grouping is `group_of=` (`--group-by FILE.py:FUNC`).

Each group carries its guessing prior (its commonest reference answer's share of its prompts)
and `collapse_suspect`: its solve rate rose over the run but stays within COLLAPSE_MARGIN of that
prior, the mark of a policy drifting onto the commonest answer rather than learning (GRPO did
this on reasoning-gym's letter_counting: sampled pass@1 0.42 -> 0.55, greedy flat at the 0.59 prior).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .grouping import PromptRow, choose_grouping, default_group, guess_priors  # noqa: F401  (default_group: re-exported)
from .stats import wilson_interval

# Class thresholds, on the solve rate of the later half of the run (the student every
# iteration starts from is iter_0's final checkpoint, so its late behaviour is what counts).
RARE_BELOW = 0.05  # at 16 rollouts per prompt, p < 0.05 leaves most groups all-wrong: no GRPO signal in the real mix
SOLVED_FROM = 0.5  # SwS's line: from here on, real-data groups carry plenty of signal (RL on real data teaches it)
COLLAPSE_MARGIN = 0.05  # a rising rate no further than this above the guessing prior may be guessing, not skill
MIN_LATE_ROLLOUTS = 16  # fewer late rollouts than one GRPO group: classify on the whole window instead
CLASSES = ("never", "rare", "learning", "solved")
CLASS_MEANING = {
    "never": "no solved rollout: no GRPO signal however many rows; write stepping stones it can sometimes solve",
    "rare": f"solved in under {RARE_BELOW:.0%} of rollouts: drill it with most of the rows",
    "learning": f"solved in {RARE_BELOW:.0%}-{SOLVED_FROM:.0%}: some rows",
    "solved": f"solved in {SOLVED_FROM:.0%} or more: none (real data teaches it)",
}

@dataclass(frozen=True)
class Rollout:
    """What the statistics need of one TRAIN rollout (completions are not kept)."""

    step: int
    question: str
    solved: bool
    truncated: bool
    example_id: int | str | None = None
    task: str | None = None  # the env's task/category label of the row (grouping.task_label of its info)
    answer: str | None = None  # the row's reference answer (guessing priors, the `answer` grouping)


class _Tally:
    __slots__ = ("n", "solved", "truncated", "early_n", "early_solved", "late_n", "late_solved", "steps")

    def __init__(self) -> None:
        self.n = self.solved = self.truncated = 0
        self.early_n = self.early_solved = self.late_n = self.late_solved = 0
        self.steps: set[int] = set()

    def add(self, r: Rollout, late: bool) -> None:
        self.n += 1
        self.solved += r.solved
        self.truncated += r.truncated
        self.steps.add(r.step)
        if late:
            self.late_n += 1
            self.late_solved += r.solved
        else:
            self.early_n += 1
            self.early_solved += r.solved

    def figures(self) -> dict:
        rate = self.solved / self.n
        early = self.early_solved / self.early_n if self.early_n else None
        late = self.late_solved / self.late_n if self.late_n else None
        lo, hi = wilson_interval(self.solved, self.n)
        return {
            "rollouts": self.n,
            "solved": self.solved,
            "solve_rate": round(rate, 4),
            "solve_rate_ci95": [round(lo, 4), round(hi, 4)],
            "early_rate": None if early is None else round(early, 4),
            "late_rate": None if late is None else round(late, 4),
            "trend": None if early is None or late is None else round(late - early, 4),
            "truncated_share": round(self.truncated / self.n, 4),
            "steps_seen": len(self.steps),
        }


def classify(fig: dict) -> tuple[str, str]:
    """(class, basis): on the late half when it holds a GRPO group's worth of rollouts, else on all of them."""
    if fig["late_rate"] is not None and fig.get("_late_n", 0) >= MIN_LATE_ROLLOUTS:
        rate, solved, basis = fig["late_rate"], fig["_late_solved"], "late"
    else:
        rate, solved, basis = fig["solve_rate"], fig["solved"], "all"
    if solved == 0:
        return "never", basis
    if rate < RARE_BELOW:
        return "rare", basis
    return ("learning" if rate < SOLVED_FROM else "solved"), basis


def weakness_stats(rollouts: Iterable[Rollout], *, group_of: Callable[[str], str] | None = None,
                   grouping: str = "auto", source: dict | None = None) -> dict:
    """Per-prompt and per-group solve statistics of a run's TRAIN rollouts (a JSON-ready dict).

    `grouping` names a rule of grouping.py (auto, task, template, answer); with `group_of` (a
    function of the prompt text) it is that function's name. The window is every step given;
    early = its first half of steps, late = the second half.
    """
    rows = list(rollouts)
    distinct = list({r.question: PromptRow(r.question, r.task, r.answer) for r in rows}.values())
    chosen = choose_grouping(distinct, grouping, fn=group_of)
    priors = guess_priors(distinct, chosen)
    steps = sorted({r.step for r in rows})
    split_at = steps[len(steps) // 2] if len(steps) > 1 else math.inf  # late = the second half of the steps
    prompts: dict[str, _Tally] = {}
    prompt_ids: dict[str, int | str | None] = {}
    groups: dict[str, _Tally] = {}
    group_prompts: dict[str, set[str]] = {}
    group_of_prompt: dict[str, str] = {}
    for r in rows:
        late = r.step >= split_at
        prompts.setdefault(r.question, _Tally()).add(r, late)
        prompt_ids.setdefault(r.question, r.example_id)
        g = group_of_prompt.get(r.question)
        if g is None:
            g = group_of_prompt[r.question] = chosen.label(r.question)
        groups.setdefault(g, _Tally()).add(r, late)
        group_prompts.setdefault(g, set()).add(r.question)

    def with_class(t: _Tally) -> dict:
        fig = {**t.figures(), "_late_n": t.late_n, "_late_solved": t.late_solved}
        cls, basis = classify(fig)
        fig.pop("_late_n"), fig.pop("_late_solved")
        return {**fig, "class": cls, "class_basis": basis}

    group_rows = []
    for g, t in groups.items():
        fig = with_class(t)
        prior = priors.get(g, {}).get("guess_prior")
        suspect = (prior is not None and fig["trend"] is not None and fig["trend"] > 0
                   and fig["late_rate"] is not None and fig["late_rate"] <= prior + COLLAPSE_MARGIN)
        group_rows.append({"group": g, "prompts": len(group_prompts[g]), **fig, "guess_prior": prior,
                           "commonest_answer": priors.get(g, {}).get("commonest_answer"),
                           "collapse_suspect": bool(suspect)})
    order = {c: i for i, c in enumerate(CLASSES)}
    group_rows.sort(key=lambda x: (order[x["class"]], x["solve_rate"], -x["rollouts"], x["group"]))
    prompt_rows = [{"question": q, "example_id": prompt_ids[q], "group": group_of_prompt[q], **with_class(t)}
                   for q, t in prompts.items()]
    prompt_rows.sort(key=lambda x: (x["solve_rate"], -x["rollouts"], x["question"]))
    by_class = {c: {"groups": 0, "prompts": 0, "rollouts": 0} for c in CLASSES}
    for x in group_rows:
        by_class[x["class"]]["groups"] += 1
        by_class[x["class"]]["prompts"] += x["prompts"]
        by_class[x["class"]]["rollouts"] += x["rollouts"]
    singletons = sum(1 for x in group_rows if x["prompts"] == 1)
    return {
        "source": source or {},
        "window": {"steps": [steps[0], steps[-1]] if steps else [], "n_steps": len(steps),
                   "late_from_step": None if split_at == math.inf else split_at, "rollouts": len(rows)},
        "solved_rule": "metrics.is_correct where the env writes it, else reward >= 0.5",
        "thresholds": {"rare_below": RARE_BELOW, "solved_from": SOLVED_FROM, "min_late_rollouts": MIN_LATE_ROLLOUTS,
                       "collapse_margin": COLLAPSE_MARGIN, "meaning": CLASS_MEANING,
                       "collapse_rule": ("collapse_suspect: the group's solve rate rose (trend > 0) but its late rate "
                                         f"is at most its guessing prior + {COLLAPSE_MARGIN}: possibly the commonest "
                                         "answer, not skill")},
        "grouping": {**chosen.record(), "groups": len(group_rows), "prompts": len(prompt_rows),
                     "singleton_share": round(singletons / len(group_rows), 4) if group_rows else None},
        "by_class": by_class,
        "groups": group_rows,
        "prompts": prompt_rows,
    }


def prompt_index(stats: dict) -> dict[str, dict]:
    """question -> its prompt record (with `group`), and the group's record under `group_stats`."""
    groups = {g["group"]: g for g in stats.get("groups", [])}
    return {p["question"]: {**p, "group_stats": groups.get(p["group"])} for p in stats.get("prompts", [])}
