"""The ``fraction`` metric: per-case values in [0, 1] that are often, but not always, 0 or 1.

Reported as a proportion (Clopper–Pearson) when every observed value is 0 or 1 — recall@k with
one relevant unit a case — and as a mean (betting interval) otherwise. The same rule applies in
runs, slices and comparisons.
"""

from __future__ import annotations

from collections.abc import Sequence

from oloproof import Judgment, Summary, display, hookimpl, stats, tally


def binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


class Fraction:
    name = "fraction"

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]:
        if binary(values):
            return stats.clopper_pearson(int(round(sum(values))), len(values), confidence)
        return stats.betting_interval(values, confidence, 0.0, 1.0)

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary:
        values, missing, excluded = tally(judgments)
        n = len(values)
        low, high = self.interval(values, confidence) if n else (None, None)
        if binary(values):
            k = int(round(sum(values)))
            cells = display.proportion_cells(k, n, low, high, missing, excluded)
            return Summary(metric="proportion", value=k / n if n else None, low=low, high=high, observed=n,
                           missing=missing, excluded=excluded, successes=k, cells=cells)
        mean = sum(values) / n
        return Summary(metric="mean", value=mean, low=low, high=high, observed=n, missing=missing,
                       excluded=excluded, cells=display.mean_cells(mean, n, low, high, missing, excluded))


@hookimpl
def oloproof_register_metrics(registry):
    registry.add("fraction", Fraction)
