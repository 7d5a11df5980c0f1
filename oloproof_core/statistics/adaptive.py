"""A variance-adaptive betting confidence sequence: predictable plug-in bets (Waudby-Smith & Ramdas 2024).

The default betting interval (``stats.betting_interval``) averages 19 constant bets, which is what
reproduces the documented numbers. It adapts to low variance but pays a margin when the variance is
high (scores spread over [0, 1], pass rates near one half). The hedged capital process with
*predictable plug-in* bets sizes the bet on case i from the cases before it only:

    λ_i = √(2 log(2/α) / (s_i σ̂²_{i-1})),   σ̂²_{i-1} = (1/4 + Σ_{j<i} (y_j - μ̂_j)²) / i,
    μ̂_j = (1/2 + Σ_{k≤j} y_k) / (j + 1),

with s_i = N, the run's maximum number of cases fixed before the first case (``horizon``), or, with
no horizon, s_i = i·log(1 + i) (the anytime predictable plug-in bets of Waudby-Smith & Ramdas 2024). Either
way λ_i is a function of y_1..y_{i-1} and of constants fixed in advance, never of how many cases
have been seen at the look: the bets placed up to a look are the same at every later look. Bets
are truncated to c/m (upward) and c/(1 - m) (downward) with c = 1/2, so every factor stays positive:
K⁺(m) = Π_i [1 + min(λ_i, c/m)(y_i - m)], K⁻(m) = Π_i [1 - min(λ_i, c/(1-m))(y_i - m)]. Each is a
nonnegative martingale when the mean is m, so by Ville's inequality the set of m with
max(½K⁺, ½K⁻) < 1/α is a confidence sequence at level 1 - α: valid at every look at once.

(Before this version the bets used s_i = n, the number of cases *seen so far*: every past bet changed
at each look, the capital was no martingale, and false PASS under repeated looks reached 0.03-0.038.)

Selected with ``sequential: {interval: adaptive-betting}`` in the policy; the default stays the
documented one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CAP = 0.5  # c: the largest fraction of the wealth a bet may risk


def bet_sizes(y: np.ndarray, alpha: float, horizon: int | None = None) -> np.ndarray:
    """The predictable plug-in bet sizes λ_i before truncation, along the last axis of ``y``.

    λ_i reads y_1..y_{i-1} only, so a prefix of the values gets a prefix of the bets.

    :param horizon: the largest number of values the sequence will see, fixed in advance; None for
        the anytime bets (i·log(1 + i) in place of the horizon).
    """
    y = np.asarray(y, dtype=float)
    n = y.shape[-1]
    index = np.arange(1, n + 1, dtype=float)
    means = (0.5 + np.cumsum(y, axis=-1)) / (index + 1)  # μ̂_j, j = 1..n
    squares = np.cumsum((y - means) ** 2, axis=-1)
    before = np.concatenate([np.zeros(y.shape[:-1] + (1,)), squares[..., :-1]], axis=-1)  # Σ_{j<i}
    variance = (0.25 + before) / index  # σ̂²_{i-1}
    scale = index * np.log1p(index) if horizon is None else float(max(horizon, 1))
    return np.sqrt(2 * math.log(2 / alpha) / (scale * variance))


def log_capital(y: np.ndarray, m: float, alpha: float, upward: bool, horizon: int | None = None,
                path: bool = False) -> np.ndarray:
    """log K⁺(m) (``upward``) or log K⁻(m) of the values along the last axis of ``y`` (in [0, 1]).

    :param path: the capital after each value (the running sums) instead of after the last.
    """
    y = np.asarray(y, dtype=float)
    bets = bet_sizes(y, alpha, horizon)
    if upward:
        terms = np.log1p(np.minimum(bets, CAP / m) * (y - m))
    else:
        terms = np.log1p(-np.minimum(bets, CAP / (1 - m)) * (y - m))
    return np.cumsum(terms, axis=-1) if path else terms.sum(axis=-1)


def adaptive_betting_interval(values: Sequence[float], confidence: float = 0.95, lo: float = 0.0,
                              hi: float = 1.0, horizon: int | None = None) -> tuple[float, float]:
    """The variance-adaptive betting confidence sequence for the mean of values in [lo, hi], at the
    look after the values given (in the order they were seen).

    :param horizon: the run's maximum number of values, fixed before the first (a sequential run's
        suite size); None for the anytime bets. A horizon below ``len(values)`` is an error.
    :return: (lower, upper) on the scale of the values; (lo, hi) for no values.
    """
    alpha = 1.0 - confidence
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    data = np.asarray(values, dtype=float).ravel()
    if data.size == 0:
        return float(lo), float(hi)
    if horizon is not None and horizon < data.size:
        raise ValueError(f"the horizon ({horizon}) is the most values the sequence will see, got {data.size}")
    y = np.clip((data - lo) / (hi - lo), 0.0, 1.0)
    bets = bet_sizes(y, alpha, horizon)
    threshold = math.log(2 / alpha)
    mean = float(y.mean())

    def capital(m: float, upward: bool) -> float:
        if upward:
            return float(np.log1p(np.minimum(bets, CAP / m) * (y - m)).sum())
        return float(np.log1p(-np.minimum(bets, CAP / (1 - m)) * (y - m)).sum())

    def bound(upward: bool) -> float:
        # Every factor falls in m upward (rises downward), so the capital is monotone in m and the
        # boundary of the rejected region is found by bisection; the rejected end is returned.
        inside, outside = mean, (1e-12 if upward else 1 - 1e-12)
        if capital(outside, upward) < threshold:
            return 0.0 if upward else 1.0
        for _ in range(60):
            middle = (inside + outside) / 2
            if capital(middle, upward) >= threshold:
                outside = middle
            else:
                inside = middle
        return outside

    return lo + bound(True) * (hi - lo), lo + bound(False) * (hi - lo)
