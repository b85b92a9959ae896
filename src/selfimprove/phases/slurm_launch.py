"""What a launch adds when the run trains on SLURM: the overlay `@ FILE` and the arm's job name.

The overlay is run.json's `slurm` (`--slurm FILE.toml`), or, when the canonical config itself holds
[slurm], a copy of its [slurm]/[deployment] tables written next to run.json at iter_0, so every
later arm (built from the tool's own rl.toml, not the canonical) goes to the scheduler the same way.
The engine submits (prime-rl's `rl` and `selfimprove-rl` alike); `engines.jobs` tracks the job.

The env packages must survive the sbatch script's `uv sync`. prime-rl's templates run an exact sync
before `uv run rl` (main templates/single_node_rl.sbatch.j2:34 `uv sync --all-extras --all-packages`,
multi_node :154/:158; seed 09e297743 single_node :30 `uv sync --all-extras`), which uninstalls every
package its lock does not list: each generated package the tool pip-installed. Their `[slurm]
pre_run_command` runs after that sync, in the activated venv (:36-39; seed :32-35; SlurmConfig:
"after cd, .env sourcing, and venv activation"), and prime-rl's own examples use it to change the
synced venv (examples/advanced/nemotron-3-super/swe.toml:13). So every SLURM launch appends to it a
reinstall of the run's generated packages (`reinstall_command`), with their project dirs also on
PYTHONPATH; `uv run rl` then syncs inexactly (uv's default for `run`), which leaves them. The real env is the user's install: prime-rl's docs make
it a workspace member of the checkout (README.md:114, pyproject.toml [tool.uv.workspace]), which the
sync keeps (docs/how-to/gpu-prime-rl.md). Workspace members were not chosen for the generated packages:
each would edit the user's pyproject.toml and re-lock uv.lock every iteration, and prime-rl's sync at the seed
commit (no --all-packages) would remove them anyway.
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from ..engines.slurm import job_name
from ..models import RunConfig
from ..rundir import RunDir
from ..stack.env_python import env_python_of
from ..stack.slurm_overlay import overlay_of
from ..stack.toml_paths import read_toml

CANONICAL_OVERLAY = "slurm_from_canonical.toml"


def overlay_path(rd: RunDir, cfg: RunConfig) -> Path | None:
    if cfg.slurm:
        return Path(cfg.slurm)
    copy = rd.root / CANONICAL_OVERLAY
    return copy if copy.is_file() else None


def keep_canonical_overlay(rd: RunDir, cfg: RunConfig, canonical: dict, dialect) -> None:
    """A canonical config holding [slurm] puts the whole run on SLURM: keep its tables for later arms."""
    tables = overlay_of(canonical)
    if cfg.slurm is None and tables is not None:
        dialect.write_toml(rd.root / CANONICAL_OVERLAY, tables, partial=True)


def on_slurm(rd: RunDir, cfg: RunConfig) -> bool:
    return overlay_path(rd, cfg) is not None


def launch_extras(rd: RunDir, cfg: RunConfig, arm_name: str) -> tuple[list[Path], dict, str | None]:
    """(overlay files to append, overrides to add, the arm's job name) for one launch; empty off SLURM."""
    overlay = overlay_path(rd, cfg)
    if overlay is None:
        return [], {}, None
    name = job_name(cfg.run_id or cfg.dataset, arm_name, place_tag(rd, cfg))
    slurm: dict = {"job_name": name}
    reinstall = reinstall_command(rd, cfg)
    if reinstall:
        theirs = (read_toml(overlay).get("slurm") or {}).get("pre_run_command")
        slurm["pre_run_command"] = f"{theirs}; {reinstall}" if theirs else reinstall  # the CLI value replaces theirs
    return [overlay], {"slurm": slurm}, name


def env_packages(rd: RunDir) -> list[Path]:
    """The generated env packages' project dirs built so far in the run (each arm's, the held-out split's)."""
    return sorted(p.parent.resolve() for p in rd.root.glob("*/*/pyproject.toml"))


def reinstall_command(rd: RunDir, cfg: RunConfig) -> str | None:
    """The shell line that puts the run's env packages back after the sbatch script's `uv sync`, or None.

    prime-rl: `uv pip install` into the venv the template activated ($PRIME_RL_DIR/.venv; uv venvs have
    no pip). The CPU engine: the engine's interpreter's pip, as `install_package` installed them."""
    dirs = [shlex.quote(str(d)) for d in env_packages(rd)]
    if not dirs:
        return None
    # Phase 4 submits its arms side by side and every job syncs the same venv: a job whose env server
    # imports its package while another job's sync has removed it would fail. The project dirs on
    # PYTHONPATH (exported in the script's shell, inherited by `uv run rl` and what it starts) keep
    # them importable whatever the venv holds at that moment.
    # The reinstall keeps the venv as the tool left it (its provenance check before each arm reads it);
    # two jobs reinstalling at once may trip over each other, which must not end the job (`set -e`):
    # PYTHONPATH already makes the packages importable.
    path = "export PYTHONPATH=" + ":".join(dirs) + "${PYTHONPATH:+:$PYTHONPATH}"
    if cfg.engine == "prime-rl":
        install = " ".join(["uv pip install --no-deps --reinstall --quiet", *dirs])
    else:
        python = shlex.quote(env_python_of(cfg))
        install = " ".join([python, "-m pip install --no-deps --no-build-isolation --force-reinstall --quiet", *dirs])
    return f"{path}; {install} || echo 'selfimprove: reinstalling the env packages failed; they import from PYTHONPATH'"


def place_tag(rd: RunDir, cfg: RunConfig) -> str | None:
    """None where the run dir was made; elsewhere (a copy, or a moved dir) 6 hex of its path. A copy of a
    run with live jobs would otherwise submit under the original's names: two live jobs of one name, and
    the name lookup after a kill -9 could adopt the other run's job."""
    here = str(rd.root.resolve())
    if cfg.home is None or cfg.home == here:  # run.json from before `home`: the name it always had
        return None
    return hashlib.sha256(here.encode()).hexdigest()[:6]
