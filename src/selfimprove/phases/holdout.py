"""Envs without an eval split: keep the rows every arm is scored on out of training.

verifiers' classic `get_eval_dataset(n)` falls back to `get_dataset(n)` when an env has no eval
split, so every arm is scored on the first `eval_examples` TRAIN rows. Left alone, iter_0 and the
Phase 4 controls that train on the real env (Run B, Run C) would train on exactly those rows, and
every score would be in-sample.

The hold-out: before iter_0 launches, baseline builds and installs a wrapper env
(`<dataset>_r<run_id>_heldout`, templates/env_package/heldout_module.py.tmpl) that loads the real
env and drops its first `eval_examples` rows from the train dataset. Every
[[orchestrator.train.env]] block of the real env is pointed at the wrapper (iter_0 through its
eval_overlay.toml, whose list replaces the canonical config's; Run B and Run C through
`held_out_train_envs`); the eval block stays on the real env, so what is scored does not change.
iter_N arms train on generated rows only, and the dataset gate already keeps the evaluated
questions out of those.

Where the hold-out is impossible the run says so, in one console line at baseline and in
iter_0/heldout.json, `in_sample: true`: a v1 (`--stack v1`) run (prime-rl >= 0.8 trains a Taskset,
which has no rows to drop here), or an env with no train rows beyond the evaluated ones.

iter_0/heldout.json is written after the wrapper is installed and verified (its rows counted in a
fresh interpreter), so a crash at any point re-runs the whole step; a wrapper that is already
installed for this run is reused, so attaching to a live job never reinstalls under it.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from ..models import HubEnv, RunConfig
from ..resources import project_file
from ..rundir import RunDir, atomic_write_text, read_json_object
from ..stack import verifiers_classic as vc
from ..stack.dialects import dialect_for
from ..stack.env_package import install_and_verify, package_name, write_package_record
from ..stack.env_python import env_python_of
from .context import RunContext
from .evals import expected_eval_examples

RECORD = "heldout.json"  # iter_0/: what iter_0 and the controls train on instead of the real env
PROJECT_DIR = "heldout_env"  # iter_0/: the wrapper's project (pyproject.toml + package)


def record_path(rd: RunDir) -> Path:
    return rd.iter(0).dir / RECORD


def read_record(rd: RunDir) -> dict | None:
    return read_json_object(record_path(rd))


def in_sample_line(record: dict) -> str:
    """The one line that says the scores are in-sample, and why."""
    return (f"every score of this run is in-sample: the env has no eval split, so arms are scored on its first "
            f"{record['held_out']} train rows, and they are trained on too ({record['reason']})")


def build_wrapper(project_dir: Path, package: str, hub: HubEnv, held_out: int, origin: str) -> Path:
    """Write `project_dir/` = pyproject.toml + `<package>/__init__.py` (the wrapper env)."""
    pkg_dir = project_dir / package
    pkg_dir.mkdir(parents=True, exist_ok=True)
    subs = {"package": package, "origin": origin, "hub_env_id": hub.env_id, "hub_env_id_repr": repr(hub.env_id),
            "hub_env_args_repr": repr(dict(hub.env_args)), "held_out": str(held_out),
            "dependencies": '["verifiers>=0.3.1,<0.4"]'}
    for tmpl, dest in (("templates/env_package/pyproject.toml.tmpl", project_dir / "pyproject.toml"),
                       ("templates/env_package/heldout_module.py.tmpl", pkg_dir / "__init__.py")):
        atomic_write_text(dest, Template(project_file(tmpl).read_text(encoding="utf-8")).substitute(subs))
    return project_dir


def _decide(cfg: RunConfig, hub: HubEnv, held_out: int) -> dict:
    """The record without the install: held out (with the wrapper's name), or in-sample and why."""
    base = {"env_id": hub.env_id, "env_args": hub.env_args, "held_out": held_out, "train_rows": hub.train_size}
    if hub.api == "verifiers.v1" or dialect_for(cfg).trains_tasksets:
        return {**base, "in_sample": True, "reason": "a --stack v1 run trains the env's Taskset, whose rows this tool "
                                                       "cannot hold out; give the env an eval split"}
    if hub.train_size is None or hub.train_size <= held_out:
        return {**base, "in_sample": True, "reason": f"it has only {hub.train_size or 0} train rows, none left to train on "
                                                       f"beside the {held_out} evaluated; lower --eval-examples"}
    return {**base, "in_sample": False, "package": package_name(cfg.dataset, "heldout", cfg.run_id)}


def prepare(rd: RunDir, cfg: RunConfig, hub: HubEnv | None, held_out: int) -> dict | None:
    """Before iter_0 launches: None when the env has an eval split; else iter_0/heldout.json's record,
    the wrapper built, installed into the engine's interpreter and verified first when it holds out."""
    if hub is None or hub.eval_size is not None:
        return None
    record = read_record(rd)
    python = env_python_of(cfg)
    same = record is not None and (record.get("env_id"), record.get("env_args"), record.get("held_out")) == (
        hub.env_id, hub.env_args, held_out)
    if same and (record.get("in_sample") is True or (
            isinstance(record.get("package"), str) and vc.is_importable(record["package"], python))):
        return record  # done before (or a live job trains on it: never reinstall under it)
    record = _decide(cfg, hub, held_out)
    if not record["in_sample"]:
        project = rd.iter(0).dir / PROJECT_DIR
        build_wrapper(project, record["package"], hub, held_out, origin=f"run {cfg.run_id}, iter_0 hold-out")
        install = install_and_verify(project, record["package"], hub.train_size - held_out,
                                     python=python, log=rd.iter(0).dir / "heldout_install.log")
        record["train_rows_left"] = install["rows"]
    write_package_record(record_path(rd), record)
    return record


def held_out_train_envs(ctx: RunContext, envs: list[dict]) -> list[dict]:
    """`envs` ([[orchestrator.train.env]] blocks) with each block of the real env pointed at the hold-out
    wrapper (its args kept: the wrapper passes them on); unchanged when nothing is held out. A missing or
    damaged iter_0/heldout.json of an env without an eval split is made again (`prepare`), never read
    as "nothing held out": that would train Run B/C on the scored rows."""
    record = read_record(ctx.rd)
    # a damaged hub_env.json stops here (introspected_hub names it) rather than read as "nothing held out"
    if record is None and (hub := ctx.introspected_hub()) is not None:
        record = prepare(ctx.rd, ctx.cfg, hub, expected_eval_examples(ctx.cfg, hub))
    if not record or record.get("in_sample") or not record.get("package"):
        return envs
    out = []
    for env in envs:
        out.append({**env, "id": record["package"]} if env.get("id") == record["env_id"] else env)
    return out


def train_envs_overlay(ctx: RunContext, canonical_envs: list[dict]) -> dict:
    """The overlay fragment that points iter_0's training at the wrapper ({} when nothing is held out):
    a list in an overlay replaces the canonical config's list whole."""
    swapped = held_out_train_envs(ctx, canonical_envs)
    return {"orchestrator": {"train": {"env": swapped}}} if swapped != canonical_envs else {}


def scratchpad_line(record: dict | None) -> str | None:
    if not record:
        return None
    if record.get("in_sample"):
        return f"- {in_sample_line(record)}."
    return (f"- the env has no eval split: its first {record['held_out']} train rows are scored (train (no eval split)) "
            f"and held out of training; iter_0 and Runs B/C train on `{record['package']}` "
            f"({record.get('train_rows_left')} rows, iter_0/{RECORD}).")

