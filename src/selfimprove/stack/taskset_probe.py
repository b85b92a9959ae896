"""Requests about verifiers v1 tasksets, answered in the env's interpreter.

Everything that imports verifiers or the env runs in a fresh interpreter (the env's, picked by
stack/env_python.py), so an install made after this process started counts and a stale import
does not. `run_in_env_python` sends one JSON request on stdin; `main` (run there) answers it:

    describe     hub_env.json's taskset section (verifiers_v1.describe_taskset)
    resolve      which of a list of taskset ids verifiers' own loader cannot load, and why
    round_trip   the dataset gate's round trip (taskset_gates.round_trip_scores)
    eval_ngrams  the eval prompts' n-gram hashes (taskset_gates.eval_question_hashes)

The dispatch lives here, not in verifiers_v1, so that the gates may use verifiers_v1 without
verifiers_v1 reaching back into the gates (no import circle).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..engines import procs
from ..errors import ConfigError
from . import taskset_gates, verifiers_v1

PROBE_TIMEOUT_S = 900
_SRC = Path(__file__).resolve().parents[2]  # the directory holding the selfimprove package
# The child imports THIS copy of selfimprove (the env's interpreter may have another one, or none,
# on its path) without putting its directory on sys.path, so the env is found only where it is installed.
_CHILD = ("import importlib.util, sys\n"
          "spec = importlib.util.spec_from_file_location('selfimprove', {package!r} + '/__init__.py',\n"
          "                                              submodule_search_locations=[{package!r}])\n"
          "sys.modules['selfimprove'] = module = importlib.util.module_from_spec(spec)\n"
          "spec.loader.exec_module(module)\n"
          "from selfimprove.stack.taskset_probe import main\n"
          "main()\n")


def run_in_env_python(request: dict[str, Any], what: str, python: str | None = None,
                      timeout: float = PROBE_TIMEOUT_S) -> Any:
    """One request (op describe | resolve | round_trip | eval_ngrams) in a fresh `python`. ConfigError with its one line."""
    code = _CHILD.format(package=str(_SRC / "selfimprove"))
    env = {**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        proc = procs.run_child([python or sys.executable, "-c", code], input=json.dumps(request), capture_output=True,
                               text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{what} took longer than {timeout:.0f} s") from None
    lines = proc.stdout.strip().splitlines()
    try:
        reply = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ConfigError(f"{what} failed (exit {proc.returncode}): {last}") from None
    if not reply.get("ok"):
        raise ConfigError(reply["message"])
    return reply["result"]


def probe_taskset(env_module: str, env_args: dict[str, Any], python: str | None = None,
                  timeout: float = PROBE_TIMEOUT_S, evaluated_examples: int = -1) -> dict[str, Any]:
    """describe_taskset(taskset_for_env(env_module), env_args, evaluated_examples), in a fresh `python`."""
    return run_in_env_python({"op": "describe", "env_module": env_module, "env_args": env_args,
                              "evaluated_examples": evaluated_examples},
                             f"probing the v1 taskset of '{env_module}'", python, timeout)


def check_taskset_ids(uses: list[tuple[str, str]], python: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Resolve every (taskset id, where it came from) with verifiers' own loader in `python`, as prime-rl
    does while its config validates. ConfigError on the first id it cannot load: where, the id, the fix."""
    if not uses:
        return
    request = {"op": "resolve", "uses": [{"id": i, "where": w} for i, w in uses]}
    refused = run_in_env_python(request, "resolving taskset ids with verifiers' loader", python, timeout)
    if refused:
        raise ConfigError(f"{refused[0]['where']}: {refused[0]['error']}")


def resolve_ids(uses: list[dict[str, str]]) -> list[dict[str, str]]:
    """The uses whose id verifiers' loader cannot load, each with the one-line error (in the env's interpreter)."""
    refused = []
    for use in uses:
        try:
            verifiers_v1.find_taskset(use["id"])
        except ConfigError as e:
            refused.append({**use, "error": str(e)})
    return refused


def _handle(request: dict[str, Any]) -> Any:
    op = request.get("op", "describe")
    if op == "describe":
        return verifiers_v1.describe_taskset(verifiers_v1.taskset_for_env(request["env_module"]),
                                             request.get("env_args") or {}, int(request.get("evaluated_examples", -1)))
    if op == "resolve":
        return resolve_ids(request["uses"])
    if op == "round_trip":
        return taskset_gates.round_trip_scores(request["taskset_id"], request["args"], request["answer_field"],
                                               request["rows"])
    if op == "eval_ngrams":
        return taskset_gates.eval_question_hashes(request["taskset_id"], request["args"], request["limit"],
                                                  request["hasher_file"], request["source"])
    raise ConfigError(f"unknown request op {op!r}")


def main() -> None:
    request = json.loads(sys.stdin.read())
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # what the env prints must not corrupt the reply
    try:
        reply = {"ok": True, "result": _handle(request)}
    except ConfigError as e:
        reply = {"ok": False, "message": str(e)}
    except Exception as e:  # an env failing in a way not foreseen: one line naming it
        name = request.get("env_module") or request.get("taskset_id")
        reply = {"ok": False, "message": f"env module '{name}': {verifiers_v1.first_line(e)}"}
    real_stdout.write(json.dumps(reply, default=str) + "\n")
