"""Named crash points for the kill -9 fault suite (tests/test_faults.py).

    SELFIMPROVE_FAULT_AT=stage selfimprove run --run-dir R   # dies by SIGKILL inside the staging step

`fault_point(name)` is called at a few named places in the loop. It does nothing
unless the environment variable SELFIMPROVE_FAULT_AT equals `name`; then the
process sends itself SIGKILL (no cleanup, no finally blocks, no atexit: exactly
what an OOM kill or a power-cut of the CLI does). The suite uses it to hit each
point deterministically, then checks that re-running the command ends in the same
summary as an undisturbed run. docs/how-to/resume.md ("What a crash costs") lists the points.
"""

from __future__ import annotations

import os
import signal

ENV_VAR = "SELFIMPROVE_FAULT_AT"


def fault_point(name: str) -> None:
    """SIGKILL this process if SELFIMPROVE_FAULT_AT names this point (inert otherwise)."""
    if os.environ.get(ENV_VAR) == name:
        os.kill(os.getpid(), signal.SIGKILL)
