"""`selfimprove skill install|show|uninstall`, and the skill shipping inside the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from selfimprove.skill import MANIFEST, SKILL_FILES, packaged_text, skill_dir

REPO = Path(__file__).resolve().parents[1]


def test_packaged_text_is_the_repo_file(cli):
    """`skill show` prints the repository's SKILL.md byte for byte (one source, no copy to drift)."""
    assert packaged_text() == (REPO / "SKILL.md").read_text(encoding="utf-8")
    res = cli("skill", "show")
    assert res.exit_code == 0 and res.stdout == (REPO / "SKILL.md").read_text(encoding="utf-8")
    res = cli("skill", "show", "SKILL-reference.md")
    assert res.stdout == (REPO / "SKILL-reference.md").read_text(encoding="utf-8")


def test_install_into_a_project_is_idempotent(cli, tmp_path):
    """install writes SKILL.md and the reference next to it, says where and how to invoke; again: no change."""
    res = cli("skill", "install", "--project", tmp_path)
    assert res.exit_code == 0, res.stderr
    target = tmp_path / ".claude" / "skills" / "synthetic-self-improve-rl"
    for name in SKILL_FILES:
        assert (target / name).read_text(encoding="utf-8") == packaged_text(name)
    assert str(target) in " ".join(res.stdout.split()) and "/synthetic-self-improve-rl <dataset>" in res.stdout
    before = {p.name: p.stat().st_mtime_ns for p in target.iterdir()}
    res = cli("skill", "install", "--project", tmp_path)
    assert res.exit_code == 0 and "already up to date" in res.stdout
    assert {p.name: p.stat().st_mtime_ns for p in target.iterdir() if p.name != MANIFEST} == \
        {k: v for k, v in before.items() if k != MANIFEST}


def test_edited_copy_is_refused_without_force(cli, tmp_path):
    """A locally edited SKILL.md is never overwritten silently: one line, exit 1, nothing written; --force does."""
    cli("skill", "install", "--project", tmp_path)
    target = skill_dir(tmp_path)
    (target / "SKILL.md").write_text("my notes\n", encoding="utf-8")
    (target / "SKILL-reference.md").unlink()
    res = cli("skill", "install", "--project", tmp_path)
    assert res.exit_code == 1
    assert "edited locally" in res.stderr and "--force" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert (target / "SKILL.md").read_text() == "my notes\n" and not (target / "SKILL-reference.md").exists()
    res = cli("skill", "uninstall", "--project", tmp_path)
    assert res.exit_code == 1 and (target / "SKILL.md").exists()
    res = cli("skill", "install", "--project", tmp_path, "--force")
    assert res.exit_code == 0 and (target / "SKILL.md").read_text() == packaged_text()


def test_untouched_older_copy_is_upgraded(cli, tmp_path):
    """A copy exactly as an earlier install wrote it (per the manifest) is replaced without --force."""
    from selfimprove import skill

    target = skill_dir(tmp_path)
    target.mkdir(parents=True)
    old = "---\nname: synthetic-self-improve-rl\n---\nold text\n"
    (target / "SKILL.md").write_text(old)
    (target / MANIFEST).write_text(f'{{"version": 1, "files": {{"SKILL.md": "{skill._sha(old)}"}}}}')
    res = cli("skill", "install", "--project", tmp_path)
    assert res.exit_code == 0, res.stderr
    assert (target / "SKILL.md").read_text() == packaged_text()


def test_user_install_honours_home_and_uninstall_removes_it(cli, tmp_path, monkeypatch):
    """--user goes to $HOME/.claude/skills/...; uninstall removes the files and the empty dir; twice is fine."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli("skill", "install", "--user").exit_code == 0
    target = skill_dir(tmp_path)
    assert (target / "SKILL.md").is_file()
    res = cli("skill", "uninstall", "--user")
    assert res.exit_code == 0 and not target.exists() and (tmp_path / ".claude" / "skills").is_dir()
    res = cli("skill", "uninstall", "--user")
    assert res.exit_code == 0 and "nothing to remove" in res.stdout


def test_bad_flags(cli, tmp_path):
    """--user with --project, or a --project that is not a directory: exit 2, one line, nothing written."""
    res = cli("skill", "install", "--user", "--project", tmp_path)
    assert res.exit_code == 2 and "--user and --project" in res.stderr
    res = cli("skill", "install", "--project", tmp_path / "nope")
    assert res.exit_code == 2 and "not a directory" in res.stderr
    assert not (tmp_path / ".claude").exists()


def test_user_refuses_a_missing_or_empty_home(cli, tmp_path, monkeypatch):
    """--user never creates a home directory and never falls back to `/`: exit 2 naming HOME."""
    for home, says in ((str(tmp_path / "gone"), "does not exist"), ("", "$HOME is empty"), ("rel/home", "absolute")):
        monkeypatch.setenv("HOME", home)
        for cmd in ("install", "uninstall"):
            res = cli("skill", cmd, "--user")
            assert res.exit_code == 2 and says in res.stderr and "HOME" in res.stderr, (home, cmd, res.stderr)
            assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "gone").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_up_to_date_reinstall_in_a_read_only_dir_writes_nothing(cli, tmp_path):
    assert cli("skill", "install", "--project", tmp_path).exit_code == 0
    target = skill_dir(tmp_path)
    target.chmod(0o555)
    try:
        res = cli("skill", "install", "--project", tmp_path)
        assert res.exit_code == 0 and "already up to date" in res.stdout, res.stderr
    finally:
        target.chmod(0o755)


def test_up_to_date_reinstall_does_not_rewrite_the_manifest(cli, tmp_path):
    """Root ignores a read-only dir, so the no-write rule is checked on the manifest's inode too."""
    assert cli("skill", "install", "--project", tmp_path).exit_code == 0
    manifest = skill_dir(tmp_path) / MANIFEST
    before = (manifest.stat().st_ino, manifest.stat().st_mtime_ns)
    assert cli("skill", "install", "--project", tmp_path).exit_code == 0
    assert (manifest.stat().st_ino, manifest.stat().st_mtime_ns) == before


def test_a_manifest_that_is_a_directory_is_refused_before_anything_changes(cli, tmp_path):
    assert cli("skill", "install", "--project", tmp_path).exit_code == 0
    target = skill_dir(tmp_path)
    (target / MANIFEST).unlink()
    (target / MANIFEST).mkdir()
    for cmd in ("uninstall", "install"):
        res = cli("skill", cmd, "--project", tmp_path)
        assert res.exit_code == 1 and f"{target / MANIFEST}: not a regular file" in " ".join(res.stderr.split()), res.stderr
        assert all((target / name).is_file() for name in SKILL_FILES), cmd


def test_an_unreadable_installed_skill_file_is_named_with_its_own_fix(cli, tmp_path, monkeypatch):
    """EACCES on the installed SKILL.md (faked: root reads any file; the hostile case runs it as nobody)."""
    assert cli("skill", "install", "--project", tmp_path).exit_code == 0
    path = skill_dir(tmp_path) / "SKILL.md"
    real = Path.read_bytes

    def read_bytes(self):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    for cmd in ("install", "uninstall"):
        res = cli("skill", cmd, "--project", tmp_path)
        err = " ".join(res.stderr.split())
        assert res.exit_code == 1 and f"{path}: cannot read the installed skill file" in err, err
        assert "run dir" not in err and "chmod u+r" in err
    assert path.is_file()


def test_wheel_ships_the_skill_and_installs_it(tmp_path):
    """`pip wheel --no-deps .` holds the skill files; the wheel, installed into a temp dir on its own,
    installs SKILL.md equal to the packaged text (no source checkout involved)."""
    wheel_dir, site, project = tmp_path / "wheel", tmp_path / "site", tmp_path / "project"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheel_dir), str(REPO)], check=True, capture_output=True, timeout=300)
    wheel = next(wheel_dir.glob("selfimprove-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in SKILL_FILES:
        assert f"selfimprove/_data/skill/{name}" in names
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target", str(site),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", "import selfimprove.cli, selfimprove.skill as s; print(s.packaged_path('SKILL.md'));"
                           "selfimprove.cli.main()", "skill", "install", "--project", str(project)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(str(site))  # the wheel's copy, not the checkout's
    installed = project / ".claude" / "skills" / "synthetic-self-improve-rl" / "SKILL.md"
    assert installed.read_text(encoding="utf-8") == (REPO / "SKILL.md").read_text(encoding="utf-8")
