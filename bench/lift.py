"""Benchmark: does targeted data beat equal compute? The whole loop on the embedded default.

    .venv/bin/python bench/lift.py [--budget 12m] [--steps 50] [--max-iters 3]
    .venv/bin/python bench/lift.py --report RUN_DIR   # report on a finished run (e.g. `make demo`'s)

Runs `selfimprove run selfimprove-arith` with the example teacher and fixed
seeds (the canonical config's orchestrator seed, the teacher's per-iteration
seeds), with EVERY arm evaluated on the full eval split (1000 examples), so
iter_0, each iteration and Runs A/B/C are all paired on the same examples.
Reports each arm with its Wilson interval, the paired tests, the time per
phase, and the issue's target: the best iteration beats Run C (iter_0 + the
same steps on real data) by >= 5 points with McNemar p < 0.05. The evaluation
is not tuned: whatever it measures is printed. Output also in bench/out/lift.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", default="12m")
    ap.add_argument("--steps", type=int, default=50, help="new training steps per run")
    ap.add_argument("--max-iters", type=int, default=3)
    ap.add_argument("--report", default=None, help="a finished run dir to report on instead of running")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--runs-dir", default=None)
    args = ap.parse_args()
    if args.report:
        from selfimprove.phases.finalize import build_table
        from selfimprove.rundir import RunDir

        rd = RunDir(args.report).require()
        cfg = rd.read_run()
        timings = rd.root / "timings.json"
        res = {**build_table(rd), "run_dir": str(rd.root), "status": cfg.status, "reason": cfg.reason,
               "timings_s": json.loads(timings.read_text()) if timings.is_file() else {}}
        cmd, wall = ["(finished run)", "", str(rd.root)], (cfg.total_duration_s or 0.0)
    else:
        runs = Path(args.runs_dir or tempfile.mkdtemp(prefix="lift-"))
        cmd = [sys.executable, "-m", "selfimprove", "run", "selfimprove-arith", "--model", "selfimprove/tiny-arith",
               "--batch-size", str(args.batch_size), "--steps-per-run", str(args.steps), "--eval-examples", "1000",
               "--budget", args.budget, "--max-iters", str(args.max_iters), "--runs-dir", str(runs),
               "--teacher", f"{REPO / 'examples' / 'arith_teacher.py'}:ArithTeacher", "--json"]
        started = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        wall = time.time() - started
        if proc.returncode != 0:
            sys.exit(f"selfimprove run failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        res = json.loads(proc.stdout)

    lines = [f"bench/lift.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  wall {wall / 60:.1f} min",
             f"command: {' '.join(cmd[2:])}", f"run dir: {res['run_dir']}", "",
             f"{'arm':<26}{'rows':>10}{'eval_acc':>10}  {'95% Wilson':<18}{'n':>6}"]
    for r in res["rows"]:
        lo, hi = r["acc_ci95"]
        mark = "  <- BEST_ITER" if r["best"] else ""
        lines.append(f"{r['label']:<26}{r['rows']:>10}{r['eval_acc']:>10.3f}  [{lo:.3f}, {hi:.3f}]    {r['n_eval']:>6}{mark}")
    lines += ["", "paired on the eval examples both arms share (n): exact McNemar on correctness, bootstrap 95% CI on reward"]
    for c in res["comparisons"]:
        if c.get("mcnemar_p") is None:
            continue
        lo, hi = c["reward_diff_ci95"]
        lines.append(f"  {c['a']:>7} vs {c['b']:<7} n={c['n_paired']:<5} delta {c['delta']:+.3f}  discordant {c['b_only_a']}/{c['c_only_b']}  "
                     f"p={c['mcnemar_p']:.3g}  reward diff {c['reward_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]  {c['verdict']}")
    best_vs_c = next((c for c in res["comparisons"] if c["a"] == res["best"] and c["b"] == "run_c"), None)
    lines.append("")
    if best_vs_c and best_vs_c.get("mcnemar_p") is not None:
        met = best_vs_c["delta"] >= 0.05 and best_vs_c["mcnemar_p"] < 0.05
        lines.append(f"target (best iteration beats Run C by >= 0.05 with p < 0.05): {'MET' if met else 'NOT MET'} "
                     f"(delta {best_vs_c['delta']:+.3f}, p={best_vs_c['mcnemar_p']:.3g})")
    else:
        lines.append("target: not evaluable (no best iteration or no Run C)")
    lines.append("time per phase (s): " + ", ".join(f"{k} {v:.0f}" for k, v in res["timings_s"].items()))
    lines.append(f"status {res['status']} ({res['reason']})")
    text = "\n".join(lines)
    print(text)
    save("lift.txt", text)


if __name__ == "__main__":
    main()
