"""Sealed eval aggregation (Phase 2B step 4 of the skill's procedure, shared by every arm).

Eval rows are sealed (the skill's procedure's Non-negotiable 1, DESIGN "Eval rows are sealed"):
each line of eval_rollouts.jsonl (seed dialect) or eval/all/traces.jsonl (v1 Episode records,
one rollout per trace) is decoded and immediately reduced to (example_id, reward,
correct) by `engines.rollout_rows.sealed_scores`; the decoded row is dropped on the spot, and no
message of this module ever quotes a line (errors say "line 17: not JSON").
Correctness is metrics.is_correct when the row has it, else reward >= 0.5, as
in the procedure's one-liner.

Train rollouts are fair game: `train_reward_mean` and `train_trajectory` read
their rewards.

What is not covered: eval files of several eval envs are aggregated together
(the loop only ever configures one eval env, the real one).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

from ..engines.rollout_rows import sealed_scores
from ..engines.rollouts import EVAL_FILE, TRAIN_FILE, train_rewards, train_steps
from ..errors import EvalAggregationError, EvalParseError, RunDirError
from ..faults import fault_point
from ..models import EvalSummary, ExampleScore, HubEnv, IterRecord, RunConfig
from ..rundir import CONTROL_ARMS, ArmDir, RunDir, write_model
from ..stats import wilson_interval
from .context import RunContext
from .hf_model import build_v1_model

TRAIN_MEAN_STEPS = 10  # train_reward_mean: over the last this-many train steps
RULE_IS_CORRECT = "metrics.is_correct"
RULE_REWARD = "reward >= 0.5"


NO_EVAL_SPLIT = "train (no eval split)"  # the label of every score of an env without an eval split (docs/concepts/sealed-eval.md)


def evaluated_split(hub: HubEnv | None) -> str:
    """What the numbers were measured on, as every label says it: "eval", or "train (no eval split)" when
    the env has no eval split and the engine scores the first train rows instead."""
    return NO_EVAL_SPLIT if hub is not None and hub.eval_size is None else "eval"


def hub_env_of(rd: RunDir) -> HubEnv | None:
    """hub_env.json, or None when it is missing or unreadable (labels fall back to "eval")."""
    try:
        return rd.read_hub_env() if rd.hub_env_json.is_file() else None
    except RunDirError:  # a label must not fail a phase; the phase that needs hub_env.json says why
        return None


def expected_eval_examples(cfg: RunConfig, hub: HubEnv | None) -> int:
    """Eval examples per iteration (iter_0 and every iter_N alike): the skill's procedure's 200 (cfg.eval_examples),
    capped by the eval split's size when introspection knows it."""
    if hub is not None and hub.eval_size:
        return min(cfg.eval_examples, hub.eval_size)
    return cfg.eval_examples


def eval_file(arm: ArmDir, step: int) -> Path:
    return arm.eval_file(step)


class _NotJson(EvalParseError):
    """A line that does not decode (fatal unless it is the last line: then it is a torn write)."""


def _sealed_fields(line: bytes, lineno: int, path: Path) -> list[tuple[object, float, float | None]]:
    """[(example_id, reward, is_correct or None)] of one eval line (one seed row, or one v1 Episode
    record with one entry per trace); nothing else survives this call."""
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _NotJson(f"{path}: line {lineno}: not JSON; the engine wrote a corrupt eval file, re-run with --restart") from None
    if not isinstance(row, dict):
        raise EvalParseError(f"{path}: line {lineno}: not a JSON object")
    scores = sealed_scores(row)
    del row  # the rest of the row (prompt, completion, answer, info) goes no further
    out = []
    for example_id, reward, is_correct in scores:
        if reward is None:
            raise EvalParseError(f"{path}: line {lineno}: no numeric 'reward'; is this an eval rollouts file "
                                 "(a seed-dialect record or a verifiers v1 Episode record)?")
        out.append((example_id, reward, is_correct))
    return out


def read_sealed(path: Path) -> tuple[list[tuple[object, float, float]], int, str]:
    """[(example_id, reward, correct)] of every complete row, dropped-line count, correctness rule.

    Streams the file line by line. The last line is dropped (and counted) when it has no
    trailing newline or is not JSON: a writer interrupted mid-line. A non-JSON line anywhere
    else is an error, and so is a row without a numeric reward.
    """
    if not path.is_file() or path.stat().st_size == 0:
        raise EvalParseError(
            f"{path}: eval rollouts missing or empty; the skill's procedure says 'Missing/empty eval_rollouts.jsonl -> abort': "
            "the arm cannot be scored; check train.log, then re-run with --restart"
        )
    out: list[tuple[object, float, float]] = []
    rules: set[str] = set()
    dropped = 0
    pending: EvalParseError | None = None  # a bad line is fatal only if another line follows it
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            if pending is not None:
                raise pending
            if not line.endswith(b"\n"):
                dropped += 1  # torn: the writer stopped mid-line (only the last line can lack a newline)
                continue
            try:
                scores = _sealed_fields(line, lineno, path)
            except _NotJson as e:
                pending = EvalParseError(str(e))
                continue
            for ex, reward, is_correct in scores:
                if ex is None:
                    ex = len(out)  # no example_id: fall back to the row's position (pairing by order)
                rules.add(RULE_IS_CORRECT if is_correct is not None else RULE_REWARD)
                correct = is_correct if is_correct is not None else (1.0 if reward >= 0.5 else 0.0)
                out.append((ex, reward, correct))
    if pending is not None:
        dropped += 1  # the final line was not JSON: torn, not fatal
    if len(rules) == 1:
        rule = rules.pop()
    else:
        rule = f"{RULE_IS_CORRECT} where present, else {RULE_REWARD}" if rules else RULE_IS_CORRECT
    return out, dropped, rule


def per_example(rows: list[tuple[object, float, float]]) -> list[ExampleScore]:
    """Mean reward and mean correctness of each example over its rollouts, in first-seen order."""
    acc: OrderedDict[object, list[float]] = OrderedDict()
    for ex, reward, correct in rows:
        s = acc.setdefault(ex, [0.0, 0.0, 0])
        s[0] += reward
        s[1] += correct
        s[2] += 1
    return [ExampleScore(example_id=ex, reward=r / n, correct=c / n) for ex, (r, c, n) in acc.items()]


def train_reward_mean(arm: ArmDir, up_to: int, last: int = TRAIN_MEAN_STEPS) -> tuple[float | None, list[int]]:
    """Mean of the per-step mean train rewards over the last `last` train steps <= up_to."""
    means, used = [], []
    for s in train_steps(arm, up_to)[-last:]:
        r = train_rewards(arm.train_file(s))
        if r:
            means.append(sum(r) / len(r))
            used.append(s)
    return (sum(means) / len(means) if means else None), used


def train_trajectory(arm: ArmDir, bucket: int = 20) -> list[dict]:
    """Mean train reward per `bucket`-step bucket:
    [{"steps": "1-20", "first_step": 1, "last_step": 20, "reward_mean": 0.41, "n_steps": 20}, ...].

    Steps 1..bucket form the first bucket (step 0, if the engine logs one, joins it),
    matching the skill's procedure's "trajectory by 20-step buckets".
    """
    buckets: dict[int, list[float]] = {}
    for s in train_steps(arm):
        r = train_rewards(arm.train_file(s))
        if r:
            buckets.setdefault(max(s - 1, 0) // bucket, []).append(sum(r) / len(r))
    return [
        {"steps": f"{b * bucket + 1}-{(b + 1) * bucket}", "first_step": b * bucket + 1, "last_step": (b + 1) * bucket,
         "reward_mean": round(sum(m) / len(m), 4), "n_steps": len(m)}
        for b, m in sorted(buckets.items())
    ]


def checkpoint_path(arm: ArmDir, step: int) -> str | None:
    """The arm's model at `step` as a directory `transformers` loads (the seed dialect's weights/step_N; in main's
    layout, which has none, `<arm>/model/step_N` assembled from the final filesystem broadcast:
    phases/hf_model.py), else its trainer checkpoint, else None."""
    loadable = arm.weights(step) if arm.layout.hf_weights else build_v1_model(arm, step)
    for p in (loadable, arm.trainer_ckpt(step)):
        if p is not None and p.exists():
            return str(p)
    return None


def eval_policy_step(arm: ArmDir, step: int) -> int | None:
    """The policy version the eval labelled `step` scored. The seed dialect evaluates checkpoint `step` itself. Main
    triggers that eval right after batch step-1 ships, on whatever policy inference holds (<= step-1,
    orchestrator.py:690 and 759); each eval episode records it (run.work.policy, orchestrator.py:919-924):
    the oldest is the one that counts. None when the records do not say."""
    if arm.layout.hf_weights:
        return step
    versions = set()
    try:
        with open(arm.eval_file(step), encoding="utf-8") as f:
            for line in f:
                try:
                    policy = (((json.loads(line).get("run") or {}).get("work") or {}).get("policy") or {})
                except (json.JSONDecodeError, AttributeError):
                    continue
                if isinstance(policy.get("start"), int):
                    versions.add(policy["start"])
    except OSError:
        return None
    return min(versions) if versions else None


def summarize(arm: ArmDir, *, step: int, expected_examples: int, source: str = "trained",
              key: str | None = None) -> EvalSummary:
    """Aggregate the final eval file of `arm` into an EvalSummary (no file written)."""
    path = eval_file(arm, step)
    rows, dropped, rule = read_sealed(path)
    if len(rows) < expected_examples:
        torn = f" ({dropped} torn line dropped)" if dropped else ""
        raise EvalAggregationError(
            f"{path}: {len(rows)} complete eval rows{torn}, expected at least {expected_examples}; "
            "the eval did not finish; re-run with --restart"
        )
    examples = per_example(rows)
    n = len(rows)
    successes = sum(e.correct for e in examples)
    lo, hi = wilson_interval(successes, len(examples))  # examples, not rollouts, are the independent units
    train_mean, train_used = train_reward_mean(arm, step)
    ckpt = checkpoint_path(arm, step)
    run_dir = RunDir(arm.dir.parent)  # paths inside the run dir are stored relative to it
    return EvalSummary(
        arm=key or arm_key(arm),
        eval_acc=sum(c for _, _, c in rows) / n,
        eval_reward_mean=sum(r for _, r, _ in rows) / n,
        n_eval=n,
        n_examples=len(examples),
        acc_ci95=(lo, hi),
        train_reward_mean=train_mean,
        train_reward_steps=train_used,
        checkpoint=run_dir.rel(ckpt) if ckpt else None,
        final_step=step,
        eval_policy_step=eval_policy_step(arm, step),
        source=source,
        eval_file=run_dir.rel(path),
        dropped_lines=dropped,
        correct_rule=rule,
        per_example=examples,
    )


_CONTROL_KEYS = {dirname: key for key, dirname in CONTROL_ARMS.items()}


def arm_key(arm: ArmDir) -> str:
    """metrics.json key of an arm: "iter_N", or "run_a"/"run_b"/"run_c" for the control dirs."""
    return _CONTROL_KEYS.get(arm.name, arm.name)


def _iter_of(key: str) -> int | None:
    return int(key[5:]) if key.startswith("iter_") and key[5:].isdigit() else None


def record_summary(rd: RunDir, summary: EvalSummary, *, key: str | None = None, rows: int | None = None) -> IterRecord:
    """Append (or replace) the arm's record in metrics.json; idempotent."""
    key = key or summary.arm
    rec = IterRecord(
        arm=key, iter=_iter_of(key),
        eval_acc=summary.eval_acc, eval_reward_mean=summary.eval_reward_mean, n_eval=summary.n_eval,
        acc_ci95=summary.acc_ci95, train_reward_mean=summary.train_reward_mean, rows=rows,
        checkpoint=summary.checkpoint, final_step=summary.final_step, eval_policy_step=summary.eval_policy_step,
        source=summary.source, ts=time.time(),
        eval_split=evaluated_split(hub_env_of(rd)),
    )
    rd.record_arm(rec)
    return rec


@contextlib.contextmanager
def abort_run_on_unparseable_eval(ctx: RunContext, arm: str) -> Iterator[None]:
    """The skill's procedure's rule for iter_0 and every iter_N: "Validate eval_summary.json after every iter.
    Parse failure -> abort." An eval file that is missing, empty or does not parse sets run.json
    status "aborted" with the reason, then re-raises in one line. (Phase 4 arms do not abort the
    run: their failures go to run.json phase4_errors and the others proceed.)"""
    try:
        yield
    except EvalParseError as e:
        problem = str(e).split("; ")[0]
        rd = ctx.rd
        cfg = ctx.cfg.model_copy(update={"status": "aborted", "reason": f"{arm}: final eval file failed to parse: {problem}"})
        rd.write_run(cfg)
        rd.append_scratchpad(f"## Run aborted\n\n{cfg.reason}. Next: `selfimprove finalize --run-dir {rd.root}`.\n")
        raise EvalParseError(f"{problem}; run aborted (run.json status=aborted: an eval that fails to parse ends the "
                             f"run); check {rd.arm(arm).train_log}, then `selfimprove finalize --run-dir {rd.root}`") from None


def aggregate_eval(
    arm: ArmDir, *, step: int, expected_examples: int, source: str = "trained",
    rd: RunDir | None = None, key: str | None = None, rows: int | None = None,
) -> EvalSummary:
    """Aggregate, write <arm>/eval_summary.json atomically, and record the arm in metrics.json.

    `rd` defaults to the arm's parent run dir; `key` (the metrics.json arm) to `arm_key(arm)`
    ("iter_N", or "run_a"/"run_b"/"run_c" for control dirs); `rows` is the arm's synthetic-dataset
    size (None = real data). Re-running replaces the record, never duplicates it.
    """
    summary = summarize(arm, step=step, expected_examples=expected_examples, source=source, key=key)
    write_model(arm.eval_summary, summary)
    fault_point(f"eval-recorded:{arm.name}")
    record_summary(rd or RunDir(arm.dir.parent), summary, key=key, rows=rows)
    return summary
