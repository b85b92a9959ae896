"""Two runs of one dataset never swap training data (issue 13, item 1).

Generated env packages are installed into one shared site-packages. The
scenario: run A is stopped after packaging its iter_1; run B (same dataset)
packages and trains its own iter_1; A is re-run. A must train on A's rows.
The fake engine logs the sha256 of the dataset.jsonl each train env's
installed package holds (FAKE_RL_TRAIN_DATA_LOG), i.e. what it trained on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from selfimprove.errors import TeacherActionNeeded
from selfimprove.phases import iteration_steps
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir
from selfimprove.stack.env_package import file_sha256, installed_provenance

from loop_helpers import baseline_run, run, write_teacher_files  # noqa: F401

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
def test_a_rerun_after_b_packaged_trains_on_a_rows(run: RunDir, baseline_run: Path, tmp_path: Path,  # noqa: F811
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
