"""The `prime` CLI (PyPI `prime`): `prime env info` and `prime env install`.

Failures are classified from what the real CLI prints (see refs/verifiers.md and
prime_cli/commands/env.py): every API error is printed on STDOUT and exits 1.

    offline / DNS / timeout / HTTP 5xx, 429  -> HubUnreachable (exit 75: retry later; the run is not aborted)
        "Failed to get environment details: Request failed: ConnectError at GET https://...: ..."
    HTTP 404 / "not found"                   -> EnvNotFound (Phase 1 aborts the run)
        "Failed to get environment details: HTTP 404: ..."
    anything else non-zero (auth, bad id)    -> HubError (one line, the run is not aborted)

`prime env install` exits 0 even when the package install itself failed (it only
prints "Installation failed"), so callers must check importability afterwards;
`env_install` raises HubError when it sees that message.

The executable is `prime` on PATH, or `$SELFIMPROVE_PRIME` (a command line; tests
point it at tests/fakes/prime). Children run with the target interpreter's bin dir
first on PATH and VIRTUAL_ENV set to its venv, so `prime env install` (which shells
out to `uv pip` or `pip`) installs into the Python that will load the env.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ..engines import procs
from ..errors import EnvNotFound, HubUnreachable, SelfImproveError

PRIME_ENV_VAR = "SELFIMPROVE_PRIME"
INFO_TIMEOUT_S = 120
INSTALL_TIMEOUT_S = 1800

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_UNREACHABLE = re.compile(
    r"Request failed|ConnectError|ConnectTimeout|ReadTimeout|timed out|Temporary failure in name resolution"
    r"|Name or service not known|nodename nor servname|Network is unreachable|Connection refused"
    r"|RemoteProtocolError|HTTP 5\d\d|HTTP 429",
    re.I,
)
_NOT_FOUND = re.compile(r"HTTP 404|\bnot found\b|does not exist", re.I)
_INSTALL_FAILED = re.compile(r"Installation failed|Failed to install", re.I)


class HubError(SelfImproveError):
    """The prime CLI failed for a reason other than 'not found' or 'unreachable'."""


def prime_command() -> list[str]:
    """The prime executable as an argv prefix; a clear error when there is none."""
    override = os.environ.get(PRIME_ENV_VAR, "").strip()
    if override:
        return shlex.split(override)
    found = shutil.which("prime")
    if not found:
        raise HubError(
            "the `prime` CLI is not on PATH: install it with `pip install prime` "
            f"(or set {PRIME_ENV_VAR}), or use a local env with --env-path DIR"
        )
    return [found]


def _child_env(python: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    bindir = Path(python or sys.executable).parent  # not resolved: a venv's python is a symlink
    env["PATH"] = str(bindir) + os.pathsep + env.get("PATH", "")
    if (bindir.parent / "pyvenv.cfg").is_file():  # a venv: make `uv pip` target it too
        env["VIRTUAL_ENV"] = str(bindir.parent)
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "400"  # rich wraps long error lines at the terminal width otherwise
    return env


def _clean(text: str) -> str:
    return _ANSI.sub("", text or "")


def _summary(text: str) -> str:
    """The most telling line of the CLI's output, on one line."""
    lines = [ln.strip() for ln in _clean(text).splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"Failed|Error|✗", ln):
            return ln
    return lines[-1] if lines else "no output"


def classify(hub_id: str, action: str, returncode: int, output: str) -> SelfImproveError | None:
    """Map a prime run to None (success) or the error to raise."""
    text = " ".join(_clean(output).split())
    if returncode == 0:
        if action == "install" and _INSTALL_FAILED.search(text):
            return HubError(f"`prime env install {hub_id}` could not install the package: {_summary(output)}")
        return None
    if _UNREACHABLE.search(text):
        return HubUnreachable(
            f"environment hub unreachable (`prime env {action} {hub_id}`: {_summary(output)}); "
            "retry when the network is back, the run is unchanged"
        )
    if _NOT_FOUND.search(text):
        return EnvNotFound(f"hub env {hub_id} not found (`prime env {action}`: {_summary(output)})")
    return HubError(f"`prime env {action} {hub_id}` failed (exit {returncode}): {_summary(output)}")


def _run(hub_id: str, action: str, args: list[str], timeout: float, python: str | None = None) -> str:
    cmd = prime_command() + args
    try:
        proc = procs.run_child(cmd, capture_output=True, text=True, timeout=timeout, env=_child_env(python))
    except FileNotFoundError:
        raise HubError(f"cannot run {cmd[0]}: not found; install prime with `pip install prime`") from None
    except subprocess.TimeoutExpired:
        raise HubUnreachable(
            f"`prime env {action} {hub_id}` did not answer within {timeout:.0f} s; retry later, the run is unchanged"
        ) from None
    output = (proc.stdout or "") + "\n" + (proc.stderr or "")
    err = classify(hub_id, action, proc.returncode, output)
    if err is not None:
        raise err
    return _clean(proc.stdout)


def env_info(hub_id: str, timeout: float = INFO_TIMEOUT_S) -> str:
    """`prime env info <owner/name>`; returns its output (no JSON mode in prime 0.18)."""
    return _run(hub_id, "info", ["env", "info", hub_id], timeout)


def env_install(
    hub_id_or_name: str, path: str | Path | None = None, timeout: float = INSTALL_TIMEOUT_S, python: str | None = None
) -> str:
    """`prime env install <id> [-p PATH] --with uv|pip` into `python`'s venv (default: this one); returns its output.

    uv when it is on PATH (prime's default), else pip. A bare name installs a local
    env from PATH (prime's `./environments` by default).
    """
    args = ["env", "install", hub_id_or_name, "--with", "uv" if shutil.which("uv") else "pip"]
    if path is not None:
        args += ["-p", str(path)]
    return _run(hub_id_or_name, "install", args, timeout, python)
