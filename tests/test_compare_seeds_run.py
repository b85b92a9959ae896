"""`selfimprove run --seeds 2` end to end with the REAL CPU engine (slow). In its own file, not in
tests/test_compare.py, so that `make test`'s two workers (--dist loadfile: one file per worker at a
time) can start it early instead of after test_compare.py's fast tests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from selfimprove.rundir import RunDir


def tree_bytes(path) -> list[bytes]:
    """The contents of every file under `path` (a weights dir), in path order."""
    return [p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()]


@pytest.mark.slow
def test_run_with_two_seeds_on_the_embedded_default(tmp_path) -> None:
    """`selfimprove run --seeds 2` with the REAL CPU engine on selfimprove-arith (tiny settings, a 100-example
    eval split): every seed replicate trains for real with its own seed, and finalize reports 2 seeds."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    flags = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "6", "--batch-size", "64",
             "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "100", "--budget", "30m",
             "--env-args", '{"num_eval_examples": 100}']
    proc = subprocess.run([sys.executable, "-m", "selfimprove", "run", "selfimprove-arith", *flags, "--runs-dir",
                           str(tmp_path), "--teacher", f"{repo / 'examples' / 'arith_teacher.py'}:ArithTeacher",
                           "--seeds", "2", "--json"], capture_output=True, text=True, timeout=1500, cwd=repo)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    rd = RunDir(result["run_dir"])
    assert rd.read_run().seeds == 2 and rd.read_run().phase4_errors == []
    stamps = {r.arm: (r.seed, r.replicate_of) for r in rd.read_metrics().iters}
    # The best iteration: canonical + 2k; Runs A and C: canonical + 2k + 1 (never an iteration's seed); Run B: + 1.
    assert stamps == {"iter_0": (None, None), "iter_1": (0, None), "run_a": (1, None), "run_b": (1, None),
                      "run_c": (1, None), "iter_1_seed1": (2, "iter_1"), "run_a_seed1": (3, "run_a"),
                      "run_c_seed1": (3, "run_c")}
    # Really another seed: the first resumed step drew other prompts and samples, for Run C's two members and
    # for Run A against the best iteration (same data, same checkpoint: with one seed it was iter_1 bit for bit).
    first = rd.read_eval_summary(rd.iter(0)).final_step + 1
    train = [(rd.control("run_c", k).rollout_step(first) / "train_rollouts.jsonl").read_text() for k in (0, 1)]
    assert train[0] != train[1]
    best_and_run_a = (rd.iter(1), rd.control("run_a"))
    same_data = [(arm.rollout_step(first) / "train_rollouts.jsonl").read_text() for arm in best_and_run_a]
    assert same_data[0] != same_data[1]
    weights = [arm.weights(rd.read_eval_summary(arm).final_step) for arm in best_and_run_a]
    assert tree_bytes(weights[0]) != tree_bytes(weights[1])
    assert {r["arm"]: r["n_seeds"] for r in result["rows"]} == {"iter_0": 1, "iter_1": 2, "run_a": 2, "run_b": 1,
                                                                "run_c": 2}
    assert all(r["n_eval"] == 100 for r in result["rows"])
    tests = {(t["a"], t["b"]): t for t in result["seed_tests"]}
    assert tests[("run_a", "run_c")]["test"] == "welch" and tests[("run_a", "run_c")]["n_examples"] == 100
    assert result["recommendation"]["status"] in ("significant", "none")
