"""finalize's table, tests and recommendation with one training seed and with several,
on run dirs written by hand (no training): every arm's eval_summary.json holds 200
examples of which the first round(acc * 200) are correct, so per-seed accuracies are
exactly the numbers given here."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from selfimprove.models import EvalSummary, ExampleScore, IterRecord, Metrics, Phase4Error, RunConfig
from selfimprove.phases.finalize import finalize
from selfimprove.report.table import recommendation_line, summary_renderable
from selfimprove.rundir import RunDir, split_seed_key, write_model
from selfimprove.stats import UNMEASURED, wilson_interval

N = 200


def _record(rd: RunDir, key: str, acc: float, seed: int) -> IterRecord:
    ok = round(acc * N)
    per = [ExampleScore(example_id=i, reward=float(i < ok), correct=float(i < ok)) for i in range(N)]
    ci = wilson_interval(ok, N)
    arm = rd.arm(key)
    ckpt = str(arm.weights(10))
    write_model(arm.eval_summary, EvalSummary(arm=key, eval_acc=ok / N, eval_reward_mean=ok / N, n_eval=N,
                                              n_examples=N, acc_ci95=ci, checkpoint=ckpt, final_step=10,
                                              per_example=per))
    base, k = split_seed_key(key)
    it = int(key[5:]) if key.startswith("iter_") and k == 0 else None
    return IterRecord(arm=key, iter=it, eval_acc=ok / N, eval_reward_mean=ok / N, n_eval=N, acc_ci95=ci,
                      rows=None if key.startswith(("iter_0", "run_c")) else 800, checkpoint=ckpt, final_step=10,
                      seed=seed, replicate_of=base if k else None)


def make_run(root: Path, arms: dict[str, list[float]]) -> RunDir:
    """A finished run dir: arms maps iter_0, iter_1, run_a, run_b, run_c to per-seed accuracies."""
    rd = RunDir(root / "run")
    rd.root.mkdir(parents=True)
    seeds = max(len(v) for v in arms.values())
    rd.write_run(RunConfig(dataset="selfimprove-arith", hub_id="selfimprove-arith", model="selfimprove/tiny-arith",
                           start_ts=time.time() - 60, budget_seconds=3600, max_iters=2, batch_size=64,
                           status="max_iters_reached", seeds=seeds))
    rd.scratchpad.write_text("# run\n", encoding="utf-8")
    records = []
    for arm, accs in arms.items():
        for k, acc in enumerate(accs):
            records.append(_record(rd, arm if k == 0 else f"{arm}_seed{k}", acc, seed=k))
    rd.write_metrics(Metrics(iters=records))
    return rd


def rendered(result: dict) -> str:
    console = Console(width=200, record=True)
    console.print(summary_renderable(result))
    return console.export_text()


def test_one_seed_table_says_seed_variance_is_unmeasured(tmp_path: Path) -> None:
    """One seed per arm: no sd, no seed-aware p, a provisional recommendation, said in the table and scratchpad."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.56], "run_a": [0.60], "run_b": [0.52], "run_c": [0.51]})
    out = finalize(rd, plot=False)
    assert [r["arm"] for r in out["rows"]] == ["iter_0", "iter_1", "run_a", "run_b", "run_c"]
    assert all(r["n_seeds"] == 1 and r["eval_acc_sd"] is None for r in out["rows"])
    assert out["rows"][2]["acc_ci95"] == pytest.approx(list(wilson_interval(120, N)))
    assert out["seeds_measured"] is False and out["seed_tests"]
    assert all(t["verdict"] == UNMEASURED and t["p"] is None for t in out["seed_tests"])
    rec = out["recommendation"]
    assert rec["status"] == "provisional" and out["recommended"] == "run_a" and UNMEASURED in rec["text"]
    text = rendered(out)
    assert "seed variance unmeasured" in text and "provisional" in text
    assert "split eval, n_eval=200 per arm, 1 training seed per arm" in " ".join(text.split())
    assert "recommended model (provisional)" in recommendation_line(out)
    pad = rd.scratchpad.read_text()
    assert "## Final summary" in pad and "Recommendation (provisional)" in pad and "seed variance unmeasured" in pad


def test_one_seed_and_nothing_above_iter0_recommends_iter0(tmp_path: Path) -> None:
    """Every arm at iter_0's accuracy or below (as on an env the student cannot do: all 0.000): the
    provisional recommendation stays iter_0; a higher reward mean alone is no reason to switch."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.50], "run_a": [0.45], "run_b": [0.50], "run_c": [0.40]})
    metrics = rd.read_metrics()  # run_b ties iter_0's accuracy with a higher reward mean
    metrics.iters = [r.model_copy(update={"eval_reward_mean": 0.9}) if r.arm == "run_b" else r for r in metrics.iters]
    rd.write_metrics(metrics)
    out = finalize(rd, plot=False)
    assert out["recommended"] == "iter_0" and out["recommendation"]["status"] == "provisional"
    assert "Recommendation (provisional): iter_0" in rd.scratchpad.read_text()


def test_several_seeds_table_shows_mean_sd_and_recommends_a_significant_arm(tmp_path: Path) -> None:
    """Three seeds for the best iteration, Run A and Run C: mean ± sd, t interval, Welch and one-sample
    tests; Run A beats iter_0 at p < 0.05 and is recommended with its best seed's checkpoint."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.58, 0.60, 0.59], "run_a": [0.60, 0.63, 0.61],
                             "run_b": [0.52], "run_c": [0.50, 0.52, 0.51]})
    out = finalize(rd, plot=True)
    rows = {r["arm"]: r for r in out["rows"]}
    run_a = rows["run_a"]
    assert run_a["n_seeds"] == 3 and run_a["seeds"] == [0, 1, 2]
    assert run_a["eval_acc"] == pytest.approx(0.6133333) and run_a["eval_acc_sd"] == pytest.approx(0.0152753, abs=1e-6)
    half = 4.302653 * 0.0152753 / 3**0.5  # t(0.975, 2) * sd / sqrt(3)
    assert run_a["acc_ci95"] == pytest.approx([0.6133333 - half, 0.6133333 + half], abs=1e-5)
    assert [m["arm"] for m in rows["iter_1"]["members"]] == ["iter_1", "iter_1_seed1", "iter_1_seed2"]
    assert rows["iter_1"]["best"] and rows["run_b"]["n_seeds"] == 1
    tests = {(t["a"], t["b"]): t for t in out["seed_tests"]}
    a_vs_c = tests[("run_a", "run_c")]
    assert a_vs_c["test"] == "welch" and a_vs_c["n_examples"] == N and a_vs_c["verdict"] == "improved"
    assert tests[("iter_1", "iter_0")]["test"] == "one-sample" and tests[("iter_1", "iter_0")]["df"] == 2
    assert tests[("run_b", "run_c")]["verdict"] == UNMEASURED  # Run B has one seed
    rec = out["recommendation"]
    assert out["recommended"] == "run_a" and rec["status"] == "significant"
    assert rec["checkpoint"].endswith("run_a_best_from_iter0_seed1/prime_out/weights/step_10")  # its best seed
    assert "one-sample t-test" in rec["text"] and "over 3 seeds" in rec["text"]
    assert out["seed_caveat"] is None and rd.plot_png.read_bytes()[:4] == b"\x89PNG"
    # McNemar stays per checkpoint: seed 0 pairs plus run_a vs run_c at every further seed.
    pairs = {(c["a"], c["b"]) for c in out["comparisons"]}
    assert {("iter_1", "iter_0"), ("run_a", "run_c"), ("run_a_seed1", "run_c_seed1"), ("run_a_seed2", "run_c_seed2")} <= pairs
    text = " ".join(rendered(out).split())
    assert "0.613 ± 0.015 (3 seeds) vs 0.510 ± 0.010 (3 seeds) on 200 shared eval examples" in text
    assert "Welch t-test" in text and "3 training seeds" in text and "seed variance unmeasured" in text  # run_b's line
    pad = rd.scratchpad.read_text()
    assert "| 0.613 ± 0.015 | 3 |" in pad and "Recommendation (significant)" in pad
    assert json.loads(json.dumps(out)) == out


def test_several_seeds_without_a_significant_lift_recommend_nothing(tmp_path: Path) -> None:
    """Seeds measured, but no arm beats iter_0 at p < 0.05: no model is recommended over it.
    A seed that failed in Phase 4 is named in the table and the scratchpad, not silently dropped,
    and the summary is marked partial (issue 13: a missing arm never makes a complete summary)."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.50, 0.56, 0.47], "run_a": [0.52, 0.49, 0.55],
                             "run_b": [0.51], "run_c": [0.48, 0.53]})
    cfg = rd.read_run()
    cfg.phase4_errors = [Phase4Error(arm="run_c_seed2", error="engine exploded", ts=0.0)]
    rd.write_run(cfg)
    out = finalize(rd, plot=False)
    assert {r["arm"]: r["n_seeds"] for r in out["rows"]}["run_c"] == 2
    failed = "run_c_seed2: its job failed: engine exploded"
    assert failed in " ".join(rendered(out).split()) and failed in rd.scratchpad.read_text()
    assert out["complete"] is False and "## Partial summary" in rd.scratchpad.read_text()
    assert out["recommended"] is None and out["recommendation"]["status"] == "none"
    line = recommendation_line(out)
    assert line.startswith("no model recommended over iter_0") and "seed-aware t-test" in line
    assert all(t["verdict"] in ("no detectable difference", UNMEASURED) for t in out["seed_tests"])


def test_finalize_cli_prints_the_seed_aware_recommendation(tmp_path: Path, cli) -> None:
    """`selfimprove finalize` prints the table and the recommendation; --json carries the seed tests.
    (Two seeds vs iter_0 is a t-test with 1 df: run_a 0.605 ± 0.007 gives t = 21, p = 0.03.)"""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.58, 0.60], "run_a": [0.60, 0.61],
                             "run_b": [0.52], "run_c": [0.50, 0.52]})
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 0, res.stderr
    assert "recommended model (significant)" in res.stdout and "seed-aware tests" in res.stdout
    res = cli("finalize", "--run-dir", rd.root, "--no-plot", "--json")
    data = json.loads(res.stdout)
    assert data["seeds"] == 2 and {"seed_tests", "recommendation", "comparisons"} <= set(data)


def test_status_waits_for_every_seed_replicate_before_finalize(tmp_path):
    """With --seeds 2, `status` points at compare until Run A's, Run C's and the best iteration's
    replicates are all in metrics.json, and only then at finalize."""
    from selfimprove.phases.status import next_step

    arms = {"iter_0": [0.5], "iter_1": [0.6, 0.62], "run_a": [0.6, 0.61], "run_b": [0.55], "run_c": [0.5, 0.52]}
    rd = make_run(tmp_path, arms)
    rd.hub_env_json.write_text("{}", encoding="utf-8")
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")
    assert next_step(rd)[1].startswith("selfimprove finalize")
    metrics = rd.read_metrics()
    for missing in ("run_a_seed1", "run_c_seed1", "iter_1_seed1"):
        rd.write_metrics(Metrics(iters=[r for r in metrics.iters if r.arm != missing]))
        assert next_step(rd)[1].startswith("selfimprove compare"), missing
