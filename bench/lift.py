"""Benchmark: does targeted data beat equal compute, across training seeds? The whole loop on the embedded default.

    .venv/bin/python bench/lift.py [--seeds 3] [--steps 50] [--max-iters 3] [--budget 20m]
    .venv/bin/python bench/lift.py --report RUN_DIR [--oracle-seeds 3]   # a finished run (e.g. `make demo`'s)
    .venv/bin/python bench/lift.py --teacher examples/minimal_teacher.py:MinimalTeacher --out lift_minimal.txt
    .venv/bin/python bench/lift.py --model build:selfimprove-arith --teacher examples/minimal_teacher.py:MinimalTeacher \
        --oracle none --out lift_build_minimal.txt

Runs `selfimprove run selfimprove-arith --seeds N` with a teacher (default: the scripted example teacher),
every arm evaluated on the full eval split (1000 examples) so that every arm
pairs on the same examples. Reports, from the product's own `build_table`:

- each arm: mean ± sd of eval accuracy over its training seeds, and its interval;
- the seed-aware tests (Welch's t on per-seed accuracies; one-sample t against
  iter_0), and the issue's two targets: Run A beats Run C, and the best
  iteration beats iter_0, each by >= 5 points at p < 0.05;
- per-kind eval accuracy of each arm (bench-only diagnostics: the eval split's
  kinds come from `selfimprove_arith.labelled_split`; a teacher never sees them);
- an ORACLE arm (bench-only): iter_0 + the same steps on REAL train rows of
  chosen kinds (default: the kinds iter_0 fails on, eval accuracy < 0.5),
  with Run A's seeds (`arms.arm_seed`). It separates "the teacher picked the
  right part of the real data" (oracle ~ Run A) from "the teacher made data
  the real split does not have" (Run A > oracle). It trains in a hard-linked copy of the run dir
  (JSON files are replaced atomically, so the original is never touched).

Nothing is tuned to the result: whatever is measured is printed, and saved to
bench/out/lift.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.05


def run_loop(args) -> tuple[Path, list[str], float]:
    runs = Path(args.runs_dir or tempfile.mkdtemp(prefix="lift-"))
    env_flags = [f for flag, value in (("--env-args", args.env_args), ("--env-path", args.env_path),
                                       ("--group-by", args.group_by)) if value for f in (flag, value)]
    cmd = [sys.executable, "-m", "selfimprove", "run", args.env, *env_flags, "--model", args.model,
           "--batch-size", str(args.batch_size), "--steps-per-run", str(args.steps), "--eval-examples", str(args.eval_examples),
           "--budget", args.budget, "--max-iters", str(args.max_iters), "--seeds", str(args.seeds),
           "--runs-dir", str(runs), "--teacher", args.teacher, "--json"]
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    if proc.returncode != 0:
        sys.exit(f"selfimprove run failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return Path(json.loads(proc.stdout)["run_dir"]), cmd, time.time() - started


def eval_kinds() -> list[str]:
    from selfimprove_arith.problems import labelled_split

    return [k for _, _, k in labelled_split("eval")]


def per_kind(rd, arm, kinds: list[str]) -> dict[str, float]:
    """Eval accuracy per kind of one arm dir (example ids are eval-split indices)."""
    summ = rd.read_eval_summary(arm)
    hits: dict[str, list[float]] = defaultdict(list)
    for ex in summ.per_example:
        hits[kinds[int(ex.example_id)]].append(ex.correct)
    return {k: sum(v) / len(v) for k, v in hits.items()}


def mean_kinds(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = rows[0].keys() if rows else []
    return {k: sum(r.get(k, 0.0) for r in rows) / len(rows) for k in keys}


def train_oracle(rd, kinds_wanted: list[str], seeds: int, n_rows: int) -> tuple[list, Path]:
    """The oracle arm: real TRAIN rows of `kinds_wanted`, packaged like a generated env, trained from iter_0
    with Run A's seeds (member k: `arm_seed(rd, "run_a", k)`, so oracle vs Run A differs by the data only),
    in a hard-linked copy of the run dir. Returns (summaries, clone dir)."""
    from selfimprove.phases import iteration_steps as steps
    from selfimprove.phases.arms import arm_seed, train_resumed_arm
    from selfimprove.rundir import ArmDir, RunDir, seed_key
    from selfimprove.stack.env_package import package_name
    from selfimprove_arith.problems import labelled_split

    clone = Path(tempfile.mkdtemp(prefix="lift-oracle-")) / rd.root.name
    subprocess.run(["cp", "-al", str(rd.root), str(clone)], check=True)
    ord_ = RunDir(clone)
    cfg = ord_.read_run()
    rows = [{"question": q, "answer": str(a), "info": {}} for q, a, k in labelled_split("train") if k in kinds_wanted]
    rows = rows[:n_rows]
    first = ArmDir(ord_.root, "oracle")  # a bench-only arm: RunDir.arm knows only the product's arms
    first.dir.mkdir(parents=True, exist_ok=True)
    dataset = first.dir / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    name = package_name(cfg.dataset, "bench_oracle")
    steps.package(ord_, first, name, None, origin=f"bench oracle: real train rows of {', '.join(kinds_wanted)}")
    f = steps.iter0_final_step(ord_)
    n_eval = rd.read_eval_summary(rd.arm("run_c")).n_examples
    out = []
    for k in range(seeds):
        key = seed_key("oracle", k)
        arm = ArmDir(ord_.root, key)
        arm.dir.mkdir(parents=True, exist_ok=True)
        out.append(train_resumed_arm(ord_, cfg, arm, train_envs=[{"id": name}], resume_step=f, wandb_name=key,
                                     overrides_file=None, rows=len(rows), num_examples=n_eval, record_name=key,
                                     seed=arm_seed(ord_, "run_a", k), restart=False, resume=False, quiet=True,
                                     cap_hours=None))
    return out, clone


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3, help="training seeds per Phase 4 arm (compare --seeds)")
    ap.add_argument("--model", default="selfimprove/tiny-arith",
                    help="the student: the shipped tiny-arith (weaknesses planted by its warm-up) or build:selfimprove-arith "
                         "(the generic recipe: supervised uniformly on TRAIN rows, stopped by its stated rule)")
    ap.add_argument("--budget", default="20m", help="Phase 3 budget")
    ap.add_argument("--steps", type=int, default=50, help="new training steps per run")
    ap.add_argument("--max-iters", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--runs-dir", default=None)
    ap.add_argument("--report", default=None, help="a finished run dir to report on instead of running")
    ap.add_argument("--oracle", default="auto", help="kinds for the oracle arm (comma list), 'auto' or 'none'")
    ap.add_argument("--oracle-seeds", type=int, default=None, help="default: the run's seeds")
    ap.add_argument("--oracle-rows", type=int, default=800)
    ap.add_argument("--teacher", default=f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher",
                    help="the --teacher of `selfimprove run` (e.g. examples/minimal_teacher.py:MinimalTeacher)")
    ap.add_argument("--out", default="lift.txt", help="file name under bench/out/")
    ap.add_argument("--env", default="selfimprove-arith", help="the env (another env: per-kind and oracle lines are "
                    "the embedded env's only, so they are left out)")
    ap.add_argument("--env-args", default=None, help="JSON for the env's load_environment (bootstrap --env-args)")
    ap.add_argument("--env-path", default=None, help="a local env project (bootstrap --env-path)")
    ap.add_argument("--group-by", default=None, help="bootstrap --group-by")
    ap.add_argument("--eval-examples", type=int, default=1000, help="eval examples per arm (1000: the embedded env's split)")
    args = ap.parse_args()

    from selfimprove.phases.finalize import build_table
    from selfimprove.report.table import seeds_text, verdict_lines
    from selfimprove.phases.context import RunContext
    from selfimprove.rundir import RunDir

    if args.report:
        rd = RunDir(args.report).require()
        cmd, wall = ["(finished run)", "", str(rd.root)], (rd.read_run().total_duration_s or 0.0)
    else:
        root, cmd, wall = run_loop(args)
        rd = RunDir(root).require()
    cfg = rd.read_run()
    table = build_table(RunContext.load(rd))
    timings = json.loads((rd.root / "timings.json").read_text()) if (rd.root / "timings.json").is_file() else {}

    lines = [f"bench/lift.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  wall {wall / 60:.1f} min",
             f"command: {' '.join(cmd[2:])}", f"run dir: {rd.root}",
             f"eval: {cfg.eval_examples} eval examples of {cfg.dataset}, greedy; seeds per arm: {cfg.seeds}", "",
             f"{'arm':<26}{'rows':>10}{'eval_acc':>16}  {'95% interval':<18}{'seeds':>10}{'n':>6}"]
    if table.get("verdict"):  # the product's verdict first, as finalize prints it
        lines[-1:-1] = verdict_lines(table) + [""]
    for r in table["rows"]:
        lo, hi = r["acc_ci95"]
        acc = f"{r['eval_acc']:.3f}" + (f" ± {r['eval_acc_sd']:.3f}" if r.get("eval_acc_sd") is not None else "")
        mark = "  <- BEST_ITER" if r["best"] else ""
        seeds = seeds_text(r.get("seeds") or [None])  # training seeds: Run A's never the best iteration's
        lines.append(f"{r['label']:<26}{r['rows']:>10}{acc:>16}  [{lo:.3f}, {hi:.3f}]    {seeds:>10}{r['n_eval']:>6}{mark}")

    lines += ["", "seed-aware tests (Welch's t on per-seed accuracies; one-sample t against the fixed iter_0):"]
    for t in table.get("seed_tests", []):
        p = "n/a" if t["p"] is None else f"{t['p']:.3g}"
        lines.append(f"  {t['a']:>10} vs {t['b']:<10} seeds {t['n_a']}/{t['n_b']}  delta {t['delta']:+.3f}  "
                     f"test {t['test'] or '-'}  p={p}  {t['verdict']}")

    def target(a: str, b: str, what: str) -> str:
        t = next((x for x in table.get("seed_tests", []) if (x["a"], x["b"]) == (a, b)), None)
        if t is None or t["p"] is None:
            return f"target ({what}): not evaluable (seed variance unmeasured or arm missing)"
        met = t["delta"] >= TARGET and t["p"] < 0.05
        return (f"target ({what} by >= {TARGET:.2f}, seed-aware p < 0.05): {'MET' if met else 'NOT MET'} "
                f"(delta {t['delta']:+.3f}, p={t['p']:.3g}, seeds {t['n_a']}/{t['n_b']}, n={t['n_examples']})")

    lines += ["", target("run_a", "run_c", "Run A beats Run C"),
              target(table["best"], "iter_0", "the best iteration beats iter_0") if table.get("best") else "no best iteration"]

    if cfg.dataset == "selfimprove-arith":  # the per-kind lines and the oracle read the embedded env's kinds
        lines += arith_diagnostics(args, rd, cfg, table)
    lines.append("")
    lines.append("time per phase (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    lines.append(f"status {cfg.status} ({cfg.reason})")
    text = "\n".join(lines)
    print(text)
    save(args.out, text)


def arith_diagnostics(args, rd, cfg, table) -> list[str]:
    """Bench-only lines of the embedded env: eval accuracy per kind (mean over each arm's seeds) and the
    oracle arm."""
    from selfimprove.phases.compare import seed_members
    from selfimprove.rundir import ArmDir, RunDir
    from selfimprove.stats import compare_over_seeds

    lines: list[str] = []
    kinds = eval_kinds()

    metrics = rd.read_metrics()
    arm_kinds: dict[str, dict[str, float]] = {"iter_0": per_kind(rd, rd.arm("iter_0"), kinds)}
    for arm in ([table["best"]] if table.get("best") else []) + ["run_a", "run_b", "run_c"]:
        members = seed_members(metrics, arm)
        if members:
            arm_kinds[f"{arm} (x{len(members)})"] = mean_kinds([per_kind(rd, rd.arm(m.arm), kinds) for m in members])

    oracle_summaries = []
    if args.oracle != "none" and "run_c" in {r.arm for r in metrics.iters}:
        chosen = ([k for k, v in arm_kinds["iter_0"].items() if v < 0.5] if args.oracle == "auto"
                  else [k.strip() for k in args.oracle.split(",") if k.strip()])
        if chosen:
            oracle_summaries, clone = train_oracle(rd, chosen, args.oracle_seeds or cfg.seeds, args.oracle_rows)
            ord_ = RunDir(clone)
            arm_kinds[f"oracle (x{len(oracle_summaries)})"] = mean_kinds(
                [per_kind(ord_, ArmDir(ord_.root, m.arm), kinds) for m in seed_members(ord_.read_metrics(), "oracle")])
            accs = [s.eval_acc for s in oracle_summaries]
            mean = sum(accs) / len(accs)
            why = " (the kinds iter_0 fails on: eval accuracy < 0.5)" if args.oracle == "auto" else ""
            lines += ["", f"oracle arm: iter_0 + {cfg.steps_per_run} steps on up to {args.oracle_rows} real TRAIN rows "
                          f"of {', '.join(chosen)}{why}",
                      f"  eval_acc per seed {', '.join(f'{a:.3f}' for a in accs)}; mean {mean:.3f}"]
            run_a = [rd.read_eval_summary(rd.arm(m.arm)) for m in seed_members(metrics, "run_a")]
            t = compare_over_seeds(run_a, oracle_summaries, a_name="run_a", b_name="oracle")
            p = "n/a" if t.get("p") is None else f"{t['p']:.3g}"
            lines.append(f"  run_a vs oracle: delta {t.get('delta', 0.0):+.3f}, p={p} ({t['verdict']})")
            shutil.rmtree(clone.parent, ignore_errors=True)

    all_kinds = list(dict.fromkeys(kinds))
    lines += ["", "eval accuracy per kind (bench-only diagnostic; mean over seeds; n per kind ~"
              f"{len(kinds) // len(all_kinds)}):", f"{'arm':<22}" + "".join(f"{k:>11}" for k in all_kinds)]
    for arm, acc in arm_kinds.items():
        lines.append(f"{arm:<22}" + "".join(f"{acc.get(k, float('nan')):>11.2f}" for k in all_kinds))
    return lines


if __name__ == "__main__":
    main()
