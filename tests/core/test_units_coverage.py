"""Simulated coverage of the intervals of clustered cases and repeated trials.

The simulation is scripts/coverage_units.py (seeded). Fast settings (300 replicates a row) run by
default; the full table (2,000 replicates a row) runs under the slow mark and must appear verbatim
in docs/statistics.md. Every shipped interval must cover at or above its nominal level, up to three
Monte-Carlo standard errors; the naive interval that ignores the structure must under-cover where
the structure is strong, or the simulation would show nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("coverage_units", ROOT / "scripts" / "coverage_units.py")
units = importlib.util.module_from_spec(spec)
spec.loader.exec_module(units)

FAST = 300


@pytest.mark.parametrize("index", range(len(units.CLUSTER_POINTS)))
def test_the_clustered_interval_covers(index):
    clusters, size, p, rho = units.CLUSTER_POINTS[index]
    row = units.cluster_row(index, clusters, size, p, rho, FAST)
    assert row["coverage"]["shipped"] >= units.CONFIDENCE - units.tolerance(FAST)
    if rho >= 0.3:  # the naive interval over cases as if independent under-covers
        assert row["coverage"]["naive"] < units.CONFIDENCE - units.tolerance(FAST)


@pytest.mark.parametrize("index", range(len(units.TRIAL_POINTS)))
def test_the_trial_intervals_cover(index):
    cases, trials, a, b = units.TRIAL_POINTS[index]
    row = units.trial_row(index, cases, trials, a, b, FAST)
    for name in ("shipped", "pass_all_k", "unstable"):
        assert row["coverage"][name] >= units.CONFIDENCE - units.tolerance(FAST), name


def test_pooling_trials_as_independent_under_covers():
    cases, trials, a, b = units.TRIAL_POINTS[1]
    assert units.trial_row(1, cases, trials, a, b, FAST)["coverage"]["naive"] < 0.9


def test_the_targets_are_the_beta_moments():
    from scipy import integrate
    from scipy.stats import beta

    for a, b, k in ((2.0, 0.7, 5), (0.5, 0.5, 5), (4.0, 1.0, 3)):
        reference = integrate.quad(lambda p, a=a, b=b, k=k: p**k * beta.pdf(p, a, b), 0, 1)[0]
        assert abs(units.beta_moment(a, b, k) - reference) < 1e-7


@pytest.mark.slow
def test_the_full_tables_cover_and_are_the_documented_ones():
    docs = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    full = units.cluster_table(2000) + units.trial_table(2000)
    for line in full:
        assert line in docs, line
    tol = units.tolerance(2000)
    for index, (clusters, size, p, rho) in enumerate(units.CLUSTER_POINTS):
        assert units.cluster_row(index, clusters, size, p, rho, 2000)["coverage"]["shipped"] >= 0.95 - tol
    for index, (cases, trials, a, b) in enumerate(units.TRIAL_POINTS):
        coverage = units.trial_row(index, cases, trials, a, b, 2000)["coverage"]
        assert min(coverage["shipped"], coverage["pass_all_k"], coverage["unstable"]) >= 0.95 - tol


@pytest.mark.parametrize(("n", "b", "c", "margin"), [(15, 0, 1, 0.05), (15, 0, 1, 0.02), (20, 1, 3, 0.05),
                                                      (40, 0, 4, 0.1)])
def test_graded_planning_matches_the_discordant_planning_on_pass_fail_pairs(n, b, c, margin):
    from oloproof_core.statistics import intervals as stats
    from oloproof_core.statistics.units import planning_total

    differences = [-1.0] * b + [1.0] * c + [0.0] * (n - b - c)
    assert planning_total(differences, margin, 0.95) == stats.planning_total(b, c, n, margin, 0.95)


def test_graded_planning_is_the_first_deciding_total():
    """By brute force: at the total returned the scaled differences' interval clears the boundary,
    and at no smaller total does it."""
    import numpy as np

    from oloproof_core.statistics.intervals import betting_interval
    from oloproof_core.statistics.units import planning_total

    differences = [0.4, 0.2, 0.2, 0.0, 0.0, 0.0, -0.2, 0.6, 0.0, 0.2]
    total = planning_total(differences, 0.05, 0.95)
    levels, counts = np.unique(differences, return_counts=True)

    def decides(total: int) -> bool:
        scaled = np.floor(counts * total / len(differences) + 0.5)
        top = int(np.argmax(counts))
        scaled[top] = total - (scaled.sum() - scaled[top])
        low, high = betting_interval(np.repeat(levels, scaled.astype(int)), 0.95, -1.0, 1.0)
        return low > -0.05 or high < -0.05

    assert total is not None and decides(total)
    assert not any(decides(t) for t in range(len(differences) + 1, total))
