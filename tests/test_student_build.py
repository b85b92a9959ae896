"""The generic student recipe (rl/student_build.py, student_build_run.py) on a small env of three tasks (tests/envs/si_build_toy).

One small build (its own cap, batch and held-out slice) is shared by the module: it must give
GRPO signal at iter_0 (sampled rewards that disagree within a prompt's group). The rest are cheap:
determinism on a few steps, the canary eval row, and each refusal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "tests" / "envs" / "si_build_toy"
sys.path.insert(0, str(TOY))

torch = pytest.importorskip("torch")

from selfimprove.rl.rollouts import load_env, run_rollouts  # noqa: E402
from selfimprove.errors import BuildRefused  # noqa: E402
from selfimprove.rl.student_build import Recipe  # noqa: E402
from selfimprove.rl.student_build_run import build_and_save, check_single_turn, prepare  # noqa: E402
from selfimprove.rl.student import load_student  # noqa: E402

# Small on purpose: a few hundred steps of batch 16 on one thread (the recipe's defaults are 3000 x 32).
SMALL = dict(batch=16, max_steps=400, check_every=50, holdout=48)


def toy(**args):
    return load_env("si-build-toy", args)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("student")
    t0, c0 = time.time(), time.process_time()
    record = build_and_save(toy(), Recipe("si-build-toy", seed=0, **SMALL), out, log=print)
    record["test_wall_s"], record["test_cpu_s"] = time.time() - t0, time.process_time() - c0
    print(f"test build: {record['test_cpu_s']:.0f} CPU-s, {record['test_wall_s']:.0f} s wall, stopped at step "
          f"{record['stopped_at_step']} ({record['stop_reason']}), memorisation share {record['memorisation_share']}")
    return out, record


def test_small_env_builds_in_minutes_with_grpo_signal(built):
    """The build stops by its rule or cap within a few CPU-minutes on one thread, and sampled replies disagree within
    prompts' groups (reward spread: the GRPO signal iter_0 needs)."""
    out, record = built
    # CPU time, not wall: on a shared host the wall time is the neighbours' (one thread: CPU ~ wall when idle)
    assert record["test_cpu_s"] < 240, record["test_cpu_s"]
    assert record["stop_reason"] in ("rule", "cap") and record["stopped_at_step"] <= SMALL["max_steps"]
    assert record["grouping"]["name"] == "task"  # the env's own task field
    assert 0.0 <= record["memorisation_share"] <= 1.0
    model, tok = load_student(out)
    env = toy()
    from selfimprove.rl.rollouts import EnvSpec, split_rows

    rows = split_rows(env, "train")[40:64]
    spec = EnvSpec("si-build-toy", "si-build-toy", {}, None, env, rows)
    recs = run_rollouts(model, tok, [(spec, r) for r in rows], n=8, temperature=1.0, max_tokens=24,
                        generator=torch.Generator().manual_seed(0))
    by_prompt: dict = {}
    for r in recs:
        by_prompt.setdefault(r["example_id"], []).append(r["reward"])
    spread = [k for k, xs in by_prompt.items() if 0 < sum(xs) < len(xs)]
    mean = sum(r["reward"] for r in recs) / len(recs)
    assert spread, f"no prompt with disagreeing rewards (mean reward {mean:.2f}): no GRPO signal"
    assert 0.0 < mean < 1.0


def test_same_seed_same_weights(tmp_path):
    """Deterministic under a fixed seed: two builds of the same recipe write the same weights."""
    torch.set_num_threads(1)
    recipe = Recipe("si-build-toy", seed=3, batch=8, max_steps=6, check_every=6, holdout=32)
    a = build_and_save(toy(), recipe, tmp_path / "a", log=lambda s: None)
    b = build_and_save(toy(), recipe, tmp_path / "b", log=lambda s: None)
    assert a["recipe_hash"] == b["recipe_hash"] and a["final_check"] == b["final_check"]
    ma, _ = load_student(tmp_path / "a")
    mb, _ = load_student(tmp_path / "b")
    for (name, x), (_, y) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(x, y), name
    other = Recipe("si-build-toy", seed=4, batch=8, max_steps=6, check_every=6, holdout=32)
    assert other.hash() != recipe.hash()


def test_canary_eval_row_never_reaches_training():
    """The eval split's canary, whose question the train split also holds, is in neither the trained
    rows nor the held-out slice: the loop's decontamination dropped it."""
    import si_build_toy

    data = prepare(toy(), Recipe("si-build-toy", **SMALL))
    questions = {m["content"] for r in data["train"] + data["holdout"] for m in r["prompt"] if m["role"] == "user"}
    assert si_build_toy.CANARY_QUESTION not in questions
    assert data["counts"]["dropped_by_decontamination"] >= 1 and data["counts"]["eval_source"] == "eval_split"


def test_recipe_hash_ignores_library_versions():
    """The cache name is the recipe's fields only (like tiny-arith's recipe()): no torch/transformers version."""
    d = Recipe("si-build-toy").as_dict()
    assert not any("version" in k or k in ("torch", "transformers") for k in d)
    assert Recipe("si-build-toy").hash() == Recipe("si-build-toy").hash()


@pytest.mark.parametrize("mode,reason", [
    ("no_answer", "have no reference answer"),
    ("long", "answers too long"),
    ("reward5", "not 0/1 or partial credit"),
    ("index", r"row 0's answer column is '0'.*scored 0: .*an index or an id"),
])
def test_refusals(mode, reason):
    """An env the recipe cannot serve is refused with its reason, before any training."""
    with pytest.raises(BuildRefused, match=reason):
        prepare(toy(mode=mode), Recipe("si-build-toy", **SMALL))


def test_refuses_text_the_tokenizer_cannot_write(tmp_path):
    with pytest.raises(BuildRefused, match="cannot write"):
        build_and_save(toy(mode="accented"), Recipe("si-build-toy", batch=8, max_steps=1, check_every=1, holdout=32),
                       tmp_path, log=lambda s: None)


def test_refuses_multi_turn():
    class Dialogue:  # not a SingleTurnEnv, several turns
        max_turns = 3

    with pytest.raises(BuildRefused, match="not single-turn"):
        check_single_turn(Dialogue(), "dialogue-env")


def test_cli_refusal_is_one_line_exit_1():
    """`selfimprove student build ENV` on an env it cannot serve: one line naming the reason, exit 1 (error)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{TOY}"}
    p = subprocess.run([sys.executable, "-m", "selfimprove", "student", "build", "si-build-toy", "--env-args",
                        '{"mode": "no_answer"}', "--out", "/nonexistent-never-written"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 1, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "reference answer" in ln]
    assert len(lines) == 1 and "si-build-toy" in lines[0], p.stderr


# How an editable install (pip install -e, uv's default for a local env project) finds its module: a finder
# appended to sys.meta_path, consulted AFTER the path finder, so a plain folder of that name on sys.path (the
# working directory, under `python -m`) imports first as a namespace package and shadows it.
EDITABLE_FINDER = """
import importlib.util, sys
class _EditableToy:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "si_build_toy":
            return importlib.util.spec_from_file_location(name, {path!r})
sys.meta_path.append(_EditableToy)
"""


def test_an_env_folder_in_the_working_directory_does_not_shadow_the_env(tmp_path, monkeypatch):
    """An env project folder named like its module (no __init__.py) in the working directory, the env installed
    editable: `student build` still loads the env (its build runs with -P, so the folder is not on sys.path; the
    refusal shows the real env loaded), and where the folder does come first, load_env names it instead of
    verifiers' "does not expose load_environment"."""
    (tmp_path / "si_build_toy").mkdir()
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(EDITABLE_FINDER.format(path=str(TOY / "si_build_toy.py")))
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{site}"}
    p = subprocess.run([sys.executable, "-m", "selfimprove", "student", "build", "si-build-toy", "--env-args",
                        '{"mode": "no_answer"}', "--out", str(tmp_path / "never")], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 1 and "have no reference answer" in p.stderr, p.stderr
    assert not (tmp_path / "never").exists()

    from selfimprove.errors import EnvNotFound

    monkeypatch.setattr(sys, "path", [str(tmp_path)] + [e for e in sys.path if e != str(TOY)])
    monkeypatch.delitem(sys.modules, "si_build_toy", raising=False)
    with pytest.raises(EnvNotFound, match=f"resolved to the folder {tmp_path / 'si_build_toy'}.*run from another directory"):
        load_env("si-build-toy", {})


def test_model_id_resolves_a_cached_build(built, tmp_path, monkeypatch):
    """`--model build:ENV@HASH` (the id `student build ENV` prints) resolves to that build in the cache through
    the built-in student registry; a missing one fails in one line naming the command that makes it."""
    import shutil

    from selfimprove.errors import ConfigError
    from selfimprove.rl.student import resolve_model
    from selfimprove.rl.student_cache import cache_dir

    out, record = built
    monkeypatch.setenv("SELFIMPROVE_CACHE", str(tmp_path))
    final = cache_dir("build/si-build-toy", record["recipe_hash"])
    shutil.copytree(out, final)
    (final / "READY").write_text("build:si-build-toy\n")
    assert resolve_model(f"build:si-build-toy@{record['recipe_hash']}") == final
    with pytest.raises(ConfigError, match="selfimprove student build si-build-toy"):
        resolve_model("build:si-build-toy@00000000")
    # plain build:ENV is the default recipe; the suite never builds one (SELFIMPROVE_NO_STUDENT_BUILD)
    with pytest.raises(ConfigError, match="SELFIMPROVE_NO_STUDENT_BUILD"):
        resolve_model("build:si-build-toy")


def test_a_tiny_groups_one_right_answer_is_not_learning():
    """The stopping rule judged a group of 2 held-out rows at 1/2 (0.50 over a 0.01 prior) as learning and
    stopped selfimprove-arith's build at step 400 with a held-out mean reward of 0.01. A group needs
    min_group_rows rows and a Wilson lower bound above its prior."""
    from types import SimpleNamespace

    from selfimprove.rl.student_build_train import judge

    recipe = Recipe("x")
    grouping = SimpleNamespace(label=lambda text: text.split(":")[0])
    rows = [{"prompt": [{"role": "user", "content": f"{g}: q{i}"}]} for g, k in (("tiny", 2), ("big", 10)) for i in range(k)]
    priors = {"tiny": {"guess_prior": 0.01}, "big": {"guess_prior": 0.01}}
    one_of_two = judge(recipe, rows, [1.0, 0.0] + [0.0] * 10, grouping, priors)
    assert one_of_two["groups"]["tiny"]["pass@1"] == 0.5 and one_of_two["learning"] == [] and not one_of_two["stop"]
    three_of_ten = judge(recipe, rows, [0.0, 0.0] + [1.0] * 3 + [0.0] * 7, grouping, priors)
    assert three_of_ten["learning"] == ["big"] and three_of_ten["stop"]  # 0.30, Wilson lower 0.11 > 0.01
    assert "some group of >= 8 rows" in recipe.rule_text()
