"""Print the simulated coverage table of conversations: turns correlated inside a conversation.

Run from the repository root: ``python scripts/coverage_conversations.py`` (the table in
docs/statistics.md, 1,000 replicates a row) or ``--replicates 200`` for a quick look. Every row
draws from its own seeded ``np.random.default_rng([SEED, row])``, so the output is reproducible.
tests/core/test_conversation_coverage.py runs the same simulation: one row with few replicates by
default, the full table under the slow mark, where it also checks that every line below appears
verbatim in the docs.

A suite of ``G`` conversations; conversation ``g`` has ``2 + g mod 4`` turns (2 to 5, fixed by the
suite, as the cases file fixes them). Each turn is one turn case judged pass or fail. Two models of
the correlation between the turns of one conversation:

- **beta-binomial**: each conversation's pass probability is drawn from
  Beta(p(1−ρ)/ρ, (1−p)(1−ρ)/ρ) (mean p; every conversation at p when ρ = 0), and each of its turns
  passes independently at that probability. The correlation of two turns' pass/fail outcomes in one
  conversation is exactly ρ; every turn's pass rate is p.
- **latent-normal, later turns harder**: turn k of conversation g passes when
  ``μ_k + √ρ·u_g + √(1−ρ)·e_gk > 0`` with ``u_g``, ``e_gk`` independent standard normals and
  ``Φ(μ_k) = TURN_RATES[k]`` (a follow-up fails more often than the first question). ρ is the
  intra-class correlation of the latent propensity; the correlation of the pass/fail outcomes is
  smaller, and the table prints its mean over the pairs of turns that share a conversation.

Each interval is the one a run computes, through the run's own code (``units.unit_metrics`` over
``units.group`` of the turn judgments, the conversation as the cluster, with the ``proportion``
metric of plugins/oloproof_proportion), each against its own target:

- **turn-weighted** (``cluster_estimand: cases``): the case-weighted interval of ``weighted.py``;
  target the share of turns that pass, ``Σ_g Σ_k P(pass_gk) / Σ_g n_g``.
- **conversation means** (``cluster_estimand: cluster-means``): the betting interval over the
  conversations' pass fractions; target ``(1/G) Σ_g (1/n_g) Σ_k P(pass_gk)``.
- **per turn (naive)**: the ``proportion`` metric's Clopper–Pearson interval over the turns as if
  they were independent cases (a run without the conversation as the cluster); target the share
  of turns that pass.
- **all turns**: the conversation criterion ``X (all turns)``, one verdict a conversation (pass when
  every turn passed) recorded on its last turn and excluded from the others, as a run records it;
  the run's interval is then Clopper–Pearson over conversations. Target the mean over the suite's
  conversations of P(every turn passes): E[q^n] of the Beta for the beta-binomial model, and
  ``∫ Π_k Φ((μ_k + √ρ·u)/√(1−ρ)) φ(u) du`` (Gauss–Hermite quadrature) for the latent-normal one.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))

from oloproof_proportion import Proportion

from oloproof_core.model.records import Judgment
from oloproof_core.statistics.units import Design, group, unit_metrics

SEED = 20261238
CONFIDENCE = 0.95
REPLICATES = 1000
#: P(pass) of turn 1, 2, ... in the latent-normal model: follow-ups are harder
TURN_RATES = (0.9, 0.8, 0.7, 0.65, 0.6)
LATENT = np.array([NormalDist().inv_cdf(rate) for rate in TURN_RATES])  # μ_k, with Φ(μ_k) = TURN_RATES[k]
# (model, conversations, p (beta-binomial; None: TURN_RATES), rho)
POINTS = [("beta-binomial", 12, 0.7, rho) for rho in (0.0, 0.3, 0.5, 0.8)] + \
         [("beta-binomial", 40, 0.85, rho) for rho in (0.3, 0.8)] + \
         [("latent-normal", 20, None, rho) for rho in (0.3, 0.5, 0.8)]
ESTIMANDS = {"turn-weighted": "cases", "conversation means": "cluster-means"}


def tolerance(replicates: int) -> float:
    """Three Monte-Carlo standard errors of a coverage estimate at the nominal level."""
    return 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replicates)


def turns_of(conversations: int) -> list[int]:
    """The suite's conversation lengths: 2, 3, 4, 5, 2, 3, ..."""
    return [2 + g % 4 for g in range(conversations)]


def turn_rates(model: str, p: float | None, turns: int) -> np.ndarray:
    """Each turn's pass probability, turn 1 first."""
    return np.full(turns, p) if model == "beta-binomial" else np.asarray(TURN_RATES[:turns])


def targets(model: str, conversations: int, p: float | None) -> dict[str, float]:
    """The true turn-weighted rate and mean of conversation rates (exact, from the model)."""
    rates = [turn_rates(model, p, n) for n in turns_of(conversations)]
    weighted = float(sum(r.sum() for r in rates) / sum(r.size for r in rates))
    return {"turn-weighted": weighted, "conversation means": float(np.mean([r.mean() for r in rates])),
            "per turn (naive)": weighted}


def all_turns_target(model: str, conversations: int, p: float | None, rho: float) -> float:
    """The mean over the suite's conversations of the probability that every turn passes."""
    chances = []
    for n in turns_of(conversations):
        if model == "beta-binomial":
            a, b = (p * (1 - rho) / rho, (1 - p) * (1 - rho) / rho) if rho > 0 else (None, None)
            chances.append(p ** n if rho == 0 else beta_moment(a, b, n))
        else:
            nodes, weights = np.polynomial.hermite_e.hermegauss(80)  # ∫ f(u) φ(u) du, u standard normal
            normal = NormalDist()
            inside = [math.prod(normal.cdf((mu + math.sqrt(rho) * u) / math.sqrt(1 - rho)) for mu in LATENT[:n])
                      for u in nodes]
            chances.append(float(np.dot(weights, inside) / math.sqrt(2 * math.pi)))
    return float(np.mean(chances))


def beta_moment(a: float, b: float, k: int) -> float:
    """E[q^k] for q ~ Beta(a, b)."""
    return math.exp(math.lgamma(a + k) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(a + b + k))


def outcome_correlation(model: str, conversations: int, p: float | None, rho: float) -> float:
    """The mean correlation of the pass/fail outcomes of two turns of one conversation, over every
    such pair of the suite (ρ itself for the beta-binomial model)."""
    if model == "beta-binomial" or rho == 0:
        return rho
    from scipy.stats import multivariate_normal, norm

    total, pairs = 0.0, 0
    for n in turns_of(conversations):
        rates = turn_rates(model, p, n)
        for j in range(n):
            for k in range(j + 1, n):
                a, b = rates[j], rates[k]
                both = multivariate_normal.cdf([norm.ppf(a), norm.ppf(b)], mean=[0, 0], cov=[[1, rho], [rho, 1]])
                total += (both - a * b) / math.sqrt(a * (1 - a) * b * (1 - b))
                pairs += 1
    return total / pairs


def draw(rng: np.random.Generator, model: str, p: float | None, rho: float, turns: list[int]) -> list[np.ndarray]:
    """One simulated suite: each conversation's pass/fail outcomes, turn by turn."""
    if model == "beta-binomial":
        if rho == 0:
            probabilities = np.full(len(turns), p)
        else:
            scale = (1 - rho) / rho
            probabilities = rng.beta(p * scale, (1 - p) * scale, len(turns))
        return [rng.random(n) < q for q, n in zip(probabilities, turns)]
    shared = rng.standard_normal(len(turns))
    return [LATENT[:n] + math.sqrt(rho) * u + math.sqrt(1 - rho) * rng.standard_normal(n) > 0
            for u, n in zip(shared, turns)]


class RunInterval:
    """The interval a run reports for one criterion of a conversation suite, through the run's code:
    the turn judgments grouped by conversation (``units.group``) and summarised by the unit metric
    of the design (``units.unit_metrics``). It depends only on the conversations' (passes, turns)
    pairs, so each multiset of them is computed once."""

    def __init__(self, estimand: str | None, all_turns: bool = False):
        design = Design(cluster="metadata.conversation", max_cluster_size=5, estimand=estimand or "cases")
        self.clustered, self.all_turns = estimand is not None, all_turns
        self.metric = unit_metrics({"c": Proportion()}, design)["c"] if self.clustered else Proportion()
        self.memory: dict = {}

    def __call__(self, pairs: tuple[tuple[int, int], ...]) -> tuple[float, float]:
        if self.all_turns:  # what the interval reads: how many conversations passed every turn
            key = (sum(s == n for s, n in pairs), len(pairs))
        else:
            key = pairs if self.clustered else sum(s for s, _ in pairs)
        if key not in self.memory:
            judgments, keys = [], []
            for g, (passed, turns) in enumerate(pairs):
                if self.all_turns:  # one verdict a conversation, on its last turn (engine/conversations.py)
                    judgments += [Judgment.excluded("judged_on_last_turn")] * (turns - 1)
                    judgments.append(Judgment.of(passed == turns))
                else:
                    judgments += [Judgment.of(t < passed) for t in range(turns)]
                keys += [f"conversation-{g}"] * turns
            units = group(judgments, keys) if self.clustered else judgments
            summary = self.metric.summarize(units, CONFIDENCE)
            self.memory[key] = (summary.low, summary.high)
        return self.memory[key]


@functools.cache  # the slow test checks the table and each row's coverage: each row is simulated once
def row(index: int, replicates: int) -> dict:
    """Coverage and mean width of each interval over ``replicates`` simulated suites of one point."""
    model, conversations, p, rho = POINTS[index]
    rng = np.random.default_rng([SEED, index])
    turns = turns_of(conversations)
    truth = targets(model, conversations, p)
    truth["all turns"] = all_turns_target(model, conversations, p, rho)
    intervals = {"turn-weighted": RunInterval("cases"), "conversation means": RunInterval("cluster-means"),
                 "per turn (naive)": RunInterval(None), "all turns": RunInterval("cases", all_turns=True)}
    hits = dict.fromkeys(intervals, 0)
    widths = dict.fromkeys(intervals, 0.0)
    for _ in range(replicates):
        outcomes = draw(rng, model, p, rho, turns)
        pairs = tuple(sorted((int(o.sum()), o.size) for o in outcomes))
        for name, interval in intervals.items():
            low, high = interval(pairs)
            hits[name] += low <= truth[name] <= high
            widths[name] += high - low
    return {"targets": truth, "correlation": outcome_correlation(model, conversations, p, rho),
            "coverage": {k: v / replicates for k, v in hits.items()},
            "width": {k: v / replicates for k, v in widths.items()}}


def table(replicates: int = REPLICATES) -> list[str]:
    lines = [f"Conversations of 2–5 turns, nominal level 95%, seed {SEED}, {replicates} replicates a row "
             f"(3 s.e. at nominal: {tolerance(replicates):.4f}).", "",
             "| model | conversations (turns) | turn pass rate | ICC | pass/fail correlation "
             "| turn-weighted, over conversations | mean width | conversation means | mean width "
             "| per turn (naive): Clopper–Pearson over turns | mean width "
             "| all turns: P(every turn passes) | Clopper–Pearson over conversations |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for index, (model, conversations, p, rho) in enumerate(POINTS):
        r = row(index, replicates)
        c, w, t = r["coverage"], r["width"], r["targets"]
        rate = f"{p}" if p is not None else (f"{', '.join(str(x) for x in TURN_RATES)} by turn "
                                             f"({t['turn-weighted']:.3f} of turns, "
                                             f"{t['conversation means']:.3f} a conversation)")
        lines.append(f"| {model} | {conversations} ({sum(turns_of(conversations))}) | {rate} | {rho} | "
                     f"{r['correlation']:.2f} | {c['turn-weighted']:.4f} | {w['turn-weighted']:.3f} | "
                     f"{c['conversation means']:.4f} | {w['conversation means']:.3f} | "
                     f"{c['per turn (naive)']:.4f} | {w['per turn (naive)']:.3f} | {t['all turns']:.3f} | "
                     f"{c['all turns']:.4f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=REPLICATES)
    args = parser.parse_args()
    print("\n".join(table(args.replicates)))


if __name__ == "__main__":
    main()
