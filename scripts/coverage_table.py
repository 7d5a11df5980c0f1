"""Print the simulated coverage tables of docs/statistics.md as markdown.

Run from the repository root: ``python scripts/coverage_table.py``. Every row uses its own seeded
``np.random.default_rng``, so the output is reproducible. ``--table methods`` prints only the table of
every method, ``--table paired-vs-wald`` only the paired betting interval beside the Wald interval.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from oloproof_core.statistics.intervals import betting_interval, clopper_pearson, paired_difference

CONFIDENCE = 0.95


def cached(interval: Callable[..., tuple[float, float]]) -> Callable[..., tuple[float, float]]:
    """Memoise an interval of discrete data, whose value depends only on the counts."""
    memory: dict[tuple, tuple[float, float]] = {}

    def lookup(*key):
        if key not in memory:
            memory[key] = interval(*key)
        return memory[key]

    return lookup


def summarise(bounds: np.ndarray, truth: float) -> tuple[float, float]:
    """Return (coverage, mean width) of intervals given as rows (lower, upper)."""
    covered = (bounds[:, 0] <= truth) & (truth <= bounds[:, 1])
    return float(covered.mean()), float(np.mean(bounds[:, 1] - bounds[:, 0]))


def proportion_rows(method: str, points, replicates: int, seed: int):
    """Yield table rows for pass/fail data under Clopper-Pearson or the betting interval."""
    from scipy.stats import binom

    for index, (n, p) in enumerate(points):
        rng = np.random.default_rng([seed, 1 if method == "clopper" else 2, index])
        if method == "clopper":
            interval = cached(lambda k, n=n: clopper_pearson(k, n, CONFIDENCE))
        else:
            interval = cached(
                lambda k, n=n: betting_interval([1.0] * k + [0.0] * (n - k), CONFIDENCE)
            )
        successes = rng.binomial(n, p, replicates)
        coverage, width = summarise(np.array([interval(int(k)) for k in successes]), p)
        every_k = np.arange(n + 1)
        covers = np.array([interval(int(k))[0] <= p <= interval(int(k))[1] for k in every_k])
        exact = float(binom.pmf(every_k, n, p)[covers].sum())
        label = "Clopper-Pearson" if method == "clopper" else "betting"
        yield label, "pass/fail", n, f"p = {p}", replicates, coverage, exact, width


def score_rows(points, replicates: int, seed: int):
    """Yield table rows for the betting interval on Beta-distributed scores."""
    for index, (n, a, b) in enumerate(points):
        rng = np.random.default_rng([seed, 3, index])
        bounds = np.array(
            [betting_interval(rng.beta(a, b, n), CONFIDENCE) for _ in range(replicates)]
        )
        coverage, width = summarise(bounds, a / (a + b))
        truth = f"mean = {a / (a + b):.3f}"
        yield "betting", f"scores ~ Beta({a}, {b})", n, truth, replicates, coverage, None, width


def paired_rows(points, replicates: int, seed: int):
    """Yield table rows for paired pass/fail differences (b, c discordant probabilities)."""
    from scipy.special import gammaln

    for index, (n, worse, better) in enumerate(points):
        rng = np.random.default_rng([seed, 4, index])

        @cached
        def interval(b: int, c: int, n: int = n) -> tuple[float, float]:
            candidate = [0.0] * b + [1.0] * c + [0.0] * (n - b - c)
            baseline = [1.0] * b + [0.0] * c + [0.0] * (n - b - c)
            return paired_difference(candidate, baseline, CONFIDENCE)[1:]

        truth = better - worse
        draws = rng.multinomial(n, [worse, better, 1 - worse - better], replicates)
        bounds = np.array([interval(int(b), int(c)) for b, c, _ in draws])
        coverage, width = summarise(bounds, truth)
        exact = 0.0  # trinomial probability of every (b, c) whose interval covers the truth
        for b in range(n + 1):
            for c in range(n - b + 1):
                lower, upper = interval(b, c)
                if lower <= truth <= upper:
                    log_pmf = (
                        gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(n - b - c + 1)
                        + b * math.log(worse) + c * math.log(better)
                        + (n - b - c) * math.log(1 - worse - better)
                    )
                    exact += math.exp(log_pmf)
        data = f"pass/fail pairs, P(b) = {worse}, P(c) = {better}"
        yield "paired betting", data, n, f"diff = {truth:+.2f}", replicates, coverage, exact, width


def paired_score_rows(points, replicates: int, seed: int):
    """Yield table rows for paired scores, baseline ~ Beta(2, 2) and candidate partly tied to it.

    candidate = w·baseline + (1 - w)·Beta(3, 2), so the true mean difference is (1 - w)(0.6 - 0.5).
    """
    for index, (n, weight) in enumerate(points):
        rng = np.random.default_rng([seed, 5, index])
        truth = (1 - weight) * (0.6 - 0.5)
        bounds = []
        for _ in range(replicates):
            baseline = rng.beta(2, 2, n)
            candidate = weight * baseline + (1 - weight) * rng.beta(3, 2, n)
            bounds.append(paired_difference(candidate, baseline, CONFIDENCE)[1:])
        coverage, width = summarise(np.array(bounds), truth)
        data = f"paired scores, w = {weight}"
        yield "paired betting", data, n, f"diff = {truth:+.2f}", replicates, coverage, None, width


def wald_paired(b: int, c: int, n: int) -> tuple[float, float]:
    """The classical Wald interval for a difference of paired proportions, unclipped.

    d = (c - b)/n with standard error sqrt(((b + c)/n - d²)/n); shown for contrast only.
    """
    d = (c - b) / n
    half = 1.959963984540054 * math.sqrt(max((b + c) / n - d * d, 0.0) / n)
    return d - half, d + half


def trinomial_coverage(interval, n: int, worse: float, better: float) -> float:
    """Exact coverage: the probability of every (b, c) whose interval covers the true difference."""
    from scipy.special import gammaln

    truth, total = better - worse, 0.0
    for b in range(n + 1):
        for c in range(n - b + 1):
            lower, upper = interval(b, c)
            if lower <= truth <= upper:
                total += math.exp(
                    gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(n - b - c + 1)
                    + b * math.log(worse) + c * math.log(better)
                    + (n - b - c) * math.log(1 - worse - better)
                )
    return total


def paired_contrast_rows(points, replicates: int, seed: int):
    """Yield, per (n, P(b), P(c)), the paired betting interval and the Wald interval on the same draws."""
    for index, (n, worse, better) in enumerate(points):
        rng = np.random.default_rng([seed, 6, index])
        draws = rng.multinomial(n, [worse, better, 1 - worse - better], replicates)
        truth = better - worse

        @cached
        def betting(b: int, c: int, n: int = n) -> tuple[float, float]:
            candidate = [0.0] * b + [1.0] * c + [0.0] * (n - b - c)
            baseline = [1.0] * b + [0.0] * c + [0.0] * (n - b - c)
            return paired_difference(candidate, baseline, CONFIDENCE)[1:]

        wald = cached(lambda b, c, n=n: wald_paired(b, c, n))
        cells = []
        for interval in (betting, wald):
            bounds = np.array([interval(int(b), int(c)) for b, c, _ in draws])
            coverage, width = summarise(bounds, truth)
            cells.append((coverage, trinomial_coverage(interval, n, worse, better), width))
        yield n, worse, better, truth, replicates, cells


CLOPPER_POINTS = [(13, 0.7), (13, 0.95), (50, 0.5), (50, 0.9), (200, 0.98)]
BETTING_POINTS = [(13, 0.7), (50, 0.9), (200, 0.5)]
PAIRED_POINTS = [(15, 0.05, 0.10), (50, 0.10, 0.10), (200, 0.02, 0.08)]


def print_methods_table(seed: int, discrete: int, scores: int) -> None:
    clopper_points = CLOPPER_POINTS
    score_points = [(13, 2, 5), (50, 2, 5), (200, 2, 5), (13, 5, 1), (50, 5, 1)]
    paired_points = PAIRED_POINTS
    rows = [
        *proportion_rows("clopper", clopper_points, discrete, seed),
        *proportion_rows("betting", BETTING_POINTS, discrete, seed),
        *score_rows(score_points, scores, seed),
        *paired_rows(paired_points, discrete, seed),
        *paired_score_rows([(13, 0.7), (50, 0.7), (200, 0.7), (50, 0.0)], scores, seed),
    ]
    print(f"Nominal level {CONFIDENCE:.0%}, seed {seed}.\n")
    print(
        "| method | data | n | true value | replicates | simulated coverage "
        "| 3 s.e. at nominal | exact coverage | mean width |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(format_row(row))


def format_row(row: tuple) -> str:
    """One markdown row of the methods table, as docs/statistics.md shows it."""
    method, data, n, truth, replicates, coverage, exact, width = row
    tolerance = 3 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / replicates)
    exact_text = "" if exact is None else f"{exact:.4f}"
    return (f"| {method} | {data} | {n} | {truth} | {replicates} | {coverage:.4f} "
            f"| {tolerance:.4f} | {exact_text} | {width:.3f} |")


def print_paired_wald_table(seed: int, discrete: int) -> None:
    points = [(10, 0.05, 0.15), (15, 0.05, 0.10), (30, 0.10, 0.20), (50, 0.10, 0.10),
              (100, 0.02, 0.08), (100, 0.30, 0.10), (200, 0.02, 0.08)]
    print(f"Paired pass/fail differences, nominal level {CONFIDENCE:.0%}, seed {seed}; both methods "
          "on the same draws.\n")
    print(
        "| n | P(b) | P(c) | true difference | replicates "
        "| betting: simulated | betting: exact | betting: mean width "
        "| Wald: simulated | Wald: exact | Wald: mean width |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, worse, better, truth, replicates, cells in paired_contrast_rows(points, discrete, seed):
        text = " | ".join(f"{coverage:.4f} | {exact:.4f} | {width:.3f}" for coverage, exact, width in cells)
        print(f"| {n} | {worse} | {better} | {truth:+.2f} | {replicates} | {text} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=4000, help="replicates per discrete row")
    parser.add_argument(
        "--score-replicates", type=int, default=4000, help="replicates per score row"
    )
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument(
        "--table", choices=("all", "methods", "paired-vs-wald"), default="all", help="which table to print"
    )
    options = parser.parse_args()
    started = time.perf_counter()
    if options.table in ("all", "methods"):
        print_methods_table(options.seed, options.replicates, options.score_replicates)
    if options.table == "all":
        print()
    if options.table in ("all", "paired-vs-wald"):
        print_paired_wald_table(options.seed, options.replicates)
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
