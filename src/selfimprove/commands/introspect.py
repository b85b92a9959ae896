"""`selfimprove introspect`: Phase 1."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..phases.bootstrap import check_hub_id, parse_env_args
from ..phases.introspect import introspect
from ..rundir import RunDir
from ..stack.verifiers_classic import INTROSPECT_TIMEOUT_S
from ..ui import out
from ._common import JsonOpt, RunDirOpt, cli_errors, print_json


@cli_errors
def command(
    run_dir: RunDirOpt,
    env_path: Annotated[
        Optional[Path],
        typer.Option(help="Local environment project (a dir with pyproject.toml) to `pip install -e` first; skips prime. Recorded in run.json."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds allowed for loading the env and building its datasets.")] = INTROSPECT_TIMEOUT_S,
    env_args: Annotated[Optional[str], typer.Option(help="JSON object for load_environment: replaces run.json env_args, then introspects with them. Only before baseline starts (exit 2 after).")] = None,
    hub_id: Annotated[Optional[str], typer.Option(help="The env's hub id owner/name (or an importable env id): replaces run.json hub_id, then introspects it; re-opens a run aborted because the old id was not on the hub. Only before baseline starts (exit 2 after).")] = None,
    json_: JsonOpt = False,
) -> None:
    """Phase 1: make the real environment importable and record its stack in hub_env.json.

    For a hub id owner/name that is not installed yet: `prime env info`, then
    `prime env install`. An env already importable (or --env-path DIR) skips prime.
    The env is then loaded in a fresh Python process: env/parser/rubric classes,
    reward functions and weights, the full system prompt and its answer-format
    sentence, split sizes and 3 TRAIN rows (eval rows are never read).

    Exit codes: 0 done; 1 error (a hub env that does not exist also marks the run
    aborted: re-run with --hub-id owner/name to mend it); 2 bad flags, or --env-args /
    --hub-id after baseline started; 75 hub unreachable or run dir locked: retry later, nothing changed.

    Example usage:

        selfimprove introspect --run-dir $RUN_DIR
        selfimprove introspect --run-dir $RUN_DIR --env-path ./envs/my_env
        # before baseline only:
        selfimprove introspect --run-dir $RUN_DIR --env-args '{"num_train": 9}'
        selfimprove introspect --run-dir $RUN_DIR --hub-id owner/name
    """
    if hub_id is not None:
        check_hub_id(hub_id)
    res = introspect(RunDir(run_dir), env_path=str(env_path) if env_path else None, timeout=timeout,
                     env_args=parse_env_args(env_args) if env_args is not None else None, hub_id=hub_id)
    h = res.hub_env
    if json_:
        print_json({"run_dir": str(RunDir(run_dir).root), "steps": res.steps, **h.model_dump(mode="json")})
        return
    funcs = ", ".join(f"{f.name} (weight {f.weight:g})" for f in h.rubric_funcs) or "none"
    out.print(f"env        {h.env_id}  (module {h.module}, source {h.source})", markup=False)
    out.print(f"env class  {h.env_class}", markup=False)
    out.print(f"parser     {h.parser_class} {h.parser_config.get('fields') or ''}".rstrip(), markup=False)
    out.print(f"rubric     {h.rubric_class}: {funcs}", markup=False)
    out.print(f"format     {h.answer_format_text()}", markup=False)
    out.print(f"splits     train {h.train_size}, eval {h.eval_size}", markup=False)
    out.print(f"warnings   {len(h.warnings)}", markup=False)
    out.print(f"wrote      {RunDir(run_dir).hub_env_json}", markup=False)
