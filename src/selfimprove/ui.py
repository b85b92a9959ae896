"""Console output shared by the commands: one rich console on stderr for
progress (so stdout stays clean for RUN_DIR / --json), phase start/end lines
with elapsed time and budget left."""

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


def budget_line(start_ts: float, budget_seconds: int) -> str:
    elapsed = time.time() - start_ts
    left = budget_seconds - elapsed
    return f"elapsed {fmt_duration(elapsed)}, budget left {fmt_duration(left) if left > 0 else 'none'}"


def phase_line(event: str, phase: str, start_ts: float | None = None, budget_seconds: int | None = None) -> None:
    """Print '[hh:mm:ss] <phase> start|done (elapsed ..., budget left ...)'."""
    stamp = time.strftime("%H:%M:%S")
    tail = f" ({budget_line(start_ts, budget_seconds)})" if start_ts is not None and budget_seconds is not None else ""
    console.print(f"[dim]{stamp}[/dim] [bold]{phase}[/bold] {event}{tail}")
