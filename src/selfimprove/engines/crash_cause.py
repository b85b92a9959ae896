"""Why a training job died, read from its log, when relaunching it cannot help.

A job that dies on a missing module, a config the engine refuses, or a machine without
a GPU dies the same way on every `--restart` (each one moving prime_out aside), so the
crash message gives that cause and its fix in one line instead of offering a restart:

    setup_failure(Path("iter_0/train.log"))
      -> "the engine's Python cannot import gguf (No module named 'gguf'); run pip install ..."
      -> None   (nothing recognised: a crash a restart or resume may well get past)

Only the latest launch's lines are read (train.log is appended to by every launch, and
an earlier launch's failure may since have been fixed), and only their last SCAN_LINES.

prime-rl main (559b44772) sends little to train.log: its launcher starts the inference server,
the env servers, the orchestrator and the trainer with their output in
`prime_out/logs/attempt_N/{inference,orchestrator,trainer}.log` and `envs/<split>/<name>.log`
(entrypoints/rl.py:176-199, 257, 287, 338; one attempt dir per launch, utils/pathing.py
create_attempt_log_dir). `setup_failure(log, prime_out)` reads train.log, then each log of the
latest attempt, and names the log the cause came from. A config prime-rl refuses is printed in a
rich panel (`│ 1 validation error for RLConfig │`): the border is stripped before matching.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..rl.builtin_students import LOCAL_INSTALL_FIX, LOCAL_MODULES, all_extras

TAIL_BYTES = 64_000
LAUNCH_MARK = re.compile(r"^\[selfimprove\] .* launch #\d+: ")  # jobs.launch writes it before each launch
MAX_CAUSE_CHARS = 300
# How far up from the end a cause may sit: the fatal lines end the log; an import warning
# further up that the engine survived is not why it died.
SCAN_LINES = 60

_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([^']+)'")
_CANNOT_IMPORT = re.compile(r"ImportError: cannot import name '([^']+)' from '([^']+)'")
# selfimprove-rl prints an expected failure (a ConfigError or EnvNotFound: its config, its model,
# its env) as one line "selfimprove-rl: <message>"; "error:" marks an unexpected one (a bug or an
# env that raised), "interrupted" a signal: neither is known to repeat.
_ENGINE_REFUSAL = re.compile(r"^selfimprove-rl: (?!error: |interrupted)(.+)$")
_VALIDATION = re.compile(r"^(\d+) validation errors? for (\w+)\s*$")
# verifiers' v1 loader (utils/loaders.py:91-96): a taskset / harness id that does not import
_PLUGIN_NOT_FOUND = re.compile(r"\b(taskset|harness|runtime) '([^']+)' not found \(tried to import '([^']+)'\)")
_BORDER = "│┃║|"  # rich's panel borders around prime-rl's error lines
_NO_GPU = re.compile(r"Found no NVIDIA driver|No CUDA GPUs are available|CUDA driver version is insufficient"
                     r"|Torch not compiled with CUDA enabled|CUDA is not available|no CUDA-capable device")


def latest_launch_lines(log: Path) -> list[str]:
    """The end of `log` from the latest launch marker on (all of the end when none is in it)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    for i in range(len(lines) - 1, -1, -1):
        if LAUNCH_MARK.match(lines[i]):
            return lines[i + 1:]
    return lines


def _install_fix(module: str) -> str:
    top = module.split(".", 1)[0]
    if top in LOCAL_MODULES:
        return f"run {LOCAL_INSTALL_FIX}"
    for extra in all_extras():
        if top in extra.modules:
            return f"run {extra.fix}"
    return f"install the package that provides {top} into the engine's Python"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CAUSE_CHARS else text[: MAX_CAUSE_CHARS - 3] + "..."


def attempt_logs(prime_out: Path | None) -> list[Path]:
    """The latest launch attempt's logs under prime-rl main's `prime_out/logs/attempt_N/` (trainer first:
    its traceback is the usual cause; then orchestrator, env servers, inference), or []."""
    if prime_out is None:
        return []
    attempts = [p for p in (prime_out / "logs").glob("attempt_*") if p.name.removeprefix("attempt_").isdigit()]
    if not attempts:
        return []
    latest = max(attempts, key=lambda p: int(p.name.removeprefix("attempt_")))
    order = {"trainer.log": 0, "orchestrator.log": 1, "inference.log": 3}
    return sorted((p for p in latest.rglob("*.log") if p.is_file()), key=lambda p: (order.get(p.name, 2), str(p)))


def setup_failure(log: Path, prime_out: Path | None = None) -> str | None:
    """The cause and fix (one line, no newline) of a failure that a relaunch repeats, or None.

    train.log first; then, for prime-rl main, the latest attempt's logs (`attempt_logs`), each cause
    naming the log it was read from."""
    cause = _cause(latest_launch_lines(log))
    if cause:
        return cause
    for path in attempt_logs(prime_out):
        cause = _cause(latest_launch_lines(path))
        if cause:
            return f"{cause} (in {path})"
    return None


def _cause(lines: list[str]) -> str | None:
    lines = [ln.strip().strip(_BORDER).strip() for ln in lines]
    for i in range(len(lines) - 1, max(-1, len(lines) - 1 - SCAN_LINES), -1):  # the last recognised line is the one that ended the job
        line = lines[i]
        m = _ENGINE_REFUSAL.match(line)
        if m:
            return f"the engine refused to start: {_short(m.group(1))}"
        m = _PLUGIN_NOT_FOUND.search(line)
        if m:
            return (f"the engine's Python cannot import {m.group(1)} '{m.group(2)}' (module {m.group(3)}); install the "
                    "env package into the engine's venv (prime-rl: a workspace member of its checkout, or `uv pip "
                    "install` into $PRIME_RL_DIR/.venv; see docs/how-to/gpu-prime-rl.md)")
        m = _NO_MODULE.search(line)
        if m:
            return f"the engine's Python cannot import {m.group(1)}; {_install_fix(m.group(1))}"
        m = _CANNOT_IMPORT.search(line)
        if m:
            return (f"the engine's Python has a {m.group(2)} without {m.group(1)} (an incompatible version); "
                    f"reinstall the engine's dependencies (`uv sync` for prime-rl, {LOCAL_INSTALL_FIX} for the CPU engine)")
        m = _VALIDATION.match(line)
        if m:
            field = lines[i + 1].strip() if i + 1 < len(lines) else "?"
            why = lines[i + 2].strip() if i + 2 < len(lines) else ""
            return (f"the engine refused its config ({m.group(1)} validation error(s) for {m.group(2)}; first: "
                    f"{_short(field + ': ' + why)}); fix that key (the run's rl.toml / overrides.toml)")
        m = _NO_GPU.search(line)
        if m:
            return (f"no usable CUDA GPU ({_short(m.group(0))}): prime-rl needs one; run on a GPU machine, or "
                    "train a CPU student with --engine local")
    return None


def telling_log(log: Path, prime_out: Path | None = None) -> Path:
    """The log whose tail to quote for a crash nothing recognised: the first of the latest attempt's logs
    (`attempt_logs`) that ends in a traceback or an error line, else `log` (train.log)."""
    for path in attempt_logs(prime_out):
        tail_lines = latest_launch_lines(path)[-SCAN_LINES:]
        if any("Traceback" in ln or "Error" in ln for ln in tail_lines):
            return path
    return log
