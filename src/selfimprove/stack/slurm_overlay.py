"""The SLURM overlay of a run (`--slurm FILE.toml`): a prime-rl config file holding `[slurm]` and, for
several nodes, `[deployment]`. Every launch of the run gets it as one more `@ FILE`, the way prime-rl
composes overlays, so the engine (prime-rl's `rl`, or `selfimprove-rl`) submits the job itself.

Checked against the dialect's key snapshot (prime-rl's SlurmConfig / deployment keys), so a
misspelt key is refused at bootstrap, with the file, the key and the fix, not on the cluster.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from . import prime_rl_keys
from .toml_paths import read_toml

OVERLAY_TABLES = ("slurm", "deployment")


def read_overlay(path: Path, keys_file: str, flag: str = "--slurm") -> dict:
    """The overlay's tables; a ConfigError naming the file, the field and the fix when it is not one."""
    cfg = read_toml(path)
    where = f"{flag} {path}"
    if not isinstance(cfg.get("slurm"), dict):
        raise ConfigError(f"{where}: no [slurm] table; add one, e.g. `[slurm]` with `partition = \"gpu\"` "
                          "(prime-rl's SlurmConfig keys), or drop --slurm to train on this machine")
    other = sorted(k for k in cfg if k not in OVERLAY_TABLES)
    if other:
        raise ConfigError(f"{where}: [{other[0]}] does not belong in a SLURM overlay (only [slurm] and [deployment]); "
                          "move it to the canonical config (--config)")
    check_tables(cfg, keys_file, where)
    return cfg


def check_tables(cfg: dict, keys_file: str, where: str) -> None:
    """[slurm] / [deployment] keys and types per the dialect's snapshot of prime-rl."""
    tables = {k: cfg[k] for k in OVERLAY_TABLES if k in cfg}
    unknown = prime_rl_keys.unknown_keys(tables, keys_file)
    if unknown:
        table = unknown[0].split(".")[0]
        valid = ", ".join(sorted(prime_rl_keys.node_at(table, keys_file) or {}))
        version = prime_rl_keys.load_key_tree(keys_file)["dialect"]
        raise ConfigError(f"{where}: unknown key '{unknown[0]}' for {version}; the [{table}] keys are: {valid}")
    bad = prime_rl_keys.type_errors(tables, keys_file)
    if bad:
        raise ConfigError(f"{where}: {bad[0]}; fix the value's type")


def overlay_of(canonical: dict) -> dict | None:
    """The [slurm] (and [deployment]) tables of a canonical config that holds [slurm], else None."""
    if not isinstance(canonical.get("slurm"), dict):
        return None
    return {k: canonical[k] for k in OVERLAY_TABLES if k in canonical}
