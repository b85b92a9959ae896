"""Every launch argv of a run, through prime-rl's own config parser: what `rl` would accept.

    python bench/prime_rl_parse.py --python ~/prl-configs/bin/python RUN_DIR [--also multinode.toml [--also ...]]

`--python` is an interpreter where prime-rl's `packages/prime-rl-configs` is installed at the commit of
the run's dialect (09e297743 for `seed`, 559b44772 for `v1`; Python 3.12 with that commit's pins), e.g.
the venv tests/prime_rl_venvs.py builds (`<checkout>/.venv/bin/python`). The suite's dry-run tier goes
further (prime-rl's whole `rl --dry-run` on every launch of a run: docs/how-to/gpu-prime-rl.md); this
checks any run dir by hand; docs/results.md records its figures.

For each `<arm>/job.json` it runs, in that interpreter, what `rl`'s main() runs on the argv after the
engine name: `pydantic_config.cli(RLConfig, args=argv)`. The run's generated environment packages
(`<arm>/<package>/`) and this checkout's `src/` are put on PYTHONPATH, because prime-rl >= 0.8 imports
every taskset id while it validates. With `--also FILE`, each argv is checked a second time with the
run's `--slurm` overlay replaced by FILE (e.g. a multi-node `[deployment]`). One line per check, then
the count; exit 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run in the prime-rl interpreter: parse, then print what the scheduler side would use.
PARSE = """
import json, sys
from pydantic_config import cli
from prime_rl.configs.rl import RLConfig
try:
    cfg = cli(RLConfig, args=sys.argv[1:])
except Exception as e:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and ln.strip() != "<root>"]
    print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {' '.join(lines[-2:])}"[:300]}))
else:
    slurm = cfg.slurm.model_dump(mode="json") if cfg.slurm is not None else None
    dep = cfg.deployment
    print(json.dumps({"ok": True, "job_name": slurm and slurm["job_name"], "partition": slurm and slurm["partition"],
                      "deployment": dep.type, "train_nodes": getattr(dep, "num_train_nodes", None),
                      "infer_nodes": getattr(dep, "num_infer_nodes", None)}))
"""


def package_dirs(run_dir: Path) -> list[str]:
    """The generated env packages' project dirs (each holds pyproject.toml and the importable package)."""
    return sorted(str(p.parent) for p in run_dir.glob("*/*/pyproject.toml"))


def check(python: str, argv: list[str], env: dict) -> dict:
    r = subprocess.run([python, "-c", PARSE, *argv], capture_output=True, text=True, env=env)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"ok": False, "error": (r.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="an interpreter with prime-rl-configs installed")
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--also", action="append", default=[], type=Path,
                    help="check each argv again with the run's --slurm overlay replaced by this file")
    args = ap.parse_args()
    run = json.loads((args.run_dir / "run.json").read_text())
    overlay = run.get("slurm")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*package_dirs(args.run_dir), str(REPO / "src")])}
    print(f"run {args.run_dir.name}: stack {run.get('stack')}, slurm overlay {overlay}, interpreter {args.python}")
    failed = total = 0
    for job in sorted(args.run_dir.glob("*/job.json")):
        cmd = json.loads(job.read_text())["cmd"]
        argv = cmd[cmd.index("@"):]  # after the engine's command (one token or several), as `rl` sees it
        variants = [("as run", argv)]
        for other in args.also:
            if not overlay or overlay not in argv:
                sys.exit(f"{job}: the run's --slurm overlay {overlay} is not in the argv; --also needs a --slurm run")
            variants.append((other.name, [str(other.resolve()) if a == overlay else a for a in argv]))
        for label, av in variants:
            res = check(args.python, av, env)
            total += 1
            failed += not res["ok"]
            what = (f"OK  job {res['job_name']}, partition {res['partition']}, {res['deployment']}"
                    + (f" ({res['train_nodes']} train + {res['infer_nodes']} infer nodes)" if res["train_nodes"] else "")
                    if res["ok"] else f"REFUSED  {res['error']}")
            print(f"  {job.parent.name:30s} {label:16s} {what}")
    print(f"{total - failed}/{total} argvs parse with prime-rl's parser")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
