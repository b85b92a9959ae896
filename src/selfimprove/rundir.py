"""The run directory: every path, atomic file IO, and the per-run lock.

No phase builds a path by hand: `RunDir` and `ArmDir` know them all. Every JSON
file is read through its pydantic model (a corrupt file names the bad field)
and written atomically (temp file + fsync + rename), so a kill at any moment
leaves either the old or the new file, never half of one.

Known trade-offs (accepted): the lock is advisory (flock); a process that does
not use `RunDir.lock()` can still write. flock is released by the kernel when
the holder dies, which is how a stale lock of a dead process is taken over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import RunDirError, RunDirLocked
from .faults import fault_point
from .models import EvalSummary, HubEnv, IterRecord, Metrics, RunConfig

M = TypeVar("M", bound=BaseModel)

# Phase 4 arm directories (the skill's procedure's names for A and B; C is ours).
CONTROL_ARMS = {
    "run_a": "run_a_best_from_iter0",
    "run_b": "run_b_combined_from_base",
    "run_c": "run_c_real_from_iter0",
}



@dataclass(frozen=True)
class OutputLayout:
    """Where a prime-rl version writes one run under its output dir (the arm's prime_out/).

    Checkpoints (`checkpoints/step_N/trainer`) sit at the top in both; the orchestrator's tree
    (rollouts, broadcasts, its checkpoints) sits under `run_subdir`. Only the seed dialect writes HF
    weights (`weights/step_N`, trainer/rl/train.py at the seed commit, via ckpt.weights); main writes
    none (its commit 29e422276 removed them): its loadable weights are the filesystem broadcast's
    `broadcasts/step_N/model*.safetensors` (transports/weights/filesystem.py:33-70).
    """

    run_subdir: str  # the orchestrator's run dir below the output dir ("" = the output dir itself)
    train_rollouts: str  # a step's train rollouts, below rollouts/step_N/
    eval_rollouts: str  # a step's eval rollouts, below rollouts/step_N/
    orchestrator_ckpt: str  # the orchestrator's own tree below <run dir>/checkpoints/step_N/ ("" = all of it)
    metrics_file: str | None  # a local metrics JSONL below the output dir (monitors.file), if the version writes one
    traces: bool  # rollouts are verifiers v1 traces.jsonl with all/ and effective/ subsets
    hf_weights: bool = True  # the trainer writes weights/step_N (HF save_pretrained): the seed dialect only
    base_eval_step: int = 0  # the step a fresh run's base-model eval is labelled with (main: 1-indexed steps)


# prime-rl 09e297743: run_default/{rollouts,broadcasts,checkpoints}/step_N, one JSONL of records per step.
SEED_LAYOUT = OutputLayout("run_default", "train_rollouts.jsonl", "eval_rollouts.jsonl", "", None, False)
# prime-rl main 559b44772: the run dir is output_dir/run.name (= prime_out/), checkpoints/step_N holds
# trainer/ and orchestrator/, episodes are traces.jsonl.
# No weights/ (DCP checkpoints only); steps are 1-indexed (orchestrator/types.py:27-30), so the base-model eval
# is rollouts/step_1/eval (the first eval trigger at progress.step = 1, orchestrator/eval_source.py:43-55).
MAIN_LAYOUT = OutputLayout("", "train/all/traces.jsonl", "eval/all/traces.jsonl", "orchestrator", "metrics.jsonl", True,
                           hf_weights=False, base_eval_step=1)
# By run.json `stack` (the Literal of models.RunConfig.stack); stack/dialects.py pairs each dialect with its layout.
LAYOUT_OF_STACK = {"seed": SEED_LAYOUT, "v1": MAIN_LAYOUT}

# Read-modify-write of run.json / metrics.json / scratchpad.md by threads of ONE process (compare trains
# several arms at once, one watcher thread per arm). The flock of `RunDir.lock` keeps other processes out;
# this keeps the threads of its holder from losing each other's records. Reentrant: record_arm takes it
# inside a caller's `with rd.updating():`.
_UPDATES = threading.RLock()

# Seed replicates (Phase 4 --seeds): member k >= 1 of an arm is "<arm>_seed<k>" in metrics.json
# and "<arm dir>_seed<k>/" on disk; member 0 is the arm itself, name unchanged.
_SEED_KEY_RE = re.compile(r"^(?P<arm>.+)_seed(?P<k>[1-9]\d*)$")


def seed_key(arm: str, k: int) -> str:
    """metrics.json key of seed member k of `arm`: "run_a" (k = 0), "run_a_seed1", "iter_2_seed2"."""
    if k < 0:
        raise ValueError(f"seed index must be >= 0, got {k}")
    return arm if k == 0 else f"{arm}_seed{k}"


def split_seed_key(key: str) -> tuple[str, int]:
    """("run_a", 2) for "run_a_seed2"; (key, 0) for a key that is no seed replicate."""
    m = _SEED_KEY_RE.match(key)
    return (m.group("arm"), int(m.group("k"))) if m else (key, 0)


# ---------------------------------------------------------------- atomic IO

# mkstemp makes 0600 files and the rename keeps that mode; give run files the mode a
# plain open() would (read at import, single-threaded: os.umask can only be read by setting it).
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` so that readers see the old or the new content, never a mix.
    `mode`: the file's permission bits (default FILE_MODE; `report --out` keeps a replaced page's)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:  # name the file the user knows, not the temp file (read-only dir, full disk)
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        os.fchmod(fd, FILE_MODE if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        fault_point(f"write:{path.name}")
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise OSError(e.errno, e.strerror, str(path)) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # fsync the directory so the rename itself survives a power cut.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_json(path: Path, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_model(path: Path, model: BaseModel) -> None:
    atomic_write_text(path, model.model_dump_json(indent=2) + "\n")


def read_utf8(path: Path) -> str:
    """The text of a run-dir file; a file that is not UTF-8 is a one-line RunDirError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise RunDirError(f"{path}: not UTF-8 text (byte {e.object[e.start:e.start + 1]!r} at offset {e.start}); "
                          "restore the file or save it as UTF-8") from None


def read_json_object(path: Path) -> dict | None:
    """A step record the tool wrote (generate.json, package.json, ...): its dict, or None when it
    is missing, unreadable, not JSON or not a JSON object. None means "step not done", so the
    step runs again and rewrites it: a damaged record costs a re-run, never a traceback."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValueError covers JSONDecodeError and UnicodeDecodeError
        return None
    return data if isinstance(data, dict) else None


def require_json_object(path: Path, fix: str) -> dict:
    """An input file that must be a JSON object (analysis.json, hub_env.json for a teacher): its dict,
    or a one-line RunDirError naming the file and `fix` when it is missing, not UTF-8, not JSON or not an object."""
    path = Path(path)
    if not path.is_file():
        raise RunDirError(f"{path}: file not found; {fix}")
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as e:
        raise RunDirError(f"{path}: not valid JSON (line {e.lineno}: {e.msg}); {fix}") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object, found {type(data).__name__}; {fix}")
    return data


def read_model(path: Path, cls: type[M]) -> M:
    """Read a JSON file through its model; errors name the file and the first bad field."""
    path = Path(path)
    if not path.is_file():
        raise RunDirError(f"{path}: file not found")
    text = read_utf8(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RunDirError(f"{path}: not valid JSON (line {e.lineno}: {e.msg}); restore it or re-run the phase that writes it") from None
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise RunDirError(f"{path}: field '{field}': {err['msg']}; fix or restore this field") from None


# ---------------------------------------------------------------- paths


class ArmDir:
    """One training arm (iter_N or a Phase 4 control): its dir and the engine's output tree."""

    def __init__(self, root: Path, name: str, layout: OutputLayout = SEED_LAYOUT):
        self.name = name
        self.dir = Path(root) / name
        self.layout = layout  # the engine's output tree (prime_out/) of the run's prime-rl version

    # files the tool writes
    @property
    def rl_toml(self) -> Path:
        return self.dir / "rl.toml"

    @property
    def eval_overlay(self) -> Path:
        return self.dir / "eval_overlay.toml"

    @property
    def train_log(self) -> Path:
        return self.dir / "train.log"

    @property
    def job_file(self) -> Path:
        return self.dir / "job.json"

    @property
    def eval_summary(self) -> Path:
        return self.dir / "eval_summary.json"

    # the engine's output tree
    @property
    def prime_out(self) -> Path:
        return self.dir / "prime_out"

    @property
    def _run_root(self) -> Path:
        return self.prime_out / self.layout.run_subdir

    @property
    def rollouts(self) -> Path:
        return self._run_root / "rollouts"

    def rollout_step(self, step: int) -> Path:
        return self.rollouts / f"step_{step}"

    def train_file(self, step: int) -> Path:
        """The step's train rollouts: seed train_rollouts.jsonl, main rollouts/step_N/train/all/traces.jsonl."""
        return self.rollout_step(step) / self.layout.train_rollouts

    def eval_file(self, step: int) -> Path:
        return self.rollout_step(step) / self.layout.eval_rollouts

    def weights(self, step: int) -> Path:
        return self.prime_out / "weights" / f"step_{step}"

    def trainer_ckpt(self, step: int) -> Path:
        return self.prime_out / "checkpoints" / f"step_{step}"

    def orchestrator_ckpt(self, step: int) -> Path:
        return self._run_root / "checkpoints" / f"step_{step}" / self.layout.orchestrator_ckpt

    def broadcast(self, step: int) -> Path:
        return self._run_root / "broadcasts" / f"step_{step}"

    def checkpoint_missing(self, step: int) -> list[Path]:
        """What checkpoint `step` lacks to be whole: the trainer's DCP `.metadata` (torch.distributed.checkpoint
        writes it last) and the orchestrator's progress.pt (both prime-rl versions: main orchestrator/ckpt.py:40-46,
        seed 09e297743 orchestrator/ckpt.py:41-43). prime-rl writes the final checkpoint after the last train
        step (main rl/train.py:727-731), after the final eval has been triggered: an arm is done only when
        its job ended and this is empty."""
        orchestrator = self._run_root / "checkpoints" / f"step_{step}" / "orchestrator"  # both: <run dir>/checkpoints
        need = (self.trainer_ckpt(step) / "trainer" / ".metadata", orchestrator / "progress.pt")
        return [p for p in need if not p.is_file()]

    def rollout_steps(self) -> list[int]:
        """Step numbers that have a rollouts dir, ascending."""
        return sorted_steps(self.rollouts)

    def weight_steps(self) -> list[int]:
        return sorted_steps(self.prime_out / "weights")


_STEP_RE = re.compile(r"^step_(\d+)$")


def sorted_steps(parent: Path) -> list[int]:
    """The N of every step_N child of `parent`, ascending (the skill's procedure's `sort -V | tail -1`)."""
    if not parent.is_dir():
        return []
    return sorted(int(m.group(1)) for p in parent.iterdir() if (m := _STEP_RE.match(p.name)))


class RunDir:
    """A run directory: `runs/<dataset>-<UTC timestamp>/`."""

    def __init__(self, root: Path | str):
        try:
            self.root = Path(root).resolve()
        except RuntimeError:  # Python < 3.13 raises this for a symlink loop; 3.13 raises OSError(ELOOP)
            raise RunDirError(f"run dir {root}: a symlink loop (a link that points back at itself); "
                              "point --run-dir at the real directory") from None
        except OSError as e:
            raise RunDirError(f"run dir {root}: cannot resolve it ({e.strerror}); "
                              "point --run-dir at an existing directory") from None

    # ---- top-level files
    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def metrics_json(self) -> Path:
        return self.root / "metrics.json"

    @property
    def scratchpad(self) -> Path:
        return self.root / "scratchpad.md"

    @property
    def hub_env_json(self) -> Path:
        return self.root / "hub_env.json"

    @property
    def best_iter_json(self) -> Path:
        return self.root / "best_iter.json"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    @property
    def plot_png(self) -> Path:
        return self.root / "eval_acc.png"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    # ---- arms
    @property
    def layout(self) -> OutputLayout:
        """The engine output layout of this run's arms, by run.json `stack` (the seed dialect's when absent or unreadable)."""
        try:
            stack = json.loads(self.run_json.read_text(encoding="utf-8")).get("stack")
        except (OSError, ValueError, AttributeError):
            stack = None
        return LAYOUT_OF_STACK.get(stack, SEED_LAYOUT)

    def iter(self, n: int) -> ArmDir:
        return ArmDir(self.root, f"iter_{n}", self.layout)

    def control(self, arm: str, seed_index: int = 0) -> ArmDir:
        """A Phase 4 control: run_a_best_from_iter0/, or run_a_best_from_iter0_seed1/ for seed member 1."""
        return ArmDir(self.root, seed_key(CONTROL_ARMS[arm], seed_index), self.layout)

    def arm(self, key: str) -> ArmDir:
        """The dir of any metrics.json arm key: iter_N, iter_N_seedK, run_a, run_a_seedK, ..."""
        base, k = split_seed_key(key)
        if base in CONTROL_ARMS:
            return self.control(base, k)
        if re.fullmatch(r"iter_\d+", base):
            return ArmDir(self.root, seed_key(base, k), self.layout)  # iter_2_seed1/: the best iteration retrained with seed 1
        raise RunDirError(f"unknown arm '{key}'; expected iter_N, run_a, run_b or run_c (optionally _seedK)")

    def iter_indices(self) -> list[int]:
        """N of every iter_N directory the tool could have made: canonical numbers only (a hand-made
        iter_0001 beside iter_1 is not the same iteration a second time, and is not the tool's)."""
        out = []
        for p in self.root.iterdir() if self.root.is_dir() else []:
            m = re.match(r"^iter_(0|[1-9][0-9]*)$", p.name)
            if m and p.is_dir():
                out.append(int(m.group(1)))
        return sorted(out)

    # ---- stored paths
    def rel(self, path: Path | str) -> str:
        """How run files store a path: relative to the run dir when it points inside it (so a
        copied or moved run dir still works), else absolute (e.g. an --init-from source)."""
        p = Path(path)
        try:
            return str(p.relative_to(self.root))
        except ValueError:
            return str(p)

    def resolve(self, stored: str) -> Path:
        """A stored path as a usable one: relative paths are taken from the run dir (older
        run dirs stored absolute paths, which are kept as they are)."""
        p = Path(stored)
        return p if p.is_absolute() else self.root / p

    # ---- validation
    def require(self) -> "RunDir":
        """Fail with one line unless this looks like a run directory."""
        try:
            self.root.is_dir()  # a symlink loop under the root surfaces here (ELOOP)
        except OSError as e:
            raise RunDirError(f"run dir {self.root}: {e.strerror}; point --run-dir at the real directory") from None
        if not self.root.is_dir():
            raise RunDirError(f"run dir {self.root} does not exist; create one with `selfimprove bootstrap <dataset>`")
        if not self.run_json.is_file():
            raise RunDirError(f"{self.run_json}: not found; is {self.root} a run dir made by `selfimprove bootstrap`?")
        return self

    # ---- typed IO
    def read_run(self) -> RunConfig:
        return read_model(self.run_json, RunConfig)

    def write_run(self, cfg: RunConfig) -> None:
        write_model(self.run_json, cfg)

    def read_metrics(self) -> Metrics:
        return read_model(self.metrics_json, Metrics)

    def write_metrics(self, metrics: Metrics) -> None:
        write_model(self.metrics_json, metrics)

    def updating(self) -> contextlib.AbstractContextManager:
        """Hold this around a read-modify-write of run.json or metrics.json that may race another thread
        of this process (`with rd.updating(): cfg = rd.read_run(); ...; rd.write_run(cfg)`)."""
        return _UPDATES

    def record_arm(self, record: IterRecord) -> None:
        """Add or replace the record of `record.arm` in metrics.json (idempotent: no duplicates)."""
        with _UPDATES:
            metrics = self.read_metrics()
            kept = [r for r in metrics.iters if r.arm != record.arm]
            metrics.iters = kept + [record]
            self.write_metrics(metrics)

    def read_hub_env(self) -> HubEnv:
        if not self.hub_env_json.is_file():
            raise RunDirError(f"{self.hub_env_json}: not found; run `selfimprove introspect --run-dir {self.root}` first")
        return read_model(self.hub_env_json, HubEnv)

    def write_hub_env(self, hub: HubEnv) -> None:
        write_model(self.hub_env_json, hub)

    def read_eval_summary(self, arm: ArmDir) -> EvalSummary:
        return read_model(arm.eval_summary, EvalSummary)

    def read_scratchpad(self) -> str:
        """scratchpad.md's text; "" when it was deleted (phases then append their entries afresh)."""
        return read_utf8(self.scratchpad) if self.scratchpad.is_file() else ""

    def append_scratchpad(self, text: str) -> None:
        """Append a block to scratchpad.md (atomic rewrite: the file is small)."""
        with _UPDATES:
            old = self.read_scratchpad()
            sep = "" if not old or old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
            atomic_write_text(self.scratchpad, old + sep + text.rstrip("\n") + "\n")

    # ---- lock
    @contextlib.contextmanager
    def lock(self, command: str = "selfimprove") -> Iterator[None]:
        """Hold the run dir's lock for the duration of a phase.

        A second holder fails at once with the first one's pid. The kernel drops
        an flock when its process dies, so a stale lock is simply taken over.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except (IsADirectoryError, NotADirectoryError, FileExistsError) as e:  # not a regular file
            raise RunDirError(f"{self.lock_file}: cannot be used as the run dir's lock file ({e.strerror}); it holds "
                              f"nothing of the run: remove it (`rm -r {self.lock_file}`) and re-run") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_lock_holder(self.lock_file)
                raise RunDirLocked(
                    f"run dir {self.root} is locked by pid {holder.get('pid', '?')} "
                    f"({holder.get('command', 'unknown command')}); wait for it to finish or stop that process"
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "command": command, "since": time.time()}).encode())
            os.fsync(fd)
            self._remove_write_debris()
            yield
        finally:
            os.close(fd)  # releases the flock


    def _remove_write_debris(self) -> None:
        """Delete the temp files of atomic writes that a killed phase left in the run dir's top level.

        Only the lock holder writes there (training jobs write under <arm>/prime_out/, never here),
        so with the lock held no such file can belong to a live write."""
        for tmp in self.root.glob(".*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def _read_lock_holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}
