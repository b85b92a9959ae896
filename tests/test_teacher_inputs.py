"""What every teacher reads is whole, small and exact (issue 34): the weakness summary is never cut,
the LLM teacher's opening request fits --teacher-input-chars with every cut counted, the knobs in
force are the merged config's, severity ties pass the report gate."""

from __future__ import annotations

import json
import re

import pytest

from gate_fixtures import report_dict
from selfimprove.errors import TeacherActionNeeded
from selfimprove.gates.report import WeaknessReport, report_rule_failures
from selfimprove.llm_teacher import ApiSettings, LlmTeacher
from selfimprove.llm_teacher.prompt import sampled_failures
from selfimprove.phases.context import RunContext
from selfimprove.phases.iterate import iterate
from selfimprove.phases.knobs import knobs_in_force
from selfimprove.rundir import RunDir
from selfimprove.teacher import make_context
from selfimprove.weakness import CLASSES
from selfimprove.weakness_summary import capped_summary, full_summary


def _group(k: int, cls: str) -> dict:
    rate = {"never": 0.0, "rare": 0.02, "learning": 0.3, "solved": 0.8}[cls]
    return {"group": f"#{'#' * (k % 5)}+{k}|x", "prompts": 3, "rollouts": 48, "solve_rate": rate,
            "solve_rate_ci95": [max(0.0, rate - 0.1), min(1.0, rate + 0.1)], "early_rate": rate, "late_rate": rate,
            "trend": 0.0, "truncated_share": 0.0, "class": cls, "class_basis": "late"}


def _stats(n_groups: int, arm: str = "iter_0") -> dict:
    groups = [_group(k, CLASSES[k * len(CLASSES) // n_groups]) for k in range(n_groups)]
    by_class = {c: {"groups": sum(g["class"] == c for g in groups), "prompts": 0, "rollouts": 0} for c in CLASSES}
    return {"source": {"arm": arm, "rows": "rows"}, "window": {"steps": [1, 50], "rollouts": 48 * n_groups,
            "late_from_step": 26}, "solved_rule": "reward >= 0.5", "by_class": by_class, "groups": groups,
            "grouping": {"name": "default", "groups": n_groups, "prompts": 3 * n_groups, "singleton_share": 0.0}}


def test_the_summary_holds_every_group_of_every_source() -> None:
    weakness = {"iteration": 2, "real": _stats(300), "previous": _stats(200, "iter_1")}
    text = full_summary(weakness)
    rows = [line for line in text.splitlines() if re.match(r"^\| (never|rare|learning|solved) \|", line)]
    assert len(rows) == 500 and "not shown" not in text
    assert "### real: iter_0" in text and "### previous: iter_1" in text and "singleton share 0.00" in text
    assert "`#+0\\|x`" in text  # a pipe in a group label stays inside its cell


def test_a_capped_summary_keeps_class_order_and_counts_what_it_left_out() -> None:
    weakness = {"iteration": 1, "real": _stats(400)}
    text = capped_summary(weakness, 8_000)
    assert len(text) <= 8_000
    shown = [line.split(" | ")[0][2:] for line in text.splitlines() if re.match(r"^\| (never|rare|learning|solved) \|", line)]
    assert shown == sorted(shown, key=CLASSES.index) and shown[0] == "never" and "solved" not in shown
    left = re.search(r"\[(\d+) of 400 groups not shown \((.*?)\)", text)
    assert left and int(left.group(1)) == 400 - len(shown) and "solved 100" in left.group(2)


def test_failures_are_sampled_across_groups_worst_first_as_whole_rows() -> None:
    rows = []
    for k in range(200):  # 4 groups, the never group's rows ranked last in failures.jsonl
        cls = CLASSES[k % 4]
        rows.append({"rank": k, "group": f"g-{cls}", "group_class": cls, "group_solve_rate": CLASSES.index(cls) / 4,
                     "question": f"q{k}", "completion": "x" * 300})
    text = "".join(json.dumps(r) + "\n" for r in rows)
    out = sampled_failures(text, 6_000)
    kept = [json.loads(line) for line in out.splitlines()[:-1]]  # every line but the count line parses whole
    assert len(out) <= 6_000 and 0 < len(kept) < 200
    assert {r["group"] for r in kept} == {f"g-{c}" for c in CLASSES}  # every group gets rows, not the first ranks only
    assert [r["rank"] for r in kept] == sorted(r["rank"] for r in kept)
    assert out.splitlines()[-1].startswith(f"[{len(kept)} of 200 rows shown (4 prompt groups")
    assert sampled_failures(text, len(text)) == text  # it fits: whole, no count line


def test_severity_ties_pass_the_report_gate_and_an_inversion_fails() -> None:
    d = report_dict()
    for dom in d["domains"]:
        dom["severity"] = "high"
    assert not [f for f in report_rule_failures(WeaknessReport.model_validate(d)) if f.rule == "severity_order"]
    d["domains"][0]["severity"] = "med"
    assert [f for f in report_rule_failures(WeaknessReport.model_validate(d)) if f.rule == "severity_order"]


def _at_teacher_stop(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded, match="knobs.json"):
        iterate(run, quiet=True)


def test_knobs_in_force_are_the_merged_config_and_follow_overrides(run: RunDir) -> None:
    _at_teacher_stop(run)
    saved = json.loads((run.iter(1).dir / "knobs.json").read_text())
    cfg = run.read_run()
    knobs = saved["knobs"]
    assert knobs["orchestrator.batch_size"]["value"] == cfg.batch_size
    assert knobs["max_steps"]["value"] == saved["resume_step"] + cfg.steps_per_run
    assert knobs["orchestrator.rollouts_per_example"]["value"] == cfg.rollouts_per_example
    assert knobs["trainer.optim.lr"]["from"] == "run config" or knobs["trainer.optim.lr"]["from"].startswith("not set")
    (run.iter(1).dir / "overrides.toml").write_text("[trainer.optim]\nlr = 7e-06\n")
    now = knobs_in_force(RunContext.load(run), 1)["knobs"]["trainer.optim.lr"]
    assert now == {"value": 7e-06, "from": "iter_1/overrides.toml"}


def test_the_opening_request_fits_its_budget_with_the_whole_summary_and_the_knobs(run: RunDir) -> None:
    _at_teacher_stop(run)
    ctx = make_context(run, 1)
    for chars in (50_000, 60_000):
        system, user = (m["content"] for m in LlmTeacher(ApiSettings(model="m", base_url="http://x/v1",
                                                                      input_chars=chars))._opening(ctx))
        assert len(system) + len(user) <= chars
        assert "Knobs in force for iter_1" in user and "trainer.optim.lr = " in user
        assert "not shown" not in user and "cut at" not in user
        for g in ctx.weakness["real"]["groups"]:
            assert f"`{g['group']}`" in user
    assert "eval_summary" not in user.split("</input>")[-1]  # nothing sealed-adjacent among the inputs


def test_a_bad_overrides_file_does_not_stop_the_opening_request(run: RunDir) -> None:
    """An overrides.toml left in iter_N/ that fails its checks: the request shows knobs.json's base values
    and says why, instead of failing the LLM teacher before it is asked anything."""
    _at_teacher_stop(run)
    (run.iter(1).dir / "overrides.toml").write_text("[trainer.optim]\nlr = 5.0\n")
    _, user = (m["content"] for m in LlmTeacher(ApiSettings(model="m", base_url="http://x/v1"))._opening(make_context(run, 1)))
    assert "Knobs in force for iter_1" in user and "[without overrides.toml, which does not pass its checks" in user


def test_a_generator_may_read_earlier_iterations_datasets(tmp_path) -> None:
    """SKILL.md: the generator may read ../iter_K/dataset.jsonl to keep clear of earlier rows (cwd = iter_N/)."""
    import sys

    from selfimprove.engines.generator import run_generator

    (tmp_path / "iter_1").mkdir()
    (tmp_path / "iter_1" / "dataset.jsonl").write_text(json.dumps({"question": "What is 47 + 38?"}) + "\n")
    it = tmp_path / "iter_2"
    it.mkdir()
    (it / "gen_dataset.py").write_text(
        "import json\nseen = {json.loads(l)['question'] for l in open('../iter_1/dataset.jsonl')}\n"
        "open('dataset.jsonl', 'w').write(json.dumps({'seen': sorted(seen)}) + '\\n')\n")
    assert run_generator(it, it / "gen.log", timeout=60, python=sys.executable) == 0
    assert json.loads((it / "dataset.jsonl").read_text()) == {"seen": ["What is 47 + 38?"]}
