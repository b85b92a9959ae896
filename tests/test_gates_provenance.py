"""Rows against failures.jsonl (skeleton tags, copies, aliases) and Pillar 2's diversity axes."""

from __future__ import annotations

import pytest
from gate_fixtures import clone, failures, make_rows

from selfimprove.gates import check_diversity, check_failure_provenance

BASE_ROWS = make_rows()
FAILURES = failures()


def _skeleton_rows(rows):
    return [i for i, r in enumerate(rows) if r["info"]["source"].startswith("skeleton:")]


# ---------------------------------------------------------------- provenance


def test_valid_rows_pass_provenance():
    g = check_failure_provenance(BASE_ROWS, FAILURES)
    assert g.passed, g.summary()
    assert g.stats["skeleton_rows"] == 240 and g.stats["failures"] == 40


def test_unknown_skeleton_tags_fail_grouped():
    """Tags whose (step, idx) is not in failures.jsonl fail in one grouped line, each tag with its count."""
    rows = clone(BASE_ROWS)
    skel = _skeleton_rows(rows)
    for i in skel[:5]:
        rows[i]["info"]["source"] = "skeleton:train_step_7_idx_3"  # step 7 was never shown to the teacher
    for i in skel[5:7]:
        rows[i]["info"]["source"] = "skeleton:train_step_100_idx_999"  # known step, unknown idx
    g = check_failure_provenance(rows, FAILURES)
    assert g.failed_rules == {"unknown_skeleton"}
    (f,) = g.failures
    assert f.rows == skel[:7]
    assert "skeleton:train_step_7_idx_3 x5" in f.message and "skeleton:train_step_100_idx_999 x2" in f.message
    assert "2 skeleton tag(s)" in f.message


@pytest.mark.parametrize("change", [
    lambda q: q,
    lambda q: "  " + q.upper().replace(" ", "   ") + "\n",  # whitespace and case
    lambda q: q.replace(";", ",").replace("?", "."),  # sentence punctuation
])
def test_copy_of_a_failed_prompt_fails(change):
    rows = clone(BASE_ROWS)
    rows[4]["question"] = change(FAILURES[3]["question"])
    g = check_failure_provenance(rows, FAILURES)
    assert g.failed_rules == {"copy_of_failure"}
    assert g.failures[0].rows == [4]


def test_alias_of_a_failed_prompt_fails():
    """'Sally->Sarah, 5->7': the failed prompt's template with numbers renamed is an alias."""
    rows = clone(BASE_ROWS)
    rows[0]["question"] = FAILURES[5]["question"].replace(str(5 + 11), "73").replace(str(5 % 9 + 2), "9")
    rows[1]["question"] = FAILURES[6]["question"].replace("17", "seventeen").replace("8", "eight")
    g = check_failure_provenance(rows, FAILURES)
    assert g.failed_rules == {"alias_of_failure"}
    assert g.failures[0].rows == [0, 1]


def test_paraphrase_with_a_new_cover_story_passes():
    """Keeping the skeleton with a new cover story is what the seed asks for: not an alias."""
    rows = clone(BASE_ROWS)
    rows[0]["question"] = "A library lent out 27 books and got 4 back before noon; how many are still out?"
    assert check_failure_provenance(rows, FAILURES).passed


def test_bare_expressions_are_compared_by_copy_only():
    """A bare expression has no template (numbers are the problem): '47+38' vs failed '47 + 38' is a copy,
    '52+19' is a different problem."""
    failed = [{"step": 4, "idx": 0, "question": "47 + 38"}]
    rows = [{"question": "47+38", "info": {"source": "skeleton:train_step_4_idx_0"}},
            {"question": "52+19", "info": {"source": "skeleton:train_step_4_idx_0"}}]
    g = check_failure_provenance(rows, failed)
    assert g.failed_rules == {"copy_of_failure"} and g.failures[0].rows == [0]
    assert g.stats["copies_of_own_skeleton"] == 1


# ---------------------------------------------------------------- diversity (Pillar 2)


def test_valid_rows_vary_three_axes_per_bucket():
    g = check_diversity(BASE_ROWS)
    assert g.passed, g.summary()
    assert all(b["varied"] == ["cover_story", "depth", "numbers"] for b in g.stats["per_bucket"].values())


def test_bucket_varying_two_axes_fails_and_is_named():
    rows = clone(BASE_ROWS)
    for r in rows[:100]:  # bucket 0: one cover story left
        r["info"]["axes"]["cover_story"] = "farm"
    g = check_diversity(rows)
    assert g.failed_rules == {"diversity_axes"}
    (f,) = g.failures
    assert "1 bucket(s)" in f.message and "varies 2: depth, numbers" in f.message
    assert f.rows == list(range(100))


def test_depth_over_70_percent_does_not_count_as_varied():
    """The seed's parenthesis: a depth value on > 70% of a bucket's rows means depth is not varied."""
    rows = clone(BASE_ROWS)
    for k, r in enumerate(rows[:100]):
        r["info"]["axes"]["depth"] = 2 if k < 71 else 3
    g = check_diversity(rows)
    assert g.failed_rules == {"diversity_axes"}
    assert "depth top value 71%" in g.failures[0].message
    for k, r in enumerate(rows[:100]):
        r["info"]["axes"]["depth"] = 2 if k < 70 else 3  # exactly 70%: still varied
    assert check_diversity(rows).passed


def test_a_fourth_axis_can_replace_depth():
    rows = clone(BASE_ROWS)
    for k, r in enumerate(rows[:100]):
        r["info"]["axes"]["depth"] = 2
        r["info"]["axes"]["distractor"] = k % 2 == 0
    assert check_diversity(rows).passed


def test_missing_or_malformed_axes_fail_grouped():
    rows = clone(BASE_ROWS)
    del rows[3]["info"]["axes"]
    rows[4]["info"]["axes"] = ["depth"]
    rows[5]["info"]["axes"]["story"] = "x"
    g = check_diversity(rows)
    assert g.failed_rules == {"axes_schema"}
    assert sorted(i for f in g.failures for i in f.rows) == [3, 4, 5]
    assert any("unknown axis name(s) story" in f.message for f in g.failures)


def test_axes_the_report_fixes_lower_the_count_only_to_the_free_axes():
    """Bare expressions have no cover story: a report that fixes axes (with reasons) needs the free ones varied."""
    rows = clone(BASE_ROWS)
    for r in rows:
        r["info"]["axes"]["cover_story"] = "none"
    assert check_diversity(rows).failed_rules == {"diversity_axes"}
    why = "the real questions are bare expressions"
    fixed = {"cover_story": why, "surface": why, "distractor": why}
    g = check_diversity(rows, fixed)
    assert g.passed, g.summary()
    assert g.stats["fixed_axes"] == ["cover_story", "distractor", "surface"] and g.stats["varied_needed"] == 2
    for k, r in enumerate(rows[:100]):
        r["info"]["axes"]["depth"] = 2 if k < 80 else 3  # depth > 70%: one free axis left in bucket 0
    g = check_diversity(rows, fixed)
    assert g.failed_rules == {"diversity_axes"} and "fixed by the report: cover_story, distractor, surface" in g.failures[0].message


@pytest.mark.parametrize("fixed,bad", [
    ({"story": "the real questions are bare expressions"}, "unknown ['story']"),
    ({"cover_story": "none"}, "short: ['cover_story']"),
    ({a: "the real questions are bare expressions" for a in ("cover_story", "depth", "surface", "numbers", "distractor")}, "got 5"),
])
def test_report_fixed_axes_rule(fixed, bad):
    from gate_fixtures import report_dict

    from selfimprove.gates import WeaknessReport
    from selfimprove.gates.report import report_rule_failures

    data = report_dict()
    data["fixed_axes"] = fixed
    fails = report_rule_failures(WeaknessReport.model_validate(data))
    assert [f.rule for f in fails] == ["fixed_axes"] and bad in fails[0].message
    data["fixed_axes"] = {"cover_story": "the real questions are bare expressions"}
    assert report_rule_failures(WeaknessReport.model_validate(data)) == []
