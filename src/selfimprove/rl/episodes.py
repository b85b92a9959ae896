"""The CPU engine's episode rows in the v1 layout: verifiers v1 `Episode.to_record()`.

prime-rl main (559b44772) writes every episode through `monitors/file.py` as
`orjson.dumps(episode.to_record())` into `rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl`:
`all` holds every episode that came back (errored ones too), `effective` the subset that
counts — for train, the traces of admitted groups (the default advantage gate drops groups
whose advantages are all zero) that produced training samples and did not error, each with
its scalar advantage in `trace.info["advantage"]`; for eval, the non-errored traces.

Here each rollout becomes one Episode holding one Trace: the scored trace `Task.score` left
(`stack.verifiers_v1.trace_for`: system/user prompt nodes + one sampled assistant node), with
the token ids on its nodes (prompt ids on the last prompt node, the sampled ids on the
assistant node, so a root-to-leaf path concatenates to prompt + completion as verifiers
documents), one `ModelCall` carrying the usage and finish reason (`is_truncated` reads it),
and the error when a reward raised. The engine's effective train set is the rollouts the
GRPO update trained on (non-zero advantage, or every rollout when a KL term is on),
without a scoring error.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from ..stack import verifiers_v1
from .checkpoint import write_jsonl

RUN_ID = "selfimprove-rl"


def episode_record(rec: dict, *, kind: str, step: int, group_id: str, advantage: float | None = None,
                   policy: int | None = None) -> dict:
    """The `Episode.to_record()` dict of one engine rollout record (it carries `_task`, `_ids`, `_trace`)."""
    import verifiers.v1 as vf
    from verifiers.v1.episode import EnvInfo, EvalWorkInfo, GroupInfo, TrainRunInfo, TrainWorkInfo
    from verifiers.v1.trace import Error, ModelCall
    from verifiers.v1.types import SamplingConfig, Usage

    trace = rec.get("_trace") or verifiers_v1.trace_for(rec["_task"], rec["completion"][0]["content"])
    prompt_ids, completion_ids = rec["_ids"]
    sampled = len(trace.nodes) - 1
    if sampled > 0:  # all prompt ids on the last prompt node: the path still concatenates to the sequence
        trace.nodes[sampled - 1].token_ids, trace.nodes[sampled - 1].mask = list(prompt_ids), [False] * len(prompt_ids)
    trace.nodes[sampled].token_ids, trace.nodes[sampled].mask = list(completion_ids), [True] * len(completion_ids)
    sampling = rec.get("sampling_args") or {}
    now = time.time()
    trace.calls = [ModelCall(node=sampled, finish_reason="length" if rec["is_truncated"] else "stop",
                             sampling=SamplingConfig(temperature=sampling.get("temperature"),
                                                     max_tokens=sampling.get("max_tokens")),
                             usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(completion_ids)))]
    trace.calls[0].time.start = trace.calls[0].time.end = now
    error = rec.get("error")
    trace.errors = [Error(type=error["error"], message=error["message"])] if error else []
    trace.ok = not error
    trace.is_completed = True
    trace.stop_condition = "max_output_tokens" if rec["is_truncated"] else "completed"
    if advantage is not None:  # prime-rl stamps the scalar advantage on effective train traces
        trace.info = {**trace.info, "advantage": advantage}
    # the policy version that sampled it (main's provenance: eval_work(episode).policy, orchestrator.py:919-924)
    span = vf.PolicySpan(start=policy, end=policy) if policy is not None else None
    work = (TrainWorkInfo if kind == "train" else EvalWorkInfo)(step=step, policy=span)
    # one id per rollout, so its all/ and effective/ rows are the same episode, as in prime-rl
    episode_id = rec.setdefault("_episode_id", uuid.uuid4().hex)
    episode = vf.Episode(id=episode_id, env=EnvInfo(id=rec["_env_id"], name=rec["env_name"]), task=trace.task,
                         group=GroupInfo(id=group_id), run=TrainRunInfo(id=RUN_ID, work=work),
                         ok=trace.ok, errors=list(trace.errors), traces=[trace])
    return episode.to_record()


def episode_rows(records: list[dict], kind: str, step: int, group_size: int,
                 counts: list[bool], policy: int | None = None) -> tuple[list[dict], list[dict]]:
    """(all, effective) Episode records of one step's rollouts of one source.

    `records` are grouped by prompt, `group_size` rollouts each (the GRPO group is the Episode
    group); `counts[i]` says whether rollout i carried signal (train: it was trained on).
    """
    all_rows, effective_rows = [], []
    for i, (rec, counted) in enumerate(zip(records, counts)):
        group_id = f"{rec['env_name']}-{kind}-{step}-{i // group_size}"
        all_rows.append(episode_record(rec, kind=kind, step=step, group_id=group_id, policy=policy))
        if counted and not rec.get("error"):
            advantage = rec.get("advantage") if kind == "train" else None
            effective_rows.append(episode_record(rec, kind=kind, step=step, group_id=group_id, advantage=advantage,
                                                 policy=policy))
    return all_rows, effective_rows


def write_episodes(step_dir: Path, kind: str, all_rows: list[dict], effective_rows: list[dict]) -> None:
    """`<step_dir>/<kind>/{effective,all}/traces.jsonl`; all/ last, as it is the file readers wait for."""
    write_jsonl(step_dir / kind / "effective" / "traces.jsonl", effective_rows)
    write_jsonl(step_dir / kind / "all" / "traces.jsonl", all_rows)
