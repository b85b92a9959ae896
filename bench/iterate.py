"""Benchmark: orchestrator time per iteration OUTSIDE training.

    .venv/bin/python bench/iterate.py

Makes a small real run of selfimprove-arith (the CPU engine, 6 steps of 16x4
rollouts, so the example teacher has real failures to read), lets the teacher
write iteration 1, then times every step of `iterate`: analysis, report gate,
generation, the dataset gate (all rules, round trip on every row through the
real env's parser, dedup, eval overlap), packaging + install + fresh-process
verify, staging + training (reported apart: that is the engine's time), and
the record. Prints a table and writes bench/out/iterate.txt.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from selfimprove.errors import TeacherActionNeeded
    from selfimprove.phases.iterate import iterate
    from selfimprove.rundir import RunDir
    from selfimprove.teacher import load_teacher, make_context

    root = Path(tempfile.mkdtemp(prefix="iterate-bench-"))
    cli = [sys.executable, "-m", "selfimprove"]
    boot = subprocess.run(
        [*cli, "bootstrap", "selfimprove-arith", "--runs-dir", str(root), "--model", "selfimprove/tiny-arith",
         "--max-iters", "2", "--steps-per-run", "6", "--batch-size", "64", "--rollouts-per-example", "4",
         "--allow-small-batch", "--eval-examples", "100", "--budget", "5h"],
        capture_output=True, text=True, check=True,
    )
    rd = RunDir(boot.stdout.strip().splitlines()[-1])
    t0 = time.perf_counter()
    subprocess.run([*cli, "introspect", "--run-dir", str(rd.root)], check=True, capture_output=True)
    t_introspect = time.perf_counter() - t0
    subprocess.run([*cli, "baseline", "--run-dir", str(rd.root), "--json"], check=True, capture_output=True)

    marks: list[tuple[str, float]] = []

    def on_step(n: int, step: str) -> None:
        marks.append((step, time.perf_counter()))

    try:
        iterate(rd, quiet=True, on_step=on_step)
    except TeacherActionNeeded:
        pass
    marks.append(("teacher", time.perf_counter()))
    teacher = load_teacher(str(REPO / "examples" / "arith_teacher.py") + ":ArithTeacher")
    teacher(make_context(rd, 1))
    marks.append(("(teacher done)", time.perf_counter()))
    iterate(rd, quiet=True, on_step=on_step)
    marks.append(("end", time.perf_counter()))

    rows = sum(1 for _ in open(rd.iter(1).dir / "dataset.jsonl"))
    lines = [f"orchestrator time per iteration outside training (selfimprove-arith, {rows} generated rows)",
             f"{'step':<22}{'seconds':>9}"]
    total = 0.0
    for (name, start), (_, end) in zip(marks, marks[1:]):
        if name in ("teacher", "(teacher done)"):
            continue
        lines.append(f"{name:<22}{end - start:>9.2f}")
        total += 0.0 if name == "stage + train" else end - start
    lines.append(f"{'total outside training':<22}{total:>9.2f}")
    lines.append(f"(introspect, once per run: {t_introspect:.2f} s; 'stage + train' is mostly the engine's 6 steps)")
    text = "\n".join(lines)
    print(text)
    save("iterate.txt", text)


if __name__ == "__main__":
    main()
