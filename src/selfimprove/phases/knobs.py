"""The training knobs in force for iteration N: what its arm will train with unless overrides.toml says otherwise.

    knobs = knobs_in_force(ctx, n)        # {"lr": ..., "temperature": ..., ...} from the merged rl.toml
    text = knobs_text(knobs)              # the lines both teachers read

A teacher that changes a knob in overrides.toml needs the value it replaces. The canonical file
alone is not it: the arm's rl.toml is the canonical knobs, the run's own flags (steps per run,
batch, rollouts), the iter_N defaults of the skill's procedure (seq_len, train tokens) and the teacher's overrides
merged by arms.resumed_arm_config. So the figures here are read back from that very builder's
output, for a placeholder train env, never restated: what is shown is what the arm gets.
`iterate` writes them to iter_N/knobs.json before the teacher stop (the agent reads it) and the
LLM teacher's request carries knobs_text.
"""

from __future__ import annotations

from ..rl.config import DEFAULT_LR
from ..stack.toml_paths import get_path
from .arms import resumed_arm_config, teacher_overrides
from .context import RunContext
from .evals import expected_eval_examples

KNOBS_FILE = "knobs.json"  # under iter_N/

# The knobs shown, by their seed path in rl.toml (the dialect spells each its own way: Dialect.key).
KNOB_PATHS = ("trainer.optim.lr", "orchestrator.train.sampling.temperature",
              "orchestrator.train.sampling.max_completion_tokens", "seq_len", "max_steps",
              "orchestrator.batch_size", "orchestrator.rollouts_per_example")
# What an unset knob means on the engine that trains it.
UNSET = {
    "local": {"trainer.optim.lr": DEFAULT_LR, "orchestrator.train.sampling.temperature": 1.0},
}


def knobs_in_force(ctx: RunContext, n: int) -> dict:
    """The knobs of iter_N's arm as its rl.toml will hold them (iter_N/overrides.toml applied when it
    exists and passes its checks), with where each comes from."""
    rd, cfg = ctx.rd, ctx.cfg
    f = rd.read_eval_summary(rd.iter(0)).final_step or 0
    overrides_file = rd.iter(n).dir / "overrides.toml"
    overrides = teacher_overrides(overrides_file if overrides_file.is_file() else None, ctx.dialect,
                                  model=cfg.model, canonical=ctx.canonical_config())
    config = resumed_arm_config(ctx, train_envs=[{"id": f"{cfg.dataset}_iter_{n}"}], resume_step=max(f, 1),
                                num_examples=expected_eval_examples(cfg, ctx.required_hub()), wandb_name=f"iter_{n}",
                                overrides=overrides)
    overridden = _flatten(overrides)
    values = {}
    for name in KNOB_PATHS:
        key = ctx.dialect.key(name)
        value = get_path(config, key)
        if value is None:
            default = UNSET.get(cfg.engine, {}).get(name)
            values[name] = {"value": default, "from": "not set: the engine's default"
                            + ("" if default is not None else " (see its docs)")}
        else:
            values[name] = {"value": value, "from": f"iter_{n}/overrides.toml" if key in overridden else "run config"}
    return {
        "iteration": n,
        "engine": cfg.engine,
        "resume_step": f,
        "steps_this_arm": cfg.steps_per_run,
        "knobs": values,
        "note": ("the merged rl.toml of this iteration's arm (canonical config + run flags + overrides.toml); "
                 "max_steps is absolute: the arm resumes at resume_step and trains steps_this_arm steps; "
                 "orchestrator.batch_size counts rollouts per step"),
    }


def _flatten(d: dict, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for k, v in d.items():
        path = f"{prefix}{k}"
        keys |= _flatten(v, f"{path}.") if isinstance(v, dict) else {path}
    return keys


def knobs_text(knobs: dict) -> str:
    """The knobs as lines a teacher reads: `key = value  (source)`."""
    lines = [f"Knobs in force for iter_{knobs['iteration']} (engine {knobs['engine']}; resumes iter_0's step "
             f"{knobs['resume_step']}, trains {knobs['steps_this_arm']} steps): {knobs['note']}"]
    for name, k in knobs["knobs"].items():
        lines.append(f"- {name} = {k['value'] if k['value'] is not None else '?'}  ({k['from']})")
    lines.append("overrides.toml may change only seq_len, trainer.optim.lr, orchestrator.train.sampling.temperature "
                 "and orchestrator.train.sampling.max_completion_tokens.")
    return "\n".join(lines)
