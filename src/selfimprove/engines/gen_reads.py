"""What a generator read: the files its dataset depends on besides gen_dataset.py itself.

A generator that imports the teacher's own module (examples/minimal_teacher.py does) or reads a data
file makes rows from those files too; keyed on gen_dataset.py's text alone, a fixed module left the
stale rows in place and the gate judged rows the fixed generator no longer writes. So the generator
runs under BOOTSTRAP, which records every module it imported and every file it opened for reading
(an audit hook), minus the interpreter's own files and what it wrote; generate.json keeps their
sha256, and the dataset counts as current only while every one of them is unchanged.

BOOTSTRAP runs in the env's interpreter (any Python >= 3.8), so it uses the standard library only."""

from __future__ import annotations

import json
from pathlib import Path

from ..stack.env_package import file_sha256

READS_ENV = "SELFIMPROVE_GEN_READS"  # where BOOTSTRAP writes the list (a file of the iter dir the tool owns)
READS_FILE = "gen_reads.json"
RUN_PREFIX = "RUN/"  # a path inside the run dir is kept relative to it, so a moved or copied run still matches

# `python -c BOOTSTRAP` in the iter dir runs ./gen_dataset.py as `python gen_dataset.py` would (argv,
# sys.path[0], __main__), and at exit (a return or sys.exit; not os._exit, whose run is then never
# reused) writes the paths. The hook keeps at most 20,000 paths so a generator opening millions of
# files cannot grow it without bound; past that the list is marked incomplete and never reused.
BOOTSTRAP = r'''
import atexit, json, os, runpy, site, sys, sysconfig
_out = os.environ.pop("SELFIMPROVE_GEN_READS")
_read, _written, _full = set(), set(), [False]
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
def _hook(event, args):
    if event != "open" or not args or not isinstance(args[0], (str, bytes)):
        return
    try:
        path = os.path.abspath(os.fsdecode(args[0]))
    except Exception:
        return
    mode, flags = args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else 0
    writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE)
    target = _written if writes else _read
    if len(_read) + len(_written) < 20000:
        target.add(path)
    else:
        _full[0] = True
def _skip_roots():
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(p for p in sysconfig.get_paths().values() if p)
    try:
        roots.update(site.getsitepackages() + [site.getusersitepackages()])
    except Exception:
        pass
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots) + ("/proc/", "/dev/", "/sys/")
def _dump():
    files = set(_read)
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str):
            files.add(os.path.abspath(f))
    roots = _skip_roots()
    keep = sorted(p for p in files - _written
                  if not p.endswith(".pyc") and os.path.isfile(p) and not os.path.realpath(p).startswith(roots))
    tmp = _out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"complete": not _full[0], "files": keep}, f)
    os.replace(tmp, _out)
atexit.register(_dump)
sys.addaudithook(_hook)
sys.argv = ["gen_dataset.py"]
sys.path[0] = os.path.abspath(".")
runpy.run_path("gen_dataset.py", run_name="__main__")
'''


def _key(path: str, run_root: Path) -> str:
    p = Path(path)
    try:
        return RUN_PREFIX + p.relative_to(run_root).as_posix()
    except ValueError:
        return str(p)


def _path(key: str, run_root: Path) -> Path:
    return run_root / key[len(RUN_PREFIX):] if key.startswith(RUN_PREFIX) else Path(key)


def hash_reads(iter_dir: Path) -> dict[str, str] | None:
    """{file: sha256} of what the generator just read (gen_dataset.py and dataset.jsonl left out: the
    step keys those itself); None when BOOTSTRAP could not say (os._exit, or too many files), which
    makes the next iterate run the generator again. Removes the list file (a one-run message)."""
    listing = iter_dir / READS_FILE
    try:
        data = json.loads(listing.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        listing.unlink(missing_ok=True)
    if not isinstance(data, dict) or data.get("complete") is not True or not isinstance(data.get("files"), list):
        return None
    run_root, own = iter_dir.parent.resolve(), {iter_dir.resolve() / "gen_dataset.py", iter_dir.resolve() / "dataset.jsonl"}
    out = {}
    for f in data["files"]:
        p = Path(str(f))
        if p.resolve() in own or not p.is_file():
            continue
        try:
            out[_key(str(p.resolve()), run_root)] = file_sha256(p)
        except OSError:
            return None  # a file we cannot read again cannot be checked later either
    return out


def reads_unchanged(reads: object, iter_dir: Path) -> bool:
    """True while every recorded file still has its recorded sha256 (False for a missing or bad record)."""
    if not isinstance(reads, dict):
        return False
    run_root = iter_dir.parent.resolve()
    for key, sha in reads.items():
        p = _path(str(key), run_root)
        try:
            if not p.is_file() or file_sha256(p) != sha:
                return False
        except OSError:
            return False
    return True
