"""Step 3a's inputs: the student's failed TRAIN rollouts and their aggregate shape.

Reads iter_{N-1}'s final-step train rollouts (train rows are the teacher's
material: seed records, or v1 Episode records mapped by `engines.rollout_rows.train_rows`,
so failures.jsonl has the same fields in both layouts) and writes:

- `failures.jsonl`: up to 200 lowest-reward rows, ascending, each with the step
  and line index the skeleton tag needs (`skeleton:train_step_<S>_idx_<I>`) and
  the completion's length;
- `analysis.json`: eval_acc of iter_{N-1} (an aggregate from its eval summary,
  never an eval row), reward by completion-length quartile, share truncated,
  a reward histogram.

When the final step holds fewer than `limit` failures (a small batch), earlier
steps are pooled, newest first, up to `max_steps_back`; analysis.json says which.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from ..engines.rollout_rows import train_rows
from ..engines.rollouts import train_steps
from ..errors import SelfImproveError
from ..rundir import ArmDir, atomic_write_json, atomic_write_text

FAILURE_LIMIT = 200
MAX_STEPS_BACK = 10


def completion_tokens(usage: object) -> int | None:
    """Tokens of the completion: prime-rl / verifiers write `output_tokens` (a float), older
    records `completion_tokens`; None when the record has neither."""
    if not isinstance(usage, dict):
        return None
    value = usage.get("output_tokens", usage.get("completion_tokens"))
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def completion_text(completion: Any) -> str:
    """The assistant text of a rollout's completion (a string or a list of chat messages)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        parts = []
        for msg in completion:
            if isinstance(msg, dict) and msg.get("role", "assistant") == "assistant":
                content = msg.get("content") or ""
                parts.append(content if isinstance(content, str) else json.dumps(content))
        return "\n".join(parts)
    return "" if completion is None else str(completion)


def prompt_text(prompt: Any) -> str:
    """The last user message of a chat prompt (what the student was asked)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if users:
            return users[-1] if isinstance(users[-1], str) else json.dumps(users[-1])
    return json.dumps(prompt)


def read_train_rollouts(path: Path, step: int) -> list[dict]:
    """Train rows of one step, with their (step, idx) origin; torn lines are skipped."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for idx, line in enumerate(f):
            if not line.endswith("\n"):
                break  # torn last line of a file still being written
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(r, dict):
                continue
            for rollout in train_rows(r):  # a seed record, or each trace of a v1 Episode record
                text = completion_text(rollout.get("completion"))
                rows.append(
                    {
                        "step": step,
                        "idx": idx,
                        "example_id": rollout.get("example_id"),
                        "reward": float(rollout.get("reward") or 0.0),
                        "question": prompt_text(rollout.get("prompt")),
                        "completion": text,
                        "answer": rollout.get("answer"),
                        "is_truncated": bool(rollout.get("is_truncated", False)),
                        "completion_chars": len(text),
                        "completion_tokens": completion_tokens(rollout.get("token_usage")),
                        "metrics": rollout.get("metrics") or {},
                    }
                )
    return rows


def _quartiles(rows: list[dict]) -> list[dict]:
    if not rows:
        return []
    ordered = sorted(rows, key=lambda r: r["completion_chars"])
    out = []
    for q in range(4):
        chunk = ordered[q * len(ordered) // 4 : (q + 1) * len(ordered) // 4]
        if not chunk:
            continue
        out.append(
            {
                "quartile": q + 1,
                "n": len(chunk),
                "chars_min": chunk[0]["completion_chars"],
                "chars_max": chunk[-1]["completion_chars"],
                "reward_mean": round(statistics.fmean(r["reward"] for r in chunk), 4),
                "share_truncated": round(sum(r["is_truncated"] for r in chunk) / len(chunk), 4),
            }
        )
    return out


def _histogram(values: list[float], bins: int = 10) -> list[dict]:
    if not values:
        return []
    lo, hi = min(min(values), 0.0), max(max(values), 1.0)
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    return [{"lo": round(lo + i * width, 4), "hi": round(lo + (i + 1) * width, 4), "n": c} for i, c in enumerate(counts)]


def analyze_failures(
    prev: ArmDir,
    out_dir: Path,
    *,
    prev_eval_acc: float,
    prev_final_step: int,
    limit: int = FAILURE_LIMIT,
    max_steps_back: int = MAX_STEPS_BACK,
) -> dict:
    """Write failures.jsonl then analysis.json (last: its existence marks the step done)."""
    steps = train_steps(prev, up_to=prev_final_step)
    if not steps:
        raise SelfImproveError(
            f"{prev.rollouts}: no train rollouts ({prev.train_file(prev_final_step).name}) up to step {prev_final_step}; "
            f"the analysis needs {prev.name}'s train rollouts (re-run its training)"
        )
    steps = steps[::-1][: max_steps_back + 1]
    used: list[int] = []
    all_rows: list[dict] = []
    failures: list[dict] = []
    for step in steps:
        rows = read_train_rollouts(prev.train_file(step), step)
        used.append(step)
        all_rows.extend(rows)
        max_reward = max((r["reward"] for r in rows), default=1.0)
        failures.extend(r for r in rows if r["reward"] < max(1.0, max_reward))
        if len(failures) >= limit:
            break
    failures.sort(key=lambda r: (r["reward"], -r["step"], r["idx"]))
    failures = failures[:limit]
    rewards = [r["reward"] for r in all_rows]
    analysis = {
        "source_arm": prev.name,
        "source_steps": sorted(used),
        "eval_acc_prev": prev_eval_acc,
        "n_train_rows": len(all_rows),
        "n_failures_written": len(failures),
        "train_reward_mean": round(statistics.fmean(rewards), 4) if rewards else None,
        "share_truncated": round(sum(r["is_truncated"] for r in all_rows) / len(all_rows), 4) if all_rows else None,
        "reward_by_length_quartile": _quartiles(all_rows),
        "reward_histogram": _histogram(rewards),
        "note": "train rollouts only; eval rows are sealed and never read here",
    }
    atomic_write_text(
        out_dir / "failures.jsonl",
        "".join(json.dumps({"rank": i, **r}) + "\n" for i, r in enumerate(failures)),
    )
    atomic_write_json(out_dir / "analysis.json", analysis)
    return analysis
