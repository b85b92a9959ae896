"""The dataset gate's row_fits_student rule, on the run's side (issue 36): which student, how many positions,
how much completion room, and the env's system prompt; the counting is student_limits.prompt_token_counts
(the engine's tokenizer and chat template) and the rule gates/dataset.check_rows_fit_student."""

from __future__ import annotations

from ..gates.common import GateReport
from ..gates.dataset import check_rows_fit_student
from ..rundir import ArmDir
from ..student_limits import prompt_token_counts, student_positions, trained_budget
from .arms import arm_knobs, teacher_overrides
from .context import RunContext


def fits_student_gate(ctx: RunContext, it: ArmDir, rows: list[dict]) -> GateReport | None:
    """Every row's prompt, counted as the engine counts it (its tokenizer, chat template and the env's system
    prompt), leaves the completion room within the student's positions: min(seq_len, its context), seq_len
    being the teacher's override or the canonical config's. The room is the train completion budget in force:
    the config's, or less when iter_0's engine cut it (its completion_budget.json, in the prior run's output for
    an iter_0 taken with --init-from). None when the student's
    positions or its tokenizer are not known here (a hub model: prime-rl checks at launch)."""
    cfg, hub = ctx.cfg, ctx.required_hub()
    overrides = teacher_overrides(it.dir / "overrides.toml", ctx.dialect, model=cfg.model,
                                  canonical=ctx.canonical_config())  # checked by the overrides gate already
    knobs = arm_knobs(ctx, overrides)
    positions = student_positions(cfg.model, knobs.get("seq_len"))
    if positions is None:
        return None
    questions = [r.get("question") if isinstance(r.get("question"), str) else None for r in rows]
    counted = prompt_token_counts(cfg.model, hub.system_prompt, [q for q in questions if q is not None])
    if counted is None:
        return None
    it_counts, how = iter(counted[0]), counted[1]
    tokens = [next(it_counts) if q is not None else None for q in questions]
    asked = knobs.get("train_max_tokens")
    # iter_0's own output, or the prior run's it was taken from (--init-from: run.json iter_0_path is absolute)
    iter0_out = ctx.rd.root / cfg.iter_0_path if cfg.iter_0_path else ctx.rd.iter(0).prime_out
    _positions0, in_force0 = trained_budget(iter0_out)
    candidates = [(asked, "the train budget the config asks"), (in_force0, "the train budget iter_0 trained with")]
    known = [(v, why) for v, why in candidates if isinstance(v, int) and 0 < v < positions]
    room, room_from = min(known) if known else (1, "at least one token")
    return check_rows_fit_student(rows, tokens, counted=how, positions=positions, room=room, model=cfg.model,
                                  room_from=room_from)
