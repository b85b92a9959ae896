"""The CPU engine's verifiers v1 side: what prime-rl >= 0.8 does with a `[[...source]]` block.

A source's `env.taskset.id` names a module whose `__all__` exports one Taskset (prime-rl #3226);
its other `env.taskset.*` fields are that taskset's config. A v1 taskset has no train/eval split
of its own: each source is the rows its config yields (an eval source picks its rows by its
config, e.g. `split = "eval"`), capped by the source's `num_examples`.

Scoring needs no model server: each reply goes into a verifiers Trace (prompt + one assistant
message, `stack.verifiers_v1.trace_for`) and the task's own `Task.score` runs its @vf.reward and
@vf.metric methods on it. A reward that raises is scored 0 with the error kept in the row
(verifiers' ErrorData shape, as for the classic API), so a broken reward is visible.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, EnvNotFound
from ..stack import verifiers_v1

API = verifiers_v1.API


@dataclass
class TasksetEnv:
    """One loaded source: its taskset id, config fields and tasks."""

    id: str
    args: dict[str, Any]
    tasks: list


def load_taskset(taskset_id: str, args: dict[str, Any]) -> TasksetEnv:
    """The tasks of a source; EnvNotFound when the module is not installed, ConfigError when it is no taskset."""
    import importlib.util

    try:
        found = importlib.util.find_spec(taskset_id) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise EnvNotFound(f"taskset id '{taskset_id}': no such module installed; env.taskset.id names a module "
                          f"exporting one verifiers v1 Taskset (prime-rl >= 0.8)")
    return TasksetEnv(taskset_id, dict(args), verifiers_v1.load_tasks(taskset_id, args))


def taskset_rows(env: TasksetEnv, n: int = -1) -> list[dict]:
    """Rows in the engine's shape: {prompt (messages), answer, info, example_id}, plus the task under `_task`."""
    tasks = env.tasks if n is None or n < 0 else env.tasks[:n]
    if not tasks:
        raise ConfigError(f"taskset '{env.id}' with {env.args}: it yields no task; check its config fields")
    rows = []
    for i, task in enumerate(tasks):
        answer = getattr(task.data, "answer", "")
        rows.append({"prompt": verifiers_v1.prompt_messages(task), "answer": "" if answer is None else str(answer),
                     "info": {}, "example_id": task.data.idx if task.data.idx is not None else i, "_task": task})
    return rows


def score_tasks(env: TasksetEnv, rows: list[dict], texts: list[str], truncated: list[bool] | None = None) -> list[dict]:
    """Score each (row, reply) with the row's task; returns reward/metrics/error/seconds like score_completions,
    plus the scored verifiers Trace (None when scoring raised) the v1 episode rows are built from."""

    async def run() -> list[dict]:
        results = []
        for row, text in zip(rows, texts):
            t0 = time.perf_counter()
            trace = None
            try:
                trace = await verifiers_v1.score_reply(row["_task"], text)
                metrics = {k: float(v) for k, v in trace.metrics.items() if v is not None}
                metrics.update({k: float(r.score) for k, r in trace.rewards.items() if r is not None})
                reward, error = float(trace.reward), None
            except Exception as e:  # a reward raised: verifiers marks the rollout failed; we score it 0
                cause = e.__cause__ or e
                reward, metrics, trace = 0.0, {}, None
                error = {"error": type(cause).__name__, "message": str(cause) or type(cause).__name__,
                         "error_chain_repr": repr(e), "error_chain_str": str(e)}
            results.append({"reward": reward, "metrics": metrics, "error": error, "trace": trace,
                            "scoring_s": time.perf_counter() - t0})
        return results

    return asyncio.run(run())
