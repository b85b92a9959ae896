"""Round 3, area noeval (issue 24): envs without an eval split, and the completion budget the engine cuts.

The env is tests/envs/si_no_eval_reverse (reverse text, 30 train rows, no eval split), put on PYTHONPATH
for the setup and the case. Each setup bootstraps and introspects its own run (the real probe), then the
case runs `baseline` with the fake engine. What ends well: the evaluated rows are held out (exit 0), or
the run says in one line that its scores are in-sample (exit 0), or a damaged file is named in one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hostile import ENV, REPO, SMALL, case, cli, copy_run

ENV_DIR = REPO / "tests" / "envs" / "si_no_eval_reverse"
ON_PATH = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ENV_DIR), os.environ.get("PYTHONPATH")]))}
SMALL_NO_EVAL = [a if a != "20" else "5" for a in SMALL]  # --eval-examples 5 of the env's 30 train rows


def _introspected(tmp: Path, *extra: str) -> Path:
    """A bootstrapped and introspected run of the no-eval env (runs dir under tmp)."""
    env = {**ENV, "HOME": str(tmp), **ON_PATH}
    p = cli(["bootstrap", "reverse", "--hub-id", "si-no-eval-reverse", "--runs-dir", str(tmp / "runs"),
             *SMALL_NO_EVAL, *extra], tmp, env=env)
    assert p.returncode == 0, p.stderr
    run = Path(p.stdout.strip().splitlines()[-1])
    p = cli(["introspect", "--run-dir", str(run)], tmp, env=env)
    assert p.returncode == 0, p.stderr
    return run


def noeval_case(name: str, names=(), bad: bool = False, code: int | None = None, env: dict | None = None):
    def deco(fn):
        case(f"r3 noeval: {name}", names, bad=bad, code=code, env={**ON_PATH, **(env or {})}, may_change=True)(fn)
        return fn
    return deco


@noeval_case("baseline holds the evaluated train rows out of training")
def _(tmp, t):
    run = _introspected(tmp)
    return ["baseline", "--run-dir", str(run)], run


@noeval_case("baseline with --eval-examples = every train row says in-sample")
def _(tmp, t):
    run = _introspected(tmp, "--eval-examples", "30")
    return ["baseline", "--run-dir", str(run)], run


@noeval_case("baseline after a torn iter_0/heldout.json rebuilds the hold-out")
def _(tmp, t):
    run = _introspected(tmp)
    (run / "iter_0").mkdir(exist_ok=True)
    (run / "iter_0" / "heldout.json").write_text('{"held_out": 5, "in_sa')
    return ["baseline", "--run-dir", str(run)], run


@noeval_case("weaknesses --group-by, hub_env.json evaluated_example_ids not a list", names="hub_env.json", bad=True)
def _(tmp, t):
    run = copy_run(t.stop1, tmp)
    hub = json.loads((run / "hub_env.json").read_text())
    hub.update(eval_size=None, evaluated_example_ids="0-4")
    (run / "hub_env.json").write_text(json.dumps(hub))
    (tmp / "groups.py").write_text("def by_op(q):\n    return 'minus' if '-' in q else 'plus'\n")
    return ["weaknesses", "--run-dir", str(run), "--group-by", f"{tmp / 'groups.py'}:by_op"], run  # recomputes


@noeval_case("baseline when the engine cuts the eval completion budget", env={"FAKE_RL_EVAL_BUDGET": "43"})
def _(tmp, t):
    run = copy_run(t.boot, tmp)
    p = cli(["introspect", "--run-dir", str(run)], tmp, env={**ENV, "HOME": str(tmp)})
    assert p.returncode == 0, p.stderr
    return ["baseline", "--run-dir", str(run)], run

