"""uv.lock is what `make setup` installs: torch's CPU build (never PyPI's multi-GB CUDA one), every
extra setup asks for, and the lock agrees with pyproject.toml's ranges."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LOCK = tomllib.loads((REPO / "uv.lock").read_text())
PACKAGES = {p["name"]: p for p in LOCK["package"]}


def test_torch_is_the_cpu_wheel_and_nothing_of_cuda_is_locked():
    torch = PACKAGES["torch"]
    assert torch["version"] == "2.13.0+cpu" and torch["source"] == {"registry": "/opt/wheels"}
    gpu = sorted(n for n in PACKAGES if n.startswith(("nvidia-", "cuda-", "triton")))
    assert gpu == [], f"uv.lock would install GPU packages: {gpu}"


def test_make_setup_installs_extras_the_project_declares():
    extras = re.search(r"^EXTRAS \?= (.+)$", (REPO / "Makefile").read_text(), re.M).group(1).split()
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"local", "plots", "dev"} <= set(extras) <= set(declared)
    assert "uv" in " ".join(declared["dev"]), "the dev extra keeps uv, which make setup syncs with"


def test_the_lock_has_a_release_cooldown():
    assert LOCK["options"].get("exclude-newer-span") == "P7D"


@pytest.mark.skipif(shutil.which("uv") is None and not (REPO / ".venv/bin/uv").exists(), reason="uv is not installed")
def test_the_lock_matches_pyproject():
    """`uv sync --locked` (make setup) refuses a lock older than pyproject.toml's ranges: `make lock`."""
    uv = str(REPO / ".venv/bin/uv") if (REPO / ".venv/bin/uv").exists() else shutil.which("uv")
    proc = subprocess.run([uv, "lock", "--check", "--offline"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
