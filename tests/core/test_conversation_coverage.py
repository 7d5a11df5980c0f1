"""Simulated coverage of a conversation suite's turn criteria, the conversation as the cluster.

The simulation is scripts/coverage_conversations.py (seeded): conversations of 2–5 turns whose
pass/fail turns are correlated inside a conversation (beta-binomial, and latent-normal with later
turns harder; intra-class correlation 0.3, 0.5, 0.8). By default one row with few replicates; the
full table (1,000 replicates a row) under the slow mark, where it must appear verbatim in
docs/statistics.md. The interval a run reports over conversations (turn-weighted, the mean of
conversation means, and the conversation criterion X (all turns)) must cover at or above 95% up
to three Monte-Carlo standard errors; the per-turn interval that treats turns as independent
cases must fall below that where the turns are correlated, or the simulation would show nothing.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("coverage_conversations", ROOT / "scripts" / "coverage_conversations.py")
sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sim)

FAST = 100
SHIPPED = ("turn-weighted", "conversation means", "all turns")
NAIVE = "per turn (naive)"


def test_intervals_over_conversations_cover_where_per_turn_ones_do_not():
    index = sim.POINTS.index(("beta-binomial", 12, 0.7, 0.8))
    coverage = sim.row(index, FAST)["coverage"]
    floor = sim.CONFIDENCE - sim.tolerance(FAST)
    assert min(coverage[name] for name in SHIPPED) >= floor, coverage
    assert coverage[NAIVE] < floor, coverage


def test_the_interval_is_the_one_a_run_computes():
    """RunInterval goes through units.group and the unit metric; it is the case-weighted interval of
    the conversations' (passes, turns), the betting interval of their pass fractions,
    Clopper–Pearson over the turns, and, for X (all turns), Clopper–Pearson over conversations."""
    from oloproof_core.statistics.intervals import betting_interval, clopper_pearson
    from oloproof_core.statistics.weighted import case_weighted_interval

    pairs = ((0, 2), (1, 3), (2, 2), (3, 5), (4, 4), (4, 5), (5, 5))
    passes, turns = [s for s, _ in pairs], [n for _, n in pairs]
    assert sim.RunInterval("cases")(pairs) == pytest.approx(case_weighted_interval(passes, turns, 0.95))
    assert sim.RunInterval("cluster-means")(pairs) == pytest.approx(
        betting_interval([s / n for s, n in pairs], 0.95, 0.0, 1.0))
    assert sim.RunInterval(None)(pairs) == pytest.approx(clopper_pearson(sum(passes), sum(turns), 0.95))
    # X (all turns): one verdict a conversation; three of the seven passed every turn
    assert sim.RunInterval("cases", all_turns=True)(pairs) == pytest.approx(clopper_pearson(3, 7, 0.95))


@pytest.mark.parametrize("index", [1, 3, 7, 8])
def test_the_targets_and_correlations_are_the_simulated_ones(index):
    """The exact targets and outcome correlations against the model's own draws (20,000 suites'
    worth of conversations), within four standard errors."""
    model, conversations, p, rho = sim.POINTS[index]
    rng = np.random.default_rng([7, index])
    turns = [5] * 4000  # long conversations: every turn index and pair of turns is drawn
    outcomes = np.array([o for _ in range(5) for o in sim.draw(rng, model, p, rho, turns)], dtype=float)
    rates = sim.turn_rates(model, p, 5)
    for k in range(5):
        assert abs(outcomes[:, k].mean() - rates[k]) < 4 * math.sqrt(rates[k] * (1 - rates[k]) / len(outcomes))
    pairs = [np.corrcoef(outcomes[:, j], outcomes[:, k])[0, 1] for j in range(5) for k in range(j + 1, 5)]
    # the model's mean over a suite's pairs is a weighted mean of the same pair correlations
    expected = sim.outcome_correlation(model, 4, p, rho)  # conversations of 2, 3, 4, 5 turns
    weights = [sum(1 for n in (2, 3, 4, 5) if n > k) for j in range(5) for k in range(j + 1, 5)]
    assert abs(np.average(pairs, weights=weights) - expected) < 0.03
    # the first n turns of a five-turn conversation are drawn as a conversation of n turns
    every = np.mean([outcomes[:, :n].all(axis=1).mean() for n in (2, 3, 4, 5)])
    assert abs(every - sim.all_turns_target(model, 4, p, rho)) < 4 * math.sqrt(0.25 / len(outcomes))
    truth = sim.targets(model, conversations, p)
    lengths = sim.turns_of(conversations)
    assert truth["turn-weighted"] == pytest.approx(sum(rates[:n].sum() for n in lengths) / sum(lengths))


@pytest.mark.slow
def test_the_full_table_covers_and_is_the_documented_one():
    docs = (ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    for line in sim.table(sim.REPLICATES):
        assert line in docs, line
    floor = sim.CONFIDENCE - sim.tolerance(sim.REPLICATES)
    for index in range(len(sim.POINTS)):
        found = sim.row(index, sim.REPLICATES)
        assert min(found["coverage"][name] for name in SHIPPED) >= floor, (index, found)
        if found["correlation"] >= 0.25:  # turns clearly alike: treating them as independent under-covers
            assert found["coverage"][NAIVE] < floor, (index, found)
