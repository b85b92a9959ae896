"""`selfimprove compare`: Phase 4 control runs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..models import MAX_PARALLEL, MAX_SEEDS
from ..phases.compare import compare
from ..rundir import RunDir
from ..ui import out, phase_line
from ._common import check_job_flags, JsonOpt, RunDirOpt, cli_errors, print_json


@cli_errors
def command(
    run_dir: RunDirOpt,
    control: Annotated[bool, typer.Option("--control/--no-control", help="Run C: iter_0 + the same steps on REAL data (the equal-compute control).")] = True,
    restart: Annotated[bool, typer.Option(help="After a crashed arm job: clean relaunch.")] = False,
    resume: Annotated[bool, typer.Option(help="After a crashed arm job: relaunch from its last checkpoint.")] = False,
    cap_hours: Annotated[Optional[float], typer.Option(help="Give up on a job this many hours past its expected end (default 2).")] = None,
    seeds: Annotated[Optional[int], typer.Option(min=1, max=MAX_SEEDS, help="Training seeds for Run A, Run C and the best iteration (member k: the best iteration canonical orchestrator.seed + 2k, Runs A and C + 2k + 1, so Run A never repeats the best iteration's seed); recorded in run.json. Default: run.json's value (1 = seed variance unmeasured).")] = None,
    parallel: Annotated[Optional[int], typer.Option(min=1, max=MAX_PARALLEL, help="Arms trained at once. Default: 2 with the CPU engine (same figures, 1.6-1.7x sooner on 2 cores), 1 with prime-rl (a run takes every GPU), every pending arm on SLURM (one job each; the scheduler queues what does not fit).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Phase 4: pick BEST_ITER and run the controls on the full eval split.

    Run A replays the best dataset from iter_0 with other training seeds than
    the best iteration's, Run B mixes real + best from the base model, Run C
    (default on) trains iter_0 for the same steps on real data, with Run A's seeds.
    With --seeds N, Run A, Run C and the best iteration are each trained with N
    training seeds (Run B stays at one), so finalize can test differences against
    seed variance. A failing arm is logged in run.json phase4_errors and the
    others go on. With the CPU engine two arms train at once (--parallel 1 for
    one after another; the figures are the same). Re-running resumes: finished
    arms are kept, a running job is attached to; raising --seeds later adds
    only the missing seeds.

    Example usage:

        selfimprove compare --run-dir $RUN_DIR
        selfimprove compare --run-dir $RUN_DIR --seeds 3
    """
    check_job_flags(restart, resume, cap_hours)
    rd = RunDir(run_dir)  # compare() refuses a missing or damaged run.json, naming it, before it writes anything

    def on_arm(arm: str, event: str) -> None:
        if not json_:
            phase_line(event, arm)  # Phase 4 is never charged to --budget

    result = compare(rd, control=control, seeds=seeds, restart=restart, resume=resume, quiet=json_,
                     cap_hours=cap_hours, on_arm=on_arm, parallel=parallel)
    if json_:
        print_json(result)
        return
    b = result["best"]
    split = "" if b.get("eval_split", "eval") == "eval" else f", {b['eval_split']}"
    out.print(f"BEST_ITER = iter_{b['best_iter']} (eval_acc {b['eval_acc']:.3f} on {b['n_eval']} examples{split})", markup=False)
    for arm, rec in result["arms"].items():
        lo, hi = rec["acc_ci95"]
        seed = f", training seed {rec['seed']}" if rec.get("seed") is not None else ""
        out.print(f"{arm}: eval_acc {rec['eval_acc']:.3f} [{lo:.3f}, {hi:.3f}] on n={rec['n_eval']}{seed}", markup=False)
    for arm, err in result["errors"].items():
        out.print(f"{arm}: FAILED: {err}", markup=False)
    out.print(f"training seeds per arm: {result['seeds']} requested; finished: "
              + ", ".join(f"{arm} {len(keys)}" for arm, keys in result["seed_members"].items() if keys), markup=False)
    if result["errors"]:  # finalize would only write a partial summary: recover the failed arms first
        out.print(f"next: selfimprove compare --run-dir {rd.root} --restart (retrains the failed arms "
                  f"{', '.join(result['errors'])}; finished arms are kept)", markup=False)
    else:
        out.print(f"next: selfimprove finalize --run-dir {rd.root}", markup=False)
