"""The one mapping from a line of a rollout file to the fields selfimprove reads.

Two shapes reach the readers:

- a seed-dialect record (prime-rl 09e297743's `{train,eval}_rollouts.jsonl`): one rollout per line,
  its fields at the top level (`example_id`, `prompt`, `completion`, `answer`, `reward`,
  `metrics`, `is_truncated`, `token_usage`);
- a verifiers v1 `Episode.to_record()` (prime-rl main's `rollouts/step_N/{train,eval}/all/
  traces.jsonl`): the task under `task.data` (`idx` = example id, `prompt`, `system_prompt`,
  and the taskset's own fields such as `answer`), one rollout per `traces[]` entry with its
  messages as graph `nodes` (`sampled` marks the model's), `rewards` as {name: {score, weight}}
  (the reward is sum(score * weight), verifiers' `Trace.reward`, a property the record omits),
  `metrics`, token usage on `calls[].usage`, truncation as `stop_condition` or a `length`
  finish reason (verifiers' `Trace.is_truncated`). An episode that produced no trace (it
  errored before a rollout finished) counts as one failed rollout scoring 0.

`train_rows` gives the teacher's view (text included); `sealed_scores` gives the eval
aggregation's view, which is numbers and example ids only: eval rows are sealed, so nothing
else of an eval line leaves that function. The shape is told by the line itself, so each
reader serves both layouts.
"""

from __future__ import annotations

import math
from typing import Any

# verifiers v1 Trace.is_truncated: the framework limits that end a rollout early
TRUNCATING_STOPS = frozenset({"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens",
                              "context_length"})


def is_episode(row: dict) -> bool:
    """A verifiers v1 Episode record (has `task` and `traces`) rather than a seed rollout record."""
    return isinstance(row.get("traces"), list) and isinstance(row.get("task"), dict)


def _number(v: object) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return None


def _example_id(value: object) -> int | str | None:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _trace_reward(trace: dict) -> float:
    rewards = trace.get("rewards")
    total = 0.0
    for r in (rewards.values() if isinstance(rewards, dict) else []):
        if isinstance(r, dict):
            score, weight = _number(r.get("score")), _number(r.get("weight", 1.0))
            if score is not None and weight is not None:
                total += score * weight
    return total


def _trace_metrics(trace: dict) -> dict[str, float]:
    """The trace's metrics plus each reward's score under its name (the seed-dialect rows' `metrics` hold both)."""
    out: dict[str, float] = {}
    metrics = trace.get("metrics")
    for k, v in (metrics.items() if isinstance(metrics, dict) else []):
        if (x := _number(v)) is not None:
            out[str(k)] = x
    rewards = trace.get("rewards")
    for k, r in (rewards.items() if isinstance(rewards, dict) else []):
        if isinstance(r, dict) and (x := _number(r.get("score"))) is not None:
            out.setdefault(str(k), x)
    return out


def _traces(record: dict) -> list[dict]:
    return [t for t in record["traces"] if isinstance(t, dict)]


# ---------------------------------------------------------------- sealed (eval) view


def sealed_scores(row: dict) -> list[tuple[int | str | None, float | None, float | None]]:
    """[(example_id, reward, is_correct)] of one line's rollouts; numbers and ids only.

    reward is None when a seed row has no numeric reward (the caller refuses the file);
    is_correct is None when the rollout has no `is_correct` metric (the caller applies reward >= 0.5).
    """
    if not is_episode(row):
        metrics = row.get("metrics")
        is_correct = _number(metrics.get("is_correct")) if isinstance(metrics, dict) else None
        return [(_example_id(row.get("example_id")), _number(row.get("reward")), is_correct)]
    data = row["task"].get("data")
    example_id = _example_id(data.get("idx")) if isinstance(data, dict) else None
    traces = _traces(row)
    if not traces:
        return [(example_id, 0.0, None)]
    return [(example_id, _trace_reward(t), _trace_metrics(t).get("is_correct")) for t in traces]


# ---------------------------------------------------------------- train (teacher) view


def _path_nodes(trace: dict) -> list[dict]:
    """The nodes of the trace's final branch, root first (verifiers' `Trace.messages`)."""
    nodes = [n for n in trace.get("nodes") or [] if isinstance(n, dict)]
    if not nodes:
        return []
    path, i, seen = [], len(nodes) - 1, set()
    while isinstance(i, int) and 0 <= i < len(nodes) and i not in seen:
        seen.add(i)
        path.append(nodes[i])
        i = nodes[i].get("parent")
    return path[::-1]


def _task_prompt(data: dict) -> list[dict]:
    out = [{"role": "system", "content": data["system_prompt"]}] if data.get("system_prompt") else []
    prompt = data.get("prompt")
    if isinstance(prompt, str):
        return out + [{"role": "user", "content": prompt}]
    return out + [m for m in prompt or [] if isinstance(m, dict)]


def _is_truncated(trace: dict) -> bool:
    if trace.get("stop_condition") in TRUNCATING_STOPS:
        return True
    calls = [c for c in trace.get("calls") or [] if isinstance(c, dict) and c.get("error") is None]
    return bool(calls) and calls[-1].get("finish_reason") == "length"


def _completion_tokens(trace: dict, completion_nodes: list[dict]) -> int | None:
    usages = [c["usage"] for c in trace.get("calls") or [] if isinstance(c, dict) and isinstance(c.get("usage"), dict)]
    counts = [u.get("completion_tokens") for u in usages]
    if counts and all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        return sum(counts)
    sampled = [n.get("token_ids") for n in completion_nodes if n.get("sampled")]
    if sampled and all(isinstance(t, list) and t for t in sampled):
        return sum(len(t) for t in sampled)
    return None


def train_rows(row: dict) -> list[dict[str, Any]]:
    """The rollouts of one train line as {example_id, reward, prompt, completion, answer,
    is_truncated, token_usage, metrics}: the seed-dialect record's own field names and shapes."""
    if not is_episode(row):
        return [row]
    data = row["task"].get("data") if isinstance(row["task"].get("data"), dict) else {}
    base = {"example_id": _example_id(data.get("idx")), "answer": data.get("answer")}
    traces = _traces(row)
    if not traces:
        return [{**base, "reward": 0.0, "prompt": _task_prompt(data), "completion": [], "is_truncated": False,
                 "token_usage": None, "metrics": {}}]
    out = []
    for trace in traces:
        path = _path_nodes(trace)
        first = next((i for i, n in enumerate(path) if n.get("sampled")), len(path))
        prompt = [n.get("message") for n in path[:first]] or _task_prompt(data)
        tokens = _completion_tokens(trace, path[first:])
        out.append({**base, "reward": _trace_reward(trace), "prompt": prompt,
                    "completion": [n.get("message") for n in path[first:]],
                    "is_truncated": _is_truncated(trace),
                    "token_usage": None if tokens is None else {"output_tokens": tokens},
                    "metrics": _trace_metrics(trace)})
    return out


def train_rewards_of(row: dict) -> list[float]:
    """The rewards of one train line's rollouts (a seed row without a numeric reward gives none)."""
    if is_episode(row):
        return [r for _, r, _ in sealed_scores(row) if r is not None]
    reward = row.get("reward")
    return [float(reward)] if isinstance(reward, (int, float)) and not isinstance(reward, bool) else []


def group_rewards_of(row: dict) -> list[tuple[str, float]]:
    """(prompt group, reward) of one train line's rollouts: a seed row's group is (env_name, example_id),
    an Episode's its `group.id` (the consumer's rollout group), else (env.name, task.data.idx)."""
    if not is_episode(row):
        return [(f"{row.get('env_name')}/{row.get('example_id')}", r) for r in train_rewards_of(row)]
    group = row.get("group")
    if isinstance(group, dict) and isinstance(group.get("id"), str):
        key = group["id"]
    else:
        env, data = row.get("env"), row["task"].get("data")
        key = f"{env.get('name') if isinstance(env, dict) else None}/{data.get('idx') if isinstance(data, dict) else None}"
    return [(key, r) for r in train_rewards_of(row)]
