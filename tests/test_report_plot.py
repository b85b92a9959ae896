"""selfimprove.report: the eval-accuracy PNG and optional W&B logging.

wandb is optional: a fake module checks what we send it; a real offline run is
tried only when wandb is installed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest

from selfimprove.errors import SelfImproveError
from selfimprove.report.plot import _order, plot_eval_acc
from selfimprove.report.wandb_log import NOT_INSTALLED, log_arms_to_wandb
from selfimprove.stats import wilson_interval

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rec(arm: str, k: int, n: int = 200, **extra) -> dict:
    """An IterRecord.model_dump()-like dict."""
    return {"arm": arm, "iter": extra.pop("iter", None), "eval_acc": k / n, "eval_reward_mean": k / n,
            "n_eval": n, "acc_ci95": wilson_interval(k, n), "eval_split": "eval", "source": "trained", **extra}


ARMS = [
    _rec("run_b", 121), _rec("iter_10", 100, iter=10), _rec("iter_2", 118, iter=2),
    _rec("iter_0", 104, iter=0), _rec("iter_1", 126, iter=1, best=True), _rec("run_a", 129),
]


def test_plot_writes_a_png_atomically(tmp_path: Path):
    """A valid PNG appears at the path, and no temp file is left behind."""
    out = plot_eval_acc(ARMS, tmp_path / "plots" / "eval_acc.png", "demo: eval accuracy")
    assert out == tmp_path / "plots" / "eval_acc.png"
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert [p.name for p in out.parent.iterdir()] == ["eval_acc.png"]


def test_plot_orders_iterations_numerically_then_controls():
    """iter_10 comes after iter_2; controls follow in run_a, run_b order."""
    iters, controls = _order(ARMS)
    assert [a["arm"] for a in iters] == ["iter_0", "iter_1", "iter_2", "iter_10"]
    assert [a["arm"] for a in controls] == ["run_a", "run_b"]


def test_plot_recomputes_a_missing_ci_and_accepts_json_lists(tmp_path: Path):
    """Records without acc_ci95 (or with it as a JSON list) still plot."""
    arms = [{"arm": "iter_0", "eval_acc": 0.5, "n_eval": 10}, {**_rec("iter_1", 7, n=10), "acc_ci95": [0.4, 0.9]}]
    assert plot_eval_acc(arms, tmp_path / "x.png", "t").read_bytes()[:8] == PNG_MAGIC


def test_plot_without_arms_is_a_user_error(tmp_path: Path):
    with pytest.raises(SelfImproveError, match="no finished arm"):
        plot_eval_acc([], tmp_path / "x.png", "t")


def test_plot_without_matplotlib_says_how_to_install(tmp_path: Path, monkeypatch):
    """A missing extra is a one-line SelfImproveError naming the pip command."""
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib...` raise ImportError
    with pytest.raises(SelfImproveError, match=r"pip install selfimprove\[plots\]"):
        plot_eval_acc(ARMS, tmp_path / "x.png", "t")
    assert not (tmp_path / "x.png").exists()


def test_importing_the_package_pulls_no_optional_library():
    """`import selfimprove.report` / `selfimprove.stats` must not import matplotlib or wandb."""
    code = ("import sys, selfimprove.report, selfimprove.stats; "
            "print(sorted(m for m in ('matplotlib', 'wandb', 'numpy', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- wandb


def test_wandb_absent_returns_a_note(monkeypatch):
    """Without wandb the call returns the install hint instead of failing."""
    monkeypatch.setitem(sys.modules, "wandb", None)
    assert log_arms_to_wandb("p", "demo", ARMS, {}, []) == NOT_INSTALLED


class FakeRun:
    def __init__(self, log: list, **kwargs):
        self.kwargs, self.logged, self.finished = kwargs, [], False
        log.append(self)

    def log(self, data: dict) -> None:
        self.logged.append(data)

    def finish(self) -> None:
        self.finished = True


def _fake_wandb(fail_on: str | None = None) -> tuple[types.ModuleType, list]:
    runs: list[FakeRun] = []
    mod = types.ModuleType("wandb")

    def init(**kwargs):
        if fail_on and kwargs["name"].endswith(fail_on):
            raise RuntimeError("network is unreachable\nlong traceback text")
        return FakeRun(runs, **kwargs)

    mod.init = init
    mod.Table = lambda columns, data: {"columns": columns, "data": data}
    mod.Settings = lambda **kwargs: kwargs
    return mod, runs


def test_wandb_one_run_per_arm_then_a_summary_table(monkeypatch):
    """Each arm gets its own offline run with metrics + config; the last run holds the table."""
    mod, runs = _fake_wandb()
    monkeypatch.setitem(sys.modules, "wandb", mod)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    rows = [{"arm": "iter_0", "eval_acc": 0.52, "ci": (0.45, 0.59)}, {"arm": "run_a", "verdict": "flat"}]
    note = log_arms_to_wandb("proj", "gsm8k-demo", ARMS[:2], {"model": "tiny"}, rows)
    assert note.startswith("wandb: logged 2 arm run(s) + summary") and "wandb sync" in note
    assert [r.kwargs["name"] for r in runs] == ["gsm8k-demo-run_b", "gsm8k-demo-iter_10", "gsm8k-demo-summary"]
    assert all(r.finished and r.kwargs["mode"] == "offline" and r.kwargs["project"] == "proj" for r in runs)
    first = runs[0]
    assert first.kwargs["config"] == {"model": "tiny", "arm": "run_b", "eval_split": "eval", "source": "trained"}
    assert first.logged[0]["eval_acc"] == pytest.approx(121 / 200)
    assert first.logged[0]["acc_ci95_lo"] == pytest.approx(wilson_interval(121, 200)[0])
    table = runs[-1].logged[0]["final_table"]
    assert table["columns"] == ["arm", "eval_acc", "ci", "verdict"]
    assert table["data"] == [["iter_0", 0.52, "(0.45, 0.59)", None], ["run_a", None, None, "flat"]]


def test_wandb_online_with_a_key_and_errors_become_a_note(monkeypatch):
    """An API key means online mode; a wandb-side exception comes back as one line."""
    mod, runs = _fake_wandb(fail_on="summary")
    monkeypatch.setitem(sys.modules, "wandb", mod)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    note = log_arms_to_wandb("proj", "demo", ARMS[:1], {}, [])
    assert runs[0].kwargs["mode"] == "online" and runs[0].finished
    assert note.startswith("wandb logging failed (RuntimeError: network is unreachable)")
    assert "\n" not in note


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None,
                    reason="wandb not installed (optional extra selfimprove[wandb])")
def test_wandb_real_offline_run_writes_under_wandb_dir(tmp_path: Path, monkeypatch):
    """With real wandb and no key, runs are written offline under WANDB_DIR."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    note = log_arms_to_wandb("selfimprove-test", "t", ARMS[:2], {"model": "tiny"},
                             [{"arm": "iter_0", "eval_acc": 0.5}])
    assert note.startswith("wandb: logged 2 arm run(s)"), note
    assert f"wandb sync {tmp_path}/wandb/offline-run-*" in note
    assert len(list((tmp_path / "wandb").glob("offline-run-*"))) == 3
