"""Step 3c: wrap a generated dataset as an installable verifiers environment.

The package mirrors the real env by reference (see templates/env_package/), is
installed after the skill's procedure's stale-file cleanup, and is verified in a FRESH
subprocess: `load_environment(<package>)` must build exactly as many rows as
dataset.jsonl holds. A mismatch cleans and retries once, then fails loudly.
Real runs once trained for 90 minutes on a stale copy of an earlier
iteration's rows; the cleanup + verify is what prevents that.

Packages are installed into a shared site-packages, so two runs must never
share a package name (run.json run_id is in every name), and before a job
trains on a package the installed copy is checked against this arm's
dataset.jsonl (`installed_provenance`): a run stopped after packaging cannot
later train on rows another run installed under the same name.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from string import Template

from ..engines import procs
from ..errors import SelfImproveError
from ..faults import fault_point
from ..resources import project_file
from ..rundir import atomic_write_json, atomic_write_text


def package_name(dataset: str, suffix: str, run_id: str | None = None) -> str:
    """`<dataset>_r<run_id>_<suffix>` (`<dataset>_<suffix>` for runs without a run_id), lower case with
    underscores only: prime env install resolves by underscored name, and verifiers' taskset loader
    lower-cases an id and cannot import one with a dot."""
    middle = f"_r{run_id}" if run_id else ""
    return f"{dataset}{middle}_{suffix}".replace("-", "_").replace(".", "_").lower()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def count_rows(path: Path) -> int:
    """Non-blank lines, read as bytes: a file that is not UTF-8 is counted here and refused by the
    dataset gate with its line numbers, never a UnicodeDecodeError."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def build_package(
    project_dir: Path,
    package: str,
    dataset: Path,
    *,
    hub_env_id: str,
    hub_env_args: dict,
    origin: str,
    rewards_file: Path | None = None,
    rewards: list[tuple[str, float]] = (),
    provenance: dict | None = None,
) -> Path:
    """Write `project_dir/` = pyproject.toml + `<package>/{__init__.py, dataset.jsonl, provenance.json[, rewards.py]}`.

    provenance.json (run dir, run_id, arm, dataset sha256) travels with the installed copy, so a
    later check can tell whose rows are installed under this name."""
    rows = count_rows(dataset)
    if project_dir.exists():
        shutil.rmtree(project_dir)
    pkg_dir = project_dir / package
    pkg_dir.mkdir(parents=True)
    reward_import, reward_attach = "", ""
    if rewards:
        if rewards_file is None:
            raise SelfImproveError("custom rewards declared but no rewards file given")
        shutil.copy2(rewards_file, pkg_dir / "rewards.py")
        names = ", ".join(name for name, _ in rewards)
        reward_import = f"from .rewards import {names}\n"
        reward_attach = (
            "    # Auxiliary rewards (linted: <= 0.2 each, <= 0.3 total) on the real rubric.\n"
            "    target = env.rubric.rubrics[0] if hasattr(env.rubric, 'rubrics') else env.rubric\n"
            + "".join(f"    target.add_reward_func({name}, weight={weight!r})\n" for name, weight in rewards)
        )
    subs = {
        "package": package,
        "origin": origin,
        "hub_env_id": hub_env_id,
        "hub_env_id_repr": repr(hub_env_id),
        "hub_env_args_repr": repr(dict(hub_env_args)),
        "rows": str(rows),
        "reward_import": reward_import,
        "reward_attach": reward_attach,
        "dependencies": '["verifiers>=0.3.1,<0.4", "datasets"]',
    }
    for tmpl, dest in (
        ("templates/env_package/pyproject.toml.tmpl", project_dir / "pyproject.toml"),
        ("templates/env_package/env_module.py.tmpl", pkg_dir / "__init__.py"),
    ):
        atomic_write_text(dest, Template(project_file(tmpl).read_text(encoding="utf-8")).substitute(subs))
    shutil.copy2(dataset, pkg_dir / "dataset.jsonl")
    atomic_write_json(pkg_dir / PROVENANCE_FILE, {**(provenance or {}), "dataset_sha256": file_sha256(dataset)})
    return project_dir


PROVENANCE_FILE = "provenance.json"

# Runs in the engine's interpreter without importing verifiers (fast): where the package
# resolves, the sha256 of the dataset.jsonl it will load, and its provenance record.
_PROVENANCE_SCRIPT = """
import hashlib, importlib.util, json, pathlib, sys
spec = importlib.util.find_spec(sys.argv[1])
if spec is None or not spec.origin:
    print(json.dumps({"found": False})); sys.exit(0)
d = pathlib.Path(spec.origin).parent
data, prov = d / "dataset.jsonl", d / sys.argv[2]
print(json.dumps({
    "found": True, "module_dir": str(d),
    "dataset_sha256": hashlib.sha256(data.read_bytes()).hexdigest() if data.is_file() else None,
    "provenance": json.loads(prov.read_text(encoding="utf-8")) if prov.is_file() else None,
}))
"""


def installed_provenance(package: str, python: str = sys.executable) -> dict:
    """What is installed under `package` in `python`'s environment: {"found", "module_dir",
    "dataset_sha256" (of the rows a job would load), "provenance"}; {"found": False} if nothing."""
    proc = procs.run_child([python, "-c", _PROVENANCE_SCRIPT, package, PROVENANCE_FILE],
                           capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"found": False, "error": last}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def provenance_mismatch(installed: dict, *, dataset_sha256: str, run_id: str | None) -> str | None:
    """Why the installed package is not this arm's (None when it is): not installed, other rows,
    or another run's install (run_id differs)."""
    if not installed.get("found"):
        return "not installed" + (f" ({installed['error']})" if installed.get("error") else "")
    if installed.get("dataset_sha256") != dataset_sha256:
        return f"its dataset.jsonl (sha256 {str(installed.get('dataset_sha256'))[:12]}) is not this arm's ({dataset_sha256[:12]})"
    prov = installed.get("provenance") or {}
    if run_id and prov.get("run_id") != run_id:
        return f"it was installed by run {prov.get('run_id')} ({prov.get('run_dir')}), not this run ({run_id})"
    return None


def build_taskset_package(project_dir: Path, package: str, dataset: Path, *, hub_module: str, answer_field: str,
                          origin: str, hub_args: dict | None = None, provenance: dict | None = None) -> Path:
    """The v1 counterpart of build_package: `<package>/__init__.py` exports one Taskset over dataset.jsonl
    that uses `hub_module`'s Task class (its rewards and metrics) and system prompt by reference; same
    pyproject and provenance.json. `hub_args` configure the hub taskset whose system prompt is read."""
    rows = count_rows(dataset)
    if project_dir.exists():
        shutil.rmtree(project_dir)
    pkg_dir = project_dir / package
    pkg_dir.mkdir(parents=True)
    subs = {"package": package, "origin": origin, "hub_module": hub_module, "hub_module_repr": repr(hub_module),
            "hub_args_repr": repr(dict(hub_args or {})), "answer_field_repr": repr(answer_field), "rows": str(rows),
            "dependencies": '["verifiers>=0.3.1"]'}  # verifiers.v1 is in 0.3.1 and alone in 0.4
    for tmpl, dest in (
        ("templates/env_package/pyproject.toml.tmpl", project_dir / "pyproject.toml"),
        ("templates/env_package/taskset_module.py.tmpl", pkg_dir / "__init__.py"),
    ):
        atomic_write_text(dest, Template(project_file(tmpl).read_text(encoding="utf-8")).substitute(subs))
    shutil.copy2(dataset, pkg_dir / "dataset.jsonl")
    atomic_write_json(pkg_dir / PROVENANCE_FILE, {**(provenance or {}), "dataset_sha256": file_sha256(dataset)})
    return project_dir


def site_packages(python: str = sys.executable) -> Path:
    if python == sys.executable:
        return Path(sysconfig.get_paths()["purelib"])
    out = procs.run_child(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    return Path(out.stdout.strip())


def cleanup_stale(package: str, sp: Path) -> list[str]:
    """The skill's procedure's cleanup: remove a root-level dataset.jsonl, the module and its dist-info."""
    removed = []
    patterns = ["dataset.jsonl", f"{package}.py", package, f"{package}-*.dist-info", f"__editable__*{package}*", f"_{package}*.pth"]
    for pattern in patterns:
        for hit in glob.glob(str(sp / pattern)):
            p = Path(hit)
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)
            removed.append(p.name)
    return removed


def install_package(project_dir: Path, python: str = sys.executable, log: Path | None = None) -> None:
    """pip-install the env project (non-editable: the installed copy is a snapshot of this iteration)."""
    uv = shutil.which("uv")
    if uv and os.environ.get("SELFIMPROVE_INSTALLER", "pip") == "uv":
        cmd = [uv, "pip", "install", "--python", python, "--no-deps", "--reinstall", str(project_dir)]
    else:
        cmd = [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--force-reinstall", "-q", str(project_dir)]
    proc = procs.run_child(cmd, capture_output=True, text=True)
    if log is not None:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise SelfImproveError(f"installing {project_dir} failed (exit {proc.returncode}): {last[0]}; see {log or 'pip output'}")


_VERIFY_SCRIPT = """
import json, sys
import verifiers as vf
env = vf.load_environment(sys.argv[1])
ds = env.get_dataset()
mod = sys.modules[env.__class__.__module__]
import importlib
pkg = importlib.import_module(sys.argv[1].replace("-", "_"))
print(json.dumps({"rows": len(ds), "module_file": pkg.__file__, "verifiers_version": getattr(vf, "__version__", None)}))
"""


# The v1 check: the package's id resolved by verifiers' own loader (as prime-rl >= 0.8 resolves it
# while its config validates), and its one Taskset iterated (what it trains on).
_VERIFY_TASKSET_SCRIPT = """
import importlib, json, sys
import verifiers
import verifiers.v1 as vf
from verifiers.v1.utils.loaders import taskset_class
try:
    taskset = taskset_class(sys.argv[1])
except Exception as e:  # the loader reports a failing import as "not found": name what failed inside it
    cause = e.__cause__
    said = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    sys.exit(said + (f" (inside: {type(cause).__name__}: {cause})" if cause is not None else ""))
pkg = importlib.import_module(sys.argv[1])
rows = sum(1 for _ in taskset(vf.TasksetConfig(id=sys.argv[1])))
print(json.dumps({"rows": rows, "module_file": pkg.__file__, "verifiers_version": getattr(verifiers, "__version__", None)}))
"""

VERIFY_SCRIPTS = {"verifiers.classic": _VERIFY_SCRIPT, "verifiers.v1": _VERIFY_TASKSET_SCRIPT}


def verify_rows(package: str, python: str = sys.executable, api: str = "verifiers.classic") -> dict:
    """Load the installed env (or v1 taskset) in a fresh interpreter; return its row count and module path."""
    proc = procs.run_child(
        [python, "-c", VERIFY_SCRIPTS[api], package], capture_output=True, text=True, timeout=600,
        env={**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"},
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"rows": None, "error": last}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def install_and_verify(
    project_dir: Path, package: str, expected_rows: int, *, python: str = sys.executable, log: Path | None = None,
    api: str = "verifiers.classic",
) -> dict:
    """Cleanup -> install -> verify; on mismatch clean and retry once, then fail loudly."""
    sp = site_packages(python)
    attempts = []
    for attempt in (1, 2):
        removed = cleanup_stale(package, sp)
        install_package(project_dir, python, log)
        fault_point("install")
        result = verify_rows(package, python, api)
        attempts.append({"attempt": attempt, "removed": removed, **result})
        if result.get("rows") == expected_rows:
            # python + verifiers_version: the interpreter (run.json env_python) that will load it for training
            record = {"package": package, "rows": expected_rows, "site_packages": str(sp), "python": python,
                      "verifiers_version": result.get("verifiers_version"), "attempts": attempts}
            return record
    got = attempts[-1].get("rows")
    if got is None and api == "verifiers.v1":  # the id itself does not load: reinstalling cannot help
        raise SelfImproveError(
            f"generated taskset id '{package}' ({project_dir}): verifiers' loader cannot load it, as prime-rl would "
            f"not ({attempts[-1].get('error')}); check that the hub taskset id in hub_env.json loads "
            f"(`selfimprove introspect` resolves it) and that {python} has verifiers installed")
    raise SelfImproveError(
        f"{package}: {'the Taskset yielded' if api == 'verifiers.v1' else 'load_environment built'} {got} rows, dataset.jsonl has {expected_rows} "
        f"(after cleanup + reinstall twice; {attempts[-1].get('error') or 'stale install?'}); "
        f"check {sp} for leftover {package} files"
    )


def write_package_record(path: Path, record: dict) -> None:
    atomic_write_json(path, record)
