"""The ``proportion`` metric: pass/fail judgments, with the exact Clopper–Pearson interval.

The estimate is shown rounded to nearest, the bounds rounded outward to 0.1% (lower floored,
upper ceiled), so the printed interval always contains the computed one.
"""

from __future__ import annotations

from collections.abc import Sequence

from oloproof import Judgment, Summary, display, hookimpl, stats, tally


class Proportion:
    name = "proportion"
    pass_fail = True  # its judgments pass or fail, so an observed_count rule may count the failures

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]:
        return stats.clopper_pearson(int(round(sum(values))), len(values), confidence)

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary:
        values, missing, excluded = tally(judgments)
        k, n = int(round(sum(values))), len(values)
        low, high = self.interval(values, confidence) if n else (None, None)
        return Summary(metric=self.name, value=k / n if n else None, low=low, high=high, observed=n,
                       missing=missing, excluded=excluded, successes=k,
                       cells=display.proportion_cells(k, n, low, high, missing, excluded))


@hookimpl
def oloproof_register_metrics(registry):
    registry.add("proportion", Proportion)
