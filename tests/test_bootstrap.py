"""Phase 0 (`selfimprove bootstrap`) through the CLI runner: the files it writes, its
--json output, and every bad input of issue 2 (one line, non-zero exit, nothing
half-written). Also the run-dir errors every later command shares (missing run dir,
no run.json, corrupt run.json naming the field)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from selfimprove.models import Metrics, RunConfig
from selfimprove.phases import bootstrap as bootstrap_phase
from selfimprove.rundir import read_model


def entries(d: Path) -> list[str]:
    """Everything in a dir, hidden staging dirs included."""
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def boot(cli, runs_dir: Path, *args: str):
    return cli("bootstrap", *args, "--runs-dir", runs_dir)


# ---------------------------------------------------------------- happy path


def test_bootstrap_writes_a_valid_run_dir(cli, runs_dir):
    """Defaults are the seed's; RUN_DIR alone on stdout; run.json, metrics.json, scratchpad.md valid."""
    res = boot(cli, runs_dir, "gsm8k")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1
    run_dir = Path(lines[0])
    assert run_dir.parent == runs_dir.resolve()
    assert re.fullmatch(r"gsm8k-\d{4}-\d{2}-\d{2}T\d{6}Z", run_dir.name)
    assert entries(runs_dir) == [run_dir.name]
    assert sorted(entries(run_dir)) == ["metrics.json", "run.json", "scratchpad.md"]

    cfg = read_model(run_dir / "run.json", RunConfig)
    assert (cfg.dataset, cfg.hub_id, cfg.model) == ("gsm8k", "primeintellect/gsm8k", "Qwen/Qwen3-0.6B")
    assert (cfg.budget_seconds, cfg.max_iters, cfg.batch_size) == (36000, 15, 512)
    assert cfg.init_from is None and cfg.status == "running" and cfg.compact_warnings == []
    assert (cfg.steps_per_run, cfg.rollouts_per_example, cfg.eval_examples) == (100, 16, 200)
    assert cfg.engine == "prime-rl" and cfg.allow_small_batch is False and cfg.env_args == {}
    assert cfg.versions["selfimprove"] and cfg.versions["python"] and cfg.versions.get("verifiers")
    raw = json.loads((run_dir / "run.json").read_text())
    for key in ("dataset", "hub_id", "model", "start_ts", "budget_seconds", "max_iters", "batch_size",
                "init_from", "status", "compact_warnings"):  # the seed's Phase 0 keys
        assert key in raw

    assert read_model(run_dir / "metrics.json", Metrics).iters == []
    assert json.loads((run_dir / "metrics.json").read_text())["iters"] == []
    pad = (run_dir / "scratchpad.md").read_text()
    assert pad.startswith("# Self-improvement run: gsm8k") and "primeintellect/gsm8k" in pad
    # --budget caps Phase 3 only: its clock has not started, and the header says when it will.
    assert cfg.phase3_start_ts is None
    assert "budget (Phase 3 only): 36000 s, on a clock that starts at the first `selfimprove iterate`" in pad
    assert "baseline, including any first-use build of the student, are not charged" in pad


def test_bootstrap_json_and_recorded_overrides(cli, runs_dir):
    """--json prints one object equal to run.json plus run_dir; every override is recorded."""
    res = boot(
        cli, runs_dir, "selfimprove-arith", "--json", "--model", "selfimprove/tiny-arith", "--budget", "1h30m",
        "--hub-id", "selfimprove-arith", "--max-iters", "3", "--batch-size", "64", "--rollouts-per-example", "4",
        "--steps-per-run", "5", "--eval-examples", "20", "--env-args", '{"num_train_examples": 500}',
    )
    assert res.exit_code == 0, res.stderr
    payload = json.loads(res.stdout)
    run_dir = Path(payload.pop("run_dir"))
    assert payload == json.loads((run_dir / "run.json").read_text())
    cfg = RunConfig.model_validate(payload)
    assert cfg.budget_seconds == 5400 and cfg.hub_id == "selfimprove-arith" and cfg.max_iters == 3
    assert (cfg.batch_size, cfg.rollouts_per_example, cfg.unique_prompts_per_step) == (64, 4, 16)
    assert (cfg.steps_per_run, cfg.eval_examples) == (5, 20)
    assert cfg.env_args == {"num_train_examples": 500}
    assert cfg.engine == "local"  # auto: a built-in CPU student


def test_allow_small_batch_is_recorded(cli, runs_dir):
    """Below 16 unique prompts per step passes only with --allow-small-batch, which run.json keeps."""
    res = boot(cli, runs_dir, "tiny", "--batch-size", "32", "--json", "--allow-small-batch")
    assert res.exit_code == 0, res.stderr
    cfg = RunConfig.model_validate({k: v for k, v in json.loads(res.stdout).items() if k != "run_dir"})
    assert cfg.allow_small_batch is True and cfg.unique_prompts_per_step == 2


def test_two_bootstraps_in_the_same_second(cli, runs_dir, monkeypatch):
    """A name clash is refused instead of overwriting the first run."""
    monkeypatch.setattr(bootstrap_phase.time, "time", lambda: 1_790_000_000.0)
    assert boot(cli, runs_dir, "same").exit_code == 0
    first = entries(runs_dir)
    res = boot(cli, runs_dir, "same")
    assert res.exit_code == 2 and "already exists" in res.stderr
    assert entries(runs_dir) == first


# ---------------------------------------------------------------- bad input


def one_line_error(res) -> str:
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (["--budget", "10x"], 2, "--budget '10x'"),
        (["--budget", "0m"], 2, "longer than zero"),
        (["--budget", "h"], 2, "--budget 'h'"),
        (["--batch-size", "500"], 2, "multiple of rollouts_per_example (16)"),
        (["--batch-size", "128"], 2, "8 unique prompts per step"),
        (["--batch-size", "40", "--rollouts-per-example", "4"], 2, "10 unique prompts"),
        (["--rollouts-per-example", "0"], 2, "--rollouts-per-example 0"),
        (["--max-iters", "0"], 2, "--max-iters 0"),
        (["--steps-per-run", "0"], 2, "--steps-per-run 0"),
        (["--env-args", "{not json"], 2, "--env-args: not valid JSON"),
        (["--env-args", "[1, 2]"], 2, "must be a JSON object"),
        (["--engine", "gpu-magic"], 2, "--engine 'gpu-magic'"),
        (["--init-from", "relative/run"], 2, "must be an absolute path"),
        (["--init-from", "/nonexistent/prior-run"], 2, "directory not found"),
        (["--config", "/nonexistent/rl.toml"], 2, "file not found"),
        (["--batch-size", str(10**15)], 2, "at most 1048576 rollouts per step"),
        (["--hub-id", "a b/c d"], 2, "--hub-id 'a b/c d': expected owner/name"),
        (["--hub-id", "owner/env;rm"], 2, "--hub-id 'owner/env;rm'"),
    ],
)
def test_bad_flags_one_line_nothing_written(cli, runs_dir, args, code, needle):
    """Each bad flag: one-line error naming it, usage exit code, and the runs dir stays empty."""
    res = boot(cli, runs_dir, "gsm8k", *args)
    assert res.exit_code == code
    assert needle in one_line_error(res)
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert entries(runs_dir) == []


def test_unknown_flag(cli, runs_dir):
    """An unknown flag is a usage error (exit 2) that names it."""
    res = boot(cli, runs_dir, "gsm8k", "--bogus-flag", "1")
    assert res.exit_code == 2
    assert "--bogus-flag" in res.stderr
    assert entries(runs_dir) == []


def test_bad_dataset_name(cli, runs_dir):
    """A dataset name that can't name a directory/package is refused."""
    res = boot(cli, runs_dir, "../escape")
    assert res.exit_code == 2 and "dataset '../escape'" in one_line_error(res)
    assert entries(runs_dir) == []


def test_env_path_without_pyproject(cli, runs_dir, tmp_path):
    """--env-path must be an environment project."""
    res = boot(cli, runs_dir, "gsm8k", "--env-path", str(tmp_path))
    assert res.exit_code == 2 and "no pyproject.toml" in one_line_error(res)
    assert entries(runs_dir) == []


def _env_python_cases(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """--env-python values that must be refused: (path, the words of the one-line error)."""
    script = tmp_path / "not-python.sh"
    script.write_text("#!/bin/sh\necho hello\n")
    script.chmod(0o755)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    no_vf = tmp_path / "no-verifiers-python"  # a real Python that cannot import verifiers (-I: no site-packages)
    no_vf.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    no_vf.chmod(0o755)
    return {"missing": (str(tmp_path / "nope" / "python"), "file not found"),
            "not executable": (str(plain), "not an executable file"),
            "not a python": (str(script), "not a Python interpreter"),
            "no verifiers": (str(no_vf), "cannot import verifiers")}


@pytest.mark.parametrize("case", ["missing", "not executable", "not a python", "no verifiers"])
def test_bad_env_python_one_line_nothing_written(cli, runs_dir, tmp_path, case):
    """--env-python must run and import verifiers: else one line naming the flag and the fix, exit 2, nothing written."""
    path, needle = _env_python_cases(tmp_path)[case]
    res = boot(cli, runs_dir, "gsm8k", "--env-python", path)
    assert res.exit_code == 2, res.stderr
    line = one_line_error(res)
    assert f"--env-python {path}" in line and needle in line and "--env-python" in line.split(needle, 1)[1]
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert entries(runs_dir) == []


def test_env_python_default_and_recorded(cli, runs_dir, tmp_path, monkeypatch):
    """Local engine: this interpreter (null + why). prime-rl with a checkout in $PRIME_RL_DIR: its
    .venv/bin/python, refused with the fix when missing. --env-python: recorded with its source."""
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)
    res = boot(cli, runs_dir, "selfimprove-arith", "--model", "selfimprove/tiny-arith", "--json")
    assert res.exit_code == 0, res.stderr
    run = json.loads(res.stdout)
    assert run["env_python"] is None and "local CPU engine" in run["env_python_source"]

    prime = tmp_path / "prime-rl"
    schema = prime / "packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py"
    schema.parent.mkdir(parents=True)
    schema.write_text("class C:\n    env: list[int]\n    rollouts_per_example: int\n")
    monkeypatch.setenv("PRIME_RL_DIR", str(prime))
    before = entries(runs_dir)
    res = boot(cli, runs_dir, "gsm8k")
    assert res.exit_code == 2
    line = one_line_error(res)
    assert str(prime / ".venv/bin/python") in line and "uv sync" in line and "--env-python" in line
    assert entries(runs_dir) == before

    venv_python = prime / ".venv" / "bin" / "python"  # stands in for prime-rl's venv: runs this Python
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    venv_python.chmod(0o755)
    res = boot(cli, runs_dir, "gsm8k", "--json")
    assert res.exit_code == 0, res.stderr
    run = json.loads(res.stdout)
    assert run["env_python"] == str(venv_python) and f"PRIME_RL_DIR={prime}" in run["env_python_source"]
    assert run["versions"]["env_verifiers"] == run["versions"]["verifiers"]

    # another runs dir: a second gsm8k run in the same second would name the same run dir
    res = boot(cli, tmp_path / "runs-explicit", "gsm8k", "--json", "--env-python", sys.executable)
    assert res.exit_code == 0, res.stderr
    run = json.loads(res.stdout)
    assert (run["env_python"], run["env_python_source"]) == (sys.executable, "--env-python")


def test_runs_dir_that_cannot_be_created(cli, tmp_path):
    """A runs dir path that is a file: one line, nothing created."""
    blocker = tmp_path / "runs"
    blocker.write_text("not a dir")
    res = cli("bootstrap", "gsm8k", "--runs-dir", blocker / "sub")
    assert res.exit_code == 2 and "--runs-dir" in one_line_error(res)
    assert blocker.read_text() == "not a dir"


# ---------------------------------------------------------------- --init-from (the seed's Phase 2A list)

F = 100
ARTEFACTS = [
    "run.json",
    "metrics.json",
    f"prime_out/weights/step_{F}/model.safetensors",
    f"prime_out/weights/step_{F}/config.json",
    f"prime_out/weights/step_{F}/tokenizer.json",
    f"prime_out/checkpoints/step_{F}/trainer/__0_0.distcp",
    f"prime_out/run_default/rollouts/step_{F}/train_rollouts.jsonl",
    f"prime_out/run_default/rollouts/step_{F}/eval_rollouts.jsonl",
]


def make_prior_run(root: Path, skip: str | None = None) -> Path:
    """A fake prior training run with every Phase 2A artefact at step F (and an older step 50)."""
    (root / "prime_out" / "weights" / "step_50").mkdir(parents=True)
    for rel in ARTEFACTS:
        if rel == skip:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{}\n")
    return root


def test_init_from_complete_prior_run(cli, runs_dir, tmp_path):
    """A prior run holding every artefact is accepted and recorded as an absolute path."""
    prior = make_prior_run(tmp_path / "prior")
    res = boot(cli, runs_dir, "gsm8k", "--init-from", str(prior), "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["init_from"] == str(prior)


@pytest.mark.parametrize("missing", ARTEFACTS)
def test_init_from_names_the_first_missing_artefact(cli, runs_dir, tmp_path, missing):
    """Each missing artefact is named with its full path; nothing is written."""
    prior = make_prior_run(tmp_path / "prior", skip=missing)
    res = boot(cli, runs_dir, "gsm8k", "--init-from", str(prior))
    assert res.exit_code == 2
    assert f"missing {prior / missing}" in one_line_error(res)
    assert entries(runs_dir) == []


def test_init_from_without_weights(cli, runs_dir, tmp_path):
    """A prior run with no prime_out/weights/step_N is refused, naming the weights dir."""
    prior = tmp_path / "prior"
    prior.mkdir()
    res = boot(cli, runs_dir, "gsm8k", "--init-from", str(prior))
    assert res.exit_code == 2 and "prime_out/weights" in one_line_error(res)
    assert entries(runs_dir) == []


# ---------------------------------------------------------------- run-dir errors shared by every command


@pytest.mark.parametrize("command", ["status", "introspect"])
def test_run_dir_missing_or_without_run_json(cli, tmp_path, command):
    """A run dir that does not exist, or has no run.json: one line, exit 1."""
    res = cli(command, "--run-dir", tmp_path / "nope")
    assert res.exit_code == 1 and "does not exist" in one_line_error(res)
    res = cli(command, "--run-dir", tmp_path)
    assert res.exit_code == 1 and "run.json: not found" in one_line_error(res)


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: "{ this is not json", "not valid JSON"),
        (lambda d: json.dumps({**d, "batch_size": "lots"}), "field 'batch_size'"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "model"}), "field 'model'"),
        (lambda d: json.dumps({**d, "status": "paused"}), "field 'status'"),
        (lambda d: json.dumps({**d, "surprise": 1}), "field 'surprise'"),
        (lambda d: json.dumps({**d, "budget_seconds": -1}), "field 'budget_seconds'"),
        (lambda d: json.dumps({**d, "schema_version": 99}), "newer than this selfimprove"),
    ],
)
@pytest.mark.parametrize("command", ["status", "introspect"])
def test_corrupt_run_json_names_the_field(cli, new_run, command, mutate, needle):
    """A corrupt run.json is a one-line error naming the file and the bad field; it is left as is."""
    run_dir = new_run()
    run_json = run_dir / "run.json"
    bad = mutate(json.loads(run_json.read_text()))
    run_json.write_text(bad)
    res = cli(command, "--run-dir", run_dir)
    assert res.exit_code == 1
    line = one_line_error(res)
    assert needle in line and "run.json" in line
    assert run_json.read_text() == bad
    assert not (run_dir / "hub_env.json").exists()
