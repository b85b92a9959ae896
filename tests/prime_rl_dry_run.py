"""An engine command that puts every launch through prime-rl's real `rl ARGV --dry-run`, then trains it on CPU.

    SELFIMPROVE_RL_CMD="python tests/prime_rl_dry_run.py" SELFIMPROVE_DRY_RUN_RL=<checkout>/.venv/bin/rl ...

For each launch the tool makes (same argv, same cwd) it runs, in prime-rl's own venv (tests/prime_rl_venvs.py):

1. `rl ARGV --dry-run`: prime-rl parses and validates the whole RLConfig, resolves every sub-config and
   writes them under `<output_dir>/<run.name>/configs/` (the seed: `<output_dir>/configs/`), and with a
   [slurm] table renders `rl.sbatch` there instead of submitting. prime-rl >= 0.8 imports every taskset id
   while validating, so the run's env packages (`<run dir>/<arm>/<package>/`) and this checkout's src/
   (the hub env) are put on its PYTHONPATH, as an install into prime-rl's venv would make them importable.
2. What prime-rl wrote is copied to `<arm>/prime_rl_dry_run/launch_<n>/` (the CPU engine writes its own
   rl.sbatch and configs/ at the same paths), with `argv.json` and `rl.log` beside it, so the tests read
   exactly what prime-rl resolved for each launch; what was not there before the dry run is then removed.
3. A refusal ends the launch with prime-rl's message and rc 1 (the arm crashes: the run fails, the test sees
   why). Otherwise `selfimprove-rl ARGV` trains it (with [slurm], submits it), as the tool's CPU engine.

SELFIMPROVE_DRY_RUN_CRASH=<arm>:<step> crashes that arm's first launch (SIGKILL of the engine's process
group once checkpoint <step> is whole), for a `--resume` relaunch.

`replay(rl, argvs)` runs prime-rl's dry run over many argvs in ONE process of prime-rl's venv (its imports
cost ~6 s of CPU per process): for argvs a run already launched, e.g. with its --slurm overlay swapped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
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
    name = _run_name(argv)
    # v1: --output-dir <arm> --run.name prime_out; the seed: --output-dir <arm>/prime_out
    arm = out if name else out.parent
    written = out / name if name else out
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONHOME"))}
    env["PYTHONPATH"] = os.pathsep.join([*package_path(arm.parent), str(REPO / "src")])
    before = set(written.glob("configs")) | set(written.glob("rl.sbatch"))
    start, started = time.monotonic(), time.time() - 1  # mtimes may round down
    r = subprocess.run([rl, *argv, "--dry-run"], capture_output=True, text=True, env=env)
    seconds = round(time.monotonic() - start, 1)  # what the tier adds to this launch
    records = arm / RECORD_DIR
    n = len(list(records.glob("launch_*"))) + 1
    rec = records / f"launch_{n}"
    rec.mkdir(parents=True)
    (rec / "argv.json").write_text(json.dumps({"argv": argv, "rc": r.returncode, "cwd": os.getcwd(), "seconds": seconds}, indent=1))
    (rec / "rl.log").write_text(r.stdout + r.stderr)
    for what in ("configs", "rl.sbatch"):
        src = written / what
        # keep what this dry run wrote (a relaunch finds the CPU engine's own configs/ already there), then
        # take away what was not there before, so the engine starts on the tree it would have met
        fresh = [p for p in ([src] if src.is_file() else sorted(src.rglob("*")) if src.is_dir() else [])
                 if p.is_file() and p.stat().st_mtime >= started]
        for f in fresh:
            dest = rec / what / f.relative_to(src) if src.is_dir() else rec / what
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest)
        if src.exists() and src not in before:
            shutil.rmtree(src) if src.is_dir() else src.unlink()
    if r.returncode != 0:
        print(f"prime-rl's rl --dry-run refused launch {n} (rc {r.returncode}); its output:", flush=True)
        print((r.stdout + r.stderr)[-4000:], flush=True)
        return 1
    print(f"prime_rl_dry_run: prime-rl's rl --dry-run accepted launch {n} ({seconds} s); training it with selfimprove-rl",
          flush=True)
    engine = [sys.executable, "-m", "selfimprove.rl.cli", *argv]
    crash = os.environ.get("SELFIMPROVE_DRY_RUN_CRASH", "")
    if n == 1 and crash.split(":")[0] == arm.name:
        return crash_after(engine, out, int(crash.split(":")[1]))
    os.execv(engine[0], engine)
    return 0  # not reached


def crash_after(engine: list[str], out: Path, step: int) -> int:
    """Run the engine, SIGKILL its process group as soon as checkpoint `step` is whole (the trainer's DCP
    `.metadata` and the orchestrator's progress file written); its rc, or 137.

    As soon as, not later: main's final eval fires after batch max_steps-1 ships, well before the last
    step, and an arm whose final eval is complete is finished, not crashed."""
    proc = subprocess.Popen(engine, start_new_session=True)
    while proc.poll() is None:
        for ckpt in out.glob(f"**/checkpoints/step_{step}"):
            if (ckpt / "trainer" / ".metadata").is_file() and any((ckpt / "orchestrator").glob("progress.*")):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                print(f"prime_rl_dry_run: crashed the engine once checkpoint step {step} was whole "
                      "(SELFIMPROVE_DRY_RUN_CRASH)", flush=True)
                return 137
        time.sleep(0.02)
    return proc.returncode


# Run in prime-rl's venv: `rl ARGV --dry-run` for each argv of a JSON list, one JSON result line each.
_REPLAY = """
import json, os, sys, traceback
import prime_rl.entrypoints.rl as entry
for argv in json.load(open(sys.argv[1])):
    sys.argv = ["rl", *argv, "--dry-run"]
    try:
        entry.main()
        res = {"ok": True}
    except SystemExit as e:
        res = {"ok": not e.code, "error": f"exit {e.code}"}
    except BaseException as e:
        res = {"ok": False, "error": traceback.format_exc()[-3000:]}
    print("REPLAY " + json.dumps(res), flush=True)
"""


def replay(rl: str, argvs: list[list[str]], pythonpath: list[str], tmp: Path) -> list[dict]:
    """prime-rl's `rl ARGV --dry-run` for each argv, in one process of the venv holding `rl`; {"ok", "error"} each."""
    spec = tmp / "argvs.json"
    spec.write_text(json.dumps(argvs))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONHOME"))}
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, str(REPO / "src")])
    r = subprocess.run([str(Path(rl).parent / "python"), "-c", _REPLAY, str(spec)], capture_output=True, text=True,
                       env=env, timeout=900)
    results = [json.loads(ln[len("REPLAY "):]) for ln in r.stdout.splitlines() if ln.startswith("REPLAY ")]
    if len(results) != len(argvs):
        raise RuntimeError(f"replay ended after {len(results)}/{len(argvs)} argvs (rc {r.returncode}): {r.stderr[-2000:]}")
    return results


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# ---------------------------------------------------------------- what the tier tests read


def launches(run_dir: Path) -> list[tuple[str, Path, dict]]:
    """(arm, its record dir, argv.json) of every launch the wrapper saw, in arm then launch order."""
    out = []
    for rec in sorted(run_dir.glob(f"*/{RECORD_DIR}/launch_*"), key=lambda p: (p.parent.parent.name, int(p.name[7:]))):
        out.append((rec.parent.parent.name, rec, json.loads((rec / "argv.json").read_text())))
    return out


def env_configs(configs: Path) -> dict[str, dict]:
    """prime-rl's resolved env-server config of each source: {"train/<name>": {...}, "eval/<name>": {...}}."""
    return {f"{p.parent.name}/{p.stem}": json.loads(p.read_text()) for p in sorted(configs.glob("envs/*/*.json"))}


def with_overlay(argv: list[str], overlay: Path, flags: list[str]) -> list[str]:
    """`argv` with `@ overlay` after its last `@ file` and `flags` after it, as a --slurm launch is built."""
    last = max(i for i, tok in enumerate(argv) if tok == "@") + 2
    return [*argv[:last], "@", str(overlay), *flags, *argv[last:]]


def without_overlay(argv: list[str], overlay: str) -> list[str]:
    """`argv` with the --slurm overlay file and its --slurm.* flags taken out (the same launch on one machine)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "@" and i + 1 < len(argv) and argv[i + 1] == overlay:
            i += 2
        elif argv[i].startswith("--slurm."):
            i += 2 if "=" not in argv[i] else 1
        else:
            out.append(argv[i])
            i += 1
    return out
