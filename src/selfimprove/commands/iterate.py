"""`selfimprove iterate`: Phase 3, one resumable step machine per iteration."""

from __future__ import annotations

import shlex

from typing import Annotated, Optional

import typer

from ..errors import UsageError
from ..grouping import check_group_by
from ..llm_teacher.api import DEFAULT_INPUT_CHARS, DEFAULT_KEY_ENV, DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, OPENAI_URL
from ..phases.bootstrap import parse_budget
from ..phases.iterate import iterate
from ..phases.run import iterate_with_teacher
from ..rundir import RunDir
from ..ui import out, phase_line
from ._common import check_job_flags, JsonOpt, RunDirOpt, cli_errors, print_json
from .teacher_options import (TeacherBaseUrlOpt, TeacherKeyEnvOpt, TeacherMaxReplyTokensOpt, TeacherMaxTokensOpt,
                              TeacherInputCharsOpt, TeacherRetriesOpt, TeacherTimeoutOpt, llm_values, make_teacher, refuse_llm_flags,
                              teacher_flags)


@cli_errors
def command(
    cli_ctx: typer.Context,
    run_dir: RunDirOpt,
    once: Annotated[bool, typer.Option(help="Stop after one finished iteration (default: go on until the teacher must act or Phase 3 ends).")] = False,
    restart: Annotated[bool, typer.Option(help="After a crashed training job: clean relaunch of its arm.")] = False,
    resume: Annotated[bool, typer.Option(help="After a crashed training job: relaunch from its last saved checkpoint.")] = False,
    gen_timeout: Annotated[float, typer.Option(help="Seconds gen_dataset.py may run (> 0); then it and its child processes are killed.")] = 900.0,
    cap_hours: Annotated[Optional[float], typer.Option(help="Give up on a training job this many hours past its expected end (default 2).")] = None,
    teacher: Annotated[Optional[str], typer.Option(help="Answer the teacher stops of ONE iteration with this teacher (as `selfimprove run --teacher`: MODULE:OBJECT, path/to/file.py:OBJECT, or llm:MODEL), then stop as --once does.")] = None,
    teacher_base_url: TeacherBaseUrlOpt = OPENAI_URL,
    teacher_api_key_env: TeacherKeyEnvOpt = DEFAULT_KEY_ENV,
    teacher_max_tokens: TeacherMaxTokensOpt = None,
    teacher_max_reply_tokens: TeacherMaxReplyTokensOpt = None,
    teacher_timeout: TeacherTimeoutOpt = DEFAULT_TIMEOUT_S,
    teacher_retries: TeacherRetriesOpt = DEFAULT_RETRIES,
    teacher_input_chars: TeacherInputCharsOpt = DEFAULT_INPUT_CHARS,
    group_by: Annotated[Optional[str], typer.Option("--group-by", help="Regroup the weakness statistics of the iterations analysed from now on (recorded in run.json): auto, task, template, answer, or path/to/file.py:FUNCTION.")] = None,
    budget: Annotated[Optional[str], typer.Option(help="Phase 3's cap from now on (run.json budget_seconds), e.g. 45m: lower than the time used, Phase 3 ends before the next iteration (a deadline); higher, more iterations fit. Noted in the scratchpad.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Phase 3: run the current iteration's next incomplete step, and on.

    Stops where the teacher must act (exit 3: write/fix iter_N/weakness_report.md
    and iter_N/gen_dataset.py; exit 4: a gate failed, the list says what), when
    Phase 3 ends (budget or max_iters; exit 0), or after --once. Re-running
    continues exactly where it stopped, and attaches to a training job that is
    still running instead of launching another.

    The --budget clock starts at the first iterate (run.json phase3_start_ts)
    and is never reset: bootstrap, introspect and baseline are not charged.
    `iterate --budget` changes the cap, never the clock: to stop early for a
    deadline, lower it (e.g. to 1m); the iteration under way is finished first.

    With --teacher, the teacher answers the stops of one iteration (up to 4
    attempts, as in `selfimprove run`), then it stops as --once does.

    Example usage:

        selfimprove iterate --run-dir $RUN_DIR
        selfimprove iterate --run-dir $RUN_DIR --teacher llm:gpt-4.1
        selfimprove iterate --run-dir $RUN_DIR --budget 1m   # end Phase 3 now
    """
    if not gen_timeout > 0:  # also refuses nan
        raise UsageError(f"--gen-timeout {gen_timeout}: must be a number of seconds > 0")
    check_job_flags(restart, resume, cap_hours)
    check_group_by(group_by)
    budget_seconds = None if budget is None else parse_budget(budget)
    rd = RunDir(run_dir)
    rd.require()

    def on_step(n: int, step: str) -> None:
        if not json_:
            cfg = rd.read_run()  # re-read: the first iterate starts the budget clock (phase3_start_ts)
            phase_line(step, f"iter_{n}", cfg.phase3_start_ts, cfg.budget_seconds)

    if teacher is None:
        refuse_llm_flags(cli_ctx, "and this iterate has no --teacher")
        result = iterate(rd, restart=restart, resume=resume, quiet=json_, once=once, gen_timeout=gen_timeout,
                         cap_hours=cap_hours, on_step=on_step, group_by=group_by, budget_seconds=budget_seconds)
    else:
        write = make_teacher(teacher, cli_ctx, llm_values(cli_ctx))
        # its stop lines name this command: the same `iterate --teacher` resumes (`run` is not what was used)
        rerun = f"selfimprove iterate --run-dir {shlex.quote(str(rd.root))} {teacher_flags(cli_ctx, teacher)}"
        result = iterate_with_teacher(rd, write, quiet=json_, once=True, restart=restart, resume=resume,
                                      gen_timeout=gen_timeout, cap_hours=cap_hours, on_step=on_step, rerun=rerun,
                                      group_by=group_by, budget_seconds=budget_seconds)
    if json_:
        print_json({"stop": result.kind, "iteration": result.iteration, "message": result.message, **result.details})
    else:
        out.print(result.message, markup=False)
