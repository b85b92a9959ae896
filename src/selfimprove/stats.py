"""Honest numbers for comparing arms: Wilson intervals, paired McNemar, paired bootstrap.

Pure Python + `math` (no scipy/numpy at run time), so `compare` and `finalize`
work on any install. DESIGN.md "Honest numbers": a verdict between two arms
evaluated on the same examples is a paired test, not a difference of means.

What is covered: one proportion's 95% interval (Wilson score, no continuity
correction); exact two-sided McNemar on per-example correctness; percentile
bootstrap CI of the mean per-example reward difference.
What is not covered: multiple-comparison correction across many arms (with
5+ arms a p of 0.04 is weak evidence), and rollout-level variance inside one
example (each example counts once, by its mean over rollouts).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Hashable, Mapping

from .models import EvalSummary

Z95 = 1.959963984540054  # two-sided 95% normal quantile
ALPHA = 0.05
SEED_DELTA = 0.01  # the seed's "improved/regressed" threshold on eval accuracy
# Accuracies are ratios like 114/200, so 0.58 - 0.57 lands on 0.00999999...; a
# tolerance far below 1/n_eval keeps the seed's boundary where the seed meant it.
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
    """The seed's rule: "collapsed" | "improved" | "regressed" | "flat".

    collapsed (new_acc < 50% of iter_0's) wins over everything; otherwise
    |delta| >= 0.01 decides the direction. Kept next to `verdict` because the
    seed's rule ignores noise: on 200 examples a 0.01 change is 2 examples.
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
