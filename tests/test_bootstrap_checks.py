"""Bootstrap's cheap checks that run before the env and model probes (issue 24, round 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfimprove.errors import SelfImproveError, UsageError
from selfimprove.phases import bootstrap as boot


def test_runs_dir_that_is_a_file_is_refused_before_anything(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(UsageError, match="--runs-dir .*not a directory"):
        boot.check_runs_dir(str(f))
    with pytest.raises(UsageError, match="--runs-dir .*not writable"):  # under a file: nothing can be created
        boot.check_runs_dir(str(f / "runs"))


def test_a_missing_runs_dir_under_a_writable_parent_is_fine_and_not_created(tmp_path: Path) -> None:
    boot.check_runs_dir(str(tmp_path / "a" / "b"))
    assert not (tmp_path / "a").exists()


def test_an_installed_module_the_fresh_interpreter_cannot_find_is_not_a_typo(monkeypatch) -> None:
    """The listing sees selfimprove_arith but the fresh-interpreter probe does not (e.g. the interpreter is
    not ours to run): say that, not "did you mean selfimprove-arith?" for selfimprove-arith itself."""
    monkeypatch.setattr(boot.vc, "is_importable", lambda hub_id, python=None: False)
    monkeypatch.setattr(boot, "installed_modules", lambda python=None: {"selfimprove_arith"})
    with pytest.raises(SelfImproveError, match="is installed, but a fresh") as e:
        boot.check_env_spelling("selfimprove-arith", "primeintellect/selfimprove-arith", None, False)
    assert "did you mean" not in str(e.value)
