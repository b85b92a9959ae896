"""The project's own canonical configs (configs/<dataset>/rl.toml) fitted to the model a run trains.

They are written for the built-in CPU student; `baseline.find_canonical` freezes iter_0's copy through
`shipped_for_another_model`, so a real model does not inherit the tiny student's seq_len, nor the seed-dialect
config's missing [inference].
"""

from __future__ import annotations

from pathlib import Path

from ..resources import project_configs_dirs
from ..stack.prime_rl import SEED_SEQ_LEN
from ..stack.toml_paths import get_path
from ..student_limits import model_context


def shipped_for_another_model(found: Path, canonical: dict, model: str) -> tuple[dict, str] | None:
    """(the config with its seq_len refitted, what changed) when `found` is one of the project's own canonical
    configs (configs/<dataset>/rl.toml, written for the built-in student it names in [model]) and the run trains
    another model; else None.

    Where seq_len comes from: the canonical config's top-level `seq_len` (prime-rl hands it to the trainer and
    the orchestrator), which every later arm inherits (`canonical_knobs`). The shipped configs set the tiny
    student's 256 positions; a real model given that would train on 256-token sequences. It gets the skill's procedure's
    SEED_SEQ_LEN instead, capped by the model's own context when its config.json is on this machine, as a
    canonical config generated from hub_env.json does.
    """
    shipped = any(found.resolve().is_relative_to(d.resolve()) for d in project_configs_dirs())
    their_model = get_path(canonical, "model.name")
    if not shipped or their_model in (None, model):
        return None
    context, _ = model_context(model)
    seq_len = min(SEED_SEQ_LEN, context) if context else SEED_SEQ_LEN
    data, why = dict(canonical), []
    if canonical.get("seq_len") not in (None, seq_len):
        data["seq_len"] = seq_len
        source = "its context" if context and context < SEED_SEQ_LEN else "the skill's procedure's default"
        why.append(f"seq_len {canonical['seq_len']} is {their_model}'s; {model} trains with seq_len {seq_len} ({source})")
    if "inference" not in canonical:
        # prime-rl starts its vLLM server only when [inference] is present, and every later arm's rl.toml has
        # one: without it iter_0 alone would need a server of its own (the CPU engine needs none)
        data["inference"] = {}
        why.append("[inference] added (prime-rl starts its inference server only with it)")
    return (data, "; ".join(why)) if why else None
