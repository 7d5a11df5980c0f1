"""A finite-sample interval for the case-weighted mean of clustered cases.

With clusters ``g = 1 … G`` of ``n_g`` cases whose values lie in [0, 1] and sum to ``S_g``, the
case-weighted mean is ``θ = Σ_g E[S_g] / Σ_g n_g``: the pass rate of a case drawn from the suite,
each case counting once. Its estimate is ``Σ S_g / Σ n_g``. The clusters are independent; the cases
inside one need not be. With ``M`` the largest cluster, ``x_g(θ) = (S_g − θ n_g) / M`` lies in
``[−θ, 1 − θ]`` and, when θ is the true case-weighted mean, ``Σ_g E[x_g(θ)] = 0``. The hedged capital
process of Waudby-Smith & Ramdas (2024) with the documented grid of constant bets ``u_d = d/20``,

    K⁺(θ) = (1/19) Σ_d Π_g [1 + (u_d/θ) x_g(θ)],   K⁻(θ) = (1/19) Σ_d Π_g [1 − (u_d/(1 − θ)) x_g(θ)],

has every factor at least ``1 − u_d > 0`` and, for independent clusters, ``E[Π_g (1 + c·x_g)] =
Π_g (1 + c·E[x_g]) ≤ exp(c Σ_g E[x_g]) = 1`` (the cluster means need not be equal), so by Markov's
inequality ``P(K± ≥ 2/α) ≤ α/2``: the θ with both capitals below ``2/α`` form a ``1 − α`` interval,
valid in finite samples. The cluster sizes are a property of the suite (fixed before any outcome is
seen), so bounding them by the largest one is not a look at the data. ``K⁺`` falls and ``K⁻`` rises
in θ, so each bound is one root (Brent's method). With every cluster one case (``M = 1``) it is
the documented betting interval of the cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def case_weighted_interval(sums: Sequence[float], sizes: Sequence[float],
                           confidence: float = 0.95) -> tuple[float, float]:
    """Return the interval of the case-weighted mean ``Σ E[S_g] / Σ n_g`` of independent clusters.

    :param sums: each cluster's sum of case values, ``0 <= S_g <= n_g``.
    :param sizes: each cluster's number of cases, ``n_g >= 1``, in the same order.
    :param confidence: two-sided confidence level, strictly between 0 and 1.
    :return: (lower, upper) in [0, 1]; no clusters give (0.0, 1.0).
    """
    import numpy as np
    from scipy.optimize import brentq

    from oloproof_core.statistics import intervals as stats

    alpha = stats._check_confidence(confidence)
    s = np.asarray(sums, dtype=float).ravel()
    n = np.asarray(sizes, dtype=float).ravel()
    if s.shape != n.shape:
        raise ValueError(f"sums and sizes must pair up, got {s.size} and {n.size}")
    if s.size == 0:
        return 0.0, 1.0
    if np.any(n < 1) or np.any(s < -1e-9 * n) or np.any(s > n * (1 + 1e-9)) or not np.all(np.isfinite(s)):
        raise ValueError("every cluster needs at least one case and a sum of values between 0 and its size")
    s = np.clip(s, 0.0, n)
    pairs, counts = np.unique(np.stack([s, n], axis=1), axis=0, return_counts=True)
    s_u, n_u, counts = pairs[:, 0], pairs[:, 1], counts.astype(float)
    top_size = float(n_u.max())
    bets = stats._bets()
    threshold = math.log(2.0 / alpha)
    estimate = float(s.sum() / n.sum())

    def excess(theta: float, upward: bool) -> float:
        # x_g/θ = (S_g/θ − n_g)/M and −x_g/(1 − θ) = ((n_g − S_g)/(1 − θ) − n_g)/M, written so that
        # no factor leaves (−1, ∞) by rounding near the edges
        scaled = (s_u / theta - n_u) if upward else ((n_u - s_u) / (1.0 - theta) - n_u)
        log_products = np.log1p(np.multiply.outer(bets, np.maximum(scaled / top_size, -1.0))) @ counts
        peak = float(log_products.max())
        return peak + math.log(float(np.exp(log_products - peak).sum())) - stats._LOG_GRID - threshold

    edge = stats._EDGE
    lower, upper = 0.0, 1.0
    # at θ = the estimate Σ x_g = 0, so each capital is at most 1 < 2/α: the bracket changes sign
    if estimate > edge and excess(edge, True) > 0:
        lower = brentq(lambda t: excess(t, True), edge, estimate, xtol=1e-14)
    if estimate < 1 - edge and excess(1 - edge, False) > 0:
        upper = brentq(lambda t: excess(t, False), estimate, 1 - edge, xtol=1e-14)
    return float(lower), float(upper)
