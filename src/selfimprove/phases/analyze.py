"""Step 3a's inputs: the student's failed TRAIN rollouts and their aggregate shape.

Reads iter_{N-1}'s final-step train rollouts (train rows are the teacher's
material: seed-dialect records, or v1 Episode records mapped by `engines.rollout_rows.train_rows`,
so failures.jsonl has the same fields in both layouts) and writes:

- `failures.jsonl`: up to 200 lowest-reward rows, ascending, each with the step
  and line index the skeleton tag needs (`skeleton:train_step_<S>_idx_<I>`) and
  the completion's length;
- `analysis.json`: eval_acc of iter_{N-1} (an aggregate from its eval summary,
  never an eval row), reward by completion-length quartile, share truncated,
  a reward histogram, and the weakness classes' counts.

`weakness_stats.json` (written first, see `write_weakness_stats`) measures every train
prompt and prompt group over the WHOLE run, not the last steps: `real` from iter_0 (the
real env; every iteration trains from its final checkpoint) and, from iteration 2,
`previous` from iter_{N-1} (the teacher's last rows). Each failure carries its prompt's
solve rate and group from the run it came from.

When the final step holds fewer than `limit` failures (a small batch), earlier
steps are pooled, newest first, up to `max_steps_back`; analysis.json says which.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Callable, Iterator

from ..engines.rollout_rows import train_rows
from ..engines.rollouts import train_steps
from ..errors import SelfImproveError
from ..rundir import ArmDir, RunDir, atomic_write_json, atomic_write_text
from ..grouping import task_label
from ..weakness import Rollout, default_group, prompt_index, weakness_stats

FAILURE_LIMIT = 200
SEALED_NOTE = "TRAIN rollouts only; eval rows are sealed and never read here"
SEALED_TRAIN_NOTE = ("; the env has no eval split, so the train rows the engine evaluates are sealed too: "
                     "their rollouts are left out")
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


def _train_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line index, rollout) of one train rollouts file: a seed-dialect record, or each trace of a v1 Episode
    record; undecodable lines are skipped, and a torn last line (a file still being written) ends it."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for idx, line in enumerate(f):
            if not line.endswith("\n"):
                break
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                for rollout in train_rows(row):
                    yield idx, rollout


def sealed_train_ids(rd: RunDir) -> frozenset:
    """Example ids of the real env's train rows the engine evaluates (the env has no eval split, so
    verifiers scores the first train rows): sealed like eval rows, so their train rollouts of the REAL
    env (iter_0) are dropped before anything reaches the teacher. Empty with an eval split. Generated
    rows (iter_N) reuse the same small ids for other questions, so this applies to real-env arms only."""
    # an unreadable hub_env.json stops here (RunDirError naming it): guessing "nothing sealed" would leak
    hub = rd.read_hub_env() if rd.hub_env_json.is_file() else None
    return frozenset(hub.evaluated_example_ids or []) if hub is not None and hub.eval_size is None else frozenset()


def read_train_rollouts(path: Path, step: int, sealed: frozenset = frozenset()) -> tuple[list[dict], int]:
    """(train rows of one step with their (step, idx) origin, rollouts dropped because their example id
    is in `sealed`: evaluated train rows of an env without an eval split)."""
    rows, dropped = [], 0
    for idx, rollout in _train_records(path):
        if rollout.get("example_id") in sealed:
            dropped += 1
            continue
        text = completion_text(rollout.get("completion"))
        rows.append({
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
        })
    return rows, dropped


def _solved(rollout: dict) -> bool:
    """The eval's rule on a train rollout: its is_correct metric where the env writes one, else reward >= 0.5."""
    metrics = rollout.get("metrics")
    flag = metrics.get("is_correct") if isinstance(metrics, dict) else None
    if isinstance(flag, (int, float)):  # bools included
        return float(flag) >= 0.5
    reward = rollout.get("reward")
    return isinstance(reward, (int, float)) and not isinstance(reward, bool) and reward >= 0.5


def stat_rollouts(arm: ArmDir, up_to: int | None = None, sealed: frozenset = frozenset()) -> Iterator[Rollout]:
    """Every TRAIN rollout of `arm` (all steps up to `up_to`) as a Rollout, except those of a `sealed`
    example id; completions are dropped as each line is read, so a long run's text never sits in memory."""
    for step in train_steps(arm, up_to=up_to):
        for _idx, rollout in _train_records(arm.train_file(step)):
            if rollout.get("example_id") in sealed:
                continue
            answer = rollout.get("answer")
            yield Rollout(step=step, question=prompt_text(rollout.get("prompt")), solved=_solved(rollout),
                          truncated=bool(rollout.get("is_truncated", False)), example_id=rollout.get("example_id"),
                          task=task_label(rollout.get("info")), answer=None if answer is None else str(answer))


def arm_weakness(arm: ArmDir, up_to: int | None = None, *, group_of: Callable[[str], str] | None = None,
                 grouping: str = "auto", label: str = "", sealed: frozenset = frozenset()) -> dict:
    """Weakness statistics of one arm's TRAIN rollouts over its whole run (`sealed`: example ids left out)."""
    return weakness_stats(stat_rollouts(arm, up_to, sealed), group_of=group_of, grouping=grouping,
                          source={"arm": arm.name, "rows": label})


def write_weakness_stats(rd: RunDir, n: int, *, final_steps: dict[int, int], group_by: str | None = None) -> dict:
    """iter_N/weakness_stats.json: `real` (iter_0 on the real env) and, for N >= 2, `previous` (iter_{N-1}
    on the teacher's rows). `final_steps` maps an iteration to its recorded final step; `group_by` is the
    run's grouping (run.json's group_by: a grouping.py rule, or FILE.py:FUNC; None = auto)."""
    group_of = load_group_fn(group_by) if group_by and ":" in group_by else None
    kw = {"group_of": group_of, "grouping": group_by or "auto"}
    sealed = sealed_train_ids(rd)
    real = arm_weakness(rd.iter(0), final_steps.get(0), label="the real env's train split", sealed=sealed, **kw)
    previous = (arm_weakness(rd.iter(n - 1), final_steps.get(n - 1), label=f"iter_{n - 1}'s generated rows", **kw)
                if n >= 2 else None)
    record = {"iteration": n, "real": real, "previous": previous, "note": SEALED_NOTE + (SEALED_TRAIN_NOTE if sealed else "")}
    atomic_write_json(rd.iter(n).dir / "weakness_stats.json", record)
    return record


def weakness_line(real: dict | None) -> str:
    """One line of the real env's weakness classes for the scratchpad (iter_0's train rollouts, whole run)."""
    if not real or not real.get("groups"):
        return "Weakness classes: n/a (iter_0 has no train rollouts here)."
    w, c = real["window"], real["by_class"]
    classes = ", ".join(f"{k} {v['groups']} groups ({v['rollouts']} rollouts)" for k, v in c.items())
    return (f"Weakness classes of iter_0 on the real train split (steps {w['steps'][0]}-{w['steps'][-1]}, "
            f"{w['rollouts']} rollouts, {real['grouping']['groups']} prompt groups): {classes}; "
            "see `selfimprove weaknesses`.")


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


def _weakness_fields(question: str, index: dict[str, dict]) -> dict:
    p = index.get(question)
    if p is None:
        return {"prompt_solve_rate": None, "prompt_rollouts": 0, "group": default_group(question),
                "group_solve_rate": None, "group_class": None}
    g = p["group_stats"] or {}
    return {"prompt_solve_rate": p["solve_rate"], "prompt_rollouts": p["rollouts"], "group": p["group"],
            "group_solve_rate": g.get("solve_rate"), "group_class": g.get("class")}


def analyze_failures(
    prev: ArmDir,
    out_dir: Path,
    *,
    prev_eval_acc: float,
    prev_final_step: int,
    limit: int = FAILURE_LIMIT,
    max_steps_back: int = MAX_STEPS_BACK,
    weakness: dict | None = None,
    sealed: frozenset = frozenset(),
) -> dict:
    """Write failures.jsonl then analysis.json (last: its existence marks the step done).

    `weakness`: the weakness statistics of `prev`'s run; each failure then carries its prompt's
    solve rate over the run, its group, and the group's rate and class. `sealed`: example ids whose
    rollouts are left out (the evaluated train rows, when `prev` trained on the real env)."""
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
    dropped = 0
    for step in steps:
        rows, n_sealed = read_train_rollouts(prev.train_file(step), step, sealed)
        dropped += n_sealed
        used.append(step)
        all_rows.extend(rows)
        max_reward = max((r["reward"] for r in rows), default=1.0)
        failures.extend(r for r in rows if r["reward"] < max(1.0, max_reward))
        if len(failures) >= limit:
            break
    failures.sort(key=lambda r: (r["reward"], -r["step"], r["idx"]))
    failures = failures[:limit]
    if weakness is not None:
        failures = [{**r, **_weakness_fields(r["question"], index)}
                    for index in [prompt_index(weakness)] for r in failures]
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
        "weakness_classes": weakness["by_class"] if weakness else None,
        "note": SEALED_NOTE + (SEALED_TRAIN_NOTE if sealed else ""),
    }
    if sealed:
        analysis["n_evaluated_train_rollouts_left_out"] = dropped
    atomic_write_text(
        out_dir / "failures.jsonl",
        "".join(json.dumps({"rank": i, **r}) + "\n" for i, r in enumerate(failures)),
    )
    atomic_write_json(out_dir / "analysis.json", analysis)
    return analysis
