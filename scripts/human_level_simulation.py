"""Seeded simulation of the human-level interval and of admission by bias (docs/statistics.md).

Run from the repository root: ``python scripts/human_level_simulation.py`` (every table, a few
minutes on one core) or ``--table coverage`` / ``--table admission``; ``--trials`` and
``--admission-trials`` set the replicates per cell. Every cell draws from its own ``np.random.default_rng([seed, cell index])``,
so the output is reproducible and a subset of cells prints the same rows as the full grid.

A judge of accuracy ``acc`` and bias ``bias`` (its pass rate minus the human pass rate ``prev``)
has P(judge pass, human pass) = (acc + bias + 2·prev − 1)/2 and P(judge fail, human fail) =
(acc − bias − 2·prev + 1)/2; combinations no judge can have (|bias| > 1 − acc) are skipped. A run
of N cases is drawn from it; the labels are drawn as ``oloproof label plan`` draws them, at random
within each judge-verdict stratum, in proportion to the strata. The gate's rule is set at the human
rate itself (``min: prev``), the boundary where a PASS is false most often.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oloproof_core.statistics.admission import admit_by_bias
from oloproof_core.statistics.human_level import Labelled, human_interval

CONFIDENCE = 0.95
SEED = 20261203
ACCURACIES = (0.7, 0.8, 0.9, 0.95)
BIASES = (0.0, 0.05, 0.10)
PREVALENCES = (0.2, 0.5, 0.8)
LABELS = (20, 50, 100, 200)
CASES = (100, 1000, 5000)


def cells_of(acc: float, bias: float, prev: float) -> list[float] | None:
    """P(jp hp), P(jp hf), P(jf hp), P(jf hf) of a judge, or None when no judge has them."""
    pp = (acc + bias + 2 * prev - 1) / 2
    ff = (acc - bias - 2 * prev + 1) / 2
    cells = [pp, prev + bias - pp, prev - pp, ff]
    return None if min(cells) < -1e-12 else [max(0.0, c) for c in cells]


def allocate(total: int, passes: int, judged: int) -> tuple[int, int]:
    """Labels per stratum in proportion to the strata, never more than a stratum holds."""
    total = min(total, judged)
    n1 = min(passes, int(round(total * passes / judged)) if judged else 0)
    n0 = min(judged - passes, total - n1)
    return min(passes, total - n0), n0


def coverage_cell(acc: float, bias: float, prev: float, labels: int, cases: int, trials: int,
                  rng: np.random.Generator) -> dict | None:
    """Coverage, false PASS and width of the human-level interval; false PASS of the judge's rate."""
    probs = cells_of(acc, bias, prev)
    if probs is None:
        return None
    from scipy.special import betaincinv  # the judge's own Clopper-Pearson lower bound, for every run at once

    counts = rng.multinomial(cases, probs, size=trials)
    passes_all = counts[:, 0] + counts[:, 1]
    judge_low = np.where(passes_all > 0, betaincinv(np.maximum(passes_all, 1), cases - passes_all + 1,
                                                    (1 - CONFIDENCE) / 2), 0.0)
    judge_false_pass = int(np.sum(judge_low >= prev))
    covered = false_pass = 0
    widths = []
    for pp, pf, fp, ff in counts:
        passes = int(pp + pf)
        n1, n0 = allocate(labels, passes, cases)
        lpp = int(rng.hypergeometric(pp, pf, n1)) if n1 else 0
        lfp = int(rng.hypergeometric(fp, ff, n0)) if n0 else 0
        low, high = human_interval(passes, cases, Labelled(pp=lpp, pf=n1 - lpp, fp=lfp, ff=n0 - lfp), CONFIDENCE)
        covered += low <= prev <= high
        false_pass += low >= prev
        widths.append(high - low)
    return {"coverage": covered / trials, "false_pass": false_pass / trials,
            "judge_false_pass": judge_false_pass / trials, "width": float(np.mean(widths))}


def coverage_rows(trials: int, seed: int = SEED, grid=None):
    """One row per (labels, cases): the worst coverage and false PASS over accuracy, bias, prevalence."""
    grid = grid or [(n, big) for n in LABELS for big in CASES if n <= big]
    index = 0
    for labels, cases in grid:
        worst_cov, worst_fp, worst_judge, widths, cells = 1.0, 0.0, 0.0, [], 0
        for acc in ACCURACIES:
            for bias in BIASES:
                for prev in PREVALENCES:
                    index += 1
                    rng = np.random.default_rng([seed, labels, cases, index])
                    out = coverage_cell(acc, bias, prev, labels, cases, trials, rng)
                    if out is None:
                        continue
                    cells += 1
                    worst_cov = min(worst_cov, out["coverage"])
                    worst_fp = max(worst_fp, out["false_pass"])
                    worst_judge = max(worst_judge, out["judge_false_pass"])
                    widths.append(out["width"])
        yield (labels, cases, cells, worst_cov, worst_fp, worst_judge, float(np.mean(widths)))
        index = 0


def format_coverage(row) -> str:
    labels, cases, cells, cov, fp, judge, width = row
    return (f"| {labels} | {cases:,} | {cells} | {cov:.3f} | {fp:.4f} | {judge:.3f} | "
            f"{100 * width:.1f} points |")


NEEDED_LABELS = (50, 75, 100, 150, 200, 300, 400, 600, 800)
MARGINS = (0.05, 0.10, 0.15)
MAX_FALSE_PASS = 0.5


def _kappa_admits(counts: tuple[int, int, int, int], min_kappa: float = 0.6) -> bool:
    from oloproof_core.statistics.agreement import Table, kappa_bounds

    bounds = kappa_bounds(Table(pp=counts[0], pf=counts[1], fp=counts[2], ff=counts[3]), CONFIDENCE)
    return bounds is not None and bounds[0] >= min_kappa


def admission_power(acc: float, prev: float, labels: int, trials: int, rng: np.random.Generator,
                    margin: float, memo: dict) -> tuple[float, float]:
    """P(admitted) of an unbiased judge of accuracy ``acc`` by bias and by kappa (lower bound ≥ 0.6)."""
    counts = rng.multinomial(labels, cells_of(acc, 0.0, prev), size=trials)
    by_bias = by_kappa = 0
    for c in map(tuple, counts.tolist()):
        if ("b", margin, c) not in memo:
            memo[("b", margin, c)] = admit_by_bias(*c, CONFIDENCE, margin, MAX_FALSE_PASS)["met"]
        if ("k", c) not in memo:
            memo[("k", c)] = _kappa_admits(c)
        by_bias += memo[("b", margin, c)]
        by_kappa += memo[("k", c)]
    return by_bias / trials, by_kappa / trials


def needed_rows(trials: int, seed: int = SEED, accuracies=(0.85, 0.9, 0.95), prevalences=PREVALENCES,
                margins=MARGINS, power: float = 0.8):
    """The fewest labels (of NEEDED_LABELS) admitting an unbiased judge with probability ≥ ``power``,
    by bias at each margin and by kappa; None: more than the largest."""
    memo: dict = {}
    for i, acc in enumerate(accuracies):
        for j, prev in enumerate(prevalences):
            need_bias = {m: None for m in margins}
            need_kappa = None
            for k, n in enumerate(NEEDED_LABELS):
                for m_index, margin in enumerate(margins):
                    rng = np.random.default_rng([seed, 7, i, j, k, m_index])
                    by_bias, by_kappa = admission_power(acc, prev, n, trials, rng, margin, memo)
                    if need_bias[margin] is None and by_bias >= power:
                        need_bias[margin] = n
                    if m_index == 0 and need_kappa is None and by_kappa >= power:
                        need_kappa = n
                if need_kappa is not None and all(v is not None for v in need_bias.values()):
                    break
            yield acc, prev, [need_bias[m] for m in margins], need_kappa


def false_admission(trials: int, seed: int = SEED, margin: float = 0.10) -> float:
    """The largest P(admitted) of judges biased by exactly ``margin`` (the worst case): at most α/2."""
    worst = 0.0
    for j, prev in enumerate(PREVALENCES):
        for k, n in enumerate(NEEDED_LABELS[:6]):
            probs = cells_of(1 - margin, margin, prev)
            if probs is None:
                continue
            rng = np.random.default_rng([seed, 8, j, k])
            counts = rng.multinomial(n, probs, size=trials)
            rate = sum(admit_by_bias(*map(int, c), CONFIDENCE, margin, MAX_FALSE_PASS)["met"] for c in counts)
            worst = max(worst, rate / trials)
    return worst


def format_needed(row) -> str:
    acc, prev, bias, kappa = row
    shown = lambda n: f"> {NEEDED_LABELS[-1]}" if n is None else str(n)  # noqa: E731
    return f"| {acc:.2f} | {prev:.1f} | " + " | ".join(shown(n) for n in bias) + f" | {shown(kappa)} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=("coverage", "admission", "all"), default="all")
    parser.add_argument("--trials", type=int, default=4000, help="runs a cell of the coverage table")
    parser.add_argument("--admission-trials", type=int, default=400, help="validations a cell of the admission table")
    args = parser.parse_args()
    started = time.time()
    if args.table in ("coverage", "all"):
        print(f"Human-level interval, {args.trials} runs a cell, seed {SEED}: worst over accuracy "
              f"{ACCURACIES}, bias {BIASES}, prevalence {PREVALENCES}")
        print()
        print("| labels | cases | cells | worst coverage | worst false PASS | judge's rate: worst false PASS | "
              "mean width |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for row in coverage_rows(args.trials):
            print(format_coverage(row), flush=True)
        print()
    if args.table in ("admission", "all"):
        print(f"Labels needed for P(admitted) ≥ 0.8, an unbiased judge, labels a random sample, {args.admission_trials} "
              f"validations a cell, seed {SEED}; by bias with false-pass rate ≤ {MAX_FALSE_PASS:.0%}, and by "
              "the kappa requirement (lower bound ≥ 0.6)")
        print()
        print("| accuracy | prevalence | " + " | ".join(f"bias ≤ {100 * m:.0f} points" for m in MARGINS)
              + " | kappa ≥ 0.6 |")
        print("| --- | --- | " + " | ".join("---" for _ in MARGINS) + " | --- |")
        for row in needed_rows(args.admission_trials):
            print(format_needed(row), flush=True)
        print()
        print(f"Worst P(admitted) of a judge biased by exactly 10 points: {false_admission(args.admission_trials):.4f}")
    print(f"({time.time() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
