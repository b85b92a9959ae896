"""Job runner benchmark: completion-detection latency and the watcher's CPU use while waiting.

    .venv/bin/python bench/latency.py                 # 10 trials per path, 30 s CPU windows
    .venv/bin/python bench/latency.py --trials 3 --cpu-seconds 10

Uses the fake `rl` (tests/fakes/fake_rl.py), which writes time.time() to a stamp file
as its very last action. Latency = the moment `engines.jobs.watch` returns minus that
stamp, for a job that succeeds (final eval written, then the engine exits 1 s later)
and for one that crashes; "phase" is the whole `selfimprove baseline --json` CLI
(job end -> aggregation, metrics, scratchpad -> process exit). CPU = user+sys seconds of THIS process (the watcher; the job
is a child and counts in RUSAGE_CHILDREN, not here) while watching a job that hangs,
quiet (--json) and with the rich progress bar. Target: latency < 5 s, negligible CPU.
Writes bench/out/latency.json (git-ignored) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from _out import save  # bench/_out.py (this directory is sys.path[0])

from selfimprove.engines.jobs import JobExpectation, launch, watch  # noqa: E402
from selfimprove.rundir import ArmDir  # noqa: E402

FAKE = REPO / "tests" / "fakes" / "fake_rl.py"
N_EVAL, STEPS = 50, 3


def _cmd(out: Path) -> list[str]:
    cfg = out.parent / "fake.toml"
    cfg.write_text(f"[trainer]\n[orchestrator]\n[[orchestrator.eval.env]]\nid = 'x'\nnum_examples = {N_EVAL}\n")
    return [sys.executable, str(FAKE), "@", str(cfg), "--max-steps", str(STEPS), "--output-dir", str(out)]


def _with_env(extra: dict[str, str]):
    old = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    return old


def _restore(old: dict) -> None:
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def latency_trial(root: Path, i: int, path: str, poll_s: float) -> float:
    arm = ArmDir(root, f"{path}_{i}")
    arm.dir.mkdir(parents=True)
    stamp = arm.dir / "end_stamp"
    env = {"FAKE_RL_END_STAMP": str(stamp), "FAKE_RL_STEP_S": "0.05"}
    env.update({"FAKE_RL_EXIT_DELAY": "1.0"} if path == "success" else {"FAKE_RL_CRASH_AFTER": "2"})
    old = _with_env(env)
    try:
        launch(arm, _cmd(arm.prime_out), JobExpectation(max_steps=STEPS, num_examples=N_EVAL))
        res = watch(arm, progress=False, poll_s=poll_s)
        done = time.time()
    finally:
        _restore(old)
    expected = "succeeded" if path == "success" else "failed"
    if res.status != expected:
        raise SystemExit(f"trial {path} {i}: status {res.status}, expected {expected}")
    return done - float(stamp.read_text())


def phase_trial(root: Path, i: int) -> float:
    """Job end -> `selfimprove baseline` process exit (aggregation, bookkeeping and interpreter exit included)."""
    from selfimprove.models import HubEnv, RewardFunc
    from selfimprove.phases.bootstrap import BootstrapOptions, bootstrap

    rd = bootstrap(BootstrapOptions(dataset="selfimprove-arith", model="selfimprove/tiny-arith", budget="15m",
                                    runs_dir=str(root / f"runs_{i}"), steps_per_run=STEPS, batch_size=32,
                                    rollouts_per_example=4, allow_small_batch=True, eval_examples=N_EVAL))
    rd.write_hub_env(HubEnv(env_id="selfimprove-arith", module="m", source="local", env_class="SingleTurnEnv",
                            parser_class="XMLParser", rubric_class="Rubric", rubric_funcs=[RewardFunc(name="r", weight=1.0)],
                            system_prompt=None, answer_format_instruction=None, train_size=None, eval_size=None))
    stamp = root / f"phase_stamp_{i}"
    env = {**os.environ, "SELFIMPROVE_RL_CMD": f"{sys.executable} {FAKE}", "FAKE_RL_END_STAMP": str(stamp),
           "FAKE_RL_STEP_S": "0.05", "FAKE_RL_EXIT_DELAY": "1.0"}
    cli = [sys.executable, "-c", "from selfimprove.cli import main; main()", "baseline", "--run-dir", str(rd.root), "--json"]
    proc = subprocess.run(cli, env=env, capture_output=True, text=True)
    done = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"phase trial {i}: baseline exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return done - float(stamp.read_text())


def cpu_window(root: Path, seconds: float, progress: bool, poll_s: float) -> dict:
    arm = ArmDir(root, f"cpu_{'bar' if progress else 'quiet'}")
    arm.dir.mkdir(parents=True)
    old = _with_env({"FAKE_RL_HANG": "1", "FAKE_RL_STEP_S": "0.01"})
    try:
        launch(arm, _cmd(arm.prime_out), JobExpectation(max_steps=STEPS, num_examples=N_EVAL, cap_hours=seconds / 3600))
        time.sleep(0.5)  # let the fake reach its hang
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        res = watch(arm, progress=progress, poll_s=poll_s)
        r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    finally:
        _restore(old)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"progress_bar": progress, "wall_s": round(t1 - t0, 2), "cpu_s": round(cpu, 3),
            "cpu_pct_of_one_core": round(100 * cpu / (t1 - t0), 3), "status": res.status}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10, help="latency trials per path (success, crash)")
    ap.add_argument("--cpu-seconds", type=float, default=30.0, help="length of each CPU measurement window")
    ap.add_argument("--poll", type=float, default=0.5, help="watch() poll interval, seconds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="selfimprove-bench-") as tmp:
        root = Path(tmp)
        lat = {p: [latency_trial(root, i, p, args.poll) for i in range(args.trials)] for p in ("success", "crash")}
        lat["phase"] = [phase_trial(root, i) for i in range(args.trials)]
        cpu = [cpu_window(root, args.cpu_seconds, progress, args.poll) for progress in (False, True)]
    summary = {
        "poll_s": args.poll,
        "latency_s": {p: {"n": len(v), "mean": round(statistics.mean(v), 3), "median": round(statistics.median(v), 3),
                          "max": round(max(v), 3), "min": round(min(v), 3)} for p, v in lat.items()},
        "cpu": cpu,
        "target": "latency < 5 s; CPU negligible",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "ts": time.time(),
    }
    written = save("latency.json", json.dumps(summary, indent=2))
    print(f"completion-detection latency (job exit -> watch returns / phase exits), poll {args.poll} s, {args.trials} trials each:")
    for p, s in summary["latency_s"].items():
        print(f"  {p:8s} mean {s['mean']:.3f} s  median {s['median']:.3f} s  max {s['max']:.3f} s")
    for c in cpu:
        label = "with progress bar" if c["progress_bar"] else "quiet (--json)   "
        print(f"  watcher CPU {label}: {c['cpu_s']:.3f} s over {c['wall_s']:.1f} s = {c['cpu_pct_of_one_core']:.2f}% of one core")
    print(f"wrote {written}")


if __name__ == "__main__":
    main()
