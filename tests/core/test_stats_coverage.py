"""Simulated coverage of the interval methods in oloproof_core.statistics.intervals (slow).

All methods are finite-sample valid, so coverage must not fall below the nominal level by more than
Monte-Carlo error (3 standard errors at the nominal level). Every simulation is seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from oloproof_core.statistics.intervals import betting_interval, clopper_pearson, paired_difference

pytestmark = pytest.mark.slow

CONFIDENCE = 0.95


def tolerance(replicates: int) -> float:
    return 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replicates)


def coverage(bounds, truth: float) -> float:
    bounds = np.asarray(bounds)
    return float(np.mean((bounds[:, 0] <= truth) & (truth <= bounds[:, 1])))


def exact_interval(k: int, n: int) -> tuple[float, float]:
    return clopper_pearson(k, n, CONFIDENCE)


def pass_fail_betting(k: int, n: int) -> tuple[float, float]:
    return betting_interval([1.0] * k + [0.0] * (n - k), CONFIDENCE)


def wald(k: int, n: int) -> tuple[float, float]:
    """The textbook normal-approximation interval, known to under-cover at small n."""
    p = k / n
    half = 1.959963984540054 * math.sqrt(p * (1 - p) / n)
    return p - half, p + half


def simulate_pass_fail(interval, n: int, p: float, replicates: int, seed: int) -> float:
    successes = np.random.default_rng(seed).binomial(n, p, replicates)
    table = {k: interval(k, n) for k in np.unique(successes).tolist()}
    return coverage([table[k] for k in successes.tolist()], p)


def exact_pass_fail(interval, n: int, p: float) -> float:
    from scipy.stats import binom

    covered = [k for k in range(n + 1) if interval(k, n)[0] <= p <= interval(k, n)[1]]
    return float(binom.pmf(covered, n, p).sum())


@pytest.mark.parametrize(("n", "p"), [(13, 0.7), (13, 0.95), (50, 0.5), (200, 0.98)])
def test_clopper_pearson_coverage(n, p):
    replicates = 4000
    simulated = simulate_pass_fail(exact_interval, n, p, replicates, seed=n * 1000 + int(p * 100))
    assert simulated >= CONFIDENCE - tolerance(replicates)
    assert exact_pass_fail(exact_interval, n, p) >= CONFIDENCE - 1e-12


def test_clopper_pearson_exact_coverage_over_a_grid_of_p():
    for n in (5, 13, 40):
        worst = min(exact_pass_fail(exact_interval, n, p) for p in np.linspace(0.01, 0.99, 99))
        assert worst >= CONFIDENCE - 1e-12


def test_the_simulation_detects_under_coverage():
    # The Wald interval under-covers at n = 13, p = 0.95; the same check must catch it.
    replicates = 4000
    simulated = simulate_pass_fail(wald, 13, 0.95, replicates, seed=1)
    assert simulated < CONFIDENCE - tolerance(replicates)


@pytest.mark.parametrize(("n", "p"), [(13, 0.7), (50, 0.9), (200, 0.5)])
def test_betting_coverage_on_pass_fail(n, p):
    replicates = 4000
    simulated = simulate_pass_fail(pass_fail_betting, n, p, replicates, seed=7 * n + int(p * 10))
    assert simulated >= CONFIDENCE - tolerance(replicates)
    assert exact_pass_fail(pass_fail_betting, n, p) >= CONFIDENCE - 1e-12


@pytest.mark.parametrize(
    ("n", "a", "b"), [(13, 2.0, 5.0), (50, 2.0, 5.0), (50, 0.5, 0.5), (30, 5.0, 1.0)]
)
def test_betting_coverage_on_beta_scores(n, a, b):
    rng = np.random.default_rng([n, int(10 * a), int(10 * b)])
    replicates = 3000
    bounds = [betting_interval(rng.beta(a, b, n), CONFIDENCE) for _ in range(replicates)]
    assert coverage(bounds, a / (a + b)) >= CONFIDENCE - tolerance(replicates)


@pytest.mark.parametrize(
    ("n", "worse", "better"), [(15, 0.05, 0.10), (50, 0.10, 0.10), (120, 0.02, 0.08)]
)
def test_paired_coverage_on_pass_fail(n, worse, better):
    rng = np.random.default_rng([n, int(100 * worse), int(100 * better)])
    replicates = 4000
    draws = rng.multinomial(n, [worse, better, 1 - worse - better], replicates)
    table = {}
    for b, c, same in map(tuple, draws.tolist()):
        if (b, c) not in table:
            candidate = [0.0] * b + [1.0] * c + [1.0] * same
            baseline = [1.0] * b + [0.0] * c + [1.0] * same
            table[b, c] = paired_difference(candidate, baseline, CONFIDENCE)[1:]
    bounds = [table[b, c] for b, c, _ in draws.tolist()]
    assert coverage(bounds, better - worse) >= CONFIDENCE - tolerance(replicates)


@pytest.mark.parametrize(("n", "weight"), [(13, 0.7), (50, 0.0), (100, 0.5)])
def test_paired_coverage_on_scores(n, weight):
    # candidate = w·baseline + (1 - w)·Beta(3, 2) with baseline ~ Beta(2, 2): mean difference
    # (1 - w)(0.6 - 0.5), and the pairs are correlated when w > 0.
    rng = np.random.default_rng([n, int(10 * weight)])
    replicates = 3000
    bounds = []
    for _ in range(replicates):
        baseline = rng.beta(2, 2, n)
        candidate = weight * baseline + (1 - weight) * rng.beta(3, 2, n)
        bounds.append(paired_difference(candidate, baseline, CONFIDENCE)[1:])
    assert coverage(bounds, (1 - weight) * 0.1) >= CONFIDENCE - tolerance(replicates)


def hoeffding(k: int, n: int) -> tuple[float, float]:
    half = math.sqrt(math.log(2 / (1 - CONFIDENCE)) / (2 * n))
    return max(0.0, k / n - half), min(1.0, k / n + half)


def test_hoeffding_is_also_valid_and_narrower_at_one_half():
    # docs/statistics.md: the betting interval's width is not the price of validity.
    n, p = 200, 0.5
    assert exact_pass_fail(hoeffding, n, p) >= CONFIDENCE
    betting_low, betting_high = pass_fail_betting(100, n)
    low, high = hoeffding(100, n)
    assert high - low == pytest.approx(0.192, abs=5e-4) and betting_high - betting_low == pytest.approx(0.233, abs=5e-4)
    # ... while the betting interval adapts to low variance, where Hoeffding's width stays 0.192
    low, high = pass_fail_betting(190, n)
    assert high - low < 0.1


def false_fail(n: int, threshold: float) -> float:
    """P(a min rule FAILs) when the true pass rate is exactly at ``threshold``, by enumeration."""
    from scipy.stats import binom

    return float(sum(binom.pmf(k, n, threshold) for k in range(n + 1) if exact_interval(k, n)[1] < threshold))


def false_pass(n: int, threshold: float) -> float:
    from scipy.stats import binom

    return float(sum(binom.pmf(k, n, threshold) for k in range(n + 1) if exact_interval(k, n)[0] >= threshold))


@pytest.mark.parametrize(("n", "threshold", "any_of_20"), [(50, 0.7, 0.219), (200, 0.8, 0.379), (50, 0.9, 0.392)])
def test_many_rules_inflate_false_fail_not_false_pass(n, threshold, any_of_20):
    # Each threshold decision is a one-sided test at 2.5%; with 20 independent rules at their thresholds the
    # chance that one FAILs (and blocks the gate) is 1 - (1 - f)^20, the figures of docs/statistics.md.
    fail, passed = false_fail(n, threshold), false_pass(n, threshold)
    assert fail <= 0.025 and passed <= 0.025
    assert 1 - (1 - fail) ** 20 == pytest.approx(any_of_20, abs=5e-4)


def test_the_documented_coverage_table_is_what_the_script_prints():
    # docs/statistics.md's table is the output of scripts/coverage_table.py; the discrete rows (the cheap ones)
    # are regenerated here with the documented seed and replicates and must appear there verbatim.
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("coverage_table", root / "scripts" / "coverage_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    page = (root / "docs" / "statistics.md").read_text(encoding="utf-8")
    assert "Nominal level 95%, seed 20240601." in page
    rows = [*script.proportion_rows("clopper", script.CLOPPER_POINTS, 4000, 20240601),
            *script.proportion_rows("betting", script.BETTING_POINTS, 4000, 20240601),
            *script.paired_rows(script.PAIRED_POINTS[:2], 4000, 20240601)]
    for row in rows:
        assert script.format_row(row) in page.splitlines(), script.format_row(row)
