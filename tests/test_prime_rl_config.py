"""The prime-rl seed dialect: key set, `rl` command line, TOML IO, validation and builders.

The central check: every config the builders write uses only keys of the seed-dialect key
set (derived from prime-rl's own pydantic classes at 09e297743) with the right types, and
passes the same validation rules prime-rl applies.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import tomli_w

from selfimprove.errors import ConfigError
from selfimprove.stack import prime_rl_keys, toml_paths
from selfimprove.stack.dialects import SEED

HUB = "primeintellect/gsm8k"
TINY = "selfimprove/tiny-arith"  # not in prime-rl's renderer map
QWEN = "Qwen/Qwen3-0.6B"  # in prime-rl's renderer map

# A canonical config shaped like prime-rl's configs/<dataset>/rl.toml (written here, not copied).
CANONICAL = {
    "max_steps": 100,
    "seq_len": 4096,
    "wandb": {"project": "demo-debug", "name": "demo"},
    "model": {"name": QWEN},
    "orchestrator": {
        "batch_size": 512,
        "rollouts_per_example": 16,
        "train": {
            "sampling": {"max_completion_tokens": 1536, "temperature": 0.8},
            "env": [{"id": "math-env", "name": "demo", "args": {"dataset_name": "demo/demo", "split": "train"}}],
        },
        "eval": {"interval": 10, "env": [{"id": "math500", "num_examples": 30, "rollouts_per_example": 4}]},
        "renderer": {"preserve_all_thinking": True},
    },
    "trainer": {"optim": {"lr": 2e-6}},
    "inference": {},
}


def write(path: Path, cfg: dict) -> Path:
    path.write_text(tomli_w.dumps(cfg), encoding="utf-8")
    return path


def assert_in_key_set(cfg: dict) -> None:
    assert prime_rl_keys.unknown_keys(cfg) == []
    assert prime_rl_keys.type_errors(cfg) == []
    SEED.validate_config(cfg)


def resume_kwargs(**over):
    kw = dict(model=QWEN, resume_step=100, new_steps=100, batch_size=512, rollouts_per_example=16,
              train_envs=[{"id": "gsm8k_iter_1"}], eval_env_id=HUB, eval_env_args={}, num_examples=200)
    kw.update(over)
    return kw


# ---------------------------------------------------------------- the key set file


def test_key_tree_has_provenance_header():
    """The key set names the prime-rl commit, the class and the method it was derived with."""
    tree = prime_rl_keys.load_key_tree()
    assert tree["dialect"] == SEED.DIALECT == "prime-rl@09e297743"
    src = tree["derived_from"]
    assert src["commit"].startswith("09e297743") and len(src["commit"]) == 40
    assert "RLConfig" in src["root_class"] and "prime-rl-configs" in src["package"]
    assert "walked" in src["method"]
    assert tree["required_sections"] == ["trainer", "orchestrator"]
    assert QWEN in tree["renderer_auto_models"] and TINY not in tree["renderer_auto_models"]


@pytest.mark.parametrize("path, kind", [
    ("max_steps", "int"), ("seq_len", "int"), ("output_dir", "str"), ("clean_output_dir", "bool"),
    ("model.name", "str"), ("ckpt.interval", "int"), ("ckpt.resume_step", "int"), ("ckpt.keep_last", "int"),
    ("ckpt.keep_interval", "int"), ("wandb.project", "str"), ("wandb.name", "str"), ("wandb.entity", "str"),
    ("wandb.group", "str"), ("wandb.tags", "list"), ("wandb.offline", "bool"), ("wandb.shared", "bool"),
    ("orchestrator.batch_size", "int"), ("orchestrator.rollouts_per_example", "int"), ("orchestrator.seed", "int"),
    ("orchestrator.train.sampling.max_completion_tokens", "int"), ("orchestrator.train.sampling.temperature", "float"),
    ("orchestrator.train.env", "tables"), ("orchestrator.train.env.id", "str"), ("orchestrator.train.env.name", "str"),
    ("orchestrator.train.env.args", "dict"), ("orchestrator.train.env.ratio", "float"),
    ("orchestrator.eval.interval", "int"), ("orchestrator.eval.num_examples", "int"),
    ("orchestrator.eval.rollouts_per_example", "int"), ("orchestrator.eval.eval_base_model", "bool"),
    ("orchestrator.eval.skip_eval_on_resume", "bool"), ("orchestrator.eval.sampling.max_completion_tokens", "int"),
    ("orchestrator.eval.sampling.temperature", "float"), ("orchestrator.eval.env", "tables"),
    ("orchestrator.eval.env.num_examples", "int"), ("orchestrator.eval.env.rollouts_per_example", "int"),
    ("orchestrator.renderer.name", "str"), ("trainer.optim.lr", "float"), ("inference", "table"),
])
def test_loop_keys_are_in_the_key_set(path, kind):
    """Every key the loop writes is in the key set derived from prime-rl's source, with its type."""
    assert prime_rl_keys.leaf_type(path) == kind


def test_keys_that_do_not_exist_in_the_seed_dialect():
    """Later-dialect names and invented keys are not accepted."""
    for path in ("ckpt.keep", "resume.step", "orchestrator.group_size", "orchestrator.train.source",
                 "monitors.wandb", "orchestrator.wandb.shared"):
        assert prime_rl_keys.leaf_type(path) is None, path


def test_key_tree_loads_through_importlib_resources():
    """The JSON ships inside the package (so a wheel carries it) and is cached."""
    from importlib import resources

    assert resources.files("selfimprove.stack").joinpath("prime_rl_seed_keys.json").is_file()
    assert prime_rl_keys.load_key_tree() is prime_rl_keys.load_key_tree()


# ---------------------------------------------------------------- unknown keys, types, GPU-only


def test_unknown_keys_descend_into_tables_and_array_entries():
    """Unknown keys are reported as sorted dotted paths, array-of-table entries by index."""
    cfg = copy.deepcopy(CANONICAL)
    cfg["orchestrator"]["foo"] = 1
    cfg["orchestrator"]["train"]["env"].append({"id": "x", "weight": 2})
    cfg["bogus"] = {"a": 1}
    cfg["orchestrator"]["train"]["env"][0]["args"]["anything"] = {"goes": 1}  # env args are free-form
    assert prime_rl_keys.unknown_keys(cfg) == ["bogus", "orchestrator.foo", "orchestrator.train.env[1].weight"]


def test_aliases_prime_rl_accepts_are_known():
    """Spellings prime-rl accepts (max_tokens, [[orchestrator.env]], flat [orchestrator.model]) are not unknown."""
    cfg = {"trainer": {}, "orchestrator": {"env": [{"id": "x"}], "model": {"name": QWEN},
                                           "train": {"sampling": {"max_tokens": 10}},
                                           "eval": {"skip_eval_on_restart": True}}}
    assert prime_rl_keys.unknown_keys(cfg) == []


def test_alias_spellings_are_normalised_and_both_refused():
    """Old spellings move to prime-rl's names (also inside [[...env]] blocks); both in one table is refused."""
    cfg = {"trainer": {}, "orchestrator": {"env": [{"id": "x", "sampling": {"max_tokens": 7}}],
                                           "eval": {"sampling": {"max_tokens": 9}, "skip_eval_on_restart": True}}}
    out, notes = SEED.normalise_aliases(cfg)
    assert out["orchestrator"] == {"train": {"env": [{"id": "x", "sampling": {"max_completion_tokens": 7}}]},
                                   "eval": {"sampling": {"max_completion_tokens": 9}, "skip_eval_on_resume": True}}
    assert "orchestrator.eval.sampling.max_tokens -> orchestrator.eval.sampling.max_completion_tokens" in notes
    assert cfg["orchestrator"]["eval"]["sampling"] == {"max_tokens": 9}  # input untouched
    both = toml_paths.deep_merge(cfg, {"orchestrator": {"eval": {"sampling": {"max_completion_tokens": 2048}}}})
    for call in (SEED.normalise_aliases, SEED.validate_config):
        with pytest.raises(ConfigError, match=r"orchestrator\.eval\.sampling\.max_tokens and orchestrator\.eval\.sampling\.max_completion_tokens"):
            call(both)


def test_type_errors_name_key_and_types():
    """Clear mismatches are reported; lax-mode coercions prime-rl accepts are not."""
    cfg = {"max_steps": "abc", "seq_len": "2048", "model": {"name": 5}, "trainer": {"optim": {"lr": 1}},
           "wandb": {"offline": True, "tags": "x"}, "orchestrator": {"batch_size": True, "train": {"env": {"id": "x"}}}}
    assert sorted(prime_rl_keys.type_errors(cfg)) == sorted([
        "max_steps: expected int, got str",
        "model.name: expected str, got int",
        "wandb.tags: expected list, got str",
        "orchestrator.batch_size: expected int, got bool",
        "orchestrator.train.env: expected an array of tables ([[orchestrator.train.env]]), got table",
    ])


def test_gpu_only_keys_lists_present_gpu_sections():
    """Sections only a GPU run uses are listed so the CPU engine can say it ignores them."""
    cfg = {"inference": {}, "trainer": {"model": {"compile": {}}}, "orchestrator": {}, "deployment": {"num_train_gpus": 2}}
    assert prime_rl_keys.gpu_only_keys(cfg) == ["deployment", "inference", "trainer.model.compile"]
    assert prime_rl_keys.gpu_only_keys({"trainer": {}, "orchestrator": {}}) == []


# ---------------------------------------------------------------- merge and CLI


def test_deep_merge_merges_tables_and_replaces_lists():
    """Tables merge recursively; lists and scalars are replaced whole; inputs are untouched."""
    base = {"a": {"x": 1, "y": [1, 2]}, "l": [{"id": "real"}], "s": 1}
    over = {"a": {"y": [3]}, "l": [{"id": "gen"}], "s": {"t": 2}}
    before = copy.deepcopy((base, over))
    assert toml_paths.deep_merge(base, over) == {"a": {"x": 1, "y": [3]}, "l": [{"id": "gen"}], "s": {"t": 2}}
    assert (base, over) == before


def test_parse_cli_overrides_the_seed_example():
    """Kebab-case flags become snake_case paths; values are typed; bare and --no- flags are booleans."""
    got = prime_rl_keys.parse_cli_overrides(["--model.name", "X", "--max-steps", "100", "--orchestrator.batch-size", "512",
                                   "--wandb.offline", "--no-ckpt.x"])
    assert got == {"model": {"name": "X"}, "max_steps": 100, "orchestrator": {"batch_size": 512},
                   "wandb": {"offline": True}, "ckpt": {"x": False}}


def test_parse_cli_overrides_toml_literals():
    """Numbers, booleans, arrays and inline tables parse as TOML; JSON objects work; other text stays a string."""
    got = prime_rl_keys.parse_cli_overrides([
        "--trainer.optim.lr", "1e-5", "--ckpt.resume-step", "-1", "--wandb.tags", '["a", "b"]',
        "--orchestrator.train.sampling.extra-body", "{ top_k = 5 }", "--orchestrator.eval.sampling.extra-body",
        '{"min_p": 0.1}', "--clean-output-dir=true", "--wandb.shared", "false", "--output-dir", "runs/x",
        "--model.name", "123", "--some.unknown", "hello world",
    ])
    assert got == {
        "trainer": {"optim": {"lr": 1e-5}}, "ckpt": {"resume_step": -1}, "wandb": {"tags": ["a", "b"], "shared": False},
        "orchestrator": {"train": {"sampling": {"extra_body": {"top_k": 5}}}, "eval": {"sampling": {"extra_body": {"min_p": 0.1}}}},
        "clean_output_dir": True, "output_dir": "runs/x", "model": {"name": "123"}, "some": {"unknown": "hello world"},
    }


def test_parse_cli_overrides_tables_and_errors():
    """A bare table flag enables it, --no-<table> disables it; a valueless int flag or a stray token is an error."""
    assert prime_rl_keys.parse_cli_overrides(["--wandb", "--no-ckpt"]) == {"wandb": {}, "ckpt": "None"}
    with pytest.raises(ConfigError, match="--max-steps requires a value"):
        prime_rl_keys.parse_cli_overrides(["--max-steps"])
    with pytest.raises(ConfigError, match="unrecognized argument 'oops'"):
        prime_rl_keys.parse_cli_overrides(["oops"])


def test_rl_command_args_seed_form():
    """The iter_0 launch line matches the seed's, flag for flag."""
    ov = SEED.baseline_overrides(model=QWEN, max_steps=100, batch_size=512, rollouts_per_example=16)
    assert SEED.rl_command_args([Path("c/rl.toml"), Path("r/iter_0/eval_overlay.toml")], ov, Path("r/iter_0/prime_out")) == [
        "@", "c/rl.toml", "@", "r/iter_0/eval_overlay.toml", "--model.name", QWEN, "--max-steps", "100",
        "--orchestrator.batch-size", "512", "--orchestrator.rollouts-per-example", "16", "--output-dir", "r/iter_0/prime_out",
    ]


def test_rl_command_args_round_trips_through_the_parser():
    """Rendering overrides as flags and parsing them back gives the same dict (+ output_dir)."""
    ov = {"model": {"name": TINY}, "max_steps": 150, "orchestrator": {"batch_size": 64, "renderer": {"name": "default"},
          "train": {"sampling": {"temperature": 0.7, "extra_body": {"top_k": -1}}}},
          "wandb": {"offline": True, "shared": False, "tags": ["a", "b c"]}, "trainer": {"optim": {"lr": 3e-06}}, "inference": {}}
    argv = SEED.rl_command_args([], ov, Path("/tmp/out"))
    assert "--no-wandb.shared" in argv and "--inference" in argv
    assert prime_rl_keys.parse_cli_overrides(argv) == {**ov, "output_dir": "/tmp/out"}


def test_rl_command_args_refuses_what_the_cli_cannot_carry():
    """Arrays of tables belong in a TOML file; output_dir is its own argument."""
    with pytest.raises(ConfigError, match="array of tables"):
        SEED.rl_command_args([], {"orchestrator": {"train": {"env": [{"id": "x"}]}}}, Path("o"))
    with pytest.raises(ConfigError, match="--output-dir"):
        SEED.rl_command_args([], {"output_dir": "x"}, Path("o"))


# ---------------------------------------------------------------- parse_rl_argv


def test_parse_rl_argv_merges_files_then_cli(tmp_path):
    """Files merge left to right (lists replaced), then CLI overrides and --output-dir win."""
    a = write(tmp_path / "a.toml", CANONICAL)
    overlay = SEED.eval_overlay(max_steps=100, eval_env_id=HUB, eval_env_args={}, num_examples=200)
    b = write(tmp_path / "b.toml", overlay)
    cfg, files = SEED.parse_rl_argv(["@", str(a), "@", str(b), "--model.name", "Qwen/Qwen3-1.7B", "--max-steps", "50",
                                    "--output-dir", str(tmp_path / "out")])
    assert files == [a, b]
    assert cfg["max_steps"] == 50 and cfg["model"]["name"] == "Qwen/Qwen3-1.7B" and cfg["output_dir"] == str(tmp_path / "out")
    assert cfg["orchestrator"]["eval"]["env"] == [{"id": HUB, "num_examples": 200, "rollouts_per_example": 1}]
    assert cfg["orchestrator"]["eval"]["interval"] == 100  # overlay beat the canonical's 10
    assert cfg["orchestrator"]["train"] == CANONICAL["orchestrator"]["train"]  # untouched table kept


def test_parse_rl_argv_nested_file(tmp_path):
    """`--trainer @ t.toml` nests a file under a key, as prime-rl does."""
    base = write(tmp_path / "base.toml", {"orchestrator": {}, "trainer": {}})
    t = write(tmp_path / "t.toml", {"optim": {"lr": 1e-6}})
    cfg, files = SEED.parse_rl_argv(["@", str(base), "--trainer", "@", str(t)])
    assert cfg["trainer"] == {"optim": {"lr": 1e-6}} and files == [base, t]


def test_parse_rl_argv_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"config file not found: .*nope\.toml"):
        SEED.parse_rl_argv(["@", str(tmp_path / "nope.toml")])


def test_parse_rl_argv_at_without_path():
    with pytest.raises(ConfigError, match="@ must be followed by a config file path"):
        SEED.parse_rl_argv(["@"])


def test_toml_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("max_steps = 10\n[orchestrator]\nbatch_size = = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"invalid TOML in .*bad\.toml at line 3"):
        SEED.parse_rl_argv(["@", str(bad)])


def test_unknown_key_error_wording(tmp_path):
    cfg = copy.deepcopy(CANONICAL)
    cfg["orchestrator"]["foo"] = 1
    with pytest.raises(ConfigError) as e:
        SEED.parse_rl_argv(["@", str(write(tmp_path / "c.toml", cfg))])
    assert str(e.value) == "Config file error: unknown key 'orchestrator.foo' (extra inputs are not permitted)"


def test_unknown_cli_key_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'orchestrator.batchsize'"):
        SEED.parse_rl_argv(["@", str(write(tmp_path / "c.toml", CANONICAL)), "--orchestrator.batchsize", "4"])


@pytest.mark.parametrize("section", ["trainer", "orchestrator"])
def test_missing_required_section(tmp_path, section):
    cfg = copy.deepcopy(CANONICAL)
    del cfg[section]
    with pytest.raises(ConfigError, match=rf"missing \[{section}\] section"):
        SEED.parse_rl_argv(["@", str(write(tmp_path / "c.toml", cfg))])


def test_shared_key_at_top_level_and_in_section(tmp_path):
    """max_steps both at top level (CLI) and as trainer.max_steps (file) is refused, like prime-rl does."""
    cfg = copy.deepcopy(CANONICAL)
    del cfg["max_steps"]
    cfg["trainer"]["max_steps"] = 100
    with pytest.raises(ConfigError, match="'max_steps' is set at top level and as 'trainer.max_steps'"):
        SEED.parse_rl_argv(["@", str(write(tmp_path / "c.toml", cfg)), "--max-steps", "100"])


def test_batch_size_not_divisible(tmp_path):
    with pytest.raises(ConfigError, match="batch_size = 500 is not divisible by orchestrator.rollouts_per_example = 16"):
        SEED.parse_rl_argv(["@", str(write(tmp_path / "c.toml", CANONICAL)), "--orchestrator.batch-size", "500"])


# ---------------------------------------------------------------- validate_config rules


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c.__setitem__("wandb", {"offline": True}), "wandb.offline = true needs wandb.shared = false"),
    (lambda c: c["orchestrator"]["train"]["env"].append({"id": "x", "name": "demo"}), "names are not unique"),
    (lambda c: c["orchestrator"]["train"]["env"].append({"id": "x", "ratio": 0.5}), "ratio must be set on all blocks or none"),
    (lambda c: c["orchestrator"]["eval"]["env"].append({"id": "y", "name": "all"}), "name 'all' is reserved"),
    (lambda c: c.__setitem__("ckpt", {"resume_step": 100}), r"ckpt.resume_step = 100 but max_steps = 100"),
    (lambda c: c.__setitem__("ckpt", {"keep_last": 0}), "ckpt.keep_last = 0: must be >= 1"),
    (lambda c: c["trainer"].__setitem__("ckpt", {"interval": 5}), r"\[trainer.ckpt\] is set but \[orchestrator.ckpt\] is not"),
    (lambda c: c["orchestrator"].__setitem__("token_batch_size", 1000), "set exactly one"),
    (lambda c: c["model"].__setitem__("name", TINY), "renderer.name is 'auto' but 'selfimprove/tiny-arith'"),
    (lambda c: (c.pop("model"), c["inference"].__setitem__("model", {"name": "Qwen/Qwen3-1.7B"})),
     "orchestrator model 'Qwen/Qwen3-0.6B' differs from inference.model.name"),
    (lambda c: c["orchestrator"].__setitem__("batch_size", "many"), "orchestrator.batch_size: expected int, got str"),
])
def test_validate_config_rules(mutate, message):
    """Each prime-rl rule (and the seed's resume_step < max_steps) is a one-line ConfigError naming the key."""
    cfg = copy.deepcopy(CANONICAL)
    SEED.validate_config(cfg)
    mutate(cfg)
    with pytest.raises(ConfigError, match=message) as e:
        SEED.validate_config(cfg)
    assert "\n" not in str(e.value)


def test_validate_config_partial_checks_keys_only():
    """An overlay is validated for keys and types only."""
    overlay = SEED.eval_overlay(max_steps=100, eval_env_id=HUB, eval_env_args={}, num_examples=200)
    SEED.validate_config(overlay, partial=True)
    with pytest.raises(ConfigError, match="missing"):
        SEED.validate_config(overlay)
    with pytest.raises(ConfigError, match="unknown key 'ckpt.keep'"):
        SEED.validate_config({"ckpt": {"keep": 3}}, partial=True)


# ---------------------------------------------------------------- TOML IO


def test_write_toml_round_trips_and_is_atomic(tmp_path):
    cfg = SEED.resume_config(**resume_kwargs())
    path = tmp_path / "iter_1" / "rl.toml"
    SEED.write_toml(path, cfg)
    assert toml_paths.read_toml(path) == cfg
    assert [p.name for p in path.parent.iterdir()] == ["rl.toml"]  # no temp file left
    assert path.read_text().startswith("# Written by selfimprove")


def test_write_toml_refuses_invalid_config(tmp_path):
    bad = copy.deepcopy(CANONICAL)
    bad["orchestrator"]["foo"] = 1
    with pytest.raises(ConfigError, match="orchestrator.foo"):
        SEED.write_toml(tmp_path / "rl.toml", bad)
    assert not (tmp_path / "rl.toml").exists()
    with pytest.raises(ConfigError, match="None"):
        SEED.write_toml(tmp_path / "rl.toml", {**CANONICAL, "seq_len": None})


def test_written_config_reads_back_through_the_rl_argv(tmp_path):
    """write_toml + rl_command_args + parse_rl_argv reproduce the config (+ output_dir)."""
    cfg = SEED.resume_config(**resume_kwargs(wandb={"project": "p", "name": "iter_1"}))
    path = tmp_path / "rl.toml"
    SEED.write_toml(path, cfg)
    merged, files = SEED.parse_rl_argv(SEED.rl_command_args([path], {}, tmp_path / "out"))
    assert files == [path] and merged == {**cfg, "output_dir": str(tmp_path / "out")}


# ---------------------------------------------------------------- builders


def test_eval_overlay_is_the_seeds():
    """The seed's eval (interval = max_steps, one hub eval env with 1 rollout each); checkpoints every
    fifth of the steps, the latest kept, so a crashed iter_0 can --resume (issue 13 over the seed's one)."""
    ov = SEED.eval_overlay(max_steps=100, eval_env_id=HUB, eval_env_args={"split": "test"}, num_examples=200)
    assert ov == {"ckpt": {"interval": 20, "keep_last": 1}, "orchestrator": {"eval": {
        "interval": 100, "sampling": {"max_completion_tokens": 2048},
        "env": [{"id": HUB, "args": {"split": "test"}, "num_examples": 200, "rollouts_per_example": 1}]}}}


@pytest.mark.parametrize("model", [QWEN, TINY])
def test_iter0_configs_pass_the_key_set(model, tmp_path):
    """canonical (file or hub-derived) + eval overlay + baseline CLI overrides is a valid seed-dialect config."""
    overlay = SEED.eval_overlay(max_steps=100, eval_env_id=HUB, eval_env_args={}, num_examples=200)
    SEED.write_toml(tmp_path / "eval_overlay.toml", overlay, partial=True)
    for canonical in (CANONICAL, SEED.canonical_from_hub_env(HUB, {"num_train_examples": 1000}, model)):
        cli = SEED.baseline_overrides(model=model, max_steps=100, batch_size=512, rollouts_per_example=16, canonical=canonical)
        canon_path = write(tmp_path / "rl.toml", canonical)
        cfg, _ = SEED.parse_rl_argv(SEED.rl_command_args([canon_path, tmp_path / "eval_overlay.toml"], cli, tmp_path / "out"))
        assert_in_key_set(cfg)
        assert cfg["model"]["name"] == model and cfg["ckpt"] == {"interval": 20, "keep_last": 1}
        # only a canonical that leaves the renderer on 'auto' needs the CLI fix for the tiny model
        assert ("renderer" in cli["orchestrator"]) == (model == TINY and canonical is CANONICAL)


def test_canonical_from_hub_env():
    """The hub env is the one train env, with its args verbatim; a tiny CPU student gets renderer 'default'."""
    c = SEED.canonical_from_hub_env(HUB, {"num_train_examples": 1000}, TINY)
    assert c["orchestrator"]["train"]["env"] == [{"id": HUB, "args": {"num_train_examples": 1000}}]
    assert c["orchestrator"]["renderer"] == {"name": "default"} and c["model"] == {"name": TINY}
    assert "trainer" in c and "inference" in c
    assert "renderer" not in SEED.canonical_from_hub_env(HUB, {}, QWEN)["orchestrator"]
    assert "args" not in SEED.canonical_from_hub_env(HUB, {}, QWEN)["orchestrator"]["train"]["env"][0]


def test_resume_config_matches_the_seed_template():
    cfg = SEED.resume_config(**resume_kwargs(wandb={"project": "synthetic-self-improve-rl-gsm8k", "name": "iter_1"}))
    assert_in_key_set(cfg)
    assert cfg["max_steps"] == 200 and cfg["seq_len"] == 2048
    assert cfg["ckpt"] == {"interval": 100, "resume_step": 100}
    assert isinstance(cfg["ckpt"]["resume_step"], int)
    orch = cfg["orchestrator"]
    assert (orch["batch_size"], orch["rollouts_per_example"]) == (512, 16)
    assert orch["train"] == {"sampling": {"max_completion_tokens": 1024}, "env": [{"id": "gsm8k_iter_1"}]}
    assert orch["eval"] == {"interval": 200, "sampling": {"max_completion_tokens": 2048},
                            "env": [{"id": HUB, "num_examples": 200, "rollouts_per_example": 1}]}
    assert "renderer" not in orch and cfg["trainer"] == {} and cfg["inference"] == {}
    assert cfg["wandb"] == {"project": "synthetic-self-improve-rl-gsm8k", "name": "iter_1"}


@pytest.mark.parametrize("bad", [dict(new_steps=0), dict(resume_step=0), dict(resume_step=-1), dict(resume_step="100"),
                                 dict(train_envs=[]), dict(num_examples=0), dict(batch_size=500)])
def test_resume_config_refusals(bad):
    """Zero new steps (resume_step == max_steps), a non-integer or latest(-1) resume step, and bad sizes are refused."""
    with pytest.raises(ConfigError):
        SEED.resume_config(**resume_kwargs(**bad))


def test_resume_config_inherits_canonical_knobs_and_takes_overrides():
    """canonical_knobs carries iter_0's training knobs; explicit teacher knobs win over them."""
    knobs = SEED.canonical_knobs(CANONICAL)
    assert knobs == {"seq_len": 4096, "train_max_tokens": 1536, "temperature": 0.8, "lr": 2e-6,
                     "renderer": {"preserve_all_thinking": True}}
    cfg = SEED.resume_config(**resume_kwargs(model=TINY, **{**knobs, "lr": 5e-6, "seed": 3}))
    assert_in_key_set(cfg)
    assert cfg["seq_len"] == 4096 and cfg["trainer"] == {"optim": {"lr": 5e-6}} and cfg["orchestrator"]["seed"] == 3
    assert cfg["orchestrator"]["train"]["sampling"] == {"max_completion_tokens": 1536, "temperature": 0.8}
    # the inherited renderer table keeps its knobs; 'auto' would reject the tiny model, so name = default
    assert cfg["orchestrator"]["renderer"] == {"preserve_all_thinking": True, "name": "default"}
    assert cfg["orchestrator"]["eval"]["sampling"] == {"max_completion_tokens": 2048}  # eval budget is never inherited


def test_fresh_config_run_b_two_train_envs():
    """Run B: from base (no resume_step), max_steps = new steps, real block verbatim + generated block."""
    envs = SEED.canonical_train_envs(CANONICAL) + [{"id": "demo_run_b"}]
    cfg = SEED.fresh_config(model=QWEN, new_steps=100, batch_size=512, rollouts_per_example=16, train_envs=envs,
                           eval_env_id=HUB, eval_env_args={}, num_examples=-1, **SEED.canonical_knobs(CANONICAL))
    assert_in_key_set(cfg)
    assert cfg["max_steps"] == 100 and cfg["ckpt"] == {"interval": 100}
    assert cfg["orchestrator"]["train"]["env"] == [CANONICAL["orchestrator"]["train"]["env"][0], {"id": "demo_run_b"}]
    assert cfg["orchestrator"]["eval"]["env"][0]["num_examples"] == -1


def test_fresh_config_wandb_offline_and_clean_output_dir():
    cfg = SEED.fresh_config(model=TINY, new_steps=10, batch_size=32, rollouts_per_example=4, train_envs=[{"id": "a"}],
                           eval_env_id=HUB, eval_env_args={}, num_examples=20, wandb={"project": "p", "offline": True},
                           clean_output_dir=True)
    assert_in_key_set(cfg)
    assert cfg["wandb"] == {"project": "p", "offline": True, "shared": False} and cfg["clean_output_dir"] is True


def test_canonical_train_envs_are_copies_and_required():
    envs = SEED.canonical_train_envs(CANONICAL)
    envs[0]["args"]["split"] = "changed"
    assert CANONICAL["orchestrator"]["train"]["env"][0]["args"]["split"] == "train"
    with pytest.raises(ConfigError, match="no \\[\\[orchestrator.train.env\\]\\]"):
        SEED.canonical_train_envs({"orchestrator": {}})


# ---------------------------------------------------------------- finding the canonical config


def test_find_canonical_config_order(tmp_path, monkeypatch):
    """--config, then <PRIME_RL_DIR>/configs/<dataset>/rl.toml, then the project configs dirs."""
    prime, proj = tmp_path / "prime-rl", tmp_path / "proj-configs"
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)
    found, tried = SEED.find_canonical_config("alphabet-sort", None, str(prime), [proj])
    assert found is None and tried[0] == prime / "configs" / "alphabet-sort" / "rl.toml"
    assert prime / "configs" / "alphabet_sort" / "rl.toml" in tried and tried[-1].parent.parent == proj

    write((proj / "alphabet-sort").mkdir(parents=True) or proj / "alphabet-sort" / "rl.toml", CANONICAL)
    assert SEED.find_canonical_config("alphabet-sort", None, str(prime), [proj])[0] == proj / "alphabet-sort" / "rl.toml"

    (prime / "configs" / "alphabet_sort").mkdir(parents=True)
    write(prime / "configs" / "alphabet_sort" / "rl.toml", CANONICAL)
    monkeypatch.setenv("PRIME_RL_DIR", str(prime))
    assert SEED.find_canonical_config("alphabet-sort", None, None, [proj])[0] == prime / "configs" / "alphabet_sort" / "rl.toml"

    explicit = write(tmp_path / "mine.toml", CANONICAL)
    assert SEED.find_canonical_config("alphabet-sort", str(explicit), None, [proj]) == (explicit, [explicit])
    assert SEED.find_canonical_config("alphabet-sort", str(tmp_path / "gone.toml"), None, [proj]) == (None, [tmp_path / "gone.toml"])
