"""Advice followed (issue 41, left over from round 4): phases/order.py's "run X first", the overrides gate's
lines, and the gates' "re-run iterate". Each command a line prints is run as printed, and then the refusal it
answered is gone. (The dataset gate's stop under `run` is followed in tests/test_run_gate_stop.py.)"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from selfimprove.errors import GateFailed, PhaseOrderError, SelfImproveError
from selfimprove.phases.context import RunContext
from selfimprove.phases.order import require_phase_order
from selfimprove.phases.overrides import read_overrides
from selfimprove.rundir import RunDir

from loop_helpers import write_teacher_files

sys.path.insert(0, str(Path(__file__).parent))
from test_overrides_ranges import CANONICAL, SEED, TINY  # noqa: E402


def commands(text: str) -> list[list[str]]:
    """Every `selfimprove ...` command a line names, as argv after `selfimprove`."""
    return [shlex.split(c)[1:] for c in re.findall(r"`(selfimprove [^`]+)`", " ".join(text.split()))]


def refusal(rd: RunDir, phase: str) -> str | None:
    try:
        require_phase_order(RunContext.load(rd), phase)
    except PhaseOrderError as e:
        return str(e)
    return None


def test_run_x_first_names_a_command_that_clears_the_refusal(new_run, cli) -> None:
    """A fresh run: each phase that needs introspect names it; running it as printed (once: it takes a
    minute) moves the run on, and what is still missing is then the next phase the line names (baseline),
    never the same refusal."""
    rd = RunDir(new_run())
    phases = ("baseline", "iterate", "compare", "finalize")
    named = {}
    for phase in phases:
        res = cli(phase, "--run-dir", rd.root)
        assert res.exit_code == 5, res.stderr
        named[phase] = commands(res.stderr)
        assert named[phase] and named[phase][0] == ["introspect", "--run-dir", str(rd.root)], res.stderr
    assert cli(*named["baseline"][0]).exit_code == 0  # the advice, as printed (the same for all four)
    assert refusal(rd, "baseline") is None
    for phase in phases[1:]:  # iter_0 is the next thing: the line says baseline now
        after = refusal(rd, phase)
        assert after and [c[0] for c in commands(after)] == ["baseline"], after


def test_compare_while_running_names_iterate_which_ends_phase_3(run: RunDir, cli) -> None:
    """'re-run `selfimprove iterate` until the budget or max_iters gate fires': on a run whose max_iters is
    reached (1: iter_0 only), one iterate ends Phase 3 and compare may run."""
    cfg = json.loads(run.run_json.read_text())
    cfg["max_iters"] = 1
    run.run_json.write_text(json.dumps(cfg))
    res = cli("compare", "--run-dir", run.root)
    named = commands(res.stderr)
    assert res.exit_code == 5 and named and named[0][0] == "iterate", res.stderr
    assert cli(*named[0]).exit_code == 0
    assert refusal(run, "compare") is None


def _num(pattern: str, message: str) -> int:
    return int(re.search(pattern, message).group(1))


@pytest.mark.parametrize("body, fixed", [
    ("seq_len = 300\n", lambda m: "seq_len = %d\n" % _num(r"allowed: 1 to (\d+)", m)),
    ("seq_len = 100\n", lambda m: "seq_len = %d\n" % (_num(r"above (\d+)", m) + 1)),
    ("seq_len = 100\n", lambda m: "seq_len = 100\n[orchestrator.train.sampling]\nmax_completion_tokens = 50\n"),  # "or lower"
    ("[orchestrator.train.sampling]\nmax_completion_tokens = 256\n",
     lambda m: "[orchestrator.train.sampling]\nmax_completion_tokens = %d\n" % _num(r"1 to (\d+)", m)),
    ("max_steps = 5\n", lambda m: "%s = 200\n" % re.search(r"allowed: [^,]*, [^,]*, ([a-z_]+)", m).group(1)),  # an allowed key
    ("[trainer.optim]\nlr = 5.0\n", lambda m: "[trainer.optim]\nlr = 1\n"),  # "<= 1"
])
def test_an_overrides_line_followed_passes_the_gate(tmp_path: Path, body: str, fixed) -> None:
    f = tmp_path / "overrides.toml"
    f.write_text(body)
    with pytest.raises(GateFailed) as e:
        read_overrides(f, SEED, model=TINY, canonical=CANONICAL)
    f.write_text(fixed(str(e.value)))
    read_overrides(f, SEED, model=TINY, canonical=CANONICAL)


def test_fix_or_delete_overrides_and_re_run_iterate(run: RunDir, cli, monkeypatch) -> None:
    """iterate's overrides gate: 'fix or delete PATH' (exit 4); deleting it and re-running iterate gets past
    that gate (the run stops at the report gate here: what follows is not this advice's)."""
    with pytest.raises(SelfImproveError):
        from selfimprove.phases.iterate import iterate
        iterate(run, quiet=True)
    it = run.iter(1)
    write_teacher_files(it.dir)
    (it.dir / "overrides.toml").write_text("[[[ x\n")
    res = cli("iterate", "--run-dir", run.root)
    assert res.exit_code == 4 and f"fix or delete {it.dir / 'overrides.toml'}" in " ".join(res.stderr.split()), res.stderr

    def past_the_overrides_gate(*a, **k):
        raise SelfImproveError("test: at the report gate")
    monkeypatch.setattr("selfimprove.phases.iteration_steps.report_gate", past_the_overrides_gate)
    (it.dir / "overrides.toml").unlink()  # the advice
    res = cli("iterate", "--run-dir", run.root)
    assert "test: at the report gate" in res.stderr, res.stderr


def test_the_report_gate_line_followed_passes(run: RunDir, cli, monkeypatch) -> None:
    """'the report gate failed; fix these and re-run iterate': the teacher's placeholders left in the
    scratchpad are listed; filled, the re-run iterate passes the report gate (and stops before generating)."""
    from selfimprove.phases.iterate import iterate
    with pytest.raises(SelfImproveError):
        iterate(run, quiet=True)
    it = run.iter(1)
    write_teacher_files(it.dir, notes=False)
    res = cli("iterate", "--run-dir", run.root)
    err = " ".join(res.stderr.split())
    assert res.exit_code == 4 and "fix these and re-run iterate" in err and "scratchpad_placeholder" in err, err

    def at_generate(*a, **k):
        raise SelfImproveError("test: past the report gate")
    monkeypatch.setattr("selfimprove.phases.iteration_steps.generate", at_generate)
    write_teacher_files(it.dir)  # the fix: the sections written
    res = cli("iterate", "--run-dir", run.root)
    assert "test: past the report gate" in res.stderr, res.stderr
