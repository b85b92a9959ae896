"""The engine's two log files, shaped like prime-rl's (without the ANSI colours):

    logs/trainer.log        Step N | Time: ... | Loss: ... | Grad. Norm: ... | LR: ...
    logs/orchestrator.log   Step N | Time: ... | Reward: ... | Zero-var groups: ... | Seq. Length: ...

Both are truncated when a run (or a resume) starts, as prime-rl does. Each line
is flushed at once so a watcher sees progress while the run goes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


class Log:
    def __init__(self, path: Path, echo: bool = False):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "w", encoding="utf-8")
        self.echo = echo

    def info(self, msg: str) -> None:
        self.write("INFO", msg)

    def warning(self, msg: str) -> None:
        self.write("WARNING", msg)

    def write(self, level: str, msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {level:<7} {msg}\n"
        self.f.write(line)
        self.f.flush()
        if self.echo:
            sys.stdout.write(line)
            sys.stdout.flush()

    def close(self) -> None:
        self.f.close()
