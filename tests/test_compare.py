"""Phases 4-5 with the fake engine: BEST_ITER, the three control arms, a failing
arm, finalize on every way a run can end, and the sealed-eval canary."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from selfimprove.errors import PhaseOrderError, SelfImproveError, TeacherActionNeeded
from selfimprove.models import IterRecord
from selfimprove.phases import compare as compare_mod
from selfimprove.phases.arms import seed_offset
from selfimprove.phases.compare import compare, seed_members
from selfimprove.phases.phase4_state import pick_best
from selfimprove.phases.finalize import finalize
from selfimprove.phases.iterate import iterate
from selfimprove.phases.run import run_loop
from selfimprove.phases.status import run_status
from selfimprove.rundir import RunDir
from selfimprove.stack import prime_rl_keys, toml_paths
from selfimprove.stack.dialects import SEED

from loop_helpers import tree_digest, write_teacher_files
from test_run_context import count_run_json_reads

CANARY = "CANARY-7f3a-SEALED-EVAL"


def rec(arm: str, it: int | None, acc: float, reward: float) -> IterRecord:
    return IterRecord(arm=arm, iter=it, eval_acc=acc, eval_reward_mean=reward, n_eval=200, acc_ci95=(0.0, 1.0))


def test_pick_best_highest_acc_then_reward_then_earlier() -> None:
    base = rec("iter_0", 0, 0.9, 0.9)  # iter_0 never wins
    assert pick_best([base, rec("iter_1", 1, 0.4, 0.4), rec("iter_2", 2, 0.5, 0.5)]).arm == "iter_2"
    assert pick_best([rec("iter_1", 1, 0.5, 0.4), rec("iter_2", 2, 0.5, 0.6)]).arm == "iter_2"
    assert pick_best([rec("iter_1", 1, 0.5, 0.5), rec("iter_2", 2, 0.5, 0.5)]).arm == "iter_1"
    assert pick_best([base, rec("run_a", None, 0.99, 0.99)]) is None


def finish_phase3(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    assert iterate(run, quiet=True).kind == "ended"


def all_text(root) -> str:
    chunks = []
    for p in root.rglob("*"):
        if p.is_file() and p.name != "eval_rollouts.jsonl" and p.suffix not in (".safetensors", ".distcp", ".png"):
            chunks.append(p.read_text(errors="replace"))
    return "\n".join(chunks)


def test_compare_runs_three_arms_then_finalize_table(run: RunDir, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("FAKE_RL_CANARY", CANARY)
    finish_phase3(run)
    assert run_status(run)["next"].startswith("selfimprove compare")
    reads = count_run_json_reads(monkeypatch)
    result = compare(run, quiet=True)
    # run.json is read for the order check before the lock, for the context under it, and once per trained
    # arm, whose error is cleared read-modify-write beside the other arms' threads (45 reads before issue 25)
    assert len(reads) == 2 + 3
    assert run_status(run)["next"].startswith("selfimprove finalize")
    assert result["errors"] == {} and set(result["arms"]) == {"run_a", "run_b", "run_c"}
    best = json.loads(run.best_iter_json.read_text())
    assert best["best_iter"] == 1 and best["BEST_DATASET"].endswith("iter_1/dataset.jsonl")
    hub_eval = run.read_hub_env().eval_size
    assert all(r["n_eval"] == hub_eval for r in result["arms"].values())  # the full eval split
    # Run B: two train env blocks, the canonical's real env first, then the best dataset.
    run_b = toml_paths.read_toml(run.control("run_b").rl_toml)
    envs = run_b["orchestrator"]["train"]["env"]
    canonical = toml_paths.read_toml(run.iter(0).dir / "canonical_rl.toml")
    assert envs[0] == SEED.canonical_train_envs(canonical)[0] and envs[1]["id"] == f"selfimprove_arith_r{run.read_run().run_id}_run_b"
    assert "resume_step" not in run_b.get("ckpt", {})
    assert prime_rl_keys.unknown_keys(run_b) == [] and prime_rl_keys.type_errors(run_b) == []
    run_c = toml_paths.read_toml(run.control("run_c").rl_toml)
    assert run_c["orchestrator"]["train"]["env"] == SEED.canonical_train_envs(canonical)
    assert run_c["ckpt"]["resume_step"] == run.read_eval_summary(run.iter(0)).final_step
    # Re-running compare keeps finished arms (no retraining, no duplicate records).
    again = compare(run, quiet=True)
    assert again["arms"] == result["arms"]
    arms = [r.arm for r in run.read_metrics().iters]
    assert sorted(arms) == sorted(set(arms)) == ["iter_0", "iter_1", "run_a", "run_b", "run_c"]

    out = finalize(run)
    assert (out["status"], out["end_reason"]) == ("finalized", "max_iters_reached") and out["total_duration_s"] > 0
    status = run_status(run)
    assert status["next"].startswith("nothing") and status["plot"] and len(status["arms"]) == 5
    assert [r["arm"] for r in out["rows"]] == ["iter_0", "iter_1", "run_a", "run_b", "run_c"]
    assert [r["arm"] for r in out["rows"] if r["best"]] == ["iter_1"]
    pairs = {(c["a"], c["b"]) for c in out["comparisons"]}
    assert {("iter_1", "iter_0"), ("iter_1", "run_c"), ("run_a", "run_c"), ("run_a", "iter_1")} <= pairs
    assert all(c["verdict"] in ("improved", "regressed", "no detectable difference", "untested") for c in out["comparisons"])
    assert run.plot_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Final summary" in run.scratchpad.read_text()
    # The canary planted in every eval row's text fields reaches no file and no output.
    captured = capsys.readouterr()
    assert CANARY not in all_text(run.root) and CANARY not in captured.out + captured.err
    assert CANARY in (run.control("run_a").rollout_step(out["rows"][2]["final_step"]) / "eval_rollouts.jsonl").read_text()


def test_failing_arm_is_logged_and_the_others_proceed(run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    finish_phase3(run)
    real = compare_mod.run_arm

    def run_a_fails(rd, arm_key, *args, **kwargs):
        if arm_key == "run_a":
            raise SelfImproveError("engine exploded in run_a")
        return real(rd, arm_key, *args, **kwargs)

    monkeypatch.setattr(compare_mod, "run_arm", run_a_fails)
    result = compare(run, quiet=True)
    assert set(result["arms"]) == {"run_b", "run_c"} and "run_a" in result["errors"]
    assert [e.arm for e in run.read_run().phase4_errors] == ["run_a"]
    monkeypatch.setattr(compare_mod, "run_arm", real)
    result = compare(run, quiet=True)  # re-running retries only the failed arm
    assert set(result["arms"]) == {"run_a", "run_b", "run_c"} and run.read_run().phase4_errors == []


def test_two_seeds_compare_killed_between_replicates_resumes(run: RunDir, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path) -> None:
    """compare --seeds 2, killed while the first seed replicate trains: re-running (seeds now read from
    run.json) attaches to that job, launches every arm exactly once, stamps seed and replicate_of,
    retrains the best iteration's exact config with only the seed changed; finalize shows 2 seeds."""
    finish_phase3(run)
    launches = tmp_path / "launches.log"
    monkeypatch.setenv("FAKE_RL_LAUNCH_LOG", str(launches))
    monkeypatch.setenv("FAKE_RL_STEP_S", "0.3")  # 4 steps: a job lives ~1.2 s, time to kill the CLI mid-job
    cli = subprocess.Popen([sys.executable, "-m", "selfimprove", "compare", "--run-dir", str(run.root),
                            "--seeds", "2", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 900  # generous: 2 busy cores run seed 0 of every arm first
    while "iter_1_seed1/prime_out" not in (launches.read_text() if launches.exists() else ""):
        assert cli.poll() is None, cli.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "the first seed replicate never launched"
        time.sleep(0.02)
    cli.kill()  # between seed replicates: seed 0 of every arm done, iter_1_seed1's job detached and running
    cli.wait()
    assert run.read_run().seeds == 2 and run.read_metrics().get("run_a_seed1") is None

    result = compare(run, quiet=True)
    keys = {"run_a", "run_b", "run_c", "iter_1_seed1", "run_a_seed1", "run_c_seed1"}
    assert result["errors"] == {} and result["seeds"] == 2 and set(result["arms"]) == keys
    assert result["seed_members"] == {"iter_1": ["iter_1", "iter_1_seed1"], "run_a": ["run_a", "run_a_seed1"],
                                      "run_b": ["run_b"], "run_c": ["run_c", "run_c_seed1"]}
    out_dirs = [re.search(r"--output-dir (\S+)", line).group(1) for line in launches.read_text().splitlines()]
    assert len(out_dirs) == len(set(out_dirs)) == 6  # attached to the killed CLI's job, never a second launch
    metrics = run.read_metrics()
    stamps = {r.arm: (r.seed, r.replicate_of) for r in metrics.iters}
    assert stamps["iter_1"] == (0, None)  # the canonical seed, which every iteration trains with
    assert stamps["run_a"] == stamps["run_c"] == stamps["run_b"] == (1, None)  # canonical + 1
    assert stamps["iter_1_seed1"] == (2, "iter_1") and stamps["run_a_seed1"] == (3, "run_a")
    assert run.arm("run_c_seed1").dir.name == "run_c_real_from_iter0_seed1"
    assert pick_best(metrics.iters).arm == "iter_1"  # replicates never compete for BEST_ITER
    best, replicate = toml_paths.read_toml(run.iter(1).rl_toml), toml_paths.read_toml(run.arm("iter_1_seed1").rl_toml)
    best["orchestrator"]["seed"] = 2
    assert replicate == best
    run_c, run_c1 = toml_paths.read_toml(run.control("run_c").rl_toml), toml_paths.read_toml(run.control("run_c", 1).rl_toml)
    assert run_c1["orchestrator"].pop("seed") == 3 and run_c["orchestrator"].pop("seed") == 1
    run_c["wandb"] = run_c1["wandb"] = None
    assert run_c == run_c1
    again = compare(run, quiet=True)  # everything finished: nothing relaunched
    assert again["arms"] == result["arms"] and len(launches.read_text().splitlines()) == 6

    out = finalize(run, plot=False)
    seeds = {r["arm"]: r["n_seeds"] for r in out["rows"]}
    assert seeds == {"iter_0": 1, "iter_1": 2, "run_a": 2, "run_b": 1, "run_c": 2}
    assert {(t["a"], t["b"]) for t in out["seed_tests"]} >= {("iter_1", "iter_0"), ("run_a", "run_c")}


# ---------------------------------------------------------------- issue 23, item 3: Run A is an independent replicate


@pytest.mark.parametrize("seeds", [1, 3])
def test_seed_scheme_keeps_run_a_apart_from_the_best_iteration(seeds: int) -> None:
    """Run A's seeds never meet the best iteration's (member 0 = the iteration itself, every iteration's seed),
    Run C's are Run A's, and raising --seeds keeps the finished members' seeds."""
    best = [seed_offset("best", k) for k in range(seeds)]
    run_a = [seed_offset("run_a", k) for k in range(seeds)]
    assert best[0] == 0 and not set(run_a) & set(best)
    assert [seed_offset("run_c", k) for k in range(seeds)] == run_a
    assert len(set(run_a)) == len(set(best)) == seeds and seed_offset("run_b") not in best
    assert [seed_offset("run_a", k) for k in range(seeds + 2)][:seeds] == run_a  # raising --seeds renumbers nothing
    with pytest.raises(SelfImproveError, match="one seed"):
        seed_offset("run_b", 1)


def test_run_a_is_an_independent_replicate_of_the_best_iteration(run: RunDir, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path) -> None:
    """compare --seeds 1, then raised to 3: Run A trains the best iteration's data with seeds disjoint from the
    best iteration's (iter_N itself and its replicates), Run C with Run A's; metrics.json and finalize's
    table (console, scratchpad, JSON) show them, and raising --seeds retrains no finished member."""
    finish_phase3(run)
    launches = tmp_path / "launches.log"
    monkeypatch.setenv("FAKE_RL_LAUNCH_LOG", str(launches))

    def seeds_of(arm: str) -> list[int | None]:
        return [r.seed for r in seed_members(run.read_metrics(), arm)]

    def toml_seed(key: str) -> int:
        return toml_paths.read_toml(run.arm(key).rl_toml)["orchestrator"]["seed"]

    assert compare(run, quiet=True, seeds=1)["errors"] == {}
    assert seeds_of("iter_1") == [0] and seeds_of("run_a") == seeds_of("run_c") == seeds_of("run_b") == [1]
    assert toml_seed("iter_1") == 0 and toml_seed("run_a") == toml_seed("run_c") == 1
    # Same knobs and checkpoint: Run A's training differs from iter_1's by its seed (and its package's name;
    # it is evaluated on the full eval split).
    iter_1, run_a = toml_paths.read_toml(run.iter(1).rl_toml), toml_paths.read_toml(run.control("run_a").rl_toml)
    for config in (iter_1, run_a):
        config["orchestrator"].pop("seed"), config["orchestrator"]["train"].pop("env"), config["orchestrator"].pop("eval")
        config.pop("wandb", None)
    assert iter_1 == run_a

    assert compare(run, quiet=True, seeds=3)["errors"] == {}
    assert len(launches.read_text().splitlines()) == 3 + 6  # seed 0 of A, B, C; then 2 more of best, A, C
    best, run_a_seeds, run_c_seeds = seeds_of("iter_1"), seeds_of("run_a"), seeds_of("run_c")
    assert best == [0, 2, 4] and run_a_seeds == run_c_seeds == [1, 3, 5] and seeds_of("run_b") == [1]
    assert [toml_seed(f"run_a_seed{k}") for k in (1, 2)] == [3, 5]

    out = finalize(run, plot=False)
    assert {r["arm"]: r["seeds"] for r in out["rows"]}["run_a"] == [1, 3, 5]
    assert {r["arm"]: r["seeds"] for r in out["rows"]}["iter_1"] == [0, 2, 4]
    pad = run.scratchpad.read_text()
    assert "| run_a (best @iter0) | " in pad and " | 1,3,5 | " in pad and " | 0,2,4 | " in pad


def test_compare_refuses_while_phase3_runs(run: RunDir) -> None:
    """A phase-order refusal (exit 5, docs/reference/exit-codes.md), raised before the lock: the run dir is left as it was."""
    before = tree_digest(run.root)
    with pytest.raises(PhaseOrderError, match="still 'running'"):
        compare(run, quiet=True)
    assert tree_digest(run.root) == before


def test_finalize_after_budget_exhausted(run: RunDir) -> None:
    cfg = run.read_run()
    cfg.budget_seconds, cfg.start_ts = 1, cfg.start_ts - 5
    cfg.phase3_start_ts = cfg.start_ts  # the --budget clock: Phase 3 "began" 5 s ago
    run.write_run(cfg)
    assert iterate(run, quiet=True).kind == "ended"
    out = finalize(run)
    assert (out["status"], out["end_reason"]) == ("finalized", "budget_exhausted") and out["best"] is None
    assert [r["arm"] for r in out["rows"]] == ["iter_0"] and out["recommended"] == "iter_0"


def test_finalize_after_abort(run: RunDir) -> None:
    cfg = run.read_run()
    cfg.status, cfg.reason = "aborted", "hub env x/y not found"
    run.write_run(cfg)
    out = finalize(run)
    assert (out["status"], out["end_reason"]) == ("finalized", "aborted") and out["reason"] == "hub env x/y not found"
    assert run.read_run().end_ts is not None


# ---------------------------------------------------------------- issue 13, item 2: no silent drop
# run_b's job dies (the fake engine crashes after step 1). compare logs it and goes on; finalize must
# then name run_b, why it is missing and the fix (`compare --restart`) in its output, the scratchpad
# and `status`, keep the run open and exit 6. After the recovery the final summary is written.


def test_dead_run_b_is_named_with_the_fix_and_the_summary_is_partial(run: RunDir, cli,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    finish_phase3(run)
    real = compare_mod.run_arm

    def run_b_job_dies(rd, arm_key, *args, **kwargs):
        if arm_key != "run_b":
            return real(rd, arm_key, *args, **kwargs)
        with monkeypatch.context() as m:
            m.setenv("FAKE_RL_CRASH_AFTER", "1")  # the job dies after its first step
            return real(rd, arm_key, *args, **kwargs)

    monkeypatch.setattr(compare_mod, "run_arm", run_b_job_dies)
    # One arm at a time: the crash is injected through os.environ, which arms training at once would share.
    result = compare(run, quiet=True, parallel=1)
    assert set(result["arms"]) == {"run_a", "run_c"} and "run_b" in result["errors"]
    monkeypatch.setattr(compare_mod, "run_arm", real)

    res = cli("finalize", "--run-dir", run.root, "--no-plot")
    assert res.exit_code == 6
    fix = f"selfimprove compare --run-dir {run.root} --restart"
    assert "INCOMPLETE" in res.stdout and "run_b" in res.stdout and fix in res.stdout
    assert "summary is incomplete, missing run_b" in res.stderr and fix in res.stderr
    pad = run.scratchpad.read_text()
    assert "## Partial summary" in pad and "## Final summary" not in pad and fix in pad
    cfg = run.read_run()
    assert cfg.end_ts is None and cfg.status == "max_iters_reached"  # not closed
    status = run_status(run)
    assert status["next"] == fix and [m["arm"] for m in status["phase4_missing"]] == ["run_b"]
    shown = cli("status", "--run-dir", run.root)
    assert "missing Phase 4 arm run_b" in shown.stdout and "--restart" in shown.stdout
    again = cli("finalize", "--run-dir", run.root, "--no-plot", "--json")  # re-run: still partial, not appended twice
    assert again.exit_code == 6 and json.loads(again.stdout)["complete"] is False
    assert run.scratchpad.read_text().count("## Partial summary") == 1

    compare(run, restart=True, quiet=True)  # the fix the messages point to
    done = cli("finalize", "--run-dir", run.root, "--no-plot", "--json")
    assert done.exit_code == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["complete"] and [r["arm"] for r in out["rows"]][-3:] == ["run_a", "run_b", "run_c"]
    assert "## Final summary" in run.scratchpad.read_text() and run.read_run().end_ts is not None
    assert run_status(run)["phase4_missing"] == []


def test_arm_never_trained_is_missing_too(run: RunDir, cli) -> None:
    """Phase 3 over, best iteration known, compare never ran: finalize says run_a and run_b are missing."""
    finish_phase3(run)
    res = cli("finalize", "--run-dir", run.root, "--no-plot")
    assert res.exit_code == 6 and "missing run_a" in res.stderr and "run_b" in res.stderr
    assert f"selfimprove compare --run-dir {run.root}`" in res.stderr


# ---------------------------------------------------------------- issue 13, items 8 and 4


def test_runs_a_and_c_replay_the_best_iterations_overrides(run: RunDir) -> None:
    with pytest.raises(TeacherActionNeeded):
        iterate(run, quiet=True)
    write_teacher_files(run.iter(1).dir)
    (run.iter(1).dir / "overrides.toml").write_text("[trainer.optim]\nlr = 7e-06\n")
    assert iterate(run, quiet=True).kind == "ended"
    result = compare(run, quiet=True)
    assert result["errors"] == {}
    lr = {arm: toml_paths.get_path(toml_paths.read_toml(run.arm(arm).rl_toml), "trainer.optim.lr")
          for arm in ("iter_1", "run_a", "run_c")}
    assert lr == {"iter_1": 7e-06, "run_a": 7e-06, "run_c": 7e-06}


def test_training_phases_refuse_a_closed_run(run: RunDir, cli) -> None:
    """finalize closes the run (status "finalized", end_reason kept); baseline, iterate, finalize itself and
    `run --run-dir` then refuse with exit 5 and change nothing (finalize names where the summary is)."""
    finalize(run, plot=False)
    cfg = run.read_run()
    assert (cfg.status, cfg.end_reason) == ("finalized", "completed") and cfg.end_ts is not None
    before = tree_digest(run.root)
    for phase in ("baseline", "iterate"):
        res = cli(phase, "--run-dir", run.root)
        assert res.exit_code == 5, (phase, res.stdout, res.stderr)
        assert "the run is closed" in res.stderr and "selfimprove bootstrap" in res.stderr
    res = cli("finalize", "--run-dir", run.root)  # with the plot on: still nothing written
    assert res.exit_code == 5 and "already finalized" in res.stderr and "## Final summary" in res.stderr
    assert "plot:" not in res.stdout
    assert tree_digest(run.root) == before

    def no_teacher(ctx):
        raise AssertionError("a closed run must not call the teacher")

    with pytest.raises(PhaseOrderError, match="already finalized"):
        run_loop(run, no_teacher, quiet=True)
    assert tree_digest(run.root) == before
