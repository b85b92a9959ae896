"""`selfimprove run`: the whole loop, unattended."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import Phase4Incomplete, UsageError
from ..llm_teacher.api import DEFAULT_INPUT_CHARS, DEFAULT_KEY_ENV, DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, OPENAI_URL
from ..models import MAX_PARALLEL, MAX_SEEDS
from ..phases.finalize import incomplete_message
from ..phases.run import run
from ..plugins import load_entry_points
from ..report.table import recommendation_line, summary_renderable
from ..rundir import RunDir
from ..ui import out
from ._common import JsonOpt, check_job_flags, cli_errors, print_json
from .bootstrap import options_from_params
from .teacher_options import (TeacherBaseUrlOpt, TeacherKeyEnvOpt, TeacherMaxReplyTokensOpt, TeacherMaxTokensOpt,
                              TeacherInputCharsOpt, TeacherRetriesOpt, TeacherTimeoutOpt, llm_values, make_teacher, recorded_teacher,
                              teacher_record)


TEACHERS_GROUP = "selfimprove.teachers"  # entry points: name = an env id, value = a --teacher spec string


def registered_teachers() -> dict[str, str]:
    """The default --teacher of each env that declares one (an env package's `selfimprove.teachers` entry point)."""
    return load_entry_points(TEACHERS_GROUP, _not_a_spec, error=UsageError, fix=", or pass --teacher")


def _not_a_spec(name: str, spec: object) -> str | None:
    return None if isinstance(spec, str) else f"a {type(spec).__name__}, not a --teacher spec string"


def default_teacher(env_id: str) -> str:
    """The teacher the env's package declares (looked up by the env id, then by its name after a
    hub owner's `owner/`); for an env without one, say what to do."""
    teachers = registered_teachers()
    for name in (env_id, env_id.split("/")[-1]):
        if name in teachers:
            return teachers[name]
    declared = "; ".join(f"{spec} for {env}" for env, spec in sorted(teachers.items())) or "none declared"
    raise UsageError(
        f"--teacher: no teacher for '{env_id}'. The default teachers write data for their own env only ({declared}). "
        "Use the built-in LLM teacher for any env: --teacher llm:MODEL (an OpenAI-compatible API; --teacher-base-url "
        "for a local server; needs the llm extra); or write one: an object with write(ctx) that writes weakness_report.md and "
        "gen_dataset.py into ctx.iter_dir from ctx.failures_path, ctx.analysis and ctx.hub_env (src/selfimprove/"
        "teacher.py; docs/how-to/write-teacher.md), pass it as --teacher path/to/file.py:OBJECT, or run the phases by hand "
        "as the agent skill does (SKILL.md)")


@cli_errors
def command(
    ctx: typer.Context,
    dataset: Annotated[Optional[str], typer.Argument(help="Dataset to start a new run on (omit with --run-dir).")] = None,
    teacher: Annotated[Optional[str], typer.Option(help="MODULE:OBJECT or path/to/file.py:OBJECT with write(ctx) (see selfimprove.teacher), or llm:MODEL for the built-in teacher behind an OpenAI-compatible API (needs the [llm] extra: pip install 'selfimprove[llm]'). Default: the teacher the env's package declares (examples/arith_teacher.py:ArithTeacher for selfimprove-arith).")] = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", envvar="SELFIMPROVE_RUN_DIR", help="Resume this run dir instead of bootstrapping a new one.")] = None,
    control: Annotated[bool, typer.Option("--control/--no-control", help="Phase 4 Run C, the equal-compute control.")] = True,
    parallel: Annotated[Optional[int], typer.Option(min=1, max=MAX_PARALLEL, help="Phase 4 arms trained at once (see `selfimprove compare --help`). Default: 2 with the CPU engine, 1 with prime-rl, every pending arm on SLURM.")] = None,
    seeds: Annotated[Optional[int], typer.Option(min=1, max=MAX_SEEDS, help="Phase 4 training seeds for Run A, Run C and the best iteration (see `selfimprove compare --help`); recorded in run.json. Default: run.json's value, 1 for a new run.")] = None,
    allow_no_signal: Annotated[bool, typer.Option(help="Go on even when iter_0's rewards do not spread (see `selfimprove baseline --help`).")] = False,
    restart: Annotated[bool, typer.Option(help="With --run-dir, after a crashed, cancelled or timed-out job: train that arm again from step 0 (as the phase command's --restart).")] = False,
    resume: Annotated[bool, typer.Option(help="With --run-dir, after a crashed, cancelled or timed-out job: relaunch that arm from its last checkpoint (as the phase command's --resume).")] = False,
    teacher_base_url: TeacherBaseUrlOpt = OPENAI_URL,
    teacher_api_key_env: TeacherKeyEnvOpt = DEFAULT_KEY_ENV,
    teacher_max_tokens: TeacherMaxTokensOpt = None,
    teacher_max_reply_tokens: TeacherMaxReplyTokensOpt = None,
    teacher_timeout: TeacherTimeoutOpt = DEFAULT_TIMEOUT_S,
    teacher_retries: TeacherRetriesOpt = DEFAULT_RETRIES,
    teacher_input_chars: TeacherInputCharsOpt = DEFAULT_INPUT_CHARS,
    json_: JsonOpt = False,
) -> None:
    """Run the whole loop unattended: bootstrap, introspect, baseline, iterate, compare, finalize.

    Every `selfimprove bootstrap` flag is accepted after the dataset (see
    `selfimprove bootstrap --help`). The teacher is called at each teacher stop of
    `iterate` (and again with the failure list when a gate fails). Re-run with
    --run-dir to resume a crashed or killed run wherever it was.

    --budget caps Phase 3 only: its clock starts at the first iterate, after the
    baseline, so setup, introspection and iter_0 are never charged to it, and
    the controls and summary run after it on their own time.

    `--teacher llm:MODEL` is the built-in teacher behind an OpenAI-compatible
    API: it follows SKILL.md's teacher sections and saves every request and
    reply under iter_N/llm_teacher/ (a resumed run replays them, never pays
    twice). The key stays in the variable --teacher-api-key-env names.

    Example usage:

        selfimprove run selfimprove-arith --model selfimprove/tiny-arith
        selfimprove run selfimprove-arith --model selfimprove/tiny-arith \\
            --budget 8m --batch-size 256 \\
            --teacher examples/arith_teacher.py:ArithTeacher
        # resume, with its recorded --teacher:
        selfimprove run --run-dir runs/selfimprove-arith-2026-11-29T150000Z
        selfimprove run selfimprove-arith --teacher llm:gpt-4.1 \\
            --teacher-max-tokens 400000
        selfimprove run selfimprove-arith --teacher llm:Qwen/Qwen3-32B \\
            --teacher-base-url http://localhost:8000/v1
    """
    opts = None
    if run_dir is None:
        if not dataset:
            raise UsageError("give a dataset to start a run (e.g. selfimprove-arith), or --run-dir to resume one")
        boot = ctx.parent.command.get_command(ctx.parent, "bootstrap")  # one source of truth for the flags
        bctx = boot.make_context("bootstrap", [dataset, *ctx.args], parent=ctx.parent)
        opts = options_from_params(bctx.params)
    elif dataset or ctx.args:
        raise UsageError("--run-dir resumes a run with its recorded settings; drop the dataset and bootstrap flags")
    if (restart or resume) and run_dir is None:
        raise UsageError("--restart/--resume act on a stopped job of an existing run: give its --run-dir")
    check_job_flags(restart, resume, None)
    llm = llm_values(ctx)
    record = None  # an explicit --teacher is recorded in run.json, so `run --run-dir R` resumes with it
    if teacher is not None:
        record = teacher_record(teacher, llm)
    elif run_dir is not None:
        rd = RunDir(run_dir).require()
        teacher, llm = recorded_teacher(ctx, rd.read_run().teacher, llm, source=str(rd.run_json))
    if teacher is None:
        env_id = RunDir(run_dir).require().read_run().hub_id if run_dir else (opts.hub_id or opts.dataset)
        teacher = default_teacher(env_id)
    write = make_teacher(teacher, ctx, llm)
    result = run(opts, run_dir, write, control=control, seeds=seeds, quiet=json_, allow_no_signal=allow_no_signal,
                 parallel=parallel, teacher_record=record, restart=restart, resume=resume)
    incomplete = incomplete_message(result)
    if json_:
        print_json(result)
        if incomplete:
            raise Phase4Incomplete(incomplete)
        return
    out.print(summary_renderable(result))
    timings = ", ".join(f"{k} {v:.0f}s" for k, v in result["timings_s"].items())
    out.print(f"run dir: {result['run_dir']} | status {result['status']} (ended: {result['end_reason']}; {result['reason']}) | {timings}", markup=False)
    if line := recommendation_line(result):
        out.print(line, markup=False)
    if result.get("report"):
        out.print(f"report: {result['report']}", markup=False, highlight=False)
    if incomplete:  # a dead Phase 4 arm: the summary above is partial (exit 6)
        raise Phase4Incomplete(incomplete)
