"""The teacher interface for unattended runs (`selfimprove run --teacher MODULE:OBJECT`).

A teacher is anything with `write(ctx: TeacherContext) -> None` (or a plain
function of ctx). Given one iteration's analysis inputs, it writes exactly:

- `ctx.iter_dir / "weakness_report.md"`: markdown with the YAML front matter
  the report gate validates (see `selfimprove.gates.report.WeaknessReport`);
- `ctx.iter_dir / "gen_dataset.py"`: the generator the tool runs and gates.

Optionally `overrides.toml` (per-iteration knobs, see phases/arms.py) and
`rewards.py` (custom rewards declared in the report; linted). It also writes
its sections of the iteration's scratchpad entry (1 understanding, 3 plan,
4 changes; from iteration 2 the previous entry's "what worked" line) with
`ctx.fill_scratchpad(...)`: the report gate refuses placeholders there. When a gate or
the generator fails, `write` is called again with `ctx.feedback` set to the
failure list; the teacher fixes the GENERATOR, never the rows.

The agent following SKILL.md is a teacher too: it does the same by hand.
A teacher that calls an LLM API fits here: build the prompt from
`ctx.failures_path`, `ctx.analysis` and `ctx.hub_env`, write the two files.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from .errors import UsageError
from .rundir import RunDir
from .scratchpad import fill_teacher_sections


@dataclass
class TeacherContext:
    """What a teacher may read for iteration N (TRAIN material only; eval rows are sealed)."""

    iteration: int
    iter_dir: Path
    run_dir: Path
    failures_path: Path  # up to 200 lowest-reward TRAIN rollouts of iter_{N-1}
    analysis: dict[str, Any]  # analysis.json: eval_acc_prev, reward by length quartile, histogram
    hub_env: dict[str, Any]  # hub_env.json: the real env's stack and answer format
    prior_iterations: list[Path] = field(default_factory=list)  # earlier iter dirs
    feedback: str | None = None  # the failure list when re-called after a gate/generator failure
    scratchpad_path: Path | None = None  # the run's scratchpad.md (None: a context without a run dir)

    def fill_scratchpad(self, sections: dict[int, str], worked_prev: str | None = None) -> list[str]:
        """Write this iteration's scratchpad sections {1: understanding, 3: plan, 4: changes} and, from
        iteration 2, `worked_prev` into the previous entry's "what worked" line. Only placeholders are
        replaced (what the teacher wrote before stays). Returns what is still a placeholder."""
        if self.scratchpad_path is None or not Path(self.scratchpad_path).is_file():
            return []
        return fill_teacher_sections(Path(self.scratchpad_path), self.iteration, sections, worked_prev)


class Teacher(Protocol):
    def write(self, ctx: TeacherContext) -> None: ...


def make_context(rd: RunDir, n: int, feedback: str | None = None) -> TeacherContext:
    it = rd.iter(n)
    return TeacherContext(
        iteration=n,
        iter_dir=it.dir,
        run_dir=rd.root,
        failures_path=it.dir / "failures.jsonl",
        analysis=json.loads((it.dir / "analysis.json").read_text(encoding="utf-8")),
        hub_env=json.loads(rd.hub_env_json.read_text(encoding="utf-8")),
        prior_iterations=[rd.iter(k).dir for k in range(1, n)],
        feedback=feedback,
        scratchpad_path=rd.scratchpad,
    )


def load_teacher(spec: str) -> Callable[[TeacherContext], None]:
    """'package.module:Object' or 'path/to/file.py:Object' -> a callable taking a TeacherContext.

    Object may be a class (instantiated without arguments), an instance with
    `.write`, or a function.
    """
    if ":" not in spec:
        raise UsageError(f"--teacher '{spec}': expected MODULE:OBJECT or path/to/file.py:OBJECT")
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise UsageError(f"--teacher '{spec}': file {path} not found")
        mod_name = f"selfimprove_teacher_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
        sys.modules[mod_name] = module
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise UsageError(f"--teacher '{spec}': cannot import {target} ({e}); is it on PYTHONPATH?") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise UsageError(f"--teacher '{spec}': {target} has no attribute '{attr}'")
    if isinstance(obj, type):
        obj = obj()
    write = getattr(obj, "write", obj)
    if not callable(write):
        raise UsageError(f"--teacher '{spec}': {attr} is neither callable nor has a write(ctx) method")
    return write
