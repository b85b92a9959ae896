"""The agent skill `/synthetic-self-improve-rl`: find the packaged text, install it where
coding agents look, remove it again.

The repository's SKILL.md and the reference file it names are the single source. A
wheel carries them under `selfimprove/_data/skill/` (force-included by pyproject.toml,
like templates/ and configs/), so there is one copy in git and nothing to keep in sync;
a source checkout reads them at the repository root.

Claude Code (and agents that follow the Agent Skills layout) read
`<base>/.claude/skills/<name>/SKILL.md`: base is a project directory or the user's home.
`install` writes every skill file there plus `.selfimprove-skill.json`, the hashes of what
it wrote, so a later install can tell an untouched older copy (replaced silently) from a
locally edited one (refused without --force).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .errors import SelfImproveError, UsageError
from .rundir import atomic_write_text

SKILL_NAME = "synthetic-self-improve-rl"
SKILL_FILES = ("SKILL.md", "SKILL-reference.md")  # SKILL.md names the second one; both are installed
MANIFEST = ".selfimprove-skill.json"  # what `install` wrote (sha256 per file)

_PACKAGE_DIR = Path(__file__).resolve().parent


def packaged_path(name: str) -> Path:
    """Where this install keeps skill file `name`: the wheel's _data/skill/, else the repo root."""
    for candidate in (_PACKAGE_DIR / "_data" / "skill" / name, _PACKAGE_DIR.parents[1] / name):
        if candidate.is_file():
            return candidate
    raise SelfImproveError(f"{name}: not found in this selfimprove install ({_PACKAGE_DIR}); reinstall selfimprove")


def packaged_text(name: str = "SKILL.md") -> str:
    if name not in SKILL_FILES:
        raise SelfImproveError(f"skill file '{name}': unknown; the skill has {', '.join(SKILL_FILES)}")
    path = packaged_path(name)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:  # the package's own copy: the fix is the install, not a run dir
        why = e.strerror if isinstance(e, OSError) else "not UTF-8"
        raise SelfImproveError(f"{path}: cannot read the packaged skill file ({why}); "
                               "make it readable (chmod a+r) or reinstall selfimprove") from None


def skill_dir(base: Path) -> Path:
    """`<base>/.claude/skills/synthetic-self-improve-rl`."""
    return base / ".claude" / "skills" / SKILL_NAME


def user_base() -> Path:
    """The user's home ($HOME first, so tests and sandboxes can redirect it), which must exist.

    `--user` never creates a home directory: a HOME that is empty (it used to resolve to
    `/.claude/skills`), relative, or names a missing directory is refused naming HOME and the fix.
    """
    home = os.environ.get("HOME")
    if home is None:
        base = Path.home()  # no HOME at all: the password database's entry
    elif not home.strip():
        raise UsageError("--user: $HOME is empty; set HOME to your home directory, or use --project DIR")
    else:
        base = Path(home)
        if not base.is_absolute():
            raise UsageError(f"--user: $HOME={home} is not an absolute path; set HOME to your home directory, "
                             "or use --project DIR")
    if not base.is_dir():
        raise UsageError(f"--user: the home directory {base} ($HOME) does not exist; create it or set HOME to "
                         "your home directory, or use --project DIR (nothing is created)")
    return base


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_manifest(target: Path) -> dict[str, str]:
    try:
        data = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
        files = data.get("files") if isinstance(data, dict) else None
        return {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}  # no manifest (or a broken one): every differing file counts as edited


def _installed_bytes(path: Path) -> bytes | None:
    """An installed skill file's bytes, None if absent; one line naming it if unreadable or not a file."""
    try:
        if not os.path.lexists(path):
            return None
        regular = path.is_file()  # EACCES on a symlink's target is raised here, not swallowed
        data = path.read_bytes() if regular else None
    except OSError as e:
        raise SelfImproveError(f"{path}: cannot read the installed skill file ({e.strerror}); make it readable "
                               "(chmod u+r) or move it aside and re-run (nothing was changed)") from None
    if data is None:
        raise SelfImproveError(f"{path}: not a regular file where the skill keeps {path.name}; "
                               "move it aside and re-run (nothing was changed)")
    return data


def _check_manifest_path(target: Path) -> None:
    """The manifest must be a file or absent: checked before anything is written or removed."""
    path = target / MANIFEST
    try:
        odd = os.path.lexists(path) and not path.is_file()
    except OSError as e:
        raise SelfImproveError(f"{path}: cannot read the skill's manifest ({e.strerror}); make it readable "
                               "or move it aside and re-run (nothing was changed)") from None
    if odd:
        raise SelfImproveError(f"{path}: not a regular file (the skill's manifest); move it aside and re-run "
                               "(nothing was changed)")


def _edited(current: bytes | None, name: str, recorded: dict[str, str]) -> bool:
    """True if the file exists and is not byte-identical to what `install` last wrote there."""
    if current is None:
        return False
    try:
        return recorded.get(name) != _sha(current.decode("utf-8"))
    except UnicodeDecodeError:
        return True


@dataclass
class SkillResult:
    target: Path
    written: list[str] = field(default_factory=list)  # files (re)written or removed
    unchanged: list[str] = field(default_factory=list)  # files already equal to the packaged text


def _manifest_text(texts: dict[str, str]) -> str:
    manifest = {"version": 1, "skill": SKILL_NAME, "selfimprove": __version__,
                "files": {name: _sha(text) for name, text in texts.items()}}
    return json.dumps(manifest, indent=2) + "\n"


def install(base: Path, *, force: bool = False) -> SkillResult:
    """Write the packaged skill files into skill_dir(base). Idempotent.

    A file that differs from the packaged text is replaced only if it is exactly what a
    previous install wrote (per the manifest) or with `force`; otherwise nothing is written.
    Every file is checked before the first write, and an up-to-date copy writes nothing at
    all (not even the manifest), so a re-install into a read-only dir succeeds.
    """
    target = skill_dir(base)
    texts = {name: packaged_text(name) for name in SKILL_FILES}
    _check_skill_dir_path(base, target)
    _check_manifest_path(target)
    recorded = _read_manifest(target)
    result = SkillResult(target)
    for name, text in texts.items():
        path = target / name
        current = _installed_bytes(path)
        if current == text.encode("utf-8"):
            result.unchanged.append(name)
            continue
        if _edited(current, name, recorded) and not force:
            raise SelfImproveError(
                f"{path}: edited locally (differs from what selfimprove installed); "
                "re-run with --force to overwrite it (your edits are lost), or move it aside"
            )
        result.written.append(name)
    if not result.written and recorded == {name: _sha(text) for name, text in texts.items()}:
        return result  # up to date, manifest included (its selfimprove version is informational)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in result.written:  # checked all files first: a refusal writes nothing
            atomic_write_text(target / name, texts[name])
        atomic_write_text(target / MANIFEST, _manifest_text(texts))
    except OSError as e:
        raise SelfImproveError(_os_error_line(target, e, "cannot write the skill there")) from None
    return result


def uninstall(base: Path, *, force: bool = False) -> SkillResult:
    """Remove the skill files (and the skill dir when it ends up empty). Idempotent.

    A locally edited file is kept unless `force`. Every path is checked before the first
    removal: a refusal (an edited file, a manifest that is a directory) removes nothing."""
    target = skill_dir(base)
    result = SkillResult(target)
    _check_skill_dir_path(base, target)
    _check_manifest_path(target)
    recorded = _read_manifest(target)
    present = []
    for name in SKILL_FILES:
        path = target / name
        current = _installed_bytes(path)
        if current is None:
            continue
        present.append(name)
        ours = not _edited(current, name, recorded) or current == packaged_text(name).encode("utf-8")
        if not ours and not force:
            raise SelfImproveError(
                f"{path}: edited locally (differs from what selfimprove installed); "
                "re-run with --force to remove it anyway, or move it aside"
            )
    # before the first removal: a directory that would refuse half-way leaves the skill half removed
    will_be_empty = target.is_dir() and all(p.name in (*present, MANIFEST) for p in target.iterdir())
    for d, needed in ((target, bool(present) or (target / MANIFEST).exists()), (target.parent, will_be_empty)):
        if needed and not os.access(d, os.W_OK | os.X_OK):
            raise SelfImproveError(_os_error_line(target, PermissionError(errno.EACCES, "Permission denied",
                                                                          str(d / target.name)), "cannot remove the skill"))
    try:
        for name in present:
            (target / name).unlink()
            result.written.append(name)
        (target / MANIFEST).unlink(missing_ok=True)
        if target.is_dir() and not any(target.iterdir()):
            target.rmdir()
    except OSError as e:
        raise SelfImproveError(_os_error_line(target, e, "cannot remove the skill")) from None
    return result


def _check_skill_dir_path(base: Path, target: Path) -> None:
    """Every existing path from `base` down to the skill dir must be a directory: a file there (say
    `.claude` or the skill dir itself) is refused before anything is written or removed, naming it.
    Its fix is to move it aside: chmod would not help (the old advice, issue 36)."""
    p = target
    chain = []
    while p != base and p != p.parent:
        chain.append(p)
        p = p.parent
    for p in reversed(chain):
        try:
            if not os.path.lexists(p):
                return
            if not p.is_dir():
                raise SelfImproveError(f"{p}: not a directory, where the skill's directory {target} goes; it is "
                                       "not selfimprove's: move it aside and re-run (nothing was changed)")
        except OSError:
            return  # unreadable: the write or removal below names it with its own fix


def _os_error_line(target: Path, e: OSError, what: str) -> str:
    """One line for a failed write or removal of the skill, with a fix that works for its cause: the
    directory that refused us (chmod u+w on IT, not on the skill dir), a read-only file system, ..."""
    failed = Path(e.filename) if e.filename else target
    if e.errno in (errno.EACCES, errno.EPERM):
        parent = failed.parent  # the directory whose entries we were changing (its nearest existing one)
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        return (f"{parent}: not writable by you, so {what} ({e.strerror}); make it writable (chmod u+w {parent}) "
                f"and re-run, or use another --project DIR")
    if e.errno == errno.EROFS:
        return f"{target}: {what} ({e.strerror}); use a --project DIR on a writable file system"
    return f"{failed}: {what} ({e.strerror}); fix that path or use another --project DIR, and re-run"

