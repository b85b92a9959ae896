"""finalize's verdict, table, tests and recommendation with one training seed and with several,
on run dirs written by hand (no training): every arm's eval_summary.json holds 200
examples of which the first round(acc * 200) are correct, so per-seed accuracies are
exactly the numbers given here, and every arm's seeds follow `arms.seed_offset` (canonical 0)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from selfimprove.models import EvalSummary, ExampleScore, IterRecord, Metrics, Phase4Error, RunConfig
from selfimprove.phases.arms import seed_offset
from selfimprove.phases.context import RunContext
from selfimprove.phases.finalize import finalize
from selfimprove.phases.verdict import DATA_BEAT, DATA_NOT_BEAT, DATA_UNTESTED
from selfimprove.report.table import recommendation_line, summary_renderable
from selfimprove.rundir import RunDir, split_seed_key, write_model
from selfimprove.stats import UNMEASURED, wilson_interval

N = 200


def _record(rd: RunDir, key: str, acc: float, seed: int | None) -> IterRecord:
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
        for k, acc in enumerate(accs):  # iterations train with the canonical seed 0, the best one's replicates 2k
            seed = seed_offset("best" if arm.startswith("iter_") else arm, k)
            records.append(_record(rd, arm if k == 0 else f"{arm}_seed{k}", acc, seed=seed))
    rd.write_metrics(Metrics(iters=records))
    return rd


def rendered(result: dict) -> str:
    console = Console(width=200, record=True)
    console.print(summary_renderable(result))
    return console.export_text()


def reopen(rd: RunDir) -> None:
    """Undo finalize's close, as compare does when it adds seeds, so finalize writes a summary again."""
    cfg = rd.read_run()
    cfg.reopen()
    rd.write_run(cfg)


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
    assert run_a["n_seeds"] == 3 and run_a["seeds"] == [1, 3, 5]
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
    assert "| 0.613 ± 0.015 | 1,3,5 |" in pad and "Recommendation (significant)" in pad
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
    res = cli("finalize", "--run-dir", rd.root, "--no-plot", "--json")
    data = json.loads(res.stdout)
    assert data["seeds"] == 2 and {"seed_tests", "recommendation", "comparisons"} <= set(data)
    reopen(rd)
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 0, res.stderr
    assert "recommended model (significant)" in res.stdout and "seed-aware tests" in res.stdout


def test_status_waits_for_every_seed_replicate_before_finalize(tmp_path):
    """With --seeds 2, `status` points at compare until Run A's, Run C's and the best iteration's
    replicates are all in metrics.json, and only then at finalize."""
    from selfimprove.phases.status import next_step

    arms = {"iter_0": [0.5], "iter_1": [0.6, 0.62], "run_a": [0.6, 0.61], "run_b": [0.55], "run_c": [0.5, 0.52]}
    rd = make_run(tmp_path, arms)
    rd.hub_env_json.write_text("{}", encoding="utf-8")
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")
    assert next_step(RunContext.load(rd))[1].startswith("selfimprove finalize")
    metrics = rd.read_metrics()
    for missing in ("run_a_seed1", "run_c_seed1", "iter_1_seed1"):
        rd.write_metrics(Metrics(iters=[r for r in metrics.iters if r.arm != missing]))
        assert next_step(RunContext.load(rd))[1].startswith("selfimprove compare"), missing


def test_run_c_replicates_are_missing_while_run_c_itself_is_unfinished(tmp_path):
    """Phase 4 with --seeds 3 under way, Run C started but not finished: status lists Run C's replicates among
    the missing arms too (an LLM agent found them absent: they were counted only once Run C had finished),
    and after a --no-control compare (no run_c dir) none of Run C's."""
    from selfimprove.phases.phase4_state import missing_phase4_arms

    rd = make_run(tmp_path, {"iter_0": [0.5], "iter_1": [0.6], "run_a": [0.6]})
    cfg = rd.read_run().model_copy(update={"seeds": 3})
    rd.write_run(cfg)
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")
    assert not any(m["arm"].startswith("run_c") for m in missing_phase4_arms(rd, cfg))  # --no-control: no run_c dir
    rd.control("run_c").dir.mkdir(parents=True)
    missing = [m["arm"] for m in missing_phase4_arms(rd, cfg)]
    assert missing == ["run_b", "run_c", "run_a_seed1", "run_c_seed1", "iter_1_seed1",
                       "run_a_seed2", "run_c_seed2", "iter_1_seed2"]


# ---------------------------------------------------------------- issue 23: the table's seeds, the verdict in words


def opening(text: str) -> str:
    """A summary's text with its whitespace collapsed (a console wraps long lines at its width)."""
    return " ".join(text.split())


def final_summary_head(rd: RunDir) -> list[str]:
    """The lines right under the scratchpad's "## Final summary" heading."""
    body = rd.scratchpad.read_text().split("## Final summary", 1)[1].splitlines()[1:]
    return [line for line in body if line.strip()][:2]


def test_table_shows_each_arms_training_seeds(tmp_path: Path) -> None:
    """The console table, the scratchpad and the JSON rows name each arm's training seeds: iterations the
    canonical seed, the best iteration's replicates the even offsets, Runs A and C the same odd ones."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.58, 0.60, 0.59], "run_a": [0.60, 0.63, 0.61],
                             "run_b": [0.52], "run_c": [0.50, 0.52, 0.51]})
    out = finalize(rd, plot=False)
    seeds = {r["arm"]: r["seeds"] for r in out["rows"]}
    assert seeds == {"iter_0": [0], "iter_1": [0, 2, 4], "run_a": [1, 3, 5], "run_b": [1], "run_c": [1, 3, 5]}
    cells = {row[0]: row for line in rendered(out).splitlines() if line.startswith("│")
             for row in [[c.strip() for c in line.strip("│").split("│")]]}
    assert cells["run_a (best @iter0)"][4] == "1,3,5" and cells["run_c (real @iter0)"][4] == "1,3,5"
    assert cells["iter_1  <- BEST_ITER"][4] == "0,2,4" and cells["iter_0 (real)"][4] == "0"
    pad = rd.scratchpad.read_text()
    assert "| training seed ids |" in pad and "| 0.613 ± 0.015 | 1,3,5 |" in pad and "| 0.590 ± 0.010 | 0,2,4 |" in pad


def test_verdict_one_seed_data_did_not_beat_equal_compute(tmp_path: Path, cli) -> None:
    """One seed, Run A 0.56 vs Run C 0.55 (McNemar 2/0, p = 0.5): every summary opens with the sentence and
    its figures, and names Run C as the model (it beats iter_0 without the teacher's data), not iter_1."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.56], "run_a": [0.56], "run_b": [0.52], "run_c": [0.55]})
    res = cli("finalize", "--run-dir", rd.root, "--no-plot")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith(DATA_NOT_BEAT)  # the first words of the output
    assert opening(res.stdout).startswith(
        f"{DATA_NOT_BEAT}: run_a 0.560 vs run_c 0.550 (delta +0.010); exact McNemar p=0.5 (2/0 discordant); "
        "1 training seed each, seed variance unmeasured; 200 paired eval examples "
        "use run_c (real @iter0): the gain came from more steps on real data; the targeted data added nothing "
        "measurable (eval_acc 0.550 vs iter_0 0.500, one training seed: provisional)")
    assert final_summary_head(rd)[0].startswith(f"**{DATA_NOT_BEAT}**: run_a 0.560 vs run_c 0.550")
    assert final_summary_head(rd)[1].startswith("use run_c (real @iter0)")
    reopen(rd)  # finalize on a closed run exits 5 (nothing changed); this test reads the --json form too
    out = json.loads(cli("finalize", "--run-dir", rd.root, "--no-plot", "--json").stdout)
    v = out["verdict"]
    assert v["data_beats_control"] is False and v["sentence"] == DATA_NOT_BEAT and v["test"] == "mcnemar"
    assert v["p"] == pytest.approx(0.5) and v["mean_run_a"] == pytest.approx(0.56) and v["n_examples"] == N
    assert v["use"] == "run_c" and out["recommended"] == "run_c" and out["recommendation"]["status"] == "provisional"
    assert "preferred over iter_1 (0.560)" in recommendation_line(out)


def test_verdict_one_seed_data_beat_equal_compute(tmp_path: Path) -> None:
    """Run A 0.60 vs Run C 0.51 (McNemar 18/0): the first line says the data beat equal compute, with figures."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.56], "run_a": [0.60], "run_b": [0.52], "run_c": [0.51]})
    out = finalize(rd, plot=False)
    v = out["verdict"]
    assert v["data_beats_control"] is True and v["sentence"] == DATA_BEAT and v["p"] < 1e-4 and v["use"] == "run_a"
    assert opening(rendered(out)).startswith(
        f"{DATA_BEAT}: run_a 0.600 vs run_c 0.510 (delta +0.090); exact McNemar p=7.63e-06 (18/0 discordant); "
        "1 training seed each, seed variance unmeasured; 200 paired eval examples "
        "use run_a (best @iter0): eval_acc 0.600 vs iter_0 0.500, one training seed: provisional")
    assert final_summary_head(rd)[0].startswith(f"**{DATA_BEAT}**: run_a 0.600")


def test_verdict_with_seeds_prefers_run_c_when_the_data_adds_nothing(tmp_path: Path) -> None:
    """Three seeds, Run A 0.613 vs Run C 0.607 (Welch p = 0.62), both beating iter_0: the verdict is the
    Welch test's, and the recommendation is Run C, where the old pick (highest mean) was Run A."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.58, 0.60, 0.59], "run_a": [0.60, 0.63, 0.61],
                             "run_b": [0.52], "run_c": [0.59, 0.62, 0.61]})
    out = finalize(rd, plot=False)
    v = out["verdict"]
    assert v["sentence"] == DATA_NOT_BEAT and v["test"] == "welch" and v["p"] == pytest.approx(0.621, abs=1e-3)
    assert (v["n_seeds_run_a"], v["n_seeds_run_c"], v["n_examples"]) == (3, 3, N)
    assert out["recommended"] == "run_c" and out["recommendation"]["status"] == "significant" and v["use"] == "run_c"
    assert opening(rendered(out)).startswith(
        f"{DATA_NOT_BEAT}: run_a 0.613 vs run_c 0.607 (delta +0.007); Welch t-test p=0.621; 3 vs 3 training seeds; "
        "200 shared eval examples use run_c (real @iter0): the gain came from more steps on real data")


def test_verdict_with_seeds_data_beat_equal_compute(tmp_path: Path) -> None:
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.58, 0.60, 0.59], "run_a": [0.60, 0.63, 0.61],
                             "run_b": [0.52], "run_c": [0.50, 0.52, 0.51]})
    out = finalize(rd, plot=False)
    v = out["verdict"]
    assert v["sentence"] == DATA_BEAT and v["test"] == "welch" and v["use"] == "run_a" == out["recommended"]
    assert opening(rendered(out)).startswith(f"{DATA_BEAT}: run_a 0.613 vs run_c 0.510 (delta +0.103); Welch")


def test_verdict_nothing_beats_iter0_names_iter0(tmp_path: Path) -> None:
    """Seeds measured, Run A not above Run C and no arm above iter_0: use iter_0."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.50, 0.56, 0.47], "run_a": [0.52, 0.49, 0.55],
                             "run_b": [0.51], "run_c": [0.48, 0.53, 0.50]})
    out = finalize(rd, plot=False)
    assert out["verdict"]["sentence"] == DATA_NOT_BEAT and out["verdict"]["use"] == "iter_0"
    assert "use iter_0 (real): no arm beats it under the seed-aware t-test eval accuracy" in opening(rendered(out))
    assert out["recommended"] is None


def test_verdict_without_control_says_the_data_was_not_tested(tmp_path: Path) -> None:
    """compare --no-control: no Run C, so the summary says the data was not tested against equal compute."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.56], "run_a": [0.60], "run_b": [0.52]})
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")  # compare --no-control ran: no run_c dir
    out = finalize(rd, plot=False)
    v = out["verdict"]
    assert out["complete"] and v["data_beats_control"] is None and v["sentence"] == DATA_UNTESTED and v["p"] is None
    assert opening(rendered(out)).startswith(f"{DATA_UNTESTED}: no run_c (real @iter0) in this run (compare --no-control)")
    assert final_summary_head(rd)[0].startswith(f"**{DATA_UNTESTED}**")
    assert out["recommended"] == "run_a"


def test_verdict_falls_back_to_mcnemar_when_every_seed_scored_alike(tmp_path: Path) -> None:
    """Two seeds each, but every seed of Run A and of Run C scored the same: no Welch p, so the verdict is
    the paired test of their seed-0 checkpoints, and says why."""
    rd = make_run(tmp_path, {"iter_0": [0.50], "iter_1": [0.56, 0.56], "run_a": [0.60, 0.60], "run_b": [0.52],
                             "run_c": [0.51, 0.51]})
    v = finalize(rd, plot=False)["verdict"]
    assert v["test"] == "mcnemar" and v["sentence"] == DATA_BEAT and v["n_seeds_run_a"] == 2
    assert "seed 0 of each (2 vs 2 training seeds), every seed scored the same" in v["figures"]
