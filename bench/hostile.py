"""A hostile-but-fair new user (issue 13): bad flags, damaged run dirs, phase-order
violations, broken teachers and teacher files. Not a test; no real training.

    .venv/bin/python bench/hostile.py [-k SUBSTRING] [-v]

Round 3's cases (issue 24) are in bench/hostile_r3_*.py, one module per area.

Each case runs `python -m selfimprove ...` as a subprocess in its own temp dir, with
the fake engine of the tests (tests/fakes/fake_rl.py as SELFIMPROVE_RL_CMD), so
nothing trains for real. Two template runs are made once (~30 s): a bootstrapped
run and a run stopped at iter_1's teacher stop (iter_0 done by the fake engine);
each case works on a copy.

Per case: exit code, "Traceback" in stdout/stderr, the error message's line count
(stderr from its first `error:`/`stop:` line; a Typer usage panel counts its text
lines), and for refusals whether the run dir's files changed (sha256 before/after).
A case is answered WELL when there is no traceback and, for bad input: a non-zero
exit, the expected exit code when the case names one, a message of at most 2 lines
(a gate's rule list, exit 3/4, may be longer: docs/reference/exit-codes.md) that names the
file or flag, and, for a refusal (exit 1, 2, 5, 75), an unchanged run dir.

Prints a table and `N cases, K answered well`, saves it to bench/out/hostile.txt,
and exits 1 if any case printed a traceback (2 if any other case was not answered well).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from _out import save  # bench/_out.py (this directory is sys.path[0])

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
FAKE = TESTS / "fakes" / "fake_rl.py"
PY = sys.executable
ENV = {**os.environ, "SELFIMPROVE_RL_CMD": f"{PY} {FAKE}", "FAKE_RL_STEP_S": "0.001",
       "SELFIMPROVE_NO_STUDENT_BUILD": "1", "OMP_WAIT_POLICY": "PASSIVE", "COLUMNS": "200"}
ENV.pop("SELFIMPROVE_RUN_DIR", None)
ENV.pop("SELFIMPROVE_RUNS_DIR", None)
SMALL = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "4", "--batch-size", "32",
         "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "20", "--budget", "5h"]
REFUSAL_CODES = {1, 2, 5, 75}


NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


def cli(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 300,
        as_user: bool = False) -> subprocess.CompletedProcess:
    prefix = NOBODY if as_user and os.geteuid() == 0 and shutil.which("setpriv") else []
    return subprocess.run([*prefix, PY, "-m", "selfimprove", *args], cwd=cwd, capture_output=True, text=True,
                          env=env or ENV, timeout=timeout, errors="replace")


def digest(root: Path | None) -> str | None:
    if root is None or not root.exists():
        return None
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.name == ".lock":  # the lock's holder record, rewritten by every command that takes it: not data
            continue
        h.update(str(p.relative_to(root)).encode())
        if p.is_file() and not p.is_symlink():
            try:
                h.update(p.read_bytes())
            except OSError:
                h.update(b"<unreadable>")
    return h.hexdigest()


# A Python traceback of the tool itself (a frame in the selfimprove package). The teacher's own
# generator may crash with a traceback that the stop message quotes from gen.log: that is its output.
_OWN_TB = re.compile(r'File ".*/selfimprove/[^"]*\.py"')


def own_traceback(text: str) -> bool:
    return "Traceback" in text and bool(_OWN_TB.search(text))


_BOX = re.compile(r"^[\s╭╮╰╯─│]*$")


def message_lines(stderr: str) -> list[str]:
    """The error message: stderr from its first error:/stop: line (progress lines before it are not
    part of it); a Typer/Click usage error counts the text inside its panel, without Usage/Try."""
    lines = [ln.rstrip() for ln in stderr.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith(("error:", "stop:")):
            return lines[i:]
    if any(ln.startswith("Usage:") for ln in lines):
        return [ln.strip("│ ").strip() for ln in lines
                if not ln.startswith(("Usage:", "Try ")) and not _BOX.match(ln)]
    return lines


# ----------------------------------------------------------------- templates


@dataclass
class Templates:
    root: Path
    boot: Path | None = None  # bootstrapped only
    stop1: Path | None = None  # iter_0 done (fake engine), stopped at iter_1's teacher stop

    def make(self) -> None:
        runs = self.root / "runs"
        p = cli(["bootstrap", "selfimprove-arith", "--runs-dir", str(runs), *SMALL], self.root)
        assert p.returncode == 0, p.stderr
        self.boot = Path(p.stdout.strip().splitlines()[-1])
        p = cli(["bootstrap", "selfimprove-arith", "--runs-dir", str(self.root / "runs2"), *SMALL], self.root)
        assert p.returncode == 0, p.stderr
        run = Path(p.stdout.strip().splitlines()[-1])
        for phase in ("introspect", "baseline", "iterate"):
            p = cli([phase, "--run-dir", str(run)], self.root)
            assert p.returncode == (3 if phase == "iterate" else 0), (phase, p.stderr)
        self.stop1 = run


def copy_run(src: Path, tmp: Path) -> Path:
    dst = tmp / src.name
    shutil.copytree(src, dst, symlinks=True)
    return dst


# ----------------------------------------------------------------- cases


@dataclass
class Case:
    name: str
    setup: Callable[[Path, Templates], tuple[list[str], Path | None]]  # -> (args, run dir to watch)
    names: tuple[str, ...] = ()  # the message must name one of these (the file or flag)
    bad: bool = True  # bad input: must be refused (non-zero); False: must succeed (or stop, see ok_codes)
    code: int | None = None  # the exit code docs/reference/exit-codes.md gives for it, if it names one
    ok_codes: tuple[int, ...] = (0,)  # for bad=False: acceptable exit codes
    env: dict = field(default_factory=dict)
    may_change: bool = False  # the refusal comes after steps that legitimately ran (or writes the log it names)
    as_user: bool = False  # as root, run the command as an unprivileged user (root ignores file permissions)


CASES: list[Case] = []


def case(name: str, names: tuple[str, ...] | str = (), bad: bool = True, code: int | None = None,
         ok_codes: tuple[int, ...] = (0,), env: dict | None = None, may_change: bool = False, as_user: bool = False):
    def deco(fn):
        CASES.append(Case(name, fn, (names,) if isinstance(names, str) else names, bad, code, ok_codes, env or {},
                          may_change, as_user))
        return fn
    return deco


def boot_case(name: str, extra: list[str], names, code: int | None = None, dataset: str = "selfimprove-arith",
              bad: bool = True):
    """A bootstrap that must be refused, writing nothing in its runs dir."""
    def setup(tmp: Path, t: Templates):
        runs = tmp / "runs"
        runs.mkdir()
        return ["bootstrap", dataset, "--runs-dir", str(runs), "--model", "selfimprove/tiny-arith", *extra], runs
    case(name, names, code=code, bad=bad)(setup)


# bootstrap: bad flags and values
boot_case("boot --max-iters 0", ["--max-iters", "0"], "--max-iters", 2)
boot_case("boot --max-iters -3", ["--max-iters", "-3"], "--max-iters", 2)
boot_case("boot --max-iters 10^12 (the budget caps it)", ["--max-iters", "1000000000000"], (), bad=False)
boot_case("boot --max-iters abc", ["--max-iters", "abc"], "--max-iters", 2)
boot_case("boot --batch-size 0", ["--batch-size", "0"], "--batch-size", 2)
boot_case("boot --batch-size -512", ["--batch-size", "-512"], "--batch-size", 2)
boot_case("boot --batch-size 10^15", ["--batch-size", "1000000000000000"], "--batch-size", 2)
boot_case("boot --steps-per-run 0", ["--steps-per-run", "0"], "--steps-per-run", 2)
boot_case("boot --steps-per-run -1", ["--steps-per-run", "-1"], "--steps-per-run", 2)
boot_case("boot --rollouts-per-example 0", ["--rollouts-per-example", "0"], "--rollouts-per-example", 2)
boot_case("boot --rollouts-per-example 1", ["--rollouts-per-example", "1"], "--rollouts-per-example", 2)
boot_case("boot --eval-examples -1", ["--eval-examples", "-1"], "--eval-examples", 2)
boot_case("boot --eval-examples 0", ["--eval-examples", "0"], "--eval-examples", 2)
boot_case("boot --budget 0", ["--budget", "0"], "--budget", 2)
boot_case("boot --budget -5m", ["--budget", "-5m"], "--budget", 2)
boot_case("boot --budget 10x", ["--budget", "10x"], "--budget", 2)
boot_case("boot --budget ''", ["--budget", ""], "--budget", 2)
boot_case("boot --budget 1e400h", ["--budget", "1e400h"], "--budget", 2)
boot_case("boot --budget 99999999999h (max_iters caps)", ["--budget", "99999999999h"], (), bad=False)
boot_case("boot --budget nan", ["--budget", "nan"], "--budget", 2)
boot_case("boot --model selfimprove/nope", ["--model", "selfimprove/nope"], "--model")
boot_case("boot --engine local + hub model", ["--model", "Qwen/Qwen3-0.6B", "--engine", "local"], ("--engine", "--model"))
boot_case("boot --engine gpuzilla", ["--engine", "gpuzilla"], "--engine", 2)
boot_case("boot --stack v9", ["--stack", "v9"], "--stack", 2)
boot_case("boot --env-args bad JSON", ["--env-args", "{bad json"], "--env-args", 2)
boot_case("boot --env-args list", ["--env-args", "[1, 2]"], "--env-args", 2)
boot_case("boot --env-args string", ["--env-args", '"x"'], "--env-args", 2)
boot_case("boot --env-args NaN", ["--env-args", '{"n": NaN}'], "--env-args", 2)
boot_case("boot dataset 300 chars", [], "dataset", dataset="a" * 300)
boot_case("boot dataset unicode", [], "dataset", dataset="ärïth-😀")
boot_case("boot dataset typo", [], ("selfimprove-arith", "dataset"), dataset="selfimprove-arihtm")
boot_case("boot dataset ../../etc", [], "dataset", dataset="../../etc")
boot_case("boot dataset ''", [], "dataset", dataset="")
boot_case("boot dataset '--'", [], (), 2, dataset="--")
boot_case("boot --init-from missing", ["--init-from", "/nonexistent/run"], "--init-from")
boot_case("boot --init-from relative", ["--init-from", "runs/x"], "--init-from")
boot_case("boot --config missing", ["--config", "/nonexistent.toml"], "--config")
boot_case("boot --env-path missing", ["--env-path", "/nonexistent/env"], "--env-path")
boot_case("boot --hub-id with spaces", ["--hub-id", "a b/c d"], "--hub-id")


@case("boot --config garbage TOML", "--config")
def _(tmp, t):
    (tmp / "runs").mkdir()
    (tmp / "bad.toml").write_text("[[[ not toml\n")
    return ["bootstrap", "selfimprove-arith", "--runs-dir", str(tmp / "runs"), *SMALL, "--config", str(tmp / "bad.toml")], tmp / "runs"


@case("boot --runs-dir is a file", "--runs-dir")
def _(tmp, t):
    (tmp / "f").write_text("x")
    return ["bootstrap", "selfimprove-arith", "--runs-dir", str(tmp / "f"), *SMALL], tmp / "f"


@case("boot --runs-dir read-only", ("runs", "--runs-dir"), as_user=True)
def _(tmp, t):
    (tmp / "ro").mkdir()
    (tmp / "ro").chmod(0o555)
    return ["bootstrap", "selfimprove-arith", "--runs-dir", str(tmp / "ro"), *SMALL], tmp / "ro"


# the run dir itself
@case("status: run dir missing", ("--run-dir", "run dir"))
def _(tmp, t):
    return ["status", "--run-dir", str(tmp / "nope")], None


@case("status: empty dir", "run.json")
def _(tmp, t):
    (tmp / "empty").mkdir()
    return ["status", "--run-dir", str(tmp / "empty")], tmp / "empty"


@case("status: run dir is a file", ("--run-dir", "run dir"))
def _(tmp, t):
    (tmp / "f").write_text("x")
    return ["status", "--run-dir", str(tmp / "f")], None


@case("status: no --run-dir", "--run-dir", code=2)
def _(tmp, t):
    return ["status"], None


def damaged(name: str, cmd: str, path: str, damage: Callable[[Path], None], names, code: int | None = None,
            template: str = "boot", extra: tuple[str, ...] = ()):
    """`cmd --run-dir R` on a copy of a template run whose `path` is damaged: refused, R unchanged."""
    def setup(tmp: Path, t: Templates):
        run = copy_run(getattr(t, template), tmp)
        damage(run / path)
        return [cmd, "--run-dir", str(run), *extra], run
    case(name, names, code=code)(setup)


def non_utf8(p: Path) -> None:
    p.write_bytes(b"\xff\xfe" + p.read_bytes())


def truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 2)])


def delete(p: Path) -> None:
    p.unlink()


def text(s: str) -> Callable[[Path], None]:
    return lambda p: p.write_text(s)


def edit_json(**kw) -> Callable[[Path], None]:
    def f(p: Path) -> None:
        d = json.loads(p.read_text())
        d.update(kw)
        p.write_text(json.dumps(d))
    return f


for cmd in ("status", "introspect"):
    damaged(f"{cmd}: run.json deleted", cmd, "run.json", delete, "run.json")
    damaged(f"{cmd}: run.json non-UTF-8", cmd, "run.json", non_utf8, "run.json")
    damaged(f"{cmd}: run.json truncated", cmd, "run.json", truncate, "run.json")
    damaged(f"{cmd}: run.json is a list", cmd, "run.json", text("[]"), "run.json")
damaged("status: run.json max_iters 'x'", "status", "run.json", edit_json(max_iters="x"), ("run.json", "max_iters"))
damaged("status: run.json budget -1", "status", "run.json", edit_json(budget_seconds=-1), ("run.json", "budget"))
damaged("status: run.json empty file", "status", "run.json", text(""), "run.json")
damaged("status: metrics.json deleted", "status", "metrics.json", delete, "metrics.json")
damaged("status: metrics.json truncated", "status", "metrics.json", truncate, "metrics.json", template="stop1")
damaged("status: metrics.json a number", "status", "metrics.json", text("42"), "metrics.json")
damaged("status: metrics.json non-UTF-8", "status", "metrics.json", non_utf8, "metrics.json")
damaged("status: metrics.json list", "status", "metrics.json", text("[1]"), "metrics.json", template="stop1")
damaged("iterate: run.json non-UTF-8 at a stop", "iterate", "run.json", non_utf8, "run.json", template="stop1")
damaged("iterate: hub_env.json truncated", "iterate", "hub_env.json", truncate, "hub_env.json", template="stop1")
damaged("iterate: hub_env.json a list", "iterate", "hub_env.json", text("[]"), "hub_env.json", template="stop1")
def before_iter1(damage: Callable[[Path], None]) -> Callable[[Path], None]:
    """Damage iter_0's eval_summary.json of a run whose iter_1 has not started (iterate reads it to analyse)."""
    def f(p: Path) -> None:
        shutil.rmtree(p.parents[1] / "iter_1")
        damage(p)
    return f


damaged("iterate: iter_0 eval_summary garbage", "iterate", "iter_0/eval_summary.json", before_iter1(text("{oops")),
        "eval_summary.json", template="stop1")
damaged("iterate: iter_0 eval_summary a list", "iterate", "iter_0/eval_summary.json", before_iter1(text("[]")),
        "eval_summary.json", template="stop1")
damaged("iterate: iter_0 eval_summary non-UTF-8", "iterate", "iter_0/eval_summary.json", before_iter1(non_utf8),
        "eval_summary.json", template="stop1")

# phase order
damaged("finalize before baseline", "finalize", "run.json", lambda p: None, "baseline", code=5)
damaged("compare before baseline", "compare", "run.json", lambda p: None, "baseline", code=5)
damaged("iterate before baseline", "iterate", "run.json", lambda p: None, "baseline", code=5)
damaged("compare mid Phase 3", "compare", "run.json", lambda p: None, ("iterate", "Phase 3"), code=5, template="stop1")

# flags of non-training phases (refused before anything runs)
damaged("iterate --gen-timeout -5", "iterate", "run.json", lambda p: None, "--gen-timeout", 2, "stop1", ("--gen-timeout", "-5"))
damaged("iterate --gen-timeout nan", "iterate", "run.json", lambda p: None, "--gen-timeout", 2, "stop1", ("--gen-timeout", "nan"))
damaged("iterate --cap-hours -1", "iterate", "run.json", lambda p: None, "--cap-hours", 2, "stop1", ("--cap-hours", "-1"))
damaged("iterate --restart --resume", "iterate", "run.json", lambda p: None, ("--restart", "--resume"), 2, "stop1",
        ("--restart", "--resume"))
damaged("compare --seeds 0", "compare", "run.json", lambda p: None, "--seeds", 2, "stop1", ("--seeds", "0"))
damaged("compare --seeds -2", "compare", "run.json", lambda p: None, "--seeds", 2, "stop1", ("--seeds", "-2"))
damaged("note --compact-failed ''", "note", "run.json", lambda p: None, "--compact-failed", 2, "boot", ("--compact-failed", ""))


@case("introspect: read-only run dir", ("run dir", "chmod", "writable", "read-only"), as_user=True)
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    for p in [run, *run.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return ["introspect", "--run-dir", str(run)], run


@case("iterate: read-only run dir at a stop", ("run dir", "chmod", "writable", "read-only"), as_user=True)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    from loop_helpers import write_teacher_files
    write_teacher_files(run / "iter_1")
    for p in [run, *run.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return ["iterate", "--run-dir", str(run)], run


# teacher files at iter_1's teacher stop (exit 3/4: the message names the file; gates list their rules)
def teacher_case(name: str, names, damage: Callable[[Path], None], code: int | None = None, may_change: bool = False):
    def setup(tmp: Path, t: Templates):
        run = copy_run(t.stop1, tmp)
        from loop_helpers import write_teacher_files
        write_teacher_files(run / "iter_1")
        damage(run / "iter_1")
        return ["iterate", "--run-dir", str(run)], run
    case(name, names, code=code, may_change=may_change)(setup)


teacher_case("report: empty", "weakness_report.md", lambda d: (d / "weakness_report.md").write_text(""))
teacher_case("report: non-UTF-8", "weakness_report.md", lambda d: non_utf8(d / "weakness_report.md"))
teacher_case("report: garbage YAML", "weakness_report.md",
             lambda d: (d / "weakness_report.md").write_text("---\n: : [\n---\nbody\n"))
teacher_case("report: front matter a list", "weakness_report.md",
             lambda d: (d / "weakness_report.md").write_text("---\n- 1\n- 2\n---\nbody\n"))
teacher_case("report: deleted", "weakness_report.md", lambda d: (d / "weakness_report.md").unlink())
teacher_case("gen: syntax error", "gen_dataset.py", lambda d: (d / "gen_dataset.py").write_text("def (:\n"))
teacher_case("gen: raises", "gen_dataset.py", lambda d: (d / "gen_dataset.py").write_text("raise SystemExit('boom')\n"))
teacher_case("gen: writes nothing", "gen_dataset.py", lambda d: (d / "gen_dataset.py").write_text("pass\n"))
teacher_case("gen: non-UTF-8 source", "gen_dataset.py", lambda d: (d / "gen_dataset.py").write_bytes(b"x = '\xff'\n"))
teacher_case("dataset: not JSON", "dataset.jsonl",
             lambda d: (d / "gen_dataset.py").write_text("open('dataset.jsonl','w').write('not json\\n' * 900)\n"))
teacher_case("dataset: rows are lists", "dataset.jsonl",
             lambda d: (d / "gen_dataset.py").write_text("open('dataset.jsonl','w').write('[1, 2]\\n' * 600)\n"))
teacher_case("dataset: empty", "dataset.jsonl",
             lambda d: (d / "gen_dataset.py").write_text("open('dataset.jsonl','w').write('')\n"))
teacher_case("dataset: non-UTF-8", "dataset.jsonl",
             lambda d: (d / "gen_dataset.py").write_text("open('dataset.jsonl','wb').write(b'\\xff\\xfe{}\\n' * 600)\n"))
teacher_case("dataset: 50k rows of {}", "dataset.jsonl",
             lambda d: (d / "gen_dataset.py").write_text("open('dataset.jsonl','w').write('{}\\n' * 50000)\n"))
teacher_case("overrides.toml: garbage", "overrides.toml", lambda d: (d / "overrides.toml").write_text("[[[ x\n"), may_change=True)
teacher_case("overrides.toml: pinned key", "overrides.toml",
             lambda d: (d / "overrides.toml").write_text("max_steps = 5\n"), may_change=True)
teacher_case("overrides.toml: non-UTF-8", "overrides.toml", lambda d: (d / "overrides.toml").write_bytes(b"\xff\xfe = 1\n"), may_change=True)
teacher_case("failures.jsonl deleted", "failures.jsonl", lambda d: (d / "failures.jsonl").unlink())


@case("scratchpad.md deleted at a teacher stop", bad=False)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    from loop_helpers import write_teacher_files
    write_teacher_files(run / "iter_1", notes=False)
    (run / "scratchpad.md").unlink()
    return ["iterate", "--run-dir", str(run), "--once"], run


@case("scratchpad.md non-UTF-8 at a teacher stop", "scratchpad.md")
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    from loop_helpers import write_teacher_files
    write_teacher_files(run / "iter_1")
    non_utf8(run / "scratchpad.md")
    return ["iterate", "--run-dir", str(run), "--once"], run


# selfimprove run --teacher
def teacher_file_case(name: str, body: str, names, spec: str = "teacher.py:T", template: str = "stop1",
                      may_change: bool = False):
    def setup(tmp: Path, t: Templates):
        run = copy_run(getattr(t, template), tmp)
        (tmp / "teacher.py").write_text(body)
        return ["run", "--run-dir", str(run), "--teacher", str(tmp / spec)], run
    case(name, names, may_change=may_change)(setup)


teacher_file_case("run --teacher: syntax error", "class T(:\n", "teacher.py")
teacher_file_case("run --teacher: import error", "import no_such_module_xyz\nclass T: pass\n", "teacher.py")
teacher_file_case("run --teacher: object missing", "class U: pass\n", ("teacher.py", "T"))
teacher_file_case("run --teacher: object not callable", "T = 3\n", ("teacher.py", "T"))
teacher_file_case("run --teacher: file missing", "", ("nope.py", "--teacher"), spec="nope.py:T")
teacher_file_case("run --teacher: no colon", "", ("--teacher",), spec="teacher.py")
@case("run --teacher: analysis.json truncated", "analysis.json")
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    truncate(run / "iter_1" / "analysis.json")
    return ["run", "--run-dir", str(run), "--teacher", str(REPO / "examples/arith_teacher.py") + ":ArithTeacher"], run


teacher_file_case("run --teacher: write() raises", "class T:\n    def write(self, ctx):\n        raise RuntimeError('boom')\n",
                  ("teacher", "teacher_error.log"), may_change=True)  # it writes the log it names
teacher_file_case("run --teacher: exits at import", "import sys\nsys.exit(7)\n", "teacher.py")


@case("run gsm8k: no default teacher", "--teacher")
def _(tmp, t):
    (tmp / "runs").mkdir()
    return ["run", "gsm8k", "--runs-dir", str(tmp / "runs")], tmp / "runs"


@case("run: neither dataset nor --run-dir", ("dataset", "--run-dir"))
def _(tmp, t):
    return ["run"], None


@case("run --run-dir R plus a dataset", "--run-dir")
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    return ["run", "selfimprove-arith", "--run-dir", str(run)], run


@case("run: bad bootstrap flag", "--budget")
def _(tmp, t):
    (tmp / "runs").mkdir()
    return ["run", "selfimprove-arith", "--runs-dir", str(tmp / "runs"), "--budget", "soon"], tmp / "runs"


# skill, student, unknown things
@case("skill install: read-only project", (".claude", "project"), as_user=True)
def _(tmp, t):
    (tmp / "proj").mkdir()
    (tmp / "proj").chmod(0o555)
    return ["skill", "install", "--project", str(tmp / "proj")], tmp / "proj"


@case("skill install: missing project", "--project", code=2)
def _(tmp, t):
    return ["skill", "install", "--project", str(tmp / "nope")], None


@case("skill install --user: HOME unwritable", (".claude", "HOME"), env={"HOME": "/proc/hostile-home"})
def _(tmp, t):
    return ["skill", "install", "--user"], None


@case("skill install: .claude is a file", ".claude")
def _(tmp, t):
    (tmp / "proj").mkdir()
    (tmp / "proj" / ".claude").write_text("x")
    return ["skill", "install", "--project", str(tmp / "proj")], tmp / "proj"


@case("skill install --user --project", ("--user", "--project"), code=2)
def _(tmp, t):
    return ["skill", "install", "--user", "--project", str(tmp)], None


@case("skill show: unknown file", ("NOPE.md",))
def _(tmp, t):
    return ["skill", "show", "NOPE.md"], None


@case("student profile: unknown built-in", "selfimprove/nope")
def _(tmp, t):
    return ["student", "profile", "selfimprove/nope"], None


@case("unknown command", "frobnicate", code=2)
def _(tmp, t):
    return ["frobnicate"], None


# Later rounds' cases live beside this file, one module per area (bench/hostile_r3_*.py). Each
# does `from hostile import case, damaged, ...`: this module is registered under its own name
# first, so run as a script it is not imported a second time with an empty case list.
sys.modules.setdefault("hostile", sys.modules[__name__])
for _p in sorted(Path(__file__).parent.glob("hostile_r*_*.py")):
    importlib.import_module(_p.stem)


# ----------------------------------------------------------------- runner


@dataclass
class Result:
    case: Case
    rc: int
    traceback: bool
    lines: int
    changed: bool | None
    named: bool
    well: bool
    why: str
    seconds: float
    message: str


def restore_writable(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            try:
                p.chmod(p.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR)
            except OSError:
                pass


def run_case(c: Case, t: Templates, work: Path) -> Result:
    tmp = Path(tempfile.mkdtemp(dir=work, prefix="case-"))
    sys.path.insert(0, str(TESTS))
    args, watch = c.setup(tmp, t)
    before = digest(watch)
    start = time.monotonic()
    try:
        if c.as_user and os.geteuid() == 0:  # nobody must read the case's files (and only read them)
            for q in [tmp, *tmp.rglob("*")]:
                if not q.is_symlink():
                    q.chmod(q.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if q.is_dir() else 0))
        p = cli(args, tmp, env={**ENV, "HOME": str(tmp), **c.env}, as_user=c.as_user)
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, stdout, stderr = -1, "", "timeout"
    seconds = time.monotonic() - start
    after = digest(watch)
    restore_writable(tmp)
    tb = own_traceback(stdout) or own_traceback(stderr)
    msg = message_lines(stderr)
    changed = (before != after) if watch is not None else None
    named = not c.names or any(n.lower() in "\n".join(msg).lower() for n in c.names)
    why = []
    if tb:
        why.append("traceback")
    if c.bad:
        if rc == 0:
            why.append("accepted (exit 0)")
        if c.code is not None and rc != c.code:
            why.append(f"exit {rc}, the docs say {c.code}")
        limit = 2 if rc in REFUSAL_CODES else 40
        if len(msg) > limit:
            why.append(f"{len(msg)}-line message")
        if not msg:
            why.append("no message")
        elif not named:
            why.append(f"names none of {', '.join(c.names)}")
        if rc in REFUSAL_CODES and changed and not c.may_change:
            why.append("run dir changed")
        if any(m.startswith("error: unexpected") for m in msg):
            why.append("reported as a bug")
    elif rc not in c.ok_codes:
        why.append(f"exit {rc}")
    shutil.rmtree(tmp, ignore_errors=True)
    return Result(c, rc, tb, len(msg), changed, named, not why, ", ".join(why), seconds, (msg or [""])[0][:150])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print each case's first message line")
    a = ap.parse_args()
    cases = [c for c in CASES if a.k.lower() in c.name.lower()]
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    work.chmod(0o755)  # the read-only cases run as an unprivileged user when this runs as root
    try:
        t0 = time.monotonic()
        t = Templates(work / "templates")
        t.root.mkdir()
        t.make()
        print(f"templates made in {time.monotonic() - t0:.0f} s; {len(cases)} cases", file=sys.stderr)
        results = []
        for c in cases:
            r = run_case(c, t, work)
            results.append(r)
            print(f"{'ok ' if r.well else 'BAD'} {c.name}: exit {r.rc} {r.why}", file=sys.stderr, flush=True)
    finally:
        restore_writable(work)
        shutil.rmtree(work, ignore_errors=True)
    rows = [f"{'case':44} {'exit':>4} {'tb':>3} {'lines':>5} {'changed':>7}  verdict"]
    for r in results:
        ch = "-" if r.changed is None else ("yes" if r.changed else "no")
        rows.append(f"{r.case.name[:44]:44} {r.rc:>4} {'TB' if r.traceback else '':>3} {r.lines:>5} {ch:>7}  "
                    f"{'well' if r.well else 'BAD: ' + r.why}")
        if a.v:
            rows.append(f"    {r.message}")
    well = sum(r.well for r in results)
    rows.append(f"{len(results)} cases, {well} answered well, {sum(r.traceback for r in results)} with a traceback "
                f"({time.monotonic() - t0:.0f} s)")
    report = "\n".join(rows)
    print(report)
    save("hostile.txt", report)
    if any(r.traceback for r in results):
        return 1
    return 0 if well == len(results) else 2


if __name__ == "__main__":
    sys.exit(main())
