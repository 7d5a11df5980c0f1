"""The pass/fail confidence sequences of statistics/sequences.py: the beta-binomial mixture is a
martingale of mean 1 and its interval is its capital's criterion; the group-sequential boundaries
spend at most α/2 a side, checked by an independent exact computation; a run that goes to the end
decides at least 90% as often as a fixed-n Clopper-Pearson run; and a policy selects either."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import case

from oloproof_core.engine.sequential import AnytimeMetric
from oloproof_core.statistics import sequences
from oloproof_core.statistics.intervals import betting_interval, clopper_pearson

ALPHA = 0.05
THRESHOLD = math.log(2 / ALPHA)


def pmf(n: int, p: float) -> np.ndarray:
    return np.array([math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)])


@pytest.mark.parametrize(("m", "t", "horizon"), [(0.5, 20, 100), (0.8, 60, 60), (0.93, 40, 500)])
@pytest.mark.parametrize("upward", [True, False])
def test_the_mixture_has_mean_one_when_the_rate_is_m(m, t, horizon, upward):
    # E_m[M_t(m)] = 1: a mixture of likelihood ratios (the martingale Ville's inequality needs)
    r = sequences.mixture_concentration(horizon, ALPHA)
    values = np.exp(sequences.log_mixture(np.arange(t + 1), t, m, r, upward))
    assert float(pmf(t, m) @ values) == pytest.approx(1.0, rel=1e-9)


def test_the_mixture_interval_is_its_capital_criterion_and_monotone():
    rng = np.random.default_rng(5)
    for _ in range(60):
        t = int(rng.integers(1, 400))
        s = int(rng.integers(0, t + 1))
        horizon = t + int(rng.integers(0, 500))
        r = sequences.mixture_concentration(horizon, ALPHA)
        grid = np.linspace(0.01, 0.99, 197)
        up = np.array([float(sequences.log_mixture(s, t, m, r, True)) for m in grid])
        down = np.array([float(sequences.log_mixture(s, t, m, r, False)) for m in grid])
        up, down = np.maximum(up, -1e300), np.maximum(down, -1e300)  # a tail mass below the floats: log 0
        assert np.all(np.diff(up) <= 1e-9) and np.all(np.diff(down) >= -1e-9)  # K⁺ falls, K⁻ rises in m
        low, high = sequences.mixture_interval(s, t, horizon=horizon)
        m = float(rng.uniform(0.02, 0.98))
        assert (low >= m) == (float(sequences.log_mixture(s, t, m, r, True)) >= THRESHOLD), (s, t, m)
        assert (high < m) == (float(sequences.log_mixture(s, t, m, r, False)) >= THRESHOLD), (s, t, m)


@pytest.mark.parametrize("n", [50, 200, 1000])
def test_the_mixture_is_narrower_than_the_betting_sequence(n):
    for p in (0.5, 0.8, 0.9):
        s = round(n * p)
        low, high = sequences.mixture_interval(s, n, horizon=n)
        b_low, b_high = betting_interval([1.0] * s + [0.0] * (n - s))
        assert high - low < b_high - b_low


def independent_crossing(m: float, looks: tuple[int, ...], bounds: tuple[int, ...]) -> float:
    """P_m(S_k >= c_k at some look), by a plain dynamic programme over every count (no numpy)."""
    dist = {0: 1.0}
    before, crossed = 0, 0.0
    for n_k, c in zip(looks, bounds):
        step = n_k - before
        weights = pmf(step, m)
        new: dict[int, float] = {}
        for s, w in dist.items():
            for k in range(step + 1):
                new[s + k] = new.get(s + k, 0.0) + w * weights[k]
        crossed += sum(w for s, w in new.items() if s >= c)
        dist = {s: w for s, w in new.items() if s < c}
        before = n_k
    return crossed


@pytest.mark.parametrize(("m", "total", "batch"), [(0.8, 200, 10), (0.5, 97, 10), (0.95, 300, 25), (0.3, 60, 1)])
def test_group_sequential_boundaries_spend_at_most_half_alpha(m, total, batch):
    looks = sequences.looks_of(total, batch)
    assert looks[-1] == total and len(looks) == math.ceil(total / batch)
    bounds = sequences.crossing_bounds(m, looks, total, ALPHA)
    crossed = independent_crossing(m, looks, bounds)
    assert crossed <= ALPHA / 2 + 1e-12
    assert crossed > 0.7 * ALPHA / 2  # and spends most of it (discreteness keeps some): not needlessly strict
    # little is spent early (O'Brien-Fleming type): the first half of the looks spend under a tenth
    half = looks[: len(looks) // 2]
    assert independent_crossing(m, half, bounds[: len(half)]) < ALPHA / 20


def test_group_sequential_interval_is_its_boundary_criterion():
    rng = np.random.default_rng(9)
    for _ in range(40):
        total, batch = int(rng.integers(20, 300)), int(rng.integers(1, 30))
        looks = sequences.looks_of(total, batch)
        k = int(rng.integers(0, len(looks)))
        t = looks[k]
        s = int(rng.binomial(t, rng.uniform(0.2, 0.95)))
        low, high = sequences.group_sequential_interval(s, t, total, batch)
        m = round(float(rng.uniform(0.05, 0.95)), 3)
        assert (low >= m) == (s >= sequences.crossing_bounds(m, looks[: k + 1], total, ALPHA)[-1]), (s, t, m)
        assert (high < m) == (t - s >= sequences.crossing_bounds(1 - m, looks[: k + 1], total, ALPHA)[-1])
        assert low <= s / t <= high


def decision_rate(passing, failing, looks, p) -> float:
    dist, before, decided = np.ones(1), 0, 0.0
    for t, up, down in zip(looks, passing, failing):
        dist = np.convolve(dist, pmf(t - before, p))
        before = t
        decided += float(dist[up:].sum()) + (float(dist[: down + 1].sum()) if down >= 0 else 0.0)
        dist[up:] = 0.0
        if down >= 0:
            dist[: down + 1] = 0.0
    return decided


@pytest.mark.parametrize(("total", "batch", "m", "p"), [(500, 10, 0.8, 0.85), (200, 10, 0.8, 0.87),
                                                         (300, 25, 0.5, 0.59)])
def test_a_group_sequential_run_that_reaches_its_end_decides_as_often_as_a_fixed_run(total, batch, m, p):
    looks = sequences.looks_of(total, batch)
    up = sequences.crossing_bounds(m, looks, total, ALPHA)
    down = sequences.crossing_bounds(1 - m, looks, total, ALPHA)
    passing, failing = list(up), [t - c for t, c in zip(looks, down)]
    sequential = decision_rate(passing, failing, looks, p)
    fixed_low = [clopper_pearson(k, total)[0] >= m for k in range(total + 1)]
    fixed_high = [clopper_pearson(k, total)[1] < m for k in range(total + 1)]
    weights = pmf(total, p)
    fixed = float(weights @ np.array(fixed_low, float) + weights @ np.array(fixed_high, float))
    assert sequential >= 0.9 * fixed, (sequential, fixed)


def test_scores_fall_back_to_the_betting_sequence():
    scores = [0.2, 0.9, 0.75, 1.0, 0.5] * 6
    for method in ("beta-binomial", "group-sequential"):
        metric = AnytimeMetric(None, method, total=100, batch=10)
        assert metric.interval(scores, 0.95) == betting_interval(scores)
        passes = [1.0, 0.0, 1.0, 1.0] * 10
        assert metric.interval(passes, 0.95) != betting_interval(passes)
    assert sequences.pass_fail_counts([1.0, 0.0, 1.0]) == (2, 3)
    assert sequences.pass_fail_counts([1.0, 0.5]) is None


@pytest.mark.parametrize(("interval", "words"), [
    ("beta-binomial", "intervals are beta-binomial mixture confidence sequences (betting for scores), valid at "
                      "every look"),
    ("group-sequential", "intervals are group-sequential, alpha spent over the planned looks (betting for scores), "
                         "valid at every look"),
])
def test_a_policy_selects_a_pass_fail_sequence(project, interval, words):
    project.cases([case(i, ok=i % 10 != 0) for i in range(40)])
    with (project.root / "oloproof.yaml").open("a") as config:
        config.write("policy:\n  version: 1\n  rules: [{id: floor, metric: answer_correct, min: 0.5}]\n"
                     f"  sequential: {{until_decided: true, interval: {interval}}}\n")
    result = project.run("run")
    assert result.code == 0, result
    assert words in result.out


@pytest.mark.parametrize(("total", "batch"), [(200, 10), (97, 10), (60, 1)])
def test_the_planned_looks_table_is_the_recursion_at_every_grid_rate(total, batch):
    looks = sequences.looks_of(total, batch)
    table = sequences.boundary_table(total, batch, ALPHA)
    for j in (0, 1, 137, 500, 800, 999, 1000):
        assert tuple(table[j]) == sequences.crossing_bounds(j / sequences.GRID, looks, total, ALPHA), j
    # between planned looks (a summary that leaves missing cases out) the bisection path answers
    low, high = sequences.group_sequential_interval(30, 37, total, batch)
    assert 0.0 < low < 30 / 37 < high < 1.0
