"""Honest numbers for comparing arms: Wilson intervals, paired McNemar, paired
bootstrap, and t-tests over training seeds.

Pure Python + `math` for everything but the Student t distribution, whose CDF
and quantile come from scipy.stats, imported inside the two functions that
need them (so `import selfimprove.stats` stays light). DESIGN.md "Honest
numbers": a verdict between two arms evaluated on the same examples is a
paired test, not a difference of means.

Two sources of noise, two kinds of test:
- eval-sample noise of fixed checkpoints: Wilson interval of one accuracy,
  exact McNemar on per-example correctness, paired bootstrap of mean reward;
- training-seed noise (the same arm retrained with another
  `orchestrator.seed` lands elsewhere): Welch's two-sample t-test on the
  per-seed accuracies of two arms, or a one-sample t-test of one arm's
  per-seed accuracies against a fixed checkpoint (iter_0, the anchor every
  arm resumes from). McNemar cannot see this noise; with one seed per arm it
  is unmeasured, and `compare_over_seeds` says so instead of giving a p.

What is covered: one proportion's 95% interval (Wilson score, no continuity
correction); exact two-sided McNemar on per-example correctness; percentile
bootstrap CI of the mean per-example reward difference; two-sided Welch and
one-sample t-tests with a 95% t interval of the difference.
What is not covered: multiple-comparison correction across many arms (with
5+ arms a p of 0.04 is weak evidence); rollout-level variance inside one
example (each example counts once, by its mean over rollouts); with 2-3 seeds
a t-test has little power, so "no detectable difference" there is weak
evidence of no difference.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

from .models import EvalSummary

Z95 = 1.959963984540054  # two-sided 95% normal quantile
ALPHA = 0.05
SEED_DELTA = 0.01  # the "improved/regressed" threshold of the skill's procedure, on eval accuracy
# Accuracies are ratios like 114/200, so 0.58 - 0.57 lands on 0.00999999...; a
# tolerance far below 1/n_eval keeps the procedure's boundary where the procedure meant it.
_EPS = 1e-9


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of successes/n (Wilson 1927; Newcombe 1998 method 3).

    `successes` may be fractional (mean correctness times n). n == 0 -> (0.0, 1.0):
    no data, no information.
    """
    if n >= 0 and n < successes <= n * (1 + 1e-12):
        successes = n  # acc * n rounding a hair above n is still "all correct"
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # The closed-form bound is exactly 0 (1) at p == 0 (1); rounding can miss it by 1e-17.
    lo = 0.0 if successes == 0 else max(0.0, center - half)
    hi = 1.0 if successes == n else min(1.0, center + half)
    return (lo, hi)


@dataclass(frozen=True)
class McNemarResult:
    n_paired: int  # example ids present in both arms
    b: int  # only A correct
    c: int  # only B correct
    p_value: float  # exact two-sided binomial test on the b + c discordant pairs
    diff: float  # acc_A - acc_B on the paired examples


def _paired_ids(a: Mapping, b: Mapping) -> list:
    """Shared ids in a fixed order, so results never depend on dict insertion order."""
    return sorted(a.keys() & b.keys(), key=lambda i: (type(i).__name__, i))


def mcnemar_exact(a: Mapping[Hashable, bool], b: Mapping[Hashable, bool]) -> McNemarResult:
    """Exact McNemar test: under H0 each discordant pair is a fair coin.

    p = min(1, 2 * P[Binom(b + c, 1/2) <= min(b, c)]), computed with exact
    integers so b + c in the thousands neither overflows nor loses
    precision; p = 1 when there are no discordant pairs.
    """
    ids = _paired_ids(a, b)
    only_a = sum(1 for i in ids if a[i] and not b[i])
    only_b = sum(1 for i in ids if b[i] and not a[i])
    m = only_a + only_b
    if m == 0:
        p = 1.0
    else:
        # Exact integers: C(m, k+1) = C(m, k) * (m - k) / (k + 1); int / int rounds once, at the end.
        term = tail = 1
        for k in range(min(only_a, only_b)):
            term = term * (m - k) // (k + 1)
            tail += term
        p = min(1.0, 2 * tail / 2**m)
    diff = (only_a - only_b) / len(ids) if ids else 0.0
    return McNemarResult(n_paired=len(ids), b=only_a, c=only_b, p_value=p, diff=diff)


@dataclass(frozen=True)
class BootstrapResult:
    n_paired: int
    diff: float  # mean(a - b) over paired ids
    ci95: tuple[float, float]  # percentile interval of the resampled mean
    n_boot: int
    seed: int


def _quantile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default), on an already sorted list."""
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def paired_bootstrap_diff(
    a: Mapping[Hashable, float], b: Mapping[Hashable, float], n_boot: int = 10000, seed: int = 0
) -> BootstrapResult:
    """Mean per-example difference a - b with a 95% percentile bootstrap CI.

    Resamples examples (not rollouts) with replacement; a seeded random.Random
    makes the interval reproducible. Raises ValueError when no id is shared.
    """
    ids = _paired_ids(a, b)
    if not ids:
        raise ValueError("paired_bootstrap_diff: the two arms share no example id")
    if n_boot < 1:
        raise ValueError(f"paired_bootstrap_diff: n_boot must be >= 1, got {n_boot}")
    diffs = [a[i] - b[i] for i in ids]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(n_boot))
    ci = (_quantile(means, 0.025), _quantile(means, 0.975))
    return BootstrapResult(n_paired=n, diff=sum(diffs) / n, ci95=ci, n_boot=n_boot, seed=seed)


def verdict(delta: float, p_value: float | None, alpha: float = ALPHA) -> str:
    """One of "improved", "regressed", "no detectable difference", "untested".

    A direction is claimed only when the paired test rejects at `alpha`;
    "untested" means there was no paired test (e.g. no shared example ids).
    """
    if p_value is None:
        return "untested"
    if p_value < alpha and delta > 0:
        return "improved"
    if p_value < alpha and delta < 0:
        return "regressed"
    return "no detectable difference"


def seed_verdict(delta: float, base_acc: float, new_acc: float) -> str:
    """The skill's procedure's rule: "collapsed" | "improved" | "regressed" | "flat".

    collapsed (new_acc < 50% of iter_0's) wins over everything; otherwise
    |delta| >= 0.01 decides the direction. Kept next to `verdict` because the
    procedure's rule ignores noise: on 200 examples a 0.01 change is 2 examples.
    """
    if new_acc < 0.5 * base_acc - _EPS:
        return "collapsed"
    if delta >= SEED_DELTA - _EPS:
        return "improved"
    if delta <= -SEED_DELTA + _EPS:
        return "regressed"
    return "flat"


def compare_arms(a: EvalSummary, b: EvalSummary) -> dict:
    """Paired comparison of two arms' eval summaries, as a JSON-able dict.

    Pairs by example_id. acc_a/acc_b/delta are over the paired examples with an
    example counted correct when correct >= 0.5 (majority of its rollouts), so
    they equal eval_acc only with one rollout per example and identical ids.
    Signs are A's point of view: delta > 0 and verdict "improved" mean A beats B.
    """
    corr_a = {e.example_id: e.correct >= 0.5 for e in a.per_example}
    corr_b = {e.example_id: e.correct >= 0.5 for e in b.per_example}
    mc = mcnemar_exact(corr_a, corr_b)
    out: dict = {"a": a.arm, "b": b.arm, "n_paired": mc.n_paired}
    if mc.n_paired == 0:
        # Different example sets: there is nothing paired to test, say so.
        return out | {
            "acc_a": None, "acc_b": None, "delta": None, "mcnemar_p": None,
            "b_only_a": 0, "c_only_b": 0, "reward_diff": None, "reward_diff_ci95": None,
            "verdict": verdict(0.0, None),
        }
    ids = _paired_ids(corr_a, corr_b)
    acc_a = sum(corr_a[i] for i in ids) / len(ids)
    acc_b = sum(corr_b[i] for i in ids) / len(ids)
    boot = paired_bootstrap_diff(
        {e.example_id: e.reward for e in a.per_example},
        {e.example_id: e.reward for e in b.per_example},
    )
    return out | {
        "acc_a": acc_a,
        "acc_b": acc_b,
        "delta": mc.diff,
        "mcnemar_p": mc.p_value,
        "b_only_a": mc.b,
        "c_only_b": mc.c,
        "reward_diff": boot.diff,
        "reward_diff_ci95": list(boot.ci95),
        "verdict": verdict(mc.diff, mc.p_value),
    }


# ---------------------------------------------------------------- training seeds

UNMEASURED = "seed variance unmeasured"  # fewer than 2 training seeds on a side: no seed-aware p


def student_t_sf(t: float, df: float) -> float:
    """P[T > t] for Student's t with `df` degrees of freedom (df may be fractional, as Welch's is)."""
    from scipy.stats import t as student_t  # imported here: only seed-aware tests need scipy

    return float(student_t.sf(t, df))


def student_t_ppf(q: float, df: float) -> float:
    """The q-quantile of Student's t with `df` degrees of freedom."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(q, df))


@dataclass(frozen=True)
class TTestResult:
    """A t-test over training seeds. p_value/t/df/ci95 are None when there is no test
    (fewer than 2 seeds on a side, or every seed scored the same), and `note` says why."""

    test: str  # "welch" (two arms) | "one-sample" (an arm vs a fixed value)
    n_a: int  # seeds of A
    mean_a: float
    sd_a: float | None  # sample sd over seeds (n - 1), None with one seed
    n_b: int  # seeds of B; 1 for the fixed value of a one-sample test
    mean_b: float
    sd_b: float | None  # None with one seed and for a fixed value
    delta: float  # mean_a - mean_b
    t: float | None
    df: float | None
    p_value: float | None  # two-sided
    ci95: tuple[float, float] | None  # 95% t interval of delta
    note: str | None = None


def _mean_sd(xs: Sequence[float]) -> tuple[float, float | None]:
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))


def _finish(test: str, a: Sequence[float], b: Sequence[float], mean_b: float, sd_b: float | None,
            delta: float, se: float, df: float) -> TTestResult:
    mean_a, sd_a = _mean_sd(a)
    head = dict(test=test, n_a=len(a), mean_a=mean_a, sd_a=sd_a, n_b=len(b), mean_b=mean_b, sd_b=sd_b, delta=delta)
    if se == 0.0:
        # Every seed scored identically: the t statistic is 0/0 or x/0. R's t.test stops
        # with "data are essentially constant"; we say so rather than invent a p.
        return TTestResult(**head, t=None, df=None, p_value=None, ci95=None,
                           note="every seed scored the same: between-seed variance is zero, no t-test")
    t = delta / se
    half = student_t_ppf(0.975, df) * se
    p = min(1.0, 2 * student_t_sf(abs(t), df))
    return TTestResult(**head, t=t, df=df, p_value=p, ci95=(delta - half, delta + half))


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> TTestResult:
    """Welch's two-sample t-test (unequal variances, two-sided) of mean(a) - mean(b).

    a, b: one value per training seed (e.g. eval accuracy of each seed's checkpoint).
    df by Welch-Satterthwaite. With fewer than 2 values on either side there is no
    variance to test against: the result has no p and notes UNMEASURED.
    """
    if not a or not b:
        raise ValueError(f"welch_t_test needs at least one value per arm, got {len(a)} and {len(b)}")
    (mean_a, sd_a), (mean_b, sd_b) = _mean_sd(a), _mean_sd(b)
    if sd_a is None or sd_b is None:
        return TTestResult(test="welch", n_a=len(a), mean_a=mean_a, sd_a=sd_a, n_b=len(b), mean_b=mean_b, sd_b=sd_b,
                           delta=mean_a - mean_b, t=None, df=None, p_value=None, ci95=None, note=UNMEASURED)
    va, vb = sd_a**2 / len(a), sd_b**2 / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else float(len(a) + len(b) - 2)
    return _finish("welch", a, b, mean_b, sd_b, mean_a - mean_b, se, df)


def one_sample_t_test(a: Sequence[float], fixed: float) -> TTestResult:
    """One-sample t-test (two-sided) of mean(a) against a fixed value, df = n - 1.

    For an arm retrained with several seeds against one fixed checkpoint (iter_0, the
    anchor every arm resumes from): the fixed value has no seed variance of its own.
    """
    if not a:
        raise ValueError("one_sample_t_test needs at least one value")
    mean_a, sd_a = _mean_sd(a)
    if sd_a is None:
        return TTestResult(test="one-sample", n_a=1, mean_a=mean_a, sd_a=None, n_b=1, mean_b=fixed, sd_b=None,
                           delta=mean_a - fixed, t=None, df=None, p_value=None, ci95=None, note=UNMEASURED)
    return _finish("one-sample", a, [fixed], fixed, None, mean_a - fixed, sd_a / math.sqrt(len(a)), len(a) - 1)


def _accuracy_on(summary: EvalSummary, ids: set) -> float:
    """Mean correctness of `summary` over the example ids `ids` (its eval_acc when ids are all of its examples)."""
    return sum(e.correct for e in summary.per_example if e.example_id in ids) / len(ids)


def compare_over_seeds(a: list[EvalSummary], b: list[EvalSummary], *, b_fixed: bool = False,
                       a_name: str | None = None, b_name: str | None = None) -> dict:
    """Seed-aware comparison of arm A (one eval summary per training seed) with arm B, as JSON.

    Each seed's accuracy is taken on the eval examples that EVERY run of both arms shares,
    so all values are on the same examples. `b_fixed`: B is one fixed checkpoint (iter_0):
    a one-sample t-test of A's seeds against it; otherwise Welch's t-test. The verdict is
    `verdict(delta, p)`, or UNMEASURED with fewer than 2 seeds on a side.
    """
    if not a or not b:
        raise ValueError("compare_over_seeds needs at least one eval summary per arm")
    if b_fixed and len(b) != 1:
        raise ValueError(f"compare_over_seeds: a fixed arm is one checkpoint, got {len(b)} summaries")
    shared = set.intersection(*({e.example_id for e in s.per_example} for s in a + b))
    out: dict = {"a": a_name or a[0].arm, "b": b_name or b[0].arm, "a_runs": [s.arm for s in a],
                 "b_runs": [s.arm for s in b], "n_examples": len(shared)}
    if not shared:
        return out | {"test": None, "verdict": verdict(0.0, None), "note": "the runs share no eval example"}
    acc_a = [_accuracy_on(s, shared) for s in a]
    acc_b = [_accuracy_on(s, shared) for s in b]
    res = one_sample_t_test(acc_a, acc_b[0]) if b_fixed else welch_t_test(acc_a, acc_b)
    if res.p_value is None:
        word = UNMEASURED if res.note == UNMEASURED else verdict(0.0, None)
    else:
        word = verdict(res.delta, res.p_value)
    return out | {
        "test": res.test, "acc_a": acc_a, "acc_b": acc_b,
        "n_a": res.n_a, "mean_a": res.mean_a, "sd_a": res.sd_a,
        "n_b": res.n_b, "mean_b": res.mean_b, "sd_b": res.sd_b,
        "delta": res.delta, "t": res.t, "df": res.df, "p": res.p_value,
        "ci95": list(res.ci95) if res.ci95 else None, "verdict": word, "note": res.note,
    }
