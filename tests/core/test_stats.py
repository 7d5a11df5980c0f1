"""Tests of oloproof_core.stats: the documented numbers, independent computations, properties."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from oloproof_core.statistics.intervals import (
    betting_interval, ceil_to, clopper_pearson, floor_to, paired_difference, planning_total, round_half_up,
)

ROOT = Path(__file__).resolve().parents[2]


def percent(k: int, n: int) -> tuple[float, float, float]:
    """Display a proportion as the pages do: percent to 1 dp, bounds outward to 0.1%."""
    lower, upper = clopper_pearson(k, n)
    return round_half_up(100 * k / n, 1), floor_to(100 * lower, 1), ceil_to(100 * upper, 1)


def pairs(n: int, b: int, c: int) -> tuple[list[float], list[float]]:
    """Build n pass/fail pairs with b pass-to-fail and c fail-to-pass, the rest unchanged."""
    same = n - b - c
    candidate = [0.0] * b + [1.0] * c + [1.0] * (same // 2) + [0.0] * (same - same // 2)
    baseline = [1.0] * b + [0.0] * c + [1.0] * (same // 2) + [0.0] * (same - same // 2)
    return candidate, baseline


def points(candidate, baseline) -> tuple[float, float, float]:
    """Display a paired difference as the pages do: points to 1 dp, bounds outward to 0.1."""
    mean, lower, upper = paired_difference(candidate, baseline)
    return round_half_up(100 * mean, 1), floor_to(100 * lower, 1), ceil_to(100 * upper, 1)


# --- The documented numbers (STATS.md) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "shown"),
    [
        (9, 13, (69.2, 38.5, 91.0)),
        (12, 13, (92.3, 63.9, 99.9)),
        (13, 13, (100.0, 75.2, 100.0)),
        (11, 15, (73.3, 44.8, 92.3)),
        (14, 15, (93.3, 68.0, 99.9)),
        (12, 12, (100.0, 73.5, 100.0)),
    ],
)
def test_documented_proportions(k, n, shown):
    assert percent(k, n) == shown


def test_twelve_of_thirteen_upper_is_the_closed_form():
    assert clopper_pearson(12, 13)[1] == pytest.approx(0.975 ** (1 / 13), abs=1e-12)


def test_documented_ndcg_mean():
    values = [1.0] * 10 + [1 / math.log2(3)] * 2 + [0.0]
    lower, upper = betting_interval(values)
    assert lower == pytest.approx(0.50638, abs=5e-6)
    assert upper == pytest.approx(0.98954, abs=5e-6)
    shown = (round_half_up(float(np.mean(values)), 3), floor_to(lower, 3), ceil_to(upper, 3))
    assert shown == (0.866, 0.506, 0.990)


def test_documented_betting_on_pass_fail():
    lower, upper = betting_interval([1.0] * 9 + [0.0] * 4)
    assert (floor_to(100 * lower, 1), ceil_to(100 * upper, 1)) == (29.0, 95.5)


@pytest.mark.parametrize(
    ("n", "b", "c", "shown"),
    [
        (15, 0, 1, (6.7, -26.5, 40.8)),
        (13, 0, 1, (7.7, -29.8, 45.5)),
        (13, 0, 0, (0.0, -33.6, 33.6)),
    ],
)
def test_documented_paired_differences(n, b, c, shown):
    assert points(*pairs(n, b, c)) == shown


def test_paired_interval_depends_only_on_differences():
    # 13 unchanged ndcg scores show the same interval as 13 unchanged pass/fail pairs.
    scores = np.random.default_rng(7).uniform(0, 1, 13)
    assert points(scores, scores) == (0.0, -33.6, 33.6)
    high, _ = pairs(13, 0, 0)
    assert points(high, high) == points([0.0] * 13, [0.0] * 13)


@pytest.mark.parametrize(("margin", "total"), [(0.05, 53), (0.02, 83)])
def test_documented_planning_totals(margin, total):
    assert planning_total(0, 1, 15, margin) == total


# --- Clopper-Pearson against statsmodels -------------------------------------------------------

CP_SIZES = [*range(1, 41), 50, 73, 100, 128, 157, 199, 200]


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_clopper_pearson_matches_statsmodels(confidence):
    from statsmodels.stats.proportion import proportion_confint

    for n in CP_SIZES:
        k = np.arange(n + 1)
        want_lower, want_upper = proportion_confint(k, n, alpha=1 - confidence, method="beta")
        got = np.array([clopper_pearson(int(j), n, confidence) for j in k])
        np.testing.assert_allclose(got[:, 0], want_lower, rtol=0, atol=1e-10)
        np.testing.assert_allclose(got[:, 1], want_upper, rtol=0, atol=1e-10)


def test_clopper_pearson_edges_and_errors():
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    assert clopper_pearson(0, 5)[0] == 0.0
    assert clopper_pearson(5, 5)[1] == 1.0
    for k, n in [(-1, 5), (6, 5), (0, -1)]:
        with pytest.raises(ValueError, match="0 <= k <= n"):
            clopper_pearson(k, n)
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson(1, 2, confidence=1.0)


def test_clopper_pearson_is_monotone():
    bounds = np.array([clopper_pearson(k, 30) for k in range(31)])
    assert np.all(np.diff(bounds[:, 0]) > 0)
    assert np.all(np.diff(bounds[:, 1]) > 0)
    narrow, wide = clopper_pearson(9, 13, 0.9), clopper_pearson(9, 13, 0.99)
    assert wide[0] < narrow[0] < 9 / 13 < narrow[1] < wide[1]


# --- The betting interval against a brute force ------------------------------------------------


def brute_betting(values, confidence=0.95, lo=0.0, hi=1.0, grid=4000):
    """Compute the betting interval directly: a product over every value, grid scan, bisection."""
    y = (np.asarray(values, dtype=float) - lo) / (hi - lo)
    bets = np.array([d / 20 for d in range(1, 20)])
    threshold = 2 / (1 - confidence)
    mean = y.mean()

    def rejects(ms, upward):
        # Capital at each candidate mean in ms: average over bets of the product over all values.
        ms = np.atleast_1d(ms)[:, None, None]
        scale = bets[None, :, None] / ms if upward else -bets[None, :, None] / (1 - ms)
        products = np.exp(np.sum(np.log(1 + scale * (y[None, None, :] - ms)), axis=2))
        return products.mean(axis=1) >= threshold

    def boundary(inside, outside, upward):
        # `inside` is not rejected, `outside` is; bisect the crossing.
        for _ in range(100):
            middle = (inside + outside) / 2
            if rejects(middle, upward)[0]:
                outside = middle
            else:
                inside = middle
        return (inside + outside) / 2

    def scan(path, upward):
        # Walk away from the mean along a dense grid to the first rejected candidate.
        for start in range(1, len(path), 250):
            hits = np.flatnonzero(rejects(path[start : start + 250], upward))
            if hits.size:
                index = start + hits[0]
                return boundary(path[index - 1], path[index], upward)
        return None

    lower = scan(np.linspace(mean, 1e-13, grid), True)
    upper = scan(np.linspace(mean, 1 - 1e-13, grid), False)
    lower = 0.0 if lower is None else lower
    upper = 1.0 if upper is None else upper
    return lo + lower * (hi - lo), lo + upper * (hi - lo)


def random_datasets():
    rng = np.random.default_rng(20240601)
    yield "uniform-20", rng.uniform(0, 1, 20), 0.0, 1.0
    yield "beta-60", rng.beta(2, 5, 60), 0.0, 1.0
    yield "beta-skewed-200", rng.beta(8, 1, 200), 0.0, 1.0
    yield "levels-with-ties", rng.choice([0.0, 0.25, 0.63, 1.0], 40), 0.0, 1.0
    yield "bernoulli-31", rng.binomial(1, 0.7, 31).astype(float), 0.0, 1.0
    yield "scale-1-to-5", rng.integers(1, 6, 25).astype(float), 1.0, 5.0
    yield "differences", rng.uniform(0, 1, 30) - rng.uniform(0, 1, 30), -1.0, 1.0
    yield "tiny-3", np.array([0.2, 0.9, 0.4]), 0.0, 1.0


@pytest.mark.parametrize("case", list(random_datasets()), ids=lambda case: case[0])
@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_betting_interval_matches_brute_force(case, confidence):
    _, values, lo, hi = case
    got = betting_interval(values, confidence, lo, hi)
    want = brute_betting(values, confidence, lo, hi)
    assert got == pytest.approx(want, abs=1e-6)


def test_brute_force_reproduces_the_documented_ndcg():
    values = [1.0] * 10 + [1 / math.log2(3)] * 2 + [0.0]
    assert brute_betting(values) == pytest.approx((0.50638, 0.98954), abs=5e-6)


def test_betting_interval_edges_and_errors():
    assert betting_interval([]) == (0.0, 1.0)
    assert betting_interval([], lo=-1.0, hi=1.0) == (-1.0, 1.0)
    assert betting_interval([0.0] * 10)[0] == 0.0
    assert betting_interval([1.0] * 10)[1] == 1.0
    with pytest.raises(ValueError, match="must lie in"):
        betting_interval([0.5, 1.2])
    with pytest.raises(ValueError, match="finite"):
        betting_interval([0.5, float("nan")])
    with pytest.raises(ValueError, match="lo < hi"):
        betting_interval([0.5], lo=1.0, hi=1.0)


def test_betting_interval_properties():
    rng = np.random.default_rng(11)
    base = rng.beta(2, 3, 12)
    previous_width = math.inf
    for repeat in (1, 2, 4, 8, 16):
        values = np.tile(base, repeat)
        lower, upper = betting_interval(values)
        assert lower < values.mean() < upper
        assert upper - lower < previous_width  # narrows with n
        previous_width = upper - lower
    # Wider at higher confidence; equivariant under reflection and affine rescaling.
    ninety, ninety_nine = betting_interval(base, 0.9), betting_interval(base, 0.99)
    assert ninety_nine[0] < ninety[0] and ninety[1] < ninety_nine[1]
    lower, upper = betting_interval(base)
    assert betting_interval(1 - base) == pytest.approx((1 - upper, 1 - lower), abs=1e-10)
    assert betting_interval(2 + 3 * base, lo=2, hi=5) == pytest.approx(
        (2 + 3 * lower, 2 + 3 * upper), abs=1e-10
    )
    # Order does not matter (the capital process is evaluated on grouped values).
    assert betting_interval(base[::-1]) == pytest.approx((lower, upper), abs=1e-12)


def test_betting_interval_is_wider_than_clopper_pearson_on_pass_fail():
    for k, n in [(9, 13), (12, 13), (30, 50)]:
        betting = betting_interval([1.0] * k + [0.0] * (n - k))
        exact = clopper_pearson(k, n)
        assert betting[0] < exact[0] and exact[1] < betting[1]


# --- Paired differences and planning -----------------------------------------------------------


def test_paired_difference_basics():
    rng = np.random.default_rng(3)
    candidate, baseline = rng.uniform(0, 1, 25), rng.uniform(0, 1, 25)
    mean, lower, upper = paired_difference(candidate, baseline)
    assert mean == pytest.approx(float(np.mean(candidate - baseline)))
    assert lower < mean < upper
    assert (lower, upper) == pytest.approx(
        betting_interval(candidate - baseline, lo=-1.0, hi=1.0), abs=1e-12
    )
    swapped = paired_difference(baseline, candidate)
    assert swapped == pytest.approx((-mean, -upper, -lower), abs=1e-10)
    with pytest.raises(ValueError, match="pair up"):
        paired_difference([1.0, 0.0], [1.0])
    empty = paired_difference([], [])
    assert math.isnan(empty[0]) and empty[1:] == (-1.0, 1.0)


def decided_at(total: int, b: int, c: int, n: int, margin: float) -> bool:
    """Apply STATS §4 literally at one total: scale counts, compute the interval, compare."""
    worse, better = math.floor(total * b / n + 0.5), math.floor(total * c / n + 0.5)
    _, lower, upper = paired_difference(*pairs(total, worse, better))
    return lower > -margin or upper < -margin


@pytest.mark.parametrize(
    ("b", "c", "n", "margin"),
    [(0, 1, 15, 0.05), (0, 1, 15, 0.02), (1, 2, 13, 0.05), (2, 0, 15, 0.05), (1, 4, 20, 0.1)],
)
def test_planning_total_is_the_first_deciding_total(b, c, n, margin):
    total = planning_total(b, c, n, margin)
    assert total is not None and total > n
    assert decided_at(total, b, c, n, margin)
    assert not any(decided_at(t, b, c, n, margin) for t in range(n + 1, total))


def possible(total: int, b: int, c: int, n: int) -> bool:
    return math.floor(total * b / n + 0.5) + math.floor(total * c / n + 0.5) <= total


@pytest.mark.parametrize(("b", "c", "n", "margin"), [(11, 11, 22, 0.60), (5, 4, 9, 0.3), (3, 0, 3, 0.1), (7, 6, 13, 0.5)])
def test_planning_total_only_evaluates_possible_datasets(b, c, n, margin):
    # Regression: with every pair discordant, both scaled counts round up at odd totals; (11, 11, 22) at
    # 23 pairs asked for 12 + 12 = 24 discordant pairs among 23 and returned 23.
    total = planning_total(b, c, n, margin)
    assert total is not None and possible(total, b, c, n)
    assert decided_at(total, b, c, n, margin)
    assert not any(possible(t, b, c, n) and decided_at(t, b, c, n, margin) for t in range(n + 1, total))
    if (b, c, n) == (11, 11, 22):
        assert not possible(23, b, c, n) and total == 24


def test_planning_total_none_cases_and_errors():
    assert planning_total(0, 0, 13, 0.05) is None  # no discordant pair: nothing to plan
    assert planning_total(1, 1, 15, 0.0) is None  # a zero difference never clears a zero margin
    assert planning_total(0, 1, 15, 0.02, limit=82) is None
    assert planning_total(0, 1, 15, 0.02, limit=83) == 83
    assert planning_total(0, 1, 15, 0.05, limit=10) is None
    with pytest.raises(ValueError, match="margin"):
        planning_total(0, 1, 15, 5.0)
    with pytest.raises(ValueError, match="b \\+ c <= n"):
        planning_total(10, 10, 15, 0.05)


def test_planning_total_is_fast_to_the_limit():
    planning_total(0, 1, 15, 0.02)  # the first call imports scipy
    start = time.perf_counter()
    assert planning_total(1, 1, 15, 0.0, limit=100_000) is None
    assert planning_total(0, 1, 15, 0.02) == 83
    assert time.perf_counter() - start < 1.0


# --- Rounding helpers and import cost ----------------------------------------------------------


def test_outward_rounding():
    assert floor_to(38.574, 1) == 38.5 and ceil_to(99.805, 1) == 99.9
    assert ceil_to(100 * 1.0, 1) == 100.0 and floor_to(0.0, 1) == 0.0
    assert floor_to(0.29 * 100, 1) == 29.0  # 28.999999999999996 is float noise for 29.0
    assert ceil_to(0.1 + 0.2, 1) == 0.3  # 0.30000000000000004 likewise
    assert floor_to(-26.41, 1) == -26.5 and ceil_to(40.71, 1) == 40.8
    assert floor_to(0.50638, 3) == 0.506 and ceil_to(0.98954, 3) == 0.990
    assert math.copysign(1.0, ceil_to(-1e-17, 1)) == 1.0  # never shows -0.0
    assert round_half_up(0.6925, 3) == 0.693 and round_half_up(-0.0665, 3) == -0.067
    assert round_half_up(100 / 15, 1) == 6.7


def test_import_does_not_load_scipy():
    code = ("import sys, oloproof_core.statistics.intervals; assert not {'scipy', 'numpy'} & set(sys.modules), "
            "'scipy or numpy loaded'")
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = [sys.executable, "-W", "error", "-c", code]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_shown_estimate_rounds_ties_away_from_zero():
    # Regression: 1/16 showed 6.2% (half-even on the binary value); docs/statistics.md says ties away from zero.
    from decimal import ROUND_HALF_UP, Decimal

    from oloproof_core.statistics.display import fixed, percent, percent_of, points_cells, proportion_cells

    assert percent_of(1, 16) == "6.3%" and proportion_cells(1, 16, 0.0, 0.3, 0, 0)[0] == "6.3%"
    for n in range(1, 201):
        for k in range(n + 1):
            want = (Decimal(100 * k) / Decimal(n)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
            assert percent_of(k, n) == f"{want}%", (k, n)
    assert percent(0.0625) == "6.3%" and percent(0.69230769) == "69.2%"
    assert fixed(0.6925, 3) == "0.693" and fixed(0.8655, 3) == "0.866" and fixed(-0.0625, 3) == "-0.063"
    assert points_cells(1 / 16, -0.2, 0.3)[0] == "+6.3 points" and points_cells(-1 / 16, -0.3, 0.2)[0] == "-6.3 points"
    assert points_cells(-1e-18, -0.336, 0.336)[0] == "+0.0 points"  # never "-0.0"


def test_the_beta_quantile_equals_scipys_betaincinv_up_to_100000_trials():
    """The pure-Python exact route behind every Clopper-Pearson bound, against scipy's."""
    import random

    from scipy.special import betaincinv

    from oloproof_core.statistics.intervals import beta_quantile

    rng = random.Random(19)
    worst = 0.0
    for n in (1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10_000, 100_000):
        ks = {0, 1, 2, n // 10, n // 3, n // 2, n - 1, n} | {rng.randrange(n + 1) for _ in range(4)}
        for k in sorted(x for x in ks if 0 <= x <= n):
            for confidence in (0.8, 0.9, 0.95, 0.99):
                alpha = 1 - confidence
                for a, b, p in ((k, n - k + 1, alpha / 2), (k + 1, n - k, 1 - alpha / 2)):
                    if a > 0 and b > 0:
                        worst = max(worst, abs(beta_quantile(a, b, p) - float(betaincinv(a, b, p))))
    assert worst < 1e-12, worst
    assert beta_quantile(3, 4, 0.0) == 0.0 and beta_quantile(3, 4, 1.0) == 1.0


def test_every_shown_clopper_pearson_bound_is_the_one_scipy_gives():
    """Every bound printed at 0.1% for n <= 200 (and a sample up to 10,000) is the one scipy's
    betaincinv rounds to: the documented numbers cannot move."""
    import random

    from scipy.special import betaincinv

    def shown(k: int, n: int, lower: float, upper: float) -> tuple[float, float]:
        return floor_to(100 * lower, 1), ceil_to(100 * upper, 1)

    rng = random.Random(7)
    sizes = [(k, n) for n in range(1, 201) for k in range(n + 1)]
    sizes += [(rng.randrange(n + 1), n) for n in (rng.randrange(201, 10_001) for _ in range(200))]
    for k, n in sizes:
        reference = (0.0 if k == 0 else float(betaincinv(k, n - k + 1, 0.025)),
                     1.0 if k == n else float(betaincinv(k + 1, n - k, 0.975)))
        assert shown(k, n, *clopper_pearson(k, n)) == shown(k, n, *reference), (k, n)
