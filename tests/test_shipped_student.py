"""The built-in student ships with the package (src/selfimprove_arith/student/tiny-arith/):
its recipe hash is current, resolve_model uses it without building, a stale one falls
back to the cache build, and (slow) a rebuild from the recipe reproduces its profile."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from selfimprove.errors import ConfigError
from selfimprove_arith.student import shipped, warmup
from selfimprove.rl.student import new_student, resolve_model

REPO = Path(__file__).resolve().parents[1]
MODEL_ID = "selfimprove/tiny-arith"
SHIPPED = shipped.shipped_dir(MODEL_ID)
HF_FILES = ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


def no_warm_up(*args, **kwargs):
    raise AssertionError("warm_up was called: the shipped student should have been used")


def test_shipped_student_is_built_from_the_current_recipe():
    """Fails when the warm-up recipe changed without a rebuild: run `selfimprove student build`."""
    recipe = json.loads((SHIPPED / shipped.RECIPE_FILE).read_text())
    assert recipe["recipe_hash"] == warmup.recipe_hash(), (
        f"{SHIPPED / 'recipe.json'}: recipe_hash {recipe['recipe_hash']} != warmup.recipe_hash() "
        f"{warmup.recipe_hash()}; rebuild the shipped student with `selfimprove student build`")
    assert {"recipe", "torch", "threads", "build_wall_s"} <= set(recipe)
    for name in HF_FILES:
        assert (SHIPPED / name).is_file(), name
    assert (SHIPPED / "model.safetensors").stat().st_size <= 25 * 2**20


def test_recipe_hash_ignores_the_library_versions(monkeypatch):
    """A newer transformers (or torch) is not a new student: the hash covers the recipe and the architecture."""
    import torch
    import transformers.configuration_utils as configuration_utils

    from selfimprove.rl.student import tiny_config

    before = warmup.recipe_hash()
    monkeypatch.setattr(configuration_utils, "__version__", "99.1.0")
    monkeypatch.setattr(torch, "__version__", "99.2.0")
    assert tiny_config().to_dict()["transformers_version"] == "99.1.0"  # the config does report another version
    assert warmup.recipe_hash() == before
    assert "99." not in json.dumps(warmup.recipe(), default=str)


@pytest.mark.parametrize("change", ["arch", "constant", "habit"])
def test_recipe_hash_changes_when_the_recipe_does(monkeypatch, change):
    from selfimprove.rl import student

    before = warmup.recipe_hash()
    if change == "arch":
        monkeypatch.setattr(student, "TINY_ARCH", {**student.TINY_ARCH, "hidden_size": 64})
        monkeypatch.setattr(warmup, "TINY_ARCH", student.TINY_ARCH)
    elif change == "constant":
        monkeypatch.setattr(warmup, "STEPS", warmup.STEPS + 1)
    else:
        monkeypatch.setattr(warmup, "HABITS", {**warmup.HABITS, "sub_2d": ("no_tags", 0.5)})
    assert warmup.recipe_hash() != before


def test_recipe_json_records_the_build_versions_as_information():
    recipe = json.loads((SHIPPED / shipped.RECIPE_FILE).read_text())
    assert recipe["built_with"]["torch"] and recipe["built_with"]["transformers"]
    assert "transformers_version" not in json.dumps(recipe["recipe"])
    assert set(shipped.built_with()) == {"torch", "transformers", "tokenizers", "safetensors"}


def test_shipped_profile_states_its_settings_and_covers_every_kind():
    from selfimprove_arith import KINDS

    profile = json.loads((SHIPPED / shipped.PROFILE_FILE).read_text())
    assert {"n_per_kind", "k", "seed", "temperature"} <= set(profile)
    assert list(profile["kinds"]) == list(KINDS)
    for row in profile["kinds"].values():
        assert set(row) == {"greedy", "pass@1", f"pass@{profile['k']}"}


def test_shipped_files_are_neither_ignored_nor_left_out_of_git():
    names = [str((SHIPPED / n).relative_to(REPO)) for n in (*HF_FILES, shipped.RECIPE_FILE, shipped.PROFILE_FILE)]
    ignored = subprocess.run(["git", "check-ignore", *names], cwd=REPO, capture_output=True, text=True)
    assert ignored.stdout == "", f".gitignore excludes {ignored.stdout.split()}"


def test_wheel_carries_the_shipped_student(tmp_path):
    """A non-editable install finds the student: hatch's wheel holds every shipped file and the entry points."""
    import sys
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
                    str(REPO)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("selfimprove-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for n in (*HF_FILES, shipped.RECIPE_FILE, shipped.PROFILE_FILE):
        assert f"selfimprove_arith/student/tiny-arith/{n}" in names, n
    # ... and registers it: the core finds built-in students and default teachers through entry points
    (meta,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    entry_points = zipfile.ZipFile(wheel).read(meta).decode()
    for line in ("[selfimprove.students]", "selfimprove/tiny-arith = selfimprove_arith.student:TINY_ARITH",
                 "selfimprove/smollm2-135m = selfimprove.rl.gguf_student:SMOLLM2", "[selfimprove.teachers]",
                 "selfimprove-arith = selfimprove_arith:DEFAULT_TEACHER"):
        assert line in entry_points.splitlines(), (line, entry_points)


def test_resolve_model_returns_the_shipped_dir_without_building(monkeypatch, tmp_path):
    monkeypatch.setattr(warmup, "warm_up", no_warm_up)
    monkeypatch.setenv("SELFIMPROVE_CACHE", str(tmp_path))
    logs: list[str] = []
    assert resolve_model(MODEL_ID, log=logs.append) == SHIPPED
    assert logs == [] and not any(tmp_path.iterdir())


def test_stale_shipped_student_falls_back_to_the_cache_build(monkeypatch, tmp_path):
    """A recipe changed without a rebuild: one clear line, then the locked cache build."""
    monkeypatch.setattr(warmup, "recipe_hash", lambda: "0badc0de")
    monkeypatch.setattr(warmup, "warm_up", lambda log=print: new_student(0))
    monkeypatch.setenv("SELFIMPROVE_CACHE", str(tmp_path))
    monkeypatch.delenv("SELFIMPROVE_NO_STUDENT_BUILD", raising=False)
    logs: list[str] = []
    path = resolve_model(MODEL_ID, log=logs.append)
    assert path == tmp_path / "students" / "selfimprove--tiny-arith-0badc0de"
    assert (path / "READY").is_file() and (path / "model.safetensors").is_file()
    assert len(logs) == 1 and "is stale" in logs[0] and "selfimprove student build" in logs[0], logs
    # The cached copy is reused, never rebuilt.
    monkeypatch.setattr(warmup, "warm_up", no_warm_up)
    logs.clear()
    assert resolve_model(MODEL_ID, log=logs.append) == path
    assert len(logs) == 1 and "is stale" in logs[0]


def test_stale_shipped_student_is_an_error_when_builds_are_off(monkeypatch, tmp_path):
    """What the test suite sees (conftest sets SELFIMPROVE_NO_STUDENT_BUILD): no 5-minute build."""
    monkeypatch.setattr(warmup, "recipe_hash", lambda: "0badc0de")
    monkeypatch.setattr(warmup, "warm_up", no_warm_up)
    monkeypatch.setenv("SELFIMPROVE_CACHE", str(tmp_path))
    monkeypatch.setenv("SELFIMPROVE_NO_STUDENT_BUILD", "1")
    with pytest.raises(ConfigError, match=r"recipe\.json: the shipped student .* is stale .*selfimprove student build"):
        resolve_model(MODEL_ID, log=lambda s: None)


def test_compare_profiles_names_every_kind_out_of_tolerance():
    ref = {"k": 16, "kinds": {"a": {"greedy": 0.5, "pass@16": 0.9}, "b": {"greedy": 0.1, "pass@16": 0.3}}}
    same = {"k": 16, "kinds": {"a": {"greedy": 0.58, "pass@16": 0.8}, "b": {"greedy": 0.1, "pass@16": 0.3}}}
    off = {"k": 16, "kinds": {"a": {"greedy": 0.3, "pass@16": 0.9}, "b": {"greedy": 0.1, "pass@16": 0.6}}}
    assert shipped.compare_profiles(same, ref) == []
    problems = shipped.compare_profiles(off, ref)
    assert len(problems) == 2 and problems[0].startswith("a greedy") and problems[1].startswith("b pass@16")


def test_compare_bands_names_a_kind_that_changed_band_and_ignores_drift_inside_one():
    ref = {"k": 16, "kinds": {"solved": {"pass@1": 0.96, "pass@16": 1.0}, "partial": {"pass@1": 0.40, "pass@16": 1.0},
                              "stuck": {"pass@1": 0.003, "pass@16": 0.05}}}
    drifted = {"k": 16, "kinds": {"solved": {"pass@1": 0.90, "pass@16": 1.0}, "partial": {"pass@1": 0.08, "pass@16": 0.53},
                                  "stuck": {"pass@1": 0.01, "pass@16": 0.20}}}
    assert shipped.compare_bands(drifted, ref) == []
    flipped = {"k": 16, "kinds": {**drifted["kinds"], "partial": {"pass@1": 0.01, "pass@16": 0.12}}}
    assert shipped.compare_bands(flipped, ref) == [
        "partial: hopeless (pass@1 0.01, pass@16 0.12) vs shipped learnable (pass@1 0.40, pass@16 1.00)"]


def test_the_shipped_student_has_solved_learnable_and_hopeless_kinds():
    """The demo's story (docs/concepts/built-in-student.md) in bands: 1 solved, 5 learnable, 2 hopeless."""
    profile = json.loads((SHIPPED / shipped.PROFILE_FILE).read_text())
    bands = [shipped.kind_band(row, profile["k"]) for row in profile["kinds"].values()]
    assert (bands.count("solved"), bands.count("learnable"), bands.count("hopeless")) == (1, 5, 2)


def test_at_least_five_kinds_sit_in_the_issues_learnable_band():
    """Issue 11's band, stricter than kind_band: greedy 0.05-0.6 and pass@16 >= 0.3 (room for RL to learn)."""
    profile = json.loads((SHIPPED / shipped.PROFILE_FILE).read_text())
    inside = [kind for kind, row in profile["kinds"].items() if 0.05 <= row["greedy"] <= 0.6 and row["pass@16"] >= 0.3]
    assert len(inside) >= 5, profile["kinds"]


def test_student_profile_command_measures_the_shipped_student(cli):
    res = cli("student", "profile", "--n-per-kind", "2", "--k", "2", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["path"] == str(SHIPPED) and (out["n_per_kind"], out["k"]) == (2, 2)
    assert out["disagrees_with_profile_json"] is None  # other settings than profile.json's: no comparison
    assert all(set(row) == {"greedy", "pass@1", "pass@2"} for row in out["kinds"].values())


def test_the_warm_up_is_deterministic_on_one_host():
    """Same arguments, same weights, on one host: what `student build` and the stale-student fallback rely on.

    A short warm-up (both stages, habits included) twice in this process; the whole 2000-step rebuild
    against the shipped weights is bench/rebuild_student.py (10-30 min, so not in the suite)."""
    import torch

    kw = dict(steps=12, batch=8, first_steps=4, log=lambda s: None)
    (a, _), (b, _) = warmup.warm_up(**kw), warmup.warm_up(**kw)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa), [k for k in sa if not torch.equal(sa[k], sb[k])][:3]
    fresh, _ = new_student(warmup.SEED)  # and the warm-up did train: the weights moved from the initialization
    assert not all(torch.equal(sa[k], v) for k, v in fresh.state_dict().items())


def test_a_new_build_records_the_cpu_kernel_path():
    """A rebuild at the shipping commit differed from the shipped weights on another host: new builds say
    which CPU and kernel path (torch's capability, e.g. AVX2) made them."""
    record = shipped.recipe_record(1.0)
    import torch

    assert record["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability()
    assert isinstance(record["cpu"]["model"], str) and record["cpu"]["model"]


def test_a_student_build_shows_in_the_progress_line_not_step_zero(tmp_path):
    """While the engine builds a stale student on first use, the watcher's line says so (issue: 15 x `step 0/50`)."""
    import io

    from rich.console import Console

    from selfimprove.engines.rollouts import student_build_note
    from selfimprove.ui import PlainProgress

    log = tmp_path / "train.log"
    assert student_build_note(log) is None  # no log yet
    log.write_text("INFO starting\n")
    assert student_build_note(log) is None  # an engine that builds nothing
    log.write_text("the shipped student selfimprove/tiny-arith is stale (...); building it from the recipe into X\n")
    assert student_build_note(log) == "building the built-in student (warm-up starting, once, ~5 min)"
    with log.open("a") as f:
        for step in (0, 100, 200, 300, 400):
            f.write(f"warm-up step {step}/2000 | loss 1.0 | lr 1e-3 | {step}s\n")
    note = student_build_note(log)
    assert note == "building the built-in student (warm-up step 400/2000, once, ~5 min)"

    out = io.StringIO()
    bar = PlainProgress(Console(file=out, width=200), interval=0.0)
    task = bar.add_task("iter_0", total=50, reward="-", note=note)
    bar.update(task, completed=0, reward="-", note=note)
    bar.update(task, completed=3, reward="0.412", note="")  # training started: the usual line
    lines = out.getvalue().splitlines()
    assert all("iter_0: building the built-in student (warm-up step 400/2000, once, ~5 min)" in ln for ln in lines[:2])
    assert not any("step 0/50" in ln for ln in lines), lines
    assert lines[-1].endswith("iter_0: step 3/50, train reward 0.412")
