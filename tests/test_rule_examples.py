"""Every example of SKILL-reference.md "What the row rules compare" passes or fails as it says,
through the gates' own code: the text a teacher writes against is what the gate applies."""

from __future__ import annotations

import json
import re

import pytest

from selfimprove.gates.dataset import _normalise_question
from selfimprove.gates.dedup import check_near_duplicates, find_eval_overlap
from selfimprove.gates.diversity import check_diversity
from selfimprove.gates.ngram_hash import eval_ngram_index
from selfimprove.gates.provenance import check_failure_provenance
from selfimprove.skill import packaged_text

SECTION = "## What the row rules compare (as the gate applies them)"
ROW = re.compile(r"^\| (`?[a-z_ ]+`?) \| `(.*)` \| `(.*)` \| (passes|fails) \|$")


def examples() -> list[tuple[str, str, str, str]]:
    text = packaged_text("SKILL-reference.md")
    assert SECTION in text
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = [(m.group(1).strip("`"), m.group(2), m.group(3), m.group(4))
             for m in map(ROW.match, body.splitlines()) if m]
    return found


def _row(question: str, sub: str = "S", axes: dict | None = None) -> dict:
    return {"question": question, "answer": "1", "info": {"domain": "D", "sub_domain": sub, "axes": axes or {}}}


def flagged(rule: str, row: str, other: str) -> bool:
    """Does the gate flag the example's row under `rule`?"""
    if rule == "duplicate_question":  # the dataset gate's own normalisation, other row first
        return _normalise_question(row) == _normalise_question(other)
    if rule in ("repeat_of_prior", "paraphrase_of_prior"):
        gate = check_near_duplicates([_row(row)], {1: [_row(other)]})
        return any(f.rule == rule for f in gate.failures)
    if rule in ("copy_of_failure", "alias_of_failure"):
        gate = check_failure_provenance([_row(row)], [{"step": 1, "idx": 0, "question": other}])
        return any(f.rule == rule for f in gate.failures)
    if rule in ("eval overlap", "eval containment"):
        found = find_eval_overlap([_row(row)], eval_ngram_index([other]))
        return bool(found.overlapping if rule == "eval overlap" else found.containing)
    if rule == "diversity_axes":
        bucket = [_row(f"q{k}", "S", a) for k, a in enumerate(json.loads(row))]
        siblings = [_row(f"p{k}", "T", a) for k, a in enumerate(json.loads(other))]
        gate = check_diversity(bucket + siblings)
        return any(f.rule == rule and set(range(len(bucket))) <= set(f.rows) for f in gate.failures)
    raise AssertionError(f"SKILL-reference.md names a rule the test does not know: {rule}")


def test_every_rule_has_a_passing_and_a_failing_example() -> None:
    rules = {}
    for rule, _, _, result in examples():
        rules.setdefault(rule, set()).add(result)
    assert set(rules) == {"duplicate_question", "repeat_of_prior", "paraphrase_of_prior", "copy_of_failure",
                          "alias_of_failure", "eval overlap", "eval containment", "diversity_axes"}
    assert all(results == {"passes", "fails"} for results in rules.values()), rules


@pytest.mark.parametrize("rule,row,other,result", examples())
def test_the_example_passes_or_fails_as_stated(rule: str, row: str, other: str, result: str) -> None:
    assert flagged(rule, row, other) == (result == "fails"), (rule, row, other)
