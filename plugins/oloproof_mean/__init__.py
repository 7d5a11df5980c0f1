"""The ``mean`` metric: scores in [0, 1], with the betting confidence interval.

Waudby-Smith & Ramdas (2024); the mean is shown to 3 decimals, the bounds rounded outward.
"""

from __future__ import annotations

from collections.abc import Sequence

from oloproof import Judgment, Summary, display, hookimpl, stats, tally


class Mean:
    name = "mean"

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]:
        return stats.betting_interval(values, confidence, 0.0, 1.0)

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary:
        values, missing, excluded = tally(judgments)
        n = len(values)
        mean = sum(values) / n if n else None
        low, high = self.interval(values, confidence) if n else (None, None)
        return Summary(metric=self.name, value=mean, low=low, high=high, observed=n, missing=missing,
                       excluded=excluded, cells=display.mean_cells(mean, n, low, high, missing, excluded))


@hookimpl
def oloproof_register_metrics(registry):
    registry.add("mean", Mean)
