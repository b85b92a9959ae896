"""Rollouts: pick prompts from the envs' splits, sample completions from the
student, score them with each env's OWN rubric, and write prime-rl's records.

Scoring needs no model server: a verifiers `State` is filled the way a
SingleTurnEnv rollout leaves it (prompt, completion, a one-step trajectory so
the MultiTurnEnv `num_turns` metric works) and `env.rubric.score_rollout(state)`
does the rest. When a reward function raises, verifiers logs the error and
scores it 0; we keep verifiers' 0 and also record the error in the row
(verifiers' ErrorData shape) so a broken reward is visible, not silent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..errors import ConfigError, EnvNotFound
from .policy import generate
from .student import render_prompt
from .tasksets import TasksetEnv, score_tasks


@dataclass
class EnvSpec:
    """One [[orchestrator.train.env]] / [[orchestrator.eval.env]] block, loaded."""

    id: str
    name: str
    args: dict[str, Any]
    ratio: float | None
    env: Any  # the verifiers Environment
    rows: list[dict] = field(default_factory=list)  # the split in use (train or eval rows)
    num_examples: int | None = None  # eval only: per-env override
    rollouts_per_example: int | None = None  # eval only: per-env override


def load_env(env_id: str, args: dict[str, Any]):
    import verifiers as vf

    try:
        return vf.load_environment(env_id, **args)
    except (ValueError, ImportError, ModuleNotFoundError, RuntimeError) as e:
        module = env_id.replace("-", "_")  # verifiers' own env id -> module rule
        if folder := shadowing_folder(module):
            raise EnvNotFound(f"env id '{env_id}': module '{module}' resolved to the folder {folder} "
                              "(a directory without __init__.py, found on sys.path before the installed env, e.g. the "
                              "working directory); run from another directory or rename that folder") from None
        if "Could not import" in str(e) or isinstance(e, ImportError):
            raise EnvNotFound(f"env id '{env_id}': not installed or not importable ({str(e).splitlines()[0]})") from None
        raise


def shadowing_folder(module: str) -> str | None:
    """The folder a module name imports as when it is a namespace package (a plain directory, such as an env
    project named like its module in the working directory) rather than the installed module; else None."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin not in (None, "namespace") or not spec.submodule_search_locations:
        return None
    return str(list(spec.submodule_search_locations)[0])


def split_rows(env, split: str, n: int = -1) -> list[dict]:
    """Rows of the env's train or eval split: {prompt (messages), answer, info, example_id}."""
    ds = env.get_dataset(n=n) if split == "train" else env.get_eval_dataset(n=n)
    if ds is None or len(ds) == 0:
        raise ConfigError(f"env '{getattr(env, 'env_id', '?')}': its {split} split is empty")
    cols = ds.column_names
    # to_list converts the Arrow table in one go: iterating the Dataset decodes row by row, ~4x slower on
    # the embedded env's 20,000 rows (1.4 s of every engine start)
    return [{"prompt": r["prompt"],
             "answer": r.get("answer", "") if "answer" in cols else "",
             "info": r.get("info") or {},
             "example_id": r["example_id"] if "example_id" in cols else i}
            for i, r in enumerate(ds.to_list())]


def check_encodable(tok, spec: "EnvSpec", split: str) -> None:
    """Refuse an env whose prompts or answers the tokenizer maps to <unk>.

    The built-in students' tokenizer knows printable ASCII only; decoding skips
    <unk>, so an accented prompt would be read with holes and an accented answer
    could never be written: the run would measure nothing. Tokenizers without an
    unknown token (byte-level BPE) encode everything and are not checked.
    """
    unk = tok.unk_token_id
    if unk is None:
        return
    texts: list[str] = []
    for r in spec.rows:
        texts += [m["content"] for m in r["prompt"] if isinstance(m, dict) and isinstance(m.get("content"), str)]
        texts.append(str(r["answer"]))
    for text, ids in zip(texts, tok(texts, add_special_tokens=False)["input_ids"]):
        if unk in ids:
            bad = sorted({c for c in text if unk in tok(c, add_special_tokens=False)["input_ids"]})
            shown = ", ".join(repr(c) for c in bad[:5]) or "its text"
            raise ConfigError(f"env '{spec.id}' ({split} split): the model's tokenizer cannot encode {shown} (it would "
                              "read <unk> and never write them); use a model whose tokenizer covers the env's text")


# ------------------------------------------------------------------ scoring


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _rubric_loggers(rubric) -> list[logging.Logger]:
    out = [rubric.logger]
    for sub in getattr(rubric, "rubrics", []) or []:
        out.extend(_rubric_loggers(sub))
    return out


def score_completions(env, rows: list[dict], texts: list[str], truncated: list[bool] | None = None) -> list[dict]:
    """Score each (row, completion text) with env.rubric.score_rollout; returns reward/metrics/error/seconds."""
    import verifiers as vf

    loggers = _rubric_loggers(env.rubric)
    truncated = truncated or [False] * len(rows)

    async def run() -> list[dict]:
        results = []
        cap = _Capture()
        for lg in loggers:
            lg.addHandler(cap)
        try:
            for row, text, trunc in zip(rows, texts, truncated):
                completion = [{"role": "assistant", "content": text}]
                state = vf.State(input={"prompt": row["prompt"], "answer": row["answer"],
                                        "info": row.get("info") or {}, "example_id": row["example_id"]})
                state["prompt"] = row["prompt"]
                state["completion"] = completion
                state["trajectory"] = [{"prompt": row["prompt"], "completion": completion, "is_truncated": trunc}]
                state["is_completed"] = True
                state["is_truncated"] = trunc
                cap.messages.clear()
                t0 = time.perf_counter()
                try:
                    await env.rubric.score_rollout(state)
                    error = None
                    if cap.messages:
                        error = {"error": "RewardFunctionError", "message": cap.messages[0],
                                 "error_chain_repr": "; ".join(cap.messages), "error_chain_str": "; ".join(cap.messages)}
                    reward = float(state.get("reward") or 0.0)
                    metrics = {k: float(v) for k, v in (state.get("metrics") or {}).items()}
                except Exception as e:  # the rubric itself failed (not one reward function)
                    reward, metrics = 0.0, {}
                    error = {"error": type(e).__name__, "message": str(e) or type(e).__name__,
                             "error_chain_repr": repr(e), "error_chain_str": str(e)}
                results.append({"reward": reward, "metrics": metrics, "error": error,
                                "scoring_s": time.perf_counter() - t0})
        finally:
            for lg in loggers:
                lg.removeHandler(cap)
        return results

    return asyncio.run(run())


# ------------------------------------------------------------------ rollouts


# Completions sampled in one batch. 512 keeps the tiny student's 2 cores busy; a pretrained model of
# 100M+ parameters takes minutes for 512, so it samples 8 at a time and the log shows its progress within
# a minute. The chunk decides the order of the random draws, so it is fixed per model size: the tiny
# student's figures (the README's demo) are the ones 512 gives.
SAMPLING_CHUNK = 512
SAMPLING_CHUNK_LARGE = 8
LARGE_MODEL_PARAMS = 20_000_000


def sampling_chunk(n_params: int) -> int:
    return SAMPLING_CHUNK if n_params < LARGE_MODEL_PARAMS else SAMPLING_CHUNK_LARGE


def sampling_line(what: str, done: int, total: int, secs: float) -> str:
    """The engine's sampling progress line (the watcher parses it: engines/rollouts.py student_build_note)."""
    return f"Sampling {what}: {done}/{total} completions ({secs:.0f}s)"


def run_rollouts(model, tok, spec_rows: list[tuple[EnvSpec, dict]], *, n: int, temperature: float,
                 max_tokens: int, generator: torch.Generator | None, chunk: int = SAMPLING_CHUNK,
                 on_chunk: Callable[[int, int], None] | None = None,
                 on_token: Callable[[int, int], None] | None = None) -> list[dict]:
    """`n` samples of each (env, row); returns one prime-rl record per sample, grouped per row.
    `on_chunk(done, total)` is called after each sampled chunk, `on_token(done, total)` after each token
    position of one (the engine logs progress with them, at most every 20 s: 8 completions of 2,000
    tokens from a 135M model take minutes).

    Records keep the token ids under the private key `_ids` (prompt, completion)
    for the update, and for a v1 source its Task and scored Trace (`_task`, `_trace`)
    for the Episode rows; `strip_private` removes them before writing a seed row.
    """
    prompts, owners = [], []
    for spec, row in spec_rows:
        ids = render_prompt(tok, row["prompt"])
        for _ in range(n):
            prompts.append(ids)
            owners.append((spec, row))
    t0 = time.time()
    comps, truncs = [], []
    model.eval()
    for i in range(0, len(prompts), chunk):
        c, tr = generate(model, prompts[i : i + chunk], max_new_tokens=max_tokens, temperature=temperature,
                         eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, generator=generator,
                         on_token=None if on_token is None else (lambda: on_token(len(comps), len(prompts))))
        comps += c
        truncs += tr
        if on_chunk is not None:
            on_chunk(len(comps), len(prompts))
    gen_s = time.time() - t0
    texts = [tok.decode(c, skip_special_tokens=True) for c in comps]

    # score per env (each env's own rubric), keeping the original order
    scores: list[dict | None] = [None] * len(prompts)
    by_env: dict[int, list[int]] = {}
    for i, (spec, _) in enumerate(owners):
        by_env.setdefault(id(spec), []).append(i)
    for idx in by_env.values():
        spec = owners[idx[0]][0]
        scorer = score_tasks if isinstance(spec.env, TasksetEnv) else score_completions  # v1 taskset or classic env
        res = scorer(spec.env, [owners[i][1] for i in idx], [texts[i] for i in idx], [truncs[i] for i in idx])
        for i, r in zip(idx, res):
            scores[i] = r

    sampling_args = {"temperature": temperature, "max_tokens": max_tokens}
    per_gen = gen_s / max(1, len(prompts))
    records = []
    for i, (spec, row) in enumerate(owners):
        s = scores[i]
        records.append({
            "example_id": row["example_id"],
            "prompt": row["prompt"],
            "completion": [{"role": "assistant", "content": texts[i]}],
            "answer": row["answer"],
            "info": row.get("info") or {},
            "reward": s["reward"],
            "metrics": s["metrics"],
            "timing": {"generation_ms": per_gen * 1000, "scoring_ms": s["scoring_s"] * 1000,
                       "total_ms": (per_gen + s["scoring_s"]) * 1000},
            "is_completed": True,
            "is_truncated": truncs[i],
            "stop_condition": "max_tokens" if truncs[i] else "eos",
            "error": s["error"],
            "token_usage": {"input_tokens": float(len(prompts[i])), "output_tokens": float(len(comps[i]))},
            "sampling_args": sampling_args,
            "env_name": spec.name,
            "_ids": (prompts[i], comps[i]),
            "_env_id": spec.id,
            "_task": row.get("_task"),  # v1 sources: the Task, and the Trace it scored (episode rows)
            "_trace": s.get("trace"),
        })
    return records


def strip_private(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if not k.startswith("_")}
