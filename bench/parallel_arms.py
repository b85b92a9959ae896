"""Benchmark: engine runs one after another vs two at once (why `compare --parallel` defaults to 2 on the
CPU engine). Not a test.

    .venv/bin/python bench/parallel_arms.py              # 20 steps per run, ~3 min on 2 cores
    .venv/bin/python bench/parallel_arms.py --steps 50

Runs `selfimprove-rl @ configs/selfimprove-arith/rl.toml` (the demo's batch: 16 prompts x 16
rollouts, eval on 1000 examples at step 0 and at the end) with the default thread count:
1. run A alone, then run B alone (B = the same config with orchestrator.seed + 1);
2. runs A and B at the same time.
Prints both wall times, the speed-up, and whether each run's final weights are bit-identical
between the two schedules (they should be: a run's numbers depend on its seed and thread count,
never on what else the machine runs). Writes bench/out/parallel_arms.txt.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see selfimprove/rl/cli.py
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _out import save  # noqa: E402  (bench/_out.py)

CONFIG = REPO / "configs/selfimprove-arith/rl.toml"


def command(out: Path, steps: int, seed: int) -> list[str]:
    return [sys.executable, "-m", "selfimprove.rl.cli", "@", str(CONFIG), "--max-steps", str(steps),
            "--orchestrator.seed", str(seed), "--output-dir", str(out)]


def start(out: Path, steps: int, seed: int) -> subprocess.Popen:
    with open(out.with_suffix(".log"), "w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(command(out, steps, seed), stdout=log, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, out: Path) -> None:
    if proc.wait() != 0:
        sys.exit(f"engine run {out} failed (rc {proc.returncode}); see {out.with_suffix('.log')}")


def weights_digest(out: Path, steps: int) -> str:
    return hashlib.sha256((out / "weights" / f"step_{steps}" / "model.safetensors").read_bytes()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    lines = [f"bench/parallel_arms.py: {args.steps} steps per run, 16 prompts x 16 rollouts, eval on 1000 examples "
             f"at step 0 and {args.steps}; {os.cpu_count()} cores, default torch threads; runs in {tmp}"]
    print(lines[0], flush=True)

    t0 = time.perf_counter()
    for name, seed in (("serial_a", 0), ("serial_b", 1)):
        finish(start(tmp / name, args.steps, seed), tmp / name)
    serial_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    procs = {name: start(tmp / name, args.steps, seed) for name, seed in (("parallel_a", 0), ("parallel_b", 1))}
    for name, proc in procs.items():
        finish(proc, tmp / name)
    parallel_s = time.perf_counter() - t0

    same = {x: weights_digest(tmp / f"serial_{x}", args.steps) == weights_digest(tmp / f"parallel_{x}", args.steps)
            for x in ("a", "b")}
    lines += [
        f"one after another: {serial_s:.1f} s for 2 runs ({serial_s / 2:.1f} s per run)",
        f"two at once:       {parallel_s:.1f} s for 2 runs",
        f"speed-up: {serial_s / parallel_s:.2f}x (one measurement; the host's load moves it)",
        f"final weights bit-identical between the schedules: run A {same['a']}, run B {same['b']}",
    ]
    print("\n".join(lines[1:]))
    print(f"wrote {save('parallel_arms.txt', chr(10).join(lines))}")


if __name__ == "__main__":
    main()
