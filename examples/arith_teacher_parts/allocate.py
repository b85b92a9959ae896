"""How rows are shared among buckets: severity, weights, integer rows, features, rebalancing.

The planner (plan.py) calls these in order:

1. severity_score: the learnability of a structure the student solves with
   probability p, (27/4) p (1-p)^2, or RESCUE_VALUE when it is hopeless (the
   overview in examples/arith_teacher.py, point 2b, says why);
2. rescue_weights: the drillable hopeless cells together get RESCUE_SHARE of
   the weight; _round_alloc: integer rows, a floor each, the rest in proportion
   to the weights, never above a cell's fresh instances (water-filling);
3. _feature_lift and _choose_features: the 4-6 catalogue features that meet the
   skill's procedure's feature bars on the pilot rows, highest failure-rate lift first;
4. _rebalance: move rows between buckets until the planned rows meet every
   bar (_metrics measures them, _failing names the bars missed).
"""

from __future__ import annotations

import itertools
from collections import Counter

from .cells import Cell
from .expr import feature_flags
from .observe import Obs
from .settings import BAR_NAMES, FEATURE_CATALOGUE, HOPELESS_P, RESCUE_SHARE, RESCUE_VALUE


def severity_score(p: float) -> float:
    """Learnability (27/4) p (1-p)^2: GRPO signal p(1-p) times headroom (1-p), 1.0 at p = 1/3.

    Below HOPELESS_P the diluted signal is ~0 but the concentrated one is not (examples/arith_teacher.py, point 2b):
    a hopeless structure scores RESCUE_VALUE, so it is drilled with most of the rows."""
    if p < HOPELESS_P:
        return RESCUE_VALUE
    return 6.75 * p * (1 - p) ** 2


def rescue_weights(cells: list, weights: dict) -> dict:
    """Scale the drillable hopeless cells so that together they hold RESCUE_SHARE of the weight.

    Only when both kinds are present (nothing to shift otherwise). Stepping stones keep their weight:
    concentrating them did not help (bench/stones.py: stones alone moved `347+8` from 0.00 to 0.02)."""
    hopeless = {id(c) for c in cells if c.p < HOPELESS_P and not c.stone_for}
    h = sum(w for k, w in weights.items() if k in hopeless)
    rest = sum(w for k, w in weights.items() if k not in hopeless)
    if not h or not rest:
        return weights
    scale = RESCUE_SHARE / (1 - RESCUE_SHARE) * rest / h
    return {k: w * scale if k in hopeless else w for k, w in weights.items()}


def _round_alloc(weights: dict, total: int, floor: int, caps: dict) -> dict:
    """Integer rows per bucket: the floor each, the rest shared in proportion to weights, never above a cap.

    Water-filling: a bucket that reaches its cap drops out and the others share
    what it could not take. The sum is `total` unless the caps forbid it.
    """
    rows = {k: min(floor, caps[k]) for k in weights}
    left = total - sum(rows.values())
    while left > 0:
        room = [k for k in weights if rows[k] < caps[k]]
        if not room:
            break
        wsum = sum(weights[k] for k in room) or 1.0
        grant = {k: min(caps[k] - rows[k], int(left * weights[k] / wsum)) for k in room}
        if not any(grant.values()):  # the last few rows: one each, heaviest first
            for k in sorted(room, key=lambda k: -weights[k])[:left]:
                grant[k] = 1
        for k, g in grant.items():
            rows[k] += g
            left -= g
    return rows


def _feature_lift(obs: list[Obs]) -> dict[str, float]:
    """Failure rate with the feature minus failure rate without it (train rollouts)."""
    out = {}
    flags = [(feature_flags(o.node), o.ok) for o in obs]
    for f in FEATURE_CATALOGUE:
        w = [ok for fl, ok in flags if fl[f]]
        wo = [ok for fl, ok in flags if not fl[f]]
        if w and wo:
            out[f] = (1 - sum(w) / len(w)) - (1 - sum(wo) / len(wo))
        else:
            out[f] = 0.0
    return out


def _metrics(cells: list[Cell], shares: list[dict], features: list[str]) -> dict:
    """Planned shares of hard/easy/skeleton rows, of rows with >= 2 and >= 3 features, and per-feature coverage.

    shares[i] describes bucket i's pilot rows: hard/easy/skeleton shares and a
    Counter of each row's feature-id set, so any feature subset is cheap to score.
    """
    T = sum(c.rows for c in cells) or 1
    chosen = set(features)
    m = {"hard": 0.0, "easy": 0.0, "skeleton": 0.0, "n2": 0.0, "n3": 0.0, "cov": {f: 0.0 for f in features}}
    for c, s in zip(cells, shares):
        w = c.rows / T
        for k in ("hard", "easy", "skeleton"):
            m[k] += w * s[k]
        total = sum(s["flags"].values()) or 1
        for flags, count in s["flags"].items():
            share = w * count / total
            n = len(flags & chosen)
            m["n2"] += share if n >= 2 else 0.0
            m["n3"] += share if n >= 3 else 0.0
            for f in flags & chosen:
                m["cov"][f] += share
    return m


def _bucket_score(s: dict, need: str, features: list[str]) -> float:
    """How much one bucket helps a failing bar (higher = more rows should go there)."""
    if need in ("hard", "skeleton"):
        return s[need]
    if need == "easy":
        return -s["easy"]
    total = sum(s["flags"].values()) or 1
    chosen = set(features)
    if need in ("n2", "n3"):
        k = 2 if need == "n2" else 3
        return sum(c for fl, c in s["flags"].items() if len(fl & chosen) >= k) / total
    return sum(c for fl, c in s["flags"].items() if need in fl) / total  # a feature's coverage


def _failing(m: dict, features: list[str], bars: dict) -> list[str]:
    needs = [k for k in ("hard", "n2", "n3", "skeleton") if m[k] < bars[k]]
    needs += ["easy"] if m["easy"] > bars["easy"] else []
    return needs + [f for f in features if m["cov"][f] < bars["feature"]]


def _choose_features(cells, shares, lift, bars) -> list[str]:
    """The 4-6 catalogue features that meet the feature bars on the planned rows, highest failure lift first.

    Exhaustive over subsets (at most a few hundred); if none meets every bar,
    the subset with the fewest failing bars (rebalancing then moves rows).
    """
    m_all = _metrics(cells, shares, list(FEATURE_CATALOGUE))
    eligible = [f for f in FEATURE_CATALOGUE if m_all["cov"][f] > 0]
    best, best_key = None, None
    for size in (4, 5, 6):
        for combo in itertools.combinations(eligible, size):
            m = _metrics(cells, shares, list(combo))
            failing = _failing(m, list(combo), bars)
            key = (len([x for x in failing if x not in ("hard", "easy", "skeleton")]),
                   -sum(lift.get(f, 0.0) for f in combo) / size, size)
            if best_key is None or key < best_key:
                best, best_key = list(combo), key
    if best is None:  # fewer than 4 features occur at all: take the most common ones
        best = sorted(FEATURE_CATALOGUE, key=lambda f: -m_all["cov"][f])[:4]
    return sorted(best, key=lambda f: -lift.get(f, 0.0))


def _rebalance(cells, shares, features, bars, floor_rows) -> Counter:
    """Move rows between buckets (within floors and capacities) until the planned rows meet the bars.

    Returns the rows moved per bar that required it.
    """
    moved: Counter = Counter()
    for _ in range(400):
        needs = _failing(_metrics(cells, shares, features), features, bars)
        if not needs:
            return moved
        progress = False
        for need in needs:
            order = sorted(range(len(cells)), key=lambda i: (_bucket_score(shares[i], need, features), cells[i].weight))
            donors = [i for i in order if cells[i].rows > floor_rows]
            takers = [i for i in reversed(order) if cells[i].rows < cells[i].cap]
            if not donors or not takers:
                continue
            d, t = donors[0], takers[0]
            if _bucket_score(shares[t], need, features) <= _bucket_score(shares[d], need, features):
                continue
            k = min(8, cells[d].rows - floor_rows, cells[t].cap - cells[t].rows)
            cells[d].rows -= k
            cells[t].rows += k
            moved[BAR_NAMES[need] if need in BAR_NAMES else f"feature '{FEATURE_CATALOGUE[need][0]}' >= 10%"] += k
            progress = True
            break
        if not progress:
            return moved
    return moved

