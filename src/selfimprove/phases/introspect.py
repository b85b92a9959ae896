"""Phase 1, introspect: make the real environment importable, then record its stack.

Steps, in order:

1. Availability. `--env-path DIR` (or run.json env_path): `pip install -e DIR`, skip
   prime. Else, if the env's module is already importable: skip prime (source
   "local"). Else, for a hub id owner/name: `prime env info`, then `prime env install`.
   - not found on the hub  -> run.json status=aborted, reason "hub env <id> not found"; exit 1
   - hub unreachable       -> exit 75, run.json untouched (retry later)
   - not importable, no hub id -> one line saying how to install it; run untouched
2. Introspection in a fresh interpreter, through the run's env API (`env_api.describe_env`):
   classes, parser config, rubric functions and weights, the full system prompt and
   its answer-format sentence, split sizes, 3 TRAIN rows (never eval rows). A classic
   env: `load_environment` (stack/verifiers_classic.py). A `--stack v1` run: the v1
   Taskset too (hub_env.json `taskset`); a Taskset-only env fills every field from it
   (stack/env_api_v1.py).
3. The skill's procedure's Qwen3 rule (3c): warn when the student is a Qwen3 variant and the
   parser strips <think> (ThinkParser); printed and kept in hub_env.json warnings.
4. Write the scratchpad's "Phase 1" section, then hub_env.json LAST (its presence
   means the phase is done). Re-running rewrites both.

Holds the run dir's lock throughout.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from ..errors import EnvNotFound, PhaseOrderError, UsageError
from ..faults import fault_point
from ..models import HubEnv, RunConfig
from ..rundir import RunDir, atomic_write_text
from ..scratchpad import marker, real_env_line, with_env_line
from ..stack import hub as prime_hub
from ..stack import verifiers_classic as vc
from ..stack.dialects import dialect_for
from ..stack.env_python import env_python_of
from ..ui import console, phase_line

SCRATCHPAD_HEADING = "## Phase 1: the real environment's stack"
SCRATCHPAD_KEY = "phase_1"  # scratchpad.marker key: a re-run replaces the section instead of adding one
_QWEN3 = re.compile(r"qwen-?3", re.I)


@dataclass
class IntrospectResult:
    hub_env: HubEnv
    steps: list[str] = field(default_factory=list)  # what was done, in order, for the user


def is_qwen3(model: str) -> bool:
    """The skill's procedure's 'Qwen3 variant': any model id or path naming Qwen3."""
    return bool(_QWEN3.search(model))


def evaluated_rows_note(eval_size: int | None, train_size: int | None, eval_examples: int) -> str:
    """Which rows the engine scores every arm on (verifiers' get_eval_dataset(n) falls back to
    get_dataset(n), the first n train rows, when the env has no eval split)."""
    if eval_size is not None:
        return f"eval split ({eval_size} rows)"
    n = min(eval_examples, train_size) if train_size is not None else eval_examples
    return (f"the first {n} train rows: the env has no eval split, so verifiers evaluates on them; "
            "baseline holds them out of training (iter_0/heldout.json says so, or that scores are in-sample), "
            "and the dataset gate keeps them out of generated data")


def qwen3_warnings(model: str, parser_class: str, parser_config: dict) -> list[str]:
    """The skill's procedure's 3c rule, as one-line warnings (empty when it does not apply)."""
    if not is_qwen3(model):
        return []
    out = []
    if vc.parser_strips_think(parser_class, parser_config):
        out.append(
            f"student {model} is a Qwen3 variant and the hub env's parser is {parser_class}, which returns '' "
            "for any completion without </think>: Qwen3 may skip or strip <think> blocks, so rewards can collapse "
            "to 0. Mirror the parser only after checking the student's raw outputs keep </think> (the skill's procedure, step 3c)"
        )
    elif vc.parser_requires_think_field(parser_config):
        out.append(
            f"student {model} is a Qwen3 variant and the hub env's {parser_class} has a 'think' field; verifiers "
            "itself warns this configuration fails when the chat template strips <think>; check raw outputs first"
        )
    return out


def _abort(rd: RunDir, cfg: RunConfig, reason: str) -> None:
    now = time.time()
    cfg.status = "aborted"
    cfg.reason = reason
    cfg.end_ts = now
    cfg.total_duration_s = round(now - cfg.start_ts, 1)
    _upsert_scratchpad(rd, f"{marker(SCRATCHPAD_KEY)}\n{SCRATCHPAD_HEADING}\n\n- ABORTED: {reason} (Phase 1 of the skill's procedure).\n")
    rd.write_run(cfg)


def _refuse_once_baseline_started(rd: RunDir, flag: str, field_name: str) -> None:
    started = [p for p in (rd.iter(0).dir / "canonical_rl.toml", rd.iter(0).prime_out, rd.iter(0).eval_summary)
               if p.exists()]
    if started:
        raise UsageError(f"{flag}: {rd.run_json} {field_name} is fixed once baseline has started ({started[0]} "
                         f"exists); iter_0 trained with it. Start a new run with `selfimprove bootstrap {flag} ...` "
                         "instead")


def _sync_header(rd: RunDir, cfg: RunConfig) -> None:
    """The scratchpad header's real-environment line, as run.json has it now."""
    text = rd.read_scratchpad()
    new = with_env_line(text, real_env_line(cfg.hub_id, cfg.env_args))
    if new != text:
        atomic_write_text(rd.scratchpad, new)


def _upsert_scratchpad(rd: RunDir, section: str) -> None:
    """Replace the Phase 1 section of scratchpad.md (or append it), so re-runs don't pile up."""
    old = rd.read_scratchpad()
    start = old.find(marker(SCRATCHPAD_KEY))
    if start < 0:
        rd.append_scratchpad(section)
        return
    # the section ends where the next one starts (a marker or a level-2 heading)
    body = start + len(marker(SCRATCHPAD_KEY)) + 1 + len(SCRATCHPAD_HEADING)
    ends = [i for i in (old.find("\n<!-- selfimprove:", body), old.find("\n## ", body)) if i >= 0]
    nxt = min(ends) if ends else -1
    tail = old[nxt + 1 :] if nxt >= 0 else ""
    new = old[:start] + section.rstrip("\n") + "\n" + ("\n" + tail if tail else "")
    atomic_write_text(rd.scratchpad, new)


class _Steps(list):
    """What Phase 1 did, in order; each step is also printed (stderr) as it happens."""

    def append(self, step: str) -> None:
        console.print(f"  {step}", highlight=False, markup=False, soft_wrap=True)
        super().append(step)


def _make_available(rd: RunDir, cfg: RunConfig, env_path: str | None, python: str) -> tuple[str, list[str], str | None]:
    """Step 1: returns (source, steps done, env_path recorded)."""
    env_id = cfg.hub_id
    module = vc.env_module_name(env_id)
    steps: list[str] = _Steps()
    path = env_path or cfg.env_path
    if path:
        project = Path(path).expanduser().resolve()
        if not project.is_dir():
            raise UsageError(f"--env-path {path}: directory not found")
        console.print(f"  pip install -e {project} ...", highlight=False, markup=False, soft_wrap=True)
        cmd = vc.install_editable(project, python=python)
        steps.append(f"installed {project} ({' '.join(cmd[:3])} ... -e)")
        if not vc.is_importable(env_id, python):
            raise EnvNotFound(
                f"--env-path {project} is installed but provides no module '{module}' for env id '{env_id}'; "
                f"the module must be the id's last segment with '-' -> '_' (bootstrap with --hub-id <its name>)"
            )
        return "env-path", steps, str(project)
    if vc.is_importable(env_id, python):
        steps.append(f"module {module} already importable: prime skipped")
        return "local", steps, None
    if not vc.is_hub_slug(env_id):
        raise EnvNotFound(f"env '{env_id}' is not importable (no module '{module}'); {vc.install_hint(env_id, python)}")
    try:
        prime_hub.env_info(env_id)
        steps.append(f"prime env info {env_id}: found")
        console.print(f"  prime env install {env_id} ...", highlight=False, markup=False, soft_wrap=True)
        prime_hub.env_install(env_id, python=python)
        steps.append(f"prime env install {env_id}: done")
    except EnvNotFound as e:
        _abort(rd, cfg, f"hub env {env_id} not found")
        raise EnvNotFound(f"{e}; run aborted (run.json status=aborted)") from None
    if not vc.is_importable(env_id, python):
        raise EnvNotFound(
            f"`prime env install {env_id}` finished but module '{module}' is still not importable by {python}; "
            f"{vc.install_hint(env_id, python)}"
        )
    return "hub", steps, None


def scratchpad_entry(h: HubEnv) -> str:
    """Phase 1 summary for humans: stack and sizes only (no eval content)."""
    funcs = ", ".join(f"{f.name} x{f.weight:g}" for f in h.rubric_funcs) or "none"
    cfg = {k: v for k, v in h.parser_config.items() if k in ("fields", "answer_field", "extract_fn")}
    group = ""
    if h.rubric_group:
        group = f" (unwrapped from RubricGroup[{', '.join(m.rubric_class for m in h.rubric_group)}])"
    fmt = h.answer_format_text()
    lines = [
        marker(SCRATCHPAD_KEY),
        SCRATCHPAD_HEADING,
        "",
        f"- env: `{h.env_id}` (module `{h.module}`, source {h.source}, args `{json.dumps(h.env_args)}`)",
        f"- stack to mirror: {h.env_class} / {h.parser_class} {json.dumps(cfg)} / {h.rubric_class}: {funcs}{group}",
        f"- answer format: {fmt}",
        "- data: " + (f"train {h.train_size} rows, " if h.train_size is not None else "train size unknown, ")
        + (f"eval {h.eval_size} rows (eval rows sealed: count only)" if h.eval_size is not None else "no eval split"),
        f"- evaluated on: {h.evaluated_rows or 'eval split'}",
        f"- warnings: {'; '.join(h.warnings) if h.warnings else 'none'}",
        *([f"- trained through {h.api}: taskset `{h.taskset['taskset_id']}` ({h.taskset['task_class']}: "
           f"{', '.join(r['name'] + ' x' + format(r['weight'], 'g') for r in h.taskset['rewards'])}), "
           f"train {json.dumps(h.taskset['train_args'])}, eval {json.dumps(h.taskset['eval_args'])}"] if h.taskset else []),
        f"- details (full system prompt, 3 train rows): `{Path('hub_env.json')}`",
    ]
    return "\n".join(lines) + "\n"


def _refuse_unless_running(rd: RunDir, cfg: RunConfig, hub_id: str | None) -> bool:
    """PhaseOrderError (exit 5, as every command gives a closed run) unless the run is running, or it is the one
    abort a new --hub-id undoes: Phase 1's own "not found" (nothing else ran yet). Returns whether it is that one."""
    missing_hub_env = cfg.status == "aborted" and cfg.reason == f"hub env {cfg.hub_id} not found"
    if cfg.status != "running" and not (hub_id is not None and hub_id != cfg.hub_id and missing_hub_env):
        why = f" ({cfg.reason})" if cfg.reason else ""
        mend = (f" or name the right env: selfimprove introspect --run-dir {rd.root} --hub-id owner/name"
                if missing_hub_env else "")
        raise PhaseOrderError(f"{rd.run_json}: the run is {cfg.status}{why}; introspect runs only on a running run "
                              f"(start a new one with `selfimprove bootstrap`{mend})")
    return missing_hub_env


def introspect(
    rd: RunDir, env_path: str | None = None, timeout: float = vc.INTROSPECT_TIMEOUT_S,
    env_args: dict[str, Any] | None = None, hub_id: str | None = None, announce: bool = True,
) -> IntrospectResult:
    """Run Phase 1 on a run dir; returns what was written to hub_env.json.

    `env_args` / `hub_id` replace run.json's env_args / hub_id first (then the env is introspected
    with them), and the scratchpad header's line follows; allowed only before baseline started,
    since iter_0 and every later arm load the env with them. A new `hub_id` also re-opens a run
    that Phase 1 aborted because the old id was not on the hub (the name given to bootstrap was
    not a hub id), so that run dir is mended rather than a dead end."""
    rd.require()
    _refuse_unless_running(rd, rd.read_run(), hub_id)  # before the lock: a refusal leaves the run dir untouched
    with rd.lock("introspect"):
        cfg = rd.read_run()
        new_hub = hub_id is not None and hub_id != cfg.hub_id
        new_args = env_args is not None and env_args != cfg.env_args
        missing_hub_env = _refuse_unless_running(rd, cfg, hub_id)
        for flag, field_name, changed in (("--hub-id", "hub_id", new_hub), ("--env-args", "env_args", new_args)):
            if changed:
                _refuse_once_baseline_started(rd, flag, field_name)
        if new_hub or new_args:
            if new_hub and cfg.status != "running":  # re-opened: the abort's bookkeeping goes
                cfg.status, cfg.reason, cfg.end_ts, cfg.total_duration_s = "running", None, None, None
            cfg.hub_id = hub_id if new_hub else cfg.hub_id
            cfg.env_args = env_args if new_args else cfg.env_args
            rd.write_run(cfg)
        # run.json first, the header after it: a kill in between is repaired by any re-run
        _sync_header(rd, cfg)
        python = env_python_of(cfg)
        if announce:  # `selfimprove run` prints its own start/end lines around each phase: one line per event
            phase_line("start", "introspect")
        source, steps, recorded_path = _make_available(rd, cfg, env_path, python)
        if recorded_path and recorded_path != cfg.env_path:  # installed: recorded now, so a failure below loses nothing
            cfg.env_path = recorded_path
            rd.write_run(cfg)

        console.print(f"  loading {cfg.hub_id} in a fresh Python ({python}) ...", highlight=False, markup=False, soft_wrap=True)
        # through the API the run's engine loads the env with: the classic probe (load_environment), or
        # in a v1 run the Taskset first (a bad one is refused before any slower load), then the classic
        # probe only when the env also has a classic side; a Taskset-only env is described by its Taskset
        api, info, taskset = dialect_for(cfg).env_api.describe_env(cfg.hub_id, cfg.env_args, timeout=timeout, python=python,
                                                                   evaluated_examples=cfg.eval_examples)
        # the canonical config's ids resolve with the stack's own loader, before anything is written
        dialect_for(cfg).env_api.check_canonical_ids(dialect_for(cfg), cfg.dataset, cfg.canonical_config, python)
        warnings = list(info.get("warnings") or [])
        warnings += qwen3_warnings(cfg.model, info["parser_class"], info.get("parser_config") or {})
        hub = HubEnv(
            env_id=cfg.hub_id,
            env_args=cfg.env_args,
            module=info["module"],
            source=source,
            env_class=info["env_class"],
            parser_class=info["parser_class"],
            parser_config=info.get("parser_config") or {},
            rubric_class=info["rubric_class"],
            rubric_funcs=info["rubric_funcs"],
            rubric_group=info.get("rubric_group"),
            system_prompt=info.get("system_prompt"),
            answer_format_instruction=info.get("answer_format_instruction"),
            train_size=info.get("train_size"),
            eval_size=info.get("eval_size"),
            train_samples=info.get("train_samples") or [],
            train_answer_chars=info.get("train_answer_chars"),
            warnings=warnings,
            verifiers_version=info.get("verifiers_version"),
            introspected_at=time.time(),
            evaluated_rows=evaluated_rows_note(info.get("eval_size"), info.get("train_size"), cfg.eval_examples),
            evaluated_example_ids=info.get("evaluated_example_ids"),
        )
        hub.api, hub.taskset = api, taskset
        for w in warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False, soft_wrap=True)

        _upsert_scratchpad(rd, scratchpad_entry(hub))
        fault_point("introspect")
        rd.write_hub_env(hub)  # last: its presence marks Phase 1 done
        if announce:
            phase_line("done", "introspect")
        return IntrospectResult(hub_env=hub, steps=list(steps))
