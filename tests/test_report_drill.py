"""The report page one can drill into (issue 43, item 4): contents and anchors, each iteration's evidence
collapsed (weakness report, TRAIN failures, generated rows, gate report), the failure_mode column, the
overlay of every arm's eval accuracy with the base model's, smoothed learning curves, the eval examples
Run A and Run C disagree on (only once the run is finalized), an open run described as it stands, and a
layout that holds at 390 px in headless Chromium. Hostile text (a script tag, a bidi override) is put
into every new part to show the escaping holds there too.

Built on the synthetic finished run of test_finalize_seeds (no training), so the file runs in seconds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from test_finalize_seeds import make_run

from selfimprove.models import HubEnv, RewardFunc
from selfimprove.phases.finalize import finalize, report_table
from selfimprove.report.page import write_report
from selfimprove.report.svg import ema, learning_curve
from selfimprove.rundir import RunDir

from browser import FLAGS, Elements, chromium
from gate_fixtures import report_dict
from gate_fixtures import write_report as write_weakness_report

REPO = Path(__file__).resolve().parents[1]
HOSTILE = "<script>alert('x')</script>\u202eevil"
ARMS = {"iter_0": [0.50], "iter_1": [0.56], "run_a": [0.60], "run_b": [0.52], "run_c": [0.51]}
N = 200  # eval examples per arm in make_run: run_a right on 0..119, run_c on 0..101


def _jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _eval_rows(arm: str, right: int) -> list[dict]:
    return [{"example_id": i, "prompt": [{"role": "user", "content": f"Question {i}? {HOSTILE}"}],
             "completion": [{"role": "assistant", "content": f"answer of {arm} to {i} {HOSTILE}"}],
             "answer": str(i), "reward": float(i < right)} for i in range(N)]


def drill_run(root: Path) -> RunDir:
    """make_run's five arms, with iter_1's teacher files, failures, rows and gate report (hostile text in each),
    both controls' final eval files, an eval of iter_1 at step 5, and the base eval's figure in run.json."""
    rd = make_run(root, ARMS)
    it = rd.iter(1).dir
    front = report_dict()
    front["domains"][0]["sub_domains"][0]["failure_mode"] = f"carries are dropped {HOSTILE}"
    write_weakness_report(it / "weakness_report.md", front, body=f"\n# Weakness report\n\nThe student {HOSTILE}.\n")
    (it / "report_gate.json").write_text(json.dumps({"passed": True, "failures": [], "stats": {}}))
    _jsonl(it / "failures.jsonl", ["not an object"] + [{"step": 10, "idx": i, "example_id": 40 + i, "reward": 0.0,
                                    "question": f"failed train question {i} {HOSTILE}", "completion": f"wrong {i}",
                                    "answer": str(i), "is_truncated": i == 0} for i in range(7)])
    _jsonl(it / "dataset.jsonl", [{"question": f"generated question {i} {HOSTILE}", "answer": str(i),
                                   "info": {"domain": "Carries", "sub_domain": f"sub {HOSTILE}", "reasoning": "r"}}
                                  for i in range(12)])
    (it / "gate_report.txt").write_text(f"dataset gate: passed\n  rule seed_hard: ok {HOSTILE}\n")
    for arm, right in (("run_a", 120), ("run_c", 102)):
        _jsonl(rd.arm(arm).eval_file(10), _eval_rows(arm, right))
    _jsonl(rd.arm("iter_1").eval_file(5), _eval_rows("iter_1", 106))
    cfg = rd.read_run()
    cfg.learning_signal = {"has_signal": True, "eval_step0_reward_mean": 0.45, "eval_step0_examples": N}
    rd.write_run(cfg)
    return rd


def page_of(rd: RunDir, path: Path) -> str:
    return write_report(rd, report_table(rd), path).read_text()


def assert_escaped(page: str) -> None:
    assert "<script" not in page and "\u202e" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&lt;U+202E&gt;evil" in page


@pytest.fixture
def finished(tmp_path: Path) -> RunDir:
    rd = drill_run(tmp_path)
    finalize(rd, plot=False, wandb=False)
    return rd


def test_each_iteration_shows_its_evidence_collapsed_with_counts(finished: RunDir, tmp_path: Path) -> None:
    page = page_of(finished, tmp_path / "p.html")
    assert_escaped(page)
    section = page[page.index('id="iter-1"'):page.index("</section>", page.index('id="iter-1"'))]
    summaries = re.findall(r"<summary>(.*?)</summary>", section)
    assert summaries == [
        "The teacher's weakness report (iter_1/weakness_report.md)",
        "TRAIN failures the teacher read: 5 shown of 8; 1 line(s) not a JSON object "
        "(iter_1/failures.jsonl, lowest reward first)",
        "Generated rows: 5 shown of 12 (iter_1/dataset.jsonl, first rows)",
        "The dataset gate's report (iter_1/gate_report.txt)"]
    assert "failed train question 4 " in section and "failed train question 5" not in section  # capped at 5
    assert "generated question 4 " in section and "generated question 5" not in section
    assert "# Weakness report" in section and "rule seed_hard: ok" in section
    assert "reward 0.00, step 10, line 0, example 40, truncated" in section


def test_the_failure_mode_column_shows_the_teachers_failure_mode(finished: RunDir, tmp_path: Path) -> None:
    page = page_of(finished, tmp_path / "p.html")
    table = page[page.index('class="buckets"'):page.index("</table>", page.index('class="buckets"'))]
    assert "<th>failure mode (the teacher's words)</th>" in table
    row = re.search(r"<tr><td>[^<]*</td><td>high</td><td>failure mode 0a dropped</td><td>([^<]*)</td>", table)
    assert row and row.group(1).startswith("carries are dropped &lt;script&gt;")  # failure_mode, not the label
    assert "<td>the student drops step 1 of domain 0</td>" in table


def test_flipped_examples_are_shown_only_once_the_run_is_finalized(tmp_path: Path) -> None:
    """Before finalize no eval row's text is on the page (the teacher may read it); after, Run A vs Run C's
    flips are shown, counted, paired by example id and marked sealed from the teacher."""
    rd = drill_run(tmp_path)
    before = page_of(rd, tmp_path / "before.html")
    assert 'id="flips"' not in before and "Question 1" not in before and "answer of run_a" not in before
    finalize(rd, plot=False, wandb=False)
    page = page_of(rd, tmp_path / "after.html")
    assert_escaped(page)
    flips = page[page.index('id="flips"'):page.index('id="timeline"')]
    assert "Sealed from the teacher: shown only after the loop ended." in flips
    assert (f"n = {N} examples both arms scored on the eval split (run_a {N}, run_c {N}; seed 0 of each). "
            "run_a right, run_c wrong: 18; run_c right, run_a wrong: 0; both right: 102") in flips
    assert "<summary>run_a right, run_c wrong: 10 shown of 18</summary>" in flips
    assert "<summary>run_c right, run_a wrong: 0 shown of 0</summary>" in flips
    assert "example 102: run_a right (correct 1.00), run_c wrong (correct 0.00)" in flips
    assert "Question 102? &lt;script&gt;" in flips and "answer of run_a to 102 " in flips
    assert "answer of run_c to 102 " in flips and "Question 112?" not in flips  # 10 of 18 shown
    assert 'href="#flips"' in page


def test_the_overlay_has_every_arm_and_the_base_model(finished: RunDir, tmp_path: Path) -> None:
    page = page_of(finished, tmp_path / "p.html")
    section = page[page.index('id="eval-overlay"'):page.index('id="curves"')]
    assert "base model (before training): 0.450 at step 0 (n=200); from run.json learning_signal" in section
    for arm in ARMS:
        assert f'class="arm-point" data-arm="{arm}"' in section
    # iter_1's eval at step 5 read through the sealed reader, then its final record
    assert re.search(r"iter_1[^<]*: 0\.530 \[0\.\d+, 0\.\d+\] at step 5 \(n=200\); 0\.560 \[", section)
    assert section.count('class="base-point"') == 1 and "comparable across arms, at equal n" in section


def test_learning_curves_are_smoothed_and_say_train_rewards_do_not_compare() -> None:
    assert ema([0.0, 1.0, 1.0]) == pytest.approx([0.0, 0.3, 0.51])
    svg = learning_curve([{"label": "iter_1 (seed 0)", "steps": [1, 2, 3], "rewards": [0.0, 1.0, 1.0]}], [], title="t")
    assert svg.count('class="smooth-line"') == 1 and svg.count('class="train-line"') == 1


def test_the_curves_caption_states_the_smoothing_and_the_caveat(finished: RunDir, tmp_path: Path) -> None:
    page = page_of(finished, tmp_path / "p.html")
    curves = page[page.index('id="curves"'):page.index('id="weaknesses"')]
    assert "exponential moving average (EMA) with alpha 0.3" in curves
    assert "Not comparable across arms:</b> each arm's TRAIN rewards come from different data" in curves


def test_a_bootstrapped_run_says_where_it_stands_not_status_running(new_run, tmp_path: Path) -> None:
    rd = RunDir(new_run())
    page = page_of(rd, tmp_path / "p.html")
    assert "status <b>running" not in page
    assert "status <b>in progress: bootstrapped only: introspect has not run</b>" in page
    assert f"Next: <code>selfimprove introspect --run-dir {rd.root}</code>" in page
    assert "<li>no live training job</li>" in page and 'href="#progress"' in page


def test_mid_baseline_the_page_names_the_live_job_and_the_next_command(new_run, tmp_path: Path, monkeypatch) -> None:
    """A live job as `selfimprove status` finds it (its pid, arm, step and log) is on the page; the job
    finder is replaced, since a real one must carry the tool's token (tests/test_untrusted_jobs.py)."""
    import selfimprove.phases.status as status

    rd = RunDir(new_run())
    rd.write_hub_env(HubEnv(env_id="selfimprove-arith", module="selfimprove_arith", source="local",
                            env_class="SingleTurnEnv", parser_class="XMLParser", rubric_class="Rubric",
                            rubric_funcs=[RewardFunc(name="correct_answer", weight=1.0)], system_prompt="s",
                            answer_format_instruction=None, train_size=1000, eval_size=200))
    job = {"arm": "iter_0", "kind": "local", "pid": 4242, "step": 3, "max_steps": 50, "log": "iter_0/train.log",
           "live": True}
    monkeypatch.setattr(status, "live_jobs", lambda _rd: {"jobs": [job], "notes": []})
    page = page_of(rd, tmp_path / "p.html")
    assert "in progress: introspected: the baseline (iter_0) is next or under way" in page
    assert "<li>live job <b>iter_0</b>: pid 4242, step 3 of 50; log <code>iter_0/train.log</code></li>" in page
    assert f"Next: <code>selfimprove baseline --run-dir {rd.root}</code>" in page


# ---------------------------------------------------------------- in headless Chromium

PROBE = """<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="{page}" style="border:0;width:{width}px;
height:3000px"></iframe><script>
document.getElementById("f").onload = () => {{
  const d = document.getElementById("f").contentDocument, w = d.defaultView;
  d.querySelectorAll("details").forEach(x => x.open = true);  // opened, the evidence must not overflow either
  const wide = [...d.querySelectorAll("main *")].filter(e => e.getBoundingClientRect().right > w.innerWidth + 1
                                                      && !e.closest(".scroll")).map(e => e.tagName);
  document.body.setAttribute("data-probe", JSON.stringify({{scroll: d.documentElement.scrollWidth,
                                                           inner: w.innerWidth, wide: wide.slice(0, 5)}}));
}};
</script></body></html>"""


def _chromium(url: str, width: int, *extra: str) -> str:
    # Chromium's window is at least 500 px wide: the 390 px viewport is an iframe's (PROBE)
    proc = subprocess.run([chromium(), *FLAGS, "--allow-file-access-from-files", "--virtual-time-budget=5000",
                           "--proxy-server=http://127.0.0.1:9", f"--window-size={max(width, 500)},3000", *extra,
                           "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]
    return proc.stdout


@pytest.fixture
def finished_page(finished: RunDir, tmp_path: Path) -> Path:
    if not chromium():
        pytest.skip("chromium not installed (make test-deps installs it)")
    path = tmp_path / "page" / "report.html"
    path.parent.mkdir()
    write_report(finished, report_table(finished), path)
    return path


@pytest.mark.parametrize("width", [1280, 390])
def test_no_horizontal_overflow_in_chromium(finished_page: Path, width: int) -> None:
    """Every details opened, the page is no wider than the viewport: wide tables scroll in their wrapper."""
    probe = finished_page.parent / f"probe-{width}.html"
    probe.write_text(PROBE.format(page=finished_page.name, width=width))
    found = re.search(r'data-probe="([^"]*)"', _chromium(probe.resolve().as_uri(), width))
    assert found, "the probe did not run"
    seen = json.loads(found.group(1).replace("&quot;", '"'))
    assert seen["inner"] == width
    assert seen["scroll"] <= width and seen["wide"] == [], seen


# Scripts off: a copy of the page whose policy forbids every script. (Chromium's own switches do not serve:
# --disable-javascript is ignored by headless Chromium, and --blink-settings=scriptEnabled=false stops --dump-dom.)
NO_SCRIPT = "<meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">"


@pytest.mark.parametrize("scripts", ["on", "off"])
def test_contents_anchors_resolve_and_details_render_with_scripts_on_and_off(finished_page: Path, scripts: str) -> None:
    page = finished_page
    if scripts == "off":
        page = finished_page.with_name("no-script.html")
        page.write_text(finished_page.read_text().replace("<title>", NO_SCRIPT + "<title>", 1))
    dom = Elements(_chromium(page.resolve().as_uri(), 1280))
    ids = {a["id"] for _t, a in dom.elements if "id" in a}
    links = [a["href"][1:] for a in dom.having("a") if a.get("href", "").startswith("#")]
    assert len(links) >= 10 and set(links) <= ids, set(links) - ids
    assert {"verdict", "summary", "eval-overlay", "curves", "iterations", "iter-1", "flips", "timeline"} <= set(links)
    assert len(dom.having("details")) == 6 and len(dom.having("summary")) == 6  # 4 in iter_1, 2 flip lists
    assert dom.having("meta", name="viewport")[0]["content"] == "width=device-width, initial-scale=1"
    text = dom.text
    assert text.index("Verdict") < text.index("Contents") < text.index("Summary table")  # the verdict first


def test_make_screenshots_pictures_a_run_dir_at_1280_and_390(finished_page: Path, finished: RunDir,
                                                             tmp_path: Path) -> None:
    from PIL import Image

    shots = tmp_path / "shots"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    res = subprocess.run(["make", "-s", "screenshots", f"RUN={finished.root}", f"SHOTS_DIR={shots}"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    for width in (1280, 390):
        with Image.open(shots / f"report-{width}.png") as im:
            assert im.width == width and im.height > 2000
    with Image.open(shots / "report-top.png") as im:
        assert im.width == 1280 and 500 < im.height <= 1150
    assert not (finished.root / "report.html").read_text().count("probe")  # the run dir's page is untouched
    res = subprocess.run(["make", "-s", "screenshots"], cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "name the run dir" in res.stdout
