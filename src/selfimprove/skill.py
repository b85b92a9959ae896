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

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .errors import SelfImproveError
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
    return packaged_path(name).read_text(encoding="utf-8")


def skill_dir(base: Path) -> Path:
    """`<base>/.claude/skills/synthetic-self-improve-rl`."""
    return base / ".claude" / "skills" / SKILL_NAME


def user_base() -> Path:
    """The user's home ($HOME first, so tests and sandboxes can redirect it)."""
    home = os.environ.get("HOME")
    return Path(home) if home else Path.home()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_manifest(target: Path) -> dict[str, str]:
    try:
        data = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
        files = data.get("files") if isinstance(data, dict) else None
        return {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}  # no manifest (or a broken one): every differing file counts as edited


def _edited(path: Path, recorded: dict[str, str]) -> bool:
    """True if `path` exists and is not byte-identical to what `install` last wrote there."""
    if not path.is_file():
        return False
    try:
        current = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return True
    return recorded.get(path.name) != _sha(current)


@dataclass
class SkillResult:
    target: Path
    written: list[str] = field(default_factory=list)  # files (re)written or removed
    unchanged: list[str] = field(default_factory=list)  # files already equal to the packaged text


def install(base: Path, *, force: bool = False) -> SkillResult:
    """Write the packaged skill files into skill_dir(base). Idempotent.

    A file that differs from the packaged text is replaced only if it is exactly what a
    previous install wrote (per the manifest) or with `force`; otherwise nothing is written.
    """
    target = skill_dir(base)
    texts = {name: packaged_text(name) for name in SKILL_FILES}
    recorded = _read_manifest(target)
    result = SkillResult(target)
    for name, text in texts.items():
        path = target / name
        if path.is_file() and path.read_bytes() == text.encode("utf-8"):
            result.unchanged.append(name)
            continue
        if _edited(path, recorded) and not force:
            raise SelfImproveError(
                f"{path}: edited locally (differs from what selfimprove installed); "
                "re-run with --force to overwrite it (your edits are lost), or move it aside"
            )
        result.written.append(name)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in result.written:  # checked all files first: a refusal writes nothing
            atomic_write_text(target / name, texts[name])
        manifest = {"version": 1, "skill": SKILL_NAME, "selfimprove": __version__,
                    "files": {name: _sha(text) for name, text in texts.items()}}
        atomic_write_text(target / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    except OSError as e:
        raise SelfImproveError(f"{target}: cannot write the skill there ({e.strerror}); pick a writable --project DIR") from None
    return result


def uninstall(base: Path, *, force: bool = False) -> SkillResult:
    """Remove the skill files (and the skill dir when it ends up empty). Idempotent.

    A locally edited file is kept unless `force`."""
    target = skill_dir(base)
    result = SkillResult(target)
    recorded = _read_manifest(target)
    present = [name for name in SKILL_FILES if (target / name).is_file()]
    for name in present:
        path = target / name
        ours = not _edited(path, recorded) or path.read_bytes() == packaged_text(name).encode("utf-8")
        if not ours and not force:
            raise SelfImproveError(
                f"{path}: edited locally (differs from what selfimprove installed); "
                "re-run with --force to remove it anyway, or move it aside"
            )
    try:
        for name in present:
            (target / name).unlink()
            result.written.append(name)
        (target / MANIFEST).unlink(missing_ok=True)
        if target.is_dir() and not any(target.iterdir()):
            target.rmdir()
    except OSError as e:
        raise SelfImproveError(f"{target}: cannot remove the skill ({e.strerror})") from None
    return result
