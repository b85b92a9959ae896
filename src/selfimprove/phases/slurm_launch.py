"""What a launch adds when the run trains on SLURM: the overlay `@ FILE` and the arm's job name.

The overlay is run.json's `slurm` (`--slurm FILE.toml`), or, when the canonical config itself holds
[slurm], a copy of its [slurm]/[deployment] tables written next to run.json at iter_0, so every
later arm (built from the tool's own rl.toml, not the canonical) goes to the scheduler the same way.
The engine submits (prime-rl's `rl` and `selfimprove-rl` alike); `engines.jobs` tracks the job.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..engines.slurm import job_name
from ..models import RunConfig
from ..rundir import RunDir
from ..stack.slurm_overlay import overlay_of

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
    return [overlay], {"slurm": {"job_name": name}}, name


def place_tag(rd: RunDir, cfg: RunConfig) -> str | None:
    """None where the run dir was made; elsewhere (a copy, or a moved dir) 6 hex of its path. A copy of a
    run with live jobs would otherwise submit under the original's names: two live jobs of one name, and
    the name lookup after a kill -9 could adopt the other run's job."""
    here = str(rd.root.resolve())
    if cfg.home is None or cfg.home == here:  # run.json from before `home`: the name it always had
        return None
    return hashlib.sha256(here.encode()).hexdigest()[:6]
