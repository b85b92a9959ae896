"""The prime-rl v0.8 dialect (main at 559b44772): builders, argv, validation, and the seed dialect beside it.

The central check, as for the seed: every config and argv the v0.8 builders write uses only
keys of the main key snapshot (derived from prime-rl's own pydantic classes at 559b44772)
and parses back through the same `rl` contract; a config of the other dialect is named as such.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selfimprove.errors import ConfigError
from selfimprove.stack import toml_paths
from selfimprove.stack.dialects import SEED, V1, dialect_named
from selfimprove.stack.prime_rl_keys import load_key_tree, unknown_keys

TINY = "selfimprove/tiny-arith"
HUB = "selfimprove-arith"
ARGS = {"split": "train", "num_examples": 50}


def _arm(dialect, **extra):
    kw = dict(model=TINY, new_steps=4, batch_size=16, rollouts_per_example=4,
              train_envs=[{"id": "arith_iter_1"}, {"id": HUB, "args": ARGS, "ratio": 2.0}],
              eval_env_id=HUB, eval_env_args={"split": "eval"}, num_examples=20, wandb={"project": "p", "name": "n"})
    kw.update(extra)
    return dialect.resume_config(resume_step=4, seed=7, **kw), dialect.fresh_config(clean_output_dir=True, **kw)


def test_snapshot_names_its_commit_and_method():
    head = load_key_tree(V1.keys_file)
    assert head["dialect"] == V1.DIALECT == "prime-rl@559b44772"
    assert head["derived_from"]["commit"].startswith("559b44772") and head["derived_from"]["commit_date"] == "2026-08-21"
    assert "model_fields" in head["derived_from"]["method"]


def test_v08_arm_configs_use_only_main_keys():
    resumed, fresh = _arm(V1)
    for cfg in (resumed, fresh):
        assert unknown_keys(cfg, V1.keys_file) == []
        V1.validate_config(cfg)
        orch = cfg["orchestrator"]
        assert orch["group_size"] == 4 and "rollouts_per_example" not in orch and orch["renderer"] == {"name": "default"}
        chat = {"agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}}  # every source: plain chat
        assert orch["train"]["source"][0] == {"env": {"taskset": {"id": "arith_iter_1"}, **chat}}
        assert orch["train"]["source"][1] == {"env": {"taskset": {"id": HUB, **ARGS}, **chat}, "ratio": 2.0}
        assert orch["eval"]["source"] == [{"env": {"taskset": {"id": HUB, "split": "eval"}, **chat}, "num_examples": 20,
                                           "group_size": 1}]
        assert cfg["monitors"] == {"wandb": {"project": "p", "name": "n"}} and "wandb" not in cfg
        assert cfg["weight_broadcast"] == {"type": "filesystem"}  # broadcasts/step_N files, the final one too
    assert resumed["resume"] == {"step": 4} and resumed["max_steps"] == 8 and resumed["inference"] == {"vllm": {"seed": 7}}
    assert fresh["clean"] is True and "resume" not in fresh and fresh["max_steps"] == 4


def test_v08_fork_uses_resume_dir_and_skips_progress(tmp_path: Path):
    """An arm forked from iter_0 names iter_0's checkpoint step dir in [resume] dir (no resume.step), skips the
    train-source progress when asked, resumes from that step, and a crash relaunch resumes from its own dir."""
    ck = tmp_path / "iter_0/prime_out/checkpoints/step_4"
    kw = dict(model=TINY, new_steps=4, batch_size=16, rollouts_per_example=4, train_envs=[{"id": "arith_iter_1"}],
              eval_env_id=HUB, eval_env_args={"split": "eval"}, num_examples=20)
    forked = V1.resume_config(resume_step=4, fork_from=ck, skip_progress=True, **kw)
    V1.validate_config(forked)
    assert forked["resume"] == {"dir": str(ck)} and forked["orchestrator"]["ckpt"] == {"skip_progress": True}
    assert V1.resume_step_of(forked) == 4 and forked["max_steps"] == 8
    own = tmp_path / "iter_1/prime_out/checkpoints/step_6"
    assert V1.resume_flags(forked, 6, own) == ["--resume.dir", str(own), "--no-orchestrator.ckpt.skip-progress"]
    same = V1.resume_config(resume_step=4, fork_from=ck, **kw)
    assert "ckpt" not in same["orchestrator"]
    seed = SEED.resume_config(resume_step=4, fork_from=ck, skip_progress=True, **kw)  # the seed stages trees instead
    assert seed["ckpt"]["resume_step"] == 4 and "resume" not in seed and "weight_broadcast" not in seed
    assert SEED.resume_flags(seed, 6, own) == ["--ckpt.resume-step", "6"]
    plain, _ = _arm(V1)
    assert V1.resume_flags(plain, 6, own) == ["--resume.step", "6"]
    with pytest.raises(ConfigError, match="not the checkpoint of step 3"):
        V1.resume_config(resume_step=3, fork_from=ck, **kw)


def test_v08_argv_round_trips_with_run_name(tmp_path: Path):
    """`--output-dir <parent> --run.name <name>` puts main's run dir exactly at the arm's output dir."""
    resumed, _ = _arm(V1)
    toml = tmp_path / "rl.toml"
    V1.write_toml(toml, resumed)
    out = tmp_path / "iter_1" / "prime_out"
    argv = V1.rl_command_args([toml], {"max_steps": 8}, out)
    assert argv[-4:] == ["--output-dir", str(out.parent), "--run.name", "prime_out"]
    merged, files = V1.parse_rl_argv(argv)
    assert files == [toml] and merged["output_dir"] == str(out) and merged["resume"] == {"step": 4}


def test_v08_iter0_overlay_and_overrides_validate():
    canonical = V1.canonical_from_hub_env(HUB, ARGS, TINY)
    overlay = V1.eval_overlay(max_steps=4, eval_env_id=HUB, eval_env_args={}, num_examples=20)
    overrides = V1.baseline_overrides(model=TINY, max_steps=4, batch_size=16, rollouts_per_example=4, canonical=canonical)
    merged = toml_paths.deep_merge(toml_paths.deep_merge(canonical, overlay), overrides)
    V1.validate_config(merged)
    assert unknown_keys(merged, V1.keys_file) == []
    argv = V1.rl_command_args([], overrides, Path("/x/prime_out"))
    assert "--orchestrator.group-size" in argv and "--orchestrator.rollouts-per-example" not in argv


@pytest.mark.parametrize(("cfg", "named"), [
    ({"trainer": {}, "orchestrator": {"rollouts_per_example": 4}}, "'orchestrator.rollouts_per_example' is a seed-dialect"),
    ({"trainer": {}, "orchestrator": {"train": {"env": [{"id": "x"}]}}}, "[[orchestrator.train.source]]"),
    ({"trainer": {}, "orchestrator": {}, "ckpt": {"resume_step": 3}}, "resume.step"),
    ({"trainer": {}, "orchestrator": {}, "wandb": {"project": "p"}}, "[monitors.wandb]"),
    ({"trainer": {}, "orchestrator": {"seed": 3}}, "inference.vllm.seed"),
])
def test_seed_keys_are_named_under_v08(cfg, named):
    with pytest.raises(ConfigError, match="--stack seed") as e:
        V1.validate_config(cfg)
    assert named in str(e.value)


@pytest.mark.parametrize(("cfg", "named"), [
    ({"trainer": {}, "orchestrator": {"group_size": 4}}, "orchestrator.rollouts_per_example"),
    ({"trainer": {}, "orchestrator": {"train": {"source": [{"env": {"taskset": {"id": "x"}}}]}}}, "[[orchestrator.train.env]]"),
    ({"trainer": {}, "orchestrator": {}, "resume": {"step": 3}}, "ckpt.resume_step"),
])
def test_v08_keys_are_named_under_seed(cfg, named):
    with pytest.raises(ConfigError, match="--stack v1") as e:
        SEED.validate_config(cfg)
    assert named in str(e.value)


def test_v08_rules():
    base = {"trainer": {}, "orchestrator": {}, "model": {"name": "Qwen/Qwen3-0.6B"}}  # in the renderer map
    for bad, msg in [
        ({"orchestrator": {"renderer": {"preserve_all_thinking": True}}}, "has no 'name'"),
        ({"orchestrator": {"batch_size": 10, "group_size": 4}}, "not divisible by orchestrator.group_size"),
        ({"max_steps": 4, "resume": {"step": 4}}, "max_steps is ABSOLUTE"),
        ({"orchestrator": {"train": {"source": [{"name": "a"}]}}}, "env.taskset.id"),
        ({"monitors": {"wandb": {"offline": True}}}, "offline"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            V1.validate_config(toml_paths.deep_merge(base, bad))


def test_taskset_fields_are_open_but_prime_rl_keys_are_not():
    """env.taskset holds the taskset's own config fields (any key); a typo beside it is still refused."""
    src = {"env": {"taskset": {"id": "x", "anything": {"goes": 1}}}, "bogus": 1}
    assert unknown_keys({"orchestrator": {"train": {"source": [src]}}}, V1.keys_file) == ["orchestrator.train.source[0].bogus"]


def test_v1_eval_overlay_keeps_the_seed_checkpoint_policy():
    """iter_0 checkpoints every max_steps / 5 and keeps the latest in both dialects (issue 25: the v0.8
    overlay had lost this and saved once, at max_steps, so a crash mid-iter_0 left nothing to resume)."""
    for max_steps, interval in ((4, 1), (10, 2), (23, 4)):
        overlays = [d.eval_overlay(max_steps=max_steps, eval_env_id=HUB, eval_env_args={}, num_examples=20) for d in (SEED, V1)]
        assert overlays[0]["ckpt"] == overlays[1]["ckpt"] == {"interval": interval, "keep_last": 1}
        assert unknown_keys(overlays[1], V1.keys_file) == []


def test_every_rename_names_a_key_of_each_snapshot():
    """The one rename map: each seed path is a key of the seed snapshot and each v0.8 path one of main's."""
    from selfimprove.stack.dialects import RENAMES
    from selfimprove.stack.prime_rl_keys import node_at

    for r in RENAMES:
        if r.seed:
            assert node_at(r.seed, SEED.keys_file) is not None and node_at(r.seed, V1.keys_file) is None, r
        if r.v08:
            assert node_at(r.v08, V1.keys_file) is not None, r
        if r.seed and r.kind != "hint":
            assert V1.key(r.seed) == r.v08 and SEED.key(r.seed) == r.seed, r


def test_teacher_override_of_the_other_dialect_is_named(tmp_path: Path):
    """A teacher's overrides.toml spelled for the other prime-rl is refused with this run's spelling."""
    from selfimprove.errors import GateFailed
    from selfimprove.phases.arms import teacher_overrides

    f = tmp_path / "overrides.toml"
    f.write_text("[orchestrator]\nrollouts_per_example = 8\n")
    with pytest.raises(GateFailed, match=r"'orchestrator.rollouts_per_example' is a seed-dialect .* orchestrator.group_size"):
        teacher_overrides(f, V1)
    f.write_text("[orchestrator]\ngroup_size = 8\n")
    with pytest.raises(GateFailed, match=r"prime-rl >= 0.8 key; here it is orchestrator.rollouts_per_example"):
        teacher_overrides(f, SEED)
    f.write_text("[trainer.optim]\nlr = 1e-5\n")
    assert teacher_overrides(f, V1) == {"trainer": {"optim": {"lr": 1e-5}}}


def test_each_dialect_reads_the_layout_its_runs_are_written_in():
    """rundir finds an arm's output tree by run.json `stack` (it sits below stack/ and cannot import it):
    that table must agree with each dialect's own layout, which the CPU engine writes."""
    from selfimprove.rundir import LAYOUT_OF_STACK
    from selfimprove.stack.dialects import DIALECTS

    assert set(LAYOUT_OF_STACK) == set(DIALECTS)
    for name, d in DIALECTS.items():
        assert LAYOUT_OF_STACK[name] is d.layout
