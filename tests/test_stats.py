"""selfimprove.stats against hand-computed and published values.

Sources: Wilson intervals from Newcombe (1998), "Two-sided confidence intervals
for the single proportion", Stat. Med. 17:857-872, Table I (method 3, score
without continuity correction), plus closed-form edge cases: for 0/n the upper
bound is z^2/(n+z^2). McNemar p-values are binomial tail sums done by hand:
p = 2 * sum_{k<=min(b,c)} C(b+c,k) / 2^(b+c).
t-tests: R's documented example `t.test(extra ~ group, data = sleep)` (Welch; Student's
1908 sleep data, R's `datasets::sleep`) prints t = -1.8608, df = 17.776, p-value = 0.07939,
95% CI -3.3654832 0.2054832; `t.test(extra[group == 1], mu = 0)` prints t = 1.3257, df = 9,
p-value = 0.2176, 95% CI -0.5297804 2.0297804. Closed forms checked by hand: the t CDF
with 1 df is 1/2 + atan(t)/pi (Cauchy) and with 2 df is 1/2 + t / (2 sqrt(2 + t^2)).
"""

from __future__ import annotations

import json
import math

import pytest

from selfimprove.models import EvalSummary, ExampleScore
from selfimprove.stats import (
    UNMEASURED,
    BootstrapResult,
    McNemarResult,
    compare_arms,
    compare_over_seeds,
    mcnemar_exact,
    one_sample_t_test,
    paired_bootstrap_diff,
    seed_verdict,
    student_t_ppf,
    student_t_sf,
    verdict,
    welch_t_test,
    wilson_interval,
)

Z = 1.959963984540054


# ---------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    "k, n, expected",
    [
        (81, 263, (0.2553, 0.3662)),  # Newcombe 1998 Table I, example (i)
        (15, 148, (0.0624, 0.1605)),  # example (ii)
        (0, 20, (0.0, 0.1611)),  # example (iii)
        (1, 29, (0.0061, 0.1718)),  # example (iv)
        (50, 100, (0.4038, 0.5962)),  # by hand: 0.5 +- 1.96/1.0384 * sqrt(0.0025 + 0.000096)
    ],
)
def test_wilson_matches_published_values(k, n, expected):
    """Wilson 95% interval matches the published 4-decimal values."""
    assert wilson_interval(k, n) == pytest.approx(expected, abs=6e-5)


def test_wilson_all_or_nothing_is_exact_at_the_bound():
    """0/10 -> (0, z^2/(10+z^2)) = (0, 0.2775); 10/10 mirrors it; the bound is exact."""
    upper = Z**2 / (10 + Z**2)
    assert upper == pytest.approx(0.27753, abs=1e-5)
    assert wilson_interval(0, 10) == (0.0, pytest.approx(upper))
    assert wilson_interval(10, 10) == (pytest.approx(1 - upper), 1.0)


def test_wilson_edge_cases():
    """n=0 carries no information; fractional successes work; bad input names the values."""
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0.57 * 200, 200)  # accuracy * n as a float
    assert lo < 0.57 < hi and 0 <= lo and hi <= 1
    assert wilson_interval(1.0 * 3 + 1e-15, 3)[1] == 1.0  # a rounding hair above n is n
    with pytest.raises(ValueError, match="successes=5, n=4"):
        wilson_interval(5, 4)


# ---------------------------------------------------------------- McNemar


def _pairs(b: int, c: int, both: int = 0, neither: int = 0) -> tuple[dict, dict]:
    """Two arms over distinct ids with b only-A, c only-B, and concordant pairs."""
    a_ok, b_ok = {}, {}
    for name, count, va, vb in [("b", b, True, False), ("c", c, False, True),
                                ("both", both, True, True), ("none", neither, False, False)]:
        for i in range(count):
            a_ok[f"{name}{i}"], b_ok[f"{name}{i}"] = va, vb
    return a_ok, b_ok


@pytest.mark.parametrize(
    "b, c, p",
    [
        (1, 6, 0.125),  # 2 * (1 + 7) / 2^7
        (6, 1, 0.125),  # symmetric
        (0, 5, 0.0625),  # 2 * 1 / 2^5
        (2, 8, 0.109375),  # 2 * (1 + 10 + 45) / 2^10
        (4, 4, 1.0),  # b == c: capped at 1
        (0, 0, 1.0),  # no discordant pairs
    ],
)
def test_mcnemar_exact_small_counts(b, c, p):
    """Exact two-sided p on hand-summed binomial tails; concordant pairs don't matter."""
    res = mcnemar_exact(*_pairs(b, c, both=30, neither=7))
    assert res == McNemarResult(n_paired=b + c + 37, b=b, c=c, p_value=pytest.approx(p, abs=1e-12),
                                diff=pytest.approx((b - c) / (b + c + 37)))


def test_mcnemar_large_counts_match_normal_approximation():
    """b=100, c=150: close to the continuity-corrected normal p (0.00194), and < 0.01."""
    res = mcnemar_exact(*_pairs(100, 150))
    z = (abs(100 - 150) - 1) / math.sqrt(250)
    assert res.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), abs=1e-2)
    assert res.p_value < 0.01
    # independent check of the exact value through log-gamma
    logs = [math.lgamma(251) - math.lgamma(k + 1) - math.lgamma(251 - k) - 250 * math.log(2)
            for k in range(101)]
    assert res.p_value == pytest.approx(2 * sum(math.exp(x) for x in logs), rel=1e-9)


def test_mcnemar_thousands_of_discordant_pairs():
    """b + c = 5000 neither overflows nor loses the answer (normal approx 0.0049)."""
    res = mcnemar_exact(*_pairs(2400, 2600))
    assert res.p_value == pytest.approx(0.0048836, rel=1e-3)
    assert mcnemar_exact(*_pairs(2500, 2500)).p_value == 1.0


def test_mcnemar_pairs_only_shared_ids():
    """Ids present in one arm only are ignored, whatever their correctness."""
    a = {1: True, 2: True, 3: False, "only_a": True}
    b = {1: False, 2: True, 3: False, 99: True}
    res = mcnemar_exact(a, b)
    assert (res.n_paired, res.b, res.c) == (3, 1, 0)
    assert res.diff == pytest.approx(1 / 3)


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_constant_shift_has_a_point_ci_on_the_true_diff():
    """a = b + 0.25 on every example: diff 0.25 and the CI contains it (here, is it)."""
    b = {i: (i % 7) / 7 for i in range(50)}
    a = {i: v + 0.25 for i, v in b.items()}
    res = paired_bootstrap_diff(a, b, n_boot=500, seed=3)
    assert res.diff == pytest.approx(0.25)
    assert res.ci95[0] <= 0.25 <= res.ci95[1]
    assert res.ci95 == pytest.approx((0.25, 0.25))


def test_bootstrap_is_deterministic_by_seed_and_not_by_dict_order():
    """Same seed -> same CI even with another insertion order; another seed -> another CI."""
    a = {i: float(i % 3 == 0) for i in range(100)}
    b = {i: float(i % 4 == 0) for i in range(100)}
    first = paired_bootstrap_diff(a, b, n_boot=400, seed=7)
    again = paired_bootstrap_diff(dict(reversed(a.items())), b, n_boot=400, seed=7)
    other = paired_bootstrap_diff(a, b, n_boot=400, seed=8)
    assert first == again
    assert isinstance(first, BootstrapResult) and first.n_boot == 400 and first.seed == 7
    assert first.ci95 != other.ci95
    assert first.ci95[0] < first.diff < first.ci95[1]


def test_bootstrap_pairs_only_shared_ids_and_refuses_none():
    """Unshared ids are dropped; no shared id is an error naming the cause."""
    res = paired_bootstrap_diff({1: 1.0, 2: 0.0, 3: 5.0}, {1: 0.0, 2: 0.0, 4: 9.0}, n_boot=50)
    assert (res.n_paired, res.diff) == (2, 0.5)
    with pytest.raises(ValueError, match="share no example id"):
        paired_bootstrap_diff({1: 1.0}, {2: 1.0})


# ---------------------------------------------------------------- verdicts


def test_verdict_needs_a_significant_paired_test():
    """A direction only when p < alpha; no test -> untested."""
    assert verdict(0.05, 0.01) == "improved"
    assert verdict(-0.05, 0.01) == "regressed"
    assert verdict(0.05, 0.05) == "no detectable difference"
    assert verdict(-0.20, 0.30) == "no detectable difference"
    assert verdict(0.0, 0.001) == "no detectable difference"
    assert verdict(0.05, None) == "untested"


@pytest.mark.parametrize(
    "delta, base, new, expected",
    [
        (0.01, 0.50, 0.51, "improved"),  # boundary is inclusive
        (0.58 - 0.57, 0.57, 0.58, "improved"),  # 0.00999... in floats is still the boundary
        (0.0099, 0.50, 0.5099, "flat"),
        (-0.0099, 0.50, 0.4901, "flat"),
        (-0.01, 0.50, 0.49, "regressed"),
        (-0.26, 0.50, 0.24, "collapsed"),  # below half of iter_0
        (-0.25, 0.50, 0.25, "regressed"),  # exactly half is not a collapse
        (0.30, 0.50, 0.20, "collapsed"),  # collapse wins even over a positive delta vs a prior iter
    ],
)
def test_seed_verdict_boundaries(delta, base, new, expected):
    """The seed's rule: +-0.01 thresholds, collapse (< 50% of iter_0) first."""
    assert seed_verdict(delta, base, new) == expected


# ---------------------------------------------------------------- compare_arms


def _summary(arm: str, rows: list[tuple[int, float, float]]) -> EvalSummary:
    n = len(rows)
    acc = sum(c for _, _, c in rows) / n
    return EvalSummary(
        arm=arm, eval_acc=acc, eval_reward_mean=sum(r for _, r, _ in rows) / n, n_eval=n,
        n_examples=n, acc_ci95=wilson_interval(acc * n, n),
        per_example=[ExampleScore(example_id=i, reward=r, correct=c) for i, r, c in rows],
    )


def test_compare_arms_reports_a_paired_test_as_json():
    """B wins 6 discordant pairs to 1 (p=0.125): a 12.5-point delta is no detectable difference."""
    rows_a, rows_b = [], []
    for i in range(40):
        a_ok = i < 20 or i == 39  # 20 shared correct, 1 only-A
        b_ok = i < 26  # 20 shared correct, 6 only-B
        rows_a.append((i, float(a_ok), 1.0 if a_ok else 0.0))
        rows_b.append((i, float(b_ok) + 0.1, 0.75 if b_ok else 0.25))  # 0.75 -> correct, 0.25 -> not
    rows_b.append((99, 1.0, 1.0))  # unpaired: ignored
    out = compare_arms(_summary("iter_1", rows_a), _summary("iter_0", rows_b))
    assert out["n_paired"] == 40 and (out["b_only_a"], out["c_only_b"]) == (1, 6)
    assert out["mcnemar_p"] == pytest.approx(0.125)
    assert out["delta"] == pytest.approx(-5 / 40)
    assert (out["acc_a"], out["acc_b"]) == (pytest.approx(21 / 40), pytest.approx(26 / 40))
    assert out["verdict"] == "no detectable difference"
    assert out["reward_diff"] == pytest.approx((21 - 26 - 4) / 40)
    lo, hi = out["reward_diff_ci95"]
    assert lo <= out["reward_diff"] <= hi
    assert set(out) == {"a", "b", "n_paired", "acc_a", "acc_b", "delta", "mcnemar_p", "b_only_a",
                        "c_only_b", "reward_diff", "reward_diff_ci95", "verdict"}
    assert json.loads(json.dumps(out)) == out


def test_compare_arms_without_shared_ids_is_untested():
    """Arms evaluated on disjoint examples get no paired verdict, not a fake one."""
    out = compare_arms(_summary("a", [(1, 1.0, 1.0)]), _summary("b", [(2, 0.0, 0.0)]))
    assert out["n_paired"] == 0 and out["mcnemar_p"] is None and out["verdict"] == "untested"


# ---------------------------------------------------------------- t-tests over training seeds

SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]  # R datasets::sleep, group 1
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]  # group 2


def test_welch_matches_r_t_test_on_the_sleep_data():
    """Welch t, df, two-sided p and 95% CI match R's printed t.test(extra ~ group, data = sleep)."""
    res = welch_t_test(SLEEP_1, SLEEP_2)
    assert res.test == "welch" and (res.n_a, res.n_b) == (10, 10)
    assert (res.mean_a, res.mean_b, res.delta) == (pytest.approx(0.75), pytest.approx(2.33), pytest.approx(-1.58))
    assert res.t == pytest.approx(-1.8608, abs=5e-5)
    assert res.df == pytest.approx(17.776, abs=5e-4)
    assert res.p_value == pytest.approx(0.07939, abs=5e-6)
    assert res.ci95 == pytest.approx((-3.3654832, 0.2054832), abs=5e-7)
    assert res.sd_a == pytest.approx(1.789010, abs=1e-6) and res.note is None


def test_one_sample_matches_r_t_test():
    """One-sample t against mu = 0 matches R's t.test(extra[group == 1], mu = 0)."""
    res = one_sample_t_test(SLEEP_1, 0.0)
    assert res.test == "one-sample" and res.df == 9 and res.sd_b is None
    assert res.t == pytest.approx(1.3257, abs=5e-5)
    assert res.p_value == pytest.approx(0.2176, abs=5e-5)
    assert res.ci95 == pytest.approx((-0.5297804, 2.0297804), abs=5e-7)


def test_t_distribution_matches_closed_forms():
    """Student t tail and quantile against the 1- and 2-df closed forms (by hand)."""
    for t in (0.3, 1.0, 2.5, 12.0):
        assert student_t_sf(t, 1) == pytest.approx(0.5 - math.atan(t) / math.pi, rel=1e-12)
        assert student_t_sf(t, 2) == pytest.approx(0.5 - t / (2 * math.sqrt(2 + t * t)), rel=1e-12)
    # 2 df: t_q = (2q - 1) sqrt(2 / (4 q (1 - q))); q = 0.975 -> 4.302653 (printed t tables: 4.303)
    assert student_t_ppf(0.975, 2) == pytest.approx(0.95 * math.sqrt(2 / (4 * 0.975 * 0.025)), rel=1e-12)
    assert student_t_ppf(0.975, 9) == pytest.approx(2.262, abs=5e-4)  # printed t tables


def test_welch_with_two_seeds_each_by_hand():
    """x = (0.60, 0.62), y = (0.50, 0.52): sd 0.01414 each, se 0.01414, t = 7.0711, df = 2,
    p = 1 - t / sqrt(2 + t^2) = 0.019419 (2-df closed form)."""
    res = welch_t_test([0.60, 0.62], [0.50, 0.52])
    t = 0.1 / math.sqrt(2 * 0.0002 / 2)
    assert res.t == pytest.approx(t) and res.df == pytest.approx(2.0)
    assert res.p_value == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-9)
    assert res.p_value == pytest.approx(0.019419, abs=1e-6)
    half = 4.302653 * math.sqrt(0.0002)
    assert res.ci95 == pytest.approx((0.1 - half, 0.1 + half), abs=1e-6)


def test_one_sample_with_two_seeds_is_cauchy():
    """Two seeds vs a fixed value: df = 1, p = 1 - 2 atan(|t|) / pi."""
    res = one_sample_t_test([0.30, 0.34], 0.25)
    t = 0.07 / (math.sqrt(0.0008) / math.sqrt(2))
    assert res.df == 1 and res.t == pytest.approx(t)
    assert res.p_value == pytest.approx(1 - 2 * math.atan(t) / math.pi, rel=1e-9)


def test_fewer_than_two_seeds_is_unmeasured():
    """One seed on either side: means and delta, but no t, df, p or CI."""
    for res in (welch_t_test([0.6], [0.5, 0.52]), welch_t_test([0.6, 0.61], [0.5]), one_sample_t_test([0.6], 0.5)):
        assert res.note == UNMEASURED and res.p_value is None and res.t is None and res.ci95 is None
        assert res.delta == pytest.approx(res.mean_a - res.mean_b)
    with pytest.raises(ValueError, match="at least one value"):
        welch_t_test([], [0.5])


def test_identical_seeds_give_no_t_test():
    """Zero between-seed variance on both sides: no p (R stops with 'data are essentially constant')."""
    res = welch_t_test([0.5, 0.5], [0.4, 0.4])
    assert res.p_value is None and "zero" in res.note and res.delta == pytest.approx(0.1)
    assert one_sample_t_test([0.5, 0.5, 0.5], 0.4).p_value is None


def _seed_runs(arm: str, accs: list[float], n: int = 100, extra_id: int | None = None) -> list[EvalSummary]:
    """One EvalSummary per seed with round(acc * n) of examples 0..n-1 correct."""
    out = []
    for k, acc in enumerate(accs):
        ok = round(acc * n)
        rows = [(i, float(i < ok), float(i < ok)) for i in range(n)]
        if extra_id is not None:
            rows.append((extra_id, 1.0, 1.0))
        out.append(_summary(arm if k == 0 else f"{arm}_seed{k}", rows))
    return out


def test_compare_over_seeds_welch_on_shared_examples():
    """Per-seed accuracies on the examples all runs share; Welch verdict; JSON-able."""
    a = _seed_runs("run_a", [0.60, 0.62], extra_id=500)  # id 500 only in A: not counted
    b = _seed_runs("run_c", [0.50, 0.52])
    out = compare_over_seeds(a, b)
    assert (out["a"], out["b"], out["a_runs"], out["n_examples"]) == ("run_a", "run_c", ["run_a", "run_a_seed1"], 100)
    assert out["acc_a"] == pytest.approx([0.60, 0.62]) and out["acc_b"] == pytest.approx([0.50, 0.52])
    assert out["test"] == "welch" and out["p"] == pytest.approx(0.019419, abs=1e-6)
    assert out["verdict"] == "improved" and out["df"] == pytest.approx(2.0)
    assert json.loads(json.dumps(out)) == out


def test_compare_over_seeds_against_a_fixed_checkpoint():
    """b_fixed: a one-sample test against the single anchor value."""
    out = compare_over_seeds(_seed_runs("iter_2", [0.30, 0.34]), _seed_runs("iter_0", [0.25]), b_fixed=True)
    assert out["test"] == "one-sample" and out["df"] == 1 and out["mean_b"] == pytest.approx(0.25)
    assert out["verdict"] == "no detectable difference"  # t = 3.5, df = 1: p = 0.177
    with pytest.raises(ValueError, match="one checkpoint"):
        compare_over_seeds(_seed_runs("a", [0.3, 0.4]), _seed_runs("b", [0.2, 0.3]), b_fixed=True)


def test_compare_over_seeds_with_one_seed_says_unmeasured():
    """One seed per arm: no p, verdict 'seed variance unmeasured'."""
    out = compare_over_seeds(_seed_runs("run_a", [0.7]), _seed_runs("run_c", [0.5]))
    assert out["p"] is None and out["verdict"] == UNMEASURED and out["delta"] == pytest.approx(0.2)
