"""The summary prints only the tests that ran (issue 43): one run with one seed per arm printed eight
"seed-aware test" lines that each said no seed-aware test ran."""

from __future__ import annotations

from selfimprove.report.table import seed_test_lines
from selfimprove.stats import UNMEASURED


def _untested(a: str, b: str, note: str = UNMEASURED) -> dict:
    return {"a": a, "b": b, "test": "welch", "mean_a": 0.8, "sd_a": None, "n_a": 1, "mean_b": 0.7, "sd_b": None,
            "n_b": 1, "n_examples": 1000, "delta": 0.1, "p": None, "ci95": None, "t": None, "df": None,
            "verdict": note, "note": note}


def test_untested_pairs_share_one_line_and_tested_ones_keep_theirs() -> None:
    tested = {**_untested("run_a", "run_c"), "sd_a": 0.01, "sd_b": 0.02, "n_a": 3, "n_b": 3, "p": 0.0013,
              "ci95": [0.04, 0.11], "t": 6.1, "df": 3.6, "verdict": "improved", "note": None}
    tests = [tested, _untested("iter_1", "iter_0"), _untested("iter_2", "iter_0"),
             _untested("run_b", "iter_0", "every seed scored the same: between-seed variance is zero, no t-test")]
    lines = seed_test_lines(tests)
    assert len(lines) == 3, lines
    assert lines[0].startswith("run_a vs run_c:") and "p=0.0013 -> improved" in lines[0]
    assert lines[1] == f"not tested ({UNMEASURED}): iter_1 vs iter_0, iter_2 vs iter_0"
    assert lines[2].startswith("not tested (every seed scored the same") and lines[2].endswith("run_b vs iter_0")
    assert not any("no seed-aware test" in line for line in lines)


def test_one_seed_per_arm_gives_one_line_not_one_per_pair() -> None:
    pairs = [("run_a", "run_c"), ("run_a", "iter_0"), ("run_b", "iter_0"), ("run_c", "iter_0"),
             ("iter_1", "iter_0"), ("iter_2", "iter_0"), ("iter_3", "iter_0"), ("run_a", "iter_3")]
    lines = seed_test_lines([_untested(a, b) for a, b in pairs])
    assert len(lines) == 1 and lines[0].count(" vs ") == len(pairs)
