"""The prime-rl v0.8 dialect (main at 559b44772): builders, argv, validation, and the seed dialect beside it.

The central check, as for the seed: every config and argv the v0.8 builders write uses only
keys of the main key snapshot (derived from prime-rl's own pydantic classes at 559b44772)
and parses back through the same `rl` contract; a config of the other dialect is named as such.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from selfimprove.errors import ConfigError
from selfimprove.stack import prime_rl as seed
from selfimprove.stack import prime_rl_v08 as v08
from selfimprove.stack.dialects import dialect_named
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
    head = load_key_tree(v08.KEYS_FILE)
    assert head["dialect"] == v08.DIALECT == "prime-rl@559b44772"
    assert head["derived_from"]["commit"].startswith("559b44772") and head["derived_from"]["commit_date"] == "2026-08-21"
    assert "model_fields" in head["derived_from"]["method"]


def test_v08_arm_configs_use_only_main_keys():
    resumed, fresh = _arm(v08)
    for cfg in (resumed, fresh):
        assert unknown_keys(cfg, v08.KEYS_FILE) == []
        v08.validate_config(cfg)
        orch = cfg["orchestrator"]
        assert orch["group_size"] == 4 and "rollouts_per_example" not in orch and orch["renderer"] == {"name": "default"}
        assert orch["train"]["source"][0] == {"env": {"taskset": {"id": "arith_iter_1"}}}
        assert orch["train"]["source"][1] == {"env": {"taskset": {"id": HUB, **ARGS}}, "ratio": 2.0}
        assert orch["eval"]["source"] == [{"env": {"taskset": {"id": HUB, "split": "eval"}}, "num_examples": 20, "group_size": 1}]
        assert cfg["monitors"] == {"wandb": {"project": "p", "name": "n"}} and "wandb" not in cfg
    assert resumed["resume"] == {"step": 4} and resumed["max_steps"] == 8 and resumed["inference"] == {"vllm": {"seed": 7}}
    assert fresh["clean"] is True and "resume" not in fresh and fresh["max_steps"] == 4


def test_v08_argv_round_trips_with_run_name(tmp_path: Path):
    """`--output-dir <parent> --run.name <name>` puts main's run dir exactly at the arm's output dir."""
    resumed, _ = _arm(v08)
    toml = tmp_path / "rl.toml"
    v08.write_toml(toml, resumed)
    out = tmp_path / "iter_1" / "prime_out"
    argv = v08.rl_command_args([toml], {"max_steps": 8}, out)
    assert argv[-4:] == ["--output-dir", str(out.parent), "--run.name", "prime_out"]
    merged, files = v08.parse_rl_argv(argv)
    assert files == [toml] and merged["output_dir"] == str(out) and merged["resume"] == {"step": 4}


def test_v08_iter0_overlay_and_overrides_validate():
    canonical = v08.canonical_from_hub_env(HUB, ARGS, TINY)
    overlay = v08.eval_overlay(max_steps=4, eval_env_id=HUB, eval_env_args={}, num_examples=20)
    overrides = v08.baseline_overrides(model=TINY, max_steps=4, batch_size=16, rollouts_per_example=4, canonical=canonical)
    merged = v08.deep_merge(v08.deep_merge(canonical, overlay), overrides)
    v08.validate_config(merged)
    assert unknown_keys(merged, v08.KEYS_FILE) == []
    argv = v08.rl_command_args([], overrides, Path("/x/prime_out"))
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
        v08.validate_config(cfg)
    assert named in str(e.value)


@pytest.mark.parametrize(("cfg", "named"), [
    ({"trainer": {}, "orchestrator": {"group_size": 4}}, "orchestrator.rollouts_per_example"),
    ({"trainer": {}, "orchestrator": {"train": {"source": [{"env": {"taskset": {"id": "x"}}}]}}}, "[[orchestrator.train.env]]"),
    ({"trainer": {}, "orchestrator": {}, "resume": {"step": 3}}, "ckpt.resume_step"),
])
def test_v08_keys_are_named_under_seed(cfg, named):
    with pytest.raises(ConfigError, match="--stack v1") as e:
        seed.validate_config(cfg)
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
            v08.validate_config(v08.deep_merge(base, bad))


def test_taskset_fields_are_open_but_prime_rl_keys_are_not():
    """env.taskset holds the taskset's own config fields (any key); a typo beside it is still refused."""
    src = {"env": {"taskset": {"id": "x", "anything": {"goes": 1}}}, "bogus": 1}
    assert unknown_keys({"orchestrator": {"train": {"source": [src]}}}, v08.KEYS_FILE) == ["orchestrator.train.source[0].bogus"]


def test_dialects_share_one_interface():
    """Every builder the phases call exists in both dialects with the same keyword arguments."""
    import inspect

    for fn in ("resume_config", "fresh_config", "eval_overlay", "baseline_overrides", "canonical_from_hub_env",
               "canonical_train_envs", "canonical_knobs", "find_canonical_config", "rl_command_args", "parse_rl_argv",
               "validate_config", "read_toml", "write_toml", "normalise_aliases", "training_seed_key", "eval_sources"):
        a, b = getattr(dialect_named("seed"), fn), getattr(dialect_named("v1"), fn)
        names = [[p for p in inspect.signature(f).parameters if p not in ("keys_file", "validate")] for f in (a, b)]
        assert names[0] == names[1], fn


def test_teacher_override_of_the_other_dialect_is_named(tmp_path: Path):
    """A teacher's overrides.toml spelled for the other prime-rl is refused with this run's spelling."""
    from selfimprove.errors import GateFailed
    from selfimprove.phases.arms import teacher_overrides

    f = tmp_path / "overrides.toml"
    f.write_text("[orchestrator]\nrollouts_per_example = 8\n")
    with pytest.raises(GateFailed, match=r"'orchestrator.rollouts_per_example' is a seed-dialect .* orchestrator.group_size"):
        teacher_overrides(f, v08)
    f.write_text("[orchestrator]\ngroup_size = 8\n")
    with pytest.raises(GateFailed, match=r"prime-rl >= 0.8 key; here it is orchestrator.rollouts_per_example"):
        teacher_overrides(f, seed)
    f.write_text("[trainer.optim]\nlr = 1e-5\n")
    assert teacher_overrides(f, v08) == {"trainer": {"optim": {"lr": 1e-5}}}
