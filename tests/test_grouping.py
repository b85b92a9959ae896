"""Weakness groups on any env (grouping.py): the rules, degenerate groups and their stated fallback,
guessing priors, and the collapse flag in the statistics and in the summary the teacher reads."""

from __future__ import annotations

import pytest

from selfimprove.errors import UsageError
from selfimprove.grouping import PromptRow, answer_label, check_group_by, choose_grouping, guess_priors, task_label
from selfimprove.weakness import Rollout, weakness_stats
from selfimprove.weakness_summary import summary_text

WORDS = ["apple", "river", "stone", "cloud", "maple", "tiger", "ocean", "amber", "lemon", "pearl", "cedar", "flint"]


def word_rows(task: bool) -> list[PromptRow]:
    """Word prompts that share no template (every word differs), as on a word env."""
    rows = []
    for i, w in enumerate(WORDS):
        kind = "spell_backward" if i % 2 else "letter_counting"
        q = f"Spell {w} backward" if i % 2 else f"How many e in {w} {w[::-1]}?"
        rows.append(PromptRow(q, task_label({"task": kind}) if task else None, w[::-1] if i % 2 else str(w.count("e"))))
    return rows


def test_task_field_is_used_when_the_env_offers_one():
    g = choose_grouping(word_rows(task=True))
    assert g.name == "task" and g.degenerate is None and g.note == ""
    assert {g.label(r.question) for r in word_rows(True)} == {"task=spell_backward", "task=letter_counting"}
    assert task_label({"metadata": {"source_dataset": "chain_sum"}}) == "source_dataset=chain_sum"
    assert task_label('{"category": "algebra"}') == "category=algebra" and task_label({"x": 1}) is None


def test_degenerate_templates_fall_back_with_the_reason_stated():
    """Without a task field, word prompts' templates are all singletons: the chooser says so and
    groups by the answer's type and length instead."""
    g = choose_grouping(word_rows(task=False), "template")
    assert g.name == "answer" and g.degenerate is None
    assert "template: degenerate" in g.note and "singleton share 1.00" in g.note and "so grouped by answer" in g.note
    assert answer_label("12") == "int/2 digits" and answer_label("-3") == "int/1 digits negative"
    assert answer_label("elppa") == "word/5 chars" and answer_label("a b c d e f") == "text/10-19 chars"


def test_every_rule_degenerate_is_flagged_not_hidden():
    rows = [PromptRow(f"{w} {i}{w}", None, "yes") for i, w in enumerate(WORDS)]
    g = choose_grouping(rows, "auto")
    assert g.degenerate is not None and "every rule is degenerate" in g.note
    assert g.name == "template"  # the first rule offered is kept, and said to be degenerate


def test_guess_prior_is_the_commonest_answer_share():
    rows = [PromptRow(f"Count a in {w}", "task=count", str(n)) for w, n in zip(WORDS[:10], [1] * 6 + [2] * 3 + [0])]
    g = choose_grouping(rows)
    assert guess_priors(rows, g) == {"task=count": {"guess_prior": 0.6, "commonest_answer": "1"}}


def test_collapse_onto_the_commonest_answer_is_flagged_in_stats_and_summary():
    """A group whose solve rate rises yet stays at its guessing prior is flagged, and the summary
    the teacher reads shows the prior beside the rate, the flag and the grouping rule."""
    rollouts = []
    for i, w in enumerate(WORDS[:10]):
        answer = "1" if i < 6 else "2"  # prior 0.6
        for step in range(1, 11):
            for k in range(4):
                solved = k < 1 if step <= 5 else k < 2  # 0.25 early, 0.50 late: rising, still under the 0.6 prior
                rollouts.append(Rollout(step, f"Count a in {w}", solved, False, i, "task=count", answer))
    stats = weakness_stats(rollouts)
    (g,) = stats["groups"]
    assert g["guess_prior"] == 0.6 and g["trend"] > 0 and g["collapse_suspect"] is True
    text = summary_text(stats, "real")
    assert "guess prior" in text and "COLLAPSE?" in text and "grouping task (the task/category field" in text


def test_degenerate_summary_says_so():
    rollouts = [Rollout(1, f"{w} {i}{w}", i % 2 == 0, False, i, None, "yes") for i, w in enumerate(WORDS)]
    text = summary_text(weakness_stats(rollouts), "real")
    assert "DEGENERATE GROUPS:" in text and "every rule is degenerate" in text


def test_group_by_spec_is_checked():
    for ok in (None, "auto", "task", "template", "answer", "mine.py:group"):
        check_group_by(ok)
    with pytest.raises(UsageError, match="expected auto, task, template, answer"):
        check_group_by("kind")


def test_bootstrap_records_the_grouping_and_refuses_an_unknown_one(new_run, cli, runs_dir):
    """`--group-by` on bootstrap (and so on run) is recorded in run.json for every later analysis;
    an unknown rule is a usage error (exit 2) naming the choices."""
    import json

    run_dir = new_run("selfimprove-arith", "--group-by", "answer")
    assert json.loads((run_dir / "run.json").read_text())["group_by"] == "answer"
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", str(runs_dir), "--model", "selfimprove/tiny-arith",
              "--group-by", "kind")
    assert res.exit_code == 2 and "expected auto, task, template, answer" in res.stderr


def test_iterate_group_by_is_recorded_and_used(run):
    """`iterate --group-by RULE` records the rule in run.json and groups the statistics it writes with it."""
    import json

    from selfimprove.errors import TeacherActionNeeded
    from selfimprove.phases.iterate import iterate

    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True, group_by="template")
    assert run.read_run().group_by == "template"
    real = json.loads((run.iter(1).dir / "weakness_stats.json").read_text())["real"]
    # asked template: this env's prompts share one template, so it falls back, and says so
    assert real["grouping"]["asked"] == "template" and "template: degenerate" in real["grouping"]["note"]
