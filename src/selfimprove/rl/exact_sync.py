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
import sysconfig
from pathlib import Path

PROVENANCE_FILE = "provenance.json"  # stack/env_package.py writes it into every package it builds


def site_dirs() -> list[Path]:
    """This interpreter's site-packages (purelib and platlib)."""
    return sorted({Path(sysconfig.get_path(k)) for k in ("purelib", "platlib")})


def run_packages(output_dir: Path, sites: list[Path] | None = None) -> list[str]:
    """Names of the installed env packages whose provenance names a run dir holding `output_dir`.

    A generated package's module dir, distribution and project share one name (stack/env_package.py
    package_name), so the module dirs that hold a provenance.json are read directly: no scan of every
    distribution's RECORD, which costs seconds on a loaded node inside the job's time limit."""
    out = output_dir.resolve()
    names = []
    for site in sites if sites is not None else site_dirs():
        for prov_file in site.glob(f"*/{PROVENANCE_FILE}"):
            try:
                run_dir = json.loads(prov_file.read_text(encoding="utf-8")).get("run_dir")
            except (OSError, ValueError, AttributeError):
                continue
            if run_dir and out.is_relative_to(Path(run_dir).resolve()):
                names.append(prov_file.parent.name)
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
