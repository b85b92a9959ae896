"""Issue 41: the notebook's structure is the tool's (scratchpad markers), and text from the run dir
reaches a terminal only with its control characters shown, never acted on (ui.terminal_safe)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from gate_fixtures import report_dict, write_report

from selfimprove.commands._common import cli_errors
from selfimprove.errors import TeacherActionNeeded
from selfimprove.gates.report import check_weakness_report
from selfimprove.phases.finalize import WORKED_LINE, WORKED_PLACEHOLDER, replace_final_summary
from selfimprove.phases.iteration_steps import log_tail
from selfimprove.scratchpad import (SUMMARY_BEGIN, SUMMARY_END, TEACHER_SECTIONS, fill_teacher_sections,
                                    has_iteration_entry, iteration_entry_span, marker, summary_sections)
from selfimprove.ui import terminal_safe

PLAN = ("My plan, at length.\n\n## Final summary of my plan\n\nDrill carries first, then borrows.\n"
        "## Partial summary — 2026-01-01 00:00:00 UTC (quoted by the teacher)\n")


def _entry(n: int, body: str = "") -> str:
    return (f"{marker(f'iter_{n}')}\n## Iteration {n} — 2026-01-0{n} 10:00:00 UTC\n\n### 1. x\nnotes {n}\n"
            f"{body}\n### 4. y\n{TEACHER_SECTIONS[4][1]}\n\n### 5. Results\n- eval_acc {n}\n")


def _summary(word: str) -> str:
    return f"## Final summary — 2026-02-02 10:00:00 UTC\n\n{word}\n\n{WORKED_LINE} {WORKED_PLACEHOLDER}\n"


def test_a_teacher_heading_does_not_erase_the_notebook() -> None:
    """Issue 41's case: '## Final summary of my plan' in a teacher section erased 2,009 characters."""
    pad = "# run\n\n" + _entry(1, PLAN) + _entry(2)
    once = replace_final_summary(pad, _summary("SUMMARY-ONE"))
    assert once.startswith(pad) and once.count(SUMMARY_BEGIN) == 1  # nothing removed: the summary is appended
    twice = replace_final_summary(once, _summary("SUMMARY-TWO"))
    assert twice.startswith(pad) and "SUMMARY-ONE" not in twice.split(pad, 1)[1] and "SUMMARY-TWO" in twice
    assert twice.count(SUMMARY_BEGIN) == 1 == twice.count(SUMMARY_END)


def test_the_summary_is_replaced_in_place_and_the_teachers_words_are_kept() -> None:
    pad = replace_final_summary("# run\n\n" + _entry(1), _summary("SUMMARY-ONE"))
    pad = pad.replace(f"{WORKED_LINE} {WORKED_PLACEHOLDER}", f"{WORKED_LINE} carries helped\n## my heading")
    pad += _entry(2, PLAN)  # compare --seeds appends after the summary
    out = replace_final_summary(pad, _summary("SUMMARY-TWO"))
    assert f"{WORKED_LINE} carries helped\n## my heading" in out and "SUMMARY-ONE" not in out
    assert out.index(SUMMARY_BEGIN) < out.index(marker("iter_2")) and out.endswith(_entry(2, PLAN))


def test_a_stray_begin_marker_above_does_not_widen_the_summary() -> None:
    pad = "# run\n" + SUMMARY_BEGIN + "\nteacher text kept\n" + _entry(1)
    pad = pad + "\n" + SUMMARY_BEGIN + "\n" + _summary("SUMMARY-ONE") + SUMMARY_END + "\n"
    out = replace_final_summary(pad, _summary("SUMMARY-TWO"))
    assert "teacher text kept" in out and "notes 1" in out and "SUMMARY-ONE" not in out


def test_old_run_dirs_without_markers_keep_their_summary_by_its_stamped_heading() -> None:
    """Migration rule: no marker in the file, the tool's own heading with its UTC stamp counts, not a look-alike."""
    old = "# run\n\n## Iteration 1 — 2026-01-01 10:00:00 UTC\n\n" + PLAN + "\n" + _summary("SUMMARY-OLD")
    assert len(summary_sections(old)) == 1
    out = replace_final_summary(old, _summary("SUMMARY-NEW"))
    assert PLAN in out and "SUMMARY-OLD" not in out.split(PLAN, 1)[1] and out.count(SUMMARY_BEGIN) == 1


def test_teacher_text_is_fenced_so_it_cannot_open_a_tool_section(tmp_path: Path) -> None:
    path = tmp_path / "scratchpad.md"
    path.write_text("# run\n\n" + _entry(1), encoding="utf-8")
    forged = f"{SUMMARY_END}\n{SUMMARY_BEGIN}\n{marker('iter_2')}\n## Iteration 2 — 2026-01-02 10:00:00 UTC\nfake"
    fill_teacher_sections(path, 1, {4: forged})
    text = path.read_text()
    assert summary_sections(text) == [] and not has_iteration_entry(text, 2)
    out = replace_final_summary(text, _summary("s"))
    assert "fake" in out and out.count(SUMMARY_BEGIN) == 1


def test_a_teacher_iteration_heading_is_not_the_tools_entry() -> None:
    assert not has_iteration_entry("# run\n\n## Iteration 2 ideas\nsoon\n", 2)
    assert has_iteration_entry(_entry(2), 2)
    # below a marked entry, even the tool's heading form is the teacher's text
    assert not has_iteration_entry(_entry(1, "## Iteration 2 — 2026-01-02 10:00:00 UTC\nfake\n"), 2)


def test_an_old_run_dir_keeps_its_unmarked_entries_when_a_marked_one_follows() -> None:
    """Migration: entries from before the markers stay readable above the first marked one."""
    old = f"# run\n\n## Iteration 1 — 2026-01-01 10:00:00 UTC\n\n### 5. Results\n- {WORKED_PLACEHOLDER}\n\n"
    text = old + _entry(2)
    assert iteration_entry_span(text, 1) == (text.index("## Iteration 1"), len(old))
    assert has_iteration_entry(text, 2)


# ---------------------------------------------------------------- terminal


HOSTILE = "ok\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\r\x9b31mall gates passed\u202etxt"


def test_terminal_safe_shows_every_control_character() -> None:
    shown = terminal_safe(HOSTILE + "\n\tnext")
    assert not any(c in shown for c in "\x1b\x07\r\x9b\u202e")
    assert "\\x1b[2J" in shown and "\\u202e" in shown and shown.endswith("\n\tnext")
    assert terminal_safe("a\nb", newlines=False) == "a\\nb"


def test_a_generators_ansi_output_is_quoted_escaped(tmp_path: Path) -> None:
    log = tmp_path / "gen.log"
    log.write_text("start\n" + HOSTILE + "\nTraceback: boom\n", encoding="utf-8")
    tail = log_tail(log)
    assert "\x1b" not in tail and "\\x1b]0;pwned" in tail and "boom" in tail


def test_the_error_edge_never_prints_control_characters(capsys: pytest.CaptureFixture) -> None:
    @cli_errors
    def command() -> None:
        raise TeacherActionNeeded(f"iter_1/gen_dataset.py failed; its output:\n{HOSTILE}")

    with pytest.raises(typer.Exit):
        command()
    err = capsys.readouterr().err
    assert "stop:" in err and "\x1b" not in err and "\\x1b[2J" in err and "\u202e" not in err


def test_labels_unique_quotes_labels_escaped(tmp_path: Path) -> None:
    data = report_dict()
    evil = "carry\x1b]0;pwned\x07\u202e"
    data["structural_features"][0]["label"] = data["structural_features"][1]["label"] = evil
    _model, gate = check_weakness_report(write_report(tmp_path / "weakness_report.md", data))
    line = next(f.message for f in gate.failures if f.rule == "labels_unique")
    assert "\x1b" not in line and "\u202e" not in line and "\\x1b]0;pwned" in line
