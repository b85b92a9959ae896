"""`selfimprove new-env NAME`: write a working verifiers env package a newcomer can copy and change.

    path = write_env_package("my-env", Path("."))   # ./my-env/{pyproject.toml, my_env/__init__.py}

The package comes from templates/new_env/ (shipped in the wheel like the other templates): a
single-turn classic env (`load_environment()`, rows of question / answer / info with a `task`
field, an XMLParser on <answer>, a 0/1 exact-match rubric, train and eval splits from seeded
generators). Its rows are made by code (`TASKS`, `make_row`), which is what
examples/codegen_teacher.py needs, and its tasks are small enough for the generic student
(`selfimprove student build NAME`) to learn some and not others.

Refusals happen before anything is written, and the package appears whole or not at all
(built under a temporary name next to it, then renamed), as bootstrap does with a run dir.
"""

from __future__ import annotations

import keyword
import os
import re
import shutil
import tempfile
from importlib.util import find_spec
from pathlib import Path
from string import Template

from .errors import UsageError
from .resources import project_file

# A PyPI-style project name that is also a module name once '-' becomes '_': lowercase, so the
# dataset name, the distribution and the module agree on every file system.
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
MAX_NAME_CHARS = 60  # bootstrap allows 120 for a dataset; run dirs and generated packages add to it
TEMPLATE_DIR = "templates/new_env"


def module_name(name: str) -> str:
    return name.replace("-", "_")


def check_name(name: str) -> None:
    """Refuse, in one line naming the argument and the fix, a NAME that cannot be a package and module."""
    fix = "use lowercase letters, digits and single '-' or '_' between them, starting with a letter (e.g. my-env)"
    if not NAME_RE.match(name):
        raise UsageError(f"new-env NAME '{name}': not a valid package name; {fix}")
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(f"new-env NAME '{name[:30]}...': {len(name)} characters, at most {MAX_NAME_CHARS}; pick a shorter name")
    module = module_name(name)
    if keyword.iskeyword(module):
        raise UsageError(f"new-env NAME '{name}': '{module}' is a Python keyword, so it cannot be a module; {fix}")
    # An importable module of that name (the standard library, verifiers, an env installed before) would
    # shadow the new env or be shadowed by it: `import my_env` must mean this package.
    if find_spec(module) is not None:
        raise UsageError(f"new-env NAME '{name}': a module '{module}' is already importable here; pick another name")


def write_env_package(name: str, parent: Path) -> Path:
    """Write the env package `parent/NAME/` from the template; return its directory."""
    check_name(name)
    parent = Path(parent).expanduser().resolve()
    target = parent / name
    if target.exists():
        raise UsageError(f"{target}: already exists; pick another NAME, pass --dir DIR, or remove it")
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"--dir {parent}: not a directory; point --dir at a directory (it is created if missing)")
    module = module_name(name)
    values = {"name": name, "module": module}
    files = {
        "pyproject.toml": "pyproject.toml.tmpl",
        f"{module}/__init__.py": "module/__init__.py.tmpl",
    }
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--dir {parent}: cannot create it ({e.strerror}); pick a writable --dir") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--dir {parent}: not writable by you; pick a writable --dir")
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        for dest, source in files.items():
            text = Template(project_file(f"{TEMPLATE_DIR}/{source}").read_text(encoding="utf-8")).substitute(values)
            (staging / dest).parent.mkdir(parents=True, exist_ok=True)
            (staging / dest).write_text(text, encoding="utf-8")
        os.chmod(staging, 0o755)  # mkdtemp makes it 0700; the package is an ordinary directory
        try:
            os.rename(staging, target)
        except OSError:  # made meanwhile by someone else
            raise UsageError(f"{target}: already exists; pick another NAME, pass --dir DIR, or remove it") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def next_commands(name: str, target: Path) -> list[str]:
    """What to run next, in order (docs/how-to/own-env-tutorial.md walks through each)."""
    rel = os.path.relpath(target)
    shown = rel if not rel.startswith("..") else str(target)
    shown = shown if shown.startswith(("/", ".")) else f"./{shown}"
    return [
        f"pip install -e {shown}",
        f"selfimprove student build {name}",
        f"selfimprove run {name} --model build:{name} "
        "--teacher examples/codegen_teacher.py:CodegenTeacher --budget 30m --max-iters 3",
    ]
