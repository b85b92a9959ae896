"""Issue 41: the report page treats the run dir as untrusted input.

Every value reaches the HTML through one escaping path (report/markup.py), numbers from
weakness_stats.json included; the tool's records are validated at the read (report/records.py);
page strings are capped and bidi controls neutralised; a corrupt hub_env.json leaves the page
standing; `report --out` writes only a file the tool owns (report/target.py)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from test_finalize_seeds import make_run

from selfimprove.phases.analyze import arm_weakness  # noqa: F401  (the page's fallback; imported so a rename fails here)
from selfimprove.phases.finalize import report_table
from selfimprove.report.collect import collect
from selfimprove.commands.report import table_or_error
from selfimprove.report.page import PAGE_PREFIX, render, write_report
from selfimprove.rundir import RunDir
from selfimprove.weakness import Rollout, weakness_stats

IMG = '<img src=http://127.0.0.1:9/leak onerror="document.title=1">'
ARMS = {"iter_0": [0.50], "iter_1": [0.56], "iter_2": [0.58], "run_a": [0.60], "run_b": [0.52], "run_c": [0.51]}


def _stats() -> dict:
    rows = [Rollout(step=s, question=f"what is {i} + {i}?", solved=(i + s) % 3 == 0, truncated=False, example_id=i)
            for s in range(4) for i in range(6)]
    return weakness_stats(rows)


def _run(tmp_path: Path) -> RunDir:
    """A finished synthetic run whose iter_2/weakness_stats.json holds iter_0's and iter_1's figures."""
    rd = make_run(tmp_path, ARMS)
    rd.iter(2).dir.mkdir(parents=True, exist_ok=True)
    (rd.iter(2).dir / "weakness_stats.json").write_text(json.dumps({"iteration": 2, "real": _stats(),
                                                                    "previous": _stats()}))
    return rd


def _page(rd: RunDir) -> str:
    return render(collect(rd, report_table(rd)))


def test_a_valid_weakness_stats_is_shown(tmp_path: Path) -> None:
    page = _page(_run(tmp_path))
    assert "weakness-table" in page and "iter_1 on its own generated rows" in page


# The four numbers issue 41 found put into the page raw, and a label the page shows.
FORGED = {
    "groups[].rollouts": lambda s: s["real"]["groups"][0].__setitem__("rollouts", IMG),
    "window rollouts": lambda s: s["real"]["window"].__setitem__("rollouts", IMG),
    "real.n_groups": lambda s: s["real"]["grouping"].__setitem__("groups", IMG),
    "own.window.rollouts": lambda s: s["previous"]["window"].__setitem__("rollouts", IMG),
    "group class": lambda s: s["real"]["groups"][0].__setitem__("class", IMG),
}


@pytest.mark.parametrize("where", list(FORGED))
def test_a_forged_weakness_stats_value_never_reaches_the_html_raw(tmp_path: Path, where: str) -> None:
    """The record fails its model at the read: the page says which file and what to do, escaped."""
    rd = _run(tmp_path)
    path = rd.iter(2).dir / "weakness_stats.json"
    data = json.loads(path.read_text())
    FORGED[where](data)
    path.write_text(json.dumps(data))
    problems: list[str] = []
    page = write_report(rd, report_table(rd), tmp_path / "page.html", problems=problems).read_text()
    assert "<img" not in page and "onerror=\"" not in page
    assert str(path) in page and "delete it" in page
    assert len(problems) == 1 and problems[0].startswith(f"{path}: field ")


def test_render_escapes_every_value_whatever_its_type(tmp_path: Path) -> None:
    """Past validation too: a string where the page formats a number is shown escaped, never raw."""
    rd = _run(tmp_path)
    data = collect(rd, report_table(rd))
    real = data["weakness"]["real"]
    real["groups"][0].update(rollouts=IMG, solve_rate=IMG, solve_rate_ci95=[IMG, IMG], group=IMG, **{"class": IMG})
    real["window"]["rollouts"], real["n_groups"] = IMG, IMG
    data["weakness"]["own"][0]["window"]["rollouts"] = IMG
    data["table"]["rows"][0].update(eval_acc=IMG, n_eval=IMG, acc_ci95=[IMG, 1])
    data["timeline"][0]["label"] = IMG
    page = render(data)
    assert "<img" not in page and "&lt;img" in page


def test_page_strings_are_capped_and_bidi_controls_neutralised(tmp_path: Path) -> None:
    """A 10 MB label made a 100 MB page in 23 s; U+202E reached the page raw."""
    rd = _run(tmp_path)
    data = collect(rd, report_table(rd))
    data["run"]["dataset"] = "gpj\u202e" + "x" * 10_000_000
    data["table"]["rows"][1]["label"] = "evil\u2066label\u2069\x1b[2J"
    start = time.monotonic()
    page = render(data)
    assert time.monotonic() - start < 5 and len(page) < 300_000
    assert "more characters not shown" in page
    for c in ("\u202e", "\u2066", "\u2069", "\x1b"):
        assert c not in page
    assert "&lt;U+202E&gt;" in page


def test_a_corrupt_hub_env_makes_the_timeline_partial_not_the_page_dead(tmp_path: Path) -> None:
    rd = _run(tmp_path)
    rd.hub_env_json.write_text("{not json")
    page = render(collect(rd, table_or_error(rd)))
    assert "The timeline is partial" in page and "hub_env.json" in page
    assert "Summary table</h2><p class=\"alert\">Not shown: " in page and "id=\"timeline\"" in page


def test_bad_gate_and_attempt_records_become_lines_not_crashes(tmp_path: Path) -> None:
    rd = _run(tmp_path)
    it = rd.iter(1).dir
    (it / "gate_attempts.json").write_text(json.dumps({"attempts": "many"}))
    (it / "gate_report.json").write_text(json.dumps({"passed": True, "failures": [IMG]}))
    problems: list[str] = []
    page = write_report(rd, report_table(rd), tmp_path / "p.html", problems=problems).read_text()
    assert "<img" not in page
    assert any(p.startswith(f"{it / 'gate_attempts.json'}: field 'attempts'") for p in problems)
    assert any(p.startswith(f"{it / 'gate_report.json'}: field 'failures.0'") for p in problems)


# ---------------------------------------------------------------- report --out


def _digest(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_out_over_the_runs_metrics_is_refused_and_metrics_unchanged(tmp_path: Path, cli) -> None:
    rd = _run(tmp_path)
    before = _digest(rd.root)
    for name in ("metrics.json", "run.json", "scratchpad.md"):
        res = cli("report", "--run-dir", rd.root, "--out", rd.root / name, "--force")
        assert res.exit_code == 2, res.stderr
        assert "inside the run dir" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert _digest(rd.root) == before
    assert rd.read_metrics().iters  # still valid


def test_out_over_another_runs_records_is_refused(tmp_path: Path, cli) -> None:
    rd = _run(tmp_path / "a")
    other = _run(tmp_path / "b")
    before = _digest(other.root)
    res = cli("report", "--run-dir", rd.root, "--out", other.root / "run.json", "--force")
    assert res.exit_code == 2 and "inside the run dir" in res.stderr
    assert _digest(other.root) == before


def test_out_refuses_a_file_it_did_not_write_unless_forced(tmp_path: Path, cli) -> None:
    rd = _run(tmp_path)
    notes = tmp_path / "notes.html"
    notes.write_text("<p>my notes</p>")
    res = cli("report", "--run-dir", rd.root, "--out", notes)
    assert res.exit_code == 2 and "not a report page selfimprove wrote" in res.stderr and "--force" in res.stderr
    assert notes.read_text() == "<p>my notes</p>"
    res = cli("report", "--run-dir", rd.root, "--out", notes, "--force")
    assert res.exit_code == 0, res.stderr
    assert notes.read_text().startswith(PAGE_PREFIX)


def test_out_replaces_its_own_page_and_keeps_its_mode(tmp_path: Path, cli) -> None:
    rd = _run(tmp_path)
    page = tmp_path / "page.html"
    assert cli("report", "--run-dir", rd.root, "--out", page).exit_code == 0
    page.chmod(0o600)
    first = page.read_text()
    time.sleep(0.01)
    res = cli("report", "--run-dir", rd.root, "--out", page)
    assert res.exit_code == 0, res.stderr
    assert stat.S_IMODE(page.stat().st_mode) == 0o600 and page.read_text().startswith(PAGE_PREFIX)
    assert page.read_text() != "" and first


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_out_refuses_anything_that_is_not_a_regular_file(tmp_path: Path, cli, kind: str) -> None:
    rd = _run(tmp_path)
    target = tmp_path / "target"
    elsewhere = tmp_path / "elsewhere.html"
    if kind == "directory":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        elsewhere.write_text("mine")
        target.symlink_to(elsewhere)
    res = cli("report", "--run-dir", rd.root, "--out", target, "--force")
    assert res.exit_code == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "unexpected" not in res.stderr
    if kind == "directory":
        assert target.is_dir() and not any(target.iterdir())
    elif kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(target).st_mode)
    else:
        assert target.is_symlink() and elsewhere.read_text() == "mine"


def test_report_prints_a_bad_record_as_one_warning_line(tmp_path: Path, cli) -> None:
    rd = _run(tmp_path)
    bad = rd.iter(2).dir / "weakness_stats.json"
    bad.write_text(json.dumps({"real": {"window": {"steps": [], "rollouts": IMG}}}))
    res = cli("report", "--run-dir", rd.root, "--out", tmp_path / "p.html")
    assert res.exit_code == 0, res.stderr
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and str(bad) in warnings[0] and "unexpected" not in res.stderr


def test_a_directory_in_place_of_the_runs_report_html_is_one_line(tmp_path: Path, cli) -> None:
    rd = _run(tmp_path)
    rd.report_html.mkdir()
    res = cli("report", "--run-dir", rd.root)
    assert res.exit_code == 2 and "report.html: a directory" in res.stderr and "--out" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and rd.report_html.is_dir()
