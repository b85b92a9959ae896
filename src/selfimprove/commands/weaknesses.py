"""`selfimprove weaknesses`: which kinds of train prompt the student solves rarely, over the whole run."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import PhaseOrderError, UsageError
from ..grouping import check_group_by, load_group_fn
from ..phases.analyze import arm_weakness, sealed_train_ids
from ..phases.iterate import current_iteration
from ..phases.order import baseline_done
from ..rundir import RunDir, read_json_object
from ..ui import out
from ..weakness import CLASS_MEANING, CLASSES
from ..weakness_summary import full_summary
from ._common import JsonOpt, RunDirOpt, cli_errors, print_json


def load_stats(rd: RunDir, iteration: int | None, source: str, group_by: str | None) -> dict:
    """The statistics to show: iter_N/weakness_stats.json when it exists and no grouping is asked for,
    else computed now from the rollouts (read-only: nothing is written)."""
    if not baseline_done(rd):
        cfg = rd.read_run()
        fix = (f"run `selfimprove baseline --run-dir {rd.root}` first" if cfg.status == "running" else
               f"this run ended ({cfg.ended_as()}) before iter_0 trained: start a new one with `selfimprove bootstrap`")
        raise PhaseOrderError(f"{rd.iter(0).eval_summary}: missing; weakness statistics need iter_0's train rollouts: "
                              f"{fix}")
    n = iteration if iteration is not None else current_iteration(rd)
    past_the_end = iteration is None and rd.read_run().status != "running" and not rd.iter(n).dir.is_dir()
    return {**_load_stats(rd, n, source, group_by), "past_the_end": past_the_end}


def _load_stats(rd: RunDir, n: int, source: str, group_by: str | None) -> dict:
    if n < 1:
        raise UsageError(f"--iter {n}: iterations count from 1 (the statistics of iter_N read iter_0 and iter_N-1)")
    if source == "previous" and n < 2:
        raise UsageError(f"--source previous: iter_{n} has no previous generated rows (iter_0 is the real env); "
                         "use --source real")
    saved = read_json_object(rd.iter(n).dir / "weakness_stats.json")
    if group_by is None and saved and saved.get(source):
        return {**saved[source], "iteration": n}
    arm = rd.iter(0 if source == "real" else n - 1)
    summary = rd.read_eval_summary(arm) if arm.eval_summary.is_file() else None
    if summary is None:
        last = max(i for i in rd.iter_indices() if rd.iter(i).eval_summary.is_file())  # iter_0 is done here
        lo = 2 if source == "previous" else 1
        cfg = rd.read_run()
        # "iterate until it has" only where iter_{n-1} is the next one iterate trains and Phase 3 may still reach it
        # (--iter 99 said to wait for iter_98, which never comes)
        next_one = n - 1 == last + 1 and n - 1 < cfg.max_iters  # max_iters counts iter_0
        fix = (f"run `selfimprove iterate --run-dir {rd.root}` until it has" if cfg.status == "running" and next_one
               else f"iter_{last} is the newest finished: pick --iter from {lo} to {last + 1}"
               if cfg.status == "running" and last + 1 >= lo
               else f"no iteration has generated rows yet: use --source real, or --iter {lo} once `selfimprove "
                    f"iterate --run-dir {rd.root}` has finished iter_{lo - 1}" if cfg.status == "running"
               else f"the run's Phase 3 is over: pick --iter from {lo} to {last + 1}" if last + 1 >= lo
               else "the run's Phase 3 is over with no generated rows: use --source real")
        raise PhaseOrderError(f"{arm.eval_summary}: missing; iter_{n - 1} has not finished; {fix}")
    label = "the real env's train split" if source == "real" else f"{arm.name}'s generated rows"
    stats = arm_weakness(arm, summary.final_step, group_of=load_group_fn(group_by) if group_by and ":" in group_by
                         else None, grouping=group_by or "auto", label=label,
                         sealed=sealed_train_ids(rd) if source == "real" else frozenset())
    return {**stats, "iteration": n}


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render_prompts(stats: dict, top: int) -> None:
    """`--prompts`: one row per prompt, lowest solve rate first, `top` per class (the group summary is
    weakness_summary.full_summary)."""
    src, w, g = stats["source"], stats["window"], stats["grouping"]
    # a run whose Phase 3 is over has no iter_N after its last one: say whose rollouts these are instead
    head = (f"weaknesses for iter_{stats['iteration']}" if not stats.get("past_the_end")
            else f"weaknesses after the last iteration (iter_{stats['iteration']} was never trained: the run's Phase 3 is over)")
    out.print(f"[bold]{head}[/bold]: {escape(src.get('arm', '?'))} on "
              f"{escape(src.get('rows', '?'))}, TRAIN rollouts of steps {w['steps'][0] if w['steps'] else '-'}-"
              f"{w['steps'][-1] if w['steps'] else '-'} (n={w['rollouts']}; early/late split at step "
              f"{w['late_from_step']}); solved = {stats['solved_rule']}", soft_wrap=True)
    out.print(f"grouping {escape(g['name'])}: {g['groups']} groups of {g['prompts']} prompts", soft_wrap=True)
    t = Table(title="prompts (lowest solve rate first)", expand=False)
    for col in ("class", "prompt", "rollouts", "solve rate [95% CI]", "early", "late", "trunc"):
        t.add_column(col, overflow="fold")
    for cls in CLASSES:
        rows = [r for r in stats["prompts"] if r["class"] == cls]
        for r in rows[:top]:
            lo, hi = r["solve_rate_ci95"]
            t.add_row(cls, escape(r["question"]), str(r["rollouts"]), f"{r['solve_rate']:.3f} [{lo:.3f}, {hi:.3f}]",
                      _rate(r["early_rate"]), _rate(r["late_rate"]), f"{r['truncated_share']:.2f}")
        if len(rows) > top:
            t.add_row(cls, f"... {len(rows) - top} more (--top)", *([""] * 5))
    out.print(t)
    for cls in CLASSES:
        c = stats["by_class"][cls]
        out.print(f"{cls}: {c['groups']} groups, {c['rollouts']} rollouts: {CLASS_MEANING[cls]}", soft_wrap=True)


@cli_errors
def command(
    run_dir: RunDirOpt,
    iteration: Annotated[Optional[int], typer.Option("--iter", help="Iteration N whose inputs to show (default: the current one).")] = None,
    source: Annotated[Optional[str], typer.Option(help="real: iter_0 on the real env (what to target); previous: iter_N-1 on the teacher's last rows. Default: both (previous from iteration 2); --json: real.")] = None,
    group_by: Annotated[Optional[str], typer.Option("--group-by", help="The grouping: auto (default: the env's task field, else the prompt template, else the answer type; a degenerate one falls back, stated), task, template, answer, or your own path/to/file.py:FUNCTION (a function of the prompt text returning a label).")] = None,
    top: Annotated[Optional[int], typer.Option(help="Groups shown per source, in class order (default: every group); with --prompts, prompts per class (default 10).")] = None,
    prompts: Annotated[bool, typer.Option("--prompts", help="One row per prompt instead of per group.")] = False,
    json_: JsonOpt = False,
) -> None:
    """Show how often the student solves each kind of train prompt over the whole run, by class.

    never (no solved rollout), rare (< 5%), learning (5-50%), solved (>= 50%), on the later half
    of the run. Computed by `iterate` into iter_N/weakness_stats.json before each teacher stop;
    read-only and lock-free. TRAIN rollouts only: eval rows are sealed. The text is the weakness
    summary the LLM teacher's request carries too: a markdown table of every group of `real` and,
    from iteration 2, `previous`, with the class counts and the singleton share.

    Example usage:

        selfimprove weaknesses --run-dir $RUN_DIR
        selfimprove weaknesses --run-dir $RUN_DIR --json \\
            --group-by my_groups.py:group
    """
    if source not in (None, "real", "previous"):
        raise UsageError(f"--source {source}: expected real or previous")
    if top is not None and top < 1:
        raise UsageError(f"--top {top}: must be >= 1")
    check_group_by(group_by)
    rd = RunDir(run_dir).require()
    if json_ or prompts:
        stats = load_stats(rd, iteration, source or "real", group_by)
        if json_:
            print_json(stats)
        else:
            render_prompts(stats, top or 10)
        sys.stdout.flush()
        return
    real = load_stats(rd, iteration, source or "real", group_by)
    n = real["iteration"]
    weakness = {"iteration": n, (source or "real"): real}
    if source is None and n >= 2:
        weakness["previous"] = load_stats(rd, n, "previous", group_by)
    text = full_summary(weakness, max_groups=top)
    if real.get("past_the_end"):  # a run whose Phase 3 is over has no iter_N after its last one
        text = text.replace(f"## Weakness summary of iter_{n}", "## Weakness summary after the last iteration "
                            f"(iter_{n} was never trained: the run's Phase 3 is over)", 1)
    print(text)
    sys.stdout.flush()
