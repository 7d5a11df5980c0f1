"""Power-based planning for paired pass/fail differences: how many pairs decide a rule 80% of the time.

The documented planning line scales the observed counts to larger totals and reports the first
total whose interval *would* decide if the counts came out exactly as scaled: a projection whose
chance of deciding, when the pairs are really drawn, is near one half. This module computes the
*probability* that a paired run of N pairs decides a rule (PASS or FAIL, with the betting interval
``compare`` prints), exactly, for a given truth: P(pass→fail) = q(1 - s), P(fail→pass) = q·s, with
q the discordance and s the share of discordant pairs that improved, so the mean difference is
q(2s - 1). Conditionally on D = B + C ~ Binomial(N, q), C ~ Binomial(D, s); for each D the PASS
region is C ≥ c*(D) and the FAIL region C ≤ f*(D) (the capital K⁺ rises and K⁻ falls in C), so

    power(N) = Σ_D P(D) [P(C ≥ c*(D) | D) + P(C ≤ f*(D) | D)].

The planning total is the smallest N whose power reaches the target (0.8 by default). From a pilot
of n pairs with b pass→fail and c fail→pass, the difference is the observed (c - b)/n (the line's
hypothesis: "if the difference holds") and the discordance its one-sided upper Clopper-Pearson
bound at ``discordance_level`` (at least |difference|): at a fixed difference, more discordance means
more variance and less power, so the stated power is a floor whenever the discordance is within
its bound.
"""

from __future__ import annotations

import math

import numpy as np

from oloproof_core.statistics import intervals as stats


def _regions(total: int, discordant: np.ndarray, margin: float, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """For each number of discordant pairs D: the smallest C that PASSes (D + 1: none) and the
    largest C that FAILs (-1: none), among ``total`` pairs with boundary ``-margin``."""
    m0 = (1.0 - margin) / 2.0  # -margin on the [0, 1] scale of (d + 1)/2
    levels = np.array([0.0, 0.5, 1.0])
    bets = stats._bets()
    up = np.log1p(np.multiply.outer(bets / m0, levels - m0))  # bets × levels
    down = np.log1p(np.multiply.outer(-bets / (1.0 - m0), levels - m0))
    threshold = math.log(2.0 / alpha) + math.log(len(bets))
    d = discordant.astype(float)[:, None]

    def log_k(factors: np.ndarray, c: np.ndarray) -> np.ndarray:
        c = c.astype(float)[:, None]
        logs = (d - c) * factors[:, 0] + (total - d) * factors[:, 1] + c * factors[:, 2]
        top = logs.max(axis=1)
        return top + np.log(np.exp(logs - top[:, None]).sum(axis=1))

    def first(factors: np.ndarray, rising: bool) -> np.ndarray:
        # Bisection on C for every D at once, with lo = -1 and hi = D + 1 as sentinels never evaluated.
        # rising (K⁺, PASS): C <= lo does not pass, C >= hi passes; the answer is hi.
        # falling (K⁻, FAIL): C <= lo fails, C >= hi does not fail; the answer is lo.
        lo, hi = np.full(d.shape[0], -1), discordant + 1
        while np.any(hi - lo > 1):
            open_ = hi - lo > 1
            mid = (lo + hi) // 2
            hit = log_k(factors, np.clip(mid, 0, discordant)) > threshold
            move_hi = open_ & (hit if rising else ~hit)
            hi, lo = np.where(move_hi, mid, hi), np.where(open_ & ~move_hi, mid, lo)
        return hi if rising else lo

    return first(up, True), first(down, False)


def decision_probability(total: int, discordance: float, improved: float, margin: float,
                         confidence: float = 0.95) -> float:
    """The exact probability that ``total`` pairs decide the rule with boundary ``-margin``.

    :param discordance: q, the probability that a pair is discordant.
    :param improved: s, the share of discordant pairs that went fail→pass.
    """
    from scipy.special import bdtr, bdtrc

    alpha = 1.0 - confidence
    if total < 1 or discordance <= 0.0:
        return 0.0
    spread = 9.0 * math.sqrt(total * discordance * (1 - discordance)) + 2
    low = max(0, int(total * discordance - spread))
    high = min(total, int(math.ceil(total * discordance + spread)))
    discordant = np.arange(low, high + 1)
    weights = _binomial(discordant, total, discordance)
    passing, failing = _regions(total, discordant, margin, alpha)
    # P(C >= c) = 1 - P(C <= c - 1); P(C <= f)
    up = np.where(passing <= 0, 1.0, np.where(passing > discordant, 0.0,
                  bdtrc(np.maximum(passing - 1, 0), discordant, improved)))
    down = np.where(failing < 0, 0.0, bdtr(np.maximum(failing, 0), discordant, improved))
    return float(np.sum(weights * (up + down)))


def _binomial(k: np.ndarray, n: int, p: float) -> np.ndarray:
    from scipy.special import gammaln

    if p >= 1.0:
        return (k == n).astype(float)
    return np.exp(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p))


def power_total(discordance: float, difference: float, margin: float, confidence: float = 0.95,
                power: float = 0.8, start: int = 1, limit: int = 100_000) -> int | None:
    """The smallest total N >= ``start`` whose decision probability reaches ``power``, or None.

    Power rises with N except for discreteness wiggles: the search doubles N until it is reached,
    bisects, then steps down while the totals below still reach it.
    """
    if discordance <= 0.0 or abs(difference) > discordance + 1e-12 or abs(difference + margin) < 1e-12:
        return None
    improved = min(max((discordance + difference) / (2.0 * discordance), 0.0), 1.0)

    def enough(n: int) -> bool:
        return decision_probability(n, discordance, improved, margin, confidence) >= power

    low, high = max(start, 1) - 1, max(start, 1)
    while not enough(high):
        if high >= limit:
            return None
        low, high = high, min(2 * high, limit)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def pilot_power(b: int, c: int, n: int, margin: float, confidence: float = 0.95, power: float = 0.8,
                discordance_level: float = 0.8, limit: int = 100_000) -> dict | None:
    """The power-based planning figures of a pilot of ``n`` pairs (b pass→fail, c fail→pass).

    :return: ``{"total", "power", "difference", "discordance", "discordance_level", "limit"}``
        (``total`` None when no total up to ``limit`` reaches the power), or None with no discordant pair.
    """
    if b + c == 0:
        return None
    difference = (c - b) / n
    upper = 1.0 if b + c == n else stats.beta_quantile(b + c + 1, n - b - c, discordance_level)
    discordance = max(upper, abs(difference))
    total = power_total(discordance, difference, margin, confidence, power, start=n + 1, limit=limit)
    return {"total": total, "power": power, "difference": difference, "discordance": discordance,
            "discordance_level": discordance_level, "limit": limit}
