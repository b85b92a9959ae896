"""An engine command that puts every launch through prime-rl's real `rl ARGV --dry-run`, then trains it on CPU.

    SELFIMPROVE_RL_CMD="python tests/prime_rl_dry_run.py" SELFIMPROVE_DRY_RUN_RL=<checkout>/.venv/bin/rl ...

For each launch the tool makes (same argv, same cwd) it runs, in prime-rl's own venv (tests/prime_rl_venvs.py):

1. `rl ARGV --dry-run`: prime-rl parses and validates the whole RLConfig, resolves every sub-config and
   writes them under `<output_dir>/<run.name>/configs/` (the seed: `<output_dir>/configs/`), and with a
   [slurm] table renders `rl.sbatch` there instead of submitting. prime-rl >= 0.8 imports every taskset id
   while validating, so the run's env packages (`<run dir>/<arm>/<package>/`) and this checkout's src/
   (the hub env) are put on its PYTHONPATH, as an install into prime-rl's venv would make them importable.
2. What prime-rl wrote is moved to `<arm>/prime_rl_dry_run/launch_<n>/` (the CPU engine writes its own
   rl.sbatch at the same path), with `argv.json` and `rl.log` beside it, so the tests read exactly what
   prime-rl resolved for each launch.
3. A refusal ends the launch with prime-rl's message and rc 1 (the arm crashes: the run fails, the test sees
   why). Otherwise `selfimprove-rl ARGV` trains it (with [slurm], submits it), as the tool's CPU engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD_DIR = "prime_rl_dry_run"


def _output_dir(argv: list[str]) -> Path:
    for i, tok in enumerate(argv):
        if tok == "--output-dir" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if tok.startswith("--output-dir="):
            return Path(tok.split("=", 1)[1])
    sys.exit("prime_rl_dry_run: the argv has no --output-dir")


def _run_name(argv: list[str]) -> str | None:
    for i, tok in enumerate(argv):
        if tok == "--run.name" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def package_path(run_dir: Path) -> list[str]:
    """The run's generated env packages' project dirs (each holds pyproject.toml and the package)."""
    return sorted(str(p.parent) for p in run_dir.glob("*/*/pyproject.toml"))


def main(argv: list[str]) -> int:
    rl = os.environ["SELFIMPROVE_DRY_RUN_RL"]
    out = _output_dir(argv).resolve()
    arm = out.parent
    name = _run_name(argv)
    written = out / name if name else out
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONHOME"))}
    env["PYTHONPATH"] = os.pathsep.join([*package_path(arm.parent), str(REPO / "src")])
    before = set(written.glob("configs")) | set(written.glob("rl.sbatch"))
    r = subprocess.run([rl, *argv, "--dry-run"], capture_output=True, text=True, env=env)
    records = arm / RECORD_DIR
    n = len(list(records.glob("launch_*"))) + 1
    rec = records / f"launch_{n}"
    rec.mkdir(parents=True)
    (rec / "argv.json").write_text(json.dumps({"argv": argv, "rc": r.returncode, "cwd": os.getcwd()}, indent=1))
    (rec / "rl.log").write_text(r.stdout + r.stderr)
    for what in ("configs", "rl.sbatch"):
        src = written / what
        if src.exists() and src not in before:
            shutil.move(str(src), str(rec / what))
    if r.returncode != 0:
        print(f"prime-rl's rl --dry-run refused launch {n} (rc {r.returncode}); its output:", flush=True)
        print((r.stdout + r.stderr)[-4000:], flush=True)
        return 1
    print(f"prime_rl_dry_run: prime-rl's rl --dry-run accepted launch {n}; training it with selfimprove-rl", flush=True)
    engine = [sys.executable, "-m", "selfimprove.rl.cli"]
    os.execv(engine[0], [*engine, *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
