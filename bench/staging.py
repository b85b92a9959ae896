"""Benchmark: staging iter_0's checkpoint trees into an iteration, hard links vs `cp -r`.

    .venv/bin/python bench/staging.py [--gib 2]

Builds a synthetic iter_0 output tree of about --gib GiB (random bytes, so no
filesystem can dedupe or sparse-copy it), stages it with
`selfimprove.phases.staging.stage_checkpoints` (hard links for the read-only
trees, a real copy of the small broadcast tree), then copies the same trees
with `cp -r`, and prints time and bytes written for each. Output also goes to
bench/out/staging.txt.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _out import save  # bench/_out.py (this directory is sys.path[0])

from selfimprove.phases.staging import stage_checkpoints
from selfimprove.rundir import ArmDir

CHUNK = 64 << 20


def write_random(path: Path, nbytes: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        left = nbytes
        while left:
            n = min(CHUNK, left)
            f.write(os.urandom(n))
            left -= n


def disk_used(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2.0)
    args = ap.parse_args()
    total = int(args.gib * (1 << 30))
    root = Path(tempfile.mkdtemp(prefix="stage-bench-", dir=os.environ.get("TMPDIR", "/tmp")))
    try:
        src, step = ArmDir(root, "iter_0"), 100
        # Proportions of a real run: trainer state ~ 2/3 (optimizer moments), weights ~ 1/3,
        # a tiny orchestrator checkpoint and a broadcast the size of the weights' shard.
        write_random(src.trainer_ckpt(step) / "trainer" / "__0_0.distcp", total * 6 // 10)
        write_random(src.weights(step) / "model.safetensors", total * 3 // 10)
        write_random(src.orchestrator_ckpt(step) / "orchestrator" / "progress.pt", 1 << 20)
        write_random(src.broadcast(step) / "model.safetensors", total - total * 9 // 10 - (1 << 20))
        (src.broadcast(step) / "STABLE").write_text("")
        os.sync()

        t0 = time.perf_counter()
        record = stage_checkpoints(src, ArmDir(root, "iter_1"), step)
        os.sync()
        t_link = time.perf_counter() - t0
        copied_bytes = sum(t["bytes"] for t in record["trees"] if t["mode"] == "copy")
        linked_bytes = sum(t["bytes"] for t in record["trees"] if t["mode"] == "hardlink")

        dst = ArmDir(root, "iter_cp")
        t0 = time.perf_counter()
        for tree in ("checkpoints", "weights", "run_default"):
            (dst.prime_out).mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-r", str(src.prime_out / tree), str(dst.prime_out / tree)], check=True)
        os.sync()
        t_cp = time.perf_counter() - t0

        lines = [
            f"synthetic iter_0 tree: {disk_used(src.prime_out) / (1 << 30):.2f} GiB ({root})",
            f"stage_checkpoints (hard links + copy of broadcasts): {t_link:.3f} s; "
            f"bytes written {copied_bytes / (1 << 20):.1f} MiB; linked {linked_bytes / (1 << 30):.2f} GiB",
            f"cp -r of the same trees: {t_cp:.3f} s; bytes written {disk_used(dst.prime_out) / (1 << 30):.2f} GiB",
            f"ratio cp -r / staging: time {t_cp / max(t_link, 1e-9):.1f}x, bytes "
            f"{disk_used(dst.prime_out) / max(copied_bytes, 1):.0f}x",
        ]
        text = "\n".join(lines)
        print(text)
        save("staging.txt", text)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
