"""Round 5 (issue 41), the page, the notebook and the terminal: a run dir is untrusted input. Loaded by
bench/hostile.py; select with `-k "r5 page:"`.

What a case asserts beyond the runner's checks (exit code, one-line message naming the file or flag,
run dir unchanged on a refusal) it asserts in its setup, on a first run of the command, before the
runner runs the last one: the page holds no raw forged markup, the notebook keeps the teacher's text,
the terminal gets no control character."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hostile import case, cli, copy_run, edit_json
from hostile_r3_state import finished_run

P = "r5 page: "
IMG = '<img src=http://127.0.0.1:9/leak onerror="document.title=1">'
ESC = "\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]8;;http://x\x1b\\all gates passed\x1b]8;;\x1b\\\u202e"


def _stats_run(tmp: Path, forge=None) -> Path:
    """A finished synthetic run with iter_1/weakness_stats.json (iter_0's figures), forged by `forge`."""
    from test_untrusted_page import _stats  # tests/ is on sys.path while a case is set up

    run = finished_run(tmp)
    stats = {"iteration": 1, "real": _stats(), "previous": None}
    if forge:
        forge(stats)
    (run / "iter_1").mkdir(exist_ok=True)
    (run / "iter_1" / "weakness_stats.json").write_text(json.dumps(stats))
    return run


# ---------------------------------------------------------------- 1. report --out writes only what it owns


for name in ("metrics.json", "run.json", "scratchpad.md"):
    @case(f"{P}report --out RUN/{name} --force", ("--out", name), code=2)
    def _(tmp, t, name=name):
        run = finished_run(tmp)
        return ["report", "--run-dir", str(run), "--out", str(run / name), "--force"], run


@case(f"{P}report --out another run's run.json", ("--out", "run.json"), code=2)
def _(tmp, t):
    run, other = finished_run(tmp / "a"), finished_run(tmp / "b")
    return ["report", "--run-dir", str(run), "--out", str(other / "run.json"), "--force"], other


@case(f"{P}report --out a file it did not write", ("--force",), code=2)
def _(tmp, t):
    run = finished_run(tmp)
    (tmp / "notes.html").write_text("<p>mine</p>")
    return ["report", "--run-dir", str(run), "--out", str(tmp / "notes.html")], tmp


@case(f"{P}report --out a directory", ("--out",), code=2)
def _(tmp, t):
    run = finished_run(tmp)
    (tmp / "pages").mkdir()
    return ["report", "--run-dir", str(run), "--out", str(tmp / "pages")], tmp


@case(f"{P}report --out a fifo (a /dev/null-like node)", ("--out", "regular file"), code=2)
def _(tmp, t):
    run = finished_run(tmp)
    os.mkfifo(tmp / "node")
    return ["report", "--run-dir", str(run), "--out", str(tmp / "node"), "--force"], tmp


@case(f"{P}report --out a symlink to another file", ("--out", "link"), code=2)
def _(tmp, t):
    run = finished_run(tmp)
    (tmp / "target.txt").write_text("mine")
    (tmp / "link.html").symlink_to(tmp / "target.txt")
    return ["report", "--run-dir", str(run), "--out", str(tmp / "link.html"), "--force"], tmp


@case(f"{P}report --out its own page again keeps the mode", bad=False)
def _(tmp, t):
    run = finished_run(tmp)
    page = tmp / "page.html"
    assert cli(["report", "--run-dir", str(run), "--out", str(page)], tmp).returncode == 0
    page.chmod(0o600)
    p = cli(["report", "--run-dir", str(run), "--out", str(page)], tmp)
    assert p.returncode == 0 and (page.stat().st_mode & 0o777) == 0o600, (p.stderr, oct(page.stat().st_mode))
    return ["report", "--run-dir", str(run), "--out", str(page)], None


@case(f"{P}report --out a stranger's file with --force", bad=False)
def _(tmp, t):
    run = finished_run(tmp)
    (tmp / "old.html").write_text("old")
    return ["report", "--run-dir", str(run), "--out", str(tmp / "old.html"), "--force"], None


# ---------------------------------------------------------------- 2. the page escapes by construction


FORGED = {
    "groups[].rollouts": lambda s: s["real"]["groups"][0].__setitem__("rollouts", IMG),
    "window.rollouts": lambda s: s["real"]["window"].__setitem__("rollouts", IMG),
    "grouping.groups": lambda s: s["real"]["grouping"].__setitem__("groups", IMG),
    "a label with U+202E": lambda s: s["real"]["groups"][0].__setitem__("group", "gpj.\u202eexe" + "x" * 3_000_000),
}
for where, forge in FORGED.items():
    @case(f"{P}report on a forged weakness_stats {where}", bad=False)
    def _(tmp, t, forge=forge):
        run = _stats_run(tmp, forge)
        page = tmp / "page.html"
        p = cli(["report", "--run-dir", str(run), "--out", str(page)], tmp)
        html = page.read_text()
        assert p.returncode == 0 and "<img" not in html and "\u202e" not in html and len(html) < 300_000, p.stderr
        return ["report", "--run-dir", str(run), "--out", str(page)], None


@case(f"{P}report with a corrupt hub_env.json: the timeline is partial", bad=False)
def _(tmp, t):
    run = finished_run(tmp)
    (run / "hub_env.json").write_text("{broken")
    p = cli(["report", "--run-dir", str(run), "--out", str(tmp / "p.html")], tmp)
    assert p.returncode == 0 and "The timeline is partial" in (tmp / "p.html").read_text(), p.stderr
    return ["report", "--run-dir", str(run), "--out", str(tmp / "p.html")], None


@case(f"{P}report with gate_attempts.json of the wrong type: a warning line", bad=False)
def _(tmp, t):
    run = _stats_run(tmp)
    (run / "iter_1" / "gate_attempts.json").write_text(json.dumps({"attempts": 7}))
    p = cli(["report", "--run-dir", str(run), "--out", str(tmp / "p.html")], tmp)
    assert p.returncode == 0 and "unexpected" not in p.stderr and "gate_attempts.json: field 'attempts'" in p.stderr
    return ["report", "--run-dir", str(run), "--out", str(tmp / "p.html")], None


# ---------------------------------------------------------------- 3. the notebook's structure is the tool's


PLAN = "My plan.\n\n## Final summary of my plan\n\n" + "Drill carries, then borrows. " * 60 + "\n"


def _teacher_heading_run(tmp: Path) -> tuple[Path, str]:
    run = finished_run(tmp)
    entry = ("<!-- selfimprove:iter_1 -->\n## Iteration 1 — 2026-01-01 10:00:00 UTC\n\n### 3. Plan for the data\n"
             f"{PLAN}\n### 4. Hyperparameter / reward changes + rationale\nnone.\n\n### 5. Results\n- kept\n")
    pad = (run / "scratchpad.md").read_text() + entry
    (run / "scratchpad.md").write_text(pad)
    return run, pad


@case(f"{P}finalize after a teacher's '## Final summary of my plan'", bad=False, may_change=True)
def _(tmp, t):
    run, pad = _teacher_heading_run(tmp)
    return ["finalize", "--run-dir", str(run), "--no-plot"], run


@case(f"{P}finalize, compare --seeds 2, finalize: the teacher's plan is kept", ("compare",), code=6, may_change=True)
def _(tmp, t):
    run, pad = _teacher_heading_run(tmp)
    assert cli(["finalize", "--run-dir", str(run), "--no-plot"], tmp).returncode == 0
    edit_json(seeds=2)(run / "run.json")
    p = cli(["finalize", "--run-dir", str(run), "--no-plot"], tmp)
    after = (run / "scratchpad.md").read_text()
    assert p.returncode == 6 and after.startswith(pad), after[len(pad) - 200:]
    assert after.count("<!-- selfimprove:summary begin -->") == 1
    return ["finalize", "--run-dir", str(run), "--no-plot"], run


# ---------------------------------------------------------------- 4. nothing acts on the terminal


def _stopped_with(tmp: Path, t, damage) -> Path:
    from loop_helpers import write_teacher_files

    run = copy_run(t.stop1, tmp)
    write_teacher_files(run / "iter_1")
    damage(run / "iter_1")
    return run


def _no_control(tmp: Path, run: Path, code: int) -> None:
    p = cli(["iterate", "--run-dir", str(run)], tmp)
    assert p.returncode == code and "\x1b" not in p.stderr and "\u202e" not in p.stderr and "\\x1b" in p.stderr, p.stderr


def _gen_prints_escapes(d: Path) -> None:
    (d / "gen_dataset.py").write_text(f"import sys\nprint({ESC!r})\nsys.exit(1)\n")


def _labels_with_escapes(d: Path) -> None:
    from gate_fixtures import report_dict, write_report

    data = report_dict()
    data["structural_features"][0]["label"] = data["structural_features"][1]["label"] = "carry" + ESC
    write_report(d / "weakness_report.md", data)


@case(f"{P}a generator printing ANSI/OSC: the stop quotes it escaped", ("gen_dataset.py",), code=3)
def _(tmp, t):
    run = _stopped_with(tmp, t, _gen_prints_escapes)
    _no_control(tmp, run, 3)
    return ["iterate", "--run-dir", str(run)], run


@case(f"{P}labels with ESC and U+202E: labels_unique quotes them escaped", ("labels_unique", "weakness_report.md"),
      code=4)
def _(tmp, t):
    run = _stopped_with(tmp, t, _labels_with_escapes)
    _no_control(tmp, run, 4)
    return ["iterate", "--run-dir", str(run)], run
