"""The report gate: every rule fails alone when only it is broken; the skeleton fails until filled."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gate_fixtures import DOMAIN_LABELS, FEATURES, clone, report_dict, sub_label, write_report

from selfimprove.gates import WeaknessReport, check_weakness_report, parse_weakness_report, render_report_skeleton
from selfimprove.gates.report import split_front_matter


def gate(tmp_path: Path, data: dict | None, body: str | None = None):
    path = write_report(tmp_path / "weakness_report.md", data, *([body] if body is not None else []))
    return check_weakness_report(path)


def test_valid_report_passes(tmp_path):
    """The baseline report passes with no failures and yields the model."""
    report, g = gate(tmp_path, report_dict())
    assert g.passed, g.summary()
    assert isinstance(report, WeaknessReport)
    assert report.pairs() == {(DOMAIN_LABELS[d], sub_label(d, s)) for d in range(3) for s in range(2)}
    assert g.stats["bucket_rows_total"] == 600


def test_valid_report_with_custom_rewards_passes(tmp_path):
    """Custom rewards within the weight caps and citing a sub_domain pass."""
    data = report_dict()
    data["custom_rewards"] = [
        {"name": "has_tag", "weight": 0.2, "failure_mode": sub_label(0, 0), "source_file": "rewards.py"},
        {"name": "short", "weight": 0.1, "failure_mode": "drops step 1 of domain 2"},
    ]
    report, g = gate(tmp_path, data)
    assert g.passed, g.summary()
    assert report.custom_rewards[0].source_file == "rewards.py"


def _set(path: str, value):
    """Mutation: set a dotted path (ints index lists) to value."""
    def apply(d: dict) -> dict:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        obj = d
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = value
        return d
    return apply


def _rename_domain(i: int, label: str):
    def apply(d: dict) -> dict:
        old = d["domains"][i]["label"]
        d["domains"][i]["label"] = label
        for b in d["buckets"]:
            if b["domain"] == old:
                b["domain"] = label
        return d
    return apply


def _rename_sub(i: int, j: int, label: str):
    def apply(d: dict) -> dict:
        old = d["domains"][i]["sub_domains"][j]["label"]
        d["domains"][i]["sub_domains"][j]["label"] = label
        for b in d["buckets"]:
            if b["sub_domain"] == old:
                b["sub_domain"] = label
        return d
    return apply


def _swap_severity(d: dict) -> dict:
    d["domains"][0]["severity"], d["domains"][2]["severity"] = "low", "high"
    return d


def _one_sub(d: dict) -> dict:
    gone = d["domains"][2]["sub_domains"].pop()
    d["buckets"] = [b for b in d["buckets"] if b["sub_domain"] != gone["label"]]
    return d


def _six_subs(d: dict) -> dict:
    for s in range(2, 6):
        d["domains"][0]["sub_domains"].append({"label": sub_label(0, s % 5) + f" v{s}", "failure_mode": "x"})
        d["buckets"].append({"domain": DOMAIN_LABELS[0], "sub_domain": sub_label(0, s % 5) + f" v{s}", "rows": 25})
    return d


def _append(key: str, item: dict):
    def apply(d: dict) -> dict:
        d[key].append(item)
        return d
    return apply


def _drop_last_bucket(d: dict) -> dict:
    d["buckets"].pop()
    return d


def _rewards(*rewards: dict):
    def apply(d: dict) -> dict:
        d["custom_rewards"] = list(rewards)
        return d
    return apply


def _same(d: dict) -> dict:
    return d


CASES = [
    # (rule, base report_dict kwargs, mutation)
    ("todo_marker", {}, _set("domains.1.evidence", "TODO: write this")),
    ("domain_count", {"n_domains": 2, "rows_per_bucket": 150}, _same),
    ("domain_count", {"n_domains": 7, "rows_per_bucket": 50}, _same),
    ("severity_order", {}, _swap_severity),
    ("sub_domain_count", {}, _one_sub),
    ("sub_domain_count", {}, _six_subs),
    ("domain_label_words", {}, _rename_domain(0, "a very long domain label")),
    ("sub_domain_label_words", {}, _rename_sub(1, 0, "one two three four five six seven")),
    ("labels_unique", {}, _rename_domain(1, DOMAIN_LABELS[0])),
    ("labels_unique", {}, _set("structural_features.1.label", FEATURES[0])),
    ("empty_text", {}, _set("domains.0.evidence", "  ")),
    ("empty_text", {}, _set("length_quartile_notes", "")),
    ("bucket_unknown_pair", {}, _append("buckets", {"domain": DOMAIN_LABELS[0], "sub_domain": "not a sub", "rows": 50})),
    ("bucket_missing_pair", {}, _drop_last_bucket),
    ("bucket_duplicate", {}, _append("buckets", {"domain": DOMAIN_LABELS[0], "sub_domain": sub_label(0, 0), "rows": 50})),
    ("bucket_total", {"rows_per_bucket": 80}, _same),
    ("bucket_total", {"rows_per_bucket": 200}, _same),
    ("bucket_floor", {}, _set("buckets.0.rows", 10)),
    ("feature_count", {"n_features": 3}, _same),
    ("feature_count", {"n_features": 7}, _same),
    ("feature_definition", {}, _set("structural_features.2.definition", "")),
    ("custom_reward_weight", {}, _rewards({"name": "f", "weight": 0.25, "failure_mode": sub_label(0, 0)})),
    ("custom_reward_weight", {}, _rewards({"name": "f", "weight": 0.0, "failure_mode": sub_label(0, 0)})),
    ("custom_reward_total_weight", {}, _rewards({"name": "f", "weight": 0.2, "failure_mode": sub_label(0, 0)},
                                                {"name": "g", "weight": 0.15, "failure_mode": sub_label(0, 1)})),
    ("custom_reward_failure_mode", {}, _rewards({"name": "f", "weight": 0.1, "failure_mode": "vibes"})),
]


@pytest.mark.parametrize("rule,base,mutate", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_fails_alone(tmp_path, rule, base, mutate):
    """Breaking one rule makes exactly that rule fail."""
    report, g = gate(tmp_path, mutate(clone(report_dict(**base))))
    assert not g.passed
    assert g.failed_rules == {rule}, g.summary()
    assert report is not None  # semantic rules run on a schema-valid model


@pytest.mark.parametrize("data,body", [
    (None, "# Weakness report\n\nno front matter\n"),
    (None, "---\ndomains: [unclosed\n---\n"),
    (None, "---\n- just\n- a list\n---\n"),
    (None, "---\neval_acc_prev: 0.3\n"),  # never closed
])
def test_front_matter_rule(tmp_path, data, body):
    """Missing, unclosed, non-YAML or non-mapping front matter fails `front_matter` only."""
    report, g = gate(tmp_path, data, body)
    assert report is None
    assert g.failed_rules == {"front_matter"}, g.summary()


def test_missing_file_is_a_front_matter_failure(tmp_path):
    """A missing report file is reported, not raised."""
    report, g = check_weakness_report(tmp_path / "nope.md")
    assert report is None and g.failed_rules == {"front_matter"}


@pytest.mark.parametrize("mutate", [
    _set("domains.0.severity", "critical"),
    _set("eval_acc_prev", 1.7),
    _set("buckets.0.rows", "many"),
    _set("surprise", 1),  # extra keys are forbidden
    lambda d: {k: v for k, v in d.items() if k != "structural_features"},
])
def test_schema_rule(tmp_path, mutate):
    """Schema violations fail `schema` only, and parse_weakness_report returns the failing report."""
    data = mutate(clone(report_dict()))
    report, g = gate(tmp_path, data)
    assert report is None
    assert g.failed_rules == {"schema"}, g.summary()
    assert isinstance(parse_weakness_report(tmp_path / "weakness_report.md"), type(g))


def test_every_schema_error_is_listed(tmp_path):
    """Two schema errors give two failures, each naming its field."""
    data = clone(report_dict())
    data["domains"][0]["severity"] = "critical"
    del data["length_quartile_notes"]
    _, g = gate(tmp_path, data)
    assert len(g.failures) == 2
    assert "domains.0.severity" in g.summary() and "length_quartile_notes" in g.summary()


def test_several_broken_rules_are_all_reported(tmp_path):
    """The gate lists every failing rule, not the first."""
    data = clone(report_dict(n_features=3))
    _swap_severity(data)
    data["buckets"][0]["rows"] = 10
    _, g = gate(tmp_path, data)
    assert g.failed_rules == {"feature_count", "severity_order", "bucket_floor"}
    assert len(g.summary().splitlines()) == 1 + 3


def test_parse_returns_model_for_valid_report(tmp_path):
    path = write_report(tmp_path / "r.md", report_dict())
    assert isinstance(parse_weakness_report(path), WeaknessReport)


def test_skeleton_fails_until_filled_then_passes(tmp_path):
    """The rendered skeleton is valid YAML that fails on TODOs and zero rows; filling it in passes."""
    text = render_report_skeleton(0.4231, {"failures": 200, "length_quartiles": [{"q": 1, "mean_reward": 0.1}]})
    path = tmp_path / "weakness_report.md"
    path.write_text(text)
    report, g = check_weakness_report(path)
    assert report is not None and report.eval_acc_prev == pytest.approx(0.4231)
    assert g.failed_rules == {"todo_marker", "bucket_total", "bucket_floor"}, g.summary()
    assert "| q | mean_reward |" in text  # analysis rendered for humans

    fm, body = split_front_matter(text)
    data = yaml.safe_load(fm)
    filled = yaml.safe_load(yaml.safe_dump(data).replace("TODO", "filled"))
    for b in filled["buckets"]:
        b["rows"] = 100
    report, g = gate(tmp_path, filled, body)
    assert g.passed, g.summary()


def test_summary_lists_one_line_per_failure(tmp_path):
    _, g = gate(tmp_path, _swap_severity(clone(report_dict(n_features=3))))
    lines = g.summary().splitlines()
    assert lines[0].startswith("report gate: FAILED (2 failures)")
    assert any("[severity_order]" in ln for ln in lines) and any("[feature_count]" in ln for ln in lines)
