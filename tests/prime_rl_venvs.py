"""prime-rl's real `rl` on this machine: a checkout + venv per dialect, built once from ../shared/upstream.

    python tests/prime_rl_venvs.py            # build both (what the dry-run tier does on first use)
    root = prime_rl_checkout("v1")            # <cache>/prime-rl-dry-run/v1-<key>/prime-rl, or pytest.skip

Each checkout is the prime-rl archive of the dialect's commit, unpacked, with `.venv/` holding Python
3.12, the PyPI pins of ../shared/upstream/dry-run-venv.txt, verifiers at prime-rl's pinned commit,
prime-rl-configs and prime-rl itself (`pip install --no-deps`; the seed's `rl` also imports pynvml, so
its venv gets nvidia-ml-py). That is the recipe in ../shared/upstream/README.md: `rl ARGV --dry-run`
then parses, resolves and writes every sub-config (and renders rl.sbatch with [slurm]) without torch
or vLLM. The tree is laid out like a user's checkout (`$PRIME_RL_DIR/.venv/bin/python`, configs/),
so it also stands in for PRIME_RL_DIR.

Cached under the user's cache dir ($XDG_CACHE_HOME or ~/.cache)/selfimprove/prime-rl-dry-run/,
keyed by the sha256 of the archives and the pin list: a new archive builds a new venv, an old one is
never reused for it. A build runs under a file lock and writes its BUILT marker last, so a killed
build leaves nothing that looks finished and two test processes never build twice.

Where ../shared/upstream is absent (a user's clone), `prime_rl_checkout` skips the test with one line.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# REPO/../shared in the project's checkout; a git worktree one level further down (wt/<name>) finds the same one
UPSTREAM = next((d / "shared" / "upstream" for d in (REPO.parent, REPO.parent.parent) if (d / "shared" / "upstream").is_dir()),
                REPO.parent / "shared" / "upstream")
PINS = "dry-run-venv.txt"
# dialect -> (prime-rl archive, verifiers archive at prime-rl's pinned submodule commit, extra PyPI pins)
ARCHIVES = {
    "v1": ("prime-rl-559b44772.tar.gz", "verifiers-a60a606ec.tar.gz", ()),
    "seed": ("prime-rl-09e297743.tar.gz", "verifiers-58b119fa1.tar.gz", ("nvidia-ml-py",)),  # seed rl imports pynvml
}
BUILD_TIMEOUT_S = 1800
BUILT = "BUILT"  # written last: its presence means the venv is complete


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "selfimprove" / "prime-rl-dry-run"


def missing_reason() -> str | None:
    """Why prime-rl's dry run cannot be built here (one line), or None."""
    if not UPSTREAM.is_dir():
        return f"prime-rl dry-run tier: {UPSTREAM} is absent (it holds prime-rl's archives; only the project's CI has it)"
    for prl, vf, _ in ARCHIVES.values():
        for name in (prl, vf, PINS):
            if not (UPSTREAM / name).is_file():
                return f"prime-rl dry-run tier: {UPSTREAM / name} is missing"
    if python312() is None:
        return "prime-rl dry-run tier: no Python 3.12 on PATH (prime-rl requires ~=3.12)"
    return None


def python312() -> str | None:
    """A working Python 3.12 (pyenv's shim answers only when 3.12 is selected, so its versions dir is tried too)."""
    cands = [os.environ.get("SELFIMPROVE_PYTHON312"), shutil.which("python3.12"),
             *sorted(glob.glob(str(Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions/3.12*/bin/python3.12")))]
    for c in cands:
        if c and subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                                capture_output=True).returncode == 0:
            return c
    return None


def cache_key(dialect: str) -> str:
    prl, vf, extra = ARCHIVES[dialect]
    h = hashlib.sha256()
    for name in (prl, vf, PINS):
        h.update(name.encode())
        with open(UPSTREAM / name, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    h.update(repr(extra).encode())
    return f"{dialect}-{h.hexdigest()[:16]}"


def prime_rl_checkout(dialect: str) -> Path:
    """The dialect's prime-rl checkout with its dry-run venv (built on first use); pytest.skip when impossible."""
    why = missing_reason()
    if why:
        import pytest

        pytest.skip(why)
    return ensure(dialect)


def ensure(dialect: str) -> Path:
    """The checkout, built under a lock when its BUILT marker is missing."""
    top = cache_root() / cache_key(dialect)
    if (top / BUILT).is_file():
        return top / "prime-rl"
    top.parent.mkdir(parents=True, exist_ok=True)
    with open(top.parent / f"{top.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (top / BUILT).is_file():
            shutil.rmtree(top, ignore_errors=True)  # a killed build's leftovers
            _build(dialect, top)
    return top / "prime-rl"


def _build(dialect: str, top: Path) -> None:
    """Build into `top` itself (a venv's scripts name their interpreter by absolute path, so it cannot
    be renamed into place) and write the BUILT marker last: a tree without it counts as unbuilt."""
    top.mkdir(parents=True)
    prl, vf, extra = ARCHIVES[dialect]
    for name in (prl, vf):
        with tarfile.open(UPSTREAM / name) as t:
            t.extractall(top, filter="data")
    root = top / "prime-rl"
    venv = root / ".venv"
    py = python312()
    uv = _uv()
    try:
        subprocess.run([py, "-m", "venv", str(venv)], check=True, capture_output=True, text=True)
        # uv (the project's own, in .venv; --no-config: not this repo's exclude-newer) downloads in parallel
        pip = ([uv, "pip", "install", "-q", "--no-config", "--compile-bytecode", "--python", str(venv / "bin" / "python")] if uv else
               [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"])
        subprocess.run([*pip, "-r", str(UPSTREAM / PINS), *extra], check=True, capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT_S)
        # --no-sources: the seed's pyproject names workspace members uv would want to resolve (pip ignores them)
        subprocess.run([*pip, "--no-deps", *(["--no-sources"] if uv else []), str(top / "verifiers"), str(root / "packages" / "prime-rl-configs"), str(root)],
                       check=True, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.CalledProcessError as e:
        shutil.rmtree(top, ignore_errors=True)
        last = (e.stderr or e.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"building prime-rl's {dialect} dry-run venv in {top} failed: {last[0]}") from None
    (top / BUILT).write_text(f"{prl} {vf} {PINS} {' '.join(extra)}\n")


def _uv() -> str | None:
    """uv from the project's venv (make setup installs it) or PATH; None: pip does the installs."""
    own = REPO / ".venv" / "bin" / "uv"
    return str(own) if own.is_file() else shutil.which("uv")


if __name__ == "__main__":
    why = missing_reason()
    if why:
        sys.exit(why)
    for d in sys.argv[1:] or ARCHIVES:
        print(d, ensure(d), flush=True)
