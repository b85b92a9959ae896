"""The teacher interface for unattended runs (`selfimprove run --teacher MODULE:OBJECT`).

A teacher is anything with `write(ctx: TeacherContext) -> None` (or a plain
function of ctx). Given one iteration's analysis inputs, it writes exactly:

- `ctx.iter_dir / "weakness_report.md"`: markdown with the YAML front matter
  the report gate validates; build a `WeaknessReport` (re-exported here with
  `Domain`, `SubDomain`, `Bucket`, `Feature`) and `write_weakness_report` writes it;
- `ctx.iter_dir / "gen_dataset.py"`: the generator the tool runs and gates.

Optionally `overrides.toml` (per-iteration knobs, see phases/arms.py) and
`rewards.py` (custom rewards declared in the report; linted). It also writes
its sections of the iteration's scratchpad entry (1 understanding, 3 plan,
4 changes; from iteration 2 the previous entry's "what worked" line) with
`ctx.fill_scratchpad(...)`: the report gate refuses placeholders there. When a gate or
the generator fails, `write` is called again with `ctx.feedback` set to the
failure list; the teacher fixes the GENERATOR, never the rows.

The agent following SKILL.md is a teacher too: it does the same by hand.
Its best input is `ctx.weakness` (iter_N/weakness_stats.json, the same figures
`selfimprove weaknesses` shows): per prompt group of the real train split, how
often iter_0 solved it over its run, and a class (never / rare / learning /
solved). examples/minimal_teacher.py is a complete teacher built on it.
A teacher that calls an LLM API fits here; the built-in one is selfimprove.llm_teacher
(`--teacher llm:MODEL`), which sends SKILL.md's teacher sections and these inputs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import yaml

from .errors import SelfImproveError, TeacherError, TeacherUnreachable, UsageError
from .gates.report import Bucket, CustomReward, Domain, Feature, SubDomain, WeaknessReport
from .resources import project_file
from .rundir import RunDir, atomic_write_text, read_json_object, require_json_object
from .scratchpad import fill_teacher_sections

# Per iteration, for every teacher: the first write plus fixes after failures. `run` and
# `iterate --teacher` stop after this many failed gates; the LLM teacher also re-asks a reply
# it cannot use at most this many times.
MAX_TEACHER_ATTEMPTS = 4


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
    weakness: dict[str, Any] | None = None  # weakness_stats.json: {"real": ..., "previous": ...} (see selfimprove.weakness)

    def fill_scratchpad(self, sections: dict[int, str], worked_prev: str | None = None) -> list[str]:
        """Write this iteration's scratchpad sections {1: understanding, 3: plan, 4: changes} and, from
        iteration 2, `worked_prev` into the previous entry's "what worked" line. Only placeholders are
        replaced (what the teacher wrote before stays). Returns what is still a placeholder."""
        if self.scratchpad_path is None or not Path(self.scratchpad_path).is_file():
            return []
        return fill_teacher_sections(Path(self.scratchpad_path), self.iteration, sections, worked_prev)


__all__ = ["TeacherContext", "Teacher", "write_weakness_report", "WeaknessReport", "Domain", "SubDomain", "Bucket",
           "Feature", "CustomReward", "load_teacher", "call_teacher", "make_context"]


class Teacher(Protocol):
    def write(self, ctx: TeacherContext) -> None: ...


def make_context(rd: RunDir, n: int, feedback: str | None = None) -> TeacherContext:
    it = rd.iter(n)
    return TeacherContext(
        iteration=n,
        iter_dir=it.dir,
        run_dir=rd.root,
        failures_path=it.dir / "failures.jsonl",
        analysis=require_json_object(it.dir / "analysis.json",
                                     f"delete {it.dir / 'skeletons.json'} and re-run `selfimprove run --run-dir {rd.root}` "
                                     "to redo the analysis"),
        hub_env=require_json_object(rd.hub_env_json, f"re-run `selfimprove introspect --run-dir {rd.root}`"),
        prior_iterations=[rd.iter(k).dir for k in range(1, n)],
        feedback=feedback,
        scratchpad_path=rd.scratchpad,
        weakness=read_json_object(it.dir / "weakness_stats.json"),
    )


def write_weakness_report(path: Path, report: WeaknessReport, body: str = "") -> Path:
    """Write `report` as weakness_report.md: its YAML front matter, then `body` (markdown for humans).

    The model's own validation runs when the report is built; the gate's rules across fields
    (bucket sums, severity order, ...) run at `iterate`, as for any teacher."""
    front = yaml.safe_dump(report.model_dump(mode="json", exclude_defaults=True), sort_keys=False, allow_unicode=True)
    atomic_write_text(Path(path), f"---\n{front}---\n\n{body.strip()}\n")
    return Path(path)


def _teacher_file(target: str) -> Path:
    """A teacher file: relative to the cwd if it is there, else one the project ships
    (examples/arith_teacher.py), so the default --teacher works from any directory."""
    path = Path(target).expanduser()
    if path.is_absolute() or path.resolve().is_file():
        return path.resolve()
    try:
        return project_file(target).resolve()
    except SelfImproveError:
        return path.resolve()  # not shipped either: "not found" names the cwd-relative path


def _where(e: BaseException, path: Path | None) -> str:
    """'SyntaxError: invalid syntax (line 3)': the error and, when known, its line in the teacher file."""
    line = getattr(e, "lineno", None) if isinstance(e, SyntaxError) else None
    if line is None and path is not None:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).resolve() == path]
        line = frames[-1].lineno if frames else None
    msg = (str(e).splitlines() or [""])[0]
    return f"{type(e).__name__}: {msg}" + (f" (line {line})" if line else "")


def call_teacher(write: Callable[[TeacherContext], None], ctx: TeacherContext, rerun: str | None = None) -> None:
    """Call the teacher; an exception in it becomes a TeacherError naming the iteration, with the
    full traceback in iter_N/teacher_error.log (the run resumes after the teacher is fixed).
    `rerun` is the command that resumes (default `selfimprove run --run-dir R`)."""
    rerun = rerun or f"selfimprove run --run-dir {ctx.run_dir}"
    try:
        write(ctx)
    except (TeacherError, TeacherUnreachable):
        raise  # already one line naming the fix (the built-in LLM teacher's API errors: exit 1 / exit 75)
    except (Exception, SystemExit) as e:  # noqa: BLE001  (the teacher is user code; sys.exit() too)
        log = ctx.iter_dir / "teacher_error.log"
        with contextlib.suppress(OSError):
            log.write_text(traceback.format_exc(), encoding="utf-8")
        raise TeacherError(
            f"{ctx.iter_dir}: the teacher's write() raised {type(e).__name__}: {(str(e).splitlines() or [''])[0]} "
            f"(traceback in {log}); fix the teacher and re-run `{rerun}`"
        ) from None


def load_teacher(spec: str) -> Callable[[TeacherContext], None]:
    """'package.module:Object' or 'path/to/file.py:Object' -> a callable taking a TeacherContext.

    Object may be a class (instantiated without arguments), an instance with
    `.write`, or a function.
    """
    if ":" not in spec:
        raise UsageError(f"--teacher '{spec}': expected MODULE:OBJECT or path/to/file.py:OBJECT")
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py"):
        path = _teacher_file(target)
        if not path.is_file():
            raise UsageError(f"--teacher '{spec}': file {path} not found")
        mod_name = f"selfimprove_teacher_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
        sys.modules[mod_name] = module
        try:
            module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        except (Exception, SystemExit) as e:  # noqa: BLE001  (a syntax error, a failed import, sys.exit() at import)
            sys.modules.pop(mod_name, None)
            raise TeacherError(f"--teacher '{spec}': {path} failed to load: {_where(e, path)}; fix the file") from None
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise UsageError(f"--teacher '{spec}': cannot import {target} ({e}); is it on PYTHONPATH?") from None
        except (Exception, SystemExit) as e:  # noqa: BLE001
            raise TeacherError(f"--teacher '{spec}': module {target} failed to load: {_where(e, None)}; fix it") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise UsageError(f"--teacher '{spec}': {target} has no attribute '{attr}'")
    if isinstance(obj, type):
        try:
            obj = obj()
        except (Exception, SystemExit) as e:  # noqa: BLE001
            raise TeacherError(f"--teacher '{spec}': {attr}() raised {_where(e, None)}; fix its constructor") from None
    write = getattr(obj, "write", obj)
    if not callable(write):
        raise UsageError(f"--teacher '{spec}': {attr} is neither callable nor has a write(ctx) method")
    return write
