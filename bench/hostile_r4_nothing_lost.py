"""Round 4 (issue 36), "nothing lost": a closed run is never rewritten, every piece of advice leads
somewhere, rows that cannot fit the student fail at the gate. Loaded by bench/hostile.py; select with
`-k "r4:"`.

Cases on a finished run use a synthetic one (hostile_r3_state.finished_run: run.json, metrics.json and
eval summaries, no training); the others copies of hostile.py's templates. A case whose setup follows a
piece of advice asserts what the advice promised before the runner runs the last command."""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import time
from pathlib import Path

from hostile import ENV, SMALL, TESTS, case, cli, copy_run, edit_json, teacher_case
from hostile_r3_state import closed_copy, finished_run, no_signal_copy

P = "r4: "
SKILL_DIR = Path(".claude") / "skills" / "synthetic-self-improve-rl"
V1_ONLY = TESTS / "envs" / "v1_only_sums"
REVERSE = TESTS / "envs" / "si_no_eval_reverse"


# ---------------------------------------------------------------- 1. a finalized run is closed


for label, flags in (("--seeds 1 after 2 seeds", ["--seeds", "1"]), ("--no-control", ["--no-control"]),
                     ("with nothing to train", []), ("--seeds 2 (all trained)", ["--seeds", "2"])):
    @case(f"{P}compare {label} on a finalized run", ("closed", "--seeds 3"), code=5)
    def _(tmp, t, flags=flags):
        run = finished_run(tmp, seeds=2, finalized=True)
        return ["compare", "--run-dir", str(run), *flags], run


@case(f"{P}compare --seeds 1 on an open run that trained 2", "--seeds", code=2)
def _(tmp, t):
    run = finished_run(tmp, seeds=2)
    return ["compare", "--run-dir", str(run), "--seeds", "1"], run


@case(f"{P}follow finalize's advice on a finalized run: compare --seeds 3 trains", bad=False, ok_codes=(0, 1))
def _(tmp, t):
    """The advice names `compare --seeds 3`; that compare is let through (it reopens the run and trains: on a
    synthetic run with no real iterations its first arm then fails, exit 1, which is not a refusal)."""
    run = finished_run(tmp, seeds=1, finalized=True)
    p = cli(["finalize", "--run-dir", str(run)], tmp)
    assert p.returncode == 5 and f"compare --run-dir {run} --seeds 3" in " ".join(p.stderr.split()), p.stderr
    return ["compare", "--run-dir", str(run), "--seeds", "3", "--parallel", "1"], run


# ---------------------------------------------------------------- 2. one summary at a time


@case(f"{P}finalize after more seeds: the partial summary replaces the final one", ("compare", "--seeds 3"),
      code=6, may_change=True)
def _(tmp, t):
    run = finished_run(tmp, finalized=True)
    edit_json(seeds=3)(run / "run.json")
    return ["finalize", "--run-dir", str(run), "--no-plot"], run


@case(f"{P}finalize twice after more seeds: still one summary", ("compare", "--seeds 3"), code=6, may_change=True)
def _(tmp, t):
    run = finished_run(tmp, finalized=True)
    edit_json(seeds=3)(run / "run.json")
    p = cli(["finalize", "--run-dir", str(run), "--no-plot"], tmp)
    assert p.returncode == 6, p.stderr
    pad = (run / "scratchpad.md").read_text()
    assert "## Final summary" not in pad and pad.count("## Partial summary") == 1, pad
    return ["finalize", "--run-dir", str(run), "--no-plot"], run


# ---------------------------------------------------------------- 3. a copied run dir is not a moved one


@case(f"{P}iterate on a copy while the original's job trains", ("copy", "--restart"), code=1)
def _(tmp, t):
    """The original (watched: it must not change) and a copy whose iter_1 job.json is the original's live job."""
    from selfimprove.engines import procs
    from selfimprove.engines.jobs import JobExpectation, JobRecord, write_job
    from selfimprove.rundir import RunDir
    from loop_helpers import write_teacher_files

    orig = copy_run(t.stop1, tmp)
    (tmp / "copies").mkdir()
    copy = copy_run(orig, tmp / "copies")
    write_teacher_files(orig / "iter_1")
    write_teacher_files(copy / "iter_1")
    token = procs.new_token()  # the original's job was started by the tool: it carries its record's token
    # still training when the case's iterate reaches it, however slow the machine; killed when the bench ends
    job = subprocess.Popen(["sleep", "1800"], start_new_session=True, env=procs.token_env(token))
    atexit.register(lambda: (job.kill(), job.wait()))
    arm = RunDir(copy).iter(1)
    out = RunDir(orig).iter(1).prime_out
    out.mkdir(parents=True)
    (out / "progress.txt").write_text("the original's output\n")
    write_job(arm, JobRecord(pid=job.pid, pgid=job.pid, proc_start=procs.start_time(job.pid), token=token,
                             cmd=["rl", "--output-dir", str(out)], cwd=str(orig), host=socket.gethostname(),
                             start_ts=time.time(), log=str(arm.train_log),
                             expect=JobExpectation(max_steps=8, num_examples=20).for_arm(arm)))
    return ["iterate", "--run-dir", str(copy)], orig


# ---------------------------------------------------------------- 4. advice that works: the skill


@case(f"{P}skill uninstall: the skill's dir is a file", ("move it aside",), code=1)
def _(tmp, t):
    (tmp / SKILL_DIR).parent.mkdir(parents=True)
    (tmp / SKILL_DIR).write_text("not a dir\n")
    return ["skill", "uninstall", "--project", str(tmp)], tmp


@case(f"{P}skill install: the skill's dir is a file", ("move it aside",), code=1)
def _(tmp, t):
    (tmp / SKILL_DIR).parent.mkdir(parents=True)
    (tmp / SKILL_DIR).write_text("not a dir\n")
    return ["skill", "install", "--project", str(tmp)], tmp


@case(f"{P}follow the advice: skill uninstall after moving the file aside", bad=False)
def _(tmp, t):
    (tmp / SKILL_DIR).parent.mkdir(parents=True)
    (tmp / SKILL_DIR).write_text("not a dir\n")
    p = cli(["skill", "uninstall", "--project", str(tmp)], tmp)
    assert p.returncode == 1 and "move it aside" in p.stderr, p.stderr
    (tmp / SKILL_DIR).rename(tmp / "aside")
    return ["skill", "uninstall", "--project", str(tmp)], tmp


@case(f"{P}skill uninstall: skills/ read-only names it with chmod", ("chmod u+w",), code=1, as_user=True)
def _(tmp, t):
    proj = tmp / "proj"
    proj.mkdir()
    p = cli(["skill", "install", "--project", str(proj)], tmp)
    assert p.returncode == 0, p.stderr
    for q in [tmp, proj, *proj.rglob("*")]:
        os.chown(q, 65534, 65534, follow_symlinks=False)
    (proj / SKILL_DIR).parent.chmod(0o555)
    return ["skill", "uninstall", "--project", str(proj)], proj


# ---------------------------------------------------------------- 5. the env's API, however it is found


@case(f"{P}bootstrap --stack seed with a Taskset-only --env-path env", ("--stack",), code=2)
def _(tmp, t):
    (tmp / "runs").mkdir()
    return ["bootstrap", "v1-only-sums", "--env-path", str(V1_ONLY), "--stack", "seed", "--runs-dir",
            str(tmp / "runs"), "--model", "selfimprove/tiny-arith"], tmp / "runs"


# ---------------------------------------------------------------- 6. rows that cannot fit the student


def _too_long(d: Path) -> None:
    from loop_helpers import write_teacher_files
    write_teacher_files(d, break_rules=("too_long",))


teacher_case(f"{P}iterate, two rows too long for the student", ("row_fits_student", "positions"), _too_long,
             code=4, may_change=True)


# ---------------------------------------------------------------- 7. a fixed generator launches afresh


@case(f"{P}iterate after the generator was fixed (stale launch failure)", bad=False)
def _(tmp, t):
    from loop_helpers import write_teacher_files

    run = copy_run(t.stop1, tmp)
    write_teacher_files(run / "iter_1")
    p = cli(["iterate", "--run-dir", str(run)], tmp, env={**ENV, "FAKE_RL_DIE_AT_ONCE": "1", "HOME": str(tmp)})
    assert p.returncode == 1, p.stderr
    s = json.loads(cli(["status", "--run-dir", str(run), "--json"], tmp).stdout)
    assert "iter_1's training job failed" in s["next"], s["next"]
    write_teacher_files(run / "iter_1", break_rules=("reverse",))  # the teacher's fix
    return ["iterate", "--run-dir", str(run)], run


# ---------------------------------------------------------------- 8. exit 5 with a way out; records; wording


@case(f"{P}compare after the no-signal stop", ("--allow-no-signal",), code=5)
def _(tmp, t):
    run = no_signal_copy(tmp, t)
    return ["compare", "--run-dir", str(run)], run


@case(f"{P}introspect on a finalized run", ("run.json", "bootstrap"), code=5)
def _(tmp, t):
    run = closed_copy(tmp, t)
    return ["introspect", "--run-dir", str(run)], run


@case(f"{P}note --compact-failed on a finalized run", ("run.json", "closed"), code=5)
def _(tmp, t):
    run = closed_copy(tmp, t)
    return ["note", "--run-dir", str(run), "--compact-failed", "timed out"], run


@case(f"{P}iterate on a finalized run: --init-from starts from iter_0", ("iter_0 checkpoint",), code=5)
def _(tmp, t):
    run = closed_copy(tmp, t)
    return ["iterate", "--run-dir", str(run)], run


@case(f"{P}introspect again after a failed --env-path introspect", bad=False)
def _(tmp, t):
    """The first introspect installs the --env-path project, then fails on bad --env-args: run.json keeps
    env_path, so the next introspect (good args, no --env-path) installs from it again."""
    p = cli(["bootstrap", "si-no-eval-reverse", "--runs-dir", str(tmp / "runs"), *SMALL], tmp)
    assert p.returncode == 0, p.stderr
    run = Path(p.stdout.strip().splitlines()[-1])
    p = cli(["introspect", "--run-dir", str(run), "--env-path", str(REVERSE), "--env-args", '{"num_train": "x"}'], tmp)
    assert p.returncode != 0
    assert json.loads((run / "run.json").read_text())["env_path"] == str(REVERSE.resolve())
    return ["introspect", "--run-dir", str(run), "--env-args", "{}"], run

