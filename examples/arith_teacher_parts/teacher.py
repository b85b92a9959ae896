"""ArithTeacher, the object the tool calls, and the stand-alone command line.

`ArithTeacher.write(ctx)` is the teacher contract (selfimprove.teacher): it plans
(plan.py), writes weakness_report.md (report.py), checks the planned rows
in-process (check.py) and re-plans with fresh numbers and stricter margins until
they pass (stepping stones dropped as a last resort), then writes gen_dataset.py
(generator.py) and fills its sections of the run's scratchpad. On a re-call
after a failed gate (`ctx.feedback`), `_retry_state` moves to SEED_OFFSET + 10
and reads the failed rule ids. The TRAIN split's questions are loaded here (the
env's classic dataset, or a verifiers v1 Taskset's train tasks), cached per env
for the process, and indexed by structure for the planner.

`_main` is `python examples/arith_teacher.py --run-dir R --iteration N`: one
write for an existing run dir, with a bare context (`_Context`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from . import check, generator, report
from .cells import Plan
from .observe import Obs, _message_text, _obs, _read_json
from .plan import _Planner
from .expr import parse_expr
from .settings import TOTAL_ROWS

SERVES = "selfimprove-arith and envs like it (questions that are bare arithmetic expressions such as 85-(40-12))"


def refuse_other_envs(hub_env: dict) -> None:
    """One line, before any work, when the real env's TRAIN samples are not bare arithmetic expressions:
    this teacher's planner parses every question as one, and would fail deep inside on anything else."""
    samples = [s["question"] for s in hub_env.get("train_samples") or []]
    other = [q for q in samples if parse_expr(q.strip()) is None]
    if other:
        from selfimprove.errors import TeacherError

        raise TeacherError(
            f"examples/arith_teacher.py serves {SERVES} only; env '{hub_env.get('env_id')}' asks e.g. "
            f"{other[0][:60]!r}: use --teacher llm:MODEL, a coding agent (docs/how-to/coding-agent.md), or "
            "a teacher of your own (docs/how-to/write-teacher.md)")


class ArithTeacher:
    """The scripted teacher: `write(ctx)` writes weakness_report.md and gen_dataset.py into ctx.iter_dir.

    `ctx` needs the fields of `selfimprove.teacher.TeacherContext` (iteration,
    iter_dir, run_dir, failures_path, analysis, hub_env, prior_iterations,
    feedback); any object with those attributes works. `train_questions`
    (optional) replaces loading the real env's TRAIN split, e.g. in tests.
    """

    _train_cache: dict[str, list[str]] = {}

    def __init__(self, train_questions: list[str] | None = None, total_rows: int = TOTAL_ROWS):
        self.train_questions = train_questions
        self.total_rows = total_rows
        self._index: tuple[int, dict] | None = None
        self.last_plan: Plan | None = None

    # ------------------------------------------------------------ entry point

    def write(self, ctx) -> None:
        refuse_other_envs(ctx.hub_env)
        iter_dir = Path(ctx.iter_dir)
        offset, rules = self._retry_state(iter_dir, ctx.feedback)
        plan, problems = None, ["not planned"]
        # Our own simulation failed a gate: fresh numbers, stricter margins, one more domain. Stepping stones
        # are feature-poor (short expressions), so when no plan with them meets the procedure's bars, the teacher
        # plans without them rather than hand the tool a dataset that fails its gate.
        for stones in (True, False):
            for attempt in range(4):
                plan = self.plan(ctx, offset=offset + attempt, strict=bool(rules) or attempt > 0, rules=rules,
                                 widen=attempt, stones=stones)
                _atomic_write(iter_dir / "weakness_report.md", self.render_report(ctx, plan, rules))
                problems = self.self_check(ctx, plan)
                plan.stats["self_check"] = problems or ["passed"]
                if not problems:
                    break
                plan.notes.append(f"self-check with seed offset {offset + attempt} failed ({'; '.join(problems)}); re-planned")
            if not problems:
                break
        if not plan.stats.get("stones"):
            plan.notes.append("no stepping stones: no structure is hopeless, or no plan with stones met the procedure's bars")
        _atomic_write(iter_dir / "weakness_report.md", self.render_report(ctx, plan, rules))
        _atomic_write(iter_dir / "gen_dataset.py", self.render_generator(ctx, plan))
        self.last_plan = plan  # what was written, including the rows gen_dataset.py will produce
        fill = getattr(ctx, "fill_scratchpad", None)  # absent on a bare context (tests, stand-alone without a run)
        if fill is not None:
            fill(self.scratchpad_sections(ctx, plan), worked_prev=self.worked_line(ctx))

    def scratchpad_sections(self, ctx, plan: Plan) -> dict[int, str]:
        """Sections 1 (understanding), 3 (plan) and 4 (changes) of this iteration's scratchpad entry."""
        st = plan.stats
        understanding = [f"{st['failures']} failed train rollouts in failures.jsonl; success per structure measured on "
                         f"{st['anchor_rollouts']} train rollouts of the anchor. By weighted severity:"]
        understanding += [f"- {d.label} ({d.severity}): {d.evidence}" for d in plan.domains]
        buckets = [f"- ({d.label}, {c.sub_label}) -> {c.rows} rows, {'train-split instances' if c.mode == 'pool' else 'fresh operands'}"
                   for d in plan.domains for c in d.cells]
        data = ([f"One template per bucket (the failed prompts' skeleton + the bucket's carry profile), exact solver, "
                 f"column-by-column derivation; seed offset {plan.seed_offset}. Questions stay bare expressions like "
                 "the real split, so the varied axes are depth (operations + carries) and number characteristics "
                 "(zero digits, result width); no question of an earlier iteration or of failures.jsonl is reused."]
                + buckets)
        return {1: "\n".join(understanding), 3: "\n".join(data),
                4: "None: no overrides.toml and no custom reward (the real rubric alone, same hyperparameters as iter_0)."}

    @staticmethod
    def worked_line(ctx) -> str | None:
        """The previous iteration's "what worked" line, from its record (None before iteration 2)."""
        if ctx.iteration < 2:
            return None
        rec = _read_json(Path(ctx.run_dir) / f"iter_{ctx.iteration - 1}" / "record.json") or {}
        if not rec:
            return None
        return (f"eval_acc {rec.get('eval_acc', float('nan')):.3f}, verdict {rec.get('verdict')}; the scripted teacher "
                f"carries over nothing by hand: iter_{ctx.iteration} re-ranks the structures on fresh train rollouts.")

    def plan(self, ctx, *, offset: int = 0, strict: bool = False, rules: set[str] | None = None, widen: int = 0,
             stones: bool = True) -> Plan:
        """Decide everything for one write (no file is written)."""
        return _Planner(self, ctx, offset, strict, rules or set(), widen, stones).run()

    # ------------------------------------------------------------ inputs

    @staticmethod
    def _retry_state(iter_dir: Path, feedback: str | None) -> tuple[int, set[str]]:
        """(seed offset, failed rule ids): a re-call after a failure moves to fresh numbers."""
        if not feedback:
            return 0, set()
        prev = 0
        gen = iter_dir / "gen_dataset.py"
        if gen.is_file():
            m = re.search(r"^SEED_OFFSET = (\d+)", gen.read_text(encoding="utf-8"), re.M)
            prev = int(m.group(1)) if m else 0
        rules = set(re.findall(r"\[([a-z0-9_]+)\]", feedback)) or {"generator"}
        return prev + 10, rules

    def _load_train_questions(self, ctx, anchor: list[Obs]) -> tuple[list[str], str]:
        """The real env's TRAIN split questions (never eval), or the anchor's rollout questions as a fallback."""
        if self.train_questions is not None:
            return list(self.train_questions), "given to the teacher"
        hub = ctx.hub_env or {}
        key = json.dumps([hub.get("env_id"), hub.get("env_args") or {}], sort_keys=True)
        if key not in self._train_cache:
            try:
                self._train_cache[key] = self._classic_train_questions(hub)
            except Exception as e:  # noqa: BLE001 - no classic side (a Taskset-only env), or it fails to load
                if hub.get("api") == "verifiers.v1" and hub.get("taskset"):
                    self._train_cache[key] = self._taskset_train_questions(hub["taskset"])
                else:
                    print(f"arith_teacher: could not load the train split of {hub.get('env_id')} ({e}); "
                          f"using the anchor's rollout questions", file=sys.stderr)
                    return sorted({o.question for o in anchor}), "the anchor's train rollouts (train split not loadable)"
        return self._train_cache[key], f"the TRAIN split of {hub.get('env_id')}"

    @staticmethod
    def _classic_train_questions(hub: dict) -> list[str]:
        import verifiers as vf

        env = vf.load_environment(hub["env_id"], **(hub.get("env_args") or {}))
        src = getattr(env, "dataset_source", None)  # the TRAIN split builder
        ds = src() if callable(src) else (src if src is not None else env.get_dataset())
        if "question" in ds.column_names:
            return [str(q) for q in ds["question"]]
        return [_message_text(p, "user") for p in ds["prompt"]]

    @staticmethod
    def _taskset_train_questions(taskset: dict) -> list[str]:
        """The user prompts of a verifiers v1 Taskset's TRAIN tasks (hub_env.json `taskset.train_args`)."""
        from selfimprove.stack.verifiers_v1 import load_tasks, prompt_messages  # the teacher runs in selfimprove's venv

        tasks = load_tasks(taskset["taskset_id"], taskset.get("train_args") or {})
        return [_message_text(prompt_messages(t), "user") for t in tasks]

    def _train_index(self, questions: list[str]) -> dict[str, list[Obs]]:
        """Train questions classified by structure (cached: the split does not change within a run)."""
        key = hash(tuple(questions))
        if self._index is None or self._index[0] != key:
            index: dict[str, list[Obs]] = defaultdict(list)
            for q in questions:
                o = _obs(q, 0.0)
                if o is not None:
                    index[o.key].append(o)
            self._index = (key, dict(index))
        return self._index[1]

    # ------------------------------------------------------------ self-check and rendering

    def self_check(self, ctx, plan: Plan) -> list[str]:
        """The skill's procedure's nine lines, duplicates and repeats of earlier iterations, on the rows the generator will write."""
        return check.self_check(ctx, plan)

    def render_report(self, ctx, plan: Plan, rules: set[str]) -> str:
        """weakness_report.md's text (report.py)."""
        return report.render_report(ctx, plan, rules)

    def render_generator(self, ctx, plan: Plan) -> str:
        """gen_dataset.py's text (generator.py)."""
        return generator.render_generator(ctx, plan)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ======================================================================
# Stand-alone use: one write for an existing run dir.
# ======================================================================


@dataclass
class _Context:
    iteration: int
    iter_dir: Path
    run_dir: Path
    failures_path: Path
    analysis: dict
    hub_env: dict
    prior_iterations: list
    feedback: str | None = None

    def fill_scratchpad(self, sections: dict, worked_prev: str | None = None) -> list:
        from selfimprove.scratchpad import fill_teacher_sections  # stand-alone use runs in selfimprove's venv

        pad = Path(self.run_dir) / "scratchpad.md"
        return fill_teacher_sections(pad, self.iteration, sections, worked_prev) if pad.is_file() else []


def _main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Write weakness_report.md and gen_dataset.py for one iteration.")
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--iteration", type=int, required=True, help="N >= 1; iter_N/ must hold failures.jsonl and analysis.json")
    ap.add_argument("--feedback", default=None, help="gate failure text, when fixing a failed attempt")
    args = ap.parse_args(argv)
    it = args.run_dir / f"iter_{args.iteration}"
    ctx = _Context(args.iteration, it, args.run_dir, it / "failures.jsonl", _read_json(it / "analysis.json") or {},
                   _read_json(args.run_dir / "hub_env.json") or {}, [args.run_dir / f"iter_{k}" for k in range(1, args.iteration)],
                   args.feedback)
    ArithTeacher().write(ctx)
    print(f"wrote {it / 'weakness_report.md'} and {it / 'gen_dataset.py'}")
    return 0
