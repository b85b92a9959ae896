"""Step 3d's staging (the seed dialect): put iter_0's final-step trees into a resuming run's output dir.

prime-rl main (the v1 dialect) needs none of this: an arm forks iter_0's checkpoint with main's
own [resume] dir (configs/shared.py:55-72), and `check_fork_source` only checks it is whole.

prime-rl looks for the resume step in ITS OWN output dir, so iter_0's trees
must be there. Trees the engine only reads (trainer checkpoint, weights,
orchestrator checkpoint) are hard-linked: no time, no disk, and iter_0's bytes
stay shared. The broadcast tree is rewritten IN PLACE on resume (refs:
prime-rl), so it gets a real copy; a hard link there would let iter_N
overwrite iter_0. Across filesystems (EXDEV) hard links fall back to copies.

Rollouts are deliberately not staged: the orchestrator rewrites
rollouts/step_F/train_rollouts.jsonl on resume.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from pathlib import Path

from ..errors import SelfImproveError
from ..faults import fault_point
from ..rundir import ArmDir, atomic_write_json


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def _stage_tree(src: Path, dst: Path, *, hardlink: bool) -> dict:
    """Replicate `src` at `dst` (built at a temp name, then renamed: all or nothing)."""
    src = src.resolve()  # --init-from iter_0 trees are symlinks to the prior run
    if not src.is_dir():
        raise SelfImproveError(f"{src}: missing; iter_0 has no checkpoint tree to stage (re-run baseline)")
    tmp = dst.with_name(f".{dst.name}.staging")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, tmp, copy_function=_link_or_copy if hardlink else shutil.copy2, symlinks=False)
    if dst.exists():
        shutil.rmtree(dst)
    os.rename(tmp, dst)
    nbytes = sum(p.stat().st_size for p in dst.rglob("*") if p.is_file())
    return {"src": str(src), "dst": str(dst), "mode": "hardlink" if hardlink else "copy", "bytes": nbytes}


def stage_checkpoints(iter0: ArmDir, target: ArmDir, step: int) -> dict:
    """Stage iter_0's step-`step` trees into `target`; writes target/stage.json last."""
    started = time.perf_counter()
    trees = [_stage_tree(iter0.trainer_ckpt(step), target.trainer_ckpt(step), hardlink=True)]
    fault_point("stage")  # one of the four trees staged
    trees += [
        _stage_tree(iter0.weights(step), target.weights(step), hardlink=True),
        _stage_tree(iter0.orchestrator_ckpt(step), target.orchestrator_ckpt(step), hardlink=True),
        _stage_tree(iter0.broadcast(step), target.broadcast(step), hardlink=False),
    ]
    root = iter0.dir.parent  # the run dir: store paths relative to it, so a copied run dir stays whole
    trees = [{**t, "src": os.path.relpath(t["src"], root), "dst": os.path.relpath(t["dst"], root)} for t in trees]
    record = {"step": step, "trees": trees, "seconds": round(time.perf_counter() - started, 3)}
    atomic_write_json(target.dir / "stage.json", record)
    return record


def check_fork_source(iter0: ArmDir, step: int) -> None:
    """prime-rl main forks iter_0 with [resume] dir = its checkpoints/step_F: nothing is staged, but the
    checkpoint must be whole (the trainer's DCP dir and the orchestrator's progress.pt: orchestrator/ckpt.py:53)."""
    ck = iter0.trainer_ckpt(step)
    for need in (ck / "trainer", ck / "orchestrator" / "progress.pt"):
        if not need.exists():
            raise SelfImproveError(f"{need}: missing; iter_0's checkpoint step_{step} is not whole, so no arm can fork "
                                   f"it (re-run baseline with --restart)")


def is_staged(target: ArmDir, step: int) -> bool:
    return (target.dir / "stage.json").is_file() and all(
        p.is_dir()
        for p in (target.trainer_ckpt(step), target.weights(step), target.orchestrator_ckpt(step), target.broadcast(step))
    )
