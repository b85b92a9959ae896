"""The round-trip gate with the real verifiers XMLParser the embedded env uses."""

from __future__ import annotations

import pytest
import verifiers as vf
from gate_fixtures import clone, make_rows

from selfimprove.gates import check_round_trip

PARSE = vf.XMLParser(["answer"], answer_field="answer").parse_answer
BASE_ROWS = make_rows()


def test_valid_rows_round_trip():
    """Every baseline row's reasoning parses to its answer with the real parser."""
    g = check_round_trip(BASE_ROWS, PARSE)
    assert g.passed, g.summary()
    assert g.stats["round_trip_ok"] == len(BASE_ROWS)


def _reasoning(i, text):
    def apply(rows):
        rows[i]["info"]["reasoning"] = text
        return rows
    return apply


def _answer(i, value):
    def apply(rows):
        rows[i]["answer"] = value
        return rows
    return apply


@pytest.mark.parametrize("rule,mutate,row", [
    ("round_trip_mismatch", _answer(599, "-1"), 599),
    ("round_trip_no_answer", _reasoning(3, "the result is 12, no tags"), 3),
    ("round_trip_input", _reasoning(4, ""), 4),
    ("round_trip_input", _answer(5, None), 5),
])
def test_each_rule_fails_alone(rule, mutate, row):
    """Breaking one row's round trip fails exactly that rule and names the row (the LAST row is checked too)."""
    g = check_round_trip(mutate(clone(BASE_ROWS)), PARSE)
    assert g.failed_rules == {rule}, g.summary()
    assert g.failures[0].rows == [row]


def test_parser_exception_is_a_row_failure():
    """A parser that raises fails `round_trip_parser_error` for that row instead of crashing the gate."""
    def fragile(text: str):
        if "boom" in text:
            raise ValueError("boom")
        return PARSE(text)

    g = check_round_trip(_reasoning(2, "boom <answer>1</answer>")(clone(BASE_ROWS)), fragile)
    assert g.failed_rules == {"round_trip_parser_error"}
    assert g.failures[0].rows == [2] and "ValueError x1" in g.failures[0].message


def test_normaliser_applies_to_both_sides():
    """An optional normaliser makes '1,000' and '1000' equal; without it they differ."""
    rows = clone(BASE_ROWS[:2])
    rows[0]["answer"] = "1000"
    rows[0]["info"]["reasoning"] = "<answer>1,000</answer>"
    assert check_round_trip(rows, PARSE).failed_rules == {"round_trip_mismatch"}
    assert check_round_trip(rows, PARSE, normalise=lambda s: s.replace(",", "")).passed


def test_mismatch_message_shows_examples():
    g = check_round_trip(_answer(0, "nope")(clone(BASE_ROWS)), PARSE)
    assert "row 0: parsed" in g.summary() and "'nope'" in g.summary()
