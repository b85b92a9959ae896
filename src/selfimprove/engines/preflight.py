"""The preflight of the prime-rl engine: prime-rl's own `rl --dry-run` on iter_0's exact argv, and the GPUs
each arm needs, before the first launch spends GPU time.

    needs = preflight(argv, on_slurm=False)   # GpuNeeds; raises PreflightRefused (one line) when it must not launch

1. prime-rl's judgement. `$PRIME_RL_DIR/.venv/bin/rl ARGV --dry-run` (the checkout's venv, where its envs are
   installed) parses and validates the whole RLConfig, imports every taskset id and resolves the sub-configs
   without touching a GPU (entrypoints/rl.py: `if config.dry_run: ... return` before any process starts). The
   argv is iter_0's as it will launch, with only --output-dir pointed at a scratch dir, so nothing lands in
   prime_out before the real launch. A refusal is raised with prime-rl's own key line (the boxed pydantic
   `N validation error for RLConfig` and the field under it, or the last error line).
2. What an arm needs. The resolved `[deployment]`, read by prime-rl's own parser in the same venv: single
   node = num_infer_gpus (only with [inference]) + num_train_gpus (defaults 1 + 1; prime-rl main refuses
   fewer than 2 under its default NCCL broadcast, configs/rl.py validate_enough_devices_for_nccl); multi node =
   (train nodes + inference nodes) x gpus_per_node. Every arm is launched with the same [deployment] (the
   canonical config and the --slurm overlay), so iter_0's needs are every arm's.
3. Whether they are there. On this machine, prime-rl's own rule (utils/process.py get_physical_gpu_ids):
   CUDA_VISIBLE_DEVICES when set, else every GPU the driver lists (`nvidia-smi -L`). On SLURM the job gets a
   node of its own (`--gres=gpu:{gpus_per_node} --exclusive` in prime-rl's sbatch templates): the need must
   fit gpus_per_node per node, which the login node cannot check further.

SELFIMPROVE_SKIP_PREFLIGHT=1 launches without it (said on the console): for a launcher that is not a
prime-rl checkout. Not covered: anything a dry run cannot see (CUDA, vLLM, NCCL, memory, the model download).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

SKIP_ENV = "SELFIMPROVE_SKIP_PREFLIGHT"
DRY_RUN_TIMEOUT_S = 600
_BOX = "│┃|"
_VALIDATION = re.compile(r"(\d+) validation errors? for (\w+)")

# Run in prime-rl's venv: the resolved deployment, parsed as `rl`'s main() parses its argv (both commits).
_DEPLOYMENT = """
import json, sys
from prime_rl.configs.rl import RLConfig
from prime_rl.utils.config import cli
sys.argv = ["rl", *sys.argv[1:]]
cfg = cli(RLConfig)
d = cfg.deployment
wb = getattr(getattr(cfg.trainer, "weight_broadcast", None), "type", None)
print(json.dumps({"type": d.type, "gpus_per_node": d.gpus_per_node, "inference": cfg.inference is not None,
                  "train_gpus": getattr(d, "num_train_gpus", None), "infer_gpus": getattr(d, "num_infer_gpus", None),
                  "train_nodes": getattr(d, "num_train_nodes", None),
                  "infer_nodes": getattr(d, "total_infer_nodes", getattr(d, "num_infer_nodes", None)),
                  "weight_broadcast": wb}))
"""


class PreflightRefused(ConfigError):
    """prime-rl refused the config, or the machine / deployment cannot give an arm its GPUs."""


@dataclass(frozen=True)
class GpuNeeds:
    """What one arm holds while it trains (every arm alike)."""

    gpus: int  # GPUs in all
    nodes: int  # nodes (multi_node) or 1
    gpus_per_node: int
    detail: str  # "1 inference + 1 trainer", "1 train + 1 inference node x 8"
    weight_broadcast: str | None

    def line(self) -> str:
        where = f"{self.nodes} nodes of {self.gpus_per_node} GPUs" if self.nodes > 1 else "one node"
        return f"each arm needs {self.gpus} GPU{'s' if self.gpus != 1 else ''} ({self.detail}) on {where}"


def prime_rl_venv(prime_rl_dir: str | None) -> Path:
    """$PRIME_RL_DIR/.venv/bin (holding `rl` and `python`); a PreflightRefused naming the fix when it is not one."""
    if not prime_rl_dir or not str(prime_rl_dir).strip():
        raise PreflightRefused(f"PRIME_RL_DIR is not set: set it to prime-rl's checkout (after `uv sync` there) so the "
                               f"preflight can run prime-rl's `rl --dry-run` before any GPU time, or set {SKIP_ENV}=1")
    bin_dir = Path(prime_rl_dir).expanduser() / ".venv" / "bin"
    if not (bin_dir / "rl").is_file():
        raise PreflightRefused(f"PRIME_RL_DIR={prime_rl_dir}: no {bin_dir / 'rl'}; run `uv sync` in the checkout "
                               f"(it installs prime-rl into .venv), or set {SKIP_ENV}=1")
    return bin_dir


def with_output_dir(argv: list[str], out: Path) -> list[str]:
    """`argv` with its --output-dir value replaced (added when it has none)."""
    out_argv, replaced, i = [], False, 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--output-dir" and i + 1 < len(argv):
            out_argv += [tok, str(out)]
            replaced, i = True, i + 2
            continue
        if tok.startswith("--output-dir="):
            out_argv.append(f"--output-dir={out}")
            replaced = True
        else:
            out_argv.append(tok)
        i += 1
    return out_argv if replaced else [*out_argv, "--output-dir", str(out)]


def key_message(output: str) -> str:
    """prime-rl's own words for why it refused: the validation header + the field and reason under it,
    else the last line that names an error; box-drawing borders (rich's traceback panel) stripped."""
    lines = [ln.strip().strip(_BOX).strip() for ln in output.splitlines()]
    lines = [ln for ln in lines if ln and not set(ln) <= set("─━╭╮╰╯┏┓┗┛ ")]
    for i, ln in enumerate(lines):
        m = _VALIDATION.search(ln)
        if m:
            # the field, then its reason, which rich wraps at the panel's width: up to two more lines of it
            rest = [x for x in lines[i + 1:i + 5] if not x.startswith("For further information")]
            return " ".join([m.group(0), *(f"- {x}" for x in rest)])[:400]
    errs = [ln for ln in lines if re.search(r"(Error|error|not found|refused|Extra inputs)", ln)]
    return (errs[-1] if errs else (lines[-1] if lines else "no output"))[:400]


def gpus_visible() -> tuple[int, str]:
    """(GPUs the launcher would see, how that was read), by prime-rl's rule (utils/process.py:36-44)."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is not None:
        return len([t for t in raw.split(",") if t.strip()]), f"CUDA_VISIBLE_DEVICES={raw!r}"
    if shutil.which("nvidia-smi") is None:
        return 0, "no nvidia-smi on PATH and CUDA_VISIBLE_DEVICES unset"
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    if r.returncode != 0:
        return 0, f"nvidia-smi -L failed: {(r.stderr or r.stdout).strip()[:120]}"
    return sum(1 for ln in r.stdout.splitlines() if ln.startswith("GPU ")), "nvidia-smi -L"


def needs_of(resolved: dict) -> GpuNeeds:
    gpn = int(resolved["gpus_per_node"])
    if resolved["type"] == "multi_node":
        train, infer = int(resolved["train_nodes"] or 0), int(resolved["infer_nodes"] or 0)
        return GpuNeeds((train + infer) * gpn, train + infer, gpn,
                        f"{train} train + {infer} inference node{'s' if infer != 1 else ''} x {gpn} GPUs",
                        resolved.get("weight_broadcast"))
    infer = int(resolved["infer_gpus"] or 0) if resolved["inference"] else 0
    train = int(resolved["train_gpus"] or 0)
    return GpuNeeds(infer + train, 1, gpn, f"{infer} inference + {train} trainer", resolved.get("weight_broadcast"))


def preflight(argv: list[str], *, on_slurm: bool, prime_rl_dir: str | None = None, where: str = "iter_0") -> GpuNeeds:
    """prime-rl's dry run of `argv` (the launch argv after the engine's name) and the GPU check; GpuNeeds, or
    PreflightRefused with one line: what to fix, and prime-rl's key message."""
    bin_dir = prime_rl_venv(prime_rl_dir if prime_rl_dir is not None else os.environ.get("PRIME_RL_DIR"))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    with tempfile.TemporaryDirectory(prefix="selfimprove-preflight-") as tmp:
        scratch = with_output_dir(argv, Path(tmp) / "out")
        r = subprocess.run([str(bin_dir / "rl"), *scratch, "--dry-run"], capture_output=True, text=True, env=env,
                           cwd=bin_dir.parents[1], timeout=DRY_RUN_TIMEOUT_S)
        if r.returncode != 0:
            raise PreflightRefused(f"{where}: prime-rl refused this config before any launch (`rl ... --dry-run` in "
                                   f"{bin_dir.parents[1]}, rc {r.returncode}); fix it in the canonical config or the "
                                   f"--slurm overlay, then re-run: {key_message(r.stdout + r.stderr)}")
        d = subprocess.run([str(bin_dir / "python"), "-c", _DEPLOYMENT, *scratch], capture_output=True, text=True,
                           env=env, cwd=bin_dir.parents[1], timeout=DRY_RUN_TIMEOUT_S)
    lines = [ln for ln in d.stdout.splitlines() if ln.startswith("{")]
    if d.returncode != 0 or not lines:
        raise PreflightRefused(f"{where}: prime-rl's parser could not resolve [deployment] in {bin_dir / 'python'}: "
                               f"{key_message(d.stdout + d.stderr)}")
    needs = needs_of(json.loads(lines[-1]))
    if on_slurm:
        if needs.nodes == 1 and needs.gpus > needs.gpus_per_node:  # prime-rl's own check; kept for the seed dialect's message
            raise PreflightRefused(f"{where}: {needs.line()}, more than [deployment] gpus_per_node = {needs.gpus_per_node}; "
                                   "raise gpus_per_node in the --slurm overlay or lower num_train_gpus / num_infer_gpus")
        return needs
    have, how = gpus_visible()
    if needs.nodes > 1:
        raise PreflightRefused(f"{where}: {needs.line()}: a multi_node [deployment] runs only through SLURM; pass --slurm "
                               "with it, or use a single_node [deployment] on this machine")
    if have < needs.gpus:
        raise PreflightRefused(f"{where}: {needs.line()}, but this machine gives {have} ({how}); run on a machine with "
                               f"{needs.gpus} GPUs, set CUDA_VISIBLE_DEVICES to {needs.gpus} of them, or pass --slurm")
    return needs
