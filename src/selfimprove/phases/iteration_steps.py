"""The steps of one Phase 3 iteration (see phases/iterate.py for the order).

Every step writes its artefact LAST and records the hashes of its inputs, so
"done" means "the artefact exists and was made from the current inputs".
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from string import Template
from typing import Callable

from ..errors import GateFailed, SelfImproveError, TeacherActionNeeded
from ..engines.gen_reads import hash_reads, reads_unchanged
from ..engines.generator import run_generator
from ..faults import fault_point
from ..gates.common import GateFailure, GateReport, merge_reports
from ..gates.dataset import check_dataset, load_dataset_jsonl
from ..gates.decontam import drop_eval_overlap
from ..gates.dedup import check_eval_overlap, check_near_duplicates
from ..gates.diversity import check_diversity
from ..gates.provenance import check_failure_provenance
from ..gates.ngram_hash import EvalNgramIndex
from ..gates.report import WeaknessReport, check_weakness_report, render_report_skeleton
from ..ui import terminal_safe
from ..gates.reward_lint import lint_reward_functions
from ..models import RunConfig
from ..resources import project_file
from ..scratchpad import TEACHER_SECTIONS, has_iteration_entry, marker, unfilled_teacher_sections
from ..rundir import ArmDir, RunDir, atomic_write_json, atomic_write_text, read_json_object
from ..ui import console
from ..stack.env_package import (count_rows, file_sha256, install_and_verify, installed_provenance,
                                 package_name, provenance_mismatch)
from ..engines.jobs import job_state, last_lines, read_job
from .analyze import weakness_line
from .gate_attempts import record_attempt
from .arms import stage, teacher_overrides, train_resumed_arm  # noqa: F401  (re-exported for iterate)
from .context import RunContext
from .student_fit import fits_student_gate
from .record import RESULTS_MARKER, RESULTS_PLACEHOLDER, record_iteration  # noqa: F401

_read_json = read_json_object  # a missing, damaged or non-object record means "step not done"


# ---------------------------------------------------------------- 2. analyze


def write_skeletons(ctx: RunContext, n: int, analysis: dict) -> None:
    """weakness_report.md and gen_dataset.py skeletons (never overwriting the teacher's files);
    skeletons.json (their hashes) last, so the teacher's edits are told from the skeletons."""
    rd = ctx.rd
    it = rd.iter(n)
    prev_acc = rd.read_eval_summary(rd.iter(n - 1)).eval_acc
    hashes = {}
    report = it.dir / "weakness_report.md"
    if not report.exists():
        atomic_write_text(report, render_report_skeleton(prev_acc, analysis))
    gen = it.dir / "gen_dataset.py"
    if not gen.exists():
        atomic_write_text(gen, render_generator_skeleton(ctx.required_hub(), n, ctx.dialect.env_api))
    for name in ("weakness_report.md", "gen_dataset.py"):
        hashes[name] = file_sha256(it.dir / name)
    old = _read_json(it.dir / "skeletons.json") or {}
    atomic_write_json(it.dir / "skeletons.json", {**hashes, **old})


def render_generator_skeleton(hub, n: int, env_api) -> str:
    """iter_n's gen_dataset.py skeleton; its real-env lines (load_environment and the parser's round
    trip, or the v1 taskset module) come from the run's env API."""
    return Template(project_file("templates/gen_dataset.py.tmpl").read_text(encoding="utf-8")).substitute(
        iter=n,
        env_id=hub.env_id,
        api=hub.api,
        parser_class=hub.parser_class,
        parser_config=json.dumps(hub.parser_config),
        answer_format=hub.answer_format_text(),
        **env_api.generator_skeleton(hub),
    )


def append_iteration_entry(rd: RunDir, n: int, analysis: dict, real_weakness: dict | None = None) -> None:
    """The pre-iteration scratchpad entry (3a.5): five sections, results filled at record."""
    if has_iteration_entry(rd.read_scratchpad(), n):  # by its marker: a teacher's "## Iteration 2 ideas" is not it
        return  # already appended before a crash
    ts = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    q = ", ".join(f"Q{x['quartile']} {x['reward_mean']:.2f}" for x in analysis.get("reward_by_length_quartile", []))
    rd.append_scratchpad(
        f"""{marker(f"iter_{n}")}
## Iteration {n} — {ts}

Inputs: {analysis['n_failures_written']} failed TRAIN rollouts of {analysis['source_arm']} (steps {analysis['source_steps']}); eval_acc of {analysis['source_arm']} = {analysis['eval_acc_prev']:.3f}; train reward by length quartile: {q or 'n/a'}; share truncated {analysis.get('share_truncated')}.
{weakness_line(real_weakness)}

### 1. {TEACHER_SECTIONS[1][0]}
{TEACHER_SECTIONS[1][1]}

### 2. Buckets to focus on (domain, sub_domain -> rows)
_filled from weakness_report.md when its gate passes._

### 3. {TEACHER_SECTIONS[3][0]}
{TEACHER_SECTIONS[3][1]}

### 4. {TEACHER_SECTIONS[4][0]}
{TEACHER_SECTIONS[4][1]}

### 5. Results
{RESULTS_PLACEHOLDER} {RESULTS_MARKER.format(n=n)}
"""
    )


def teacher_files_untouched(it: ArmDir) -> bool:
    """True while either teacher file is still byte-identical to its skeleton."""
    sk = _read_json(it.dir / "skeletons.json") or {}
    for name in ("weakness_report.md", "gen_dataset.py"):
        p = it.dir / name
        if not p.is_file() or file_sha256(p) == sk.get(name):
            return True
    return False


# ---------------------------------------------------------------- 3. report gate


def overrides_gate(ctx: RunContext, it: ArmDir) -> dict:
    """iter_N/overrides.toml checked as training will read it (GateFailed naming the key and range)."""
    return teacher_overrides(it.dir / "overrides.toml", ctx.dialect, model=ctx.cfg.model,
                             canonical=ctx.canonical_config())


def report_gate(rd: RunDir, it: ArmDir, n: int) -> WeaknessReport:
    """The report's front matter, and the teacher's scratchpad sections (3a.5) written, in one report."""
    path = it.dir / "weakness_report.md"
    report, gate = check_weakness_report(path)
    gate = merge_reports("report", [gate, scratchpad_gate(rd, n)])
    atomic_write_json(it.dir / "report_gate.json", {"report_sha256": file_sha256(path), **gate.model_dump(mode="json")})
    record_attempt(it.dir, "report", file_sha256(path), gate)
    if not gate.passed or report is None:
        raise GateFailed(f"{path}: the report gate failed; fix these and re-run iterate:\n{gate.summary()}")
    return report


def scratchpad_gate(rd: RunDir, n: int) -> GateReport:
    """Rule `scratchpad_placeholder`: the sections the teacher writes may not stay placeholders.
    A scratchpad that is not UTF-8 is refused here, in one line, before report_gate.json is written
    (read leniently, it passed this gate and failed later, after the gate had written its files)."""
    text = rd.read_scratchpad()
    missing = unfilled_teacher_sections(text, n)
    failures = []
    if missing:
        failures.append(GateFailure(
            rule="scratchpad_placeholder",
            message=(f"{rd.scratchpad}: still a placeholder: {'; '.join(missing)}; replace each '_teacher: ..._' line "
                     f"with your notes (sections {', '.join(map(str, TEACHER_SECTIONS))}: understanding, plan, changes)"),
        ))
    return GateReport.build("scratchpad", failures, {"unfilled": missing})


# ---------------------------------------------------------------- 4. generate


def _sha256_of_file(path: Path) -> str | None:
    """sha256 of a regular file; None when `path` is missing or no file (a generator may leave a directory)."""
    return file_sha256(path) if path.is_file() else None


def generated_is_current(it: ArmDir) -> bool:
    """dataset.jsonl was made by this gen_dataset.py from the files it read as they are now (a fixed teacher
    module regenerates). A record written before `reads` existed is judged by the generator's text alone."""
    rec = _read_json(it.dir / "generate.json")
    ds = it.dir / "dataset.jsonl"
    return bool(
        rec and ds.is_file() and rec.get("gen_sha256") == _sha256_of_file(it.dir / "gen_dataset.py")
        and rec.get("dataset_sha256") == file_sha256(ds)
        and ("reads" not in rec or reads_unchanged(rec["reads"], it.dir))
    )


def _clear_dataset_slot(ds: Path) -> None:
    """Remove dataset.jsonl before the generator runs: a failing generator must not leave an older dataset
    behind. The path is the generator's output slot, so a directory a broken generator made there goes too
    (left, it stopped every later iterate, a fixed generator included)."""
    if ds.is_dir() and not ds.is_symlink():
        shutil.rmtree(ds)
    else:
        ds.unlink(missing_ok=True)


def generate(ctx: RunContext, it: ArmDir, *, timeout: float, python: str | None = None, quiet: bool = True) -> dict:
    """Run the teacher's generator in a subprocess of `python` (the run's env interpreter; default
    this one), cwd = iter dir, log gen.log; then drop the rows that overlap the evaluated questions
    (gates/decontam.py: generate.json records how many, never which). No row is ever edited."""
    ds = it.dir / "dataset.jsonl"
    report = it.dir / "weakness_report.md"
    _clear_dataset_slot(ds)
    (it.dir / "generate.json").unlink(missing_ok=True)
    log = it.dir / "gen.log"
    had_report = report.is_file()  # in a phase, the report gate read it just before; a direct call may have none
    started = time.perf_counter()
    returncode = run_generator(it.dir, log, timeout, python or sys.executable)
    reads = hash_reads(it.dir)  # None (regenerate next time) when the generator's exit left no list
    if returncode is None:
        _clear_dataset_slot(ds)  # whatever the killed generator half-wrote
        raise TeacherActionNeeded(f"{it.dir}/gen_dataset.py: still running after {timeout:.0f} s (killed with its "
                                  f"child processes); make it faster; log: {log}")
    if returncode != 0:
        raise TeacherActionNeeded(f"{it.dir}/gen_dataset.py exited {returncode}; fix the generator (log {log}):\n"
                                  f"{log_tail(log)}")
    if had_report and not report.is_file():  # the generator deleted or moved the report it was written from
        raise TeacherActionNeeded(f"{report}: gen_dataset.py deleted or moved it; restore the report and make the "
                                  f"generator write dataset.jsonl only")
    if ds.is_dir():
        raise TeacherActionNeeded(f"{ds}: gen_dataset.py made it a directory; it must write one JSONL file there "
                                  f"(the directory is removed when iterate runs the generator again)")
    if not ds.is_file():
        raise TeacherActionNeeded(f"{it.dir}/gen_dataset.py exited 0 but wrote no dataset.jsonl; it must write {ds}")
    generated = count_rows(ds)
    # Before generate.json: a kill after the rewrite re-runs the generator, which rewrites dataset.jsonl.
    dropped = drop_eval_overlap(ds, eval_index(ctx))
    fault_point("generate")
    rec = {"gen_sha256": file_sha256(it.dir / "gen_dataset.py"), "dataset_sha256": file_sha256(ds), "reads": reads,
           "rows_generated": generated, "rows_dropped_eval_overlap": dropped, "rows": count_rows(ds),
           "seconds": round(time.perf_counter() - started, 2)}
    atomic_write_json(it.dir / "generate.json", rec)
    if dropped and not quiet:
        console.print(f"{it.name}: dropped {dropped} of {generated} generated rows that overlap the evaluated "
                      f"questions ({rec['rows']} kept)", highlight=False, soft_wrap=True)
    return rec


LOG_TAIL_LINES, LOG_TAIL_LINE_CHARS = 8, 300


def log_tail(log: Path) -> str:
    """The last lines of a log for a stop message: at most 8 lines of at most 300 characters each (a
    generator that printed a 5 MB line before crashing made a 1 MB message); the log keeps the rest.
    The generator's output is quoted to a terminal: its control characters are shown escaped."""
    try:
        return terminal_safe("\n".join(last_lines(log, LOG_TAIL_LINES, LOG_TAIL_LINE_CHARS)))
    except OSError as e:
        return f"(cannot read {log}: {e.strerror})"


def dataset_rows(it: ArmDir) -> int:
    return count_rows(it.dir / "dataset.jsonl")


# ---------------------------------------------------------------- 5. dataset gate


def dataset_gate_is_current(it: ArmDir) -> bool:
    rec = _read_json(it.dir / "gate_report.json")
    return bool(rec and rec.get("passed") and rec.get("dataset_sha256") == _sha256_of_file(it.dir / "dataset.jsonl")
                and rec.get("report_sha256") == _sha256_of_file(it.dir / "weakness_report.md"))


def prior_rows(rd: RunDir, n: int) -> dict[int, list[dict]]:
    out = {}
    for k in range(1, n):
        p = rd.iter(k).dir / "dataset.jsonl"
        if p.is_file():
            out[k] = load_dataset_jsonl(p)[0]
    return out


def dataset_gate(ctx: RunContext, it: ArmDir, n: int, report: WeaknessReport) -> GateReport:
    """Every dataset rule in one report (gate_report.json + gate_report.txt); raises GateFailed on any failure."""
    rd, hub = ctx.rd, ctx.required_hub()
    python = ctx.env_python  # the env's parser and the teacher's rewards run where the engine runs them
    rows, load_failures = load_dataset_jsonl(it.dir / "dataset.jsonl")
    dropped = (_read_json(it.dir / "generate.json") or {}).get("rows_dropped_eval_overlap", 0)
    reports = [check_dataset(rows, report, dropped_eval_overlap=dropped)]
    if load_failures:
        reports.append(GateReport.build("load", load_failures))
    reports.append(ctx.dialect.env_api.round_trip_gate(hub, rows, python=python))  # the hub parser, or the v1 Task's rewards
    reports.append(check_near_duplicates(rows, prior_rows(rd, n)))
    reports.append(check_eval_overlap(rows, eval_index(ctx)))
    reports.append(check_failure_provenance(rows, load_dataset_jsonl(it.dir / "failures.jsonl")[0]))
    reports.append(check_diversity(rows, report.fixed_axes))
    if (fit := fits_student_gate(ctx, it, rows)) is not None:
        reports.append(fit)
    by_file: dict[str, list] = {}
    for reward in report.custom_rewards:  # each declared reward is linted in the file it names
        by_file.setdefault(reward.source_file or "rewards.py", []).append(reward)
    for source_file, declared in by_file.items():
        reports.append(lint_reward_functions(it.dir / source_file, declared, rows, report.failure_modes(), python=python))
    merged = merge_reports("dataset", reports)
    record = {"dataset_sha256": file_sha256(it.dir / "dataset.jsonl"),
              "report_sha256": file_sha256(it.dir / "weakness_report.md"), **merged.model_dump(mode="json")}
    atomic_write_text(it.dir / "gate_report.txt", merged.summary() + "\n")
    atomic_write_json(it.dir / "gate_report.json", record)
    record_attempt(it.dir, "dataset", f"{record['report_sha256']}:{record['dataset_sha256']}", merged)
    if not merged.passed:
        raise GateFailed(f"{it.dir}/dataset.jsonl failed the dataset gate; fix gen_dataset.py (never the rows) and re-run iterate:\n{merged.summary()}")
    _fill_buckets_section(rd, n, report)
    return merged


def eval_index(ctx: RunContext) -> EvalNgramIndex:
    """n-gram hashes of the rows the engine evaluates, cached in the run dir (hashes only: no eval text on disk).

    The eval split; for an env without one, the first `eval_examples` train rows, which
    the engine evaluates instead (and which the gate must then keep out of generated data).
    The index is built by the run's env API (classic questions or v1 task prompts) in the env's Python.
    """
    hub, cfg = ctx.required_hub(), ctx.cfg
    cache = ctx.rd.root / "eval_ngrams.json"
    env_api = ctx.dialect.env_api
    key = env_api.eval_ngrams_key(hub, cfg.eval_examples)
    data = _read_json(cache)
    if data and data.get("key") == key:
        try:
            return EvalNgramIndex.from_json(data["index"])
        except (KeyError, ValueError):
            pass  # an older hashing version: rebuild
    index = env_api.eval_ngrams(hub, cfg.eval_examples, python=ctx.env_python)
    atomic_write_json(cache, {"key": key, "index": index.to_json()})
    return index


def _fill_buckets_section(rd: RunDir, n: int, report: WeaknessReport) -> None:
    text = rd.read_scratchpad()
    placeholder = "_filled from weakness_report.md when its gate passes._"
    head = f"## Iteration {n} "
    start = text.find(head)
    if start < 0 or placeholder not in text[start:]:
        return
    total = sum(b.rows for b in report.buckets)
    lines = "\n".join(f"- ({b.domain}, {b.sub_domain}) -> {b.rows} rows ({b.rows / total:.0%})" for b in report.buckets)
    idx = text.index(placeholder, start)
    atomic_write_text(rd.scratchpad, text[:idx] + lines + text[idx + len(placeholder):])


# ---------------------------------------------------------------- 6. package


def package_name_for(cfg: RunConfig, suffix: str) -> str:
    """The env package name of this run's arm `suffix` (run.json run_id keeps runs apart)."""
    return package_name(cfg.dataset, suffix, cfg.run_id)


def package_is_current(it: ArmDir, name: str | None = None) -> bool:
    """package.json exists, was made from the arm's dataset.jsonl and (when given) under `name`."""
    rec = _read_json(it.dir / "package.json")
    return bool(rec and rec.get("dataset_sha256") == _sha256_of_file(it.dir / "dataset.jsonl")
                and (name is None or rec.get("package") == name))


def package(ctx: RunContext, it: ArmDir, name: str, report: WeaknessReport | None, *, origin: str,
            dataset: Path | None = None, rewards_dir: Path | None = None) -> dict:
    """Build <name>/ in the arm dir, clean stale installs, install, verify row count in a fresh process."""
    dataset = dataset or it.dir / "dataset.jsonl"
    rewards = [(r.name, r.weight) for r in report.custom_rewards] if report else []
    rewards_file = None
    if rewards:
        files = {r.source_file or "rewards.py" for r in report.custom_rewards}
        if len(files) > 1:  # the package imports them from one module
            raise GateFailed(f"{it.dir}/weakness_report.md: custom_rewards name {len(files)} source files; put all of them in one file")
        rewards_file = (rewards_dir or it.dir) / files.pop()
    provenance = {"run_dir": str(ctx.rd.root), "run_id": ctx.cfg.run_id, "arm": it.name}
    env_api = ctx.dialect.env_api  # a classic env package, or a v1 Taskset package
    project = env_api.build_env_package(it.dir / name, name, dataset, hub=ctx.required_hub(), origin=origin,
                                        rewards_file=rewards_file, rewards=rewards, provenance=provenance)
    rec = install_and_verify(project, name, count_rows(dataset), python=ctx.env_python,
                             log=it.dir / "install.log", api=env_api.API)
    rec["dataset_sha256"] = file_sha256(dataset)
    atomic_write_json(it.dir / "package.json", rec)
    return rec


def ensure_package(ctx: RunContext, it: ArmDir, name: str, report: WeaknessReport | None, *, origin: str,
                   dataset: Path | None = None, rewards_dir: Path | None = None,
                   note: Callable[[str], None] | None = None) -> dict:
    """Step 6, and the check before any job trains on a generated package: the copy installed
    under `name` must hold this arm's dataset.jsonl, installed by this run. Packages it when
    package.json is missing or stale; reinstalls (with a note) when the installed copy is someone
    else's, e.g. a run dir copied from this one, or an older run without run_id that shares the
    name; refuses with one line if even a fresh install does not hold this arm's rows."""
    cfg, python = ctx.cfg, ctx.env_python
    dataset = dataset or it.dir / "dataset.jsonl"
    sha = file_sha256(dataset)
    if package_is_current(it, name):
        why = provenance_mismatch(installed_provenance(name, python), dataset_sha256=sha, run_id=cfg.run_id)
        if why is None:
            return _read_json(it.dir / "package.json") or {}
        (note or (lambda _m: None))(f"{name}: the installed package is not this arm's: {why}; reinstalling it from {it.dir / name}")
    rec = package(ctx, it, name, report, origin=origin, dataset=dataset, rewards_dir=rewards_dir)
    why = provenance_mismatch(installed_provenance(name, python), dataset_sha256=sha, run_id=cfg.run_id)
    if why is not None:
        raise SelfImproveError(f"{it.dir / 'package.json'}: {name} still does not hold this arm's rows after a reinstall "
                               f"({why}); another process is installing under this name, stop it and re-run")
    return rec


# ---------------------------------------------------------------- 7. stage


def launch_is_stale(it: ArmDir) -> bool:
    """The arm's last training job failed, and was launched before its package was last (re)built: it
    trained data the teacher has since replaced, so its failure is not this data's. The next launch starts
    afresh, as --restart would (issue 36: a fixed generator met the old launch failure until --restart)."""
    package_json = it.dir / "package.json"
    try:
        rec = read_job(it)
        if rec is None or not package_json.is_file() or job_state(it) != "crashed":
            return False
        return rec.start_ts < package_json.stat().st_mtime
    except (OSError, SelfImproveError):  # unreadable job.json, another host: the job runner names it
        return False


def iter0_final_step(rd: RunDir) -> int:
    summary = rd.read_eval_summary(rd.iter(0))
    if summary.final_step is None:
        raise SelfImproveError(f"{rd.iter(0).eval_summary}: field 'final_step' is empty; re-run baseline")
    return summary.final_step
