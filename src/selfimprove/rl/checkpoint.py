"""The output tree, exactly prime-rl's layout (`rundir.OutputLayout`), and save/resume.

    <out>/configs/{trainer,orchestrator}.toml            resolved configs
    <out>/logs/{trainer,orchestrator}.log                "Step N | ..." lines
    <out>/weights/step_N/                                HF save_pretrained (+ tokenizer files)
    <out>/checkpoints/step_N/trainer/{__0_0.distcp, .metadata}
    <out>/run_default/checkpoints/step_N/orchestrator/progress.pt
    <out>/run_default/broadcasts/step_N/{model.safetensors, STABLE}
    <out>/run_default/rollouts/step_N/{train_rollouts.jsonl, eval_rollouts.jsonl}

`__0_0.distcp` is a plain `torch.save` of {model, optimizer, python/torch RNG
states, step} under the file name torch.distributed.checkpoint gives rank 0
(the name other tools check for); `.metadata` says so in JSON. Every file is
written atomically (temp + rename); a step directory is built under a temporary
name and renamed into place, and STABLE / READY markers are written last, so a
kill -9 leaves either a whole step or none.

Resume at N needs `checkpoints/step_N/trainer`, `run_default/checkpoints/step_N/orchestrator`
and `run_default/broadcasts/step_N/STABLE` (prime-rl's three trees); weights/ is not needed.

With a prime-rl >= 0.8 config (`Layout(out, MAIN_LAYOUT)`) the tree is main's (559b44772,
utils/pathing.py and monitors/file.py): no `run_default/`, both checkpoint sides under
`checkpoints/step_N/{trainer,orchestrator}`, `broadcasts/step_N`, episodes in
`rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl` holding verifiers v1
`Episode.to_record()` rows (`rl/episodes.py`), and one metrics row per step in `metrics.jsonl`.
Main keeps its own rules there too:
- no `weights/step_N`: main writes DCP checkpoints only (commit 29e422276 removed HF weights);
- the orchestrator checkpoint is one `progress.pt` holding {"progress", "train_source": {"rng",
  "envs"}} (orchestrator/ckpt.py:30-46, train_source.py:66-82), and a resume needs
  `checkpoints/step_N/{trainer,orchestrator}` only: the trainer broadcasts the incoming policy
  (v{N}) itself at start-up (trainer/rl/train.py:270-277), so no broadcast has to exist;
- the filesystem broadcast writes `broadcasts/step_N/{model.safetensors, STABLE}` for v0 (or
  v{resume}) at start-up and for every step, the final one included (train.py:575-598), and
  deletes step N-2 unless it falls on the checkpoint interval (trainer/utils.py:349-363).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..errors import ConfigError
from ..rundir import SEED_LAYOUT, OutputLayout, atomic_write_text
from ..stack.toml_paths import CONFIG_ERROR
from .student import save_student

TRAINER_FILE = "__0_0.distcp"


class Layout:
    def __init__(self, out: Path, layout: OutputLayout = SEED_LAYOUT):
        self.out = Path(out)
        self.layout = layout  # prime-rl 09e297743's tree (SEED_LAYOUT) or main 559b44772's (MAIN_LAYOUT)
        self.run_root = self.out / layout.run_subdir

    def weights(self, n: int) -> Path:  # the seed dialect's HF weights (main writes none)
        return self.out / "weights" / f"step_{n}"

    def trainer(self, n: int) -> Path:
        return self.out / "checkpoints" / f"step_{n}" / "trainer"

    def orchestrator(self, n: int) -> Path:
        return self.run_root / "checkpoints" / f"step_{n}" / "orchestrator"

    def broadcast(self, n: int) -> Path:
        return self.run_root / "broadcasts" / f"step_{n}"

    def rollouts(self, n: int) -> Path:
        return self.run_root / "rollouts" / f"step_{n}"

    def train_file(self, n: int) -> Path:  # traces: the all/ subset (effective/ sits beside it)
        return self.rollouts(n) / self.layout.train_rollouts

    def eval_file(self, n: int) -> Path:
        return self.rollouts(n) / self.layout.eval_rollouts

    @property
    def metrics_file(self) -> Path | None:
        """main's local metrics JSONL (monitors.file); the seed dialect's layout has none."""
        return self.out / self.layout.metrics_file if self.layout.metrics_file else None

    @property
    def logs(self) -> Path:
        return self.out / "logs"

    @property
    def configs(self) -> Path:
        return self.out / "configs"

    def ckpt_steps(self) -> list[int]:
        return _steps(self.out / "checkpoints")

    def complete_steps(self) -> list[int]:
        """Steps that have all three trees a resume needs."""
        return [n for n in self.ckpt_steps() if not self.missing_for_resume(n)]

    @property
    def main(self) -> bool:
        """prime-rl main's rules (no HF weights, progress.pt, resume without a broadcast)."""
        return not self.layout.hf_weights

    def missing_for_resume(self, n: int, root: Path | None = None) -> list[Path]:
        """What a resume from step n lacks. Main needs the trainer and orchestrator checkpoints only (its
        trainer re-broadcasts v{n} at start-up); the seed dialect also needs the step's STABLE broadcast.
        `root`: another run's `checkpoints/step_n` (main's resume.dir)."""
        trainer = (root / "trainer") if root else self.trainer(n)
        orch = (root / "orchestrator") if root else self.orchestrator(n)
        need = [trainer / TRAINER_FILE, orch / "progress.pt"]
        if not self.main:
            need.append(self.broadcast(n) / "STABLE")
        return [p for p in need if not p.is_file()]


def _steps(root: Path) -> list[int]:
    if not root.is_dir():
        return []
    out = [int(m.group(1)) for p in root.iterdir() if (m := re.fullmatch(r"step_(\d+)", p.name))]
    return sorted(out)


# ------------------------------------------------------------------ atomic dirs


def _atomic_dir(final: Path, fill) -> None:
    """Build a directory under a temp name with `fill(tmp)`, then swap it in for `final`."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        fill(tmp)
        if final.exists():
            old = final.parent / f".{final.name}.old.{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_jsonl(path: Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


# ------------------------------------------------------------------ save


def save_weights(lay: Layout, n: int, model, tok) -> None:
    _atomic_dir(lay.weights(n), lambda d: save_student(model, tok, d))


def save_broadcast(lay: Layout, n: int, model) -> None:
    def fill(d: Path) -> None:
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
        save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})
        (d / "STABLE").write_text("")  # marker last

    _atomic_dir(lay.broadcast(n), fill)


def save_trainer(lay: Layout, n: int, model, opt) -> None:
    def fill(d: Path) -> None:
        torch.save({
            "step": n,
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "python_rng": random.getstate(),
            "torch_rng": torch.get_rng_state(),
        }, d / TRAINER_FILE)
        (d / ".metadata").write_text(json.dumps({"format": "torch.save", "files": [TRAINER_FILE], "step": n}) + "\n")

    _atomic_dir(lay.trainer(n), fill)


def save_orchestrator(lay: Layout, n: int, progress: dict, state: dict) -> None:
    """`progress` = {"cursors": {source name: {"epoch", "pos"}}, "seed"}; `state` = the RNG states.

    One progress.pt, as both prime-rl versions name it. Main's shape (orchestrator/ckpt.py:40-46):
    {"progress": {"step"}, "train_source": {"rng", "envs": {source name: its state}}}. The seed dialect's
    (09e297743 orchestrator/ckpt.py:41-43) is {"progress": ...}: the cursors and RNG states ride in it
    (the seed dialect's buffer/ dir, which holds its async rollout buffer, has no counterpart here)."""
    def fill(d: Path) -> None:
        if lay.main:
            blob = {"progress": {"step": n, "seed": progress.get("seed")},
                    "train_source": {"rng": state, "envs": dict(progress["cursors"])}}
        else:
            blob = {"progress": {"step": n, **progress, "rng": state}}
        torch.save(blob, d / "progress.pt")

    _atomic_dir(lay.orchestrator(n), fill)


def prune(lay: Layout, keep_last: int | None, keep_interval: int | None, protect: set[int]) -> None:
    """Delete old checkpoint steps: keep the last `keep_last` and every multiple of `keep_interval`."""
    if not keep_last:
        return
    steps = lay.ckpt_steps()
    keep = set(steps[-keep_last:]) | protect
    if keep_interval:
        keep |= {s for s in steps if s % keep_interval == 0}
    # main's checkpoint cleaning removes checkpoint dirs only; its broadcasts have their own rule (prune_broadcasts)
    extra = [] if lay.main else [lay.weights, lay.broadcast]
    for s in steps:
        if s not in keep:
            for p in (lay.out / "checkpoints" / f"step_{s}", lay.orchestrator(s).parent, *(f(s) for f in extra)):
                shutil.rmtree(p, ignore_errors=True)


def prune_broadcasts(lay: Layout, current: int, ckpt_interval: int | None = None) -> None:
    """The seed dialect: keep broadcasts of checkpoint steps (its resume needs them) and of the current step only.
    Main (trainer/utils.py:349-363 maybe_clean): delete step current-2 unless it is a multiple of the
    checkpoint interval; so step_{max-1} and step_{max} always remain."""
    if lay.main:
        old = max(current - 2, 0)
        if not (ckpt_interval and old % ckpt_interval == 0):
            shutil.rmtree(lay.broadcast(old), ignore_errors=True)
        return
    keep = set(lay.ckpt_steps()) | {current}
    for s in _steps(lay.run_root / "broadcasts"):
        if s not in keep:
            shutil.rmtree(lay.broadcast(s), ignore_errors=True)


# ------------------------------------------------------------------ resume


def sweep_temp(lay: Layout) -> None:
    """Remove temp files/dirs a killed run left behind (they never hold a finished artefact)."""
    if not lay.out.is_dir():
        return
    for p in sorted(lay.out.rglob(".*"), key=lambda p: len(p.parts), reverse=True):
        if re.match(r"^\.(step_\d+\.|.*\.tmp$|step_\d+\.old\.)", p.name) or re.match(r"^\..*\.tmp$", p.name):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


def check_output_dir(lay: Layout, resume_step: int | None, max_steps: int, clean: bool) -> int | None:
    """Apply prime-rl's start-up rules; returns the step to resume from (None = fresh)."""
    sweep_temp(lay)
    if resume_step is None:
        if lay.ckpt_steps():
            if not clean:
                raise ConfigError(
                    f"{CONFIG_ERROR}: output dir {lay.out} already holds checkpoints ({lay.out / 'checkpoints'}); "
                    + ("resume with --resume.step N (or --resume), or pass --clean to delete it and start over" if lay.main
                       else "resume with --ckpt.resume-step N, or pass --clean-output-dir to delete it and start over")
                )
        if clean and lay.out.exists():
            shutil.rmtree(lay.out)
        return None
    if resume_step == -1:
        steps = lay.complete_steps()
        if not steps:
            raise ConfigError(f"{CONFIG_ERROR}: ckpt.resume_step = -1 but {lay.out / 'checkpoints'} holds no complete checkpoint")
        resume_step = steps[-1]
    if resume_step >= max_steps:
        raise ConfigError(
            f"{CONFIG_ERROR}: ckpt.resume_step = {resume_step} but max_steps = {max_steps}: max_steps is ABSOLUTE; "
            f"set it above the resume step (resuming at max_steps trains nothing)"
        )
    missing = lay.missing_for_resume(resume_step)
    if missing:
        raise ConfigError(f"{CONFIG_ERROR}: cannot resume from step {resume_step}: missing {missing[0]}")
    _clear_steps_past(lay, resume_step)
    return resume_step


def _clear_steps_past(lay: Layout, step: int) -> None:
    """prime-rl cleans the rollout/broadcast step dirs past the resume step on start-up."""
    for root in (lay.run_root / "rollouts", lay.run_root / "broadcasts"):
        for s in _steps(root):
            if s > step:
                shutil.rmtree(root / f"step_{s}", ignore_errors=True)


def fork_step(lay: Layout, resume_dir: Path, max_steps: int) -> int:
    """Main's resume.dir (configs/shared.py:55-72): fork another run's `checkpoints/step_N` into this run.
    Returns N; steps continue at N+1 and max_steps stays absolute (docs/training.md:289-303).
    A relaunch after a crash points resume.dir at this run's own checkpoint, so the output dir may
    hold checkpoints; its rollout and broadcast steps past N are cleared as on any resume."""
    sweep_temp(lay)
    m = re.fullmatch(r"step_(\d+)", Path(resume_dir).name)
    if not m:  # main's own words (ResumeConfig.validate_step_xor_dir)
        raise ConfigError(f"{CONFIG_ERROR}: resume.dir must point at a checkpoint step directory (`.../step_<N>`), "
                          f"got '{resume_dir}'")
    n = int(m.group(1))
    if n >= max_steps:
        raise ConfigError(f"{CONFIG_ERROR}: resume.dir is step {n} but max_steps = {max_steps}: max_steps is ABSOLUTE; "
                          f"set it above the checkpoint's step")
    missing = lay.missing_for_resume(n, root=Path(resume_dir))
    if missing:  # main's orchestrator/ckpt.py:53 and the trainer's DCP load fail the same way
        raise ConfigError(f"{CONFIG_ERROR}: cannot fork resume.dir {resume_dir}: checkpoint not found at {missing[0]}")
    _clear_steps_past(lay, n)
    return n


def load_trainer(lay: Layout, n: int, model, opt, root: Path | None = None) -> None:
    blob = torch.load(((root / "trainer") if root else lay.trainer(n)) / TRAINER_FILE, weights_only=False)
    model.load_state_dict(blob["model"])
    opt.load_state_dict(blob["optimizer"])
    random.setstate(blob["python_rng"])
    torch.set_rng_state(blob["torch_rng"])


def load_orchestrator(lay: Layout, n: int, root: Path | None = None) -> tuple[dict, dict]:
    """(progress as save_orchestrator took it, RNG state); `root`: another run's checkpoints/step_n."""
    d = (root / "orchestrator") if root else lay.orchestrator(n)
    blob = torch.load(d / "progress.pt", weights_only=False)
    if lay.main:
        return {"step": blob["progress"]["step"], "seed": blob["progress"].get("seed"),
                "cursors": blob["train_source"]["envs"]}, blob["train_source"]["rng"]
    progress = dict(blob["progress"])
    return progress, progress.pop("rng")
