"""Round 3 (issue 24), area "state": a closed run, the learning-signal stop, --seeds bounds, damaged
state files and races. Loaded by bench/hostile.py; select with `-k "r3 state:"`.

Cases on a finished run use a synthetic one (tests/test_finalize_seeds.make_run: run.json, metrics.json
and eval summaries, no training), the others copies of hostile.py's templates."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from hostile import SMALL, case, cli, copy_run, damaged, edit_json


def finished_run(tmp: Path, seeds: int = 1, edit=None, finalized: bool = False) -> Path:
    """A synthetic run after compare (best_iter.json): finalize has everything it needs."""
    from test_finalize_seeds import make_run  # tests/ is on sys.path while a case is set up

    arms = {"iter_0": [0.50], "iter_1": [0.56] * seeds, "run_a": [0.60] * seeds, "run_b": [0.52],
            "run_c": [0.51] * seeds}
    rd = make_run(tmp, arms)
    rd.best_iter_json.write_text(json.dumps({"best_iter": 1}), encoding="utf-8")
    if edit is not None:
        data = json.loads(rd.metrics_json.read_text())
        edit(data["iters"])
        rd.metrics_json.write_text(json.dumps(data))
    if finalized:
        p = cli(["finalize", "--run-dir", str(rd.root), "--no-plot"], tmp)
        assert p.returncode == 0, p.stderr
    return rd.root


@case("r3 state: finalize on a finalized run", ("already finalized", "scratchpad.md"), code=5)
def _(tmp, t):
    run = finished_run(tmp, finalized=True)
    return ["finalize", "--run-dir", str(run)], run


@case("r3 state: finalize --no-plot (writes no plot)", bad=False)
def _(tmp, t):
    run = finished_run(tmp)
    return ["finalize", "--run-dir", str(run), "--no-plot"], run


@case("r3 state: compare --seeds 3 stopped on a closed run, finalize", ("compare", "--seeds 3"), code=6)
def _(tmp, t):
    run = finished_run(tmp, finalized=True)
    edit_json(seeds=3)(run / "run.json")  # what compare --seeds 3 records before its first arm
    return ["finalize", "--run-dir", str(run), "--no-plot"], run


@case("r3 state: finalize, metrics.json eval_acc NaN", ("metrics.json", "eval_acc"), code=1)
def _(tmp, t):
    return ["finalize", "--run-dir", str(finished_run(tmp, edit=lambda rows: rows[2].update(eval_acc=float("nan")))),
            "--no-plot"], tmp / "run"


@case("r3 state: finalize, metrics.json run_c row duplicated", ("metrics.json", "run_c"), code=1)
def _(tmp, t):
    def dup(rows):
        rows.append({**rows[-1], "eval_acc": 0.9})
    return ["finalize", "--run-dir", str(finished_run(tmp, edit=dup)), "--no-plot"], tmp / "run"


@case("r3 state: finalize, 100 000 seeds in run.json", ("run.json", "seeds"), code=1)
def _(tmp, t):
    run = finished_run(tmp)
    edit_json(seeds=100000)(run / "run.json")
    return ["finalize", "--run-dir", str(run), "--no-plot"], run


damaged("r3 state: status, run.json seeds 100000", "status", "run.json", edit_json(seeds=100000),
        ("run.json", "seeds"), code=1, template="stop1")
damaged("r3 state: status, phase3_start_ts in the future", "status", "run.json",
        edit_json(phase3_start_ts=time.time() + 70 * 365 * 86400), ("run.json", "phase3_start_ts"), code=1,
        template="stop1")


def lock_dir(p: Path) -> None:
    if p.exists():
        p.unlink()
    p.mkdir()


damaged("r3 state: iterate, .lock is a directory", "iterate", ".lock", lock_dir, ".lock", code=1, template="stop1")
damaged("r3 state: baseline before introspect", "baseline", "run.json", lambda p: None, "introspect", code=5)


for flag, value in (("--seeds", "100000"), ("--seeds", str(10**30)), ("--seeds", "0"), ("--parallel", "1000")):
    @case(f"r3 state: compare {flag} {value[:12]}", flag, code=2)
    def _(tmp, t, flag=flag, value=value):
        run = copy_run(t.stop1, tmp)
        return ["compare", "--run-dir", str(run), flag, value], run

@case("r3 state: run <dataset> --seeds 100000 (no run dir made)", "--seeds", code=2)
def _(tmp, t):
    (tmp / "runs").mkdir()
    return ["run", "selfimprove-arith", "--runs-dir", str(tmp / "runs"), *SMALL, "--seeds", "100000"], tmp / "runs"


@case("r3 state: run --run-dir --seeds 10^30", "--seeds", code=2)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    return ["run", "--run-dir", str(run), "--seeds", str(10**30)], run


@case("r3 state: status, run dir in a symlink loop", ("symlink", "--run-dir"), code=1)
def _(tmp, t):
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return ["status", "--run-dir", str(tmp / "a")], None


@case("r3 state: bootstrap while its run dir names are taken", ("already exists", "wait a second"), code=2)
def _(tmp, t):
    runs = tmp / "runs"
    now = time.time()
    for dt in range(0, 6):  # the names the bootstrap may pick in the next seconds, taken by other bootstraps
        stamp = time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime(now + dt))
        (runs / f"selfimprove-arith-{stamp}").mkdir(parents=True)
    return ["bootstrap", "selfimprove-arith", "--runs-dir", str(runs), *SMALL], runs


def closed_copy(tmp: Path, t) -> Path:
    """The stop1 template (iter_0 trained by the fake engine), closed as finalize closes a run."""
    run = copy_run(t.stop1, tmp)
    edit_json(status="finalized", end_reason="max_iters_reached", end_ts=time.time())(run / "run.json")
    return run


@case("r3 state: iterate on a finalized run", ("closed", "--init-from"), code=5)
def _(tmp, t):
    run = closed_copy(tmp, t)
    return ["iterate", "--run-dir", str(run)], run


for suffix in ("", "/iter_0"):
    @case(f"r3 state: follow the advice, baseline --init-from <run dir>{suffix}", bad=False)
    def _(tmp, t, suffix=suffix):
        prior = closed_copy(tmp, t)
        runs = tmp / "runs"
        p = cli(["bootstrap", "selfimprove-arith", "--runs-dir", str(runs), *SMALL, "--init-from", f"{prior}{suffix}"], tmp)
        assert p.returncode == 0, p.stderr
        new = Path(p.stdout.strip().splitlines()[-1])
        p = cli(["introspect", "--run-dir", str(new)], tmp)
        assert p.returncode == 0, p.stderr
        return ["baseline", "--run-dir", str(new)], new


def no_signal_copy(tmp: Path, t) -> Path:
    """A copy of the run stopped at iter_1's teacher stop, as baseline's no-signal stop leaves it."""
    run = copy_run(t.stop1, tmp)
    for d in sorted(run.glob("iter_[1-9]*")):
        os.rename(d, tmp / f"aside-{d.name}")
    edit_json(learning_signal={"has_signal": False, "verdict": "no signal", "allowed": False,
                               "train_groups": 8, "train_groups_with_spread": 0})(run / "run.json")
    return run


@case("r3 state: iterate after baseline's no-signal stop", ("--allow-no-signal",), code=4)
def _(tmp, t):
    run = no_signal_copy(tmp, t)
    return ["iterate", "--run-dir", str(run)], run
