"""How many tokens a completion may take, in training and in eval, for every arm of a run.

A canonical config that exists (prime-rl's configs/<dataset>/rl.toml, the project's, --config) keeps its
train budget, and every arm is evaluated with the procedure's EVAL_MAX_TOKENS. A config the tool
generates for a new env has no author to choose, so its budget follows the env's reference answers:
asking a student that writes "42" for 1024 training tokens and 2048 eval tokens only lets a rambling
completion run long, which on a CPU student is most of the wall time. `--max-completion-tokens`
(bootstrap, recorded in run.json) caps both budgets of every arm, whichever config they come from.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..models import HubEnv, RunConfig
from ..stack.prime_rl import EVAL_MAX_TOKENS, SEED_SEQ_LEN, SEED_TRAIN_MAX_TOKENS
from .introspect import is_qwen3

# Room beside the answer itself: the env's answer format (e.g. "<answer>...</answer>", 17 characters),
# a line break or two, and the end token.
FORMAT_ROOM = 32
ROUND_TO = 16
# The procedure's iter_0 eval budget over its train budget (2048 / 1024): eval never truncates
# what training allowed, with room to spare.
EVAL_OVER_TRAIN = 2
# Models that write a chain of thought before the answer (Qwen3 thinks unless told not to: introspect's
# is_qwen3; QwQ; R1-style distills; "thinking" checkpoints): their completions are not bounded by the answers.
_THINKS = re.compile(r"qwq|(?:^|[-_/])r1(?:$|[-_])|thinking", re.I)
# The built-in CPU students answer directly, whatever their env is called (build:si_reasoning_gym).
_BUILT_IN = ("selfimprove/", "build:")


def thinks_before_answering(model: str) -> bool:
    return not model.startswith(_BUILT_IN) and (is_qwen3(model) or bool(_THINKS.search(model)))


def generated_budget(hub: HubEnv, model: str, context: int | None, cap: int | None) -> dict[str, Any]:
    """run.json `generated_budget` for a config generated from hub_env.json: {"train", "eval", "rule"}, the
    rule being one sentence that states where each number came from (it heads the generated config).

    train: 2 x the longest TRAIN reference answer (characters, an upper bound on tokens for ASCII text) +
    FORMAT_ROOM, rounded up to 16; never more than the procedure's 1024 or half the student's positions
    (the prompt keeps the other half). A model that thinks before answering, or an env whose answers were
    not measured, gets that ceiling. eval: twice train, at most EVAL_MAX_TOKENS. `cap` lowers both.
    """
    ceiling, ceiling_why = SEED_TRAIN_MAX_TOKENS, f"the procedure's {SEED_TRAIN_MAX_TOKENS}"
    if context:
        half = max(1, min(SEED_SEQ_LEN, context) // 2)
        if half < ceiling:
            ceiling, ceiling_why = half, f"half of the student's {context} positions"
    lengths = hub.train_answer_chars or {}
    longest = lengths.get("longest")
    if thinks_before_answering(model):
        train = ceiling
        how = f"train = {ceiling_why} ({model} reasons before it answers, so the answers' lengths do not bound it)"
    elif not isinstance(longest, int):
        train = ceiling
        how = f"train = {ceiling_why} (the env's reference answers were not measured: hub_env.json train_answer_chars)"
    else:
        want = ROUND_TO * math.ceil((2 * longest + FORMAT_ROOM) / ROUND_TO)
        train = min(ceiling, want)
        how = (f"train = 2 x {longest} (the longest of {lengths.get('rows')} TRAIN reference answers, in characters; "
               f"median {lengths.get('median')}) + {FORMAT_ROOM} for the answer format and end token, rounded up to "
               f"{ROUND_TO}" + (f" = {want}, capped at {ceiling_why}" if want > ceiling else ""))
    evals = min(EVAL_MAX_TOKENS, EVAL_OVER_TRAIN * train)
    how += f"; eval = {EVAL_OVER_TRAIN} x train" + (f", at most {EVAL_MAX_TOKENS}" if evals < EVAL_OVER_TRAIN * train else "")
    if cap is not None and (train > cap or evals > cap):
        how += f" ({train} / {evals}); --max-completion-tokens {cap} caps both"
        train, evals = min(train, cap), min(evals, cap)
    rule = f"train {train} / eval {evals} tokens: {how}"
    return {"train": train, "eval": evals, "rule": rule}


def eval_completion_tokens(cfg: RunConfig) -> int:
    """Every arm's eval completion budget: the generated config's when the tool wrote one, else the
    procedure's EVAL_MAX_TOKENS; --max-completion-tokens caps it. One value for all arms, so their eval
    numbers compare."""
    tokens = int((cfg.generated_budget or {}).get("eval") or EVAL_MAX_TOKENS)
    return min(tokens, cfg.max_completion_tokens) if cfg.max_completion_tokens else tokens


def capped_train_tokens(cfg: RunConfig, asked: int | None) -> int | None:
    """The train completion budget an arm asks for (the canonical config's, or the teacher's override),
    under --max-completion-tokens. None: no budget of its own (the engine gives what the prompt leaves)."""
    cap = cfg.max_completion_tokens
    if cap is None:
        return asked
    return cap if asked is None else min(asked, cap)
