"""Console output shared by the commands: one rich console on stderr for
progress (so stdout stays clean for RUN_DIR / --json), phase start/end lines
with the Phase 3 budget clock."""

from __future__ import annotations

import sys
import time

from rich.console import Console

# Progress and human messages go to stderr; stdout carries only results.
console = Console(stderr=True, highlight=False)
# Piped output (make, CI, an agent's shell) gets 120 columns instead of rich's 80,
# so the summary table keeps one line per arm.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)


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
