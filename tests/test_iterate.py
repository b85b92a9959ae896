"""Phase 3 `iterate` with the fake `rl` engine: the step machine, teacher stops,
gates, packaging, staging, resume after a kill at every step, and bookkeeping.

The real introspection and packaging run (selfimprove-arith, pip install of the
generated env); only the engine is the test double (tests/fakes/fake_rl.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from selfimprove.errors import EvalParseError, GateFailed, TeacherActionNeeded
from selfimprove.phases import iteration_steps
from selfimprove.phases.iterate import current_iteration, iterate, start_phase3_clock
from selfimprove.phases.status import run_status
from selfimprove.rundir import RunDir, atomic_write_json
from selfimprove.stack import toml_paths
from selfimprove.stack.env_package import file_sha256, installed_provenance
from selfimprove.ui import budget_line

from loop_helpers import tree_digest, write_teacher_files


def test_first_call_stops_for_the_teacher_with_skeletons(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded, match="teacher: fill"):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    for name in ("failures.jsonl", "analysis.json", "weakness_report.md", "gen_dataset.py", "skeletons.json"):
        assert (it / name).is_file(), name
    failures = [json.loads(line) for line in (it / "failures.jsonl").read_text().splitlines()]
    assert failures and failures == sorted(failures, key=lambda r: r["reward"])
    assert {"step", "idx", "completion_chars"} <= set(failures[0])
    analysis = json.loads((it / "analysis.json").read_text())
    assert analysis["eval_acc_prev"] == run.read_eval_summary(run.iter(0)).eval_acc
    assert len(analysis["reward_by_length_quartile"]) == 4
    assert "## Iteration 1 " in run.scratchpad.read_text()
    # Re-running without the teacher's files stops again, without a second scratchpad entry.
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    assert run.scratchpad.read_text().count("## Iteration 1 ") == 1


def test_full_iteration_then_max_iters_gate(run: RunDir) -> None:
    iter0_before = tree_digest(run.iter(0).prime_out)
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1)
    write_teacher_files(it.dir)
    result = iterate(run, quiet=True)
    assert result.kind == "ended" and run.read_run().status == "max_iters_reached"
    pkg = f"selfimprove_arith_r{run.read_run().run_id}_iter_1"  # the run's id keeps runs' packages apart
    for name in ("dataset.jsonl", "generate.json", "gate_report.json", "gate_report.txt", "package.json", "stage.json",
                 "rl.toml", "eval_summary.json", "record.json", f"{pkg}/pyproject.toml"):
        assert (it.dir / name).exists(), name
    rl = (it.dir / "rl.toml").read_text()
    f = run.read_eval_summary(run.iter(0)).final_step
    assert f"resume_step = {f}" in rl and f"max_steps = {f + 4}" in rl and f'id = "{pkg}"' in rl
    arms = [r.arm for r in run.read_metrics().iters]
    assert arms == ["iter_0", "iter_1"]
    assert run.read_metrics().get("iter_1").rows == 600
    pad = run.scratchpad.read_text()
    assert "<!-- results:iter_1 -->" not in pad and "McNemar" in pad and "verdict by the skill's procedure's rule" in pad
    assert "(Multi step totals, failure mode 0a dropped) -> 100 rows" in pad
    # Staging: read-only trees are hard links of iter_0's files, the broadcast is a real copy,
    # and iter_0's tree is byte-identical after the iteration trained on top of it.
    src = run.iter(0).trainer_ckpt(f) / "trainer" / "__0_0.distcp"
    dst = it.trainer_ckpt(f) / "trainer" / "__0_0.distcp"
    assert os.stat(src).st_ino == os.stat(dst).st_ino
    b_src = next(p for p in run.iter(0).broadcast(f).iterdir() if p.is_file())
    assert os.stat(b_src).st_ino != os.stat(it.broadcast(f) / b_src.name).st_ino
    assert tree_digest(run.iter(0).prime_out) == iter0_before
    # Idempotent: re-running after the end neither trains nor duplicates records.
    assert iterate(run, quiet=True).kind == "ended"
    assert [r.arm for r in run.read_metrics().iters] == ["iter_0", "iter_1"]


def test_gate_failure_lists_every_failing_rule_then_recovers(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    write_teacher_files(it, break_rules=("hard", "round_trip"))
    with pytest.raises(GateFailed) as exc:
        iterate(run, quiet=True)
    assert "seed_hard" in str(exc.value) and "round_trip_no_answer" in str(exc.value)
    report = json.loads((it / "gate_report.json").read_text())
    assert report["passed"] is False and {"seed_hard", "round_trip_no_answer"} <= {f["rule"] for f in report["failures"]}
    write_teacher_files(it)  # the teacher fixes the generator; the tool re-generates and re-gates
    assert iterate(run, quiet=True).kind == "ended"
    assert json.loads((it / "gate_report.json").read_text())["passed"] is True


def test_report_gate_failure_is_listed(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    write_teacher_files(it)
    text = (it / "weakness_report.md").read_text().replace("rows: 100", "rows: 10", 1)
    (it / "weakness_report.md").write_text(text)
    with pytest.raises(GateFailed, match="bucket_total|bucket_floor"):
        iterate(run, quiet=True)


def test_teacher_scratchpad_sections_must_not_stay_placeholders(run: RunDir) -> None:
    """Sections 1, 3, 4 of the iteration's entry are the teacher's (3a.5): placeholders fail the report gate,
    before anything is generated, naming each section; filled ones pass."""
    from selfimprove.scratchpad import fill_teacher_sections

    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    it = run.iter(1).dir
    write_teacher_files(it, notes=False)
    with pytest.raises(GateFailed, match="scratchpad_placeholder") as exc:
        iterate(run, quiet=True)
    assert "iter_1 section 1" in str(exc.value) and "section 3" in str(exc.value) and "section 4" in str(exc.value)
    assert not (it / "dataset.jsonl").exists()
    assert "scratchpad_placeholder" in {f["rule"] for f in json.loads((it / "report_gate.json").read_text())["failures"]}
    left = fill_teacher_sections(run.scratchpad, 1, {1: "Carries get dropped (step 3 idx 5).", 3: "Two templates."})
    assert left == ["iter_1 section 4 (Hyperparameter / reward changes + rationale)"]
    with pytest.raises(GateFailed, match="section 4"):
        iterate(run, quiet=True)
    fill_teacher_sections(run.scratchpad, 1, {4: "None."})
    assert iteration_steps.scratchpad_gate(run, 1).passed
    assert "Carries get dropped (step 3 idx 5)." in run.scratchpad.read_text()


def test_previous_iterations_what_worked_line_must_be_filled() -> None:
    """From iteration 2 on, iteration N-1's 'what worked' line (section 5) is the teacher's too."""
    from selfimprove.scratchpad import WORKED_PLACEHOLDER, unfilled_teacher_sections

    text = (f"## Iteration 1 — t\n\n### 5. Results\n- what worked: {WORKED_PLACEHOLDER}\n\n"
            "## Iteration 2 — t\n\n### 1. Understanding from traces\nnotes\n")
    assert unfilled_teacher_sections(text, 2) == ["iter_1 section 5 (what worked / what didn't / carry over)"]
    assert unfilled_teacher_sections(text.replace(WORKED_PLACEHOLDER, "drill carries"), 2) == []
    assert unfilled_teacher_sections(text, 1) == []  # iteration 1's own line is filled after it trains


# package, train_resumed_arm and record_iteration are covered by kill -9 points of the fault
# suite (tests/test_faults.py: install, stage, train, record); these two steps have none there.
@pytest.mark.parametrize("step", ["generate", "dataset_gate"])
def test_resume_after_kill_inside_each_step(run: RunDir, step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill (KeyboardInterrupt) inside a step; re-running finishes with the same artefacts."""
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    real = getattr(iteration_steps, step)
    calls = {"n": 0}

    def dies_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(f"selfimprove.phases.iteration_steps.{step}", dies_once)
    with pytest.raises(KeyboardInterrupt):
        iterate(run, quiet=True)
    assert current_iteration(run) == 1
    assert iterate(run, quiet=True).kind == "ended"
    assert [r.arm for r in run.read_metrics().iters] == ["iter_0", "iter_1"]
    assert (run.iter(1).dir / "record.json").is_file()


def test_budget_gate_ends_phase3(run: RunDir) -> None:
    cfg = run.read_run()
    cfg.budget_seconds = 1
    cfg.phase3_start_ts = time.time() - 10  # Phase 3 began 10 s ago
    run.write_run(cfg)
    result = iterate(run, quiet=True)
    assert result.kind == "ended" and run.read_run().status == "budget_exhausted"
    assert "since Phase 3 started" in run.read_run().reason
    assert not run.iter(1).dir.exists()
    assert run_status(run)["budget_clock"] == "stopped"


def test_budget_clock_starts_at_the_first_iterate_not_at_bootstrap(run: RunDir) -> None:
    """--budget caps Phase 3 only: a run bootstrapped an hour ago (a slow baseline, a
    first-use student build) still gets its whole budget at its first iterate."""
    cfg = run.read_run()
    cfg.budget_seconds = 60
    cfg.start_ts -= 3600
    run.write_run(cfg)
    assert cfg.phase3_start_ts is None
    status = run_status(run)
    assert (status["budget_clock"], status["budget_used_s"], status["budget_left_s"]) == ("not_started", None, None)
    before = time.time()
    with pytest.raises(TeacherActionNeeded):  # the gate passed: iter_1 was analysed, the teacher's turn
        iterate(run, quiet=True)
    started = run.read_run().phase3_start_ts
    assert started is not None and before <= started <= time.time()
    assert run.read_run().status == "running"
    status = run_status(run)
    assert status["budget_clock"] == "running" and status["budget_left_s"] > 50 and status["elapsed_s"] > 3600
    with pytest.raises(TeacherActionNeeded):  # re-runs and resumes never move the clock
        iterate(run, quiet=True)
    assert run.read_run().phase3_start_ts == started


def test_budget_clock_of_a_run_from_before_the_field(run: RunDir) -> None:
    """An older run.json (no phase3_start_ts) loads; if its Phase 3 had already begun,
    it keeps the clock it began with (start_ts) instead of getting its budget back."""
    raw = json.loads(run.run_json.read_text())
    raw.pop("phase3_start_ts", None)
    run.run_json.write_text(json.dumps(raw))
    cfg = run.read_run()
    assert cfg.phase3_start_ts is None
    run.iter(1).dir.mkdir()
    assert start_phase3_clock(run, cfg).phase3_start_ts == cfg.start_ts
    assert run.read_run().phase3_start_ts == cfg.start_ts


def test_iterate_budget_lowered_ends_phase3_before_the_next_iteration(run: RunDir, cli) -> None:
    """A deadline: `iterate --budget 1m` after 10 minutes of Phase 3 ends it at the gate (exit 0), says so in
    the scratchpad, and starts no iteration; on an ended Phase 3 the flag is refused (exit 5), nothing changed."""
    cfg = run.read_run()
    cfg.budget_seconds, cfg.phase3_start_ts = 36_000, time.time() - 600
    run.write_run(cfg)
    res = cli("iterate", "--run-dir", run.root, "--budget", "1m")
    assert res.exit_code == 0, res.stderr
    after = run.read_run()
    assert (after.budget_seconds, after.status) == (60, "budget_exhausted")
    assert "Phase 3 budget of 60 s used" in after.reason and "Phase 3 ended: budget_exhausted" in res.stdout
    assert re.search(r"Phase 3 budget changed from 36000 s to 60 s \(`iterate --budget`, 6\d\d s used so far\)",
                     run.read_scratchpad())  # 600 s and the CLI's start-up: more on a loaded host
    assert not run.iter(1).dir.exists()
    before = (run.run_json.read_bytes(), run.read_scratchpad())
    res = cli("iterate", "--run-dir", run.root, "--budget", "5h")
    assert res.exit_code == 5 and "Phase 3 has ended (budget_exhausted); --budget changes" in res.stderr
    assert (run.run_json.read_bytes(), run.read_scratchpad()) == before
    assert cli("iterate", "--run-dir", run.root, "--budget", "soon").exit_code == 2


def test_iterate_budget_raised_lets_the_next_iteration_start(run: RunDir) -> None:
    cfg = run.read_run()
    cfg.budget_seconds, cfg.phase3_start_ts = 60, time.time() - 600  # spent: the gate would end Phase 3
    run.write_run(cfg)
    with pytest.raises(TeacherActionNeeded):  # the gate passed with the new cap: iter_1 analysed, the teacher's turn
        iterate(run, quiet=True, budget_seconds=7200)
    assert run.read_run().budget_seconds == 7200 and run.read_run().status == "running"


def test_status_and_phase_lines_say_when_the_budget_clock_starts(run: RunDir, cli) -> None:
    res = cli("status", "--run-dir", run.root)
    assert res.exit_code == 0, res.stderr
    assert "clock not started (Phase 3 only" in res.stdout and "baseline are not charged" in res.stdout
    assert budget_line(None, 600) == "budget clock not started (Phase 3 only, 10m00s)"
    line = budget_line(time.time() - 60, 600)
    assert line.startswith("Phase 3 budget: 1m00s used, ") and line.endswith(" left")


def test_teacher_overrides_pinned_key_refused(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    (run.iter(1).dir / "overrides.toml").write_text("max_steps = 5\n")
    with pytest.raises(Exception, match="max_steps.*pinned"):
        iterate(run, quiet=True)


# ---------------------------------------------------------------- damaged or copied run dirs (issue 13)


def _skip_gate_and_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dataset gate and the env install are tested above; skipping them keeps these tests fast
    (the fake engine never loads the train env)."""
    monkeypatch.setattr(iteration_steps, "dataset_gate_is_current", lambda it: True)
    monkeypatch.setattr(iteration_steps, "package_is_current", lambda *args: True)


def test_scratchpad_deleted_at_a_teacher_stop_is_recreated_without_retraining(
        run: RunDir, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The iteration finishes, its results land in a new scratchpad.md, and it trains once."""
    _skip_gate_and_package(monkeypatch)
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    run.scratchpad.unlink()
    res = cli("iterate", "--run-dir", run.root)
    assert res.exit_code == 0, res.stderr
    assert (run.iter(1).dir / "record.json").is_file()
    assert "verdict by the skill's procedure's rule" in run.scratchpad.read_text()
    assert json.loads(run.iter(1).job_file.read_text())["launch"] == 1
    assert cli("iterate", "--run-dir", run.root).exit_code == 0  # re-running neither trains nor fails
    assert json.loads(run.iter(1).job_file.read_text())["launch"] == 1


def test_a_copied_run_dir_points_at_itself(run: RunDir, cli, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths inside the run dir are stored relative to it: a copy works after the original is gone."""
    import shutil

    _skip_gate_and_package(monkeypatch)
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    assert iterate(run, quiet=True).kind == "ended"
    copy = tmp_path / "elsewhere" / run.root.name
    shutil.copytree(run.root, copy, symlinks=True)
    shutil.rmtree(run.root)
    for name in ("run.json", "metrics.json", "iter_0/eval_summary.json", "iter_1/eval_summary.json",
                 "iter_1/stage.json"):
        assert str(run.root) not in (copy / name).read_text(), name
    job = json.loads((copy / "iter_1" / "job.json").read_text())  # its cmd is the command line as launched
    assert not os.path.isabs(job["log"]) and not os.path.isabs(job["expect"]["eval_file"])
    res = cli("finalize", "--run-dir", copy, "--json", "--no-plot")
    assert res.exit_code == 6, res.stderr  # Phase 4 never ran: a partial summary, printed all the same
    assert str(copy) in res.stderr and str(run.root) not in res.stderr
    rows = {r["arm"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["iter_1"]["checkpoint"].startswith(str(copy)) and os.path.isdir(rows["iter_1"]["checkpoint"])


# ---------------------------------------------------------------- issue 13, item 1: run isolation
# Generated env packages are installed into one shared site-packages. Run A is stopped after
# packaging its iter_1; run B (same dataset) packages and trains its own iter_1; A is re-run and
# must train on A's rows. The fake engine logs the sha256 of the dataset.jsonl each train env's
# installed package holds (FAKE_RL_TRAIN_DATA_LOG), i.e. what it trained on.

# Appended to run B's generator: the same buckets, but every question is B's own.
B_ROWS = """
rows = [dict(r, question="Run B asks: " + r["question"]) for r in rows]
with open("dataset.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\\n")
"""


def _stop_before_training(monkeypatch: pytest.MonkeyPatch) -> None:
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # the user stops run A right after packaging

    monkeypatch.setattr(iteration_steps, "train_resumed_arm", stopped)


def _trained_on(log: Path, arm_dir: Path) -> list[str | None]:
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [e["dataset_sha256"] for e in lines if e["output_dir"].startswith(str(arm_dir))]


@pytest.mark.parametrize("how_b_was_made", ["bootstrapped", "copied"])
def test_a_rerun_after_b_packaged_trains_on_a_rows(run: RunDir, baseline_run: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, how_b_was_made: str) -> None:
    """"bootstrapped": B is its own run (its own run_id, so its own package names). "copied": B is a
    copy of A's run dir (same run_id, same names): the pre-training provenance check catches the
    overwrite and reinstalls A's package."""
    log = tmp_path / "train_data.jsonl"
    monkeypatch.setenv("FAKE_RL_TRAIN_DATA_LOG", str(log))
    a = run
    b = RunDir(tmp_path / "b" / baseline_run.name)
    shutil.copytree(baseline_run, b.root, symlinks=True)
    if how_b_was_made == "bootstrapped":
        cfg = b.read_run()
        cfg.run_id = "b0b0b0b0"
        b.write_run(cfg)
    assert a.read_run().run_id and a.read_run().dataset == b.read_run().dataset

    # Run A: teacher files, then stopped after packaging.
    with pytest.raises(TeacherActionNeeded):
        iterate(a, quiet=True)
    write_teacher_files(a.iter(1).dir)
    with monkeypatch.context() as m:
        _stop_before_training(m)
        with pytest.raises(KeyboardInterrupt):
            iterate(a, quiet=True)
    a_package = json.loads((a.iter(1).dir / "package.json").read_text())["package"]

    # Run B: its own rows, packaged and trained.
    with pytest.raises(TeacherActionNeeded):
        iterate(b, quiet=True)
    write_teacher_files(b.iter(1).dir)
    with open(b.iter(1).dir / "gen_dataset.py", "a") as f:
        f.write(B_ROWS)
    assert iterate(b, quiet=True).kind == "ended"
    a_sha, b_sha = file_sha256(a.iter(1).dir / "dataset.jsonl"), file_sha256(b.iter(1).dir / "dataset.jsonl")
    assert a_sha != b_sha and _trained_on(log, b.iter(1).dir) == [b_sha]
    b_package = json.loads((b.iter(1).dir / "package.json").read_text())["package"]
    assert (a_package != b_package) == (how_b_was_made == "bootstrapped")

    # Run A re-run: package.json is current, yet it must train on A's rows, not B's.
    assert iterate(a, quiet=True).kind == "ended"
    assert _trained_on(log, a.iter(1).dir) == [a_sha]
    installed = installed_provenance(a_package)
    assert installed["dataset_sha256"] == a_sha and installed["provenance"]["run_dir"] == str(a.root)


# ---------------------------------------------------------------- issue 13, item 8: fidelity


def _eval_examples(toml) -> int:
    return sum(int(e["num_examples"]) for e in toml_paths.get_path(toml_paths.read_toml(toml), "orchestrator.eval.env"))


def test_iter_n_caps_eval_examples_by_the_eval_split_like_iter0(run: RunDir) -> None:
    """An env with fewer eval rows than eval_examples: iter_1 asks for the split's size, not more."""
    hub = json.loads(run.hub_env_json.read_text())
    hub["eval_size"] = 15  # smaller than run.json eval_examples (20)
    atomic_write_json(run.hub_env_json, hub)
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    assert iterate(run, quiet=True).kind == "ended"
    assert run.read_run().eval_examples == 20 and _eval_examples(run.iter(1).rl_toml) == 15


def test_unparseable_iter_n_eval_aborts_the_run_with_the_reason(run: RunDir, monkeypatch) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    monkeypatch.setenv("FAKE_RL_NO_REWARD", "1")  # the final eval rows have no reward field
    with pytest.raises(EvalParseError, match="run aborted") as e:
        iterate(run, quiet=True)
    assert len(str(e.value).splitlines()) == 1
    cfg = run.read_run()
    assert cfg.status == "aborted" and cfg.reason.startswith("iter_1: final eval file failed to parse")
    assert "no numeric 'reward'" in cfg.reason and "## Run aborted" in run.scratchpad.read_text()
    assert run_status(run)["next"] == f"selfimprove finalize --run-dir {run.root}"
