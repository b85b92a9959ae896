"""Weakness statistics (selfimprove.weakness), written by iterate before the teacher stop and shown by
`selfimprove weaknesses`; the typed weakness-report writer; the minimal example teacher against the gates."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from selfimprove.errors import TeacherActionNeeded
from selfimprove.gates import (check_dataset, check_diversity, check_failure_provenance, check_round_trip,
                               check_weakness_report, load_dataset_jsonl)
from selfimprove.phases.analyze import analyze_failures, arm_weakness
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir
from selfimprove.teacher import (Bucket, Domain, Feature, SubDomain, TeacherContext, WeaknessReport, load_teacher,
                                 write_weakness_report)
from selfimprove.weakness import Rollout, classify, default_group, weakness_stats

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "selfimprove"]


# ---------------------------------------------------------------- grouping and classes


@pytest.mark.parametrize("question, group", [
    ("347+8", "###+#"),
    ("47+38", "##+##"),
    ("8+347", "#+###"),
    ("Pay 3.25 for 12 apples", "Pay #.## for ## apples"),
    ('Reverse the word "banana" now', 'Reverse the word "…" now'),
    ("Tom's  cat   has 4 legs", "Tom's cat has # legs"),  # an apostrophe is not a quote; spaces collapse
])
def test_default_group_keeps_digit_widths(question, group):
    assert default_group(question) == group


def _rollouts(spec: dict[str, tuple[int, int, int, int]], steps: int = 10) -> list[Rollout]:
    """spec: question -> (solved early, rollouts early, solved late, rollouts late), spread over `steps` steps."""
    out = []
    for q, (se, ne, sl, nl) in spec.items():
        for i in range(ne):
            out.append(Rollout(step=1 + i % (steps // 2), question=q, solved=i < se, truncated=False))
        for i in range(nl):
            out.append(Rollout(step=steps // 2 + 1 + i % (steps // 2), question=q, solved=i < sl, truncated=i == 0))
    return out


def test_classes_follow_the_late_solve_rate():
    stats = weakness_stats(_rollouts({
        "347+8": (0, 40, 1, 40),    # rare: 1/40 late
        "8+347": (1, 40, 0, 40),    # never: a success early, none late
        "47+8": (5, 40, 12, 40),    # learning, rising
        "47+38": (38, 40, 40, 40),  # solved
    }))
    by = {g["group"]: g for g in stats["groups"]}
    assert by["###+#"]["class"] == "rare" and by["###+#"]["late_rate"] == 0.025
    assert by["#+###"]["class"] == "never" and by["#+###"]["solved"] == 1
    assert by["##+#"]["class"] == "learning" and by["##+#"]["trend"] == pytest.approx(0.175)
    assert by["##+##"]["class"] == "solved"
    assert [g["class"] for g in stats["groups"]] == ["never", "rare", "learning", "solved"]  # listed by class
    assert stats["by_class"]["rare"] == {"groups": 1, "prompts": 1, "rollouts": 80}
    assert by["###+#"]["truncated_share"] == pytest.approx(1 / 80)
    lo, hi = by["###+#"]["solve_rate_ci95"]
    assert lo < by["###+#"]["solve_rate"] < hi
    assert stats["window"] == {"steps": [1, 10], "n_steps": 10, "late_from_step": 6, "rollouts": 320}


def test_few_late_rollouts_classify_on_the_whole_window():
    fig = {"late_rate": 0.0, "_late_n": 4, "_late_solved": 0, "solve_rate": 0.3, "solved": 6}
    assert classify(fig) == ("learning", "all")


def test_word_problems_mostly_singletons_and_own_grouping():
    rollouts = _rollouts({f"Ann buys {i} pears and eats {i % 3}; how many left?" if i % 2 else
                          f"A train leaves at {i} and stops {i} times; when?": (1, 4, 1, 4) for i in range(5, 15)})
    stats = weakness_stats(rollouts)
    assert stats["grouping"]["groups"] == 4 and stats["grouping"]["prompts"] == 10  # widths split them
    distinct = weakness_stats(_rollouts({f"Story {w}: how many {w}s?": (1, 4, 1, 4) for w in ("cats", "dogs", "owls")}))
    assert distinct["grouping"]["singleton_share"] == 1.0  # word problems: one prompt per group
    own = weakness_stats(rollouts, group_of=lambda q: q.split()[1], grouping="second word")
    assert {g["group"] for g in own["groups"]} == {"buys", "train"}
    assert own["grouping"]["name"] == "second word"


# ---------------------------------------------------------------- iterate writes them; the CLI shows them


def test_iterate_writes_weakness_stats_and_annotates_failures(run: RunDir):
    with pytest.raises(TeacherActionNeeded, match="selfimprove weaknesses"):
        iterate(run, quiet=True)
    it = run.iter(1)
    stats = json.loads((it.dir / "weakness_stats.json").read_text())
    assert stats["iteration"] == 1 and stats["previous"] is None
    real = stats["real"]
    assert real["source"]["arm"] == "iter_0" and real["window"]["rollouts"] > 0
    assert sum(c["rollouts"] for c in real["by_class"].values()) == real["window"]["rollouts"]
    # every train step of iter_0 counts, not only the last ones the failures come from
    analysis = json.loads((it.dir / "analysis.json").read_text())
    assert real["window"]["n_steps"] >= len(analysis["source_steps"])
    assert analysis["weakness_classes"] == real["by_class"]
    groups = {g["group"]: g for g in real["groups"]}
    # this env's prompts share one template ("What is # + #?"): a single group, so auto falls back, stated
    assert real["grouping"]["name"] == "answer" and "template: degenerate (a single group" in real["grouping"]["note"]
    for line in (it.dir / "failures.jsonl").read_text().splitlines():
        f = json.loads(line)
        assert f["group"] in groups
        assert f["group_class"] == groups[f["group"]]["class"] and f["prompt_rollouts"] >= 1
    assert "Weakness classes of iter_0 on the real train split" in run.read_scratchpad()


def test_weaknesses_cli_text_json_and_own_grouping(run: RunDir, tmp_path: Path):
    text = subprocess.run([*CLI, "weaknesses", "--run-dir", str(run.root)], capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    assert "iter_0 on the real env's train split" in text.stdout and "rare:" in text.stdout
    js = subprocess.run([*CLI, "weaknesses", "--run-dir", str(run.root), "--json"], capture_output=True, text=True)
    stats = json.loads(js.stdout)
    assert stats["iteration"] == 1 and stats["groups"] and not (run.iter(1).dir / "weakness_stats.json").exists()
    grouping = tmp_path / "groups.py"
    grouping.write_text("def by_op(q):\n    return 'minus' if '-' in q else 'plus'\n")
    own = subprocess.run([*CLI, "weaknesses", "--run-dir", str(run.root), "--json", "--group-by", f"{grouping}:by_op"],
                         capture_output=True, text=True)
    assert own.returncode == 0, own.stderr
    assert {g["group"] for g in json.loads(own.stdout)["groups"]} <= {"minus", "plus"}
    bad = subprocess.run([*CLI, "weaknesses", "--run-dir", str(run.root), "--group-by", f"{grouping}:nope"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "has no function 'nope'" in bad.stderr
    prev = subprocess.run([*CLI, "weaknesses", "--run-dir", str(run.root), "--source", "previous"],
                          capture_output=True, text=True)
    assert prev.returncode == 2 and "--source real" in prev.stderr


def test_weaknesses_before_baseline_is_a_phase_order_error(tmp_path: Path):
    boot = subprocess.run([*CLI, "bootstrap", "selfimprove-arith", "--runs-dir", str(tmp_path), "--model",
                           "selfimprove/tiny-arith"], capture_output=True, text=True, check=True)
    rd = boot.stdout.strip().splitlines()[-1]
    proc = subprocess.run([*CLI, "weaknesses", "--run-dir", rd], capture_output=True, text=True)
    assert proc.returncode == 5 and "selfimprove baseline" in proc.stderr


# ---------------------------------------------------------------- the typed report writer


def test_write_weakness_report_passes_the_gate(tmp_path: Path):
    domains = [Domain(label=f"area {k}", severity=s, evidence="The student answered 347+8 as 255.",
                      sub_domains=[SubDomain(label=f"mode {k}{j}", failure_mode="drops a carry") for j in "ab"])
               for k, s in zip("xyz", ("high", "med", "low"))]
    report = WeaknessReport(
        eval_acc_prev=0.7, length_quartile_notes="no truncation", domains=domains,
        buckets=[Bucket(domain=d.label, sub_domain=s.label, rows=100) for d in domains for s in d.sub_domains],
        structural_features=[Feature(label=f"feature {k}", definition="A pattern of the failures.") for k in "abcd"])
    path = write_weakness_report(tmp_path / "weakness_report.md", report, "# Notes\nfree text")
    parsed, gate = check_weakness_report(path)
    assert gate.passed, gate.summary()
    assert parsed == report and path.read_text().rstrip().endswith("free text")


# ---------------------------------------------------------------- the minimal example teacher


@pytest.fixture(scope="module")
def minimal_world(tmp_path_factory):
    """iter_0 rollouts of a fake student on the real train split (helpers of test_arith_teacher), the tool's
    own analysis and weakness statistics, then the minimal teacher's iteration 1 and its generator's rows."""
    import verifiers as vf
    from selfimprove_arith import make_split
    from test_arith_teacher import hub_env, write_rollouts

    parser = vf.XMLParser(["answer"], answer_field="answer")
    train = [(q, str(a)) for q, a in make_split("train")]
    rd = RunDir(tmp_path_factory.mktemp("minimal") / "run")
    rd.root.mkdir(parents=True)
    hub = hub_env(parser)
    write_rollouts(rd.iter(0).dir, train, range(1, 21), prompts=32, n=8, seed=0)
    weakness = arm_weakness(rd.iter(0), 20)
    rd.iter(1).dir.mkdir(parents=True)
    (rd.iter(1).dir / "weakness_stats.json").write_text(json.dumps({"iteration": 1, "real": weakness, "previous": None}))
    analysis = analyze_failures(rd.iter(0), rd.iter(1).dir, prev_eval_acc=0.6, prev_final_step=20, weakness=weakness)
    ctx = TeacherContext(iteration=1, iter_dir=rd.iter(1).dir, run_dir=rd.root, failures_path=rd.iter(1).dir / "failures.jsonl",
                         analysis=analysis, hub_env=hub, weakness={"real": weakness, "previous": None})
    load_teacher(f"{ROOT / 'examples' / 'minimal_teacher.py'}:MinimalTeacher")(ctx)
    proc = subprocess.run([sys.executable, "gen_dataset.py"], cwd=rd.iter(1).dir, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows, bad = load_dataset_jsonl(rd.iter(1).dir / "dataset.jsonl")
    assert not bad
    return {"rd": rd, "rows": rows, "weakness": weakness, "parser": parser}


def test_minimal_teacher_passes_the_gates(minimal_world):
    rd, rows = minimal_world["rd"], minimal_world["rows"]
    report, gate = check_weakness_report(rd.iter(1).dir / "weakness_report.md")
    assert gate.passed, gate.summary()
    failed = load_dataset_jsonl(rd.iter(1).dir / "failures.jsonl")[0]
    for g in (check_dataset(rows, report), check_round_trip(rows, minimal_world["parser"].parse_answer),
              check_failure_provenance(rows, failed), check_diversity(rows, report.fixed_axes)):
        assert g.passed, g.summary()
    assert sum(1 for line in (ROOT / "examples" / "minimal_teacher.py").read_text().splitlines()) <= 160


def test_minimal_teacher_allocates_by_class(minimal_world):
    """Most rows on the rare groups, stepping stones (and the hard form) for never groups, none on solved ones."""
    classes = {g["group"]: g["class"] for g in minimal_world["weakness"]["groups"]}
    rows = minimal_world["rows"]
    per_class = Counter(classes.get(default_group(r["question"]), "stone") for r in rows)
    assert "solved" not in per_class
    if "rare" in classes.values():
        assert per_class["rare"] == max(per_class.values())
    if "never" in classes.values():
        assert per_class["stone"] > 0 and per_class["never"] > 0
