"""uv.lock is what `make setup` installs: torch's CPU build (never PyPI's multi-GB CUDA one), every
extra setup asks for, and the lock agrees with pyproject.toml's ranges."""

from __future__ import annotations

import os
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


def _make(tmp_path, *overrides: str, dry: bool = True) -> subprocess.CompletedProcess:
    """`make setup` with the machine facts overridden (PY_VER, UNAME_S, UNAME_M), into a venv path under tmp."""
    # Without the outer make's variables: under `make test` a sub-make inherits MAKELEVEL/MAKEFLAGS and prints
    # "make[1]: Entering directory" around what a user's own `make setup` prints.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    return subprocess.run(["make", *(["-n"] if dry else []), "setup", f"VENV={tmp_path / 'venv'}", *overrides],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("overrides, torch_from", [
    (("PY_VER=3.12", "UNAME_S=Linux", "UNAME_M=x86_64"), "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"),
    (("PY_VER=3.13", "UNAME_S=Linux", "UNAME_M=aarch64"), "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"),
    (("PY_VER=3.11", "UNAME_S=Darwin", "UNAME_M=arm64"), "pip install -q torch==2.13.0\n"),
])
def test_without_the_lock_torch_is_a_cpu_build_never_pypis_linux_one(tmp_path, overrides, torch_from):
    """Issue 41: the fallback `pip install torch==2.13.0` took PyPI's CUDA build (several GB) on every machine
    without /opt/wheels' file; and PYTHON=python3.12 was given the cp311 lock whenever that file existed."""
    plan = _make(tmp_path, *overrides).stdout
    assert "uv sync" not in plan and torch_from in plan + "\n", plan
    torch_lines = [ln for ln in plan.splitlines() if "-m pip install -q" in ln and "torch==" in ln]
    if "Linux" in " ".join(overrides):
        assert torch_lines and all("--index-url https://download.pytorch.org/whl/cpu" in ln and "pypi.org" not in ln
                                   for ln in torch_lines)


@pytest.mark.skipif(shutil.which("make") is None or not list(Path("/opt/wheels").glob("torch-2.13.0+cpu-cp311-*x86_64.whl")),
                    reason="the lock applies only where /opt/wheels holds its torch wheel")
def test_the_lock_is_used_for_cpython_311_with_its_wheel_only(tmp_path):
    assert "uv sync --locked" in _make(tmp_path, "PY_VER=3.11", "UNAME_M=x86_64").stdout
    assert "uv sync" not in _make(tmp_path, "PY_VER=3.12", "UNAME_M=x86_64").stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("overrides, words", [(("PY_VER=3.10",), "is Python 3.10; selfimprove needs CPython 3.11, 3.12 or 3.13"),
                                              (("PYTHON=/nonexistent/python",), "is not a Python that runs here")])
def test_an_unsupported_python_is_refused_in_one_line_before_a_venv_is_made(tmp_path, overrides, words):
    proc = _make(tmp_path, *overrides, dry=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and words in lines[0] and "PYTHON=python3.11" in lines[0], proc.stdout
    assert not (tmp_path / "venv").exists()
