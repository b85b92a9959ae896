"""A dead Phase 4 arm is never dropped silently (issue 13, item 2).

run_b's job dies (the fake engine crashes after step 1). compare logs it and
goes on; finalize must then name run_b, why it is missing and the fix
(`compare --restart`) in its output, the scratchpad and `status`, keep the
run open and exit 6. After the recovery the final summary is written.
"""

from __future__ import annotations

import json

import pytest

from selfimprove.errors import TeacherActionNeeded
from selfimprove.phases import compare as compare_mod
from selfimprove.phases.compare import compare
from selfimprove.phases.iterate import iterate
from selfimprove.phases.status import run_status
from selfimprove.rundir import RunDir

from loop_helpers import baseline_run, run, write_teacher_files  # noqa: F401


def finish_phase3(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    assert iterate(run, quiet=True).kind == "ended"


def test_dead_run_b_is_named_with_the_fix_and_the_summary_is_partial(run: RunDir, cli,  # noqa: F811
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    finish_phase3(run)
    real = compare_mod.run_arm

    def run_b_job_dies(rd, arm_key, *args, **kwargs):
        if arm_key != "run_b":
            return real(rd, arm_key, *args, **kwargs)
        with monkeypatch.context() as m:
            m.setenv("FAKE_RL_CRASH_AFTER", "1")  # the job dies after its first step
            return real(rd, arm_key, *args, **kwargs)

    monkeypatch.setattr(compare_mod, "run_arm", run_b_job_dies)
    result = compare(run, quiet=True)
    assert set(result["arms"]) == {"run_a", "run_c"} and "run_b" in result["errors"]
    monkeypatch.setattr(compare_mod, "run_arm", real)

    res = cli("finalize", "--run-dir", run.root, "--no-plot")
    assert res.exit_code == 6
    fix = f"selfimprove compare --run-dir {run.root} --restart"
    assert "INCOMPLETE" in res.stdout and "run_b" in res.stdout and fix in res.stdout
    assert "summary is incomplete, missing run_b" in res.stderr and fix in res.stderr
    pad = run.scratchpad.read_text()
    assert "## Partial summary" in pad and "## Final summary" not in pad and fix in pad
    cfg = run.read_run()
    assert cfg.end_ts is None and cfg.status == "max_iters_reached"  # not closed
    status = run_status(run)
    assert status["next"] == fix and [m["arm"] for m in status["phase4_missing"]] == ["run_b"]
    shown = cli("status", "--run-dir", run.root)
    assert "missing Phase 4 arm run_b" in shown.stdout and "--restart" in shown.stdout
    again = cli("finalize", "--run-dir", run.root, "--no-plot", "--json")  # re-run: still partial, not appended twice
    assert again.exit_code == 6 and json.loads(again.stdout)["complete"] is False
    assert run.scratchpad.read_text().count("## Partial summary") == 1

    compare(run, restart=True, quiet=True)  # the fix the messages point to
    done = cli("finalize", "--run-dir", run.root, "--no-plot", "--json")
    assert done.exit_code == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["complete"] and [r["arm"] for r in out["rows"]][-3:] == ["run_a", "run_b", "run_c"]
    assert "## Final summary" in run.scratchpad.read_text() and run.read_run().end_ts is not None
    assert run_status(run)["phase4_missing"] == []


def test_arm_never_trained_is_missing_too(run: RunDir, cli) -> None:  # noqa: F811
    """Phase 3 over, best iteration known, compare never ran: finalize says run_a and run_b are missing."""
    finish_phase3(run)
    res = cli("finalize", "--run-dir", run.root, "--no-plot")
    assert res.exit_code == 6 and "missing run_a" in res.stderr and "run_b" in res.stderr
    assert f"selfimprove compare --run-dir {run.root}`" in res.stderr
