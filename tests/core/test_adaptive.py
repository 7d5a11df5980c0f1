"""The variance-adaptive betting interval (predictable plug-in bets): an independent brute-force
computation, seeded coverage, and width against the default betting interval on the same draws.

Monte-Carlo tolerance: 3·√(0.95·0.05/R) (0.0276 at R = 560).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import case

from oloproof_core.statistics.adaptive import adaptive_betting_interval
from oloproof_core.statistics.intervals import betting_interval

CONFIDENCE = 0.95


def brute_force(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The same confidence set by a plain loop over the values and a fine grid of candidate means."""
    alpha, n = 1 - confidence, len(values)
    bets, total, squares = [], 0.0, 0.0
    for i, y in enumerate(values, start=1):
        bets.append(math.sqrt(2 * math.log(2 / alpha) / (n * (0.25 + squares) / i)))
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
    low, high = adaptive_betting_interval(values)
    want_low, want_high = brute_force(values)
    assert low == pytest.approx(want_low, abs=6e-4) and high == pytest.approx(want_high, abs=6e-4)
    assert low <= float(np.mean(values)) <= high


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
        low, high = adaptive_betting_interval(values)
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
