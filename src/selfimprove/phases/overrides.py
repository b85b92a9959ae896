"""iter_N/overrides.toml: the teacher's per-iteration training knobs, checked where they enter.

    read_overrides(path, dialect, model=..., canonical=...) -> the file's dict, or GateFailed
    check_canonical_knobs(config, where)                     # the same ranges in a canonical config

The file is the teacher's, like weakness_report.md and gen_dataset.py, so every problem with
it is a failed gate (exit 4) naming the file, the key and the allowed range: a syntax error, a
key the loop pins or does not know, a value of the wrong type, a non-finite number, a value
out of range, or one the student cannot hold. `iterate` checks it before its report gate, so a
bad value stops the iteration before anything is generated, packaged or trained (before this
check, `seq_len = -5` trained until the engine refused and the advice was `--restart`, and
`temperature = nan` trained and was recorded as a flat iteration); the arms that replay it
(iter_N's training, Runs A and C in compare) read it through the same check. A canonical
config's values of the same keys, which every arm inherits, get the same type and range check
(`bootstrap --config`: exit 2; baseline, for a config found in a configs dir: exit 1).

Ranges: the engine schema types (prime-rl: seq_len / max_completion_tokens int, lr /
temperature float) with these bounds:
- seq_len: 1..the student's context when it is known (config.json), else 1..MAX_POSITIONS;
- max_completion_tokens: 1..(positions - 1), positions = min(seq_len, context): the prompt
  needs at least one position (student_limits.check_token_budget's rule);
- lr: 0 < lr <= MAX_LR (0 trains nothing, above 1 an Adam step is larger than any weight);
- temperature: 0 < t <= MAX_TEMPERATURE (0 makes every rollout of a group identical, so GRPO's
  advantages are all 0 and nothing is learnt; 2 is the OpenAI-compatible sampling API's cap).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError, GateFailed
from ..stack.dialects import SEED
from ..stack.prime_rl import SEED_SEQ_LEN, SEED_TRAIN_MAX_TOKENS

# Keys a teacher may change per iteration (the skill's procedure: "everything else is the
# teacher's discretion"); the pinned ones (steps, batch, rollouts, resume, envs)
# are not in this list and are refused. Each maps to its field in _Knobs.
TEACHER_KEYS = {
    "seq_len": "seq_len",
    "trainer.optim.lr": "lr",
    "orchestrator.train.sampling.temperature": "temperature",
    "orchestrator.train.sampling.max_completion_tokens": "max_completion_tokens",
}

MAX_POSITIONS = 1 << 20  # seq_len cap when the student's context is unknown (no model attends over more)
MAX_LR = 1.0
MAX_TEMPERATURE = 2.0

ALLOWED = {
    "seq_len": f"an integer from 1 to {MAX_POSITIONS} (and at most the student's context)",
    "lr": f"a finite number > 0 and <= {MAX_LR:g}",
    "temperature": f"a finite number > 0 and <= {MAX_TEMPERATURE:g} (0 gives GRPO identical rollouts: no signal)",
    "max_completion_tokens": "an integer >= 1, below seq_len (the prompt needs room)",
}


class _Knobs(BaseModel):
    """Types and static bounds; strict, so `lr = "fast"` or `seq_len = true` is not coerced."""

    model_config = ConfigDict(strict=True, extra="forbid")

    seq_len: int | None = Field(None, ge=1, le=MAX_POSITIONS)
    lr: float | None = Field(None, gt=0, le=MAX_LR, allow_inf_nan=False)
    temperature: float | None = Field(None, gt=0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_POSITIONS)


def _flatten(d: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _shown(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # TOML spells them nan / inf
    return repr(value)


def read_overrides(path: Path | None, dialect=SEED, *, model: str | None = None,
                   canonical: dict | None = None) -> dict:
    """The teacher's overrides (a nested dict as in the file; {} when there is none), checked.

    `model` (the student) bounds seq_len by its context when that is known; `canonical` (the
    canonical config) gives the seq_len / completion budget an override does not set, so
    `seq_len = 100` under a canonical budget of 128 tokens is refused too.
    """
    if path is None or not path.is_file():
        return {}
    try:
        data = dialect.read_toml(path)
    except ConfigError as e:
        raise GateFailed(f"{e}; fix or delete {path}") from None
    flat = _flatten(data)
    fields = ", ".join(sorted(TEACHER_KEYS))
    bad = sorted(k for k in flat if k not in TEACHER_KEYS)
    hint = next((h for h in map(dialect.other_dialect_key, bad) if h), None)
    if hint:
        raise GateFailed(f"{path}: {hint} (this run writes {dialect.DIALECT}); allowed keys: {fields}")
    if bad:
        raise GateFailed(f"{path}: key '{bad[0]}' is pinned by the loop or unknown; allowed: {fields}")
    if why := range_error(data):
        raise GateFailed(f"{path}: {why}")
    _check_fits_student(path, {TEACHER_KEYS[k]: v for k, v in flat.items()}, model, canonical or {}, dialect)
    return data


def range_error(config: dict) -> str | None:
    """"key = value is refused (why); allowed: range" for the first of TEACHER_KEYS in `config` (a
    nested TOML dict) whose type or value is out of range, else None. Other keys are not looked at."""
    by_field = {TEACHER_KEYS[k]: (k, v) for k, v in _flatten(config).items() if k in TEACHER_KEYS}
    try:
        _Knobs(**{f: v for f, (_k, v) in by_field.items()})
    except ValidationError as e:
        err = e.errors()[0]
        key, value = by_field[str(err["loc"][0])]
        return f"{key} = {_shown(value)} is refused ({err['msg'].lower()}); allowed: {ALLOWED[str(err['loc'][0])]}"
    return None


def check_canonical_knobs(config: dict, where: str) -> None:
    """The same types and ranges for the knobs of a canonical config (bootstrap --config, or one
    found in a configs dir), which every arm inherits: ConfigError naming `where` and the key."""
    if why := range_error(config):
        raise ConfigError(f"{where}: {why}; fix the file or pass another with --config")


def _check_fits_student(path: Path, knobs: dict, model: str | None, canonical: dict, dialect) -> None:
    from ..student_limits import model_context  # reads config.json only

    context, source = model_context(model) if model else (None, None)
    seq_len = knobs.get("seq_len")
    if context is not None and seq_len is not None and seq_len > context:
        raise GateFailed(f"{path}: seq_len = {seq_len} is more than {model} can attend over ({context} positions, "
                         f"{source}); allowed: 1 to {context}")
    tokens = knobs.get("max_completion_tokens")
    if seq_len is None and tokens is None:
        return  # the canonical config's own lengths were checked by baseline
    base = dialect.canonical_knobs(canonical) if canonical else {}
    eff_seq = seq_len if seq_len is not None else base.get("seq_len", SEED_SEQ_LEN)
    eff_tokens = tokens if tokens is not None else base.get("train_max_tokens", SEED_TRAIN_MAX_TOKENS)
    positions = min(x for x in (eff_seq, context) if isinstance(x, int))
    if not isinstance(eff_tokens, int) or eff_tokens < positions:
        return
    if tokens is not None:
        raise GateFailed(f"{path}: orchestrator.train.sampling.max_completion_tokens = {tokens} leaves no room for the "
                         f"prompt in {positions} positions (seq_len / the student's context); allowed: 1 to {positions - 1}")
    raise GateFailed(f"{path}: seq_len = {seq_len} leaves no room for the prompt beside the canonical completion "
                     f"budget of {eff_tokens} tokens; set seq_len above {eff_tokens}, or lower "
                     "orchestrator.train.sampling.max_completion_tokens in the same file")
