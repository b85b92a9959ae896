"""The CPU engine's stand-in for the `uv sync` in prime-rl's sbatch templates, so the SLURM tests meet what
a real cluster does to the env packages.

    python -m selfimprove.rl.exact_sync OUTPUT_DIR

prime-rl's single-node template runs `uv sync --all-extras --all-packages` (main 559b44772,
templates/single_node_rl.sbatch.j2:34; seed 09e297743: `uv sync --all-extras`, :20) after activating
the checkout's venv and before `[slurm] pre_run_command` and `uv run rl`. An exact sync uninstalls every
package prime-rl's lock does not list, which includes every env package the tool pip-installed. This
does the same to the packages the CPU engine's job would lose: every distribution in this interpreter
that the tool installed for the run owning OUTPUT_DIR (its modules carry the tool's provenance.json
naming that run dir). Other runs' packages are left alone, since this venv may be shared by several runs,
where prime-rl's venv belongs to its checkout. The pre_run_command the tool adds (phases/slurm_launch.py)
must put them back, or the job fails to import its env, as on a real cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PROVENANCE_FILE = "provenance.json"  # stack/env_package.py writes it into every package it builds


def run_packages(output_dir: Path) -> list[str]:
    """Names of the installed distributions whose provenance names a run dir holding `output_dir`."""
    out = output_dir.resolve()
    names = []
    for dist in metadata.distributions():
        for f in dist.files or []:
            if f.name != PROVENANCE_FILE:
                continue
            try:
                prov = json.loads(Path(dist.locate_file(f)).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            run_dir = prov.get("run_dir")
            if run_dir and out.is_relative_to(Path(run_dir).resolve()):
                names.append(dist.metadata["Name"])
                break
    return sorted(set(names))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m selfimprove.rl.exact_sync OUTPUT_DIR", file=sys.stderr)
        return 2
    names = run_packages(Path(argv[0]))
    if names:
        r = subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *names], capture_output=True, text=True)
        if r.returncode != 0:
            # two jobs of the run syncing at once may race on the same package: what matters is that it is
            # gone or going, not whose uninstall removed it
            print(f"exact_sync: pip uninstall said: {(r.stderr or r.stdout).strip()[-300:]}", file=sys.stderr)
    print(f"exact_sync (as prime-rl's sbatch `uv sync`): uninstalled {len(names)} env package(s) not in the lock: "
          f"{', '.join(names) or '-'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
