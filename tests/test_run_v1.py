"""`selfimprove run --stack v1` end to end on CPU with the REAL engine and the example teacher:
prime-rl main's dialect (559b44772) with the env as a verifiers v1 Taskset, bootstrap to finalize.

Every config and every launch argv the run wrote is checked against the v0.8 key snapshot (the
dialect of each is printed: `pytest -s` shows them), the real env is the hub's Taskset module and
generated data is a v1 Taskset package whose Task class is the hub's (by reference).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEACHER = f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher"
# The smallest loop that still runs every phase: one iteration, then Runs A, B and C.
SMALL = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "4", "--batch-size", "32",
         "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "50", "--budget", "30m"]
ARMS = ["iter_0", "iter_1", "run_a", "run_b", "run_c"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def v1_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("run_v1")
    proc = subprocess.run([sys.executable, "-m", "selfimprove", "run", "selfimprove-arith", "--stack", "v1", *SMALL,
                           "--runs-dir", str(runs), "--teacher", TEACHER, "--json"],
                          capture_output=True, text=True, timeout=1500, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(json.loads(proc.stdout)["run_dir"])


def test_v1_run_finishes_with_the_summary(v1_run: Path) -> None:
    run = json.loads((v1_run / "run.json").read_text())
    assert run["stack"] == "v1" and (run["status"], run["end_reason"]) == ("finalized", "max_iters_reached") and run["phase4_errors"] == []
    assert [r["arm"] for r in json.loads((v1_run / "metrics.json").read_text())["iters"]] == ARMS
    assert "## Final summary" in (v1_run / "scratchpad.md").read_text()
    hub = json.loads((v1_run / "hub_env.json").read_text())
    assert hub["api"] == "verifiers.v1" and hub["taskset"]["taskset_id"] == "selfimprove_arith_v1"
    assert hub["taskset"]["eval_args"] == {"split": "eval"} and hub["taskset"]["train_args"] == {"split": "train"}


def test_every_written_config_and_argv_is_prime_rl_main(v1_run: Path) -> None:
    from selfimprove.stack import toml_paths
    from selfimprove.stack.dialects import V1, dialect_of_argv
    from selfimprove.stack.prime_rl_keys import unknown_keys

    tomls = sorted(p for p in v1_run.rglob("*.toml") if "prime_out" not in p.parts and p.parent.name.startswith(("iter_", "run_")))
    assert len(tomls) == 6  # iter_0 canonical + overlay; iter_1, run_a, run_b, run_c rl.toml
    for path in tomls:
        data = toml_paths.read_toml(path)
        assert unknown_keys(data, V1.keys_file) == [], path
        V1.validate_config(data, partial=path.name == "eval_overlay.toml")
        print(f"{path.relative_to(v1_run)}: {V1.DIALECT}")
    jobs = sorted(v1_run.glob("*/job.json"))
    assert len(jobs) == len(ARMS)
    for job in jobs:
        argv = json.loads(job.read_text())["cmd"][1:]
        assert dialect_of_argv(argv) is V1, job
        V1.parse_rl_argv(argv)  # merges the files and overrides and validates them as prime-rl main would
        print(f"{job.relative_to(v1_run)} argv: {V1.DIALECT}")


def test_real_env_is_the_taskset_and_generated_data_a_v1_package(v1_run: Path) -> None:
    from selfimprove.stack import toml_paths

    run_b = toml_paths.read_toml(v1_run / "run_b_combined_from_base" / "rl.toml")
    ids = [s["env"]["taskset"]["id"] for s in run_b["orchestrator"]["train"]["source"]]
    assert ids[0] == "selfimprove_arith_v1" and ids[1].endswith("_run_b") and len(ids) == 2  # real + generated sources
    for source in run_b["orchestrator"]["eval"]["source"]:
        assert source["env"]["taskset"] == {"id": "selfimprove_arith_v1", "split": "eval"}
    package = json.loads((v1_run / "iter_1" / "package.json").read_text())["package"]
    source = (v1_run / "iter_1" / package / package / "__init__.py").read_text()
    assert "class ArithTask" not in source and "correct_answer" not in source  # nothing of the hub copied
    from selfimprove.stack.verifiers_v1 import find_taskset
    from selfimprove_arith.v1 import ArithTask

    importlib.invalidate_caches()
    assert find_taskset(package).task_type() is ArithTask  # the installed package uses the hub's Task class


OTHER_VERIFIERS = "0.4.0"  # the v1 API alone (requires-python >=3.11: installs beside this venv's 3.11)
RESOLVE = """
import json, sys
import verifiers
from verifiers.v1.utils.loaders import taskset_class
out = {}
for taskset_id in sys.argv[1:]:
    try:
        out[taskset_id] = taskset_class(taskset_id).__name__
    except Exception as e:
        out[taskset_id] = f"{type(e).__name__}: {e}"
print(json.dumps({"version": verifiers.__version__, "resolved": out}))
"""


@pytest.fixture(scope="module")
def verifiers_040_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with verifiers 0.4.0 only (no selfimprove, no datasets). SELFIMPROVE_TEST_V040_VENV reuses one."""
    import os

    reuse = os.environ.get("SELFIMPROVE_TEST_V040_VENV")
    if reuse:
        return Path(reuse) / "bin" / "python"
    venv = tmp_path_factory.mktemp("verifiers-040") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"verifiers=={OTHER_VERIFIERS}"],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return venv / "bin" / "python"


def _written_sources(v1_run: Path) -> list[tuple[str, str]]:
    """(where, taskset id) of every [[orchestrator.train|eval.source]] of every config the run wrote."""
    from selfimprove.stack.toml_paths import read_toml

    uses = []
    for path in sorted(p for p in v1_run.rglob("*.toml") if "prime_out" not in p.parts and p.parent.name.startswith(("iter_", "run_"))):
        orchestrator = read_toml(path).get("orchestrator", {})
        for group in ("train", "eval"):
            for i, source in enumerate(orchestrator.get(group, {}).get("source", [])):
                uses.append((f"{path.relative_to(v1_run)} {group}.source[{i}]", source["env"]["taskset"]["id"]))
    return uses


@pytest.mark.parametrize("verifiers_version", ["0.3.1", OTHER_VERIFIERS])
def test_every_written_source_resolves_with_verifiers_own_loader(v1_run: Path, verifiers_version: str,
                                                                  request: pytest.FixtureRequest) -> None:
    """prime-rl main imports each source's env.taskset.id through verifiers.v1.utils.loaders.taskset_class while
    its config validates (a dotted id raises there). Every id the run wrote must resolve, with the project's
    verifiers (0.3.1) and with 0.4.0, the generated packages importable from their project dirs."""
    import os

    uses = _written_sources(v1_run)
    assert len(uses) >= 10 and {i for _, i in uses} >= {"selfimprove_arith_v1"}
    python = sys.executable if verifiers_version == "0.3.1" else request.getfixturevalue("verifiers_040_python")
    packages = [p.parent / json.loads(p.read_text())["package"] for p in v1_run.glob("*/package.json")]
    path = os.pathsep.join([str(REPO / "src"), *map(str, packages)])
    proc = subprocess.run([str(python), "-c", RESOLVE, *sorted({i for _, i in uses})], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": path}, cwd=v1_run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reply["version"].startswith(verifiers_version)
    refused = {where: reply["resolved"][i] for where, i in uses if not reply["resolved"][i].endswith("Taskset")}
    assert refused == {}
    print(f"verifiers {reply['version']}: {len(uses)} sources, ids {reply['resolved']}")


def test_arms_keep_main_s_layout_and_fork_iter0_with_its_own_resume(v1_run: Path) -> None:
    """prime-rl main's runtime contract on the whole loop: no weights/ anywhere, the base eval at step_1 (Run B
    skips its unused one), forks name iter_0's checkpoint in [resume] dir with skip_progress exactly when the
    sources differ, every source is plain chat in a subprocess, broadcasts are filesystem, every arm ended with a
    whole final checkpoint, and each record says which policy its final eval scored (main evaluates max_steps
    right after batch max_steps-1 ships: v{max_steps-2} on the CPU engine)."""
    from selfimprove.rundir import RunDir
    from selfimprove.stack import toml_paths

    rd = RunDir(v1_run)
    assert not list(v1_run.glob("*/prime_out/weights"))
    iter0 = rd.iter(0)
    assert iter0.eval_file(1).is_file() and not iter0.rollout_step(0).exists()
    ck = str(iter0.trainer_ckpt(4))
    for arm, skips in (("iter_1", True), ("run_a", True), ("run_c", False)):
        cfg = toml_paths.read_toml(rd.arm(arm).rl_toml)
        assert cfg["resume"] == {"dir": ck} and cfg["weight_broadcast"] == {"type": "filesystem"}, arm
        assert toml_paths.get_path(cfg, "orchestrator.ckpt.skip_progress", False) is skips, arm
        assert not (rd.arm(arm).dir / "stage.json").exists()
    run_b = toml_paths.read_toml(rd.arm("run_b").rl_toml)
    assert run_b["orchestrator"]["eval"]["skip_first_step"] is True and not rd.arm("run_b").eval_file(1).exists()
    for path in [*v1_run.glob("*/rl.toml"), iter0.eval_overlay]:
        cfg = toml_paths.read_toml(path)
        for src in [*toml_paths.get_path(cfg, "orchestrator.train.source", []), *cfg["orchestrator"]["eval"]["source"]]:
            assert src["env"]["agent"] == {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}, path
    records = {r["arm"]: r for r in json.loads((v1_run / "metrics.json").read_text())["iters"]}
    for arm in ARMS:
        final = records[arm]["final_step"]
        assert rd.arm(arm).checkpoint_missing(final) == [], arm
        assert records[arm]["eval_policy_step"] == final - 2, arm
    assert "the final eval is not the final checkpoint's" in (v1_run / "scratchpad.md").read_text()


def test_the_recommended_model_loads_with_transformers(v1_run: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    table = json.loads((v1_run / "metrics.json").read_text())["iters"]
    for rec in table:
        path = v1_run / rec["checkpoint"]
        assert path.parent.name == "model" and (path / "config.json").is_file(), rec
    path = v1_run / table[-1]["checkpoint"]
    AutoModelForCausalLM.from_pretrained(path)
    AutoTokenizer.from_pretrained(path)
