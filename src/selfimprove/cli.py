"""The `selfimprove` command line. This module only lists commands; each lives in
`selfimprove.commands.<name>` and calls a phase function in `selfimprove.phases`."""

from __future__ import annotations

import os
import sys

import typer

from .commands import baseline, bootstrap, cancel, compare, finalize, introspect, iterate, note, report, run, status, student, weaknesses
from .commands import new_env, skill
from .commands._help import plain_help

app = typer.Typer(
    name="selfimprove",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="""Teacher/student self-improvement for small LLMs.

A student is RL-trained on a real verifiers environment (iter_0). Each iteration,
a teacher reads the student's failed TRAIN rollouts and writes a generator of
targeted data; the tool gates it, packages it as an environment, retrains from
iter_0 and evaluates on the real environment. Controls then test the best gain.

Every phase reads and writes a run directory (run.json, metrics.json,
scratchpad.md); re-running a phase resumes it.

Try the whole loop on the embedded CPU default (minutes, no GPU):

    selfimprove run selfimprove-arith --model selfimprove/tiny-arith

Or phase by phase, as an agent does (see `selfimprove skill show`):

    RUN_DIR=$(selfimprove bootstrap selfimprove-arith \\
        --model selfimprove/tiny-arith --budget 15m)
    selfimprove introspect --run-dir $RUN_DIR
    selfimprove status --run-dir $RUN_DIR
""",
)

app.command("bootstrap")(bootstrap.command)
app.command("introspect")(introspect.command)
app.command("baseline")(baseline.command)
app.command("iterate")(iterate.command)
app.command("compare")(compare.command)
app.command("finalize")(finalize.command)
app.command("report")(report.command)
app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(run.command)
app.command("status")(status.command)
app.command("cancel")(cancel.command)
app.command("weaknesses")(weaknesses.command)
app.command("note")(note.command)
app.command("new-env")(new_env.command)
app.add_typer(student.app, name="student")
app.add_typer(skill.app, name="skill")
plain_help(app)  # help strings render whole: a bracketed word like [llm] is text, not rich markup


def main() -> None:
    try:  # a shell left in a deleted directory: every relative path (and the run dir's resolve) would fail later
        os.getcwd()
    except FileNotFoundError:
        print("error: the current directory no longer exists (it was deleted or moved); "
              "cd to an existing directory and re-run the same command", file=sys.stderr)
        sys.exit(1)
    app()
