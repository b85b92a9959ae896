"""Every piece of fix advice is tried (issue 36): do what the error line says, and the next run of the same
command succeeds. Skill paths first; the closed-run and next-line advice of compare/finalize/iterate are
in tests/test_closed_run.py.

Permission advice (chmod) is followed as an unprivileged user (root ignores file permissions): the
command runs under setpriv as nobody, as bench/hostile.py does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from selfimprove.skill import MANIFEST, SKILL_FILES, packaged_text, skill_dir

NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
needs_nobody = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                  reason="runs the command as nobody (needs root and setpriv)")


def one_line(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    return " ".join(res.stderr.split())


def installed(base: Path) -> bool:
    return all((skill_dir(base) / n).read_text(encoding="utf-8") == packaged_text(n) for n in SKILL_FILES)


@pytest.mark.parametrize("cmd", ["install", "uninstall"])
@pytest.mark.parametrize("where", ["skill dir", ".claude"])
def test_a_file_in_the_skills_path_is_named_and_moving_it_aside_works(cli, tmp_path, cmd, where):
    """The skill's dir (or .claude) is a file: one line naming it, 'move it aside' (chmod would not help:
    issue 36). Moving it aside makes the same command succeed."""
    target = skill_dir(tmp_path)
    blocker = target if where == "skill dir" else tmp_path / ".claude"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a dir\n")
    res = cli("skill", cmd, "--project", tmp_path)
    err = one_line(res)
    assert res.exit_code == 1 and f"{blocker}: not a directory" in err and "move it aside" in err, err
    assert "chmod" not in err and blocker.read_text() == "not a dir\n"
    blocker.rename(tmp_path / "aside")  # the advice
    res = cli("skill", cmd, "--project", tmp_path)
    assert res.exit_code == 0, res.stderr
    assert installed(tmp_path) if cmd == "install" else not target.exists()


@pytest.mark.parametrize("cmd", ["install", "uninstall"])
def test_an_edited_file_moved_aside_lets_the_command_run(cli, tmp_path, cmd):
    """'edited locally ... or move it aside': after moving it, install reinstalls and uninstall removes."""
    assert cli("skill", "install", "--project", tmp_path).exit_code == 0
    path = skill_dir(tmp_path) / "SKILL.md"
    path.write_text("my notes\n")
    res = cli("skill", cmd, "--project", tmp_path)
    assert res.exit_code == 1 and "move it aside" in one_line(res)
    path.rename(tmp_path / "my-notes.md")
    res = cli("skill", cmd, "--project", tmp_path)
    assert res.exit_code == 0, res.stderr
    assert installed(tmp_path) if cmd == "install" else not skill_dir(tmp_path).exists()
    assert (tmp_path / "my-notes.md").read_text() == "my notes\n"


@pytest.mark.parametrize("cmd", ["install", "uninstall"])
@pytest.mark.parametrize("name", [MANIFEST, "SKILL.md"])
def test_a_directory_in_a_files_place_moved_aside_lets_the_command_run(cli, tmp_path, cmd, name):
    """'not a regular file ...; move it aside and re-run' for the manifest and for a skill file."""
    assert cli("skill", "install", "--project", tmp_path).exit_code == 0
    path = skill_dir(tmp_path) / name
    path.unlink()
    path.mkdir()
    res = cli("skill", cmd, "--project", tmp_path)
    err = one_line(res)
    assert res.exit_code == 1 and "not a regular file" in err and "move it aside" in err, err
    path.rename(tmp_path / "aside")
    res = cli("skill", cmd, "--project", tmp_path)
    assert res.exit_code == 0, res.stderr
    assert installed(tmp_path) if cmd == "install" else not skill_dir(tmp_path).exists()


@pytest.mark.parametrize("cmd", ["install", "uninstall"])
def test_home_advice_create_it_or_set_it(cli, tmp_path, monkeypatch, cmd):
    """--user with a missing HOME: 'create it' works; with an empty HOME: 'set HOME' works."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    res = cli("skill", cmd, "--user")
    assert res.exit_code == 2 and "create it" in one_line(res)
    home.mkdir()  # the advice
    assert cli("skill", cmd, "--user").exit_code == 0
    monkeypatch.setenv("HOME", "")
    res = cli("skill", cmd, "--user")
    assert res.exit_code == 2 and "set HOME" in one_line(res)
    monkeypatch.setenv("HOME", str(home))
    assert cli("skill", cmd, "--user").exit_code == 0


def as_nobody(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "300"}
    return subprocess.run([*NOBODY, sys.executable, "-m", "selfimprove", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def chmod_as_said(err: str) -> Path:
    """Run the `chmod u+w <dir>` the line names (as the owner would); returns the dir."""
    words = err.split("chmod u+w ", 1)[1].split()
    target = Path(words[0].rstrip(")"))
    target.chmod(target.stat().st_mode | 0o200)
    return target


@needs_nobody
@pytest.mark.parametrize("cmd,read_only", [("install", "proj"), ("uninstall", "skill dir"), ("uninstall", "skills")])
def test_a_read_only_dir_named_with_chmod_and_chmod_works(cli, request, cmd, read_only):
    """EACCES: the line names the directory that refused the change and `chmod u+w` on IT; doing that
    makes the same command succeed (for `skills` read-only, the skill dir's own chmod would not help)."""
    tmp_path = Path(tempfile.mkdtemp(prefix="advice-"))  # pytest's tmp dirs are root's (0700): nobody cannot enter
    request.addfinalizer(lambda: shutil.rmtree(tmp_path, ignore_errors=True))
    proj = tmp_path / "proj"
    proj.mkdir()
    if cmd == "uninstall":
        assert cli("skill", "install", "--project", proj).exit_code == 0
    for p in [tmp_path, *proj.rglob("*"), proj]:
        os.chown(p, 65534, 65534, follow_symlinks=False)
    locked = {"proj": proj, "skill dir": skill_dir(proj), "skills": skill_dir(proj).parent}[read_only]
    locked.chmod(0o555)
    res = as_nobody(["skill", cmd, "--project", str(proj)], tmp_path)
    err = " ".join(res.stderr.split())
    assert res.returncode == 1 and f"chmod u+w {locked})" in err, err
    assert chmod_as_said(err) == locked
    res = as_nobody(["skill", cmd, "--project", str(proj)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert installed(proj) if cmd == "install" else not skill_dir(proj).exists()
