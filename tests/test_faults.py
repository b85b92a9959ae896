"""The kill -9 fault suite (marker `fault`; `pytest -m fault`): crash the loop at named
points, recover the way the tool says, and end where an undisturbed run ends.

How a point is hit:
- a CLI kill: SELFIMPROVE_FAULT_AT=<point> makes `selfimprove.faults.fault_point` SIGKILL
  the CLI at that place in the code (no cleanup runs, as with an OOM kill);
- a job kill: the test SIGKILLs the training job's process group (pgid from <arm>/job.json)
  as soon as the job has written its first new rollouts step;
- a generator kill: the copy's gen_dataset.py is prefixed with lines that start two children
  (one in the generator's process group, one in a session of its own), write the three pids to
  iter_N/gen_pids.txt and wait; the test SIGKILLs the CLI once that file exists and checks that
  none of the three is left alive.

One undisturbed reference run (fake engine, tests/fakes/fake_rl.py; the loop tests' small
settings) is built once per module, with a snapshot of the run dir before every step of
iterate and every arm of compare. A point starts from a copy of the latest snapshot before
it, runs the phase command with the fault armed, runs the recovery the tool asks for
(nothing, or `--resume` / `--restart`), runs the same command again, and checks against
the reference at the end of that phase:
- the same outcome: metrics.json (each arm once, same order, same figures), every
  eval_summary.json and record.json, run.json's status and Phase 4 errors, and
  scratchpad.md's headings; for Phase 4 and 5 points also finalize's summary (table,
  tests, recommendation) and the scratchpad's final-summary table;
- no file half-written: every JSON and JSONL file parses, and no temp file or staging
  dir of an interrupted write is left behind;
- no job launched twice (a killed job is launched exactly once more, by its recovery).

Why per phase and not always to the very end: Phase 3's packaging and Phase 4 load the
real environment through verifiers in fresh interpreters (~10 s of CPU each); running
every point to the end would cost ~10 minutes on 2 cores instead of ~3. Every later
phase reads only the run dir, so equal run dirs at a phase end give equal summaries (the
Phase 4/5 points check the summary itself).

The figure (points survived / points tried) is printed in pytest's terminal summary
(tests/conftest.py) and kept in docs/how-to/resume.md ("What a crash costs").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from selfimprove.errors import TeacherActionNeeded
from selfimprove.phases.compare import compare
from selfimprove.phases.finalize import finalize
from selfimprove.phases.iterate import iterate
from selfimprove.rundir import RunDir

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAKE = TESTS / "fakes" / "fake_rl.py"
# The loop tests' small settings (tests/loop_helpers.py): iter_0 + iter_1, then Runs A, B, C.
SETTINGS = ["--model", "selfimprove/tiny-arith", "--max-iters", "2", "--steps-per-run", "4", "--batch-size", "32",
            "--rollouts-per-example", "4", "--allow-small-batch", "--eval-examples", "20", "--budget", "5h"]

pytestmark = pytest.mark.fault


# ---------------------------------------------------------------- the points


@dataclass
class Point:
    """One crash point: where it starts, the command, how it is killed and recovered, where it ends."""

    name: str
    start: str  # reference snapshot the copy starts from
    command: list[str]  # `selfimprove` args (the run dir is added); run killed, then again to recover
    end: str  # reference snapshot to compare with afterwards ("final": also finalize's summary)
    fault: str | None = None  # SELFIMPROVE_FAULT_AT for a CLI kill
    job_arm: str | None = None  # arm dir whose training job's process group is killed instead
    recover: list[list[str]] = field(default_factory=list)  # what the tool says to run after the kill
    first_rc: int = -signal.SIGKILL  # exit status of the killed command
    slow_jobs: bool = False  # jobs end ~2 s late, so the re-run finds the killed CLI's job alive
    generator_iter: str | None = None  # iter dir whose generator runs (with children) when the test kills the CLI
    known: str | None = None  # cause of a known failure: xfail(strict), flips when fixed

    @property
    def what(self) -> str:
        return f"kill -9 of {'the training job of ' + self.job_arm if self.job_arm else 'the CLI'}"


# Prefixed to the teacher's generator by a generator kill: it runs on unchanged once the test has killed the CLI
# (or, in the re-run, after a second: its rows are the reference's).
GENERATOR_WITH_CHILDREN = """
import os as _os, subprocess as _sp, sys as _sys, time as _time
_loop = [_sys.executable, "-c", "import time\\nwhile True: time.sleep(0.2)"]
_kids = [_sp.Popen(_loop), _sp.Popen(_loop, start_new_session=True)]
with open("gen_pids.txt.part", "w") as _f:
    _f.write(" ".join(str(p) for p in [_os.getpid()] + [k.pid for k in _kids]))
_os.replace("gen_pids.txt.part", "gen_pids.txt")
_time.sleep(1)
for _k in _kids:
    _k.kill()
"""


BASELINE, ITERATE, COMPARE = ["baseline"], ["iterate"], ["compare", "--json"]

POINTS = [
    Point("mid-baseline, CLI killed while iter_0 trains", "introspect", BASELINE, "baseline",
          fault="train:iter_0", slow_jobs=True),
    Point("mid-baseline, iter_0's job killed", "introspect", BASELINE, "baseline", job_arm="iter_0", first_rc=1,
          recover=[["baseline", "--restart"]]),  # the tool: --resume is not possible (no checkpoint below the end)
    Point("baseline between eval_summary.json and its metrics row", "introspect", BASELINE, "baseline",
          fault="eval-recorded:iter_0"),
    Point("between the dataset gate and packaging", "iterate:package", ITERATE, "iterate", fault="gate-to-package"),
    Point("iterate: CLI killed right after starting the generator", "iterate:generate", ITERATE, "iterate",
          fault="generator-running"),
    Point("iterate: CLI killed while the generator and its children run", "iterate:generate", ITERATE, "iterate",
          generator_iter="iter_1"),
    Point("mid-install (installed, not verified)", "iterate:package", ITERATE, "iterate", fault="install"),
    Point("mid-stage (1 of 4 checkpoint trees staged)", "iterate:stage + train", ITERATE, "iterate", fault="stage"),
    Point("mid-train of iter_1, CLI killed", "iterate:stage + train", ITERATE, "iterate",
          fault="train:iter_1", slow_jobs=True),
    Point("mid-train of iter_1, job killed", "iterate:stage + train", ITERATE, "iterate", job_arm="iter_1",
          first_rc=1, recover=[["iterate", "--resume"]]),
    Point("iter_1 between eval_summary.json and its metrics row", "iterate:stage + train", ITERATE, "iterate",
          fault="eval-recorded:iter_1"),
    Point("mid-record (scratchpad filled, record.json not)", "iterate:record", ITERATE, "iterate", fault="record"),
    Point("end of Phase 3 (scratchpad entry written, run.json status not)", "iterate:record", ITERATE, "iterate",
          fault="phase3-end"),
    Point("mid-Run B, its job killed", "compare:run_b", COMPARE, "final", job_arm="run_b_combined_from_base",
          first_rc=0, recover=[["compare", "--restart"]]),
    Point("mid-Run C, CLI killed", "compare:run_c", COMPARE, "final", fault="train:run_c_real_from_iter0",
          slow_jobs=True),
    Point("Runs A and B training at once (--parallel 2), CLI killed", "iterate", COMPARE, "final",
          fault="train:run_b_combined_from_base", slow_jobs=True),
    Point("mid metrics.json write (temp written, not renamed)", "compare:run_c", COMPARE, "final",
          fault="write:metrics.json"),
    Point("mid-finalize (run.json final, scratchpad not)", "compare", ["finalize", "--json", "--no-plot"], "final",
          fault="finalize"),
]


# ---------------------------------------------------------------- helpers


def fake_env(launch_log: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SELFIMPROVE_FAULT_AT", "FAKE_RL_"))}
    env.update({"SELFIMPROVE_RL_CMD": f"{sys.executable} {FAKE}", "FAKE_RL_STEP_S": "0.001",
                "FAKE_RL_LAUNCH_LOG": str(launch_log), **extra})
    return env


def selfimprove(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfimprove", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=REPO)


def launches(log: Path) -> Counter:
    """Launches per arm dir, from the fake engine's launch log (one line per launch)."""
    if not log.is_file():
        return Counter()
    return Counter(Path(re.search(r"--output-dir (\S+)", ln).group(1)).parent.name for ln in log.read_text().splitlines())


_VOLATILE = {"ts", "end_ts", "start_ts", "finished_ts", "introspected_at", "total_duration_s", "checkpoint",
             "checkpoint_rel", "eval_file", "run_dir", "plot", "notes", "timings_s", "phase3_start_ts", "seconds"}
_ABS_PATH = re.compile(r"(?<![\w.])/[\w.\-/]+")


def normalized(obj):
    """`obj` without times and absolute paths (a copied run dir still names the reference's paths)."""
    if isinstance(obj, dict):
        return {k: normalized(v) for k, v in obj.items() if k not in _VOLATILE}
    if isinstance(obj, list):
        return [normalized(v) for v in obj]
    if isinstance(obj, str):
        return _ABS_PATH.sub("<path>", obj)
    return obj


def outcome(run_dir: Path) -> dict:
    """What a phase leaves for the next one and for the user, comparable across run dirs."""
    def load(p: Path):
        return normalized(json.loads(p.read_text(encoding="utf-8")))

    run = load(run_dir / "run.json")
    text = (run_dir / "scratchpad.md").read_text(encoding="utf-8")
    final = text[text.find("## Final summary"):] if "## Final summary" in text else ""
    return {
        "run.json": {"status": run["status"], "reason": run["reason"], "seeds": run["seeds"],
                     "phase4_errors": [e["arm"] for e in run["phase4_errors"]]},
        # each arm once; the order is when each finished, which a recovered arm changes
        "metrics.json": sorted(load(run_dir / "metrics.json")["iters"], key=lambda r: r["arm"]),
        "eval summaries": {str(p.relative_to(run_dir)): load(p) for p in sorted(run_dir.glob("*/eval_summary.json"))},
        "records": {str(p.relative_to(run_dir)): load(p) for p in sorted(run_dir.glob("iter_*/record.json"))},
        "scratchpad headings": [re.sub(r" — .*$", "", ln) for ln in text.splitlines() if ln.startswith("## ")],
        "final summary table": [re.sub(r"`[^`]*`", "`<checkpoint>`", ln) for ln in final.splitlines() if ln.startswith("| ")],
    }


def summary_of(result: dict) -> dict:
    """finalize's summary as a user reads it: every figure, test and verdict."""
    keep = ("status", "reason", "seeds", "rows", "best", "recommended", "recommendation", "seeds_measured",
            "seed_tests", "comparisons", "caveat", "seed_caveat", "phase4_errors")
    return normalized({k: result.get(k) for k in keep})


def half_written(run_dir: Path) -> list[str]:
    """Files an interrupted write left behind: unparseable JSON/JSONL, atomic-write temps, staging dirs."""
    bad = []
    for p in sorted(run_dir.rglob("*")):
        rel = str(p.relative_to(run_dir))
        if ".failed-" in rel:  # a prime_out moved aside by --restart: kept on purpose, as evidence
            continue
        if p.name.endswith((".tmp", ".staging")):
            bad.append(f"{rel}: leftover of an interrupted write")
        elif p.is_file() and p.suffix == ".json":
            try:
                json.loads(p.read_text(encoding="utf-8"))
            except ValueError:
                bad.append(f"{rel}: not valid JSON")
        elif p.is_file() and p.suffix == ".jsonl":
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                try:
                    json.loads(line)
                except ValueError:
                    bad.append(f"{rel}: line {i} is not JSON")
                    break
    return bad


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def kill_cli_while_generating(iter_dir: Path, cli: subprocess.Popen, timeout: float = 300) -> list[int]:
    """SIGKILL the CLI once its generator has started its children; the generator's and children's pids."""
    pids = iter_dir / "gen_pids.txt"
    deadline = time.time() + timeout
    while not pids.is_file():
        assert cli.poll() is None, f"the CLI ended (rc {cli.returncode}) before {iter_dir.name}'s generator ran"
        assert time.time() < deadline, f"{iter_dir.name}'s generator never started"
        time.sleep(0.01)
    os.kill(cli.pid, signal.SIGKILL)
    return [int(p) for p in pids.read_text().split()]


def kill_job_when_training(arm_dir: Path, cli: subprocess.Popen, timeout: float = 300) -> None:
    """SIGKILL the arm's training job (its whole process group) once it has written a new rollouts step."""
    rollouts = arm_dir / "prime_out" / "run_default" / "rollouts"
    deadline = time.time() + timeout
    while True:
        assert cli.poll() is None, f"the CLI ended (rc {cli.returncode}) before {arm_dir.name}'s job trained"
        assert time.time() < deadline, f"{arm_dir.name}'s job never started"
        if (arm_dir / "job.json").is_file() and rollouts.is_dir() and any(rollouts.glob("step_*")):
            os.killpg(json.loads((arm_dir / "job.json").read_text())["pgid"], signal.SIGKILL)
            return
        time.sleep(0.01)


# ---------------------------------------------------------------- the reference run


@dataclass
class Reference:
    snapshots: dict[str, Path]  # snapshot name -> a frozen copy of the run dir at that moment
    summary: dict  # finalize's summary
    launches: Counter


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """One undisturbed run, snapshot before every step of iterate and every arm of compare.

    Phases 0-2 go through the CLI; iterate and compare run in this process so that their
    on_step / on_arm callbacks can take the snapshots (a copy, the run itself is untouched)."""
    root = tmp_path_factory.mktemp("fault_reference")
    log = root / "launches.log"
    env = fake_env(log)
    boot = selfimprove("bootstrap", "selfimprove-arith", "--runs-dir", str(root / "runs"), *SETTINGS, "--json", env=env)
    assert boot.returncode == 0, boot.stderr
    run_dir = Path(json.loads(boot.stdout)["run_dir"])
    snaps: dict[str, Path] = {}

    def snapshot(name: str) -> None:
        snaps[name] = root / "snapshots" / re.sub(r"\W+", "_", name) / run_dir.name
        shutil.copytree(run_dir, snaps[name], symlinks=True)

    for phase in ("introspect", "baseline"):
        proc = selfimprove(phase, "--run-dir", str(run_dir), env=env)
        assert proc.returncode == 0, proc.stderr
        snapshot(phase)

    saved = dict(os.environ)
    os.environ.update(env)  # the fake engine for the in-process phases
    try:
        rd = RunDir(run_dir)
        with pytest.raises(TeacherActionNeeded):
            iterate(rd, quiet=True)
        sys.path.insert(0, str(TESTS))
        from loop_helpers import write_teacher_files

        write_teacher_files(rd.iter(1).dir)
        assert iterate(rd, quiet=True, on_step=lambda n, step: snapshot(f"iterate:{step}")).kind == "ended"
        snapshot("iterate")
        # One arm at a time here: a snapshot at an arm's start must not catch another arm mid-training
        # (the points' re-runs use the default, two arms at once on the CPU engine).
        compare(rd, quiet=True, parallel=1,
                on_arm=lambda key, event: snapshot(f"compare:{key}") if event == "start" else None)
        snapshot("compare")
        summary = summary_of(finalize(rd, plot=False))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    snaps["final"] = run_dir
    return Reference(snapshots=snaps, summary=summary, launches=launches(log))


# ---------------------------------------------------------------- the test


def _param(p: Point):
    marks = [pytest.mark.xfail(strict=True, reason=p.known)] if p.known else []
    return pytest.param(p, id=p.name, marks=marks)


@pytest.mark.parametrize("point", [_param(p) for p in POINTS])
def test_kill_at_point_then_rerun_ends_like_the_undisturbed_run(point: Point, reference: Reference,
                                                                  tmp_path: Path) -> None:
    """A kill -9 at this point, the tool's recovery and a re-run: the reference's outcome, nothing lost or doubled."""
    run_dir = tmp_path / reference.snapshots[point.start].name
    shutil.copytree(reference.snapshots[point.start], run_dir, symlinks=True)
    log = tmp_path / "launches.log"
    extra = {"FAKE_RL_EVAL_DELAY": "2"} if point.slow_jobs else {}
    if point.job_arm:
        extra["FAKE_RL_STEP_S"] = "0.3"  # time to see the job train and kill it
    cmd = [sys.executable, "-m", "selfimprove", *point.command, "--run-dir", str(run_dir)]
    if point.generator_iter:
        gen = run_dir / point.generator_iter / "gen_dataset.py"
        gen.write_text(GENERATOR_WITH_CHILDREN + gen.read_text())

    armed = fake_env(log, **extra, **({"SELFIMPROVE_FAULT_AT": point.fault} if point.fault else {}))
    cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=armed, cwd=REPO)
    if point.job_arm:
        kill_job_when_training(run_dir / point.job_arm, cli)
    generator_pids = kill_cli_while_generating(run_dir / point.generator_iter, cli) if point.generator_iter else []
    _, err = cli.communicate(timeout=600)
    assert cli.returncode == point.first_rc, f"{point.what}: exit {cli.returncode}, expected {point.first_rc}: {err[-1500:]}"
    deadline = time.time() + 10  # the generator and all it started die with the CLI, before any re-run
    while any(_running(p) for p in generator_pids) and time.time() < deadline:
        time.sleep(0.05)
    assert [p for p in generator_pids if _running(p)] == [], "generator processes outlived the killed CLI"

    env = fake_env(log, **extra)
    for rec in point.recover:
        proc = selfimprove(*rec, "--run-dir", str(run_dir), env=env)
        assert proc.returncode == 0, f"recovery `{' '.join(rec)}`: exit {proc.returncode}: {proc.stderr[-1500:]}"
    rerun = selfimprove(*point.command, "--run-dir", str(run_dir), env=env)
    assert rerun.returncode == 0, f"re-run: exit {rerun.returncode}: {rerun.stderr[-1500:]}"
    if point.end == "final":
        if point.command[0] not in ("finalize", "run"):
            rerun = selfimprove("finalize", "--run-dir", str(run_dir), "--json", "--no-plot", env=env)
            assert rerun.returncode == 0, rerun.stderr[-1500:]
        assert summary_of(json.loads(rerun.stdout)) == reference.summary

    assert outcome(run_dir) == outcome(reference.snapshots[point.end])
    assert half_written(run_dir) == []
    counts = launches(log)
    twice = {arm: n for arm, n in counts.items() if n > (2 if arm == point.job_arm else 1)}
    assert twice == {}, f"launched more than once: {twice}"
    if point.job_arm:
        assert counts[point.job_arm] == 2, "the killed job is launched again exactly once, by its recovery"
