"""Hostile generator output (issue 24): every reader of dataset.jsonl sees the same rows; what is not text, or
not a prompt a student could take, is a gate failure naming the line or the rows, never a crash after the gate."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from gate_fixtures import clone, make_rows, report_dict, valid_report

from selfimprove.gates import WeaknessReport, check_dataset, eval_ngram_index, load_dataset_jsonl
from selfimprove.gates.dataset import FIELD_MAX_CHARS
from selfimprove.gates.decontam import drop_eval_overlap
from selfimprove.gates.report import report_rule_failures
from selfimprove.phases.iteration_steps import log_tail

REPORT = valid_report()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8", newline="")
    return path


def test_line_separators_inside_strings_are_not_line_ends(tmp_path: Path) -> None:
    rows = make_rows(REPORT)
    for i, sep in enumerate(("\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e", "\x0c", "\x0b")):
        rows[i]["info"]["reasoning"] = f"first{sep}second " + rows[i]["info"]["reasoning"]
    ds = _write(tmp_path / "dataset.jsonl", [json.dumps(r, ensure_ascii=False) for r in rows])
    loaded, failures = load_dataset_jsonl(ds)
    assert failures == [] and loaded == rows
    # the decontamination step numbers and keeps them the same way: nothing to drop, nothing rewritten
    before = ds.read_bytes()
    assert drop_eval_overlap(ds, eval_ngram_index(["17+90"])) == 0
    assert ds.read_bytes() == before


def test_a_lone_surrogate_and_a_deeply_nested_line_are_bad_lines_by_number(tmp_path: Path) -> None:
    rows = make_rows(REPORT)[:5]
    lines = [json.dumps(r) for r in rows]
    lines[1] = lines[1].replace('"question": "', '"question": "\\ud800', 1)  # valid JSON, not text
    lines[3] = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    loaded, failures = load_dataset_jsonl(_write(tmp_path / "dataset.jsonl", lines))
    assert len(loaded) == 3
    text = " | ".join(f.message for f in failures)
    assert {f.rule for f in failures} == {"jsonl_line"}
    assert "line 2: a string holds the lone surrogate '\\ud800'" in text
    assert "line 4: nested too deeply" in text
    # decontamination skips both without raising
    assert drop_eval_overlap(tmp_path / "dataset.jsonl", eval_ngram_index(["17+90"])) == 0


def test_control_characters_and_huge_fields_fail_row_schema() -> None:
    rows = clone(make_rows(REPORT))
    rows[7]["question"] = "What is\x00 7 + 5?"
    rows[8]["info"]["reasoning"] = "tab\tand newline\nare text\r\n<answer>1</answer>"  # allowed
    rows[9]["question"] += " x" * (FIELD_MAX_CHARS // 2)
    rows[10]["answer"] = "1\x1b[31m"
    gate = check_dataset(rows, REPORT)
    by_message = {f.message: f.rows for f in gate.failures if f.rule == "row_schema"}
    assert by_message == {
        "1 row(s): question holds a control character (NUL or another of U+0000-U+001F besides tab and newline); "
        "remove it": [7],
        f"1 row(s): question longer than {FIELD_MAX_CHARS} characters (past any student's context); shorten it": [9],
        "1 row(s): answer holds a control character (NUL or another of U+0000-U+001F besides tab and newline); "
        "remove it": [10],
    }


def test_labels_differing_only_in_normalisation_are_shown_apart() -> None:
    fm = report_dict()
    nfc = unicodedata.normalize("NFC", "caf\u00e9 " + fm["domains"][0]["label"])
    old = fm["domains"][0]["label"]
    fm["domains"][0]["label"] = nfc
    fm["buckets"] = [dict(b, domain=nfc) if b["domain"] == old else b for b in fm["buckets"]]
    fm["structural_features"][0]["label"] = unicodedata.normalize("NFC", "na\u00efve carry")
    report = WeaknessReport.model_validate(fm)
    rows = make_rows(report)
    nfd = unicodedata.normalize("NFD", nfc)
    feat_nfd = unicodedata.normalize("NFD", "na\u00efve carry")
    for r in rows:
        if r["info"]["domain"] == nfc:
            r["info"]["domain"] = nfd
        r["info"]["structural_features"] = [feat_nfd if f == "na\u00efve carry" else f
                                            for f in r["info"]["structural_features"]]
    gate = check_dataset(rows, report)
    pair = next(f.message for f in gate.failures if f.rule == "unknown_pair")
    feat = next(f.message for f in gate.failures if f.rule == "unknown_feature")
    assert ascii(nfd) in pair and ascii(nfc) in pair and "NFC" in pair
    assert ascii(feat_nfd) in feat and "NFC" in feat


def test_a_stop_message_quotes_a_capped_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "gen.log"
    log.write_text("start\n" + "y" * 5_000_000 + "\nTraceback (most recent call last):\nSystemExit: boom\n")
    tail = log_tail(log)
    assert len(tail) < 3000 and tail.endswith("SystemExit: boom") and "more characters in the log" in tail
    assert log_tail(tmp_path / "missing.log").startswith("(cannot read")


def test_a_bucket_label_differing_only_in_normalisation_is_shown_apart() -> None:
    fm = report_dict()
    nfc = unicodedata.normalize("NFC", "caf\u00e9 " + fm["domains"][0]["label"])
    old = fm["domains"][0]["label"]
    fm["domains"][0]["label"] = nfc
    fm["buckets"] = [dict(b, domain=unicodedata.normalize("NFD", nfc)) if b["domain"] == old else b for b in fm["buckets"]]
    failures = report_rule_failures(WeaknessReport.model_validate(fm))
    unknown = next(f.message for f in failures if f.rule == "bucket_unknown_pair")
    assert ascii(unicodedata.normalize("NFD", nfc)) in unknown and ascii(nfc) in unknown and "NFC" in unknown
