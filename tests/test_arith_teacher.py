"""The scripted example teacher (examples/arith_teacher.py) against the real gates.

A realistic context is built in a temporary run dir: iter_0 train rollouts made
from the real selfimprove-arith TRAIN split with synthetic completions (right
for easy structures, wrong for hopeless ones, mixed for the middle ones, some
malformed), failures.jsonl/analysis.json written by the tool's own analyze
step. The teacher writes iteration 1, its generator runs in a subprocess, then
iteration 2 is made the same way on top of it. The structure oracle used to
fake the student lives in this test only; the teacher never sees it.
"""

from __future__ import annotations

import json
import random
import re
import runpy
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from selfimprove.gates import (
    check_dataset,
    check_diversity,
    check_eval_overlap,
    check_failure_provenance,
    check_near_duplicates,
    check_round_trip,
    check_weakness_report,
    load_dataset_jsonl,
)
from selfimprove.phases.analyze import analyze_failures
from selfimprove.rundir import RunDir
from selfimprove.teacher import TeacherContext, load_teacher

ROOT = Path(__file__).resolve().parents[1]
TEACHER_FILE = ROOT / "examples" / "arith_teacher.py"

STONE = "stone_2d1d"  # 47+8: an easier variant of both hopeless kinds that the real split does not hold
STONE3 = "stone_three_1d"  # 4+7+9: an easier variant of 47+8+5, not in the real split either
# The fake student: success probability per structure (oracle known to the test only).
SUCCESS = {
    "add_2d": 0.97, "sub_2d": 0.95, "sub_2d1d": 0.92,
    "neg_2d1d": 0.45, "sub_3d1d": 0.35, "neg_result": 0.25,
    "add_3d1d": 0.0, "add_three": 0.01, STONE: 0.5, STONE3: 0.5,
}
PARTIAL = {"neg_2d1d", "sub_3d1d", "neg_result"}
HOPELESS = {"add_3d1d", "add_three"}


def kind_of(q: str) -> str:
    if re.fullmatch(r"\d\+\d\+\d", q):
        return STONE3
    if re.fullmatch(r"\d+\+\d+\+\d+", q):
        return "add_three"
    m = re.fullmatch(r"(\d+)([+-])(\d+)", q)
    assert m, q
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    if op == "+":
        if max(a, b) >= 100:
            return "add_3d1d"
        return "add_2d" if min(a, b) >= 10 else STONE
    if a < b:
        return "neg_result" if a >= 10 else "neg_2d1d"
    return "sub_3d1d" if a >= 100 else "sub_2d1d" if b < 10 else "sub_2d"


def fake_completion(rng: random.Random, q: str, answer: str) -> tuple[str, float, bool]:
    """(completion, reward, truncated) of the fake student."""
    if rng.random() < SUCCESS[kind_of(q)]:
        return f"<answer>{answer}</answer>", 1.0, False
    a = int(answer)
    roll = rng.random()
    if roll < 0.6:
        return f"<answer>{a + rng.choice([-10, 10, 100])}</answer>", 0.0, False
    if roll < 0.85:
        return f"<answer>{a + rng.randint(2, 9)}</answer>", 0.0, False
    if roll < 0.93:
        return str(a), 0.0, False  # no tag
    return "<answer>" + "9" * 40, 0.0, True  # truncated


def write_rollouts(arm_dir: Path, questions: list[tuple[str, str]], steps: range, prompts: int, n: int, seed: int) -> None:
    rng = random.Random(seed)
    it = iter(questions * 10)
    for step in steps:
        d = arm_dir / "prime_out" / "run_default" / "rollouts" / f"step_{step}"
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        for ex in range(prompts):
            q, a = next(it)
            for _ in range(n):
                text, reward, trunc = fake_completion(rng, q, a)
                lines.append(json.dumps({
                    "example_id": step * 1000 + ex,
                    "prompt": [{"role": "system", "content": "Compute the expression."}, {"role": "user", "content": q}],
                    "completion": [{"role": "assistant", "content": text}],
                    "answer": a, "info": {}, "reward": reward, "metrics": {"correct_answer": reward},
                    "is_truncated": trunc,
                }))
        (d / "train_rollouts.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def hub_env(parser) -> dict:
    return {
        "env_id": "selfimprove-arith", "env_args": {}, "parser_class": "XMLParser",
        "parser_config": {"module": type(parser).__module__, "fields": ["answer"], "answer_field": "answer"},
        "system_prompt": "Compute the expression. Reply with the result only, as <answer>N</answer>.",
        "answer_format_instruction": "Reply with the result only, as <answer>N</answer>.",
        "train_size": 20000, "eval_size": 1000,
    }


def run_generator(iter_dir: Path, subprocess_: bool = True) -> list[dict]:
    """Run iter_dir/gen_dataset.py as the tool does (subprocess, cwd = iter dir), or in-process via runpy
    (same script, same __file__; it saves the ~3 s verifiers import of a fresh interpreter)."""
    if subprocess_:
        proc = subprocess.run([sys.executable, "gen_dataset.py"], cwd=iter_dir, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    else:
        runpy.run_path(str(iter_dir / "gen_dataset.py"), run_name="__main__")
    rows, bad = load_dataset_jsonl(iter_dir / "dataset.jsonl")
    assert not bad
    return rows


def context(rd: RunDir, n: int, hub: dict, feedback: str | None = None) -> TeacherContext:
    it = rd.iter(n)
    return TeacherContext(
        iteration=n, iter_dir=it.dir, run_dir=rd.root, failures_path=it.dir / "failures.jsonl",
        analysis=json.loads((it.dir / "analysis.json").read_text()), hub_env=hub,
        prior_iterations=[rd.iter(k).dir for k in range(1, n)], feedback=feedback,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    import verifiers as vf
    from selfimprove_arith import make_split

    parser = vf.XMLParser(["answer"], answer_field="answer")
    train = [(q, str(a)) for q, a in make_split("train")]
    rd = RunDir(tmp_path_factory.mktemp("arith") / "run")
    rd.root.mkdir(parents=True)
    hub = hub_env(parser)
    (rd.root / "hub_env.json").write_text(json.dumps(hub))
    write_rollouts(rd.iter(0).dir, train, range(1, 13), prompts=24, n=8, seed=0)
    rd.iter(1).dir.mkdir(parents=True)
    analyze_failures(rd.iter(0), rd.iter(1).dir, prev_eval_acc=0.52, prev_final_step=12)

    teacher_write = load_teacher(f"{TEACHER_FILE}:ArithTeacher")  # the CLI's own loader
    teacher = teacher_write.__self__
    teacher.train_questions = [q for q, _ in train]  # skip re-loading the env's train split
    teacher.write(context(rd, 1, hub))
    rows1 = run_generator(rd.iter(1).dir)

    # iteration 2: iter_1 trained on rows1; its train rollouts feed the next analysis
    write_rollouts(rd.iter(1).dir, [(r["question"], r["answer"]) for r in rows1], range(13, 19), prompts=24, n=8, seed=1)
    rd.iter(2).dir.mkdir(parents=True)
    analyze_failures(rd.iter(1), rd.iter(2).dir, prev_eval_acc=0.55, prev_final_step=18)
    teacher.write(context(rd, 2, hub))
    rows2 = run_generator(rd.iter(2).dir, subprocess_=False)
    return {"rd": rd, "hub": hub, "parser": parser, "rows1": rows1, "rows2": rows2, "teacher": teacher, "train": train}


def _report(rd: RunDir, n: int):
    report, gate = check_weakness_report(rd.iter(n).dir / "weakness_report.md")
    assert gate.passed, gate.summary()
    return report


@pytest.mark.parametrize("n", [1, 2])
def test_report_passes_the_report_gate(world, n):
    """The written front matter passes check_weakness_report (3-6 domains, buckets, features)."""
    report = _report(world["rd"], n)
    assert 3 <= len(report.domains) <= 6
    assert 500 <= sum(b.rows for b in report.buckets) <= 1000


@pytest.mark.parametrize("n", [1, 2])
def test_generated_rows_pass_dataset_and_round_trip_gates(world, n):
    """gen_dataset.py's rows pass the dataset gate (nine seed lines, schema, pairs) and the hub parser round trip."""
    rows = world[f"rows{n}"]
    report = _report(world["rd"], n)
    gate = check_dataset(rows, report)
    assert gate.passed, gate.summary()
    rt = check_round_trip(rows, world["parser"].parse_answer)
    assert rt.passed, rt.summary()
    failed = load_dataset_jsonl(world["rd"].iter(n).dir / "failures.jsonl")[0]
    for g in (check_failure_provenance(rows, failed), check_diversity(rows, report.fixed_axes)):
        assert g.passed, g.summary()
    per_pair = Counter((r["info"]["domain"], r["info"]["sub_domain"]) for r in rows)
    assert per_pair == {(b.domain, b.sub_domain): b.rows for b in report.buckets}


def test_rows_keep_the_real_question_format_and_are_correct(world):
    """Questions are bare expressions like the train split's; answers are their exact values."""
    for r in world["rows1"]:
        assert re.fullmatch(r"[0-9+*()-]+", r["question"]), r["question"]
        assert str(eval(r["question"])) == r["answer"]  # noqa: S307 - digits and operators only
        assert r["info"]["reasoning"].rstrip().endswith(f"<answer>{r['answer']}</answer>")


def test_iteration_2_does_not_repeat_iteration_1(world):
    """check_near_duplicates of iteration 2 against iteration 1's rows passes (fresh numbers)."""
    gate = check_near_duplicates(world["rows2"], {1: world["rows1"]})
    assert gate.passed, gate.summary()


def test_no_row_is_an_eval_question(world):
    """The eval split (read here by the test, never by the teacher) shares no question with the rows."""
    from selfimprove_arith import make_split

    eval_qs = [q for q, _ in make_split("eval")]
    for n in (1, 2):
        gate = check_eval_overlap(world[f"rows{n}"], iter(eval_qs))
        assert gate.passed, gate.summary()


def test_buckets_follow_the_partial_and_hopeless_structures(world):
    """Partial structures (25-45% success) and the hopeless ones (drilled concentrated: their rare
    successes are the only signal the real mix dilutes away, so they get most of the rows) get the
    rows; solved structures get none."""
    rows = world["rows1"]
    kinds = Counter(kind_of(r["question"]) for r in rows)
    partial, hopeless = sum(kinds[k] for k in PARTIAL), sum(kinds[k] for k in HOPELESS)
    assert partial + hopeless == len(rows), kinds
    assert hopeless >= 0.55 * len(rows), kinds  # RESCUE_SHARE: most rows (before floors and bar moves)
    print(f"hopeless share {hopeless / len(rows):.2f}: {dict(kinds)}")
    assert set(PARTIAL) | set(HOPELESS) <= set(kinds), kinds
    report = _report(world["rd"], 1)
    assert report.domains[0].severity == "high"
    skel = [r for r in rows if r["info"]["source"].startswith("skeleton:")]
    assert len(skel) >= 0.3 * len(rows)
    # a skeleton tag names a real failed train rollout with the same structure
    failures = {(f["step"], f["idx"]): f for f in map(json.loads, (world["rd"].iter(1).dir / "failures.jsonl").read_text().splitlines())}
    for r in skel:
        step, idx = map(int, re.fullmatch(r"skeleton:train_step_(\d+)_idx_(\d+)", r["info"]["source"]).groups())
        assert kind_of(failures[(step, idx)]["question"]) == kind_of(r["question"]), r


def test_hopeless_structures_without_fresh_instances_get_stepping_stones(world, tmp_path):
    """When the TRAIN split holds no fresh instance of a hopeless structure (`###+#`, `##+#+#`), it cannot be
    drilled; the teacher writes its easier variants `##+#` and `#+#+#` (one operand a digit shorter / the
    last term dropped), which the split does not hold either."""
    shutil.copytree(world["rd"].root, tmp_path / "run")
    rd = RunDir(tmp_path / "run")
    teacher = load_teacher(f"{TEACHER_FILE}:ArithTeacher").__self__
    teacher.train_questions = [q for q, _ in world["train"] if kind_of(q) not in HOPELESS]
    plan = teacher.plan(context(rd, 1, world["hub"]))
    kinds = Counter(kind_of(r["question"]) for r in plan.rows)
    assert not kinds.keys() & HOPELESS, kinds
    stones = [r for r in plan.rows if kind_of(r["question"]) in (STONE, STONE3)]
    assert len(stones) >= 0.1 * len(plan.rows), kinds
    assert all(r["info"]["domain"].startswith("Stepping-stone") for r in stones)
    assert not any(kind_of(q) in (STONE, STONE3) for q, _ in world["train"])
    assert plan.stats["stones"]


def test_teacher_reads_no_oracle():
    """The teacher infers structure from text: it never touches the env's kind labels or its eval split."""
    src = TEACHER_FILE.read_text() + "".join(p.read_text() for p in (ROOT / "examples" / "arith_teacher_parts").glob("*.py"))
    assert "def _main" in src and "KINDS" not in src and "make_split" not in src and "eval_dataset" not in src
    assert "get_eval_dataset" not in src


def test_feedback_moves_to_fresh_numbers_and_still_passes(world, tmp_path):
    """Re-called with eval-overlap feedback, the teacher moves to fresh numbers with a stricter eval-risk budget,
    and the rewritten generator still passes every gate."""
    shutil.copytree(world["rd"].root, tmp_path / "run")
    rd, hub, teacher = RunDir(tmp_path / "run"), world["hub"], world["teacher"]
    feedback = "dataset gate: FAILED (1 failure)\n  - [eval_overlap] 2 generated row(s) share >= 50% of their word 8-grams (rows 3, 9)"
    teacher.write(context(rd, 2, hub, feedback=feedback))
    text = (rd.iter(2).dir / "gen_dataset.py").read_text()
    assert "SEED_OFFSET = 10" in text
    assert "eval_overlap" in (rd.iter(2).dir / "weakness_report.md").read_text()
    rows = run_generator(rd.iter(2).dir, subprocess_=False)
    assert {r["question"] for r in rows} != {r["question"] for r in world["rows2"]}
    report = _report(rd, 2)
    for gate in (check_dataset(rows, report), check_near_duplicates(rows, {1: world["rows1"]}),
                 check_round_trip(rows, world["parser"].parse_answer)):
        assert gate.passed, gate.summary()
    assert rows == teacher.last_plan.rows  # the teacher's in-process self-check saw exactly these rows


def test_teacher_fills_its_scratchpad_sections(world, tmp_path):
    """Given a run's scratchpad (as `selfimprove run` does), the teacher replaces the placeholders of
    sections 1, 3, 4, so the report gate's scratchpad rule passes."""
    from selfimprove.phases.iteration_steps import append_iteration_entry
    from selfimprove.scratchpad import unfilled_teacher_sections

    shutil.copytree(world["rd"].root, tmp_path / "run")
    rd = RunDir(tmp_path / "run")
    append_iteration_entry(rd, 2, json.loads((rd.iter(2).dir / "analysis.json").read_text()))
    assert len(unfilled_teacher_sections(rd.scratchpad.read_text(), 2)) == 3
    ctx = context(rd, 2, world["hub"])
    ctx.scratchpad_path = rd.scratchpad
    world["teacher"].write(ctx)
    text = rd.scratchpad.read_text()
    assert unfilled_teacher_sections(text, 2) == []
    assert "failed train rollouts in failures.jsonl" in text and "None: no overrides.toml" in text


def test_toolkit_parses_solves_and_explains_random_expressions():
    """The generator's toolkit on 2000 random expressions (1-4 digits, + - *, parentheses, negative values):
    render/parse round-trips, the solver equals Python's value, the derivation ends in the answer tag."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("arith_teacher_toolkit", TEACHER_FILE)
    tk = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tk  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(tk)
    rng = random.Random(7)

    def gen(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return str(rng.randint(0, 10 ** rng.randint(1, 4) - 1))
        left, right = gen(depth - 1), gen(depth - 1)
        text = f"{left}{rng.choice('+-*')}{right}"
        return f"({text})" if rng.random() < 0.3 else text

    checked = 0
    for _ in range(2000):
        q = gen(3)
        node = tk.parse_expr(q)
        if node is None:
            continue  # a bare number or redundant parentheses around one
        checked += 1
        assert tk.parse_expr(tk.render(node)) == node
        assert tk.value(node) == eval(q)  # noqa: S307 - digits and operators only
        assert tk.reasoning_for(node, "answer").endswith(f"<answer>{eval(q)}</answer>")  # noqa: S307
        assert tk.difficulty_of(node) in ("easy", "med", "hard")
        assert len(tk.carry_vector(node)) == len(tk.ops_post(node))
    assert checked > 1000


def _toolkit():
    import importlib.util

    spec = importlib.util.spec_from_file_location("arith_teacher_toolkit", TEACHER_FILE)
    tk = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tk
    spec.loader.exec_module(tk)
    return tk


def test_numbers_axis_varies_within_every_real_bucket():
    """The scripted teacher fixes four of the five diversity axes (bare expressions), so the `numbers` label
    is the only one a bucket can vary. Regression: a fresh-clone `make demo` (2026-12-02) failed the diversity
    gate 4 times because three-term chains with one carry in the first addition (11+9+3) never hold a 0 in
    operands or result, so a label built from those alone was constant in the bucket. The fake student of
    `world` above hides this: it makes three-term chains hopeless, so they become stepping stones, not a
    bucket. Checked here on the real TRAIN split, per (structure, carry class) -- a bucket -- and per exact
    carry vector with enough instances to fill a pool alone (what anchors draw first)."""
    from selfimprove_arith import make_split

    tk = _toolkit()
    by_bucket: dict[tuple, Counter] = {}
    by_vector: dict[tuple, Counter] = {}
    for q, _ in make_split("train"):
        node = tk.parse_expr(q)
        shape, signs, vec = tk.shape_of(node), tuple(tk.signs_of(node)), tuple(tk.carry_vector(node))
        label = tk.axes_of(node)["numbers"]
        by_bucket.setdefault((shape, signs, min(sum(vec), 2)), Counter())[label] += 1
        by_vector.setdefault((shape, signs, vec), Counter())[label] += 1
    checked = 0
    for key, labels in by_bucket.items():
        n = sum(labels.values())
        if n >= 50:
            checked += 1
            assert len(labels) >= 2 and 1 - max(labels.values()) / n >= 0.05, (key, labels)
    for key, labels in by_vector.items():
        if sum(labels.values()) >= 300:
            assert len(labels) >= 2, (key, labels)
    assert checked >= 20
