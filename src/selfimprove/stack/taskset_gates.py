"""The dataset gate's two reads of a verifiers v1 taskset: the round trip and the eval n-grams.

Both run inside the env's interpreter (taskset_probe.py dispatches here), so they may import
verifiers and the env; what leaves the subprocess is numbers only:

- `round_trip_scores`: each generated row becomes a task of the hub's own Task class (its
  TaskData with the row's question as prompt, the row's answer in the answer field, the hub
  tasks' system prompt), and `info.reasoning` is scored as the reply by the Task's own
  `@vf.reward` methods. The gate (gates/roundtrip.py::check_reward_round_trip) asks for full
  marks. Scoring, rather than running a parser, is what a v1 env defines: its rewards read the
  reply themselves and the module need not hold any parser object.
- `eval_question_hashes`: the prompts the engine evaluates, hashed with gates/ngram_hash.py
  (loaded by path); no eval text is returned.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

from .verifiers_v1 import (first_line, config_class, find_taskset, load_tasks, prompt_messages, reward_functions,
                           score_reply)


async def _score_rows(task_class, data_class, task_config, system_prompt, answer_field, rows) -> list[dict]:
    out: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        try:
            data = data_class(idx=i, prompt=row["question"], system_prompt=system_prompt,
                              **{answer_field: row["answer"]})
            trace = await score_reply(task_class(data, task_config), row["reasoning"])
        except Exception as e:  # a row the task cannot be built from, or a reward raising on it
            out.append({"error": first_line(e.__cause__ or e)})
            continue
        out.append({"rewards": {name: (r.score if r is not None else None) for name, r in trace.rewards.items()}})
    return out


def round_trip_scores(taskset_id: str, args: dict[str, Any], answer_field: str, rows: list[dict]) -> dict[str, Any]:
    """{"weights": {reward: weight}, "rows": [{"rewards": {...}} | {"error": one line}]} for rows of
    {question, answer, reasoning}: the hub Task's rewards on each row's reasoning as its reply."""
    taskset_class = find_taskset(taskset_id)
    task_class = taskset_class.task_type()
    task_config = config_class(taskset_class)(id=taskset_id, **args).task
    first = load_tasks(taskset_id, args, limit=1)
    system_prompt = first[0].data.system_prompt if first else None
    scored = asyncio.run(_score_rows(task_class, task_class.data_type(), task_config, system_prompt, answer_field, rows))
    return {"weights": dict(reward_functions(task_class)), "rows": scored}


def eval_question_hashes(taskset_id: str, args: dict[str, Any], limit: int | None, hasher_file: str,
                         source: str) -> dict[str, Any]:
    """The n-gram hash index (gates.ngram_hash JSON) of the user prompts of the first `limit` tasks (None: all)."""
    spec = importlib.util.spec_from_file_location("selfimprove_ngram_hash", hasher_file)
    hasher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hasher)

    def questions():
        for task in load_tasks(taskset_id, args, limit=limit):
            users = [m["content"] for m in prompt_messages(task) if m["role"] == "user"]
            yield users[-1] if users else ""

    return {**hasher.eval_ngram_index(questions()).to_json(), "source": source}
