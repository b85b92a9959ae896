"""`selfimprove run` end to end on the embedded default with the REAL CPU engine and
the example teacher (small explicit overrides), and a run killed at a random
point then resumed with --run-dir: same final artefacts, no duplicated metrics."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEACHER = f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher"
SMALL = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "6", "--batch-size", "64",
         "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "100", "--budget", "30m"]
ARMS = ["iter_0", "iter_1", "run_a", "run_b", "run_c"]
VOLATILE = ("train.log", "job.json", "job_result.json", "job.rc", "gen.log", "install.log", ".lock")

pytestmark = pytest.mark.slow


def selfimprove(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfimprove", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def artefacts(run_dir: Path) -> set[str]:
    """Relative paths of the run's files, minus logs and process bookkeeping that differ by design."""
    out = set()
    for p in run_dir.rglob("*"):
        rel = p.relative_to(run_dir)
        if p.is_file() and p.name not in VOLATILE and not any(".failed-" in part for part in rel.parts) \
                and "logs" not in rel.parts and not p.name.startswith("."):
            # generated package dirs carry the run's random id (selfimprove_arith_r<run_id>_iter_1): compare
            # them without it, so two runs of the same loop list the same files
            out.add(re.sub(r"_r[0-9a-f]{8}_", "_r<run_id>_", str(rel)))
    return out


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("run_e2e")
    proc = selfimprove("run", "selfimprove-arith", *SMALL, "--runs-dir", str(runs), "--teacher", TEACHER, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    (runs / "run.stderr").write_text(proc.stderr)  # the console lines (stdout holds --json's object)
    return Path(result["run_dir"])


def test_run_prints_one_line_per_phase_event(finished_run: Path) -> None:
    """`run` prints each phase's start and end once (introspect printed its own start and done beside them)."""
    lines = (finished_run.parent / "run.stderr").read_text().splitlines()
    for phase in ("introspect", "baseline", "compare", "finalize"):
        starts = [ln for ln in lines if re.match(rf"\d\d:\d\d:\d\d {phase} start\b", ln)]
        assert len(starts) == 1, (phase, starts)
    assert not [ln for ln in lines if re.match(r"\d\d:\d\d:\d\d introspect done\b", ln)]


def test_run_end_to_end(finished_run: Path) -> None:
    metrics = json.loads((finished_run / "metrics.json").read_text())
    assert [r["arm"] for r in metrics["iters"]] == ARMS
    run = json.loads((finished_run / "run.json").read_text())
    assert (run["status"], run["end_reason"]) == ("finalized", "max_iters_reached") and run["end_ts"] and run["phase4_errors"] == []
    for name in ("hub_env.json", "best_iter.json", "eval_acc.png", "iter_1/gen_dataset.py", "iter_1/gate_report.json",
                 "iter_1/record.json", "run_c_real_from_iter0/eval_summary.json"):
        assert (finished_run / name).is_file(), name
    hub = json.loads((finished_run / "hub_env.json").read_text())
    full = [r for r in metrics["iters"] if r["arm"].startswith("run_")]
    assert all(r["n_eval"] == hub["eval_size"] for r in full)  # Phase 4 evaluates on the full split
    pad = (finished_run / "scratchpad.md").read_text()
    assert "## Iteration 1" in pad and "## Final summary" in pad
    from selfimprove.phases.finalize import WORKED_BY_PROGRAM, WORKED_PLACEHOLDER

    assert WORKED_PLACEHOLDER not in pad and WORKED_BY_PROGRAM in pad  # no instruction left that nobody follows


def test_every_file_a_finished_run_leaves_is_in_the_run_dir_reference(finished_run: Path) -> None:
    """docs/reference/run-dir.md names every file the whole loop leaves in the run dir, its iterations and its
    arms (by file name; the engine's prime_out/ and the generated package's insides are the engine's and
    the package's). A new file without a row there fails here, so the reference cannot go stale silently."""
    reference = (REPO / "docs" / "reference" / "run-dir.md").read_text()
    skip_dirs = {"prime_out", "model", "llm_teacher", "__pycache__"}
    unnamed = set()
    for path in finished_run.rglob("*"):
        rel = path.relative_to(finished_run)
        if not path.is_file() or len(rel.parts) > 2 or set(rel.parts[:-1]) & skip_dirs:  # the run's and its arms' own
            continue
        if f"`{rel.name}`" not in reference and f"/{rel.name}`" not in reference and f" {rel.name}" not in reference:
            unnamed.add(rel.name)
    assert not unnamed, f"docs/reference/run-dir.md names no row for: {sorted(unnamed)}"


def test_run_killed_at_a_random_point_resumes(finished_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    delay = random.Random(int(os.environ.get("SELFIMPROVE_KILL_SEED", "7"))).uniform(10, 60)
    cmd = [sys.executable, "-m", "selfimprove", "run", "selfimprove-arith", *SMALL, "--runs-dir", str(runs),
           "--teacher", TEACHER, "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, start_new_session=False)
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)  # the CLI dies; a detached training job may live on
    proc.wait()
    run_dirs = [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(run_dirs) == 1, f"bootstrap had not finished after {delay:.1f} s"
    resumed = selfimprove("run", "--run-dir", str(run_dirs[0]), "--teacher", TEACHER, "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    metrics = json.loads((run_dirs[0] / "metrics.json").read_text())
    assert [r["arm"] for r in metrics["iters"]] == ARMS  # no duplicates, nothing missing
    assert artefacts(run_dirs[0]) == artefacts(finished_run)
