"""Phase 4, `compare`: is the best iteration's gain real?

BEST_ITER = highest eval_acc among iterations >= 1 (ties: higher
eval_reward_mean, then the earlier iteration). Then three control arms, each
evaluated on the FULL eval split of the real env and each resumable like an
iteration (same packaging, staging, job runner, sealed aggregation):

- Run A (run_a_best_from_iter0): the best dataset replayed from iter_0's
  checkpoint. Does the gain reproduce from the same anchor?
- Run B (run_b_combined_from_base): the real train env (copied verbatim from
  the canonical config) mixed with the best dataset, trained from the base
  model. Does mixing beat either alone?
- Run C (run_c_real_from_iter0, ours, on by default): iter_0 resumed for the
  same number of steps on the REAL train env. The equal-compute control:
  without it, "targeted data helped" is indistinguishable from "more steps helped".

A failing arm is logged in run.json.phase4_errors; the others proceed.
"""

from __future__ import annotations

import shutil
import time
from typing import Any, Callable

from ..errors import SelfImproveError
from ..gates.report import check_weakness_report
from ..models import IterRecord, Phase4Error
from ..rundir import RunDir, atomic_write_json
from ..stack.env_package import count_rows, package_name
from . import iteration_steps as steps
from .arms import canonical_config, fresh_arm_config, train_arm, train_resumed_arm
from ..stack.prime_rl import canonical_train_envs

ARM_LABELS = {
    "run_a": "run_a (best @iter0)",
    "run_b": "run_b (real+best @base)",
    "run_c": "run_c (real @iter0)",
}


def pick_best(iters: list[IterRecord]) -> IterRecord | None:
    """Highest eval_acc among iterations >= 1; ties by eval_reward_mean, then the earlier iteration."""
    candidates = [r for r in iters if r.iter is not None and r.iter >= 1]
    if not candidates:
        return None
    return min(candidates, key=lambda r: (-r.eval_acc, -r.eval_reward_mean, r.iter))


def write_best_iter(rd: RunDir, best: IterRecord) -> dict:
    it = rd.iter(best.iter)
    pkg = package_name(rd.read_run().dataset, f"iter_{best.iter}")
    record = {
        "best_iter": best.iter,
        "eval_acc": best.eval_acc,
        "acc_ci95": list(best.acc_ci95),
        "n_eval": best.n_eval,
        "eval_reward_mean": best.eval_reward_mean,
        "BEST_DATASET": str(it.dir / "dataset.jsonl"),
        "BEST_ENV_DIR": str(it.dir / pkg),
        "BEST_RL_TOML": str(it.rl_toml),
        "rows": best.rows,
    }
    atomic_write_json(rd.best_iter_json, record)
    return record


def _log_arm_error(rd: RunDir, arm: str, error: str) -> None:
    cfg = rd.read_run()
    kept = [e for e in cfg.phase4_errors if e.arm != arm]
    cfg.phase4_errors = kept + [Phase4Error(arm=arm, error=error, ts=time.time())]
    rd.write_run(cfg)


def _clear_arm_error(rd: RunDir, arm: str) -> None:
    cfg = rd.read_run()
    if any(e.arm == arm for e in cfg.phase4_errors):
        cfg.phase4_errors = [e for e in cfg.phase4_errors if e.arm != arm]
        rd.write_run(cfg)


def _package_best(rd: RunDir, arm_key: str, best_iter: int) -> tuple[str, int]:
    """Copy the best dataset into the arm dir and install it under <dataset>_<arm>."""
    cfg = rd.read_run()
    arm = rd.control(arm_key)
    src_it = rd.iter(best_iter)
    arm.dir.mkdir(parents=True, exist_ok=True)
    dataset = arm.dir / "dataset.jsonl"
    if not dataset.is_file():
        shutil.copy2(src_it.dir / "dataset.jsonl", dataset)
    name = package_name(cfg.dataset, arm_key)
    # The best iteration's report passed its gate; read it (for custom rewards) without re-gating.
    report = check_weakness_report(src_it.dir / "weakness_report.md")[0] if (src_it.dir / "weakness_report.md").is_file() else None
    if not steps.package_is_current(arm):
        steps.package(rd, arm, name, report, origin=f"{arm_key}: best dataset of iter_{best_iter}",
                      dataset=dataset, rewards_dir=src_it.dir)
    return name, count_rows(dataset)


def run_arm(rd: RunDir, arm_key: str, best_iter: int, n_eval: int, **job: Any) -> IterRecord:
    cfg = rd.read_run()
    arm = rd.control(arm_key)
    arm.dir.mkdir(parents=True, exist_ok=True)
    f = steps.iter0_final_step(rd)
    real_envs = canonical_train_envs(canonical_config(rd))
    if arm_key == "run_a":
        name, rows = _package_best(rd, arm_key, best_iter)
        train_resumed_arm(rd, cfg, arm, train_envs=[{"id": name}], resume_step=f, wandb_name=arm_key,
                          overrides_file=None, rows=rows, num_examples=n_eval, record_name=arm_key, **job)
    elif arm_key == "run_b":
        name, rows = _package_best(rd, arm_key, best_iter)
        envs = [*real_envs, {"id": name}]
        if all("ratio" in e for e in real_envs):  # prime-rl: ratio on all blocks or none
            envs[-1]["ratio"] = sum(e["ratio"] for e in real_envs) / len(real_envs)
        config = fresh_arm_config(rd, cfg, train_envs=envs, num_examples=n_eval, wandb_name=arm_key)
        train_arm(rd, cfg, arm, config, record_name=arm_key, num_examples=n_eval, rows=rows, **job)
    elif arm_key == "run_c":
        train_resumed_arm(rd, cfg, arm, train_envs=real_envs, resume_step=f, wandb_name=arm_key,
                          overrides_file=None, rows=None, num_examples=n_eval, record_name=arm_key, **job)
    else:
        raise SelfImproveError(f"unknown arm {arm_key}")
    return rd.read_metrics().get(arm_key)


def compare(
    rd: RunDir, *, control: bool = True, restart: bool = False, resume: bool = False, quiet: bool = False,
    cap_hours: float | None = None, on_arm: Callable[[str, str], None] | None = None,
) -> dict:
    """Pick BEST_ITER and run the control arms; returns {"best": ..., "arms": {...}, "errors": {...}}."""
    rd.require()
    note = on_arm or (lambda _a, _e: None)
    with rd.lock("compare"):
        cfg = rd.read_run()
        if cfg.status == "running":
            raise SelfImproveError(
                f"{rd.run_json}: status is still 'running'; Phase 4 starts after Phase 3 ends "
                f"(re-run `selfimprove iterate --run-dir {rd.root}` until the budget or max_iters gate fires)"
            )
        best = pick_best(rd.read_metrics().iters)
        if best is None:
            raise SelfImproveError("no iteration >= 1 finished; there is no best dataset to compare (run iterate first)")
        best_rec = write_best_iter(rd, best)
        hub = rd.read_hub_env()
        n_eval = hub.eval_size or cfg.eval_examples  # Phase 4 evaluates on the full eval split
        arms = ["run_a", "run_b"] + (["run_c"] if control else [])
        done, errors = {}, {}
        for arm_key in arms:
            if rd.read_metrics().get(arm_key) is not None:
                done[arm_key] = rd.read_metrics().get(arm_key).model_dump(mode="json")
                continue
            note(arm_key, "start")
            try:
                rec = run_arm(rd, arm_key, best.iter, n_eval, restart=restart, resume=resume, quiet=quiet, cap_hours=cap_hours)
                done[arm_key] = rec.model_dump(mode="json")
                _clear_arm_error(rd, arm_key)
                note(arm_key, "done")
            except SelfImproveError as e:
                errors[arm_key] = str(e).splitlines()[0]
                _log_arm_error(rd, arm_key, str(e).splitlines()[0])
                note(arm_key, f"failed: {errors[arm_key]}")
        return {"best": best_rec, "n_eval_full_split": n_eval, "arms": done, "errors": errors}
