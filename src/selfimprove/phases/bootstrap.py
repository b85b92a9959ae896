"""Phase 0, bootstrap: validate every flag up front, then create the run directory
with run.json, metrics.json and the scratchpad header.

Nothing is written until every check has passed, and the run dir appears
atomically (built under a temporary name, then renamed), so a bad flag or a
kill leaves no half-made run behind.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import platform
import re
import secrets
import shutil
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ConfigError, SelfImproveError, UsageError
from ..models import (
    MIN_UNIQUE_PROMPTS_PER_STEP,
    SEED_EVAL_EXAMPLES,
    SEED_ROLLOUTS_PER_EXAMPLE,
    SEED_STEPS_PER_RUN,
    EngineName,
    Metrics,
    RunConfig,
)
from ..faults import fault_point
from ..rundir import RunDir, sorted_steps, write_model
from ..scratchpad import real_env_line
from ..stack import verifiers_classic as vc
from ..stack.detect import choose_stack
from ..stack.dialects import dialect_named
from ..engines.slurm import check_overlay
from ..stack.slurm_overlay import read_overlay
from ..stack.env_python import choose_env_python, installed_modules
from ..stack.verifiers_classic import env_module_name
from .overrides import range_error
from .student_default import SEED_MODEL, default_student

DEFAULT_MODEL = SEED_MODEL  # the skill's procedure's student (phases/student_default.py says when another is chosen)
BUILTIN_MODEL_PREFIX = "selfimprove/"  # CPU students made by the local engine
BUILD_MODEL_PREFIX = "build:"  # build:ENV, the generic recipe's student of ENV (rl/student_build.py), built on first use


@dataclass
class BootstrapOptions:
    """The procedure's invocation flags plus ours; defaults are the procedure's."""

    dataset: str
    model: str | None = None  # None: the procedure's DEFAULT_MODEL, or a CPU student on a machine without GPUs (student_default.py)
    budget: str = "10h"
    hub_id: str | None = None  # default primeintellect/<dataset>
    max_iters: int = 15
    batch_size: int = 512
    init_from: str | None = None
    runs_dir: str = "runs"
    env_args: str | dict[str, Any] | None = None  # JSON object for load_environment
    env_path: str | None = None
    engine: str = "auto"  # prime-rl | local | auto (local for built-in CPU students)
    engine_command: list[str] | None = None
    config: str | None = None  # canonical rl.toml (Phase 2B / Run B)
    slurm: str | None = None  # --slurm: a prime-rl overlay with [slurm] (+ [deployment]); every launch is a SLURM job
    wandb_project: str | None = None
    steps_per_run: int = SEED_STEPS_PER_RUN
    rollouts_per_example: int = SEED_ROLLOUTS_PER_EXAMPLE
    eval_examples: int = SEED_EVAL_EXAMPLES
    allow_small_batch: bool = False
    stack: str | None = None  # --stack seed|v1; None = detected (stack/detect.py)
    env_python: str | None = None  # --env-python; None = the engine's (stack/env_python.py)
    extra_versions: dict[str, str] = field(default_factory=dict)
    group_by: str | None = None  # --group-by: the weakness statistics' grouping (grouping.py), recorded in run.json
    max_completion_tokens: int | None = None  # --max-completion-tokens: caps every arm's train and eval budget


_BUDGET_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_budget(text: str) -> int:
    """'10h' / '90m' / '1h30m' / '45s' -> seconds. Anything else is a one-line usage error."""
    m = _BUDGET_RE.match(text.strip().lower()) if text else None
    if not m or not any(m.groups()):
        raise UsageError(f"--budget '{text}': expected a duration like 10h, 90m or 1h30m")
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    seconds = h * 3600 + mi * 60 + s
    if seconds <= 0:
        raise UsageError(f"--budget '{text}': must be longer than zero")
    return seconds


def check_toml(path: Path, flag: str) -> None:
    """A config given on the command line must parse before any run dir exists (refused, exit 2)."""
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: not UTF-8 text; save it as UTF-8 TOML or drop {flag.split()[0]}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{flag}: not valid TOML ({e}); fix the file or drop {flag.split()[0]}") from None
    if why := range_error(data):  # the knobs every arm inherits: typed and in range, like overrides.toml
        raise UsageError(f"{flag}: {why}; fix the file or drop {flag.split()[0]}")


def _no_json_constant(name: str) -> Any:
    raise UsageError(f"--env-args: {name} is not JSON (Python's json module would accept it); use a number or null")


def parse_env_args(value: str | dict | None) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value, parse_constant=_no_json_constant)
    except json.JSONDecodeError as e:
        raise UsageError(f"--env-args: not valid JSON ({e.msg} at char {e.pos}); pass an object like '{{\"num_train_examples\": 1000}}'") from None
    if not isinstance(parsed, dict):
        raise UsageError("--env-args: must be a JSON object like '{\"key\": value}'")
    return parsed


def resolve_engine(engine: str, model: str) -> EngineName:
    if engine == "auto":
        is_local = model.startswith((BUILTIN_MODEL_PREFIX, BUILD_MODEL_PREFIX)) or Path(model).expanduser().is_dir()
        return "local" if is_local else "prime-rl"
    if engine not in ("prime-rl", "local"):
        raise UsageError(f"--engine '{engine}': expected prime-rl, local or auto")
    return engine  # type: ignore[return-value]


def check_batch(batch_size: int, rollouts_per_example: int, allow_small: bool) -> None:
    if rollouts_per_example < 2:
        raise UsageError(f"--rollouts-per-example {rollouts_per_example}: must be >= 2 (GRPO scores each rollout "
                         "against the others of its prompt; with one, every advantage is 0)")
    if batch_size > MAX_BATCH_SIZE:
        raise UsageError(f"--batch-size {batch_size}: at most {MAX_BATCH_SIZE} rollouts per step; "
                         "it is the TOTAL per step (unique prompts x rollouts per example)")
    if batch_size < 1 or batch_size % rollouts_per_example:
        raise UsageError(
            f"--batch-size {batch_size}: must be a positive multiple of rollouts_per_example ({rollouts_per_example}); "
            f"e.g. {max(1, batch_size // rollouts_per_example) * rollouts_per_example or rollouts_per_example}"
        )
    unique = batch_size // rollouts_per_example
    if unique < MIN_UNIQUE_PROMPTS_PER_STEP and not allow_small:
        raise UsageError(
            f"--batch-size {batch_size}: gives {unique} unique prompts per step, below the GRPO floor of "
            f"{MIN_UNIQUE_PROMPTS_PER_STEP}; use >= {MIN_UNIQUE_PROMPTS_PER_STEP * rollouts_per_example} "
            "(or --allow-small-batch for a smoke run)"
        )


def init_from_source(root: Path) -> tuple[Path, Path, str | None]:
    """(the dir holding prime_out/, its metrics.json, the arm key of its record there or None) of an --init-from path.

    Accepted: a prior training run dir (the procedure's layout: prime_out/, run.json, metrics.json); a
    selfimprove run dir, which gives its iter_0 (the checkpoint every arm of that run started from, as
    the advice of a closed run says); or one arm dir of a selfimprove run (<run dir>/iter_0)."""
    if (root / "prime_out").is_dir() and (root / "run.json").is_file():
        return root, root / "metrics.json", None
    if (root / "iter_0" / "prime_out").is_dir() and (root / "run.json").is_file():
        return root / "iter_0", root / "metrics.json", "iter_0"
    if (root / "prime_out").is_dir() and (root.parent / "run.json").is_file():
        return root, root.parent / "metrics.json", root.name
    return root, root / "metrics.json", None


def init_from_artefacts(init_from: Path, step: int) -> list[Path]:
    """The procedure's Phase 2A list of what a reusable prior run must contain."""
    src, metrics, _key = init_from_source(init_from)
    po = src / "prime_out"
    return [
        metrics.parent / "run.json",
        metrics,
        po / "weights" / f"step_{step}" / "model.safetensors",
        po / "weights" / f"step_{step}" / "config.json",
        po / "weights" / f"step_{step}" / "tokenizer.json",
        po / "checkpoints" / f"step_{step}" / "trainer" / "__0_0.distcp",
        po / "run_default" / "rollouts" / f"step_{step}" / "train_rollouts.jsonl",
        po / "run_default" / "rollouts" / f"step_{step}" / "eval_rollouts.jsonl",
    ]


def check_init_from(path: str) -> int:
    """Validate an --init-from path (see init_from_source); return its final step F (max step_N in prime_out/weights)."""
    root = Path(path).expanduser()
    if not root.is_absolute():
        raise UsageError(f"--init-from {path}: must be an absolute path to a prior training run dir")
    if not root.is_dir():
        raise UsageError(f"--init-from {path}: directory not found")
    src = init_from_source(root)[0]
    steps = sorted_steps(src / "prime_out" / "weights")
    if not steps:
        raise UsageError(f"--init-from {path}: missing {src / 'prime_out' / 'weights'}/step_<F>/ (no weights saved)")
    final = steps[-1]
    for artefact in init_from_artefacts(root, final):
        if not artefact.exists():
            raise UsageError(f"--init-from {path}: missing {artefact}")
    return final


def library_versions() -> dict[str, str]:
    out = {"selfimprove": __version__, "python": platform.python_version()}
    for dist in ("verifiers", "torch", "transformers", "datasets", "pydantic", "prime"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def run_dir_name(dataset: str, now: float) -> str:
    stamp = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    return f"{dataset}-{stamp}"


def scratchpad_header(cfg: RunConfig, run_dir: Path, student_note: str | None = None) -> str:
    started = datetime.fromtimestamp(cfg.start_ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"""# Self-improvement run: {cfg.dataset}

- run dir: `{run_dir}`
- started: {started}
{real_env_line(cfg.hub_id, cfg.env_args)}
- student: `{cfg.model}` on engine `{cfg.engine}`{f" (chosen by bootstrap: {student_note})" if student_note else ""}
- budget (Phase 3 only): {cfg.budget_seconds} s, on a clock that starts at the first `selfimprove iterate` (bootstrap, introspect and baseline, including any first-use build of the student, are not charged; compare and finalize run after it); max iterations (incl. iter_0): {cfg.max_iters}
- per run: {cfg.steps_per_run} new steps, batch {cfg.batch_size} rollouts = {cfg.unique_prompts_per_step} prompts x {cfg.rollouts_per_example}; eval on {cfg.eval_examples} examples of the real env
- init from: {cfg.init_from or "none (iter_0 is trained here)"}

Rules: eval rows are sealed (aggregates only); every iteration resumes from iter_0's checkpoint;
Phase 3 ends only on budget or max_iters.
"""


_DATASET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# The dataset names the run dir (<dataset>-<UTC stamp>, staged as .<that>.<random>) and the
# generated env packages (<dataset>_run_b_combined-<ver>.dist-info and the like); file names
# stop at 255 bytes, so the longest of these must fit with room to spare.
MAX_DATASET_CHARS = 120
# A hub slug (owner/name, optional @version) or a locally importable env id: it becomes a
# module name, a package dependency and a path, so no spaces or shell characters.
_HUB_ID_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*/)?[A-Za-z0-9][A-Za-z0-9_.-]*(@[A-Za-z0-9_.+-]+)?$")
# Rollouts per step: far above any GPU run's (prime-rl's examples use <= 8192), low enough that
# a typo (an extra 0 or ten) is caught here instead of as an out-of-memory crash in the engine.
MAX_BATCH_SIZE = 1 << 20


def check_hub_id(hub_id: str) -> None:
    """--hub-id of bootstrap and introspect: a hub slug or an importable env id (exit 2 otherwise)."""
    if not _HUB_ID_RE.match(hub_id):
        raise UsageError(f"--hub-id '{hub_id}': expected owner/name (optionally @version) or an importable env id, "
                         "with letters, digits, '-', '_' or '.' only")


def check_env_spelling(dataset: str, hub_id: str, env_path: str | None, explicit_hub_id: bool,
                       python: str | None = None) -> None:
    """Refuse a typo before anything is written: the env's module is not installed (in the env
    interpreter `python`) but an installed module is spelled almost the same (`selfimprove-arihth`).
    Other envs that are not installed yet are left to `introspect` (prime fetches hub ids;
    `--env-path` installs a local project); an explicit --hub-id is taken as meant."""
    if env_path or explicit_hub_id or vc.is_importable(hub_id, python):
        return
    module = vc.env_module_name(hub_id)
    close = difflib.get_close_matches(module, installed_modules(python), n=1, cutoff=0.8)
    if close and close[0] == module:  # listed on the interpreter's path, yet a fresh interpreter did not find it
        raise SelfImproveError(
            f"dataset '{dataset}': module '{module}' is installed, but a fresh {python or sys.executable} could not "
            "find it; check that you can run that interpreter and read the env's files, or pass --env-python")
    if close:
        raise UsageError(
            f"dataset '{dataset}': no environment module '{module}' is installed; did you mean "
            f"{close[0].replace('_', '-')}? (for another env: --hub-id owner/name, or --env-path DIR)")


MODEL_DIR_FIX = ("point --model at a complete Hugging Face model dir (config.json with model_type, the weights, "
                 "tokenizer.json with a chat template), e.g. one written by save_pretrained")


def check_model(model: str, engine: str) -> str:
    """Refuse, before any job, a student the chosen engine cannot load; return `model` as run.json
    stores it (a local dir made absolute, so the run works from any cwd).

    `selfimprove/<name>` ids are the built-in CPU students (rl/builtin_students.py: shipped
    weights, or e.g. selfimprove/smollm2-135m converted on first use): the local engine's only,
    and only with their extras importable here (the engine runs from this install). A local model dir must be one the engine can load (rl/student_check.py). The local
    CPU engine never downloads a hub model (e.g. Qwen/Qwen3-0.6B, the default, needs --engine prime-rl).
    """
    from ..rl import builtin_students  # no torch import: the registry and its entries are light
    from ..rl.student_check import check_model_dir

    builtin = builtin_students.ids()
    if model.startswith((BUILTIN_MODEL_PREFIX, BUILD_MODEL_PREFIX)):
        if builtin_students.find(model) is None:
            raise UsageError(f"--model {model}: no such built-in student; built-in: {', '.join(builtin)}")
        if engine != "local":
            raise UsageError(f"--model {model}: the built-in students train on the local CPU engine only; drop "
                             f"--engine {engine} (or pass --engine local), or give prime-rl a hub id or a model dir")
        missing = builtin_students.missing_extra(model)
        if missing:
            what, modules, fix = missing
            raise UsageError(f"--model {model}: needs {what}, and {', '.join(modules)} "
                             f"{'is' if len(modules) == 1 else 'are'} not importable here; run {fix}")
        return model
    path = Path(model).expanduser()
    if path.is_dir():
        check_model_dir(path, f"--model {model}", MODEL_DIR_FIX, tokenizer=engine == "local", error=UsageError)
        return os.path.abspath(path)
    if model.startswith(("/", "./", "../", "~")):  # spelled as a path, so not a hub id
        raise UsageError(f"--model {model}: no such directory; {MODEL_DIR_FIX}, or pass a hub id with --engine prime-rl")
    if engine == "local":
        raise UsageError(
            f"--model {model}: the local CPU engine loads only a built-in student ({', '.join(builtin)}) or a "
            "local model dir with config.json, and does not download hub models; use --engine prime-rl on a GPU "
            "machine, or --model with one of those built-in ids"
        )
    return model


def check_runs_dir(runs_dir: str) -> None:
    """--runs-dir must be a directory we can write, or creatable under one; nothing is created here
    (a refused bootstrap writes nothing), so the nearest existing ancestor is what is checked."""
    p = Path(runs_dir).expanduser().resolve()
    if p.exists() and not p.is_dir():
        raise UsageError(f"--runs-dir {p}: not a directory; point it at a directory (it is created if missing)")
    existing = next((a for a in (p, *p.parents) if a.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == p else f" (its nearest existing parent {existing} is not writable)"
        raise UsageError(f"--runs-dir {p}: not writable by you{where}; pick a writable --runs-dir or chmod u+w it")


def bootstrap(opts: BootstrapOptions) -> RunDir:
    """Validate the flags, then create RUN_DIR with run.json, metrics.json and scratchpad.md."""
    if not _DATASET_RE.match(opts.dataset):
        raise UsageError(f"dataset '{opts.dataset}': use letters, digits, '-', '_' or '.' (it names packages and dirs)")
    if len(opts.dataset) > MAX_DATASET_CHARS:
        raise UsageError(f"dataset '{opts.dataset[:40]}...': {len(opts.dataset)} characters, at most {MAX_DATASET_CHARS} "
                         "(it names the run dir and the generated packages); use a shorter name and --hub-id for the real id")
    if opts.hub_id is not None:
        check_hub_id(opts.hub_id)
    budget_seconds = parse_budget(opts.budget)
    if opts.max_iters < 1:
        raise UsageError(f"--max-iters {opts.max_iters}: must be >= 1 (iter_0 counts)")
    for flag, val in (("--steps-per-run", opts.steps_per_run), ("--eval-examples", opts.eval_examples)):
        if val < 1:
            raise UsageError(f"{flag} {val}: must be >= 1")
    check_batch(opts.batch_size, opts.rollouts_per_example, opts.allow_small_batch)
    if opts.max_completion_tokens is not None and opts.max_completion_tokens < 1:
        raise UsageError(f"--max-completion-tokens {opts.max_completion_tokens}: must be >= 1 (tokens per completion)")
    env_args = parse_env_args(opts.env_args)
    check_runs_dir(opts.runs_dir)  # a file-system check, before the slower env and model probes
    model_arg, engine_arg, student_note = default_student(opts.model, opts.engine, opts.dataset, opts.hub_id, opts.slurm)
    engine = resolve_engine(engine_arg, model_arg)
    model = check_model(model_arg, engine)
    init_from = None
    if opts.init_from:
        check_init_from(opts.init_from)
        init_from = str(init_from_source(Path(opts.init_from).expanduser())[0])  # a selfimprove run dir: its iter_0/
    env_path = None
    if opts.env_path:
        p = Path(opts.env_path).expanduser().resolve()
        if not (p / "pyproject.toml").is_file():
            raise UsageError(f"--env-path {opts.env_path}: no pyproject.toml there; point it at an environment project")
        env_path = str(p)
    # The interpreter every env step runs in (the engine's venv on a GPU box): checked here, before
    # the env's spelling and API are looked up in it.
    env_python = choose_env_python(opts.env_python, engine, os.environ.get("PRIME_RL_DIR"))
    check_env_spelling(opts.dataset, opts.hub_id or f"primeintellect/{opts.dataset}", env_path, bool(opts.hub_id),
                       env_python.path)
    config = None
    if opts.config:
        p = Path(opts.config).expanduser().resolve()
        if not p.is_file():
            raise UsageError(f"--config {opts.config}: file not found")
        check_toml(p, f"--config {opts.config}")
        config = str(p)

    hub_id = opts.hub_id or f"primeintellect/{opts.dataset}"
    # Before anything is written: a prime-rl checkout that can't run this env fails here, with the fix.
    stack = choose_stack(opts.stack, os.environ.get("PRIME_RL_DIR"), env_module_name(hub_id), env_python.path, engine,
                         project=Path(env_path) if env_path else None)
    dialect = dialect_named(stack.stack)
    slurm = None
    if opts.slurm:
        p = Path(opts.slurm).expanduser().resolve()
        if not p.is_file():
            raise UsageError(f"--slurm {opts.slurm}: file not found; pass a TOML file holding a [slurm] table")
        try:
            tables = read_overlay(p, dialect.keys_file)
            check_overlay(tables["slurm"], f"--slurm {p}")  # sinfo + sbatch --test-only, before any run dir
        except ConfigError as e:
            raise UsageError(str(e)) from None
        slurm = str(p)

    runs_dir = Path(opts.runs_dir).expanduser().resolve()
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--runs-dir {runs_dir}: cannot create it ({e.strerror})") from None
    if not os.access(runs_dir, os.W_OK):
        raise UsageError(f"--runs-dir {runs_dir}: not writable")

    now = time.time()
    final = runs_dir / run_dir_name(opts.dataset, now)
    if final.exists():  # two bootstraps in the same second
        raise UsageError(f"run dir {final} already exists; wait a second and retry")
    cfg = RunConfig(
        dataset=opts.dataset,
        hub_id=hub_id,
        model=model,
        start_ts=now,
        budget_seconds=budget_seconds,
        max_iters=opts.max_iters,
        batch_size=opts.batch_size,
        init_from=init_from,
        run_id=secrets.token_hex(4),  # isolates this run's env packages from other runs'
        engine=engine,
        engine_command=opts.engine_command,
        env_python=env_python.path,
        env_python_source=env_python.source,
        env_args=env_args,
        env_path=env_path,
        canonical_config=config,
        slurm=slurm,
        home=str(final.resolve()),
        wandb_project=opts.wandb_project,
        steps_per_run=opts.steps_per_run,
        rollouts_per_example=opts.rollouts_per_example,
        eval_examples=opts.eval_examples,
        group_by=opts.group_by,
        max_completion_tokens=opts.max_completion_tokens,
        allow_small_batch=opts.allow_small_batch,
        stack=stack.stack,
        stack_source=stack.source,
        stack_seed_note=dialect.SEED_NOTE,
        versions={**library_versions(), **opts.extra_versions,
                  **({"env_verifiers": env_python.verifiers_version} if env_python.verifiers_version else {})},
    )
    # Build under a temp name in the same dir, then rename: the run dir appears whole or not at all.
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=runs_dir))
    try:
        write_model(staging / "run.json", cfg)
        write_model(staging / "metrics.json", Metrics())
        (staging / "scratchpad.md").write_text(scratchpad_header(cfg, final, student_note), encoding="utf-8")
        fault_point("bootstrap")
        try:
            os.rename(staging, final)
        except OSError as e:  # another bootstrap of this dataset made the same name since the check above
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise UsageError(f"run dir {final} already exists; wait a second and retry") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if student_note:  # on stderr: stdout is RUN_DIR alone, for the agent to capture
        from ..ui import console

        console.print(f"bootstrap: {student_note}", markup=False, highlight=False, soft_wrap=True)
    return RunDir(final)
