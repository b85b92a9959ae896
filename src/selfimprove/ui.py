"""Console output shared by the commands: one rich console on stderr for
progress (so stdout stays clean for RUN_DIR / --json), phase start/end lines
with the Phase 3 budget clock, and the plain progress lines a training job
prints when stderr is not a terminal.

Output that is not a terminal (an agent's shell, a pipe, a log file) is never
wrapped: rich would wrap it at 80 columns and split paths mid-word
(`.../run_a_best_from_iter0/tra` / `in.log`), which then cannot be copied, and
fold a table's checkpoint column. Such a console gets a width no line reaches,
soft wrap, and no highlighting; a terminal keeps its own width.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import IO

from rich.console import Console
from rich.markup import escape

PIPE_WIDTH = 10_000  # columns of a non-terminal console: more than any path, log line or table row


def _console(stream: IO[str], *, stderr: bool) -> Console:
    tty = stream.isatty()
    return Console(stderr=stderr, highlight=False, soft_wrap=not tty or not stderr,
                   width=None if tty else PIPE_WIDTH)


# Progress and human messages go to stderr; stdout carries only results.
console = _console(sys.stderr, stderr=True)
out = _console(sys.stdout, stderr=False)


# What a terminal acts on rather than shows: C0 controls but newline and tab (ESC opens CSI cursor
# moves, clear-screen and OSC titles/links; CR and BS overwrite a line), DEL, C1 (U+009B is a CSI
# on its own), and the bidi controls that reorder what is shown (U+202E turns a line around).
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: object, *, newlines: bool = True) -> str:
    """`text` with every character a terminal would act on shown as its escape (`\\x1b`, `\\u202e`).

    Text the run dir holds (a generator's output, a teacher's labels and replies, any file a stranger
    sent) is quoted to a person's terminal only through this: an ESC or an OSC sequence is printed as
    visible characters, never run, so a generator cannot clear the screen or print a fake "all gates
    passed" over the real lines. `newlines=False` also escapes newlines, for a value quoted inside one line."""
    s = str(text)
    if not newlines:
        s = s.replace("\n", "\\n")

    def shown(m: re.Match) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"

    return _TERMINAL_UNSAFE.sub(shown, s)


def fmt_duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"


def budget_line(phase3_start_ts: float | None, budget_seconds: int) -> str:
    """Where the --budget clock stands. It caps Phase 3 only and starts at the first
    `iterate` (run.json phase3_start_ts); before that nothing is charged to it."""
    if phase3_start_ts is None:
        return f"budget clock not started (Phase 3 only, {fmt_duration(budget_seconds)})"
    used = time.time() - phase3_start_ts
    left = budget_seconds - used
    return f"Phase 3 budget: {fmt_duration(used)} used, {fmt_duration(left) if left > 0 else 'none'} left"


def phase_line(event: str, phase: str, phase3_start_ts: float | None = None, budget_seconds: int | None = None) -> None:
    """Print '[hh:mm:ss] <phase> <event> (<budget_line>)'; without budget_seconds, no budget part."""
    stamp = time.strftime("%H:%M:%S")
    tail = f" ({budget_line(phase3_start_ts, budget_seconds)})" if budget_seconds is not None else ""
    console.print(f"[dim]{stamp}[/dim] [bold]{phase}[/bold] {event}{tail}")


# A training job watched without a terminal prints a plain progress line at least this often
# (a rich progress bar draws nothing until it stops when its console is not a terminal, so
# compare looked dead for minutes). SELFIMPROVE_PROGRESS_S overrides it; only the tests set it,
# to see several lines from a job of a few seconds.
PLAIN_PROGRESS_S = 30.0


def plain_progress_interval() -> float:
    try:
        value = float(os.environ.get("SELFIMPROVE_PROGRESS_S", PLAIN_PROGRESS_S))
    except ValueError:
        return PLAIN_PROGRESS_S
    return value if value > 0 else PLAIN_PROGRESS_S


class PlainProgress:
    """The part of rich.progress.Progress that the job watcher uses (add_task, update, a context),
    printing one line per task on `console`: `[hh:mm:ss] run_a: step 12/100, train reward 0.412`,
    when a task is added, at least every `interval` seconds while it is updated, and when it
    completes. Thread-safe: `compare --parallel` watchers share one."""

    def __init__(self, target: Console | None = None, interval: float | None = None) -> None:
        self.console = target or console
        self.interval = interval if interval is not None else plain_progress_interval()
        self._tasks: dict[int, dict] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int | None = None, **fields: object) -> int:
        with self._lock:
            task = len(self._tasks)
            self._tasks[task] = {"name": description, "total": total, "completed": 0, "last": None, "done": False,
                                 **fields}
        self.update(task)
        return task

    def update(self, task: int, *, completed: int | None = None, **fields: object) -> None:
        with self._lock:
            t = self._tasks[task]
            if completed is not None:
                t["completed"] = completed
            t.update(fields)
            now = time.monotonic()
            finished = t["total"] is not None and t["completed"] >= t["total"]
            # the first note (a slow model's first sampling line, a student build) is shown at once: it is
            # the first sign that the job is working, which a user should not wait a whole interval for
            first_note = bool(t.get("note")) and not t.get("noted")
            due = t["last"] is None or now - t["last"] >= self.interval or (finished and not t["done"]) or first_note
            if not due:
                return
            t["last"], t["done"], t["noted"] = now, finished, t.get("noted") or bool(t.get("note"))
            total = f"/{t['total']}" if t["total"] is not None else ""
            line = (f"{time.strftime('%H:%M:%S')} {t['name']}: "
                    + (t["note"] if t.get("note") else f"step {t['completed']}{total}, train reward {t.get('reward', '-')}"))
        self.console.print(escape(line), highlight=False, soft_wrap=True)
