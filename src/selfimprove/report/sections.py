"""The report page's drill-down parts (report/page.py lays out the page and renders the rest):
the table of contents, where an open run stands, the overlay of every arm's eval accuracy, one
iteration's collapsed evidence (weakness report, TRAIN failures, generated rows, gate report) and
the eval examples Run A and Run C disagree on.

Collapsed parts are <details>/<summary>: they open without a script (the page has none). Like
the rest of the page, every value goes through `markup.html` / `esc_long`; no f-string builds
markup from a run-dir value.
"""

from __future__ import annotations

from typing import Any

from .flips import RIGHT
from .markup import Html, esc_long, fmt, html, join
from .svg import ARM_COLORS, eval_overlay

# What `selfimprove status`'s phase_reached (phases/status.next_step) means, for a run that is not closed.
PHASE_WORDS = {
    "bootstrap": "bootstrapped only: introspect has not run",
    "introspect": "introspected: the baseline (iter_0) is next or under way",
    "baseline": "the baseline (iter_0) is done: Phase 3 (the iterations) is next or under way",
    # Phase 3 and 4 are several commands each: whether one is done is the next command's to say (below)
    "iterate": "Phase 3 (the iterations) has started",
    "compare": "Phase 4 (compare) has started",
    "aborted": "aborted",
}


def stage_text(progress: dict[str, Any] | None, status: str) -> str:
    """The header's word for a run's state: run.json's status once it ended, else where it stands."""
    if progress is None or progress.get("error") or status != "running":
        return status
    return "in progress: " + PHASE_WORDS.get(progress["phase"], f"phase reached {progress['phase']}")


def toc(entries: list[tuple[str, str]]) -> Html:
    """Links to the page's sections: [(id, title)]."""
    links = join(html("<li><a href=\"#{}\">{}</a></li>", anchor, title) for anchor, title in entries)
    return html("<nav class=\"toc\" id=\"contents\" aria-label=\"contents\"><b>Contents</b><ul>{}</ul></nav>", links)


def contents(data: dict) -> Html:
    """The table of contents: every section's anchor, each iteration's, and the sealed part when it is shown."""
    entries = [("verdict", "Verdict")]
    if data.get("progress") is not None:
        entries.append(("progress", "Where it stands"))
    if data["missing"]:
        entries.append(("missing", "Not in this report yet"))
    entries += [("summary", "Summary table"), ("eval-overlay", "Eval accuracy of every arm"),
                ("curves", "Learning curves"), ("weaknesses", "Weakness groups"), ("iterations", "Iterations")]
    entries += [(f"iter-{it['n']}", f"iter_{it['n']}: weakness report, failures, rows, gates")
                for it in data["iterations"]]
    if data.get("flips") is not None:
        entries.append(("flips", "Eval examples Run A and Run C disagree on (sealed from the teacher)"))
    entries.append(("timeline", "Timeline"))
    return toc(entries)


def progress_box(progress: dict[str, Any] | None) -> Html:
    """An open run: the phase reached, every live job (pid or SLURM id, arm, step, log) and the next command."""
    if progress is None:
        return Html()
    if progress.get("error"):
        return html("<div class=\"missing\" id=\"progress\"><b>Where it stands:</b> not known ({})</div>",
                    progress["error"])
    jobs = []
    for j in progress["jobs"]:
        step = html("step {} of {}", "-" if j.get("step") is None else j["step"], j.get("max_steps"))
        if j.get("kind") == "local":
            jobs.append(html("<li>live job <b>{}</b>: pid {}, {}; log <code>{}</code></li>", j["arm"], j["pid"], step,
                             j["log"]))
        else:
            jobs.append(html("<li>SLURM job {} <b>{}</b>: {}, {}; log <code>{}</code></li>", j.get("job_id"), j["arm"],
                             j.get("state"), step, j.get("log")))
    jobs += [html("<li>{}</li>", note) for note in progress["notes"]]
    return html("<div class=\"missing\" id=\"progress\"><b>Where it stands</b> (as <code>selfimprove status</code> "
                "says it): {}.<ul>{}</ul>Next: <code>{}</code></div>",
                PHASE_WORDS.get(progress["phase"], progress["phase"]),
                join(jobs) if jobs else html("<li>no live training job</li>"), progress["next"])


def _point_text(p: dict) -> str:
    ci = p.get("ci")
    interval = f" [{fmt(ci[0], '.3f')}, {fmt(ci[1], '.3f')}]" if ci else ""
    return f"{fmt(p['acc'], '.3f')}{interval} at step {p['step']} (n={p.get('n')})"


def overlay_section(overlay: dict[str, Any], split: str) -> Html:
    head = html("<h2 id=\"eval-overlay\">Eval accuracy of every arm</h2>")
    if not overlay["arms"]:
        return join([head, html("<p>No arm has been evaluated yet.</p>")])
    arms = [{**a, "color": ARM_COLORS[i % len(ARM_COLORS)]} for i, a in enumerate(overlay["arms"])]
    base = overlay["base"]
    legend = [html("<li><span class=\"swatch\" style=\"background:{}\"></span>{}: {}</li>", a["color"], a["label"],
                   "; ".join(_point_text(p) for p in a["points"])) for a in arms]
    if base:
        legend.insert(0, html("<li><span class=\"swatch base\"></span>base model (before training): {}; from {}</li>",
                              _point_text(base), base["source"]))
    return html("{}<p class=\"muted\">Eval accuracy on the real env's {} split, each point with its 95% Wilson "
                "interval and n, the eval examples (or rollouts, for a figure from metrics.json) it was measured on; "
                "one training seed per arm (seed 0). iter_0 and run_b start from the base model; the iterations, "
                "run_a and run_c resume from iter_0's final checkpoint, so their lines start at its eval. Unlike the "
                "train rewards below, these figures are comparable across arms, at equal n.</p>"
                "<figure class=\"wide\">{}<figcaption><ul class=\"legend-list\">{}</ul></figcaption></figure>",
                head, split, eval_overlay(arms, base), join(legend))


def _details(summary: Html | str, body: Html) -> Html:
    return html("<details><summary>{}</summary>{}</details>", summary, body)


def _counted(what: str, sample: dict) -> str:
    shown = len(sample["rows"])
    bad = f"; {sample['bad']} line(s) not a JSON object" if sample["bad"] else ""
    return f"{what}: {shown} shown of {sample['total']}{bad}"


def iteration_details(n: int, samples: dict[str, Any]) -> Html:
    """One iteration's evidence, each part collapsed: what the teacher read and wrote, and what the gate said."""
    parts = []
    if samples["weakness_report"] is not None:
        parts.append(_details(html("The teacher's weakness report (iter_{}/weakness_report.md)", n),
                              html("<pre class=\"text\">{}</pre>", esc_long(samples["weakness_report"]))))
    failures = samples["failures"]
    if failures is not None:
        rows = join(html("<div class=\"sample\"><p class=\"muted\">reward {}, step {}, line {}, example {}{}</p>"
                         "<b>question</b><pre class=\"text\">{}</pre><b>completion</b><pre class=\"text\">{}</pre>"
                         "<b>reference answer</b> <code>{}</code></div>", fmt(r["reward"], ".2f"), r["step"], r["idx"],
                         r["example_id"], ", truncated" if r["is_truncated"] else "", esc_long(r["question"]),
                         esc_long(r["completion"]), r["answer"]) for r in failures["rows"])
        parts.append(_details(html("{} (iter_{}/failures.jsonl, lowest reward first)",
                                   _counted("TRAIN failures the teacher read", failures), n), rows))
    dataset = samples["dataset"]
    if dataset is not None:
        rows = join(html("<div class=\"sample\"><p class=\"muted\">{}</p><b>question</b><pre class=\"text\">{}</pre>"
                         "<b>answer</b> <code>{}</code>{}{}</div>",
                         "; ".join(f"{k} {v}" for k, v in r["info"].items()) or "no info", esc_long(r["question"]),
                         r["answer"], html("<pre class=\"text\">{}</pre>", esc_long(r["reasoning"])) if r["reasoning"]
                         else Html(), html("<p class=\"muted\">other fields: <code>{}</code></p>", r["other"])
                         if r["other"] else Html()) for r in dataset["rows"])
        parts.append(_details(html("{} (iter_{}/dataset.jsonl, first rows)",
                                   _counted("Generated rows", dataset), n), rows))
    if samples["gate_report"] is not None:
        parts.append(_details(html("The dataset gate's report (iter_{}/gate_report.txt)", n),
                              html("<pre class=\"text\">{}</pre>", esc_long(samples["gate_report"]))))
    return html("<div class=\"drill\">{}</div>", join(parts)) if parts else Html()


def _scored(correct: float) -> str:
    """'right (correct 1.00)': the flips' rule (flips.RIGHT) and the example's mean correctness."""
    return f"{'right' if correct >= RIGHT else 'wrong'} (correct {fmt(correct, '.2f')})"


def _flip(e: dict) -> Html:
    if e["question"] is None and e["run_a"] is None and e["run_c"] is None:  # only the ids and scores are left
        return html("<div class=\"sample\"><p class=\"muted\">example {}: run_a {}, run_c {}; its text is not on "
                    "disk (the final eval files are missing or pruned)</p></div>", e["example_id"],
                    _scored(e["correct_a"]), _scored(e["correct_c"]))
    return html("<div class=\"sample\"><p class=\"muted\">example {}: run_a {}, run_c {}</p>"
                "<b>question</b><pre class=\"text\">{}</pre><b>reference answer</b> <code>{}</code>"
                "<b>run_a's completion</b><pre class=\"text\">{}</pre>"
                "<b>run_c's completion</b><pre class=\"text\">{}</pre></div>",
                e["example_id"], _scored(e["correct_a"]), _scored(e["correct_c"]), esc_long(e["question"]),
                "-" if e["answer"] is None else e["answer"], esc_long(e["run_a"]), esc_long(e["run_c"]))


def flips_section(flips: dict[str, Any] | None, split: str) -> Html:
    """Run A vs Run C on the eval examples where one is right and the other wrong (a finalized run only)."""
    if flips is None:
        return Html()
    head = html("<h2 id=\"flips\">Eval examples Run A and Run C disagree on</h2><p class=\"sealed\"><b>Sealed from "
                "the teacher: shown only after the loop ended.</b> These are eval rows, which the teacher never sees; "
                "this part is written only once the run is finalized, when no teacher turn remains.</p>")
    if flips.get("note"):
        return join([head, html("<p class=\"muted\">{}</p>", flips["note"])])
    files = "; ".join(f"{k}: {v}" for k, v in flips["files"].items())
    parts = [head, html("<p class=\"muted\">Paired by example id, as each arm's eval_summary.json records it (the "
                        "engine's row position where a row has no id): n = {} examples both arms scored on the {} split "
                        "(run_a {}, run_c {}; seed 0 of each). run_a right, run_c wrong: {}; run_c right, run_a wrong: "
                        "{}; both right: {}. Right means correct >= 0.5 (mean over the example's rollouts). The text is "
                        "each arm's first rollout of the example, from its final eval file ({}).</p>",
                        flips["n_shared"], split, flips["n_a"], flips["n_c"], flips["n_a_right"], flips["n_c_right"],
                        flips["both_right"], files)]
    for key, title in (("a_right", "run_a right, run_c wrong"), ("c_right", "run_c right, run_a wrong")):
        total = flips[f"n_{key}"]
        summary = html("{}: {} shown of {}", title, len(flips[key]), total)
        parts.append(_details(summary, join(_flip(e) for e in flips[key]) or html("<p>none</p>")))
    return join(parts)
