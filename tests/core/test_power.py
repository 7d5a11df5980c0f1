"""Power-based planning (statistics/power.py): the exact decision probability against simulated
compares with the shipped paired interval, the smallest total that reaches the stated power, the
conservative discordance bound, and the figure in compare's JSON and Markdown views (the terminal
keeps the documented planning line)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import CONFIG, case
from test_compare import compare, planning, policy, run_system

from oloproof_core.decisions.planning import plan
from oloproof_core.statistics.intervals import paired_difference
from oloproof_core.statistics.power import decision_probability, pilot_power, power_total


def simulated(total: int, worse: float, better: float, margin: float, replicates: int, seed: int) -> float:
    """The share of simulated compares of ``total`` pairs whose paired interval decides the rule."""
    rng = np.random.default_rng(seed)
    hits = 0
    for b, c, _ in rng.multinomial(total, [worse, better, 1 - worse - better], size=replicates):
        candidate = [0.0] * b + [1.0] * c + [1.0] * (total - b - c)
        baseline = [1.0] * b + [0.0] * c + [1.0] * (total - b - c)
        _, low, high = paired_difference(candidate, baseline)
        hits += low > -margin or high < -margin
    return hits / replicates


@pytest.mark.parametrize(("total", "worse", "better", "margin"), [(60, 0.03, 0.07, 0.05), (150, 0.2, 0.05, 0.05),
                                                                  (90, 0.05, 0.15, -0.02)])
def test_the_exact_decision_probability_matches_simulated_compares(total, worse, better, margin):
    replicates = 400
    exact = decision_probability(total, worse + better, better / (worse + better), margin)
    assert abs(simulated(total, worse, better, margin, replicates, total) - exact) <= \
        3 * math.sqrt(exact * (1 - exact) / replicates) + 1e-9


@pytest.mark.parametrize(("discordance", "difference", "margin"), [(0.1, 0.06, 0.05), (0.2, -0.15, 0.05),
                                                                   (0.1, 0.0, 0.05)])
def test_the_total_is_the_first_that_reaches_the_power(discordance, difference, margin):
    total = power_total(discordance, difference, margin)
    improved = (discordance + difference) / (2 * discordance)
    assert decision_probability(total, discordance, improved, margin) >= 0.8
    assert decision_probability(total - 1, discordance, improved, margin) < 0.8


def test_no_total_when_the_difference_sits_on_the_margin():
    assert power_total(0.1, -0.05, 0.05) is None
    assert pilot_power(0, 0, 15, 0.05) is None


def test_the_pilot_figure_is_conservative_in_discordance():
    # 1 fail→pass pair of 15: the documented line says 53 in total; deciding it 80% of the time if the
    # difference holds takes far more, at a discordance up to its upper 80% bound
    figures = pilot_power(0, 1, 15, 0.05)
    assert figures["difference"] == pytest.approx(1 / 15)
    assert 1 / 15 < figures["discordance"] < 0.25
    total = figures["total"]
    assert total > 53
    # any smaller discordance with the same difference decides at least as often
    for discordance in (1 / 15, 0.1, figures["discordance"]):
        improved = (discordance + 1 / 15) / (2 * discordance)
        assert decision_probability(total, discordance, improved, 0.05) >= 0.8 - 1e-9


class Pairs:
    """A pass/fail pairing with b pass→fail and c fail→pass pairs of n (what compare's plan reads)."""

    def __init__(self, b: int, c: int, n: int):
        self.discordant, self.n = (b, c), n


def test_the_plan_keeps_the_documented_total_and_adds_the_power_figures():
    figures = plan(Pairs(0, 1, 15), 0.05, 0.95)
    assert figures["total"] == 53 and figures["discordance"] == 7  # the documented line's numbers
    assert figures["power"]["total"] == pilot_power(0, 1, 15, 0.05)["total"]


def test_compare_shows_the_power_figure_in_json_and_markdown_not_in_the_terminal(project):
    p = project
    p.write("oloproof.yaml", CONFIG)
    p.cases([case(i) for i in range(10)])
    good, one = run_system(p, "good"), run_system(p, "one", [0])
    policy(p, "id: ni, metric: answer_correct, kind: non-inferiority, margin: 5.0")
    result = compare(p, good, one, "compare.yaml", "--json", "view.json", "--markdown", "view.md")
    assert planning(result, "ni") == ("about 35 more paired cases would decide it, if the difference holds "
                                      "(45 in total at 10% discordance)")
    assert "of the time" not in result.out
    entry = json.loads((p.root / "view.json").read_text())["decisions"][0]
    figures = pilot_power(0, 1, 10, 0.05)
    assert entry["power"]["total"] == figures["total"] and entry["power"]["more"] == figures["total"] - 10
    line = (f"about {figures['total']} paired cases would decide it 80% of the time if the difference holds "
            f"(at up to {round(100 * figures['discordance'])}% discordance)")
    assert entry["power"]["line"] == line
    assert f"- ni: {line}" in (p.root / "view.md").read_text()
