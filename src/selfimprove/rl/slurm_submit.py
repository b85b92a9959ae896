"""`selfimprove-rl` with a `[slurm]` table does what prime-rl's `rl` does with one: it renders an
sbatch script that runs the engine WITHOUT the table, submits it with `sbatch`, prints sbatch's
`Submitted batch job N` and exits 0. The training itself then runs as the scheduler's job.

    <run dir>/slurm/rl.toml   the merged config minus [slurm] (what the job trains with)
    <run dir>/rl.sbatch       the script (default template below, or [slurm] template_path)
    <run dir>/job_<id>.log    the job's output, as prime-rl's templates name it

The run dir is the engine's output dir (with prime-rl >= 0.8's run.name: output_dir/run.name),
as in prime-rl, so the tool finds the job's log at the same place with either engine.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from ..errors import ConfigError
from ..stack.prime_rl_keys import parse_cli_overrides
from ..stack.toml_paths import CONFIG_ERROR, deep_merge, merge_argv_files

DEFAULT_TEMPLATE = Path(__file__).parent / "templates" / "slurm_rl.sbatch.j2"
SBATCH_NAME = "rl.sbatch"
# SlurmConfig's defaults (prime-rl-configs shared.py), so a bare [slurm] renders as with prime-rl.
SLURM_DEFAULTS = {"job_name": "prime-rl", "project_dir": ".", "template_path": None, "partition": "cluster",
                  "nodelist": None, "exclude": None, "account": None, "time": None, "pre_run_command": None,
                  "cleanup_grace_period": 3600, "shared_fs": True}


def wants_slurm(argv: list[str], dialect) -> tuple[dict, dict] | None:
    """(the raw merged config, its [slurm] table) when the argv asks for SLURM, else None."""
    merged, _files, flags = merge_argv_files(argv)
    raw = deep_merge(merged, parse_cli_overrides(flags, dialect.keys_file))
    slurm = raw.get("slurm")
    if slurm is None:
        return None
    if not isinstance(slurm, dict):
        raise ConfigError(f"{CONFIG_ERROR}: [slurm] must be a table of SlurmConfig keys (job_name, partition, time, ...)")
    return raw, slurm


def submit(argv: list[str], dialect, raw: dict, slurm: dict) -> int:
    """Write the job's config and script, `sbatch` it, print sbatch's line; the exit code."""
    full, _files = dialect.parse_rl_argv(argv)  # validates everything, resolves the run dir as the job will
    run_dir = Path(full["output_dir"]).resolve()
    job_cfg = {k: v for k, v in raw.items() if k != "slurm"}
    if "output_dir" in job_cfg:
        job_cfg["output_dir"] = str(Path(job_cfg["output_dir"]).resolve())
    cfg_path = run_dir / "slurm" / "rl.toml"
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    dialect.write_toml(cfg_path, job_cfg)
    script = run_dir / SBATCH_NAME
    script.write_text(render(slurm, cfg_path, run_dir))
    print(f"selfimprove-rl: wrote the SLURM script {script}", flush=True)
    if full.get("dry_run"):
        print(f"Dry run complete. To submit manually:\n\n  sbatch {script}")
        return 0
    try:
        r = subprocess.run(["sbatch", str(script)], capture_output=True, text=True)
    except FileNotFoundError:
        print("selfimprove-rl: sbatch is not on PATH: run this on a SLURM login node, or drop the [slurm] table",
              file=sys.stderr)
        return 1
    if r.returncode != 0:
        print(f"selfimprove-rl: sbatch failed: {r.stderr.strip() or r.stdout.strip()}", file=sys.stderr)
        return 1
    print(r.stdout.strip(), flush=True)
    return 0


def render(slurm: dict, cfg_path: Path, run_dir: Path) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    values = {**SLURM_DEFAULTS, **slurm}
    template = Path(values["template_path"]) if values["template_path"] else DEFAULT_TEMPLATE
    if not template.is_file():
        raise ConfigError(f"{CONFIG_ERROR}: [slurm] template_path {template} does not exist; point it at an "
                          "sbatch Jinja template, or remove it to use the engine's default")
    env = Environment(loader=FileSystemLoader(str(template.parent)), keep_trailing_newline=True,
                      undefined=StrictUndefined)
    command = shlex.join([sys.executable, "-m", "selfimprove.rl.cli", "@", str(cfg_path)])
    sync = shlex.join([sys.executable, "-m", "selfimprove.rl.exact_sync", str(run_dir)])  # prime-rl's `uv sync` line
    return env.get_template(template.name).render(
        **{k: v for k, v in values.items() if k not in ("template_path", "project_dir")},
        project_dir=str(Path(values["project_dir"]).resolve()), config_path=str(cfg_path),
        output_dir=str(run_dir), command=command, sync_command=sync, cpus_per_task=1,
    )
