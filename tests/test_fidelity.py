"""Fidelity to the seed (issue 13, item 8): iter_N evaluates on as many examples
as iter_0 (capped by the eval split), Runs A and C replay the best iteration's
overrides.toml, and an eval file that fails to parse aborts the run."""

from __future__ import annotations

import json

import pytest

from selfimprove.errors import EvalParseError, TeacherActionNeeded
from selfimprove.phases.compare import compare
from selfimprove.phases.iterate import iterate
from selfimprove.phases.status import run_status
from selfimprove.rundir import RunDir, atomic_write_json
from selfimprove.stack import prime_rl

from loop_helpers import baseline_run, run, write_teacher_files  # noqa: F401


def _eval_examples(toml) -> int:
    return sum(int(e["num_examples"]) for e in prime_rl.get_path(prime_rl.read_toml(toml), "orchestrator.eval.env"))


def test_iter_n_caps_eval_examples_by_the_eval_split_like_iter0(run: RunDir) -> None:  # noqa: F811
    """An env with fewer eval rows than eval_examples: iter_1 asks for the split's size, not more."""
    hub = json.loads(run.hub_env_json.read_text())
    hub["eval_size"] = 15  # smaller than run.json eval_examples (20)
    atomic_write_json(run.hub_env_json, hub)
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    assert iterate(run, quiet=True).kind == "ended"
    assert run.read_run().eval_examples == 20 and _eval_examples(run.iter(1).rl_toml) == 15


def test_runs_a_and_c_replay_the_best_iterations_overrides(run: RunDir) -> None:  # noqa: F811
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    (run.iter(1).dir / "overrides.toml").write_text("[trainer.optim]\nlr = 7e-06\n")
    assert iterate(run, quiet=True).kind == "ended"
    result = compare(run, quiet=True)
    assert result["errors"] == {}
    lr = {arm: prime_rl.get_path(prime_rl.read_toml(run.arm(arm).rl_toml), "trainer.optim.lr")
          for arm in ("iter_1", "run_a", "run_c")}
    assert lr == {"iter_1": 7e-06, "run_a": 7e-06, "run_c": 7e-06}


def test_unparseable_iter_n_eval_aborts_the_run_with_the_reason(run: RunDir, monkeypatch) -> None:  # noqa: F811
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
