"""The variance-adaptive betting confidence sequence (predictable plug-in bets): an independent
brute-force computation, bets that depend on the past only, false PASS and false FAIL under repeated
looks, seeded coverage, and width against the default betting interval on the same draws.

Monte-Carlo tolerance: 3·√(0.95·0.05/R) (0.0276 at R = 560).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import case

from oloproof_core.engine.sequential import AnytimeMetric
from oloproof_core.statistics import adaptive
from oloproof_core.statistics.adaptive import adaptive_betting_interval
from oloproof_core.statistics.intervals import betting_interval

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE


def brute_force(values: list[float], confidence: float = CONFIDENCE, horizon: int | None = None) -> tuple[float, float]:
    """The same confidence set by a plain loop over the values and a fine grid of candidate means."""
    alpha = 1 - confidence
    bets, total, squares = [], 0.0, 0.0
    for i, y in enumerate(values, start=1):
        scale = horizon if horizon is not None else i * math.log(1 + i)
        bets.append(math.sqrt(2 * math.log(2 / alpha) / (scale * (0.25 + squares) / i)))
        total += y
        squares += (y - (0.5 + total) / (i + 1)) ** 2
    kept = []
    for m in np.linspace(0.0005, 0.9995, 1999):
        up = sum(math.log(1 + min(b, 0.5 / m) * (y - m)) for b, y in zip(bets, values))
        down = sum(math.log(1 - min(b, 0.5 / (1 - m)) * (y - m)) for b, y in zip(bets, values))
        if max(up, down) < math.log(2 / alpha):
            kept.append(m)
    return min(kept), max(kept)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_adaptive_interval_matches_a_brute_force_computation(seed):
    rng = np.random.default_rng(seed)
    values = rng.beta(0.5, 0.5, 40).tolist()
    for horizon in (None, 40, 200):
        low, high = adaptive_betting_interval(values, horizon=horizon)
        want_low, want_high = brute_force(values, horizon=horizon)
        assert low == pytest.approx(want_low, abs=6e-4) and high == pytest.approx(want_high, abs=6e-4)
        assert low <= float(np.mean(values)) <= high


def test_each_bet_depends_on_the_past_only():
    # The bets on the first t values are the same whether the sequence stops at t or goes on: a look
    # never re-sizes a bet already placed (before the fix, bets were sized with len(values)).
    y = np.random.default_rng(7).random(300)
    for horizon in (None, 300):
        full = adaptive.bet_sizes(y, ALPHA, horizon)
        for t in (1, 10, 57, 299):
            assert np.array_equal(adaptive.bet_sizes(y[:t], ALPHA, horizon), full[:t])
        path = adaptive.log_capital(y, 0.4, ALPHA, True, horizon, path=True)
        assert path[56] == pytest.approx(float(adaptive.log_capital(y[:57], 0.4, ALPHA, True, horizon)))


def test_the_capital_criterion_is_the_interval():
    # A min rule PASSes when the lower bound is at least min, i.e. when K⁺(min) >= 2/α (K⁺ falls in m);
    # it FAILs when the upper bound is below min, i.e. K⁻(min) >= 2/α.
    rng = np.random.default_rng(11)
    for _ in range(40):
        n = int(rng.integers(5, 120))
        y = rng.beta(0.7, 0.7, n) if rng.random() < 0.5 else (rng.random(n) < 0.7).astype(float)
        m = float(rng.uniform(0.05, 0.95))
        low, high = adaptive_betting_interval(y, horizon=150)
        threshold = math.log(2 / ALPHA)
        assert (low >= m) == (adaptive.log_capital(y, m, ALPHA, True, 150) >= threshold)
        assert (high < m) == (adaptive.log_capital(y, m, ALPHA, False, 150) >= threshold)


def test_a_sequential_run_tunes_the_bets_to_the_suite_size():
    metric = AnytimeMetric(None, "adaptive-betting", total=200, batch=10)
    values = np.random.default_rng(3).random(60).tolist()
    assert metric.interval(values[:30], CONFIDENCE) == adaptive_betting_interval(values[:30], horizon=200)


def false_decisions(y: np.ndarray, m: float, batch: int, horizon: int | None) -> tuple[float, float]:
    """False PASS and false FAIL with the true mean at ``m``: the shipped capital recomputed from the
    values seen at each look (as a sequential run recomputes the interval), a decision at any look."""
    threshold = math.log(2 / ALPHA)
    passed = np.zeros(len(y), bool)
    failed = np.zeros(len(y), bool)
    for t in range(batch, y.shape[1] + 1, batch):
        passed |= adaptive.log_capital(y[:, :t], m, ALPHA, True, horizon) >= threshold
        failed |= adaptive.log_capital(y[:, :t], m, ALPHA, False, horizon) >= threshold
    return float(passed.mean()), float(failed.mean())


@pytest.mark.parametrize(("draw", "mean", "total", "batch"), [
    (lambda rng, shape: (rng.random(shape) < 0.5).astype(float), 0.5, 300, 10),
    (lambda rng, shape: rng.beta(0.5, 0.5, shape), 0.5, 200, 5),
], ids=["pass/fail", "scores"])
def test_false_pass_and_fail_under_repeated_looks_stay_below_nominal(draw, mean, total, batch):
    # The documented table (scripts/simulate_sequences.py) has the full grid; this is its fast subset.
    y = draw(np.random.default_rng([total, batch]), (1000, total))
    false_pass, false_fail = false_decisions(y, mean, batch, horizon=total)
    assert false_pass <= ALPHA / 2 and false_fail <= ALPHA / 2
    anytime_pass, anytime_fail = false_decisions(y, mean, batch, horizon=None)
    assert anytime_pass <= ALPHA / 2 and anytime_fail <= ALPHA / 2




def test_adaptive_interval_edges():
    assert adaptive_betting_interval([]) == (0.0, 1.0)
    low, high = adaptive_betting_interval([1.0] * 30)
    assert high == 1.0 and 0.75 < low < 1.0
    low, high = adaptive_betting_interval([0.5] * 20, lo=-1.0, hi=1.0)
    assert low < 0.5 < high


POINTS = [("pass/fail p = 0.5", 200, lambda rng, n: (rng.random(n) < 0.5).astype(float), 0.5, True),
          ("Beta(0.5, 0.5)", 50, lambda rng, n: rng.beta(0.5, 0.5, n), 0.5, True),
          ("Beta(0.5, 0.5)", 200, lambda rng, n: rng.beta(0.5, 0.5, n), 0.5, True),
          ("Beta(5, 1)", 50, lambda rng, n: rng.beta(5, 1, n), 5 / 6, False)]


@pytest.mark.slow
@pytest.mark.parametrize(("data", "n", "draw", "mean", "spread"), POINTS, ids=[f"{p[0]}-{p[1]}" for p in POINTS])
def test_adaptive_interval_covers_and_is_narrower_for_spread_out_data(data, n, draw, mean, spread):
    replicates = 560
    rng = np.random.default_rng([n, int(100 * mean)])
    covered, widths, default_widths = 0, [], []
    for _ in range(replicates):
        values = draw(rng, n)
        low, high = adaptive_betting_interval(values, horizon=n)
        covered += low <= mean <= high
        widths.append(high - low)
        default_low, default_high = betting_interval(values)
        default_widths.append(default_high - default_low)
    assert covered / replicates >= CONFIDENCE - 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replicates)
    if spread:  # high variance: narrower than the default at the same validity
        assert np.mean(widths) < 0.95 * np.mean(default_widths)
    else:  # low variance: the default grid of bets does better, which is why it stays the default
        assert np.mean(widths) > np.mean(default_widths)


@pytest.mark.slow
def test_a_policy_selects_the_adaptive_interval_for_sequential_runs(project):
    project.cases([case(i, ok=i % 10 != 0) for i in range(100)])
    with (project.root / "oloproof.yaml").open("a") as config:
        config.write("policy:\n  version: 1\n  rules: [{id: floor, metric: answer_correct, min: 0.5}]\n"
                     "  sequential: {until_decided: true, interval: adaptive-betting}\n")
    result = project.run("run")
    assert result.code == 0, result
    assert "intervals are variance-adaptive betting confidence sequences, valid at every look" in result.out
    text = (project.root / "oloproof.yaml").read_text().replace("adaptive-betting", "adaptive")
    project.write("oloproof.yaml", text)
    bad = project.run("run")
    assert bad.code == 2 and "$.policy.sequential.interval: unknown sequential interval 'adaptive'" in bad.err
