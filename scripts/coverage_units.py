"""Print the simulated coverage tables of clustered cases and repeated trials (docs/statistics.md).

Run from the repository root: ``python scripts/coverage_units.py`` (the tables in the docs, 2,000
replicates a row) or ``--replicates 300`` for a quick look. Every row draws from its own seeded
``np.random.default_rng([SEED, table, row])``, so the output is reproducible.
tests/core/test_units_coverage.py runs the same simulation: fast settings by default, the full
table under the slow mark, where it also checks that every row below appears verbatim in the docs.

Clustered cases: ``clusters`` clusters of ``size`` cases; each cluster's pass probability is drawn
from a Beta distribution with mean ``p`` and intra-cluster correlation ``rho`` (Beta(p(1-rho)/rho,
(1-p)(1-rho)/rho); every cluster at p when rho = 0), and each case passes independently at its
cluster's probability. The target is p. Shipped: the betting interval over cluster means. Naive:
Clopper-Pearson over the cases as if independent.

Repeated trials: ``cases`` cases, each with a pass probability drawn from Beta(a, b) (how
nondeterministic the system is), each run ``trials`` times. Shipped: the betting interval over the
cases' pass fractions (target E[p]), Clopper-Pearson over cases for pass_all_k (target E[p^k]) and
for the unstable share (target 1 - E[p^k] - E[(1-p)^k]). Naive: Clopper-Pearson over every trial as
if independent (target E[p]).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oloproof_core.statistics.intervals import betting_interval, clopper_pearson

SEED = 20261616
CONFIDENCE = 0.95
# (clusters, cases a cluster, p, rho)
CLUSTER_POINTS = [(12, 5, 0.7, 0.0), (12, 5, 0.7, 0.3), (12, 5, 0.7, 0.8),
                  (30, 3, 0.85, 0.0), (30, 3, 0.85, 0.3), (30, 3, 0.85, 0.8)]
# (cases, trials, a, b): per-case pass probabilities ~ Beta(a, b)
TRIAL_POINTS = [(40, 5, 2.0, 0.7), (40, 5, 0.5, 0.5), (100, 3, 4.0, 1.0), (30, 10, 0.3, 0.2)]


def tolerance(replicates: int) -> float:
    """Three Monte-Carlo standard errors at the nominal level."""
    return 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replicates)


class Memo:
    """Intervals of discrete data depend only on the counts: compute each once."""

    def __init__(self, interval):
        self.interval, self.memory = interval, {}

    def __call__(self, key):
        if key not in self.memory:
            self.memory[key] = self.interval(key)
        return self.memory[key]


def covered(bounds: tuple[float, float], truth: float) -> bool:
    return bounds[0] <= truth <= bounds[1]


def cluster_row(index: int, clusters: int, size: int, p: float, rho: float, replicates: int) -> dict:
    rng = np.random.default_rng([SEED, 1, index])
    shipped = Memo(lambda counts: betting_interval([k / size for k in counts], CONFIDENCE))
    naive = Memo(lambda k: clopper_pearson(k, clusters * size, CONFIDENCE))
    hits = {"shipped": 0, "naive": 0}
    widths = {"shipped": 0.0, "naive": 0.0}
    for _ in range(replicates):
        if rho == 0:
            probs = np.full(clusters, p)
        else:
            scale = (1 - rho) / rho
            probs = rng.beta(p * scale, (1 - p) * scale, clusters)
        counts = rng.binomial(size, probs)
        for name, bounds in (("shipped", shipped(tuple(sorted(counts.tolist())))),
                             ("naive", naive(int(counts.sum())))):
            hits[name] += covered(bounds, p)
            widths[name] += bounds[1] - bounds[0]
    return {"coverage": {k: v / replicates for k, v in hits.items()},
            "width": {k: v / replicates for k, v in widths.items()}}


def beta_moment(a: float, b: float, k: int) -> float:
    """E[p^k] for p ~ Beta(a, b)."""
    return math.exp(math.lgamma(a + k) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(a + b + k))


def trial_row(index: int, cases: int, trials: int, a: float, b: float, replicates: int) -> dict:
    rng = np.random.default_rng([SEED, 2, index])
    mean = a / (a + b)
    all_pass = beta_moment(a, b, trials)
    unstable = 1 - all_pass - beta_moment(b, a, trials)
    truths = {"shipped": mean, "pass_all_k": all_pass, "unstable": unstable, "naive": mean}
    fractions = Memo(lambda counts: betting_interval([k / trials for k in counts], CONFIDENCE))
    exact = Memo(lambda k: clopper_pearson(k, cases, CONFIDENCE))
    pooled = Memo(lambda k: clopper_pearson(k, cases * trials, CONFIDENCE))
    hits = dict.fromkeys(truths, 0)
    widths = dict.fromkeys(truths, 0.0)
    for _ in range(replicates):
        passes = rng.binomial(trials, rng.beta(a, b, cases))
        found = {"shipped": fractions(tuple(sorted(passes.tolist()))),
                 "pass_all_k": exact(int((passes == trials).sum())),
                 "unstable": exact(int(((passes > 0) & (passes < trials)).sum())),
                 "naive": pooled(int(passes.sum()))}
        for name, bounds in found.items():
            hits[name] += covered(bounds, truths[name])
            widths[name] += bounds[1] - bounds[0]
    return {"truth": truths, "coverage": {k: v / replicates for k, v in hits.items()},
            "width": {k: v / replicates for k, v in widths.items()}}


def cluster_table(replicates: int) -> list[str]:
    lines = [f"Clustered cases, nominal level 95%, seed {SEED}, {replicates} replicates a row "
             f"(3 s.e. at nominal: {tolerance(replicates):.4f}).", "",
             "| clusters × cases | p | intra-cluster correlation | shipped: betting over clusters | mean width "
             "| naive: Clopper–Pearson over cases | mean width |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for index, (clusters, size, p, rho) in enumerate(CLUSTER_POINTS):
        r = cluster_row(index, clusters, size, p, rho, replicates)
        lines.append(f"| {clusters} × {size} | {p} | {rho} | {r['coverage']['shipped']:.4f} | "
                     f"{r['width']['shipped']:.3f} | {r['coverage']['naive']:.4f} | {r['width']['naive']:.3f} |")
    return lines


def trial_table(replicates: int) -> list[str]:
    lines = [f"Repeated trials, nominal level 95%, seed {SEED}, {replicates} replicates a row "
             f"(3 s.e. at nominal: {tolerance(replicates):.4f}).", "",
             "| cases × trials | per-case p | E[p] | shipped: betting over case means | mean width "
             "| pass_all_k: Clopper–Pearson over cases | unstable: Clopper–Pearson over cases "
             "| naive: Clopper–Pearson over trials | mean width |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for index, (cases, trials, a, b) in enumerate(TRIAL_POINTS):
        r = trial_row(index, cases, trials, a, b, replicates)
        c, w = r["coverage"], r["width"]
        lines.append(f"| {cases} × {trials} | Beta({a}, {b}) | {r['truth']['shipped']:.3f} | {c['shipped']:.4f} | "
                     f"{w['shipped']:.3f} | {c['pass_all_k']:.4f} | {c['unstable']:.4f} | {c['naive']:.4f} | "
                     f"{w['naive']:.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000)
    args = parser.parse_args()
    print("\n".join(cluster_table(args.replicates) + [""] + trial_table(args.replicates)))


if __name__ == "__main__":
    main()
