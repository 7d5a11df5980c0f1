"""A variance-adaptive betting interval: predictable plug-in bets (Waudby-Smith & Ramdas 2024, §5).

The default betting interval (``stats.betting_interval``) averages 19 constant bets, which is what
reproduces the documented numbers. It adapts to low variance but pays a margin when the variance is
high (scores spread over [0, 1], pass rates near one half). The hedged capital process with
*predictable plug-in* bets sizes each bet from the variance of the values seen before it:

    λ_i = √(2 log(2/α) / (n σ̂²_{i-1})),   σ̂²_{i-1} = (1/4 + Σ_{j<i} (y_j - μ̂_j)²) / i,
    μ̂_j = (1/2 + Σ_{k≤j} y_k) / (j + 1),

truncated to c/m (upward) and c/(1 - m) (downward) with c = 1/2, so every factor stays positive:
K⁺(m) = Π_i [1 + min(λ_i, c/m)(y_i - m)], K⁻(m) = Π_i [1 - min(λ_i, c/(1-m))(y_i - m)]. Each is a
nonnegative martingale when the mean is m, so by Ville's inequality the set of m with
max(½K⁺, ½K⁻) < 1/α is a confidence set at level 1 - α, valid at every sample size (a confidence
sequence) and in finite samples. The bets depend on the order of the values (the suite's order, or
a sequential run's seeded one), never on their future.

Selected with ``interval: adaptive-betting`` in the policy; the default stays the documented one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CAP = 0.5  # c: the largest fraction of the wealth a bet may risk


def _bets(y: np.ndarray, alpha: float) -> np.ndarray:
    """The predictable plug-in bet sizes λ_i, before truncation."""
    n = len(y)
    index = np.arange(1, n + 1)
    means = (0.5 + np.cumsum(y)) / (index + 1)  # μ̂_j, j = 1..n
    squares = np.concatenate([[0.0], np.cumsum((y - means) ** 2)[:-1]])  # Σ_{j<i}
    variance = (0.25 + squares) / index  # σ̂²_{i-1}
    return np.sqrt(2 * math.log(2 / alpha) / (n * variance))


def _log_capital(y: np.ndarray, bets: np.ndarray, m: float, upward: bool) -> float:
    if upward:
        return float(np.log1p(np.minimum(bets, CAP / m) * (y - m)).sum())
    return float(np.log1p(-np.minimum(bets, CAP / (1 - m)) * (y - m)).sum())


def adaptive_betting_interval(values: Sequence[float], confidence: float = 0.95, lo: float = 0.0,
                              hi: float = 1.0) -> tuple[float, float]:
    """The variance-adaptive betting interval for the mean of values in [lo, hi], in their order.

    :return: (lower, upper) on the scale of the values; (lo, hi) for no values.
    """
    alpha = 1.0 - confidence
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    data = np.asarray(values, dtype=float).ravel()
    if data.size == 0:
        return float(lo), float(hi)
    y = np.clip((data - lo) / (hi - lo), 0.0, 1.0)
    bets = _bets(y, alpha)
    threshold = math.log(2 / alpha)
    mean = float(y.mean())

    def bound(upward: bool) -> float:
        # The capital is monotone in m on each side of the mean (the truncation only lowers bets far
        # from the data), so the boundary of the rejected region is found by bisection.
        inside, outside = mean, (1e-12 if upward else 1 - 1e-12)
        if _log_capital(y, bets, outside, upward) < threshold:
            return 0.0 if upward else 1.0
        for _ in range(60):
            middle = (inside + outside) / 2
            if _log_capital(y, bets, middle, upward) >= threshold:
                outside = middle
            else:
                inside = middle
        return outside

    return lo + bound(True) * (hi - lo), lo + bound(False) * (hi - lo)
