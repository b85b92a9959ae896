"""Two interpreters, as on a GPU box: selfimprove in its venv, the env in the engine's venv.

A second venv is made once per session with ANOTHER verifiers release than selfimprove's
(pyproject pins >=0.3.1,<0.4; the second venv gets 0.3.0, the last release whose classic
API the arith env speaks: 0.4 keeps only verifiers.v1) plus the arith env as its own
package. Bootstrap is pointed at it with --env-python, and every step that imports verifiers
or the env must then run there: the introspection probe, the teacher's generator, the round
trip, reward lint, decontamination and the generated package's install + verify. Each one
is shown to have run in the second interpreter by the verifiers version or sys.prefix it
reports, which differ from selfimprove's own.

Set SELFIMPROVE_TEST_ENV_VENV=/path/to/venv to reuse a venv made by an earlier session
(building it downloads verifiers 0.3.0 and its dependencies from PyPI: ~3 min).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from gate_fixtures import make_rows, sub_label, valid_report

from selfimprove.gates import CustomReward, lint_reward_functions
from selfimprove.gates.roundtrip import check_round_trip
from selfimprove.phases import iteration_steps
from selfimprove.phases.context import RunContext
from selfimprove.rundir import RunDir
from selfimprove.stack import verifiers_classic
from selfimprove.stack.env_package import installed_provenance

pytestmark = pytest.mark.slow

OTHER_VERIFIERS = "0.3.0"  # selfimprove runs 0.3.1 (pyproject.toml)
ARITH_SRC = Path(__file__).resolve().parents[1] / "src" / "selfimprove_arith"
ARITH_PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "selfimprove-arith"
version = "0.1.0"
dependencies = ["verifiers", "datasets"]

[tool.hatch.build.targets.wheel]
packages = ["selfimprove_arith"]
"""


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="session")
def env_venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a plain venv holding verifiers 0.3.0, hatchling and the arith env (not selfimprove)."""
    reuse = os.environ.get("SELFIMPROVE_TEST_ENV_VENV")
    if reuse:
        return Path(reuse) / "bin" / "python"
    root = tmp_path_factory.mktemp("env-venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    python = venv / "bin" / "python"
    # hatchling: the generated env packages are built without isolation, as on an offline GPU box
    _pip(python, f"verifiers=={OTHER_VERIFIERS}", "hatchling>=1.21")
    project = root / "selfimprove-arith"
    shutil.copytree(ARITH_SRC, project / "selfimprove_arith", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "pyproject.toml").write_text(ARITH_PYPROJECT)
    _pip(python, "--no-deps", "--no-build-isolation", str(project))
    return python


def _ask(python: Path, code: str) -> str:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


# The teacher's generator: fixed rows, plus where it ran (it imports verifiers, as the skeleton does).
GENERATOR = """
import json, sys
import verifiers
ROWS = {rows}
with open("dataset.jsonl", "w") as f:
    for r in ROWS:
        f.write(json.dumps(r) + "\\n")
with open("ran_in.json", "w") as f:
    json.dump({{"prefix": sys.prefix, "verifiers": verifiers.__version__}}, f)
"""

# A custom reward that notes which interpreter imported it (reward lint runs it with -I in a temp dir).
REWARDS = '''
"""Custom rewards for iter_1."""
import re, sys
from pathlib import Path

Path({marker!r}).write_text(sys.prefix)
TAG = re.compile(r"<answer>(.*?)</answer>", re.S)


# Failure mode: failure mode 0a dropped (the final tag goes missing).
async def has_answer_tag(completion, answer, info=None, state=None, **kwargs) -> float:
    """1.0 when the completion ends with a well-formed answer tag holding the answer."""
    text = completion if isinstance(completion, str) else str(completion)
    found = TAG.findall(text)
    return 1.0 if found and found[-1].strip() == answer.strip() else 0.0
'''


def test_every_env_step_runs_in_the_env_interpreter(cli, runs_dir: Path, tmp_path: Path, env_venv_python: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)
    other_prefix = _ask(env_venv_python, "import sys; print(sys.prefix)")
    assert _ask(env_venv_python, "import verifiers; print(verifiers.__version__)") == OTHER_VERIFIERS
    assert version("verifiers") != OTHER_VERIFIERS and other_prefix != sys.prefix  # really two interpreters

    # the local CPU engine loads envs in selfimprove's own interpreter: another one is refused, nothing written
    res = cli("bootstrap", "selfimprove-arith", "--model", "selfimprove/tiny-arith", "--runs-dir", runs_dir,
              "--env-python", str(env_venv_python))
    assert res.exit_code == 2 and "local CPU engine" in res.stderr and not any(runs_dir.iterdir())

    # bootstrap: checked (it imports verifiers) and recorded; the env's spelling and API are looked up there
    res = cli("bootstrap", "selfimprove-arith", "--engine", "prime-rl", "--model", "Qwen/Qwen3-0.6B", "--runs-dir",
              runs_dir, "--hub-id", "selfimprove-arith", "--env-python", str(env_venv_python), "--json")
    assert res.exit_code == 0, res.stderr
    run = json.loads(res.stdout)
    assert (run["env_python"], run["env_python_source"]) == (str(env_venv_python), "--env-python")
    assert run["versions"]["env_verifiers"] == OTHER_VERIFIERS and run["versions"]["verifiers"] == version("verifiers")
    assert run["stack"] == "seed"
    rd = RunDir(Path(run["run_dir"]))

    # introspection probe
    res = cli("introspect", "--run-dir", rd.root)
    assert res.exit_code == 0, res.stderr
    hub = rd.read_hub_env()
    assert hub.verifiers_version == OTHER_VERIFIERS and hub.source == "local"

    # the teacher's generator
    it = rd.iter(1)
    it.dir.mkdir(parents=True)
    rows = make_rows()[:20]
    (it.dir / "gen_dataset.py").write_text(GENERATOR.format(rows=repr(rows)))
    iteration_steps.generate(RunContext.load(rd), it, timeout=300, python=run["env_python"])
    ran_in = json.loads((it.dir / "ran_in.json").read_text())
    assert ran_in == {"prefix": other_prefix, "verifiers": OTHER_VERIFIERS}

    # the round trip: the env's own parser, loaded in the env interpreter
    reasoning = [r["info"]["reasoning"] for r in rows]
    parsed = verifiers_classic.run_parser_over(hub.env_id, hub.env_args, reasoning, python=run["env_python"])
    assert check_round_trip(rows, dict(zip(reasoning, parsed)).get).passed

    # reward lint
    marker = tmp_path / "reward-imported-in.txt"
    (it.dir / "rewards.py").write_text(REWARDS.format(marker=str(marker)))
    declared = [CustomReward(name="has_answer_tag", weight=0.1, failure_mode=sub_label(0, 0), source_file="rewards.py")]
    gate = lint_reward_functions(it.dir / "rewards.py", declared, rows, valid_report().failure_modes(),
                                 python=run["env_python"])
    assert gate.passed, gate.summary()
    assert marker.read_text() == other_prefix

    # decontamination: the eval questions' n-gram index, built by the env interpreter's probe
    index = iteration_steps.eval_index(RunContext.load(rd))
    assert (rd.root / "eval_ngrams.json").is_file() and index.to_json()

    # the generated package: built, installed into the env interpreter and verified there only
    name = iteration_steps.package_name_for(rd.read_run(), "iter_1")
    rec = iteration_steps.ensure_package(RunContext.load(rd), it, name, None, origin="test: two interpreters")
    assert rec["python"] == str(env_venv_python) and rec["verifiers_version"] == OTHER_VERIFIERS
    assert rec["site_packages"].startswith(other_prefix)
    assert installed_provenance(name, str(env_venv_python))["found"]
    assert not installed_provenance(name, sys.executable)["found"]  # selfimprove's own venv never got it


def test_bootstrap_looks_the_env_up_in_the_env_interpreter(cli, runs_dir: Path, env_venv_python: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The typo check and the env-API detection see the env interpreter's modules, not selfimprove's:
    a module installed only there is found (and a misspelling of it is refused with the right name)."""
    monkeypatch.delenv("PRIME_RL_DIR", raising=False)
    site = Path(_ask(env_venv_python, "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    (site / "only_in_env_venv.py").write_text("def load_environment(**kwargs):\n    raise NotImplementedError\n")
    res = cli("bootstrap", "only-in-env-vnev", "--engine", "prime-rl", "--runs-dir", runs_dir,
              "--env-python", str(env_venv_python))
    assert res.exit_code == 2, res.stderr
    assert "did you mean only-in-env-venv?" in " ".join(res.stderr.split())
    assert not any(runs_dir.iterdir())
    res = cli("bootstrap", "only-in-env-venv", "--engine", "prime-rl", "--runs-dir", runs_dir,
              "--env-python", str(env_venv_python), "--json")
    assert res.exit_code == 0, res.stderr
    assert "env module 'only_in_env_venv' has load_environment" in json.loads(res.stdout)["stack_source"]
