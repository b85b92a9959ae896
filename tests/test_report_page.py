"""The run report page (report/page.py, `selfimprove report`, written by finalize): what it says on a
finished run and on a run stopped after iter_1, that it holds nothing sealed and no URL, and that it
renders in a real browser (headless Chromium) with no request leaving the page and no console message.

The browser tests save screenshots under $SELFIMPROVE_TEST_ARTEFACTS/report (default: the temp dir's
selfimprove-test-artefacts/report) and print where.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from selfimprove.phases.finalize import report_table
from selfimprove.report.page import write_report
from selfimprove.rundir import RunDir

from browser import Elements, chromium, visit
from report_runs import CANARY, report_runs, report_tables  # noqa: F401

pytestmark = pytest.mark.slow  # the fixture trains 5 arms with the fake engine (~40 s) besides the shared baseline

ARTEFACTS = Path(os.environ.get("SELFIMPROVE_TEST_ARTEFACTS") or Path(tempfile.gettempdir()) / "selfimprove-test-artefacts") / "report"
URL_ATTR = re.compile(r"""(?:src|href|action|poster|srcset|data)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def arms(table: dict) -> list[str]:
    return [r["arm"] for r in table["rows"]]


@pytest.fixture(scope="module")
def pages(report_runs, report_tables) -> dict[str, Path]:
    """Each run's page, written once (to a file beside report.html, which finalize wrote)."""
    return {kind: write_report(rd, report_tables[kind], rd.root / "test-report.html") for kind, rd in report_runs.items()}


def test_finalize_wrote_the_report_of_the_finished_run(report_runs, report_tables) -> None:
    rd = report_runs["finished"]
    assert f"report: {rd.report_html}" in (rd.root / "finalize.out").read_text().splitlines()  # and printed its path
    html = rd.report_html.read_text()
    table = report_tables["finished"]
    assert table["verdict"]["sentence"][1:] in html and "Recommended checkpoint" in html
    for arm in arms(table):
        assert f'data-arm="{arm}"' in html
    assert "Not in this report yet" not in html  # a finished run misses nothing


def test_the_report_command_writes_the_page_and_prints_its_path(report_runs, cli, tmp_path: Path) -> None:
    rd = report_runs["iter1"]
    res = cli("report", "--run-dir", rd.root, "--out", tmp_path / "r.html")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == f"report: {tmp_path / 'r.html'}"
    assert "No verdict yet" in (tmp_path / "r.html").read_text()
    assert not (rd.root / "report.html").exists()  # --out: nothing else written
    res = cli("report", "--run-dir", rd.root, "--out", tmp_path / "no-such-dir" / "r.html")
    assert res.exit_code == 2 and "--out" in res.stderr and "does not exist" in res.stderr


@pytest.mark.parametrize("kind", ["finished", "iter1"])
def test_the_page_is_self_contained_and_holds_nothing_sealed(report_runs, pages, kind: str) -> None:
    """No URL to fetch, no script, no external style; no eval row's text (the fake engine plants a canary in each)."""
    rd = report_runs[kind]
    html = pages[kind].read_text()
    assert not URL_ATTR.search(html) and "url(" not in html and "@import" not in html
    assert "<script" not in html and "<link" not in html and "http://" not in html and "https://" not in html
    # the finished run's page may quote eval rows in its sealed part only (the fake engine scores Run A and
    # Run C alike, so none flips there); the open run's page never does
    outside = re.sub(r'<h2 id="flips">.*?(?=<h2 id="timeline">)', "", html, flags=re.S)
    assert CANARY not in outside
    assert CANARY in "".join(p.read_text() for p in rd.root.rglob("eval_rollouts.jsonl"))  # it was there to leak


def test_a_run_stopped_after_iter1_says_what_is_missing(report_runs, report_tables, pages) -> None:
    rd = report_runs["iter1"]
    html = pages["iter1"].read_text()
    assert "No verdict yet" in html and "Not in this report yet" in html
    assert f"selfimprove compare --run-dir {rd.root}" in html and f"selfimprove finalize --run-dir {rd.root}" in html
    assert arms(report_tables["iter1"]) == ["iter_0", "iter_1"]
    assert 'id="iter-1"' in html and "iter_1: done" in html
    # an open run: where it stands as `selfimprove status` says it, and no sealed part (the teacher may read the page)
    assert 'id="progress"' in html and "status <b>running" not in html and 'id="flips"' not in html


def test_each_iteration_links_to_what_the_teacher_read_and_wrote(report_runs, pages) -> None:
    """The real fixture's iter_1: the teacher's report, the failures it read, the rows it generated and the
    gate's report, each collapsed and counted; the bucket table's failure mode is the teacher's own text."""
    rd = report_runs["iter1"]
    html = pages["iter1"].read_text()
    n_failures = sum(1 for line in (rd.iter(1).dir / "failures.jsonl").read_text().splitlines() if line.strip())
    n_rows = sum(1 for line in (rd.iter(1).dir / "dataset.jsonl").read_text().splitlines() if line.strip())
    assert f"TRAIN failures the teacher read: 5 shown of {n_failures} (iter_1/failures.jsonl" in html
    assert f"Generated rows: 5 shown of {n_rows} (iter_1/dataset.jsonl" in html
    assert "<summary>The teacher's weakness report (iter_1/weakness_report.md)</summary>" in html
    assert "<summary>The dataset gate's report (iter_1/gate_report.txt)</summary>" in html
    assert "<td>the student drops step 0 of domain 0</td>" in html  # gate_fixtures.report_dict's failure_mode
    assert 'href="#iter-1"' in html and 'href="#verdict"' in html


def test_the_finished_page_shows_run_a_vs_run_c_sealed_from_the_teacher(report_runs, pages) -> None:
    html = pages["finished"].read_text()
    flips = html[html.index('id="flips"'):html.index('id="timeline"')]
    assert "Sealed from the teacher: shown only after the loop ended." in flips
    n = report_runs["finished"].read_eval_summary(report_runs["finished"].arm("run_a")).n_examples
    assert f"n = {n} examples both arms scored" in flips


def test_a_bootstrapped_run_gets_a_page_that_says_introspect_is_next(new_run) -> None:
    rd = RunDir(new_run())
    html = write_report(rd, report_table(rd)).read_text()
    assert "introspect has not run" in html and "No arm has been evaluated yet" in html


def test_an_iteration_waiting_for_the_teacher_then_failing_a_gate(run) -> None:
    """iter_1 at the teacher stop: the page says so and shows no skeleton buckets; after a generator that
    breaks a dataset rule, it shows the teacher's buckets and the failed gate with its rule."""
    from selfimprove.errors import GateFailed, TeacherActionNeeded
    from selfimprove.phases.iterate import iterate

    from loop_helpers import write_teacher_files

    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    html = write_report(run, report_table(run)).read_text()
    assert "iter_1: waiting for the teacher" in html and "has not submitted weakness_report.md" in html
    assert 'class="buckets"' not in html
    write_teacher_files(run.iter(1).dir, break_rules=("hard",))
    with pytest.raises(GateFailed):
        iterate(run, quiet=True)
    html = write_report(run, report_table(run)).read_text()
    assert "iter_1: stopped: the dataset gate failed" in html and 'class="buckets"' in html
    assert "dataset gate: <span class=\"fail\">failed</span>" in html and "[seed_hard]" in html
    assert "Attempts: report gate 1 (passed); dataset gate 1 (failed: seed_hard)." in html
    # the same files checked again are not a new attempt
    with pytest.raises(GateFailed):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir, break_rules=("round_trip",))  # a fix that breaks another rule
    with pytest.raises(GateFailed):
        iterate(run, quiet=True)
    html = write_report(run, report_table(run)).read_text()
    assert "dataset gate 2 (failed: seed_hard; failed: round_trip_no_answer)" in html, html[html.find("Attempts"):][:300]


# ---------------------------------------------------------------- in a real browser

def _need_chromium() -> None:
    if not chromium():
        pytest.skip("chromium not installed (make test-deps installs it with apt-get, as root)")


def test_the_browser_check_sees_a_request_and_a_console_message(tmp_path: Path) -> None:
    """The harness itself: a page that fetches an image and logs an error is caught on both counts."""
    _need_chromium()
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p>bad</p><img src="http://example.com/pixel.png">'
                   '<script>console.error("report-test-console-error")</script></body></html>')
    seen = visit(bad, tmp_path / "chromium")
    assert any("example.com" in r for r in seen.requests), seen.requests
    assert any("report-test-console-error" in line for line in seen.console), seen.console


@pytest.mark.parametrize("kind", ["finished", "iter1"])
def test_the_report_renders_in_chromium(report_tables, pages, kind: str, tmp_path: Path, capsys) -> None:
    _need_chromium()
    page = pages[kind]
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / f"report-{kind}.png"
    shot.unlink(missing_ok=True)
    seen = visit(page, tmp_path / "chromium", screenshot=shot)
    with capsys.disabled():
        print(f"\nreport screenshot: {shot}")
    dom = Elements(seen.dom)
    assert seen.requests == [], f"the page made requests: {seen.requests}"
    assert seen.console == [], f"console messages: {seen.console}"
    table = report_tables[kind]
    verdict = dom.having("p", class_="verdict")
    assert len(verdict) == 1
    if table["verdict"]:
        assert table["verdict"]["sentence"][1:] in dom.text
    else:
        assert "No verdict yet" in dom.text
    names = arms(table)
    assert [row["data-arm"] for row in dom.having("tr") if "data-arm" in row] == names  # the table's rows, in order
    assert [f["data-arm"] for f in dom.having("figure", class_="curve")] == names  # one chart per arm
    charts = [svg for svg in dom.having("svg", class_="chart") if not {"timeline", "overlay"} & set(svg["class"].split())]
    assert len(charts) == len(names)
    assert len(dom.having("svg", class_="overlay")) == 1  # every arm's eval accuracy on one chart
    assert {c["data-arm"] for c in dom.having("circle", class_="arm-point")} == set(names)
    assert len(dom.having("circle", class_="eval-point")) >= len(names)  # each chart has its eval point
    assert dom.having("svg", class_="timeline")
    assert shot.is_file() and shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
