"""The README's demo table is what `make demo` printed on the locked install (bench/out/demo.txt,
written with it by `make demo-record`): the two never drift apart, and a new lock needs a new record."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("demo_record", REPO / "bench" / "demo_record.py")
demo_record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_record)


def test_readme_demo_block_is_the_recorded_demo_output():
    recorded = demo_record.recorded_block(demo_record.RECORD.read_text())
    shown = demo_record.readme_block(demo_record.README.read_text())
    assert shown == recorded, "README.md's demo block differs from bench/out/demo.txt: re-record both with `make demo-record`"
    assert "eval_acc" in recorded and "run_c" in recorded


def test_the_record_was_made_on_the_locked_versions():
    """A refreshed lock (make lock) moves the figures: the record must be made again on it."""
    header = demo_record.RECORD.read_text().split(demo_record.START, 1)[0]
    locked = {p["name"]: p["version"] for p in tomllib.loads((REPO / "uv.lock").read_text())["package"]}
    for name in ("torch", "transformers", "verifiers", "datasets"):
        m = re.search(rf"\b{name} (\S+?)[,;\n]", header)
        assert m, f"bench/out/demo.txt names no {name} version"
        assert m.group(1) == locked[name], (
            f"bench/out/demo.txt was recorded with {name} {m.group(1)}, uv.lock has {locked[name]}: `make demo-record`")


OUTPUT = """\
12:00:00 compare end (5m)
12:00:01 finalize start
12:00:05 finalize end (4s)

targeted data beat equal compute on real data: run_a 0.821 vs run_c 0.751
 run      eval_acc
 iter_0     0.709
status finalized (ended: max_iters_reached; ...); total 9m
plot: runs/x/eval_acc.png
"""


def test_summary_block_is_what_follows_finalize_up_to_the_status_line():
    assert demo_record.summary_block(OUTPUT) == (
        "targeted data beat equal compute on real data: run_a 0.821 vs run_c 0.751\n run      eval_acc\n iter_0     0.709")


@pytest.mark.parametrize(("output", "why"), [
    ("12:00:00 baseline end (1m)\n", "did not reach Phase 5"),
    (OUTPUT.replace("status finalized", "stat"), "no 'status"),
    ("12:00:05 finalize end (4s)\n\nstatus finalized (ended: x)\n", "empty summary"),
])
def test_summary_block_refuses_an_output_without_a_summary(output, why):
    with pytest.raises(ValueError, match=why):
        demo_record.summary_block(output)


def test_readme_block_must_be_one_fence():
    text = f"a\n{demo_record.START}\nno fence\n{demo_record.END}\n"
    with pytest.raises(ValueError, match="not one ``` fence"):
        demo_record.readme_block(text)
