"""Poll a condition until it holds: the one wait loop the tests share (daemons starting, processes
exiting, files appearing). Returns False at the timeout so the caller's assert says what it waited for."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(pred: Callable[[], object], timeout: float = 30.0, poll: float = 0.1) -> bool:
    """True as soon as `pred()` is truthy, False once `timeout` seconds passed without it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(poll)
    return bool(pred())  # one last look: a slow poll must not miss what happened at the deadline
