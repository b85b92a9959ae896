"""Decontamination without an oracle (issue 23.5): the generate step drops generated rows that overlap the
evaluated questions itself and tells the teacher how many, never which.

Unit tests of gates/decontam.py, then the step machine on the fake engine's baseline run (loop_helpers):
the selfimprove-arith eval split is read here by the test, as the sealed questions a teacher must not copy.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gate_fixtures import make_rows, valid_report
from loop_helpers import TESTS, write_teacher_files

from selfimprove.errors import GateFailed, TeacherActionNeeded
from selfimprove.gates import check_dataset, eval_ngram_index, load_dataset_jsonl
from selfimprove.gates.decontam import drop_eval_overlap
from selfimprove.gates.dedup import find_eval_overlap
from selfimprove.phases import iteration_steps
from selfimprove.phases.context import RunContext
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir

EVAL = ["28-65", "17+90",
        "A lighthouse keeper logs 41 ships passing the northern cape each week and 17 more on Sundays; how many ships?"]


def _lines(rows: list[dict]) -> list[str]:
    return [json.dumps(r) + "\n" for r in rows]


def test_overlapping_rows_are_dropped_and_the_rest_kept_byte_for_byte(tmp_path: Path) -> None:
    """Both rules drop (n-gram overlap, a whole eval question in a frame); kept lines keep their bytes and
    order, blank and unparseable lines included, and rows are numbered as the dataset gate numbers them."""
    rows = make_rows()[:12]
    copy = dict(rows[0], question=EVAL[2].replace("41", "42"))  # rule 2: near-verbatim copy
    framed = dict(rows[0], question="What is 17+90?")  # rule 3: an eval question in a frame
    whole = dict(rows[0], question="28 - 65")  # a short eval question, compared whole
    lines = _lines(rows[:3]) + [_lines([copy])[0], "\n", "not json\r\n"] + _lines(rows[3:8]) + _lines([framed])
    lines += ["[1, 2]\n"] + _lines(rows[8:]) + [json.dumps(whole)]  # no newline at the end
    ds = tmp_path / "dataset.jsonl"
    ds.write_text("".join(lines), newline="")
    before, _ = load_dataset_jsonl(ds)
    index = eval_ngram_index(EVAL)
    flagged = find_eval_overlap(before, index).rows
    assert flagged == [3, 9, 14]

    assert drop_eval_overlap(ds, index) == 3
    kept = [ln for ln in lines if ln not in (_lines([copy])[0], _lines([framed])[0], json.dumps(whole))]
    assert ds.read_bytes() == "".join(kept).encode()
    after, load_failures = load_dataset_jsonl(ds)
    assert after == [r for i, r in enumerate(before) if i not in flagged] == rows
    assert {f.rule for f in load_failures} == {"jsonl_line"}  # the gate still reports the bad lines
    assert drop_eval_overlap(ds, index) == 0  # idempotent


def test_a_clean_dataset_is_not_rewritten(tmp_path: Path) -> None:
    ds = tmp_path / "dataset.jsonl"
    ds.write_text("".join(_lines(make_rows())) + "\n")
    data, inode, mtime = ds.read_bytes(), ds.stat().st_ino, ds.stat().st_mtime_ns
    assert drop_eval_overlap(ds, eval_ngram_index(EVAL)) == 0
    assert (ds.read_bytes(), ds.stat().st_ino, ds.stat().st_mtime_ns) == (data, inode, mtime)


def test_a_non_utf8_dataset_is_left_for_the_gate(tmp_path: Path) -> None:
    ds = tmp_path / "dataset.jsonl"
    data = b'{"question": "28-65"}\n\xff\xfe\n'
    ds.write_bytes(data)
    assert drop_eval_overlap(ds, eval_ngram_index(EVAL)) == 0 and ds.read_bytes() == data
    _, failures = load_dataset_jsonl(ds)
    assert [f.rule for f in failures] == ["jsonl_file"]  # refused before any row is compared


def test_row_count_after_a_drop_names_the_count() -> None:
    rows = make_rows(per_bucket=83)  # 498 rows
    g = check_dataset(rows, valid_report(), dropped_eval_overlap=30)
    [line] = [f for f in g.failures if f.rule == "row_count"]
    assert line.message == ("498 rows after the tool dropped 30 that overlap the evaluated questions; "
                            "need 500-1000: generate more rows") and line.rows == []
    [line] = [f for f in check_dataset(rows, valid_report()).failures if f.rule == "row_count"]
    assert line.message == "498 rows; need 500-1000"


# ---------------------------------------------------------------- in the step machine

# The teacher's generator: valid rows with copies of evaluated questions at POSITIONS (rows of the file it writes).
GENERATOR = f"""
import json, sys
sys.path.insert(0, {str(TESTS)!r})
from gate_fixtures import make_rows, valid_report
failed = [json.loads(line) for line in open("failures.jsonl")]
rows = make_rows(valid_report(), per_bucket={{per_bucket}}, skeleton_origins=[(f["step"], f["idx"]) for f in failed])
for pos, question in zip({{positions!r}}, {{questions!r}}):
    rows.insert(pos, dict(rows[0], question=question))
with open("dataset.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\\n")
"""
POSITIONS = [137, 251, 379, 463, 587]  # rows of the generator's output, to look for in what the tool writes


def _eval_questions(n: int) -> list[str]:
    from selfimprove_arith import make_split

    qs = [q for q, _ in make_split("eval")][:n]
    return [q if k % 2 else f"Compute {q} and give the result." for k, q in enumerate(qs)]  # copies and frames


def _teacher_turn(run: RunDir, positions: list[int], per_bucket: int = 100) -> Path:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    write_teacher_files(it)
    (it / "gen_dataset.py").write_text(GENERATOR.format(per_bucket=per_bucket, positions=positions,
                                                        questions=_eval_questions(len(positions))))
    return it


def _generator_output(it: Path, tmp_path: Path) -> bytes:
    """What the teacher's generator writes when the teacher runs it itself."""
    work = tmp_path / "teacher_copy"
    work.mkdir()
    for name in ("gen_dataset.py", "failures.jsonl"):
        (work / name).write_bytes((it / name).read_bytes())
    subprocess.run([sys.executable, "gen_dataset.py"], cwd=work, check=True)
    return (work / "dataset.jsonl").read_bytes()


def _no_row_numbers(texts: dict[str, str], numbers: list[int]) -> None:
    """None of `numbers` appears as a number of its own (not inside a hash or a float) in any text."""
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(str, numbers)) + r")(?![\w.])")
    hits = {name: pattern.findall(text) for name, text in texts.items()}
    assert not any(hits.values()), hits


def test_generate_drops_overlapping_rows_and_records_the_count_only(run: RunDir, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    it = _teacher_turn(run, POSITIONS)
    generated = _generator_output(it, tmp_path)
    result = iterate(run, quiet=False)  # the dropped rows are gone before any gate: the 600 valid rows pass
    assert result.kind == "ended", result.message

    rec = json.loads((it / "generate.json").read_text())
    assert set(rec) == {"gen_sha256", "dataset_sha256", "rows_generated", "rows_dropped_eval_overlap", "rows", "seconds",
                        "reads"}  # reads: {file the generator read: sha256}, no row (checked with the text below)
    assert (rec["rows_generated"], rec["rows_dropped_eval_overlap"], rec["rows"]) == (605, 5, 600)
    kept = [ln for k, ln in enumerate(generated.splitlines(keepends=True)) if k not in POSITIONS]
    assert (it / "dataset.jsonl").read_bytes() == b"".join(kept)
    assert run.read_metrics().get("iter_1").rows == 600
    out = capsys.readouterr().err  # progress lines go to stderr (ui.console)
    assert "iter_1: dropped 5 of 605 generated rows that overlap the evaluated questions (600 kept)" in out

    gate = json.loads((it / "gate_report.json").read_text())
    assert gate["passed"] and gate["stats"]["eval_overlap"]["flagged_rows"] == 0
    assert all(f["rows"] == [] for f in gate["failures"])
    pad = run.scratchpad.read_text()
    assert "- rows: 600 (5 dropped by the tool: they overlap the evaluated questions)" in pad
    record = json.loads((it / "record.json").read_text())
    assert (record["rows"], record["rows_dropped_eval_overlap"]) == (600, 5)
    # Nothing the tool wrote about the data names a dropped row or quotes an evaluated question (training
    # logs and eval_summary.json are left out: they hold unrelated numbers that could collide with POSITIONS).
    texts = {name: (it / name).read_text() for name in ("generate.json", "gen.log", "gate_report.json",
                                                         "gate_report.txt", "package.json", "record.json")}
    texts |= {"scratchpad.md": pad, "stderr": out, "message": result.message}
    _no_row_numbers(texts, POSITIONS)
    for question in _eval_questions(len(POSITIONS)):
        assert not any(question in t for t in texts.values()), question


def test_too_few_rows_after_the_drop_fail_the_gate_with_the_count(run: RunDir) -> None:
    it = _teacher_turn(run, POSITIONS[:4], per_bucket=83)  # 498 valid rows + 4 evaluated ones
    with pytest.raises(GateFailed) as exc:
        iterate(run, quiet=True)
    message = str(exc.value)
    assert "498 rows after the tool dropped 4 that overlap the evaluated questions; need 500-1000: generate more rows" in message
    assert "eval_overlap" not in message and "eval_contained" not in message
    gate = json.loads((it / "gate_report.json").read_text())
    assert {f["rule"] for f in gate["failures"]} & {"eval_overlap", "eval_contained"} == set()
    [row_count] = [f for f in gate["failures"] if f["rule"] == "row_count"]
    assert row_count["rows"] == []
    _no_row_numbers({"message": message, "gate_report.txt": (it / "gate_report.txt").read_text(),
                     "generate.json": (it / "generate.json").read_text()}, POSITIONS[:4])


def test_a_clean_dataset_is_kept_as_the_generator_wrote_it(run: RunDir, tmp_path: Path) -> None:
    it = _teacher_turn(run, [])
    generated = _generator_output(it, tmp_path)
    rec = iteration_steps.generate(RunContext.load(run), run.iter(1), timeout=300)
    assert (rec["rows_generated"], rec["rows_dropped_eval_overlap"], rec["rows"]) == (600, 0, 600)
    assert (it / "dataset.jsonl").read_bytes() == generated


def test_a_kill_after_the_drop_regenerates_cleanly(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed between the rewrite of dataset.jsonl and generate.json: the step is not done, so the re-run
    runs the generator again and drops again (no second drop from already-kept rows, same count)."""
    it = _teacher_turn(run, POSITIONS)

    kills = []

    def killed_once_at(name: str) -> None:
        if name == "generate" and not kills:
            kills.append(name)
            raise KeyboardInterrupt

    monkeypatch.setattr(iteration_steps, "fault_point", killed_once_at)
    with pytest.raises(KeyboardInterrupt):
        iterate(run, quiet=True)
    assert not (it / "generate.json").exists() and not iteration_steps.generated_is_current(run.iter(1))
    assert json.loads((it / "dataset.jsonl").read_text().splitlines()[0])  # the kept rows were written
    rec = iteration_steps.generate(RunContext.load(run), run.iter(1), timeout=300)
    assert (rec["rows_generated"], rec["rows_dropped_eval_overlap"], rec["rows"]) == (605, 5, 600)
    assert iteration_steps.generated_is_current(run.iter(1))
