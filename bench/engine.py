"""Benchmark of the embedded CPU engine `selfimprove-rl` (issue 3). Not a test.

    .venv/bin/python bench/engine.py                 # everything, ~6 min once the student is cached
    .venv/bin/python bench/engine.py --skip-pass-at-k

Measures, on this machine:
- the built-in student's warm-up time (only when it is not cached yet);
- per-kind greedy / pass@1 / pass@16 of the base student (selfimprove-arith kinds);
- the demo run `selfimprove-rl @ configs/selfimprove-arith/rl.toml` (16 prompts x 16
  rollouts, 100 steps, greedy eval on 1000 eval examples at step 0 and step 100):
  wall time, s/step, rollouts/s, eval seconds, peak RSS, and the eval accuracy at
  step 0 vs step 100 with Wilson 95% intervals and an exact McNemar test.

Writes bench/out/engine.txt (git-ignored) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see selfimprove/rl/cli.py
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _out import save  # bench/_out.py (this directory is sys.path[0])

from selfimprove.stats import mcnemar_exact, wilson_interval  # noqa: E402


def eval_correct(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out[r["example_id"]] = float(r["reward"]) >= 0.5
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-pass-at-k", action="store_true")
    ap.add_argument("--n-per-kind", type=int, default=100)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    lines: list[str] = [f"# bench/engine.py  {time.strftime('%Y-%m-%d %H:%M:%S')}"]

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    from selfimprove_arith.student.profile import per_kind_pass_at_k
    from selfimprove_arith.student.shipped import shipped_hash
    from selfimprove.rl.student import resolve_model
    from selfimprove_arith.student.warmup import recipe_hash

    cached = shipped_hash("selfimprove/tiny-arith") == recipe_hash()
    t0 = time.time()
    path = resolve_model("selfimprove/tiny-arith", log=lambda s: print(s, flush=True))
    say(f"student: {path}  ({'shipped' if cached else f'stale shipped student: warm-up built in {time.time() - t0:.1f}s'})")

    if not args.skip_pass_at_k:
        t0 = time.time()
        res = per_kind_pass_at_k("selfimprove/tiny-arith", k=16, n_per_kind=args.n_per_kind)
        say(f"\nbase student per kind ({args.n_per_kind} fresh problems each, T=1.0 for pass@k; {time.time() - t0:.0f}s)")
        say(f"{'kind':12s} {'greedy':>7s} {'pass@1':>7s} {'pass@16':>8s}")
        for kind, v in res.items():
            say(f"{kind:12s} {v['greedy']:7.2f} {v['pass@1']:7.2f} {v['pass@16']:8.2f}")
        mean = {k: sum(v[k] for v in res.values()) / len(res) for k in ("greedy", "pass@1", "pass@16")}
        say(f"{'mean':12s} {mean['greedy']:7.2f} {mean['pass@1']:7.2f} {mean['pass@16']:8.2f}")

    out = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    cmd = [sys.executable, "-m", "selfimprove.rl.cli", "@", str(REPO / "configs/selfimprove-arith/rl.toml"),
           "--max-steps", str(args.steps), "--orchestrator.eval.interval", str(args.steps),
           "--orchestrator.eval.num-examples", "1000", "--output-dir", str(out)]
    say(f"\ndemo run: {' '.join(cmd[2:])}")
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
    if proc.returncode != 0:
        say(f"FAILED rc={proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
        raise SystemExit(1)
    olog = (out / "logs" / "orchestrator.log").read_text()
    times = [float(m) for m in re.findall(r"Step \d+ \| Time: ([\d.]+)s", olog)]
    thr = [float(m) for m in re.findall(r"Throughput: ([\d.]+) rollouts/s", olog)]
    evals = [float(m) for m in re.findall(r"Evaluated .* Time: ([\d.]+)s", olog)]
    rewards = [float(m) for m in re.findall(r"Step \d+ \| .*Reward: ([\d.]+)", olog)]
    zero = [float(m) for m in re.findall(r"Zero-var groups: ([\d.]+)%", olog)]
    say(f"wall time (incl. start-up, {len(evals)} evals): {wall:.1f}s   target <= 180s")
    say(f"s/step: mean {sum(times) / len(times):.2f}  (256 rollouts/step)")
    say(f"generation throughput: {sum(thr) / len(thr):.0f} rollouts/s (sampling + scoring)")
    say(f"eval seconds for 1000 examples (greedy): {', '.join(f'{e:.1f}' for e in evals)}")
    say(f"peak RSS of the engine process: {rss:.2f} GiB   target <= 4 GiB")
    k = max(1, len(rewards) // 10)
    say(f"train reward: first {k} steps {sum(rewards[:k]) / k:.3f} -> last {k} steps {sum(rewards[-k:]) / k:.3f}; "
        f"zero-variance groups {sum(zero[:k]) / k:.0f}% -> {sum(zero[-k:]) / k:.0f}%")

    a = eval_correct(out / "run_default" / "rollouts" / "step_0" / "eval_rollouts.jsonl")
    b = eval_correct(out / "run_default" / "rollouts" / f"step_{args.steps}" / "eval_rollouts.jsonl")
    for name, d in (("step 0", a), (f"step {args.steps}", b)):
        n, s = len(d), sum(d.values())
        lo, hi = wilson_interval(s, n)
        say(f"eval accuracy {name:>8s}: {s / n:.3f}  (95% Wilson [{lo:.3f}, {hi:.3f}], n={n})")
    mc = mcnemar_exact(a, b)
    say(f"paired McNemar step 0 vs step {args.steps}: {mc}")
    say(f"(output kept in {out})")
    save("engine.txt", "\n".join(lines))


if __name__ == "__main__":
    main()
