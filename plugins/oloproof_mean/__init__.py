"""The ``mean`` metric: scores in [0, 1], with the betting confidence interval.

Waudby-Smith & Ramdas (2024); the mean is shown to 3 decimals, the bounds rounded outward.
"""

from __future__ import annotations

from collections.abc import Sequence

from oloproof import Judgment, Summary, hookimpl, stats


class Mean:
    name = "mean"

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]:
        return stats.betting_interval(values, confidence, 0.0, 1.0)

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary:
        values = [j.value for j in judgments if j.observed]
        missing = sum(1 for j in judgments if j.status == "missing")
        excluded = sum(1 for j in judgments if j.status == "excluded")
        tail = f"{missing} missing · {excluded} excluded"
        n = len(values)
        if n == 0:
            return Summary(metric=self.name, value=None, low=None, high=None, observed=0, missing=missing,
                           excluded=excluded, cells=("—", "—", f"mean of 0 observed · {tail}"))
        mean = sum(values) / n
        low, high = self.interval(values, confidence)
        cells = (f"{mean:.3f}", f"[{stats.floor_to(low, 3):.3f}, {stats.ceil_to(high, 3):.3f}]",
                 f"mean of {n} observed · {tail}")
        return Summary(metric=self.name, value=mean, low=low, high=high, observed=n, missing=missing,
                       excluded=excluded, cells=cells)


@hookimpl
def oloproof_register_metrics(registry):
    registry.add("mean", Mean)
