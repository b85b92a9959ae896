"""`selfimprove status`: read-only dashboard of a run."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..phases.status import SHOWN_MISSING, missing_text, run_status
from ..rundir import RunDir
from ..ui import fmt_duration, out
from ._common import JsonOpt, RunDirOpt, cli_errors, print_json


SIGNAL_TEXT = {
    "unchecked": "not checked yet (baseline checks it)",
    "yes": "yes (iter_0's rewards spread: RL has something to learn from)",
    "none": "NONE: baseline stopped (exit 4); the student gets no reward signal on this env",
    "none-allowed": "NONE (continued with --allow-no-signal)",
}


def budget_text(s: dict) -> str:
    """The --budget clock in one phrase: it caps Phase 3 only and starts at the first iterate."""
    budget = fmt_duration(s["budget_s"])
    if s["budget_clock"] == "not_started":
        return (f"budget {budget}: clock not started (Phase 3 only; it starts at the first `selfimprove iterate`, "
                "so bootstrap, introspect and baseline are not charged)")
    if s["budget_clock"] == "stopped":
        return f"budget {budget} (Phase 3 only): clock stopped, Phase 3 is over"
    return (f"budget (Phase 3 only): {fmt_duration(s['budget_used_s'])} used of {budget}, "
            f"{fmt_duration(s['budget_left_s'])} left")


@cli_errors
def command(run_dir: RunDirOpt, json_: JsonOpt = False) -> None:
    """Show where a run stands: phase reached, status, budget, finished arms, next command.

    Read-only and lock-free: safe to run while a phase is training.

    Example usage:

        selfimprove status --run-dir runs/selfimprove-arith-2026-11-29T120000Z
    """
    s = run_status(RunDir(run_dir))
    if json_:
        print_json(s)
        return
    out.print(f"[bold]{s['dataset']}[/bold]  {s['run_dir']}")
    out.print(f"env {s['hub_id']} | student {s['model']} | engine {s['engine']}")
    bits = [f"ended: {s['end_reason']}"] if s["end_reason"] and s["end_reason"] != s["status"] else []
    bits += [s["reason"]] if s["reason"] else []
    reason = f" ({escape('; '.join(bits))})" if bits else ""
    out.print(f"status [bold]{s['status']}[/bold]{reason} | phase reached: {s['phase_reached']}")
    out.print(f"learning signal: {SIGNAL_TEXT[s['learning_signal']]}", markup=False)
    if s["teacher"]:
        tokens = ", ".join(f"{it} {n}" for it, n in s["teacher_tokens"].items())
        out.print(f"teacher {s['teacher']}" + (f" | tokens (prompt + completion): {tokens}" if tokens else ""),
                  markup=False)
    if s["not_a_result"]:
        out.print(f"[bold red]{escape(s['not_a_result'])}[/bold red]")
    out.print(f"{budget_text(s)} | run elapsed {fmt_duration(s['elapsed_s'])} | "
              f"iterations started: {s['iterations_started'] or 'none'} of max {s['max_iters']}", markup=False)
    if s["arms"]:
        t = Table(title="finished arms (eval on the real env)" + (" - NOT A RESULT" if s["not_a_result"] else ""))
        for col in ("arm", "rows", "eval_acc", "95% CI", "n_eval", "reward mean", "step"):
            t.add_column(col)
        for a in s["arms"]:
            lo, hi = a["acc_ci95"]
            t.add_row(a["arm"], str(a["rows"] or "real"), f"{a['eval_acc']:.3f}", f"[{lo:.3f}, {hi:.3f}]",
                      str(a["n_eval"]), f"{a['eval_reward_mean']:.3f}", str(a["final_step"]))
        out.print(t)
    if s["plot"]:
        out.print(f"plot: {s['plot']}")
    for j in s["jobs"]:
        if not j["live"]:  # an ended job is in the arm table (or in its phase's error): only the live ones here
            continue
        step = f"step {j['step'] if j['step'] is not None else '-'}/{j['max_steps']}"
        if j["kind"] == "local":
            out.print(f"live job {j['arm']}: pid {j['pid']}, {step}; log {j['log']} (stop it: selfimprove cancel "
                      f"--run-dir {s['run_dir']} --arm {j['arm']})", markup=False)
        else:
            reason = f" ({j['reason']})" if j["reason"] else ""
            out.print(f"SLURM job {j['job_id']} {j['arm']}: {j['state']}{reason}, {step}; log {j['log']}", markup=False)
    for note in s["job_notes"]:
        out.print(note, markup=False)
    missing = s["phase4_missing"]
    for m in missing[:SHOWN_MISSING]:
        out.print(f"[red]missing Phase 4 arm[/red] {m['arm']}: {escape(m['why'])}; fix: {escape(m['fix'])}")
    if len(missing) > SHOWN_MISSING:  # bounded: --seeds N misses up to 3N arms
        out.print(f"[red]missing Phase 4 arms[/red] {escape(missing_text(missing[SHOWN_MISSING:], why=False))} "
                  f"(status --json lists them all)")
    out.print(f"next: {s['next']}")
