"""The dataset gate: the valid baseline passes; each rule fails alone when only it is broken."""

from __future__ import annotations

import json

import pytest
from gate_fixtures import DOMAIN_LABELS, FEATURES, clone, make_rows, report_dict, sub_label, valid_report

from selfimprove.gates import WeaknessReport, check_dataset, check_dataset_file, load_dataset_jsonl, seed_validation_lines

REPORT = valid_report()
BASE_ROWS = make_rows(REPORT)


def test_valid_rows_pass():
    """The baseline passes every rule, and all nine seed lines are True."""
    g = check_dataset(BASE_ROWS, REPORT)
    assert g.passed, g.summary()
    lines = g.stats["seed_lines"]
    assert len(lines) == 9 and all(v["passed"] for v in lines.values())


def _where(pred, change):
    """Mutation: apply change(row) to rows whose (index, row) satisfy pred."""
    def apply(rows):
        for i, r in enumerate(rows):
            if pred(i, r):
                change(r)
        return rows
    return apply


def _info_set(key, value):
    return lambda r: r["info"].__setitem__(key, value)


def _pair_is(d, s):
    return lambda i, r: (r["info"]["domain"], r["info"]["sub_domain"]) == (DOMAIN_LABELS[d], sub_label(d, s))


def _first_n(n, pred):
    """pred restricted to its first n matches."""
    seen = []

    def p(i, r):
        if pred(i, r) and len(seen) < n:
            seen.append(i)
            return True
        return False
    return p


def _drop_pairs(*pairs):
    return lambda rows: [r for r in rows if (r["info"]["domain"], r["info"]["sub_domain"]) not in pairs]


def _dup_question(rows):
    rows[11]["question"] = "  " + rows[10]["question"].replace(" ", "   ") + "\n"
    return rows


def _move_rows(n, src, dst):
    """Move n rows from bucket src to bucket dst (keeps the total)."""
    def apply(rows):
        moved = 0
        for r in rows:
            if (r["info"]["domain"], r["info"]["sub_domain"]) == src and moved < n:
                r["info"]["domain"], r["info"]["sub_domain"] = dst
                moved += 1
        return rows
    return apply


D2S1, D2S0 = (DOMAIN_LABELS[2], sub_label(2, 1)), (DOMAIN_LABELS[2], sub_label(2, 0))
hard = lambda i, r: r["info"]["difficulty"] == "hard"  # noqa: E731
med = lambda i, r: r["info"]["difficulty"] == "med"  # noqa: E731
two_feats = lambda i, r: len(r["info"]["structural_features"]) == 2  # noqa: E731
three_feats = lambda i, r: len(r["info"]["structural_features"]) == 3  # noqa: E731
skeleton = lambda i, r: r["info"]["source"].startswith("skeleton:")  # noqa: E731

CASES = [
    # (rule, mutation of a fresh copy of BASE_ROWS, or a callable building rows from scratch)
    ("row_schema", lambda rows: (rows[3].__setitem__("question", ""), rows)[1]),
    ("row_schema", lambda rows: (rows[4].__setitem__("answer", 42), rows)[1]),
    ("row_schema", _where(lambda i, r: i == 5, _info_set("difficulty", "medium"))),
    ("row_schema", _where(lambda i, r: i == 6, lambda r: r["info"].pop("reasoning"))),
    ("row_schema", _where(lambda i, r: i == 7, _info_set("source", "skeleton:row 7"))),
    ("row_schema", _where(lambda i, r: i == 8, _info_set("structural_features", [FEATURES[0], FEATURES[0], FEATURES[1]]))),
    ("unknown_pair", _where(_pair_is(0, 0), _info_set("sub_domain", "invented on the fly"))),
    ("unknown_feature", _where(two_feats, lambda r: r["info"]["structural_features"].append("mystery feature"))),
    ("seed_domains", lambda _: make_rows(REPORT, per_bucket=125, pairs=sorted(REPORT.pairs())[:4])),
    ("seed_subs_per_domain", _drop_pairs(D2S1)),
    ("seed_smallest_bucket", _move_rows(88, D2S1, D2S0)),
    ("seed_hard", _where(_first_n(90, hard), _info_set("difficulty", "med"))),
    ("seed_easy", _where(_first_n(60, med), _info_set("difficulty", "easy"))),
    ("seed_features_2", _where(_first_n(150, two_feats), lambda r: r["info"]["structural_features"].pop())),
    ("seed_features_3", _where(_first_n(80, three_feats), lambda r: r["info"]["structural_features"].pop())),
    ("seed_skeleton", _where(_first_n(90, skeleton), _info_set("source", "teacher-invented"))),
    ("row_count", lambda _: make_rows(REPORT, per_bucket=83)),
    ("row_count", lambda _: make_rows(REPORT, per_bucket=167)),
    ("duplicate_question", _dup_question),
]


@pytest.mark.parametrize("rule,mutate", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_fails_alone(rule, mutate):
    """Breaking one rule makes exactly that rule fail."""
    g = check_dataset(mutate(clone(BASE_ROWS)), REPORT)
    assert g.failed_rules == {rule}, g.summary()


def test_seed_feature_coverage_alone():
    """A defined feature used by 0 < share < 10% of rows fails the seed's per-feature line only."""
    report = WeaknessReport.model_validate(report_dict(n_features=5))
    rows = make_rows(valid_report())  # uses the first 4 features only
    for r in rows[:30]:  # 5%: rows 0..29 have 2 or 3 features; the fifth comes on top
        r["info"]["structural_features"].append(FEATURES[4])
    g = check_dataset(rows, report)
    assert g.failed_rules == {"seed_feature_coverage"}, g.summary()
    assert "5.0%" in g.summary()


def test_defined_feature_unused_alone():
    """A feature the report defines but no row uses fails `defined_feature_unused` (the seed line misses it)."""
    report = WeaknessReport.model_validate(report_dict(n_features=5))
    g = check_dataset(make_rows(valid_report()), report)
    assert g.failed_rules == {"defined_feature_unused"}, g.summary()
    assert g.stats["seed_lines"]["seed_feature_coverage"]["passed"]


def test_row_failures_name_rows():
    """Row-level rules list the offending generated-row indices."""
    rows = clone(BASE_ROWS)
    rows[3]["question"] = ""
    rows[9]["question"] = ""
    rows[20]["info"]["sub_domain"] = "nope"
    g = check_dataset(rows, REPORT)
    by_rule = {f.rule: f for f in g.failures}
    assert by_rule["row_schema"].rows == [3, 9]
    assert by_rule["unknown_pair"].rows == [20]


def test_seed_messages_carry_measured_values():
    """Each seed line's message states the measured value."""
    g = check_dataset(_where(_first_n(90, hard), _info_set("difficulty", "med"))(clone(BASE_ROWS)), REPORT)
    assert "hard >= 40%: measured 35.0%" in g.summary()


def test_seed_lines_match_the_seed_snippet():
    """seed_validation_lines agrees with the seed's own snippet, line for line, on a failing set."""
    import collections

    rows = _where(_first_n(150, two_feats), lambda r: r["info"]["structural_features"].pop())(clone(BASE_ROWS))
    rows = _move_rows(88, D2S1, D2S0)(rows)
    T = len(rows)
    doms = collections.Counter(r["info"]["domain"] for r in rows)
    subs = collections.Counter((r["info"]["domain"], r["info"]["sub_domain"]) for r in rows)
    diff = collections.Counter(r["info"]["difficulty"] for r in rows)
    feats = [r["info"].get("structural_features", []) for r in rows]
    per_feat = collections.Counter(f for fs in feats for f in fs)
    n2 = sum(1 for f in feats if len(f) >= 2)
    n3 = sum(1 for f in feats if len(f) >= 3)
    n_skel = sum(1 for r in rows if str(r["info"].get("source", "")).startswith("skeleton:"))
    expected = [
        len(doms) >= 3,
        all(sum(1 for (d, s) in subs if d == dom) >= 2 for dom in doms),
        min(subs.values()) / T >= 0.03,
        diff.get("hard", 0) / T >= 0.40,
        diff.get("easy", 0) / T <= 0.20,
        n2 / T >= 0.80,
        n3 / T >= 0.40,
        all(v / T >= 0.10 for v in per_feat.values()),
        n_skel / T >= 0.30,
    ]
    got = [v["passed"] for v in seed_validation_lines(rows).values()]
    assert got == expected
    assert expected.count(False) == 2


def test_load_dataset_jsonl_reports_bad_lines(tmp_path):
    """Bad JSON and non-object lines are reported by line number; blank lines are skipped."""
    path = tmp_path / "dataset.jsonl"
    path.write_text(json.dumps(BASE_ROWS[0]) + "\n\n{not json\n[1, 2]\n" + json.dumps(BASE_ROWS[1]) + "\n")
    rows, failures = load_dataset_jsonl(path)
    assert rows == BASE_ROWS[:2]
    assert [f.rule for f in failures] == ["jsonl_line", "jsonl_line"]
    assert "line 3" in failures[0].message and "line 4" in failures[1].message


def test_check_dataset_file_merges_load_failures(tmp_path):
    path = tmp_path / "dataset.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in BASE_ROWS) + "oops\n")
    g = check_dataset_file(path, REPORT)
    assert g.failed_rules == {"jsonl_line"}
    assert check_dataset_file(tmp_path / "missing.jsonl", REPORT).failed_rules >= {"jsonl_file", "row_count"}


def test_empty_dataset_does_not_crash():
    """Zero rows fail loudly instead of dividing by zero."""
    g = check_dataset([], REPORT)
    assert {"row_count", "seed_domains", "seed_hard", "seed_smallest_bucket"} <= g.failed_rules
