"""Optional Weights & Biases logging of finished arms: one run per arm, then a summary run.

wandb is an optional extra (`pip install selfimprove[wandb]`). Logging is a
courtesy, never a reason for a phase to fail: every outcome, success or not,
comes back as a one-line note for the caller to print. Without WANDB_API_KEY
the runs are written offline (upload later with `wandb sync <dir>`); an
explicit WANDB_MODE (e.g. "disabled") wins. Set WANDB_DIR to choose where.
"""

from __future__ import annotations

import os

NOT_INSTALLED = "wandb not installed; pip install selfimprove[wandb]"


def _metrics(arm: dict) -> dict:
    """Numeric fields of an arm record; the CI as two scalars so W&B can chart it."""
    out = {k: v for k, v in arm.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    ci = arm.get("acc_ci95")
    if ci is not None:
        out["acc_ci95_lo"], out["acc_ci95_hi"] = float(ci[0]), float(ci[1])
    return out


def _cell(v: object) -> object:
    # wandb.Table wants scalars per column; a CI tuple or list becomes its text.
    return v if v is None or isinstance(v, (str, int, float, bool)) else str(v)


def log_arms_to_wandb(
    project: str, run_name_prefix: str, arms: list[dict], config: dict, table_rows: list[dict]
) -> str:
    """Log each arm (IterRecord/EvalSummary dict) as a run, then the final table; return a note."""
    try:
        import wandb
    except ImportError:
        return NOT_INSTALLED
    mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
    try:
        # wandb's per-run banners go to stderr; our one-line note says what matters.
        settings = wandb.Settings(silent=True)
        for arm in arms:
            labels = {k: v for k, v in arm.items() if isinstance(v, str)}  # arm, eval_split, source, ...
            run = wandb.init(project=project, name=f"{run_name_prefix}-{arm['arm']}", group=run_name_prefix,
                             job_type="arm", config={**config, **labels}, mode=mode, settings=settings)
            try:
                run.log(_metrics(arm))
            finally:
                run.finish()
        columns = list(dict.fromkeys(k for row in table_rows for k in row))
        run = wandb.init(project=project, name=f"{run_name_prefix}-summary", group=run_name_prefix,
                         job_type="summary", config=dict(config), mode=mode, settings=settings)
        try:
            table = wandb.Table(columns=columns, data=[[_cell(r.get(c)) for c in columns] for r in table_rows])
            run.log({"final_table": table})
        finally:
            run.finish()
    except Exception as e:  # wandb-side trouble must not fail a phase whose numbers are on disk
        first_line = (str(e).splitlines() or [""])[0]
        return f"wandb logging failed ({type(e).__name__}: {first_line}); the results on disk are unaffected"
    note = f"wandb: logged {len(arms)} arm run(s) + summary to project {project!r} ({mode})"
    if mode == "offline":
        note += f"; upload with: wandb sync {os.environ.get('WANDB_DIR') or '.'}/wandb/offline-run-*"
    return note
