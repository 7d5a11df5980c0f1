"""Print the confidence-sequence and planning-power tables of docs/statistics.md as markdown.

Run from the repository root: ``python scripts/simulate_sequences.py`` (the tables in the docs) or
``--replicates 200 --quick`` for a quick look. Every row draws from its own seeded
``np.random.default_rng([SEED, table, row])``, so the output is reproducible.
tests/core/test_simulate_sequences.py runs a fast subset by default and, under the slow mark, the full
tables, checking that they appear verbatim in the docs and that every valid method keeps its level.

1. Pass/fail sequences at n = 50, 200 and 1,000 cases: mean width of the interval after all n cases
   (true rate p), how often a ``min`` rule is decided by the n-th case (true rate p; the sequences
   look after every batch of 10, the fixed-n intervals once), and false PASS with the true rate at
   ``min`` (a PASS at any look counted). Wald is p̂ ± 1.96·√(p̂(1 - p̂)/n), invalid for small n and
   under repeated looks.
2. Group-sequential runs that go to the end: how often the rule is decided by the end of a run of N
   cases against a fixed-n Clopper-Pearson run of the same N (one look at N).
3. adaptive-betting under repeated looks: false PASS and false FAIL with the true mean at the
   threshold, for the bets as built before (sized with the number of values seen at each look) and
   the predictable bets shipped now (sized with the suite's size, fixed in advance).
4. Power-based planning: for each truth, the total that decides a non-inferiority rule 80% of the
   time (exact computation, statistics/power.py), and the share of simulated compares of that many
   pairs that decide it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oloproof_core.statistics import adaptive, sequences
from oloproof_core.statistics.intervals import BETS, betting_interval, clopper_pearson
from oloproof_core.statistics.power import decision_probability, power_total

SEED = 20261203
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
THRESHOLD = math.log(2 / ALPHA)
BATCH = 10
# (n, min, true p): the truth sits about 2.5 standard errors above min at each n
SEQUENCE_POINTS = [(50, 0.8, 0.94), (200, 0.8, 0.87), (1000, 0.8, 0.83)]
# (N, batch, min, true p)
END_POINTS = [(200, 10, 0.8, 0.87), (500, 10, 0.8, 0.85), (500, 50, 0.8, 0.85), (1000, 10, 0.8, 0.83),
              (1000, 1, 0.8, 0.83), (300, 10, 0.5, 0.59)]
# (label, N, batch, threshold, draw)
ADAPTIVE_POINTS = [("pass/fail, p = 0.5", 500, 10, 0.5, ("bernoulli", 0.5)),
                   ("pass/fail, p = 0.8", 1000, 25, 0.8, ("bernoulli", 0.8)),
                   ("scores ~ Beta(0.5, 0.5)", 300, 5, 0.5, ("beta", 0.5, 0.5)),
                   ("scores ~ Beta(5, 1)", 200, 1, 5 / 6, ("beta", 5.0, 1.0))]
# (P(pass→fail), P(fail→pass), margin)
POWER_POINTS = [(0.02, 0.08, 0.05), (0.05, 0.05, 0.05), (0.05, 0.1, 0.0), (0.1, 0.1, 0.05), (0.1, 0.2, 0.02),
                (0.03, 0.03, 0.02), (0.15, 0.05, 0.15), (0.2, 0.05, 0.05)]
SEQUENCE_METHODS = ["betting (today's default)", "beta-binomial", "group-sequential", "adaptive-betting",
                    "Clopper-Pearson, one look", "Wald, one look (invalid)", "Wald, every look (invalid)"]


# --- decision thresholds on the count of passes at each look -----------------------------------

def betting_capital(successes: np.ndarray, trials: np.ndarray, m: float, upward: bool) -> np.ndarray:
    """log K±(m) of the documented grid of 19 bets from pass/fail counts (intervals.py, Waudby-Smith &
    Ramdas 2024): a min rule PASSes exactly when K⁺(min) ≥ 2/α, FAILs when K⁻(min) ≥ 2/α."""
    s, f = np.asarray(successes, float)[..., None], (np.asarray(trials) - np.asarray(successes))[..., None]
    if upward:
        logs = s * np.log1p(BETS * (1 - m) / m) + f * np.log1p(-BETS)
    else:
        logs = s * np.log1p(-BETS) + f * np.log1p(BETS * m / (1 - m))
    top = logs.max(axis=-1)
    return top + np.log(np.exp(logs - top[..., None]).mean(axis=-1))


def count_rules(method: str, looks: np.ndarray, total: int, batch: int, m: float) -> tuple[np.ndarray, np.ndarray]:
    """For each look size t: the fewest passes that PASS a ``min: m`` rule (t + 1: none) and the most
    passes that FAIL it (-1: none), for a method whose interval depends on the counts only."""
    passing, failing = [], []
    for index, t in enumerate(looks):
        s = np.arange(t + 1)
        if method.startswith("betting"):
            up = betting_capital(s, t, m, True) >= THRESHOLD
            down = betting_capital(s, t, m, False) >= THRESHOLD
        elif method == "beta-binomial":
            r = sequences.mixture_concentration(total, ALPHA)
            up = sequences.log_mixture(s, t, m, r, True) >= THRESHOLD
            down = sequences.log_mixture(s, t, m, r, False) >= THRESHOLD
        elif method == "group-sequential":
            plan = sequences.looks_of(total, batch)
            up = s >= sequences.crossing_bounds(m, plan, total, ALPHA)[index]
            down = t - s >= sequences.crossing_bounds(1 - m, plan, total, ALPHA)[index]
        elif method.startswith("Clopper"):
            bounds = [clopper_pearson(int(k), int(t), CONFIDENCE) for k in s]
            up = np.array([b[0] >= m for b in bounds])
            down = np.array([b[1] < m for b in bounds])
        else:  # Wald
            p = s / t
            half = 1.959963984540054 * np.sqrt(p * (1 - p) / t)
            up, down = p - half >= m, p + half < m
        passing.append(int(np.flatnonzero(up)[0]) if up.any() else t + 1)
        failing.append(int(np.flatnonzero(down)[-1]) if down.any() else -1)
    return np.array(passing), np.array(failing)


def decided(counts: np.ndarray, passing: np.ndarray, failing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(PASS at some look, FAIL at some look before any PASS) of each replicate: the first decision stops it."""
    passes, fails = counts >= passing, counts <= failing
    first_pass = np.where(passes.any(axis=1), passes.argmax(axis=1), passes.shape[1])
    first_fail = np.where(fails.any(axis=1), fails.argmax(axis=1), fails.shape[1])
    return first_pass < first_fail, first_fail < first_pass


def exact_rates(passing: np.ndarray, failing: np.ndarray, looks: np.ndarray, p: float) -> tuple[float, float]:
    """(P(PASS first), P(FAIL first)) exactly: the binomial convolved over the looks, the mass at or
    beyond each look's thresholds absorbed."""
    dist, before, passed, failed = np.ones(1), 0, 0.0, 0.0
    for t, up, down in zip(looks, passing, failing):
        dist = np.convolve(dist, sequences._binomial_pmf(int(t) - before, p))
        before = int(t)
        passed += float(dist[up:].sum())
        failed += float(dist[: down + 1].sum()) if down >= 0 else 0.0
        dist[up:] = 0.0
        if down >= 0:
            dist[: down + 1] = 0.0
    return passed, failed


def width(method: str, successes: int, n: int) -> float:
    if method.startswith("betting"):
        low, high = betting_interval([1.0] * successes + [0.0] * (n - successes), CONFIDENCE)
    elif method == "beta-binomial":
        low, high = sequences.mixture_interval(successes, n, CONFIDENCE, horizon=n)
    elif method == "group-sequential":
        low, high = sequences.group_sequential_interval(successes, n, n, BATCH, CONFIDENCE)
    elif method.startswith("Clopper"):
        low, high = clopper_pearson(successes, n, CONFIDENCE)
    else:
        p = successes / n
        half = 1.959963984540054 * math.sqrt(p * (1 - p) / n)
        low, high = p - half, p + half
    return high - low


def adaptive_decisions(y: np.ndarray, looks: np.ndarray, m: float, total: int, old: bool = False):
    """(PASS at some look, FAIL at some look) of the adaptive-betting sequence on each row of ``y``.

    Shipped (``old`` False): the capital at each look from the values so far, bets sized with the
    suite's size. As built before: bets sized with the number of values at each look."""
    first_pass = np.full(y.shape[0], len(looks))
    first_fail = np.full(y.shape[0], len(looks))
    for index, t in enumerate(looks):
        prefix = y[:, :t]
        horizon = int(t) if old else total
        up = adaptive.log_capital(prefix, m, ALPHA, True, horizon) >= THRESHOLD
        down = adaptive.log_capital(prefix, m, ALPHA, False, horizon) >= THRESHOLD
        first_pass = np.where(up & (first_pass == len(looks)), index, first_pass)
        first_fail = np.where(down & (first_fail == len(looks)), index, first_fail)
    return first_pass < first_fail, first_fail < first_pass


def passes_path(rng: np.random.Generator, replicates: int, n: int, p: float) -> np.ndarray:
    return np.cumsum(rng.random((replicates, n)) < p, axis=1)


# --- tables ------------------------------------------------------------------------------------

def sequence_rows(replicates: int, points=SEQUENCE_POINTS):
    """Table 1: one row a (n, method)."""
    for row, (n, m, p) in enumerate(points):
        looks = np.arange(BATCH, n + 1, BATCH)
        rng = np.random.default_rng([SEED, 1, row])
        truth = passes_path(rng, replicates, n, p)
        null = passes_path(rng, replicates, n, m)
        y_truth = (np.diff(np.concatenate([np.zeros((replicates, 1)), truth], axis=1), axis=1)).astype(float)
        y_null = (np.diff(np.concatenate([np.zeros((replicates, 1)), null], axis=1), axis=1)).astype(float)
        for method in SEQUENCE_METHODS:
            if method == "adaptive-betting":
                right = adaptive_decisions(y_truth, looks, m, n)
                wrong = adaptive_decisions(y_null, looks, m, n)
                widths = [np.subtract(*adaptive.adaptive_betting_interval(v, CONFIDENCE, horizon=n)[::-1])
                          for v in y_truth[: min(replicates, 400)]]
                exact = math.nan
            else:
                one_look = "one look" in method
                at = np.array([n]) if one_look else looks
                passing, failing = count_rules(method, at, n, BATCH, m)
                right = decided(truth[:, at - 1], passing, failing)
                wrong = decided(null[:, at - 1], passing, failing)
                memo: dict[int, float] = {}
                widths = [memo.setdefault(int(k), width(method, int(k), n)) for k in truth[:, -1]]
                exact = exact_rates(passing, failing, at, m)[0]
            yield (f"| {n:,} | {m} | {p} | {method} | {np.mean(widths):.3f} | "
                   f"{np.mean(right[0] | right[1]):.3f} | {np.mean(wrong[0]):.4f} | "
                   f"{'' if method == 'adaptive-betting' else f'{exact:.4f}'} |")


def end_rows(replicates: int, points=END_POINTS):
    """Table 2: group-sequential runs that go to the end against a fixed-n Clopper-Pearson run."""
    for row, (total, batch, m, p) in enumerate(points):
        looks = np.array(sequences.looks_of(total, batch))
        rng = np.random.default_rng([SEED, 2, row])
        truth = passes_path(rng, replicates, total, p)
        passing, failing = count_rules("group-sequential", looks, total, batch, m)
        gs = decided(truth[:, looks - 1], passing, failing)
        gs_exact = sum(exact_rates(passing, failing, looks, p))
        false_pass = exact_rates(passing, failing, looks, m)[0]
        at_end = np.array([total])
        fixed_exact = sum(exact_rates(*count_rules("Clopper-Pearson, one look", at_end, total, 1, m), at_end, p))
        bet_exact = sum(exact_rates(*count_rules("betting", looks, total, batch, m), looks, p))
        first = (truth[:, looks - 1] >= passing) | (truth[:, looks - 1] <= failing)
        stopped = np.where(first.any(axis=1), looks[first.argmax(axis=1)], total)
        yield (f"| {total:,} | {batch} ({len(looks)}) | {m} | {p} | {np.mean(gs[0] | gs[1]):.3f} | {gs_exact:.3f} | "
               f"{fixed_exact:.3f} | {gs_exact / fixed_exact:.2f} | {bet_exact:.3f} | {np.mean(stopped):.0f} | "
               f"{false_pass:.4f} |")


def draw(rng: np.random.Generator, spec: tuple, shape: tuple) -> np.ndarray:
    if spec[0] == "bernoulli":
        return (rng.random(shape) < spec[1]).astype(float)
    return rng.beta(spec[1], spec[2], shape)


def adaptive_rows(replicates: int, points=ADAPTIVE_POINTS):
    """Table 3: adaptive-betting with the true mean at the threshold, a look after every batch."""
    for row, (label, total, batch, m, spec) in enumerate(points):
        rng = np.random.default_rng([SEED, 3, row])
        y = draw(rng, spec, (replicates, total))
        looks = np.arange(batch, total + 1, batch)
        old = adaptive_decisions(y, looks, m, total, old=True)
        new = adaptive_decisions(y, looks, m, total)
        yield (f"| {label} | {total:,} | {batch} ({len(looks)}) | {m:.3f} | {np.mean(old[0]):.4f} | "
               f"{np.mean(old[1]):.4f} | {np.mean(new[0]):.4f} | {np.mean(new[1]):.4f} |")


def power_rows(replicates: int, points=POWER_POINTS):
    """Table 4: the power-based total for each truth, and the share of simulated compares it decides."""
    from oloproof_core.statistics.power import _regions

    for row, (worse, better, margin) in enumerate(points):
        q, difference = worse + better, better - worse
        total = power_total(q, difference, margin, CONFIDENCE, 0.8)
        rng = np.random.default_rng([SEED, 4, row])
        counts = rng.multinomial(total, [worse, better, 1 - q], size=replicates)
        b, c = counts[:, 0], counts[:, 1]
        discordant = np.arange(total + 1)
        passing, failing = _regions(total, discordant, margin, ALPHA)
        hit = (c >= passing[b + c]) | (c <= failing[b + c])
        exact = decision_probability(total, q, better / q, margin, CONFIDENCE)
        yield (f"| {worse} | {better} | {difference:+.2f} | {100 * margin:.0f} | {total:,} | {exact:.3f} | "
               f"{hit.mean():.3f} |")


def tables(replicates: int, quick: bool = False) -> list[str]:
    out = [f"Pass/fail sequences, nominal level 95% (each side 2.5%), seed {SEED}, {replicates} replicates a row "
           f"(widths of adaptive-betting over the first {min(replicates, 400)}); sequences look after every "
           f"batch of {BATCH}.", "",
           "| n | min | true p | method | mean width at n | decided by n (true p) | false PASS (p = min) | "
           "false PASS, exact |",
           "|---:|---:|---:|---|---:|---:|---:|---:|",
           *sequence_rows(replicates, SEQUENCE_POINTS[:2] if quick else SEQUENCE_POINTS), "",
           f"Group-sequential runs that go to the end, seed {SEED}, {replicates} replicates a row.", "",
           "| N | batch (looks) | min | true p | decided by the end: group-sequential | exact | Clopper-Pearson "
           "at N, one look: exact | ratio | betting sequence: exact | mean cases run | false PASS, exact (p = min) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
           *end_rows(replicates, END_POINTS[:3] if quick else END_POINTS), "",
           f"adaptive-betting under repeated looks, true mean at the threshold, seed {SEED}, {replicates} "
           "replicates a row.", "",
           "| data | N | batch (looks) | threshold | false PASS: bets as built before | false FAIL: before | "
           "false PASS: predictable bets | false FAIL: predictable bets |",
           "|---|---:|---:|---:|---:|---:|---:|---:|",
           *adaptive_rows(replicates, ADAPTIVE_POINTS[:2] if quick else ADAPTIVE_POINTS), "",
           f"Power-based planning of a non-inferiority rule (PASS or FAIL counts as decided), seed {SEED}, "
           f"{replicates} replicates a row.", "",
           "| P(pass→fail) | P(fail→pass) | difference | margin (points) | total for 80% | decided: exact | "
           "decided: simulated |",
           "|---:|---:|---:|---:|---:|---:|---:|",
           *power_rows(replicates, POWER_POINTS[:3] if quick else POWER_POINTS)]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="the first rows of each table only")
    args = parser.parse_args(argv)
    print("\n".join(tables(args.replicates, args.quick)))


if __name__ == "__main__":
    main()
