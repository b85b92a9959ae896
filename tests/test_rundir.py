"""The run directory's guarantees: atomic writes survive a kill or a failed rename,
the per-run lock excludes a second process (naming its pid) and is taken over from
a dead one, metrics records are idempotent, and readers refuse bad files."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from selfimprove import rundir as rundir_mod
from selfimprove.errors import RunDirError, RunDirLocked
from selfimprove.models import IterRecord, Metrics, RunConfig
from selfimprove.rundir import RunDir, atomic_write_json, atomic_write_text, read_model, sorted_steps, write_model

PAD = 400_000  # big enough that a write takes a while


def spawn(code: str, *args: str) -> subprocess.Popen:
    """A python child that prints 'ready' once it is in position."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline().strip()
    assert line == "ready", proc.stderr.read() if proc.poll() is not None else line
    return proc


# ---------------------------------------------------------------- atomic writes


def test_atomic_write_survives_sigkill_mid_write(tmp_path):
    """A writer killed at random moments never leaves a partial file: old or new content, complete."""
    target = tmp_path / "metrics.json"
    atomic_write_json(target, {"n": -1, "pad": "o" * PAD})
    writer = """
        import sys
        from pathlib import Path
        from selfimprove.rundir import atomic_write_json
        target = Path(sys.argv[1])
        print("ready", flush=True)
        i = 0
        while True:
            atomic_write_json(target, {"n": i, "pad": "x" * %d})
            i += 1
    """ % PAD
    rng = random.Random(7)
    seen = set()
    for _ in range(6):
        proc = spawn(writer, str(target))
        time.sleep(rng.uniform(0.02, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        data = json.loads(target.read_text())  # must parse: never torn
        assert len(data["pad"]) == PAD
        seen.add(data["n"])
        # A SIGKILL can't run cleanup: only hidden temp files may remain, never a torn target.
        for p in tmp_path.iterdir():
            assert p == target or (p.name.startswith(".metrics.json.") and p.name.endswith(".tmp"))
    assert seen != {-1}  # the writer did replace the file at least once


def test_failed_rename_keeps_old_content_and_no_litter(tmp_path, monkeypatch):
    """If the rename fails, the old file is intact and the temp file is removed."""
    target = tmp_path / "run.json"
    atomic_write_text(target, "old\n")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rundir_mod.os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new\n")
    with pytest.raises(OSError):
        write_model(target, Metrics())
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_failed_write_keeps_old_content_and_no_litter(tmp_path, monkeypatch):
    """A failure while writing the temp file (e.g. fsync) leaves the old file and no temp file."""
    target = tmp_path / "metrics.json"
    write_model(target, Metrics())

    def boom(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(rundir_mod.os, "fsync", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "{}")
    assert read_model(target, Metrics).iters == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_atomic_write_gives_the_usual_file_mode(tmp_path):
    """Run files get the mode open() would give (umask), not mkstemp's private 0600."""
    umask = os.umask(0o022)
    os.umask(umask)
    target = tmp_path / "run.json"
    atomic_write_text(target, "{}")
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


# ---------------------------------------------------------------- the lock

HOLDER = """
    import sys, time
    from selfimprove.rundir import RunDir
    with RunDir(sys.argv[1]).lock("holder-test"):
        print("ready", flush=True)
        time.sleep(120)
"""


def test_second_process_is_refused_with_the_holders_pid(cli, new_run):
    """While another process holds the lock, a command exits 75 naming the holder's pid and command."""
    run_dir = new_run()
    holder = spawn(HOLDER, str(run_dir))
    try:
        res = cli("introspect", "--run-dir", run_dir)
        assert res.exit_code == RunDirLocked.exit_code == 75
        assert f"pid {holder.pid}" in res.stderr and "holder-test" in res.stderr
        assert not (run_dir / "hub_env.json").exists()
        with pytest.raises(RunDirLocked, match=f"pid {holder.pid}"):
            with RunDir(run_dir).lock("second"):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_a_dead_process_is_taken_over(new_run):
    """A holder killed with SIGKILL leaves its pid in .lock; the next command takes the lock over."""
    run_dir = new_run()
    holder = spawn(HOLDER, str(run_dir))
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert json.loads((run_dir / ".lock").read_text())["pid"] == holder.pid  # stale content
    with RunDir(run_dir).lock("taker"):
        info = json.loads((run_dir / ".lock").read_text())
        assert info["pid"] == os.getpid() and info["command"] == "taker"


def test_lock_is_released_after_the_phase(new_run):
    """The lock is released on exit, also when the phase raised."""
    rd = RunDir(new_run())
    with pytest.raises(ValueError):
        with rd.lock("first"):
            raise ValueError("phase failed")
    with rd.lock("second"):
        pass


def test_nested_lock_in_one_process_is_refused(new_run):
    """Two holders in one process are refused too (the lock is per open file, not per process)."""
    rd = RunDir(new_run())
    with rd.lock("outer"):
        with pytest.raises(RunDirLocked):
            with rd.lock("inner"):
                pass


# ---------------------------------------------------------------- typed files


def record(arm: str, acc: float) -> IterRecord:
    return IterRecord(arm=arm, eval_acc=acc, eval_reward_mean=acc, n_eval=200, acc_ci95=(acc - 0.05, acc + 0.05))


def test_record_arm_is_idempotent(new_run):
    """Recording an arm twice keeps one record (the latest); other arms keep their order."""
    rd = RunDir(new_run())
    rd.record_arm(record("iter_0", 0.30))
    rd.record_arm(record("iter_1", 0.35))
    rd.record_arm(record("iter_1", 0.35))
    assert [r.arm for r in rd.read_metrics().iters] == ["iter_0", "iter_1"]
    rd.record_arm(record("iter_0", 0.31))
    m = rd.read_metrics()
    assert [r.arm for r in m.iters] == ["iter_1", "iter_0"]
    assert m.get("iter_0").eval_acc == 0.31


def test_read_model_errors_name_file_and_field(tmp_path):
    """Missing file, bad JSON, bad field and newer schema are one-line RunDirErrors."""
    p = tmp_path / "run.json"
    with pytest.raises(RunDirError, match="file not found"):
        read_model(p, RunConfig)
    p.write_text("[1, 2")
    with pytest.raises(RunDirError, match="not valid JSON"):
        read_model(p, RunConfig)
    p.write_text(json.dumps({"iters": [{"arm": "iter_0"}]}))
    with pytest.raises(RunDirError, match=r"field 'iters\.0\.eval_acc'"):
        read_model(p, Metrics)
    p.write_text(json.dumps({"schema_version": 2, "iters": []}))
    with pytest.raises(RunDirError, match="newer"):
        read_model(p, Metrics)


def test_require_and_paths(tmp_path, new_run):
    """require() explains a missing dir or run.json; paths are fixed names under the root."""
    with pytest.raises(RunDirError, match="does not exist"):
        RunDir(tmp_path / "nope").require()
    with pytest.raises(RunDirError, match="run.json"):
        RunDir(tmp_path).require()
    rd = RunDir(new_run()).require()
    assert rd.hub_env_json.name == "hub_env.json" and rd.iter(3).dir.name == "iter_3"
    assert rd.iter(0).rollout_step(100) == rd.root / "iter_0" / "prime_out" / "run_default" / "rollouts" / "step_100"
    with pytest.raises(RunDirError, match="selfimprove introspect"):
        rd.read_hub_env()


def test_sorted_steps_is_numeric(tmp_path):
    """step_N dirs sort by number (step_10 after step_9), ignoring other names."""
    for name in ("step_9", "step_10", "step_100", "stepx", "other"):
        (tmp_path / name).mkdir()
    assert sorted_steps(tmp_path) == [9, 10, 100]
    assert sorted_steps(tmp_path / "missing") == []
