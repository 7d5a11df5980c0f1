"""Print the false-PASS tables of a compare floor on clustered and on trials runs (docs/statistics.md).

Run from the repository root: ``python scripts/floor_units.py`` (the tables in the docs, 2,000
replicates a cell) or ``--replicates 200`` for a quick look. Every cell draws from its own seeded
``np.random.default_rng([SEED, table, cell])``, so the output is reproducible.
tests/core/test_floor_units.py runs the same simulation: a fast subset by default, the full grid
under the slow mark (where it also checks that every row appears verbatim in the docs).

Every replicate sits exactly at the rule's threshold (``min`` = the true value), so every PASS is a
false PASS; a valid one-sided decision PASSes at most α/2 = 2.5% of the time.

- **shipped**: ``decisions.threshold.decide_on_run``, what ``oloproof compare``'s floor and the run's
  own gate both call, on the run's recorded design: over clusters with the run's estimand (the mean
  of cluster means, or case-weighted), over the cases' trial means with trials.
- **before**: what compare's floor did before it read the run's design: the plain ``proportion``
  metric (Clopper–Pearson) over the stored case judgments, as if every case were independent (with
  trials, on the rounded sum of the cases' trial means).

Clustered cases: ``clusters`` clusters of 1 to 6 cases (cluster g has 1 + g mod 6, fixed by the
suite); each cluster's pass probability is drawn from Beta(p(1−ρ)/ρ, (1−p)(1−ρ)/ρ) (mean p,
intra-cluster correlation ρ), and each case passes at its cluster's probability. Both estimands are
then p. "Informative sizes" rows draw the clusters of 5 and 6 cases from a lower mean (``p_large``)
than the others: the case-weighted target Σ n_g μ_g / Σ n_g is then below the mean of cluster means,
and the rule's ``min`` is each estimand's own target; the last column decides the mean of cluster means
against the case-weighted target, the question it does not answer.

Trials: ``cases`` cases, each with a pass probability drawn from Beta(p·s, (1−p)·s) (mean p,
concentration s), each run ``trials`` times; a case's value is its pass fraction. The target is p.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oloproof_core.decisions.threshold import Rule, decide_on_run, decide_threshold
from oloproof_core.model.records import Judgment
from oloproof_core.statistics import intervals as stats

SEED = 20261203
CONFIDENCE = 0.95
LIMIT = 0.025  # the one-sided level of a rule at 95%
# (clusters, p, rho, p_large): p_large None draws every cluster from mean p
CLUSTER_POINTS = [(g, 0.7, rho, None) for g in (5, 10, 20, 40) for rho in (0.1, 0.3, 0.5, 0.8)] + \
                 [(20, 0.85, 0.3, 0.55), (40, 0.85, 0.3, 0.55)]
# (cases, trials, p, concentration)
TRIAL_POINTS = [(10, 3, 0.7, 2.0), (20, 5, 0.7, 0.5), (40, 3, 0.8, 2.0), (40, 5, 0.6, 0.5)]
FAST_CLUSTERS = [3, 7, 12, 17]  # indices of CLUSTER_POINTS in the default tests
FAST_TRIALS = [0, 1]


class Proportion:
    """The plugin ``proportion`` metric (plugins/oloproof_proportion), without the plugin manager."""

    name, pass_fail = "proportion", True

    def interval(self, values, confidence):
        return stats.clopper_pearson(int(round(sum(values))), len(values), confidence)


def tolerance(replicates: int) -> float:
    """Three Monte-Carlo standard errors at the one-sided level."""
    return 3 * math.sqrt(LIMIT * (1 - LIMIT) / replicates)


def sizes_of(clusters: int) -> list[int]:
    return [1 + g % 6 for g in range(clusters)]


def cluster_means(p: float, rho: float, p_large: float | None, sizes: list[int]) -> np.ndarray:
    return np.array([p_large if p_large is not None and n >= 5 else p for n in sizes])


@functools.cache  # the slow test checks the table and the cells: each cell is simulated once
def cluster_cell(index: int, clusters: int, p: float, rho: float, p_large: float | None,
                 replicates: int) -> dict:
    """False PASS at the threshold of one cell, over ``replicates`` simulated clustered suites."""
    rng = np.random.default_rng([SEED, 0, index])
    sizes = sizes_of(clusters)
    means = cluster_means(p, rho, p_large, sizes)
    case_target = float(np.dot(sizes, means) / sum(sizes))
    keys = [f"g{g}" for g, n in enumerate(sizes) for _ in range(n)]
    headers = {estimand: {"design": {"trials": 1, "cluster": "metadata.source", "max_cluster_size": 6,
                                     "estimand": estimand}} for estimand in ("cluster-means", "cases")}
    targets = {"cluster-means": float(means.mean()), "cases": case_target}
    passed = {"cluster-means": 0, "cases": 0, "before": 0, "cluster-means at the case rate": 0}
    for _ in range(replicates):
        probabilities = rng.beta(means * (1 - rho) / rho, (1 - means) * (1 - rho) / rho)
        outcomes = [bool(rng.random() < q) for q, n in zip(probabilities, sizes) for _ in range(n)]
        judgments = [Judgment.of(ok) for ok in outcomes]
        for estimand, header in headers.items():
            rule = Rule(id="floor", metric="answer_correct", min=targets[estimand])
            passed[estimand] += decide_on_run(rule, header, Proportion(), judgments, keys,
                                              CONFIDENCE).verdict == "PASS"
        rule = Rule(id="floor", metric="answer_correct", min=case_target)
        passed["before"] += decide_threshold(rule, judgments, Proportion(), CONFIDENCE).verdict == "PASS"
        if p_large is not None:  # the other question: the mean of cluster means against the case rate
            passed["cluster-means at the case rate"] += decide_on_run(
                rule, headers["cluster-means"], Proportion(), judgments, keys, CONFIDENCE).verdict == "PASS"
    return {"clusters": clusters, "cases": sum(sizes), "p": p, "rho": rho, "p_large": p_large,
            "targets": targets, "false_pass": {k: v / replicates for k, v in passed.items()}}


@functools.cache
def trial_cell(index: int, cases: int, trials: int, p: float, concentration: float, replicates: int) -> dict:
    """False PASS at the threshold of one trials cell."""
    rng = np.random.default_rng([SEED, 1, index])
    header = {"design": {"trials": trials, "cluster": None, "max_cluster_size": 10}}
    rule = Rule(id="floor", metric="answer_correct", min=p)
    passed = {"shipped": 0, "before": 0}
    for _ in range(replicates):
        probabilities = rng.beta(p * concentration, (1 - p) * concentration, size=cases)
        fractions = rng.binomial(trials, probabilities) / trials
        judgments = [Judgment(status="pass" if f == 1.0 else "fail", value=float(f)) for f in fractions]
        passed["shipped"] += decide_on_run(rule, header, Proportion(), judgments, None, CONFIDENCE).verdict == "PASS"
        passed["before"] += decide_threshold(rule, judgments, Proportion(), CONFIDENCE).verdict == "PASS"
    return {"cases": cases, "trials": trials, "p": p, "concentration": concentration,
            "false_pass": {k: v / replicates for k, v in passed.items()}}


def cluster_table(replicates: int, indices=None) -> list[str]:
    lines = [f"Compare floor on clustered runs, false PASS at the threshold, seed {SEED}, {replicates} replicates "
             f"a row (3 s.e. at 0.025: {tolerance(replicates):.4f}).", "",
             "| clusters (cases) | p | intra-cluster correlation | shipped: cluster means | shipped: case-weighted "
             "| before: Clopper–Pearson over cases | cluster means, `min` at the case-weighted rate |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for index, (clusters, p, rho, p_large) in enumerate(CLUSTER_POINTS):
        if indices is not None and index not in indices:
            continue
        row = cluster_cell(index, clusters, p, rho, p_large, replicates)
        f = row["false_pass"]
        mean = f"{p}" if p_large is None else f"{p}, {p_large} for 5–6 cases (case-weighted {row['targets']['cases']:.3f})"
        other = f"{f['cluster-means at the case rate']:.4f}" if p_large is not None else "(same target)"
        lines.append(f"| {clusters} ({row['cases']}) | {mean} | {rho} | {f['cluster-means']:.4f} | {f['cases']:.4f} "
                     f"| {f['before']:.4f} | {other} |")
    return lines


def trial_table(replicates: int, indices=None) -> list[str]:
    lines = [f"Compare floor on trials runs, false PASS at the threshold, seed {SEED}, {replicates} replicates "
             f"a row (3 s.e. at 0.025: {tolerance(replicates):.4f}).", "",
             "| cases × trials | p | Beta concentration | shipped: betting over case means | before: Clopper–Pearson on "
             "rounded sums |",
             "|---|---:|---:|---:|---:|"]
    for index, (cases, trials, p, concentration) in enumerate(TRIAL_POINTS):
        if indices is not None and index not in indices:
            continue
        f = trial_cell(index, cases, trials, p, concentration, replicates)["false_pass"]
        lines.append(f"| {cases} × {trials} | {p} | {concentration} | {f['shipped']:.4f} | {f['before']:.4f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000)
    args = parser.parse_args()
    print("\n".join(cluster_table(args.replicates) + [""] + trial_table(args.replicates)))


if __name__ == "__main__":
    main()
