"""Round 3 (issue 24), area "surface": overrides.toml (and canonical --config) ranges, skill
install, introspect --hub-id.

    .venv/bin/python bench/hostile.py -k "r3 surface:"

Loaded by bench/hostile.py (which it imports for its helpers). The other items of this area
are tests, not CLI cases: the parser-mismatch warning and the scratchpad header
(tests/test_introspect_truth.py), output through a pipe (tests/test_pipe_output.py).
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path

from hostile import ENV, TESTS, case, cli, copy_run, damaged, teacher_case

P = "r3 surface: "
SKILL_DIR = Path(".claude") / "skills" / "synthetic-self-improve-rl"


# ---------------------------------------------------------------- overrides.toml (exit 4, before anything is generated)


def overrides(body: str):
    return lambda d: (d / "overrides.toml").write_text(body)


for label, body, key in (
    ("seq_len -5", "seq_len = -5\n", "seq_len"),
    ("seq_len 0", "seq_len = 0\n", "seq_len"),
    ("seq_len 100000000", "seq_len = 100000000\n", "seq_len"),
    ("seq_len over the student's context", "seq_len = 300\n", "seq_len"),
    ("seq_len true", "seq_len = true\n", "seq_len"),
    ("seq_len below the completion budget", "seq_len = 8\n", "seq_len"),
    ("lr 'fast'", '[trainer.optim]\nlr = "fast"\n', "trainer.optim.lr"),
    ("lr inf", "[trainer.optim]\nlr = inf\n", "trainer.optim.lr"),
    ("lr 0", "[trainer.optim]\nlr = 0.0\n", "trainer.optim.lr"),
    ("temperature nan", "[orchestrator.train.sampling]\ntemperature = nan\n", "orchestrator.train.sampling.temperature"),
    ("temperature 0", "[orchestrator.train.sampling]\ntemperature = 0.0\n", "orchestrator.train.sampling.temperature"),
    ("temperature -1", "[orchestrator.train.sampling]\ntemperature = -1.0\n", "orchestrator.train.sampling.temperature"),
    ("max_completion_tokens 0", "[orchestrator.train.sampling]\nmax_completion_tokens = 0\n",
     "orchestrator.train.sampling.max_completion_tokens"),
    ("max_completion_tokens 1.5", "[orchestrator.train.sampling]\nmax_completion_tokens = 1.5\n",
     "orchestrator.train.sampling.max_completion_tokens"),
    ("max_completion_tokens = seq_len", "seq_len = 64\n[orchestrator.train.sampling]\nmax_completion_tokens = 64\n",
     "orchestrator.train.sampling.max_completion_tokens"),
    ("syntax error", "[[[ x\n", "overrides.toml"),
    ("pinned key", "max_steps = 5\n", "max_steps"),
):
    teacher_case(f"{P}overrides {label}", key, overrides(body), code=4)


@case(f"{P}overrides in range are accepted", bad=False)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    from loop_helpers import write_teacher_files
    write_teacher_files(run / "iter_1")
    (run / "iter_1" / "overrides.toml").write_text(
        "seq_len = 200\n[trainer.optim]\nlr = 1e-4\n[orchestrator.train.sampling]\ntemperature = 0.9\n"
        "max_completion_tokens = 64\n")
    return ["iterate", "--run-dir", str(run), "--once"], run


def config_case(name: str, toml: str) -> None:
    """bootstrap --config with an out-of-range knob: refused (exit 2), the runs dir untouched."""
    def setup(tmp, t):
        (tmp / "runs").mkdir()
        (tmp / "rl.toml").write_text(toml)
        return ["bootstrap", "selfimprove-arith", "--runs-dir", str(tmp / "runs"), "--model", "selfimprove/tiny-arith",
                "--config", str(tmp / "rl.toml")], tmp / "runs"
    case(f"{P}{name}", "--config", code=2)(setup)


config_case("bootstrap --config with temperature nan", "seq_len = 256\n[orchestrator.train.sampling]\ntemperature = nan\n[trainer]\n")
config_case("bootstrap --config with seq_len -5", "seq_len = -5\n[trainer]\n")


# ---------------------------------------------------------------- skill


case(f"{P}skill install --user, HOME missing", "HOME", code=2, env={"HOME": "/nonexistent-hostile-home"})(
    lambda tmp, t: (["skill", "install", "--user"], None))
case(f"{P}skill uninstall --user, HOME missing", "HOME", code=2, env={"HOME": "/nonexistent-hostile-home"})(
    lambda tmp, t: (["skill", "uninstall", "--user"], None))
case(f"{P}skill install --user, HOME=''", "HOME", code=2, env={"HOME": ""})(
    lambda tmp, t: (["skill", "install", "--user"], None))
case(f"{P}skill install --user, HOME relative", "HOME", code=2, env={"HOME": "relative/home"})(
    lambda tmp, t: (["skill", "install", "--user"], None))


def installed_project(tmp: Path) -> Path:
    proj = tmp / "proj"
    proj.mkdir()
    p = cli(["skill", "install", "--project", str(proj)], tmp, env={**ENV, "HOME": str(tmp)})
    assert p.returncode == 0, p.stderr
    return proj


@case(f"{P}skill re-install up to date, read-only dir", bad=False, as_user=True)
def _(tmp, t):
    proj = installed_project(tmp)
    for p in [proj / SKILL_DIR, *(proj / SKILL_DIR).iterdir()]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return ["skill", "install", "--project", str(proj)], proj


for cmd in ("uninstall", "install"):
    @case(f"{P}skill {cmd}, manifest is a directory", ".selfimprove-skill.json")
    def _(tmp, t, cmd=cmd):
        proj = installed_project(tmp)
        manifest = proj / SKILL_DIR / ".selfimprove-skill.json"
        manifest.unlink()
        manifest.mkdir()
        return ["skill", cmd, "--project", str(proj)], proj


@case(f"{P}skill install, SKILL.md a directory", "SKILL.md")
def _(tmp, t):
    proj = installed_project(tmp)
    (proj / SKILL_DIR / "SKILL.md").unlink()
    (proj / SKILL_DIR / "SKILL.md").mkdir()
    return ["skill", "install", "--project", str(proj)], proj


for cmd in ("install", "uninstall"):
    @case(f"{P}skill {cmd}, SKILL.md unreadable", ("SKILL.md",), as_user=True)
    def _(tmp, t, cmd=cmd):
        # The harness makes every file under the case dir readable for the unprivileged user, so
        # the unreadable copy sits outside it, in a root-only dir, behind a symlink.
        proj = installed_project(tmp)
        secret = tmp.parent / f"secret-{secrets.token_hex(4)}"
        secret.mkdir(mode=0o700)
        skill_md = proj / SKILL_DIR / "SKILL.md"
        (secret / "SKILL.md").write_bytes(skill_md.read_bytes())
        skill_md.unlink()
        skill_md.symlink_to(secret / "SKILL.md")
        return ["skill", cmd, "--project", str(proj)], proj


# ---------------------------------------------------------------- introspect --hub-id

damaged(f"{P}introspect --hub-id with spaces", "introspect", "run.json", lambda p: None, "--hub-id", 2, "boot",
        ("--hub-id", "a b/c d"))
damaged(f"{P}introspect --hub-id after baseline", "introspect", "run.json", lambda p: None, "--hub-id", 2, "stop1",
        ("--hub-id", "owner/other-env"))

FAKE_PRIME = {"PATH": f"{TESTS / 'fakes'}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_PRIME_MODE": "notfound"}


@case(f"{P}introspect on a run aborted for a wrong hub id names --hub-id", "--hub-id", env=FAKE_PRIME)
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    cfg = json.loads((run / "run.json").read_text())
    cfg.update(hub_id="fakeowner/si-missing-env", status="aborted", reason="hub env fakeowner/si-missing-env not found")
    (run / "run.json").write_text(json.dumps(cfg))
    return ["introspect", "--run-dir", str(run)], run


@case(f"{P}introspect --hub-id mends a run aborted for a wrong hub id", bad=False, env=FAKE_PRIME)
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    p = cli(["introspect", "--run-dir", str(run), "--hub-id", "fakeowner/si-missing-env"], tmp,
            env={**ENV, **FAKE_PRIME, "HOME": str(tmp)})
    assert p.returncode == 1 and json.loads((run / "run.json").read_text())["status"] == "aborted", p.stderr
    return ["introspect", "--run-dir", str(run), "--hub-id", "selfimprove-arith"], run
