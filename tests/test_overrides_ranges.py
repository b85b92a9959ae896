"""iter_N/overrides.toml is range-checked where it enters (issue 24, round 3): every value the
teacher may set is typed, finite and in range, and fits the student, or iterate stops with
exit 4 naming overrides.toml, the key and the allowed range, before anything is generated."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfimprove.errors import GateFailed, TeacherActionNeeded
from selfimprove.phases.overrides import read_overrides
from selfimprove.rundir import RunDir
from selfimprove.stack import toml_paths
from selfimprove.stack.dialects import SEED

from loop_helpers import write_teacher_files

TINY = "selfimprove/tiny-arith"  # 256 positions (its shipped config.json)
CANONICAL = {"seq_len": 256, "orchestrator": {"train": {"sampling": {"max_completion_tokens": 128}}}}


@pytest.mark.parametrize("body, key, allowed", [
    ("seq_len = -5\n", "seq_len", "from 1 to"),
    ("seq_len = 0\n", "seq_len", "from 1 to"),
    ("seq_len = 100000000\n", "seq_len", "from 1 to"),
    ("seq_len = true\n", "seq_len", "integer"),
    ("seq_len = 300\n", "seq_len", "1 to 256"),  # more than tiny-arith's context
    ("seq_len = 100\n", "seq_len", "above 128"),  # below the canonical completion budget
    ("[trainer.optim]\nlr = \"fast\"\n", "trainer.optim.lr", "finite number > 0"),
    ("[trainer.optim]\nlr = nan\n", "trainer.optim.lr", "finite number"),
    ("[trainer.optim]\nlr = 0.0\n", "trainer.optim.lr", "> 0"),
    ("[trainer.optim]\nlr = 5.0\n", "trainer.optim.lr", "<= 1"),
    ("[orchestrator.train.sampling]\ntemperature = nan\n", "temperature", "finite number"),
    ("[orchestrator.train.sampling]\ntemperature = inf\n", "temperature", "finite number"),
    ("[orchestrator.train.sampling]\ntemperature = -1.0\n", "temperature", "> 0"),
    ("[orchestrator.train.sampling]\ntemperature = 0\n", "temperature", "identical rollouts"),
    ("[orchestrator.train.sampling]\nmax_completion_tokens = 0\n", "max_completion_tokens", "integer >= 1"),
    ("[orchestrator.train.sampling]\nmax_completion_tokens = 1.5\n", "max_completion_tokens", "integer"),
    ("[orchestrator.train.sampling]\nmax_completion_tokens = 256\n", "max_completion_tokens", "1 to 255"),
])
def test_a_bad_value_is_refused_naming_file_key_and_range(tmp_path: Path, body: str, key: str, allowed: str) -> None:
    f = tmp_path / "overrides.toml"
    f.write_text(body)
    with pytest.raises(GateFailed) as e:
        read_overrides(f, SEED, model=TINY, canonical=CANONICAL)
    msg = str(e.value)
    assert str(f) in msg and key in msg and allowed in msg and "\n" not in msg, msg
    assert GateFailed.exit_code == 4


def test_good_values_pass_unchanged(tmp_path: Path) -> None:
    f = tmp_path / "overrides.toml"
    f.write_text("seq_len = 200\n[trainer.optim]\nlr = 1\n[orchestrator.train.sampling]\ntemperature = 0.7\n"
                 "max_completion_tokens = 100\n")
    assert read_overrides(f, SEED, model=TINY, canonical=CANONICAL) == {
        "seq_len": 200, "trainer": {"optim": {"lr": 1}},
        "orchestrator": {"train": {"sampling": {"temperature": 0.7, "max_completion_tokens": 100}}}}
    # a hub model that is not on disk: its context is unknown, only the static range applies
    f.write_text("seq_len = 32768\n")
    assert read_overrides(f, SEED, model="Qwen/Qwen3-0.6B", canonical={}) == {"seq_len": 32768}


def test_syntax_error_and_pinned_key_are_gate_failures(tmp_path: Path) -> None:
    f = tmp_path / "overrides.toml"
    f.write_text("[[[ x\n")
    with pytest.raises(GateFailed, match="overrides.toml.*line 1"):
        read_overrides(f)
    f.write_text("max_steps = 5\n")
    with pytest.raises(GateFailed, match="max_steps.*pinned"):
        read_overrides(f)


def test_iterate_stops_at_a_bad_override_before_generating(run: RunDir, cli) -> None:
    with pytest.raises(TeacherActionNeeded):
        from selfimprove.phases.iterate import iterate
        iterate(run, quiet=True)
    it = run.iter(1).dir
    write_teacher_files(it)
    (it / "overrides.toml").write_text("[orchestrator.train.sampling]\ntemperature = nan\n")
    res = cli("iterate", "--run-dir", run.root)
    assert res.exit_code == 4, res.stderr
    assert "overrides.toml: orchestrator.train.sampling.temperature = nan" in res.stderr
    assert not (it / "report_gate.json").exists() and not (it / "dataset.jsonl").exists()


def test_a_canonical_configs_knobs_get_the_same_ranges(cli, runs_dir: Path, tmp_path: Path) -> None:
    """bootstrap --config refuses an out-of-range knob (exit 2, nothing made); baseline's check of a
    canonical config found elsewhere raises the same line naming the file."""
    from selfimprove.errors import ConfigError
    from selfimprove.phases.overrides import check_canonical_knobs

    bad = tmp_path / "rl.toml"
    bad.write_text("seq_len = 256\n[orchestrator.train.sampling]\ntemperature = nan\n[trainer]\n")
    res = cli("bootstrap", "selfimprove-arith", "--runs-dir", runs_dir, "--model", TINY, "--config", bad)
    assert res.exit_code == 2 and "--config" in res.stderr and "temperature = nan" in res.stderr, res.stderr
    assert list(runs_dir.iterdir()) == []
    with pytest.raises(ConfigError, match=r"canonical config .*rl.toml: seq_len = -1 is refused"):
        check_canonical_knobs({"seq_len": -1}, f"canonical config {bad}")
    check_canonical_knobs(toml_paths.read_toml(Path(__file__).parents[1] / "configs/selfimprove-arith/rl.toml"), "shipped")
