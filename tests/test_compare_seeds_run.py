"""`selfimprove run --seeds 2` end to end with the REAL CPU engine (slow). In its own file, not in
tests/test_compare.py, so that `make test`'s two workers (--dist loadfile: one file per worker at a
time) can start it early instead of after test_compare.py's fast tests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from selfimprove.rundir import RunDir


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
    assert stamps == {"iter_0": (None, None), "iter_1": (0, None), "run_a": (0, None), "run_b": (0, None),
                      "run_c": (0, None), "iter_1_seed1": (1, "iter_1"), "run_a_seed1": (1, "run_a"),
                      "run_c_seed1": (1, "run_c")}
    # Really another seed: the first resumed step drew other prompts and samples.
    first = rd.read_eval_summary(rd.iter(0)).final_step + 1
    train = [(rd.control("run_c", k).rollout_step(first) / "train_rollouts.jsonl").read_text() for k in (0, 1)]
    assert train[0] != train[1]
    assert {r["arm"]: r["n_seeds"] for r in result["rows"]} == {"iter_0": 1, "iter_1": 2, "run_a": 2, "run_b": 1,
                                                                "run_c": 2}
    assert all(r["n_eval"] == 100 for r in result["rows"])
    tests = {(t["a"], t["b"]): t for t in result["seed_tests"]}
    assert tests[("run_a", "run_c")]["test"] == "welch" and tests[("run_a", "run_c")]["n_examples"] == 100
    assert result["recommendation"]["status"] in ("significant", "none")
